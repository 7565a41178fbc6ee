#include "profiler/l2_flush.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace nautilus::profiler {
namespace {

// Each thread walks the buffer in 16-byte steps of a grid-wide stride and XORs what it reads;
// a thread whose XOR equals 0x2545F491 stores it to `sink` (4 bytes).
constexpr const char* kEvictPtx = R"(
.version 7.0
.target sm_80
.address_size 64

.visible .entry nautilus_l2_evict(.param .u64 buffer, .param .u64 end, .param .u64 sink)
{
  .reg .pred %p<3>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [buffer];
  ld.param.u64 %rd2, [end];
  ld.param.u64 %rd3, [sink];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mov.u32 %r4, %nctaid.x;
  mad.lo.u32 %r5, %r1, %r2, %r3;
  mul.wide.u32 %rd4, %r5, 16;
  add.u64 %rd5, %rd1, %rd4;
  mul.lo.u32 %r6, %r4, %r2;
  mul.wide.u32 %rd6, %r6, 16;
  mov.u32 %r9, 0;
LOOP:
  setp.ge.u64 %p1, %rd5, %rd2;
  @%p1 bra DONE;
  ld.global.cg.v4.u32 {%r5, %r6, %r7, %r8}, [%rd5];
  xor.b32 %r9, %r9, %r5;
  xor.b32 %r9, %r9, %r6;
  xor.b32 %r9, %r9, %r7;
  xor.b32 %r9, %r9, %r8;
  add.u64 %rd5, %rd5, %rd6;
  bra LOOP;
DONE:
  setp.ne.u32 %p2, %r9, 625341585;
  @%p2 ret;
  st.global.u32 [%rd3], %r9;
  ret;
}
)";

constexpr int64_t kEvictThreads = 512;

}  // namespace

std::optional<L2FlushMode> parse_l2_flush_mode(const std::string& text) {
  if (text == "read") return L2FlushMode::Read;
  if (text == "write") return L2FlushMode::Write;
  if (text == "none") return L2FlushMode::None;
  return std::nullopt;
}

const char* l2_flush_mode_name(L2FlushMode mode) {
  switch (mode) {
    case L2FlushMode::Read: return "read";
    case L2FlushMode::Write: return "write";
    case L2FlushMode::None: return "none";
  }
  return "none";
}

std::optional<GpuError> L2Flush::create(GpuSession& session, L2FlushMode mode, int64_t l2_bytes,
                                        int sm_count, std::unique_ptr<L2Flush>* out) {
  std::unique_ptr<L2Flush> flush(new L2Flush(session, mode));
  if (mode != L2FlushMode::None) {
    flush->bytes_ = std::max<uint64_t>(2 * static_cast<uint64_t>(std::max<int64_t>(l2_bytes, 0)),
                                       uint64_t{8} << 20) & ~uint64_t{15};
    if (auto failure = session.allocate(flush->bytes_, &flush->buffer_)) return failure;
  }
  if (mode == L2FlushMode::Read) {
    // Written once, here: the reads that follow leave L2 clean.
    if (auto failure = session.fill(flush->buffer_, 0x5a, flush->bytes_)) return failure;
    if (auto failure = session.allocate(16, &flush->sink_)) return failure;
    std::vector<uint8_t> image(kEvictPtx, kEvictPtx + std::strlen(kEvictPtx) + 1);
    cu::Module module = nullptr;
    if (auto failure = session.load_module(image, &module)) return failure;
    int registers = 0;
    if (auto failure = session.get_function(module, kL2EvictKernel, 0, &flush->evict_, &registers)) {
      return failure;
    }
    flush->ctas_ = std::max(1, sm_count) * int64_t{4};
  }
  *out = std::move(flush);
  return std::nullopt;
}

std::optional<GpuError> L2Flush::run() {
  switch (mode_) {
    case L2FlushMode::None:
      return std::nullopt;
    case L2FlushMode::Write:
      return session_.fill(buffer_, static_cast<uint8_t>(++fills_), bytes_);
    case L2FlushMode::Read: {
      KernelParameters parameters;
      parameters.add_pointer(buffer_);
      parameters.add_pointer(buffer_ + bytes_);
      parameters.add_pointer(sink_);
      LaunchShape shape;
      shape.grid = {ctas_, 1, 1};
      shape.block = {kEvictThreads, 1, 1};
      return session_.launch(evict_, shape, parameters);
    }
  }
  return std::nullopt;
}

}  // namespace nautilus::profiler
