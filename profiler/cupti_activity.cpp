#include "profiler/cupti_activity.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>

#if __has_include(<cupti_activity.h>)
#include <cupti_activity.h>
#define NAUTILUS_HAVE_CUPTI_HEADERS 1
#else
#define NAUTILUS_HAVE_CUPTI_HEADERS 0
#endif

#include "core/support/shared_library.h"

namespace nautilus::profiler {

std::vector<std::string> cupti_library_candidates() {
  std::vector<std::string> candidates;
  if (const char* forced = std::getenv("NAUTILUS_LIBCUPTI"); forced != nullptr && *forced) {
    candidates.emplace_back(forced);
  }
  candidates.insert(candidates.end(), {"libcupti.so.13", "libcupti.so.12", "libcupti.so"});
  std::vector<std::string> roots;
  for (const char* variable : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* root = std::getenv(variable); root != nullptr && *root) roots.emplace_back(root);
  }
  roots.emplace_back("/usr/local/cuda");
  for (const std::string& root : roots) {
    candidates.push_back(root + "/extras/CUPTI/lib64/libcupti.so");
    candidates.push_back(root + "/lib64/libcupti.so");
  }
  return candidates;
}

#if NAUTILUS_HAVE_CUPTI_HEADERS

namespace {

// The CUPTI entry points, resolved once per process.
struct CuptiApi {
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  std::string library;
};

// State shared with the buffer callbacks, which CUPTI calls on its own threads.
struct Collector {
  std::mutex mutex;
  bool active = false;          // a CuptiKernelActivity exists
  bool callbacks_registered = false;
  std::vector<KernelActivity> records;
};

Collector& collector() {
  static Collector instance;
  return instance;
}

// Loads the library on first use; the outcome (failure included) is cached.
const CuptiApi* load_api(std::string* reason) {
  static const CuptiApi* api = nullptr;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    for (const std::string& candidate : cupti_library_candidates()) {
      SharedLibrary library = SharedLibrary::open(candidate);
      if (!library.is_open()) {
        tried += (tried.empty() ? "" : ", ") + candidate;
        continue;
      }
      auto* loaded = new CuptiApi();  // lives for the process, like the library
      loaded->library = candidate;
      library.resolve("cuptiActivityRegisterCallbacks", loaded->register_callbacks);
      library.resolve("cuptiActivityEnable", loaded->enable);
      library.resolve("cuptiActivityDisable", loaded->disable);
      library.resolve("cuptiActivityFlushAll", loaded->flush_all);
      library.resolve("cuptiActivityGetNextRecord", loaded->next_record);
      library.resolve("cuptiGetResultString", loaded->result_string);
      if (!library.first_missing().empty()) {
        delete loaded;
        tried += (tried.empty() ? "" : ", ") + candidate + " (incomplete)";
        continue;
      }
      // Never dlclose()d: CUPTI owns threads inside the library once activity is enabled.
      api = loaded;
      return;
    }
    failure = "CUPTI not found: tried " + tried;
  });
  if (api == nullptr && reason != nullptr) *reason = failure;
  return api;
}

std::string result_text(const CuptiApi& api, CUptiResult result) {
  const char* text = nullptr;
  std::string message = api.result_string(result, &text) == CUPTI_SUCCESS && text != nullptr
                            ? std::string(text)
                            : std::string("unrecognized CUPTI result");
  return message + " (CUPTI error " + std::to_string(static_cast<int>(result)) + ")";
}

constexpr size_t kActivityBufferBytes = size_t{4} << 20;
constexpr size_t kActivityBufferAlignment = 8;  // CUPTI requires 8-byte aligned buffers

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kActivityBufferAlignment, kActivityBufferBytes));
  *size = *buffer != nullptr ? kActivityBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext /*context*/, uint32_t /*stream*/, uint8_t* buffer,
                               size_t /*size*/, size_t valid_size) {
  const CuptiApi* api = load_api(nullptr);
  std::vector<KernelActivity> batch;
  CUpti_Activity* record = nullptr;
  while (api != nullptr && buffer != nullptr &&
         api->next_record(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
        record->kind != CUPTI_ACTIVITY_KIND_KERNEL) {
      continue;
    }
    // Later CUPTI versions only append fields to the kernel record, so the prefix read here
    // (name, timestamps, correlation id) is valid for records of any newer library too.
    const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    KernelActivity activity;
    activity.name = kernel->name != nullptr ? kernel->name : "";
    activity.start_ns = kernel->start;
    activity.end_ns = kernel->end;
    activity.correlation_id = kernel->correlationId;
    batch.push_back(std::move(activity));
  }
  std::free(buffer);
  Collector& state = collector();
  std::lock_guard lock(state.mutex);
  if (state.active) {
    state.records.insert(state.records.end(), batch.begin(), batch.end());
  }
}

}  // namespace

std::unique_ptr<CuptiKernelActivity> CuptiKernelActivity::start(std::string* reason) {
  const CuptiApi* api = load_api(reason);
  if (api == nullptr) return nullptr;
  Collector& state = collector();
  {
    std::lock_guard lock(state.mutex);
    if (state.active) {
      if (reason != nullptr) *reason = "another CUPTI kernel collection is active in this process";
      return nullptr;
    }
    if (!state.callbacks_registered) {
      CUptiResult result = api->register_callbacks(buffer_requested, buffer_completed);
      if (result != CUPTI_SUCCESS) {
        if (reason != nullptr) {
          *reason = "cuptiActivityRegisterCallbacks failed: " + result_text(*api, result);
        }
        return nullptr;
      }
      state.callbacks_registered = true;
    }
    state.records.clear();
    state.active = true;
  }
  CUptiResult result = api->enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (result != CUPTI_SUCCESS) {
    std::lock_guard lock(state.mutex);
    state.active = false;
    if (reason != nullptr) *reason = "cuptiActivityEnable failed: " + result_text(*api, result);
    return nullptr;
  }
  return std::unique_ptr<CuptiKernelActivity>(new CuptiKernelActivity());
}

bool CuptiKernelActivity::stop(std::vector<KernelActivity>* records, std::string* reason) {
  const CuptiApi* api = load_api(nullptr);
  stopped_ = true;
  // Flush while still enabled (forced: also the buffers that are not full), so every record of
  // the timed launches reaches buffer_completed before collection ends.
  CUptiResult flushed = api->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  CUptiResult disabled = api->disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  Collector& state = collector();
  std::vector<KernelActivity> collected;
  {
    std::lock_guard lock(state.mutex);
    collected.swap(state.records);
    state.active = false;
  }
  std::sort(collected.begin(), collected.end(),
            [](const KernelActivity& a, const KernelActivity& b) { return a.start_ns < b.start_ns; });
  if (records != nullptr) *records = std::move(collected);
  if (flushed != CUPTI_SUCCESS) {
    if (reason != nullptr) *reason = "cuptiActivityFlushAll failed: " + result_text(*api, flushed);
    return false;
  }
  if (disabled != CUPTI_SUCCESS) {
    if (reason != nullptr) *reason = "cuptiActivityDisable failed: " + result_text(*api, disabled);
    return false;
  }
  return true;
}

CuptiKernelActivity::~CuptiKernelActivity() {
  if (!stopped_) stop(nullptr, nullptr);
}

#else  // no CUPTI headers at build time

std::unique_ptr<CuptiKernelActivity> CuptiKernelActivity::start(std::string* reason) {
  if (reason != nullptr) {
    *reason = "this build has no CUPTI support (cupti_activity.h was not found at build time)";
  }
  return nullptr;
}

bool CuptiKernelActivity::stop(std::vector<KernelActivity>* records, std::string* reason) {
  stopped_ = true;
  if (records != nullptr) records->clear();
  if (reason != nullptr) *reason = "this build has no CUPTI support";
  return false;
}

CuptiKernelActivity::~CuptiKernelActivity() = default;

#endif

}  // namespace nautilus::profiler
