#include "tests/sched/sched_test_util.h"

#include <gtest/gtest.h>

#include "core/scalar/interpreter.h"
#include "core/scalar/lower_spec.h"
#include "core/scalar/printer.h"
#include "core/scalar/verifier.h"
#include "core/sched/decision.h"
#include "core/spec/reference.h"
#include "core/spec/sema.h"
#include "core/support/diagnostics.h"
#include "tests/common/golden.h"

namespace nautilus::testing {

LoweredAsset lower_asset(const std::string& name, const std::vector<std::string>& sizes) {
  LoweredAsset asset;
  std::string error;
  const std::string path =
      name.find('/') == std::string::npos ? "assets/specs/" + name + ".nt" : name;
  asset.file = SourceFile::read(source_path(path), &error);
  if (!asset.file) {
    ADD_FAILURE() << error;
    return asset;
  }
  std::vector<spec::SizeOverride> overrides;
  for (const std::string& text : sizes) {
    std::optional<spec::SizeOverride> size = spec::parse_size_override(text, &error);
    if (!size) {
      ADD_FAILURE() << text << ": " << error;
      return asset;
    }
    overrides.push_back(*size);
  }
  DiagnosticEngine diagnostics(asset.file);
  asset.spec = spec::load_spec(asset.file, overrides, diagnostics);
  if (!asset.spec) {
    ADD_FAILURE() << diagnostics.render_all();
    return asset;
  }
  asset.program = scalar::lower_spec(*asset.spec);
  return asset;
}

scalar::ProgramPtr apply_decisions(const scalar::ProgramPtr& program,
                                   const std::vector<std::string>& decisions) {
  scalar::ProgramPtr current = program;
  for (const std::string& text : decisions) {
    sched::DecisionParseError parse_error;
    std::optional<sched::Decision> decision = sched::parse_decision(text, &parse_error);
    if (!decision) {
      ADD_FAILURE() << text << ": " << sched::to_string(parse_error);
      return current;
    }
    sched::ApplyResult result = sched::apply_decision(current, *decision);
    if (!result.ok()) {
      ADD_FAILURE() << text << " does not apply: " << result.reason << "\n"
                    << scalar::print_program(*current);
      return current;
    }
    for (const std::string& problem : scalar::verify(*result.program)) {
      ADD_FAILURE() << text << " produced malformed IR: " << problem << "\n"
                    << scalar::print_program(*result.program);
    }
    current = result.program;
  }
  return current;
}

std::string failure_reason(const scalar::ProgramPtr& program, const std::string& text) {
  sched::DecisionParseError parse_error;
  std::optional<sched::Decision> decision = sched::parse_decision(text, &parse_error);
  if (!decision) {
    ADD_FAILURE() << text << ": " << sched::to_string(parse_error);
    return {};
  }
  sched::ApplyResult result = sched::apply_decision(program, *decision);
  if (result.ok()) {
    ADD_FAILURE() << text << " applied but should not:\n" << scalar::print_program(*result.program);
    return {};
  }
  return result.reason;
}

namespace {

void expect_close(const std::string& what, const TensorData& actual, const TensorData& expected,
                  double tolerance) {
  ASSERT_EQ(actual.shape, expected.shape) << what;
  if (tolerance == 0.0) {
    for (size_t i = 0; i < expected.values.size(); ++i) {
      // Bitwise-equal doubles, with NaN (an unwritten intermediate element) equal to NaN.
      const double a = actual.values[i], e = expected.values[i];
      if (!(a == e || (a != a && e != e))) {
        ADD_FAILURE() << what << " differs at flat index " << i << ": " << a << " vs " << e;
        return;
      }
    }
    return;
  }
  const ErrorReport report = compare_tensors(actual, expected);
  EXPECT_LE(report.max_relative_error, tolerance) << what << " (worst flat index "
                                                  << report.worst_index << ")";
  EXPECT_EQ(report.mismatched_nonfinite, 0) << what;
}

}  // namespace

namespace {

void compare_runs(const LoweredAsset& asset, const scalar::ProgramPtr& scheduled,
                  double tolerance, const std::vector<uint64_t>& seeds, bool intermediates) {
  ASSERT_TRUE(asset.spec && asset.program && scheduled);
  for (uint64_t seed : seeds) {
    const TensorMap inputs = spec::make_random_inputs(*asset.spec, seed);
    const scalar::InterpretResult expected = scalar::interpret(*asset.program, inputs);
    ASSERT_TRUE(expected.ok) << expected.error;
    const scalar::InterpretResult actual = scalar::interpret(*scheduled, inputs);
    ASSERT_TRUE(actual.ok) << actual.error << "\n" << scalar::print_program(*scheduled);
    for (const auto& [name, tensor] : expected.outputs) {
      ASSERT_TRUE(actual.outputs.count(name)) << name;
      expect_close("output " + name + " seed " + std::to_string(seed), actual.outputs.at(name),
                   tensor, tolerance);
    }
    if (!intermediates) continue;
    for (const auto& [name, tensor] : expected.intermediates) {
      auto it = actual.intermediates.find(name);
      if (it == actual.intermediates.end()) continue;  // inlined away
      expect_close("intermediate " + name + " seed " + std::to_string(seed), it->second, tensor,
                   tolerance);
    }
  }
}

}  // namespace

void expect_same_results(const LoweredAsset& asset, const scalar::ProgramPtr& scheduled,
                         double tolerance, const std::vector<uint64_t>& seeds) {
  compare_runs(asset, scheduled, tolerance, seeds, true);
}

void expect_same_outputs(const LoweredAsset& asset, const scalar::ProgramPtr& scheduled,
                         double tolerance, const std::vector<uint64_t>& seeds) {
  compare_runs(asset, scheduled, tolerance, seeds, false);
}

void expect_cases_same_results(const std::vector<ScheduleCase>& cases) {
  for (const ScheduleCase& c : cases) {
    SCOPED_TRACE(c.asset);
    auto asset = lower_asset(c.asset, c.sizes);
    expect_same_results(asset, apply_decisions(asset.program, c.decisions));
  }
}

scalar::ProgramPtr expect_golden_schedule(const LoweredAsset& asset, const std::string& golden,
                                          const std::vector<std::string>& setup,
                                          const std::vector<std::string>& decisions) {
  scalar::ProgramPtr after;
  expect_golden(golden, before_after(asset, setup, decisions, &after));
  expect_same_results(asset, after);
  return after;
}

namespace hand {

using namespace scalar;

Buffer input(const std::string& name, std::vector<int64_t> shape) {
  return make_buffer(name, std::move(shape), DType::F32, MemoryScope::Global, BufferRole::Input);
}

Buffer output(const std::string& name, std::vector<int64_t> shape) {
  return make_buffer(name, std::move(shape), DType::F32, MemoryScope::Global, BufferRole::Output);
}

Buffer temp(const std::string& name, std::vector<int64_t> shape) {
  return make_buffer(name, std::move(shape), DType::F32, MemoryScope::Global,
                     BufferRole::Intermediate);
}

Stmt nest(const std::string& name, const Buffer& buffer,
          const std::function<Expr(const Iters&)>& value,
          const std::function<Iters(const Iters&)>& store) {
  std::vector<Var> loops;
  std::vector<IterVar> iter_vars;
  std::vector<Expr> bindings;
  Iters iters;
  for (size_t d = 0; d < buffer->shape.size(); ++d) {
    const std::string var_name(1, static_cast<char>('i' + d));
    loops.push_back(make_var(var_name));
    iter_vars.push_back({make_var(var_name), buffer->shape[d], IterKind::Spatial});
    bindings.push_back(var_ref(loops.back()));
    iters.push_back(var_ref(iter_vars.back().var));
  }
  Stmt stmt = make_block(name, iter_vars, bindings, nullptr, nullptr,
                         make_store(buffer, store ? store(iters) : iters, value(iters)));
  for (size_t d = buffer->shape.size(); d-- > 0;) {
    stmt = make_for(loops[d], buffer->shape[d], stmt);
  }
  return stmt;
}

ProgramPtr program(const std::vector<Buffer>& params, const std::vector<Buffer>& allocations,
                   std::vector<Stmt> nests) {
  auto result = std::make_shared<Program>(
      Program{"hand", params, allocations, make_seq(std::move(nests))});
  for (const std::string& problem : verify(*result)) ADD_FAILURE() << problem;
  return result;
}

}  // namespace hand

std::string before_after(const LoweredAsset& asset, const std::vector<std::string>& setup,
                         const std::vector<std::string>& decisions, scalar::ProgramPtr* after) {
  const scalar::ProgramPtr before = apply_decisions(asset.program, setup);
  const scalar::ProgramPtr result = apply_decisions(before, decisions);
  if (after) *after = result;
  std::string text;
  if (!setup.empty()) {
    text += "## setup\n";
    for (const std::string& decision : setup) text += decision + "\n";
    text += "\n";
  }
  text += "## decisions\n";
  for (const std::string& decision : decisions) text += decision + "\n";
  text += "\n## before\n" + scalar::print_program(*before, asset.file.get());
  text += "\n## after\n" + scalar::print_program(*result, asset.file.get());
  return text;
}

}  // namespace nautilus::testing
