#include "core/driver/evaluate.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/scalar/interpreter.h"
#include "core/spec/reference.h"
#include "core/support/npy.h"
#include "core/matile/interpreter.h"
#include "core/vrtile/interpreter.h"

namespace nautilus::driver {

bool EvalResult::passed() const {
  if (!ran) return false;
  for (const OutputCheck& check : outputs) {
    if (!check.passed) return false;
  }
  return true;
}

namespace {

std::string format_operations(double operations) {
  std::ostringstream out;
  out.precision(3);
  out << operations;
  return out.str();
}

}  // namespace

EvalResult evaluate(const Compilation& compilation, const EvalOptions& options) {
  EvalResult result;
  if (!compilation.ok()) {
    result.error = "the spec did not compile";
    return result;
  }
  const spec::Spec& spec = *compilation.spec;
  if (options.stage == Stage::Spec) {
    result.error = "the spec stage is the float64 reference itself; evaluate a later stage "
                   "(--stage scalar)";
    return result;
  }
  double operations = spec::estimate_reference_operations(spec);
  if (operations > options.max_operations) {
    result.error = "evaluation at these sizes needs about " + format_operations(operations) +
                   " scalar operations (limit " + format_operations(options.max_operations) +
                   "); bind smaller sizes with -D NAME=VALUE";
    return result;
  }

  result.inputs = spec::make_random_inputs(spec, options.seed);
  spec::ReferenceOptions reference_options;
  reference_options.max_operations = options.max_operations;
  spec::ReferenceResult reference = spec::evaluate_reference(spec, result.inputs, reference_options);
  if (!reference.ok) {
    result.error = reference.error;
    return result;
  }

  // Each stage's interpreter gives the same three facts: ok, the error, the outputs.
  struct StageRun {
    bool ok = false;
    std::string error;
    TensorMap outputs;
  } run;
  // Runs one stage's interpreter on the inputs (each has the same options and result shape).
  const auto interpret_stage = [&](const auto& ir, auto interpret, auto interpret_options) {
    if (!ir) {
      run.error = "the compilation did not reach the " + std::string(stage_name(options.stage)) +
                  " stage";
      return;
    }
    interpret_options.max_steps = static_cast<uint64_t>(options.max_operations);
    auto r = interpret(*ir, result.inputs, interpret_options);
    run = {r.ok, r.error, std::move(r.outputs)};
  };
  switch (options.stage) {
    case Stage::Scalar:
      interpret_stage(compilation.program, scalar::interpret, scalar::InterpretOptions{});
      break;
    case Stage::VRTile:
      interpret_stage(compilation.vr_module, vrtile::interpret, vrtile::InterpretOptions{});
      break;
    case Stage::MATile:
      interpret_stage(compilation.ma_module, matile::interpret, matile::InterpretOptions{});
      break;
    case Stage::Spec:
    case Stage::Cuda:
      result.error = "the cuda stage has no CPU interpreter; evaluate --stage matile, or run the "
                     "kernels on a GPU with `nautilus run`";
      return result;
  }
  if (!run.ok) {
    result.error = std::string(stage_name(options.stage)) + " interpreter: " + run.error;
    return result;
  }
  result.ran = true;
  for (int index : spec.outputs) {
    const spec::Tensor& tensor = spec.tensors[index];
    OutputCheck check;
    check.name = tensor.name;
    check.dtype = tensor.dtype;
    check.tolerance = tolerance(tensor.dtype);
    auto actual = run.outputs.find(tensor.name);
    const TensorData& expected = reference.tensors.at(tensor.name);
    result.reference[tensor.name] = expected;
    if (actual == run.outputs.end()) {
      result.ran = false;
      result.error = "the " + std::string(stage_name(options.stage)) + " stage produced no output '" +
                     tensor.name + "'";
      return result;
    }
    check.error = compare_tensors(actual->second, expected);
    check.passed = check.error.mismatched_nonfinite == 0 &&
                   check.error.max_relative_error <= check.tolerance;
    result.actual[tensor.name] = actual->second;
    result.outputs.push_back(check);
  }
  return result;
}

std::string save_evaluation(const EvalResult& result, const std::string& directory) {
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  if (ec) return "cannot create directory '" + directory + "': " + ec.message();
  nlohmann::ordered_json manifest;
  manifest["files"] = nlohmann::ordered_json::array();
  auto save_all = [&](const TensorMap& tensors, const std::string& kind) -> std::string {
    for (const auto& [name, tensor] : tensors) {
      std::string file = kind + "_" + name + ".npy";
      std::string error = write_npy(directory + "/" + file, tensor.shape, tensor.values,
                                    tensor.dtype);
      if (!error.empty()) return error;
      manifest["files"].push_back({{"file", file},
                                   {"kind", kind},
                                   {"tensor", name},
                                   {"dtype", dtype_name(tensor.dtype)},
                                   {"npy_dtype", npy_descr(tensor.dtype)},
                                   {"shape", tensor.shape}});
    }
    return {};
  };
  for (const auto& [tensors, kind] :
       {std::pair{&result.inputs, "input"}, std::pair{&result.reference, "reference"},
        std::pair{&result.actual, "output"}}) {
    std::string error = save_all(*tensors, kind);
    if (!error.empty()) return error;
  }
  manifest["outputs"] = nlohmann::ordered_json::array();
  for (const OutputCheck& check : result.outputs) {
    manifest["outputs"].push_back({{"tensor", check.name},
                                   {"dtype", dtype_name(check.dtype)},
                                   {"max_relative_error", check.error.max_relative_error},
                                   {"max_abs_error", check.error.max_abs_error},
                                   {"tolerance", check.tolerance},
                                   {"passed", check.passed}});
  }
  std::ofstream out(directory + "/manifest.json");
  out << manifest.dump(2) << "\n";
  if (!out) return "cannot write '" + directory + "/manifest.json'";
  return {};
}

}  // namespace nautilus::driver
