// The runner's CUDA context: every driver call with a deadline or a typed failure.
#include "profiler/gpu_session.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <sstream>
#include <thread>

namespace nautilus::profiler {

bool is_context_fatal(cu::Result result) {
  switch (result) {
    case 700:  // CUDA_ERROR_ILLEGAL_ADDRESS
    case 702:  // CUDA_ERROR_LAUNCH_TIMEOUT (display watchdog)
    case 710:  // CUDA_ERROR_ASSERT
    case 714:  // CUDA_ERROR_HARDWARE_STACK_ERROR
    case 715:  // CUDA_ERROR_ILLEGAL_INSTRUCTION
    case 716:  // CUDA_ERROR_MISALIGNED_ADDRESS
    case 717:  // CUDA_ERROR_INVALID_ADDRESS_SPACE
    case 718:  // CUDA_ERROR_INVALID_PC
    case 719:  // CUDA_ERROR_LAUNCH_FAILED
      return true;
    default:
      return false;
  }
}

GpuSession::GpuSession(std::shared_ptr<const CudaDriver> driver, int device, cu::Context context)
    : driver_(std::move(driver)), device_(device), context_(context) {}

std::unique_ptr<GpuSession> GpuSession::open(std::shared_ptr<const CudaDriver> driver,
                                             int ordinal, GpuError* error) {
  cu::Device device = 0;
  cu::Result r = driver->device_get(&device, ordinal);
  cu::Context context = nullptr;
  std::string call = "cuDeviceGet";
  if (r == cu::kSuccess) {
    call = "cuDevicePrimaryCtxRetain";
    r = driver->primary_ctx_retain(&context, device);
  }
  if (r == cu::kSuccess) {
    call = "cuCtxSetCurrent";
    r = driver->ctx_set_current(context);
    if (r != cu::kSuccess) driver->primary_ctx_release(device);
  }
  if (r != cu::kSuccess) {
    if (error != nullptr) {
      *error = GpuError{GpuError::Kind::Load,
                        call + "(device " + std::to_string(ordinal) + "): " + driver->error_text(r),
                        r, driver->error_name(r)};
    }
    return nullptr;
  }
  std::unique_ptr<GpuSession> session(new GpuSession(driver, device, context));
  if (driver->driver_get_version(&session->driver_version_) != cu::kSuccess) session->driver_version_ = 0;
  if (cu::Result e = driver->event_create(&session->sync_event_, cu::kEventDisableTiming);
      e != cu::kSuccess) {
    if (error != nullptr) *error = session->fail(GpuError::Kind::Load, "cuEventCreate", e);
    return nullptr;
  }
  return session;
}

GpuSession::~GpuSession() {
  // A hung kernel may still run: freeing its memory or releasing the context could block, so a
  // timed-out session leaves everything to process exit. After a fault the frees would only
  // fail, but releasing the context is what resets the device for the next user.
  if (poisoned_ == Poison::Timeout) return;
  if (poisoned_ == Poison::None) {
    for (cu::DevicePtr pointer : allocations_) driver_->mem_free(pointer);
    for (cu::Module module : modules_) driver_->module_unload(module);
    for (cu::Event event : events_) driver_->event_destroy(event);
    if (sync_event_ != nullptr) driver_->event_destroy(sync_event_);
  }
  driver_->primary_ctx_release(device_);
}

GpuError GpuSession::fail(GpuError::Kind kind, const std::string& call, cu::Result result) {
  if (is_context_fatal(result)) {
    kind = GpuError::Kind::Launch;
    if (poisoned_ == Poison::None) poisoned_ = Poison::Fault;
  }
  return GpuError{kind, call + ": " + driver_->error_text(result), result,
                  driver_->error_name(result)};
}

std::optional<GpuError> GpuSession::load_module(const std::vector<uint8_t>& image,
                                                cu::Module* module) {
  // The JIT writes its diagnostics (PTX errors, an arch mismatch) into a caller buffer.
  std::vector<char> log(8192, '\0');
  int options[] = {cu::kJitErrorLogBuffer, cu::kJitErrorLogBufferSizeBytes};
  void* values[] = {log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(log.size() - 1))};
  cu::Result r = driver_->module_load_data_ex(module, image.data(), 2, options, values);
  if (r != cu::kSuccess) {
    GpuError error = fail(GpuError::Kind::Load, "cuModuleLoadData", r);
    std::string text(log.data());
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    for (char& c : text) {
      if (c == '\n') c = ' ';
    }
    if (!text.empty()) error.message += " (JIT log: " + text + ")";
    return error;
  }
  modules_.push_back(*module);
  return std::nullopt;
}

std::optional<GpuError> GpuSession::get_function(cu::Module module, const std::string& name,
                                                 int64_t dynamic_shared_bytes,
                                                 cu::Function* function, int* registers) {
  if (cu::Result r = driver_->module_get_function(function, module, name.c_str());
      r != cu::kSuccess) {
    return fail(GpuError::Kind::Load, "cuModuleGetFunction(" + name + ")", r);
  }
  if (dynamic_shared_bytes > std::numeric_limits<int>::max()) {
    return GpuError{GpuError::Kind::Load,
                    "kernel " + name + " asks for " + std::to_string(dynamic_shared_bytes) +
                        " bytes of dynamic shared memory",
                    0, ""};
  }
  if (dynamic_shared_bytes > 0) {
    if (cu::Result r = driver_->func_set_attribute(*function, cu::kFuncAttributeMaxDynamicSharedBytes,
                                                   static_cast<int>(dynamic_shared_bytes));
        r != cu::kSuccess) {
      return fail(GpuError::Kind::Load,
                  "cuFuncSetAttribute(" + name + ", max dynamic shared memory = " +
                      std::to_string(dynamic_shared_bytes) + ")",
                  r);
    }
  }
  if (registers != nullptr &&
      driver_->func_get_attribute(registers, cu::kFuncAttributeNumRegisters, *function) !=
          cu::kSuccess) {
    *registers = 0;
  }
  return std::nullopt;
}

std::optional<GpuError> GpuSession::allocate(uint64_t bytes, cu::DevicePtr* pointer) {
  if (cu::Result r = driver_->mem_alloc(pointer, bytes); r != cu::kSuccess) {
    return fail(GpuError::Kind::Load, "cuMemAlloc(" + std::to_string(bytes) + " bytes)", r);
  }
  allocations_.push_back(*pointer);
  return std::nullopt;
}

std::optional<GpuError> GpuSession::upload(cu::DevicePtr destination,
                                           const std::vector<uint8_t>& bytes) {
  if (cu::Result r = driver_->memcpy_htod(destination, bytes.data(), bytes.size());
      r != cu::kSuccess) {
    return fail(GpuError::Kind::Launch, "cuMemcpyHtoD", r);
  }
  return std::nullopt;
}

std::optional<GpuError> GpuSession::download(cu::DevicePtr source, std::vector<uint8_t>* bytes) {
  if (cu::Result r = driver_->memcpy_dtoh(bytes->data(), source, bytes->size());
      r != cu::kSuccess) {
    return fail(GpuError::Kind::Launch, "cuMemcpyDtoH", r);
  }
  return std::nullopt;
}

std::optional<GpuError> GpuSession::fill(cu::DevicePtr destination, uint8_t value, uint64_t bytes) {
  if (cu::Result r = driver_->memset_d8_async(destination, value, bytes, nullptr);
      r != cu::kSuccess) {
    return fail(GpuError::Kind::Launch, "cuMemsetD8Async", r);
  }
  return std::nullopt;
}

void KernelParameters::add_pointer(cu::DevicePtr pointer) {
  order_.emplace_back(false, pointers_.size());
  pointers_.push_back(pointer);
}

void KernelParameters::add_tensor_map(const TensorMapBytes& map) {
  order_.emplace_back(true, maps_.size());
  maps_.push_back(map);
}

void** KernelParameters::values() {
  values_.clear();
  for (const auto& [is_map, index] : order_) {
    values_.push_back(is_map ? static_cast<void*>(&maps_[index]) : static_cast<void*>(&pointers_[index]));
  }
  return values_.empty() ? nullptr : values_.data();
}

std::pair<const void*, size_t> KernelParameters::value(size_t index) const {
  const auto& [is_map, at] = order_.at(index);
  if (is_map) return {&maps_[at], sizeof(TensorMapBytes)};
  return {&pointers_[at], sizeof(cu::DevicePtr)};
}

std::optional<GpuError> TensorMapCache::get(GpuSession& session, size_t kernel, size_t argument,
                                            const codegen::TensorMap& map, DType dtype,
                                            cu::DevicePtr base, const TensorMapBytes** out) {
  auto it = entries_.find({kernel, argument});
  if (it == entries_.end() || it->second.base != base) {
    Entry entry;
    entry.base = base;
    if (auto failure = session.encode_tensor_map(map, dtype, base, &entry.bytes)) return failure;
    ++encodes_;
    it = entries_.insert_or_assign({kernel, argument}, entry).first;
  }
  *out = &it->second.bytes;
  return std::nullopt;
}

int64_t GpuSession::resident_ctas(cu::Function function, int64_t block_threads,
                                  int64_t dynamic_shared_bytes) {
  int sms = 0;
  if (driver_->device_get_attribute(&sms, static_cast<int>(cu::Attribute::MultiprocessorCount), device_) !=
          cu::kSuccess ||
      sms < 1) {
    sms = 1;
  }
  int per_sm = 1;
  if (driver_->occupancy_max_active_blocks != nullptr &&
      (driver_->occupancy_max_active_blocks(&per_sm, function, static_cast<int>(block_threads),
                                            static_cast<std::size_t>(dynamic_shared_bytes)) != cu::kSuccess ||
       per_sm < 1)) {
    per_sm = 1;
  }
  return int64_t{sms} * per_sm;
}

std::optional<GpuError> GpuSession::launch(cu::Function function, const LaunchShape& shape,
                                           KernelParameters& parameters) {
  auto fits = [](int64_t v) { return v >= 1 && v <= std::numeric_limits<unsigned>::max(); };
  for (int i = 0; i < 3; ++i) {
    if (!fits(shape.grid[i]) || !fits(shape.block[i]) ||
        (shape.cluster && !fits((*shape.cluster)[i]))) {
      return GpuError{GpuError::Kind::Launch, "grid, block or cluster extent out of range", 0, ""};
    }
  }
  auto u = [](int64_t v) { return static_cast<unsigned>(v); };
  void** values = parameters.values();
  if (!shape.cluster) {
    cu::Result r = driver_->launch_kernel(
        function, u(shape.grid[0]), u(shape.grid[1]), u(shape.grid[2]), u(shape.block[0]),
        u(shape.block[1]), u(shape.block[2]), u(shape.dynamic_shared_bytes), nullptr, values,
        nullptr);
    if (r != cu::kSuccess) return fail(GpuError::Kind::Launch, "cuLaunchKernel", r);
    return std::nullopt;
  }
  if (driver_->launch_kernel_ex == nullptr) {
    return GpuError{GpuError::Kind::Launch,
                    "a cluster launch needs cuLaunchKernelEx, which " + driver_->library() +
                        " does not export (driver older than CUDA 11.8)",
                    0, ""};
  }
  cu::LaunchAttribute cluster;
  cluster.id = cu::kLaunchAttributeClusterDimension;
  cluster.value.cluster_dim = {u((*shape.cluster)[0]), u((*shape.cluster)[1]), u((*shape.cluster)[2])};
  cu::LaunchConfig config;
  config.grid_x = u(shape.grid[0]);
  config.grid_y = u(shape.grid[1]);
  config.grid_z = u(shape.grid[2]);
  config.block_x = u(shape.block[0]);
  config.block_y = u(shape.block[1]);
  config.block_z = u(shape.block[2]);
  config.shared_bytes = u(shape.dynamic_shared_bytes);
  config.attributes = &cluster;
  config.attribute_count = 1;
  cu::Result r = driver_->launch_kernel_ex(&config, function, values, nullptr);
  if (r != cu::kSuccess) {
    std::ostringstream call;
    call << "cuLaunchKernelEx(cluster " << (*shape.cluster)[0] << "x" << (*shape.cluster)[1] << "x"
         << (*shape.cluster)[2] << ")";
    return fail(GpuError::Kind::Launch, call.str(), r);
  }
  return std::nullopt;
}

std::optional<GpuError> GpuSession::encode_tensor_map(const codegen::TensorMap& map, DType dtype,
                                                      cu::DevicePtr base, TensorMapBytes* out) {
  if (encoder_ == nullptr && encoder_missing_.empty()) {
    encoder_ = driver_->tensor_map_encoder(&encoder_missing_);
    if (encoder_ == nullptr && encoder_missing_.empty()) encoder_missing_ = "no cuTensorMapEncodeTiled";
  }
  if (encoder_ == nullptr) return GpuError{GpuError::Kind::Load, encoder_missing_, 0, ""};
  cu::Result r = profiler::encode_tensor_map(encoder_, map, dtype, base, driver_version_, out);
  if (r != cu::kSuccess) return fail(GpuError::Kind::Load, "cuTensorMapEncodeTiled", r);
  return std::nullopt;
}

std::optional<GpuError> GpuSession::wait(double timeout_seconds) {
  if (cu::Result r = driver_->event_record(sync_event_, nullptr); r != cu::kSuccess) {
    return fail(GpuError::Kind::Launch, "cuEventRecord", r);
  }
  using Clock = std::chrono::steady_clock;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(timeout_seconds));
  // Poll quickly at first (most waits are microseconds to milliseconds), then back off to 1 ms
  // so a long kernel does not cost a busy core.
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    cu::Result r = driver_->event_query(sync_event_);
    if (r == cu::kSuccess) return std::nullopt;
    if (r != cu::kErrorNotReady) return fail(GpuError::Kind::Launch, "kernel execution", r);
    if (Clock::now() >= deadline) {
      poisoned_ = Poison::Timeout;
      std::ostringstream message;  // "2.5 s", not std::to_string's "2.500000 s"
      message << "the GPU work did not finish within " << timeout_seconds << " s";
      return GpuError{GpuError::Kind::Timeout, message.str(), 0, ""};
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

std::optional<GpuError> GpuSession::create_event(cu::Event* event) {
  if (cu::Result r = driver_->event_create(event, cu::kEventDefault); r != cu::kSuccess) {
    return fail(GpuError::Kind::Load, "cuEventCreate", r);
  }
  events_.push_back(*event);
  return std::nullopt;
}

std::optional<GpuError> GpuSession::record(cu::Event event) {
  if (cu::Result r = driver_->event_record(event, nullptr); r != cu::kSuccess) {
    return fail(GpuError::Kind::Launch, "cuEventRecord", r);
  }
  return std::nullopt;
}

std::optional<GpuError> GpuSession::elapsed_ms(cu::Event start, cu::Event end,
                                               float* milliseconds) {
  if (cu::Result r = driver_->event_elapsed_time(milliseconds, start, end); r != cu::kSuccess) {
    return fail(GpuError::Kind::Launch, "cuEventElapsedTime", r);
  }
  return std::nullopt;
}

}  // namespace nautilus::profiler
