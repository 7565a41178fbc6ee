// Runs one differential-testing triple and writes its reproducer (difftest.h says what and why).
#include "tools/difftest/difftest.h"

#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "core/driver/evaluate.h"
#include "core/driver/pipeline.h"
#include "core/support/source.h"
#include "tools/difftest/schedule_walker.h"
#include "tools/difftest/spec_generator.h"

namespace nautilus::difftest {
namespace {

// The evaluator's refusal of sizes that are too large (driver/evaluate.cpp): not a failure.
constexpr const char* kTooLarge = "evaluation at these sizes needs about";
// An interpreter's step budget, which the estimate above does not foresee where threads repeat
// work (a 136-wide head dim on one thread): a size limit too for the sm_90a triples' tensor-core
// sizes. At the small sizes of the others it stays a failure (a loop that does not end).
constexpr const char* kStepBudget = "ran past the step budget";

void fail(TripleResult& r, std::string kind, std::string stage, std::string detail) {
  if (r.status == "failed") return;  // the first failure is the one reported
  r.status = "failed";
  r.failure_kind = std::move(kind);
  r.failure_stage = std::move(stage);
  r.detail = std::move(detail);
}

std::string format_double(double value) {
  std::ostringstream out;
  out.precision(3);
  out << value;
  return out.str();
}

void evaluate_stage(TripleResult& r, const driver::Compilation& compilation, driver::Stage stage) {
  StageOutcome outcome;
  outcome.stage = driver::stage_name(stage);
  driver::EvalOptions options;
  options.stage = stage;
  options.seed = r.eval_seed;
  const driver::EvalResult evaluation = driver::evaluate(compilation, options);
  if (!evaluation.ran) {
    outcome.detail = evaluation.error;
    const bool step_budget = r.arch == "sm_90a" && evaluation.error.find(kStepBudget) != std::string::npos;
    if (evaluation.error.rfind(kTooLarge, 0) == 0 || step_budget) {
      outcome.status = "skipped";
    } else {
      outcome.status = "failed";
      fail(r, "cannot-run", outcome.stage, evaluation.error);
    }
    r.stages.push_back(outcome);
    return;
  }
  outcome.status = "passed";
  for (const driver::OutputCheck& check : evaluation.outputs) {
    const std::string words =
        "output " + check.name + ": max rel error " + format_double(check.error.max_relative_error) +
        " (tolerance " + format_double(check.tolerance) + "), " +
        std::to_string(check.error.mismatched_nonfinite) + " non-finite mismatches, worst at flat index " +
        std::to_string(check.error.worst_index);
    if (!outcome.detail.empty()) outcome.detail += "; ";
    outcome.detail += words;
    if (check.passed) continue;
    outcome.status = "failed";
    fail(r, check.error.mismatched_nonfinite > 0 ? "non-finite" : "wrong-result", outcome.stage,
         words);
  }
  r.stages.push_back(outcome);
}

std::string schedule_lines(const sched::Schedule& schedule) {
  if (schedule.decisions.empty()) return "(no decisions: the program as lowered)\n";
  std::string out;
  for (const sched::Decision& decision : schedule.decisions) {
    out += sched::print_decision(decision) + "\n";
  }
  return out;
}

// The stage to replay: the failing one, else matile.
std::string replay_stage(const TripleResult& r) {
  if (r.failure_stage == "scalar" || r.failure_stage == "vrtile" || r.failure_stage == "matile") {
    return r.failure_stage;
  }
  return "matile";
}

}  // namespace

TripleResult run_triple(uint64_t seed, uint64_t index, const TripleOptions& options) {
  TripleResult r;
  r.seed = seed;
  r.index = index;
  const auto start = std::chrono::steady_clock::now();
  try {
    Rng rng = Rng::for_triple(seed, index);
    // The target from a stream of its own: an sm_80 triple's spec and schedule stay what they
    // were before sm_90a triples existed; an sm_90a triple gets tensor-core sizes.
    Rng arch_rng = Rng::for_triple(seed ^ 0x5e90a5e90a5e90a5ULL, index);
    r.arch = arch_rng.chance(options.hopper_probability) ? "sm_90a" : "sm_80";
    const GeneratedSpec spec = generate_spec(
        rng, options.category, GeneratorOptions{options.strict_f32, r.arch == "sm_90a"});
    r.category = spec.category;
    r.spec_text = spec.text;
    r.eval_seed = rng.next() % 100000;
    auto file = std::make_shared<SourceFile>("difftest.nt", spec.text);

    driver::CompileOptions lower;
    lower.last_stage = driver::Stage::Scalar;
    const driver::Compilation lowered = driver::compile(file, lower);
    if (!lowered.internal_error.empty()) {
      fail(r, "internal-error", "spec", lowered.internal_error);
    } else if (!lowered.ok()) {
      fail(r, "spec-rejected", "spec",
           "the generated spec was rejected (a generator bug):\n" +
               lowered.diagnostics->render_all());
    }
    if (r.status == "failed") {
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return r;
    }

    const WalkedSchedule walked = random_schedule(file, lowered.program, rng,
                                                  options.search_probability, r.arch == "sm_90a");
    r.schedule_kind = walked.kind;
    r.schedule = walked.schedule;

    driver::CompileOptions full;
    full.last_stage = driver::Stage::MATile;
    full.schedule = r.schedule;
    full.matile.arch = r.arch;
    const driver::Compilation compiled = driver::compile(file, full);
    if (!compiled.internal_error.empty()) {
      fail(r, "internal-error", "compile", compiled.internal_error);
    } else if (compiled.diagnostics->has_errors()) {
      fail(r, "spec-rejected", "compile", compiled.diagnostics->render_all());
    } else if (!compiled.schedule_error.empty()) {
      r.status = "refused";
      r.detail = compiled.schedule_error;
      // The scalar stage with every decision applied, when they all apply.
      full.last_stage = driver::Stage::Scalar;
      const driver::Compilation scalar_only = driver::compile(file, full);
      if (!scalar_only.internal_error.empty()) {
        fail(r, "internal-error", "compile", scalar_only.internal_error);
      } else if (scalar_only.ok()) {
        evaluate_stage(r, scalar_only, driver::Stage::Scalar);
      }
      for (const char* stage : {"vrtile", "matile"}) r.stages.push_back({stage, "skipped", "refused"});
    } else {
      for (const matile::KernelPtr& kernel : compiled.ma_module->kernels) {
        for (const matile::OpPtr& op : kernel->body->ops) {
          r.warp_roles = r.warp_roles || op->kind == matile::OpKind::Roles;
        }
      }
      for (driver::Stage stage :
           {driver::Stage::Scalar, driver::Stage::VRTile, driver::Stage::MATile}) {
        evaluate_stage(r, compiled, stage);
      }
      if (r.status.empty()) r.status = "passed";
    }
  } catch (const std::exception& e) {
    fail(r, "exception", r.schedule_kind.empty() ? "spec" : "compile", e.what());
  } catch (...) {
    fail(r, "exception", "compile", "a non-standard exception");
  }
  if (r.status.empty()) r.status = "passed";
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

nlohmann::json to_json(const TripleResult& r) {
  nlohmann::json stages = nlohmann::json::array();
  for (const StageOutcome& s : r.stages) {
    stages.push_back({{"stage", s.stage}, {"status", s.status}, {"detail", s.detail}});
  }
  return {{"seed", r.seed},
          {"index", r.index},
          {"category", r.category},
          {"schedule_kind", r.schedule_kind},
          {"arch", r.arch},
          {"warp_roles", r.warp_roles},
          {"spec", r.spec_text},
          {"schedule", sched::schedule_to_json(r.schedule)},
          {"eval_seed", r.eval_seed},
          {"status", r.status},
          {"failure_kind", r.failure_kind},
          {"failure_stage", r.failure_stage},
          {"detail", r.detail},
          {"stages", stages},
          {"seconds", r.seconds}};
}

TripleResult triple_from_json(const nlohmann::json& j) {
  TripleResult r;
  r.seed = j.value("seed", uint64_t{0});
  r.index = j.value("index", uint64_t{0});
  r.category = j.value("category", "");
  r.schedule_kind = j.value("schedule_kind", "");
  r.arch = j.value("arch", "sm_80");
  r.warp_roles = j.value("warp_roles", false);
  r.spec_text = j.value("spec", "");
  if (j.contains("schedule")) {
    std::string error;
    if (auto schedule = sched::schedule_from_json(j["schedule"], &error)) r.schedule = *schedule;
  }
  r.eval_seed = j.value("eval_seed", uint64_t{0});
  r.status = j.value("status", "");
  r.failure_kind = j.value("failure_kind", "");
  r.failure_stage = j.value("failure_stage", "");
  r.detail = j.value("detail", "");
  if (j.contains("stages")) {
    for (const auto& s : j["stages"]) {
      r.stages.push_back({s.value("stage", ""), s.value("status", ""), s.value("detail", "")});
    }
  }
  r.seconds = j.value("seconds", 0.0);
  return r;
}

std::string describe_failure(const TripleResult& r) {
  std::ostringstream out;
  out << "FAILURE: triple " << r.index << " of seed " << r.seed << ": " << r.failure_kind
      << " at stage " << r.failure_stage << " (" << r.category << ", schedule "
      << (r.schedule_kind.empty() ? "-" : r.schedule_kind) << ", " << r.arch << ")\n";
  out << "  " << r.detail << "\n";
  out << "  replay: nautilus-difftest --seed " << r.seed << " --only " << r.index << "\n";
  out << "  or:     nautilus eval spec.nt --schedule schedule.json --stage " << replay_stage(r)
      << " --seed " << r.eval_seed << (r.arch == "sm_80" ? "" : " --arch " + r.arch) << "\n";
  out << "--- spec.nt\n" << r.spec_text;
  out << "--- schedule (one decision per line)\n" << schedule_lines(r.schedule);
  return out.str();
}

std::string write_reproducer(const TripleResult& r, const std::string& directory) {
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  if (ec) return "cannot create '" + directory + "': " + ec.message();
  const auto write = [&](const std::string& name, const std::string& text) -> std::string {
    std::ofstream file(directory + "/" + name);
    file << text;
    return file ? std::string() : "cannot write '" + directory + "/" + name + "'";
  };
  std::string error = write("spec.nt", r.spec_text);
  if (error.empty()) error = write("schedule.json", sched::schedule_to_json(r.schedule).dump(2) + "\n");
  if (error.empty()) error = write("schedule.txt", schedule_lines(r.schedule));
  if (error.empty()) error = write("README.txt", describe_failure(r));
  if (error.empty()) error = write("triple.json", to_json(r).dump(2) + "\n");
  return error;
}

}  // namespace nautilus::difftest
