// Shared by the model and panel tests of views/gl: the attention example compiled to MA tile IR.
#pragma once

#include <string>
#include <vector>

#include "core/driver/pipeline.h"

namespace nautilus::views::gl::testing {

// assets/specs/<asset>.nt with assets/schedules/<asset>.json, compiled to the matile stage at
// the given sizes; the test fails (and the module is null) when it does not compile.
matile::ModulePtr compile_to_matile(const std::string& asset, const std::vector<std::string>& sizes);

// The same with `decisions` (schedule lines) instead of the asset's schedule file, lowered for
// `arch`; `statement_names` (when given) receives the spec's statement names by index.
matile::ModulePtr compile_to_matile(const std::string& asset, const std::vector<std::string>& sizes,
                                    const std::vector<std::string>& decisions, const std::string& arch,
                                    std::vector<std::string>* statement_names = nullptr);

// Attention at small sizes: one CTA, a 128x64 Q tile, three n_o iterations of 64 keys
// (the last one issues no copies), head dimension 64.
matile::ModulePtr attention_module();

// Attention as the auto-scheduler derives it for the H100 (sm_90a, warp_spec with a TMA producer
// and two consumer warpgroups, a 2-stage ring of K/V), at small sizes: one CTA of 128 query rows,
// three n_o iterations of 128 keys, head dimension 64. `statement_names`: S, Mx, P, L, O, ...
matile::ModulePtr warp_specialized_attention_module();
const std::vector<std::string>& attention_statement_names();

}  // namespace nautilus::views::gl::testing
