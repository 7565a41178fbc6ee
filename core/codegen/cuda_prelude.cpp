#include "core/codegen/cuda_prelude.h"

namespace nautilus::codegen {
namespace {

constexpr const char* kPrelude = R"(#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace nautilus_device {

// Floor division and modulo with the divisor's sign (the IR's index semantics).
__device__ __forceinline__ int floor_div(int a, int b) {
  const int q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ int floor_mod(int a, int b) {
  const int r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

// CuTe's Swizzle<bits, base, shift> on an element offset: XOR the `bits` bits at
// [base + shift, base + shift + bits) into those at [base, base + bits).
__device__ __forceinline__ int swizzle(int offset, int bits, int base, int shift) {
  const int mask = ((1 << bits) - 1) << base;
  return shift >= 0 ? offset ^ ((offset >> shift) & mask)
                    : offset ^ ((offset & mask) << -shift);
}

__device__ __forceinline__ unsigned shared_address(const void* pointer) {
  return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

__device__ __forceinline__ unsigned pack2(__nv_bfloat16 low, __nv_bfloat16 high) {
  return static_cast<unsigned>(__bfloat16_as_ushort(low)) |
         (static_cast<unsigned>(__bfloat16_as_ushort(high)) << 16);
}
__device__ __forceinline__ unsigned pack2(__half low, __half high) {
  return static_cast<unsigned>(__half_as_ushort(low)) |
         (static_cast<unsigned>(__half_as_ushort(high)) << 16);
}
__device__ __forceinline__ void unpack2(unsigned bits, __nv_bfloat16& low, __nv_bfloat16& high) {
  low = __ushort_as_bfloat16(static_cast<unsigned short>(bits & 0xffffu));
  high = __ushort_as_bfloat16(static_cast<unsigned short>(bits >> 16));
}
__device__ __forceinline__ void unpack2(unsigned bits, __half& low, __half& high) {
  low = __ushort_as_half(static_cast<unsigned short>(bits & 0xffffu));
  high = __ushort_as_half(static_cast<unsigned short>(bits >> 16));
}

// d += a * b for one m16n8k16 atom: a holds a_0..a_7, b holds b_0..b_3, d holds c_0..c_3.
__device__ __forceinline__ void mma_m16n8k16(float* d, const __nv_bfloat16* a,
                                             const __nv_bfloat16* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(pack2(a[0], a[1])), "r"(pack2(a[2], a[3])), "r"(pack2(a[4], a[5])),
        "r"(pack2(a[6], a[7])), "r"(pack2(b[0], b[1])), "r"(pack2(b[2], b[3])));
}
__device__ __forceinline__ void mma_m16n8k16(float* d, const __half* a, const __half* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(pack2(a[0], a[1])), "r"(pack2(a[2], a[3])), "r"(pack2(a[4], a[5])),
        "r"(pack2(a[6], a[7])), "r"(pack2(b[0], b[1])), "r"(pack2(b[2], b[3])));
}

// ldmatrix.x4: this lane supplies the row address `address`; registers 0 and 1 land in
// low[0..3], registers 2 and 3 in high[0..3] (two 16-bit elements per register, low half first).
template <typename T>
__device__ __forceinline__ void ldmatrix_x4(T* low, T* high, unsigned address) {
  unsigned r0, r1, r2, r3;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(address));
  unpack2(r0, low[0], low[1]);
  unpack2(r1, low[2], low[3]);
  unpack2(r2, high[0], high[1]);
  unpack2(r3, high[2], high[3]);
}
template <typename T>
__device__ __forceinline__ void ldmatrix_x4_trans(T* low, T* high, unsigned address) {
  unsigned r0, r1, r2, r3;
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(address));
  unpack2(r0, low[0], low[1]);
  unpack2(r1, low[2], low[3]);
  unpack2(r2, high[0], high[1]);
  unpack2(r3, high[2], high[3]);
}

// cp.async of 16 bytes; bytes past `source_bytes` (0..16) are zero-filled.
__device__ __forceinline__ void cp_async_16(unsigned destination, const void* source,
                                            int source_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :
               : "r"(destination), "l"(source), "r"(source_bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

}  // namespace nautilus_device

using namespace nautilus_device;
)";

}  // namespace

const char* cuda_prelude() { return kPrelude; }

int64_t device_swizzle(int64_t offset, const layout::Swizzle& s) {
  const int64_t mask = ((int64_t{1} << s.bits) - 1) << s.base;
  return s.shift >= 0 ? offset ^ ((offset >> s.shift) & mask) : offset ^ ((offset & mask) << -s.shift);
}

}  // namespace nautilus::codegen
