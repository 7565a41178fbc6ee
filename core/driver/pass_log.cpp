#include "core/driver/pass_log.h"

#include "core/matile/verifier.h"
#include "core/scalar/verifier.h"
#include "core/vrtile/verifier.h"

namespace nautilus::driver {

const char* stage_name(Stage stage) {
  switch (stage) {
    case Stage::Spec: return "spec";
    case Stage::Scalar: return "scalar";
    case Stage::VRTile: return "vrtile";
    case Stage::MATile: return "matile";
    case Stage::Cuda: return "cuda";
  }
  return "?";
}

std::vector<Stage> all_stages() {
  return {Stage::Spec, Stage::Scalar, Stage::VRTile, Stage::MATile, Stage::Cuda};
}

std::optional<Stage> parse_stage(std::string_view name) {
  for (Stage stage : all_stages()) {
    if (name == stage_name(stage)) return stage;
  }
  return std::nullopt;
}

std::string stage_names() {
  std::string names;
  for (Stage stage : all_stages()) {
    if (!names.empty()) names += ", ";
    names += stage_name(stage);
  }
  return names;
}

void store_ir(Snapshot& snapshot, const spec::SpecPtr& spec) { snapshot.spec = spec; }
void store_ir(Snapshot& snapshot, const scalar::ProgramPtr& program) { snapshot.program = program; }
void store_ir(Snapshot& snapshot, const vrtile::ModulePtr& module) { snapshot.vr_module = module; }
void store_ir(Snapshot& snapshot, const matile::ModulePtr& module) { snapshot.ma_module = module; }
void store_ir(Snapshot& snapshot, const CudaModulePtr& cuda) { snapshot.cuda = cuda; }

// The spec's checks are its diagnostics, and the CUDA source is checked by NVRTC when compiled.
std::vector<std::string> verify_ir(const spec::Spec&) { return {}; }
std::vector<std::string> verify_ir(const scalar::Program& program) { return scalar::verify(program); }
std::vector<std::string> verify_ir(const vrtile::Module& module) { return vrtile::verify(module); }
std::vector<std::string> verify_ir(const matile::Module& module) { return matile::verify(module); }
std::vector<std::string> verify_ir(const codegen::EmittedModule&) { return {}; }

namespace {

const char* ir_level_name(Stage stage) {
  switch (stage) {
    case Stage::Spec: return "spec";
    case Stage::Scalar: return "scalar IR";
    case Stage::VRTile: return "VR tile IR";
    case Stage::MATile: return "MA tile IR";
    case Stage::Cuda: return "CUDA";
  }
  return "IR";
}

}  // namespace

bool PassLogger::record_problems(const std::vector<std::string>& problems,
                                 const Snapshot& snapshot) {
  if (problems.empty()) return true;
  malformed_ = std::string(ir_level_name(snapshot.stage)) + " after pass '" + snapshot.pass +
               "' is malformed: " + problems.front();
  if (problems.size() > 1) {
    malformed_ += " (and " + std::to_string(problems.size() - 1) + " more)";
  }
  return false;
}

}  // namespace nautilus::driver
