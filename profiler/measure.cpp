#include "profiler/measure.h"

#include <stdlib.h>

#include <filesystem>

#include "core/driver/kernel_package.h"

namespace nautilus::profiler {

ScheduleMeasurer::ScheduleMeasurer(MeasureOptions options) : options_(std::move(options)) {
  if (!options_.directory.empty()) {
    directory_ = options_.directory;
    return;
  }
  std::string pattern =
      (std::filesystem::temp_directory_path() / "nautilus-measure-XXXXXX").string();
  if (mkdtemp(pattern.data())) {
    directory_ = pattern;
    owns_directory_ = true;
  }
}

ScheduleMeasurer::~ScheduleMeasurer() {
  std::error_code ignored;
  if (owns_directory_) std::filesystem::remove_all(directory_, ignored);
}

bool ScheduleMeasurer::build(const driver::Compilation& compilation, const std::string& directory,
                             const std::string& what, Measurement& out) const {
  const std::string prefix = what.empty() ? std::string() : what + ": ";
  if (!compilation.ok() || !compilation.ma_module) {
    out.build_error = prefix +
                      (!compilation.schedule_error.empty()   ? compilation.schedule_error
                       : !compilation.internal_error.empty() ? compilation.internal_error
                       : compilation.cancelled               ? std::string("the compile was stopped")
                                               : std::string("does not compile to MA tile IR"));
    out.build_error_is_internal = !compilation.internal_error.empty();
    return false;
  }
  std::vector<codegen::GpuArch> archs = options_.archs;
  if (compilation.ma_module->arch == "sm_90a") archs = {codegen::GpuArch::Sm90a};
  codegen::Result<codegen::KernelPackage> package =
      driver::build_kernel_package(compilation, compilation.ma_module, archs);
  if (!package.ok()) {
    using Kind = codegen::CodegenError::Kind;
    // A kernel ptxas would serialize or spill is an infeasible candidate (nvrtc.h's gate): say
    // so first, so the search's "measurement failed: infeasible: ..." reads as what it is.
    out.build_error = prefix + (package.error().kind == Kind::Rejected ? "infeasible: " : "") +
                      package.error().message;
    out.build_error_is_internal =
        package.error().kind == Kind::Compilation || package.error().kind == Kind::InvalidInput;
    out.build_log = package.error().log;
    return false;
  }
  codegen::Result<bool> written = codegen::write_package(*package, directory);
  if (!written.ok()) {
    out.build_error = prefix + written.error().message;
    return false;
  }
  return true;
}

bool ScheduleMeasurer::reference_for(const driver::Compilation& scheduled, Measurement& out) {
  const std::lock_guard<std::mutex> lock(reference_mutex_);
  const std::vector<std::pair<std::string, int64_t>>& sizes = scheduled.spec->sizes;
  // The same spec may come as another SourceFile object (each compile reads it anew): the same
  // name and text are the same spec.
  const bool same_spec = reference_file_ && scheduled.file &&
                         reference_file_->path() == scheduled.file->path() &&
                         reference_file_->text() == scheduled.file->text();
  if (!reference_dir_.empty() && same_spec && reference_sizes_ == sizes) {
    out.reference_dir = reference_dir_;
    return true;
  }
  // The compiler's own unscheduled lowering of the same spec at the same sizes.
  driver::CompileOptions options;
  for (const auto& [name, value] : sizes) options.sizes.push_back({name, value});
  options.last_stage = driver::Stage::MATile;
  const driver::Compilation reference = driver::compile(scheduled.file, options);
  const std::string directory = directory_ + "/reference";
  if (!build(reference, directory, "the reference package", out)) return false;
  reference_file_ = scheduled.file;
  reference_sizes_ = sizes;
  reference_dir_ = directory;
  out.reference_dir = directory;
  return true;
}

Measurement ScheduleMeasurer::prepare(const driver::Compilation& scheduled) {
  Measurement out;
  if (directory_.empty()) {
    out.build_error = "cannot create a directory for the kernel packages";
    return out;
  }
  if (!scheduled.spec) {
    out.build_error = "the spec does not check";
    return out;
  }
  const int package = ++packages_;
  out.package_dir =
      directory_ + (package == 1 ? "/package" : "/package-" + std::to_string(package));
  if (!build(scheduled, out.package_dir, "", out)) return out;
  if (options_.validate && !reference_for(scheduled, out)) return out;
  return out;
}

Measurement ScheduleMeasurer::prepare(const SourceFilePtr& file,
                                      const std::vector<spec::SizeOverride>& sizes,
                                      const sched::Schedule& schedule) {
  driver::CompileOptions options;
  options.sizes = sizes;
  options.schedule = schedule;
  options.last_stage = driver::Stage::MATile;
  options.matile.arch = options_.lower_arch;
  return prepare(driver::compile(file, options));
}

std::string ScheduleMeasurer::reference_cache_dir() const {
  if (!options_.share_reference_outputs || directory_.empty()) return "";
  return directory_ + "/reference-outputs";
}

void ScheduleMeasurer::run(Measurement& prepared, std::optional<int> device) const {
  RunRequest request = options_.run;
  request.package_dir = prepared.package_dir;
  request.reference_dir = prepared.reference_dir;
  request.reference_cache_dir = reference_cache_dir();
  if (device) request.device = device;
  prepared.run = run_package(request, options_.client);
}

Measurement ScheduleMeasurer::measure(const driver::Compilation& scheduled) {
  Measurement out = prepare(scheduled);
  if (out.built()) run(out);
  return out;
}

Measurement ScheduleMeasurer::measure(const SourceFilePtr& file,
                                      const std::vector<spec::SizeOverride>& sizes,
                                      const sched::Schedule& schedule) {
  Measurement out = prepare(file, sizes, schedule);
  if (out.built()) run(out);
  return out;
}

}  // namespace nautilus::profiler
