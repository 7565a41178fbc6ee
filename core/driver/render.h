// How a pass-log Snapshot is shown: its IR as text, DOT or JSON, the diff a pass made, and the
// sentence that explains the pass. `nautilus lower` and every view of the studio print snapshots
// through these functions only, so the terminal, the stage view, the compare panel and the golden
// tests always show the same text for the same IR.
//
//   text   the stage's printer: spec, scalar IR (with spec-line comments when the source file is
//          given), VR tile IR, MA tile IR, or the CUDA source
//   dot    the stage's DOT graph (core printers); empty for stage cuda, which is source text
//   json   the stage's JSON form; for stage cuda {"kernels": [launches], "source": text}
//
// Everything here is pure and thread-safe over immutable snapshots. A snapshot whose IR pointer is
// null renders as empty text (and JSON null).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/driver/pass_log.h"
#include "core/support/source.h"

namespace nautilus::driver {

enum class RenderFormat { Text, Dot, Json };
const char* render_format_name(RenderFormat format);
// "text", "dot", "json"; nullopt for anything else.
std::optional<RenderFormat> parse_render_format(std::string_view name);

// The snapshot's IR in `format`. `source` (the spec file) adds spec-line comments to scalar IR
// text; JSON ends with a newline like the printers' text.
std::string render(const Snapshot& snapshot, RenderFormat format, const SourceFile* source = nullptr);
// The snapshot's IR as a JSON value (what render(…, Json) prints), for documents that embed it.
nlohmann::ordered_json render_json(const Snapshot& snapshot);

// The unified diff of log[index]'s text against the entry before it in the log ("before PASS" /
// "after PASS"); the first entry is diffed against nothing ("before (nothing)"), so every entry
// gets a diff that adds or changes lines, and an unchanged pass gets an empty one. Neighbours are
// compared even across stages, so the unchanged flag and the diff always agree.
std::string pass_diff(const std::vector<Snapshot>& log, size_t index,
                      const SourceFile* source = nullptr);

// What the pass does, for teaching mode and tooltips: the description (with its before/after
// example) of the decision kind a scheduling pass applied, else the registry summary of the pass,
// else the snapshot's own summary.
std::string pass_explanation(const Snapshot& snapshot);

}  // namespace nautilus::driver
