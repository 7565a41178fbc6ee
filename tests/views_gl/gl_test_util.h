// Shared by the model and panel tests of views/gl: the attention example compiled to MA tile IR.
#pragma once

#include <string>
#include <vector>

#include "core/driver/pipeline.h"

namespace nautilus::views::gl::testing {

// assets/specs/<asset>.nt with assets/schedules/<asset>.json, compiled to the matile stage at
// the given sizes; the test fails (and the module is null) when it does not compile.
matile::ModulePtr compile_to_matile(const std::string& asset, const std::vector<std::string>& sizes);

// Attention at small sizes: one CTA, a 128x64 Q tile, three n_o iterations of 64 keys
// (the last one issues no copies), head dimension 64.
matile::ModulePtr attention_module();

}  // namespace nautilus::views::gl::testing
