// What the views show of one pass-log Snapshot, computed from the core's printers (never from
// compiler state of their own): its text, its DOT graph, where each graph node came from in the
// spec, the unified diff between two snapshots' texts, and the sentence that explains a pass.
//
// Node origins follow the node ids of the core's DOT printers:
//   spec     "tensor:NAME", "stmt:NAME"                 → the declaring statement
//   scalar   "buffer:NAME", "block:NAME"                → the buffer's / block's provenance
//   vrtile   "op:KERNEL/VALUE", "op:KERNEL/store#I"     → the op's provenance
//   matile   "op:KERNEL/VALUE", "op:KERNEL/KIND#I"      → the op's provenance
// (For loops: their variable, block arguments and results take the loop's provenance.) Every IR
// node keeps the spec statement it implements, so the statement index links one stage's nodes to
// every other stage's, to the spec text and to the CUDA sections the emitter labels with the
// statement's line.
//
// Everything here is pure and thread-safe over immutable snapshots; the views call it on workers.
#pragma once

#include <string>
#include <unordered_map>

#include "core/driver/pipeline.h"
#include "core/support/source.h"

namespace nautilus::views {

// The snapshot as `nautilus lower --stage S` prints it (the CUDA source for stage cuda).
std::string snapshot_text(const driver::Snapshot& snapshot, const SourceFile* file);

// The snapshot's DOT graph; empty for stage cuda (source text has no graph).
std::string snapshot_dot(const driver::Snapshot& snapshot);

// Where a graph node came from: a spec statement (index into spec::Program::statements) and,
// when known, the exact source range of the construct.
struct NodeOrigin {
  int statement = -1;
  SourceRange range;
};
using NodeOrigins = std::unordered_map<std::string, NodeOrigin>;

// The origin of every node of snapshot_dot(snapshot) whose provenance is known. `spec` gives the
// statements of tensors at stage spec (may be null for the other stages).
NodeOrigins node_origins(const driver::Snapshot& snapshot);

// A unified diff ("--- a", "+++ b", "@@ -l,n +l,n @@" hunks with `context` lines around each
// change) of two texts, line by line; empty when they are equal.
std::string unified_diff(const std::string& before, const std::string& after,
                         const std::string& before_name, const std::string& after_name,
                         int context = 3);

// The explanation of a pass for teaching mode and tooltips: a decision's description from
// decision_registry() (the pass name is the printed decision), else the pass's summary.
std::string pass_explanation(const driver::Snapshot& snapshot);

// The 1-based spec line named by a CUDA provenance comment ("// spec attention.nt:10  S[...]"),
// or 0 when `line` is not one.
int cuda_spec_line(const std::string& line);
// The MA value a CUDA op comment names ("// %acc1 = mma.m16n8k16 ..." → "acc1"), or "".
std::string cuda_ma_value(const std::string& line);

}  // namespace nautilus::views
