// What the views add to a pass-log Snapshot beyond core/driver/render.h (which gives its text,
// DOT graph, per-pass diff and explanation): where each graph node came from in the spec, and the
// links from CUDA lines back to spec lines and MA values.
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

// Where a graph node came from: a spec statement (index into spec::Program::statements) and,
// when known, the exact source range of the construct.
struct NodeOrigin {
  int statement = -1;
  SourceRange range;
};
using NodeOrigins = std::unordered_map<std::string, NodeOrigin>;

// The origin of every node of driver::render(snapshot, Dot) whose provenance is known.
NodeOrigins node_origins(const driver::Snapshot& snapshot);

// The 1-based spec line named by a CUDA provenance comment ("// spec attention.nt:10  S[...]"),
// or 0 when `line` is not one.
int cuda_spec_line(const std::string& line);
// The MA value a CUDA op comment names ("// %acc1 = mma.m16n8k16 ..." → "acc1"), or "".
std::string cuda_ma_value(const std::string& line);

}  // namespace nautilus::views
