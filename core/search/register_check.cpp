#include "core/search/register_check.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <iomanip>
#include <sstream>

#include "core/codegen/nvrtc.h"
#include "core/cost/analytical_model.h"
#include "core/driver/kernel_package.h"
#include "core/driver/pipeline.h"

namespace nautilus::search {

RegisterVerdict check_registers(const SearchInput& input, const sched::Schedule& schedule,
                                const std::string& arch, const cost::CostModel* model) {
  RegisterVerdict verdict;
  const auto started = std::chrono::steady_clock::now();
  const auto finish = [&] {
    verdict.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return verdict;
  };
  const std::optional<codegen::GpuArch> target = codegen::parse_arch(arch);
  if (!target) {
    verdict.message = "unknown arch '" + arch + "'";
    return finish();
  }
  driver::CompileOptions options;
  options.sizes = input.sizes;
  options.schedule = schedule;
  options.last_stage = driver::Stage::MATile;
  options.matile.arch = arch;
  const driver::Compilation compilation = driver::compile(input.file, options);
  if (!compilation.ok() || !compilation.ma_module) {
    verdict.message = !compilation.schedule_error.empty()   ? compilation.schedule_error
                      : !compilation.internal_error.empty() ? compilation.internal_error
                                                            : "it does not lower to MA tile IR";
    return finish();
  }
  if (model) verdict.estimate = model->estimate(*compilation.ma_module);
  // The package build's own fallbacks (register splits, ptxas' register usage level, the guarded
  // exp2) run as they do for `nautilus compile` and measurements: the check sees what would run.
  codegen::Result<codegen::KernelPackage> package =
      driver::build_kernel_package(compilation, compilation.ma_module, {*target});
  if (!package.ok()) {
    using Kind = codegen::CodegenError::Kind;
    const Kind kind = package.error().kind;
    verdict.status = kind == Kind::NvrtcNotFound ? RegisterVerdict::Status::NoCompiler
                     : kind == Kind::Rejected    ? RegisterVerdict::Status::Rejected
                                                 : RegisterVerdict::Status::Failed;
    verdict.message = package.error().message;
    return finish();
  }
  // The kernel named is the one that spills most, else the one with the most registers.
  int64_t most_spilled = -1;
  // The package launches the module's kernels in its order (codegen/package.h).
  const std::vector<matile::KernelPtr>& lowered = compilation.ma_module->kernels;
  auto estimated_for = [&](const std::string& symbol) {
    for (size_t i = 0; i < package->kernels.size() && i < lowered.size(); ++i) {
      if (package->kernels[i].name == symbol && lowered[i]) return cost::estimate_registers_per_thread(*lowered[i]);
    }
    return 0;
  };
  for (const codegen::KernelResources& kernel : package->report.kernels) {
    const int64_t spilled = kernel.spill_store_bytes + kernel.spill_load_bytes;
    verdict.spill_bytes += spilled;
    if (spilled > most_spilled || (spilled == most_spilled && kernel.registers > verdict.registers)) {
      most_spilled = spilled;
      verdict.kernel = kernel.name;
      verdict.registers = kernel.registers;
      verdict.estimated_registers = estimated_for(kernel.name);
    }
  }
  verdict.status = verdict.spill_bytes > 0 ? RegisterVerdict::Status::Spills : RegisterVerdict::Status::Fits;
  verdict.guarded_exp2 = std::any_of(package->notes.begin(), package->notes.end(), [](const std::string& note) {
    return note.find(driver::kGuardedExp2Note) != std::string::npos;
  });
  return finish();
}

std::string describe_verdict(const RegisterVerdict& verdict) {
  using Status = RegisterVerdict::Status;
  std::ostringstream out;
  switch (verdict.status) {
    case Status::Fits:
    case Status::Spills:
      out << verdict.kernel << " " << verdict.registers << " registers";
      if (verdict.estimated_registers > 0) out << " (estimated " << verdict.estimated_registers << ")";
      out << ", ";
      if (verdict.spill_bytes > 0) {
        out << verdict.spill_bytes << " bytes spilled";
      } else if (verdict.guarded_exp2) {
        out << "no spill with exp2 as exp2f and its denormal guard (the SFU-only exp2 spilled)";
      } else {
        out << "no spill";
      }
      break;
    case Status::Rejected: out << "rejected: " << verdict.message; break;
    case Status::Failed: out << "does not compile: " << verdict.message; break;
    case Status::NoCompiler: out << "not checked: " << verdict.message; break;
  }
  return out.str();
}

std::vector<LeafSchedule> pick_then_leaves(const SearchResult& result) {
  std::vector<LeafSchedule> leaves = {{result.schedule, result.estimate ? result.estimate->microseconds : 0.0}};
  for (LeafSchedule& leaf : complete_leaves(result)) {
    if (leaf.schedule.decisions != result.schedule.decisions) leaves.push_back(std::move(leaf));
  }
  return leaves;
}

RegisterCheck choose_leaf_that_fits(const SearchInput& input, const std::vector<LeafSchedule>& leaves,
                                    const std::string& arch, const RegisterCheckOptions& options) {
  return choose_leaf_by_verdicts(
      leaves, arch, options,
      [&](const sched::Schedule& schedule) { return check_registers(input, schedule, arch, options.model); });
}

RegisterCheck choose_leaf_by_verdicts(const std::vector<LeafSchedule>& leaves, const std::string& arch,
                                      const RegisterCheckOptions& options,
                                      const std::function<RegisterVerdict(const sched::Schedule&)>& verdict_of) {
  RegisterCheck check;
  std::optional<size_t> guarded;  // the first leaf that fits only with the guarded exp2
  const size_t limit = std::min(leaves.size(), static_cast<size_t>(std::max(options.max_leaves, 1)));
  for (size_t i = 0; i < limit; ++i) {
    if (options.stop.stop_requested()) {
      check.lines.push_back("register check: stopped; the search's pick stays");
      return check;
    }
    const RegisterVerdict verdict = verdict_of(leaves[i].schedule);
    check.verdicts.push_back(verdict);
    if (verdict.status == RegisterVerdict::Status::NoCompiler) {
      check.lines.push_back("register check: skipped, " + verdict.message);
      return check;
    }
    std::ostringstream line;
    line << "register check: leaf " << i + 1 << " (estimate " << std::fixed << std::setprecision(1)
         << leaves[i].estimate_us << " µs) under ptxas for " << arch << ": " << describe_verdict(verdict);
    check.lines.push_back(line.str());
    if (verdict.status != RegisterVerdict::Status::Fits) continue;
    if (verdict.guarded_exp2) {
      // Kept in reserve: a later leaf without the guard is preferred while its estimate is
      // within the guard's cost of this one's.
      if (!guarded) guarded = i;
      continue;
    }
    if (guarded && leaves[i].estimate_us > (1.0 + kGuardedExp2Cost) * leaves[*guarded].estimate_us) break;
    check.chosen = i;
    check.pick_fits = i == 0;
    if (i > 0) {
      check.summary = "chose leaf " + std::to_string(i + 1) + ", the best-ranked one that compiles without spilling";
      if (guarded) check.summary += " or falling back to the guarded exp2";
      check.lines.push_back("register check: " + check.summary);
    }
    return check;
  }
  if (guarded) {
    check.chosen = *guarded;
    check.pick_fits = *guarded == 0;
    check.summary = "chose leaf " + std::to_string(*guarded + 1) +
                    ", which compiles without spilling only with the guarded exp2; no leaf without "
                    "it within " + std::to_string(static_cast<int>(kGuardedExp2Cost * 100)) +
                    "% of its estimate";
    check.lines.push_back("register check: " + check.summary);
    return check;
  }
  check.summary = "none of the " + std::to_string(limit) +
                  " best-ranked leaves compiles without spilling; the search's pick stays";
  check.lines.push_back("register check: " + check.summary);
  return check;
}

}  // namespace nautilus::search
