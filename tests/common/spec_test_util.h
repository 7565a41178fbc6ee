// Helpers for tests that compile asset specs through the driver.
#pragma once

#include <string>
#include <vector>

#include "core/driver/evaluate.h"
#include "core/driver/pipeline.h"
#include "core/spec/sema.h"

namespace nautilus::testing {

// Compiles assets/specs/<name>.nt with the given -D bindings ("M=16"); fails the test on errors.
driver::Compilation compile_asset(const std::string& name, const std::vector<std::string>& sizes,
                                  driver::Stage last_stage = driver::Stage::Scalar,
                                  std::vector<driver::ScalarPass> extra_passes = {});

// Compiles the spec file at `path` (from the source tree's root) with `options` (arch, last
// stage, ...) plus the decisions, parsed (a malformed one fails the test), and the -D bindings.
driver::Compilation compile_scheduled(const std::string& path, const std::vector<std::string>& decisions,
                                      const std::vector<std::string>& sizes,
                                      driver::CompileOptions options);
// The same for a spec source (inline text: std::make_shared<SourceFile>("inline.nt", text)).
driver::Compilation compile_scheduled(const SourceFilePtr& file, const std::vector<std::string>& decisions,
                                      const std::vector<std::string>& sizes,
                                      driver::CompileOptions options);

// compile_scheduled of a spec file down to `last` (MA tile IR by default), lowered for `arch`
// (sm_90a: TMA, wgmma and warp roles where the schedule asks for them).
driver::Compilation compile_for_arch(const std::string& path, const std::vector<std::string>& decisions,
                                     const std::vector<std::string>& sizes, const std::string& arch = "sm_90a",
                                     driver::Stage last = driver::Stage::MATile);

// Compiles spec text given inline.
driver::Compilation compile_text(const std::string& text, const std::vector<std::string>& sizes = {});

// A schedule of decisions written as text; a line that does not parse fails the test.
sched::Schedule parse_schedule(const std::vector<std::string>& decisions);

// Runs `stage`'s interpreter on seeded random inputs (driver::evaluate) and expects every output
// within its dtype's tolerance of the float64 reference; `what` prefixes the failure messages.
void expect_stage_matches_reference(const driver::Compilation& compilation, driver::Stage stage,
                                    uint64_t seed, const std::string& what = "");

// The CUDA source emitted for the compilation's MA module ("" with a test failure when the
// compilation or the emitter failed).
std::string emitted_cuda(const driver::Compilation& compilation);

// Small sizes at which every asset spec evaluates in well under a second.
std::vector<std::string> small_sizes(const std::string& asset);

// The decisions of assets/schedules/<asset>.json, printed (as `--pin` arguments read).
std::vector<std::string> hand_schedule(const std::string& asset);

// The decisions that give assets/specs/{attention,causal_attention}.nt a warp-specialized kernel:
// the rolling update over key tiles, 64-row query halves per consumer warpgroup, and
// warp_spec with the given ring, overlap and ping-pong. Tests append what they study.
struct WarpSpecAttention {
  bool causal = false;
  int key_tile = 64;
  int consumers = 2;
  int stages = 3;
  bool overlap = false;
  bool pingpong = false;
};
std::vector<std::string> warp_spec_attention(const WarpSpecAttention& form);

// Every asset spec name (stems of assets/specs/*.nt), sorted.
std::vector<std::string> asset_names();

// The text of assets/specs/<asset>.nt with every bf16 declaration turned into f32 (for
// compile_text), where tolerances are tight enough to catch small numerical mistakes.
std::string f32_variant(const std::string& asset);

}  // namespace nautilus::testing
