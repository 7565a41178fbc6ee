#include "core/driver/pipeline.h"

#include <chrono>

#include "core/scalar/lower_spec.h"
#include "core/scalar/verifier.h"

namespace nautilus::driver {

const char* stage_name(Stage stage) {
  switch (stage) {
    case Stage::Spec: return "spec";
    case Stage::Scalar: return "scalar";
  }
  return "?";
}

std::vector<Stage> all_stages() { return {Stage::Spec, Stage::Scalar}; }

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

const std::vector<PassInfo>& pass_registry() {
  static const std::vector<PassInfo> passes = {
      {"parse-and-check", Stage::Spec,
       "Parses the .nt file and checks names, ranks, extents, index roles, dtypes and sizes."},
      {"lower-to-scalar", Stage::Scalar,
       "One loop nest per statement (plus one per nested reduction), intermediates in global "
       "memory, f32 arithmetic."},
  };
  return passes;
}

const Snapshot* Compilation::final_snapshot(Stage stage) const {
  for (auto it = log.rbegin(); it != log.rend(); ++it) {
    if (it->stage == stage) return &*it;
  }
  return nullptr;
}

namespace {

using Clock = std::chrono::steady_clock;

double elapsed_ms(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

const PassInfo& pass_info(const std::string& name) {
  for (const PassInfo& info : pass_registry()) {
    if (info.name == name) return info;
  }
  return pass_registry().front();
}

// Verifies scalar IR after a pass; a failure is recorded as an internal error naming the pass.
bool verify_after(const std::string& pass, const scalar::Program& program, Compilation& result) {
  std::vector<std::string> problems = scalar::verify(program);
  if (problems.empty()) return true;
  result.internal_error = "scalar IR after pass '" + pass + "' is malformed: " + problems.front();
  if (problems.size() > 1) {
    result.internal_error += " (and " + std::to_string(problems.size() - 1) + " more)";
  }
  return false;
}

}  // namespace

Compilation compile(SourceFilePtr file, const CompileOptions& options) {
  Compilation result;
  result.file = file;
  result.diagnostics = std::make_shared<DiagnosticEngine>(file);

  auto start = Clock::now();
  result.spec = spec::load_spec(file, options.sizes, *result.diagnostics);
  if (!result.spec) return result;
  {
    const PassInfo& info = pass_info("parse-and-check");
    Snapshot snapshot{Stage::Spec, info.name, info.summary, result.spec, nullptr, false,
                      elapsed_ms(start)};
    result.log.push_back(std::move(snapshot));
  }
  if (options.last_stage == Stage::Spec) return result;

  start = Clock::now();
  scalar::ProgramPtr program = scalar::lower_spec(*result.spec);
  {
    const PassInfo& info = pass_info("lower-to-scalar");
    result.log.push_back(
        Snapshot{Stage::Scalar, info.name, info.summary, nullptr, program, false, elapsed_ms(start)});
  }
  if (!verify_after("lower-to-scalar", *program, result)) return result;

  for (size_t i = 0; i < options.schedule.decisions.size(); ++i) {
    const sched::Decision& decision = options.schedule.decisions[i];
    const std::string text = sched::print_decision(decision);
    start = Clock::now();
    sched::ApplyResult applied = sched::apply_decision(program, decision);
    if (!applied.ok()) {
      result.schedule_error =
          "decision " + std::to_string(i + 1) + " " + text + " does not apply: " + applied.reason;
      return result;
    }
    const sched::DecisionKind* kind = sched::find_decision_kind(decision.kind);
    result.log.push_back(Snapshot{Stage::Scalar, text, kind ? kind->summary : std::string(),
                                  nullptr, applied.program, applied.program == program,
                                  elapsed_ms(start)});
    program = applied.program;
    if (!verify_after(text, *program, result)) return result;
  }

  for (const ScalarPass& pass : options.extra_passes) {
    start = Clock::now();
    scalar::ProgramPtr next = pass.run(program);
    double ms = elapsed_ms(start);
    bool unchanged = next == program;
    result.log.push_back(Snapshot{Stage::Scalar, pass.name, pass.summary, nullptr, next,
                                  unchanged, ms});
    program = next;
    if (!verify_after(pass.name, *program, result)) return result;
  }
  result.program = program;
  return result;
}

}  // namespace nautilus::driver
