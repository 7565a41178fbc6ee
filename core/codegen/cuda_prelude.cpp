#include "core/codegen/cuda_prelude.h"

namespace nautilus::codegen {
namespace {

constexpr const char* kPrelude = R"(#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

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

// 8-bit storage types. fp8 (OCP e4m3 / e5m2) stores round to nearest even and saturate to the
// largest finite value (NaN stays NaN), the behaviour the spec language defines; loads widen
// exactly through f16. int8 stores round to nearest even and clamp to [-128, 127] (NaN gives 0).
__device__ __forceinline__ float fp8e4m3_to_float(__nv_fp8_storage_t x) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(x, __NV_E4M3)));
}
__device__ __forceinline__ float fp8e5m2_to_float(__nv_fp8_storage_t x) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(x, __NV_E5M2)));
}
__device__ __forceinline__ __nv_fp8_storage_t float_to_fp8e4m3(float x) {
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}
__device__ __forceinline__ __nv_fp8_storage_t float_to_fp8e5m2(float x) {
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
}
__device__ __forceinline__ signed char float_to_int8(float x) {
  return static_cast<signed char>(max(-128, min(127, __float2int_rn(x))));
}
__device__ __forceinline__ signed char float_to_int4(float x) {
  return static_cast<signed char>(max(-8, min(7, __float2int_rn(x))));
}
// int8 widened without the conversion unit (I2F runs at a quarter of the ALU rate on sm_80 and
// sm_90, and a mixed-type GEMM widens every weight it reads): 1.5 * 2^23 + x as an integer is
// the float 1.5 * 2^23 + x, exactly, for |x| < 2^22; one subtraction leaves x. A float that is
// an integer of at most 8 significant bits is exact in bf16, so its upper half is the bf16.
__device__ __forceinline__ float int8_to_float(int x) {
  return __int_as_float(0x4B400000 + x) - 12582912.0f;
}
__device__ __forceinline__ __nv_bfloat16 int8_to_bf16(int x) {
  return __ushort_as_bfloat16(static_cast<unsigned short>(__float_as_uint(int8_to_float(x)) >> 16));
}
// int4 (core/support/dtype.h): two elements a byte in global memory, element 2j in the low nibble
// of byte j. The element at flat index i as a signed byte: its nibble moved to the top of a byte,
// then shifted back arithmetically, which extends the sign.
__device__ __forceinline__ signed char int4_at(const unsigned char* packed, long long i) {
  const unsigned byte = packed[i >> 1];
  const unsigned top = (i & 1) ? (byte & 0xF0u) : ((byte << 4) & 0xF0u);
  return static_cast<signed char>(static_cast<signed char>(top) >> 4);
}
// Two int8 values as a bf16 pair, exactly, in four ALU instructions (one element at a time takes
// an add, a subtraction and a shift each, and a pack per pair). The selector's prmt puts the
// two bytes in the low bytes of the pair's halves. A byte's low 7 bits under the bf16 exponent
// of 128 are the bf16 128 + low; its sign bit at the exponent's lowest bit makes 128 or 256;
// (128 + low) - (128 + 128 * sign) is the signed byte, an integer of at most 8 significant bits
// and so exact in bf16. fma.rn.bf16x2 (sm_80 on; sub.bf16x2 needs sm_90) with -1 subtracts.
// Each (bytes & mask) | exponent is one lop3 (LUT 0xEA: (a & b) | c): written as C++, ptxas
// made it an and and an or (two constants are more than one lop3 takes as immediates).
__device__ __forceinline__ unsigned int8x2_to_bf16x2(unsigned a, unsigned b, unsigned selector) {
  const unsigned bytes = __byte_perm(a, b, selector);
  unsigned magnitude, offset;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(magnitude) : "r"(bytes), "r"(0x007F007Fu), "r"(0x43004300u));
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(offset) : "r"(bytes), "r"(0x00800080u), "r"(0x43004300u));
  unsigned value;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(value) : "r"(offset), "r"(0xBF80BF80u), "r"(magnitude));
  return value;
}

// Two int4 values as a bf16 (or f16) pair, exactly, in three instructions: the selector's prmt
// puts the two nibbles in bits 0-3 of bytes 0 and 2 (a nibble in the high half of its byte
// comes from the word shifted right by 4); one lop3 (LUT 0x6A: (a & b) ^ c) keeps them and
// writes the exponent of 128 (f16: 1024) above them, flipping each nibble's bit 3, which makes
// the two's-complement nibble x the unsigned x + 8; the halves are then 136 + x (1032 + x),
// and one bf16x2 (f16x2) fma subtracts 136 (1032). Integers that small are exact in both types.
__device__ __forceinline__ unsigned int4x2_biased(unsigned a, unsigned b, unsigned selector, unsigned exponent) {
  const unsigned nibbles = __byte_perm(a, b, selector);
  unsigned biased;
  asm("lop3.b32 %0, %1, %2, %3, 0x6A;" : "=r"(biased) : "r"(nibbles), "r"(0x000F000Fu), "r"(exponent));
  return biased;
}
__device__ __forceinline__ unsigned int4x2_to_bf16x2(unsigned a, unsigned b, unsigned selector) {
  unsigned value;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;"
      : "=r"(value) : "r"(int4x2_biased(a, b, selector, 0x43084308u)), "r"(0x3F803F80u), "r"(0xC308C308u));
  return value;
}
__device__ __forceinline__ unsigned int4x2_to_f16x2(unsigned a, unsigned b, unsigned selector) {
  unsigned value;
  asm("fma.rn.f16x2 %0, %1, %2, %3;"
      : "=r"(value) : "r"(int4x2_biased(a, b, selector, 0x64086408u)), "r"(0x3C003C00u), "r"(0xE408E408u));
  return value;
}
// 2^x on the SFU alone (ex2.approx.ftz: about 2 ulp, results below 2^-126 flushed to zero).
// exp2f without -ftz guards the denormal range around it (a compare and two predicated
// multiplies per element): 3 of the 15 instructions per score of an attention kernel's softmax.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 1 / (1 + e^-x) on the SFU alone: ex2.approx.ftz of -x log2(e), then rcp.approx.ftz, about 3
// ulp. 1.0f / (1.0f + expf(-x)) takes expf's range reduction and an IEEE division with its
// slow-path branch: in the gated MLP's down projection, whose A operand is silu(G) * U, those
// FFMAs were the consumers' largest stall. Large |x| saturates exactly: e^-x overflows to inf
// and its reciprocal is 0, or underflows to 0 and gives 1.
__device__ __forceinline__ float sigmoid_approx(float x) {
  float e, y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(x * -1.4426950408889634f));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(1.0f + e));
  return y;
}

__device__ __forceinline__ unsigned shared_address(const void* pointer) {
  return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

// Shared-memory reads at a 32-bit shared-window address: the hoisted lane part plus a constant,
// which ptxas folds into the instruction's immediate offset (an element index into a generic
// pointer costs 64-bit address arithmetic per read, and a swizzle recomputed per element).
// Volatile, so that no read moves across the barriers that order it after its writers.
__device__ __forceinline__ int ld_shared_s8(unsigned address) {
  int bits;
  asm volatile("ld.shared.s8 %0, [%1];\n" : "=r"(bits) : "r"(address));
  return bits;
}
__device__ __forceinline__ unsigned ld_shared_u8(unsigned address) {
  unsigned bits;
  asm volatile("ld.shared.u8 %0, [%1];\n" : "=r"(bits) : "r"(address));
  return bits;
}
__device__ __forceinline__ unsigned ld_shared_u16(unsigned address) {
  unsigned bits;
  asm volatile("ld.shared.u16 %0, [%1];\n" : "=r"(bits) : "r"(address));
  return bits;
}
__device__ __forceinline__ unsigned ld_shared_u32(unsigned address) {
  unsigned bits;
  asm volatile("ld.shared.u32 %0, [%1];\n" : "=r"(bits) : "r"(address));
  return bits;
}
__device__ __forceinline__ uint2 ld_shared_v2(unsigned address) {
  uint2 bits;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(bits.x), "=r"(bits.y) : "r"(address));
  return bits;
}
__device__ __forceinline__ uint4 ld_shared_v4(unsigned address) {
  uint4 bits;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(bits.x), "=r"(bits.y), "=r"(bits.z), "=r"(bits.w)
               : "r"(address));
  return bits;
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

// d += A * B for one m16n8k16 instruction from its packed registers (A's four, B's two); the
// element type (its argument's) picks the PTX form.
__device__ __forceinline__ void mma_m16n8k16_packed(float* d, __nv_bfloat16, unsigned a0, unsigned a1,
                                                    unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_m16n8k16_packed(float* d, __half, unsigned a0, unsigned a1, unsigned a2,
                                                    unsigned a3, unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// d += a * b for one m16n8k16 atom: a holds a_0..a_7, b holds b_0..b_3, d holds c_0..c_3.
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float* d, const T* a, const T* b) {
  mma_m16n8k16_packed(d, T(), pack2(a[0], a[1]), pack2(a[2], a[3]), pack2(a[4], a[5]), pack2(a[6], a[7]),
                      pack2(b[0], b[1]), pack2(b[2], b[3]));
}
// The swapped product (ir.h, Mma): the instruction's A rows g and g + 8 are the B fragments
// b_low (n8 atom 2j) and b_high (atom 2j + 1), its B is a_0, a_1, a_4, a_5 of a short A.
template <typename T>
__device__ __forceinline__ void mma_m16n8k16_swapped(float* d, const T* b_low, const T* b_high, const T* a) {
  mma_m16n8k16_packed(d, T(), pack2(b_low[0], b_low[1]), pack2(b_high[0], b_high[1]), pack2(b_low[2], b_low[3]),
                      pack2(b_high[2], b_high[3]), pack2(a[0], a[1]), pack2(a[4], a[5]));
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
// The same with the L2 fetching the whole 128-byte line (.L2::128B) for a tile whose rows are
// shorter: the rest of the line, which a later iteration reads, arrives with this request
// instead of as a partial-line DRAM access of its own.
__device__ __forceinline__ void cp_async_16_line(unsigned destination, const void* source,
                                                 int source_bytes) {
  asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;\n"
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

// Only Hopper modules get this (sm_80 cannot assemble it, and older modules' text stays as it was).
constexpr const char* kHopperPrelude = R"(
namespace nautilus_device {

// A CUtensorMap as a kernel parameter: 128 opaque bytes, 64-byte aligned (cuda.h is not
// available to NVRTC; the runner encodes the map and passes it by value).
struct __align__(64) tensor_map { unsigned long long words[16]; };

__device__ __forceinline__ void mbarrier_init(unsigned bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}
// Makes the initializations visible to the async proxy (TMA's complete_tx) and the cluster.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbarrier_arrive(unsigned bar) {
  asm volatile("{\n .reg .b64 state;\n mbarrier.arrive.shared::cta.b64 state, [%0];\n}\n"
               ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("{\n .reg .b64 state;\n"
               " mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n"
               ::"r"(bar), "r"(bytes) : "memory");
}
// Spins until the phase of parity `parity` has completed (try_wait suspends the thread for a
// while in hardware between polls, so the loop does not hammer the barrier).
__device__ __forceinline__ void mbarrier_wait(unsigned bar, int parity) {
  asm volatile(
      "{\n .reg .pred done;\n"
      "wait_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra wait_%=;\n}\n"
      ::"r"(bar), "r"(parity) : "memory");
}

__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Earlier generic-proxy shared writes (st.shared, stmatrix) become visible to TMA and wgmma.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// One box of an N-D tensor map (2 <= N <= 5), coordinates innermost first.
__device__ __forceinline__ void tma_load_2d(unsigned destination, const tensor_map* map, unsigned bar,
                                            int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(destination), "l"(map), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
__device__ __forceinline__ void tma_load_3d(unsigned destination, const tensor_map* map, unsigned bar,
                                            int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];\n"
      ::"r"(destination), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(bar) : "memory");
}
__device__ __forceinline__ void tma_load_4d(unsigned destination, const tensor_map* map, unsigned bar,
                                            int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n"
      ::"r"(destination), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar) : "memory");
}
__device__ __forceinline__ void tma_load_5d(unsigned destination, const tensor_map* map, unsigned bar,
                                            int c0, int c1, int c2, int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];\n"
      ::"r"(destination), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void tma_store_2d(const tensor_map* map, unsigned source, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];\n"
               ::"l"(map), "r"(source), "r"(c0), "r"(c1) : "memory");
}
__device__ __forceinline__ void tma_store_3d(const tensor_map* map, unsigned source, int c0, int c1,
                                             int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n"
               ::"l"(map), "r"(source), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
__device__ __forceinline__ void tma_store_4d(const tensor_map* map, unsigned source, int c0, int c1,
                                             int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n"
      ::"l"(map), "r"(source), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
}
__device__ __forceinline__ void tma_store_5d(const tensor_map* map, unsigned source, int c0, int c1,
                                             int c2, int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];\n"
      ::"l"(map), "r"(source), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4) : "memory");
}
__device__ __forceinline__ void bulk_commit_group() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
template <int Pending>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(Pending) : "memory");
}
template <int Pending>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(Pending) : "memory");
}

__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int Pending>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
}
// Ties a register to this point of the program: the compiler may not move its reads or writes
// across, which keeps accumulator uses after the wgmma.wait_group that makes them valid.
__device__ __forceinline__ void fence_register(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void fence_register(unsigned& r) { asm volatile("" : "+r"(r)::"memory"); }

template <int Registers>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Registers));
}
template <int Registers>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Registers));
}

// stmatrix.x4: this lane gives the row address `address` of matrix lane / 8; register i holds
// this lane's two elements of matrix i.
__device__ __forceinline__ void stmatrix_x4(unsigned address, unsigned r0, unsigned r1, unsigned r2,
                                            unsigned r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
               ::"r"(address), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}

// Realigned row stores (a staged epilogue at a row pitch that is not 16-byte aligned): the
// 2-byte elements from `p` to the next 16-byte boundary (0: p is aligned), a lane's 16-byte run
// from the next lane, and elements h..h+7 of the 16 elements of a then b (h in 0..7).
__device__ __forceinline__ int realign_head(const void* p) {
  return static_cast<int>((16u - (static_cast<unsigned>(reinterpret_cast<unsigned long long>(p)) & 15u)) & 15u) >> 1;
}
__device__ __forceinline__ uint4 shuffle_down_uint4(uint4 v) {
  return make_uint4(__shfl_down_sync(0xffffffffu, v.x, 1), __shfl_down_sync(0xffffffffu, v.y, 1),
                    __shfl_down_sync(0xffffffffu, v.z, 1), __shfl_down_sync(0xffffffffu, v.w, 1));
}
__device__ __forceinline__ uint4 realign16(uint4 a, uint4 b, int h) {
  const int q = h >> 1;                                  // the word holding element h
  const unsigned shift = static_cast<unsigned>(h & 1) * 16u;  // its high half when h is odd
  const unsigned w0 = q == 0 ? a.x : q == 1 ? a.y : q == 2 ? a.z : a.w;
  const unsigned w1 = q == 0 ? a.y : q == 1 ? a.z : q == 2 ? a.w : b.x;
  const unsigned w2 = q == 0 ? a.z : q == 1 ? a.w : q == 2 ? b.x : b.y;
  const unsigned w3 = q == 0 ? a.w : q == 1 ? b.x : q == 2 ? b.y : b.z;
  const unsigned w4 = q == 0 ? b.x : q == 1 ? b.y : q == 2 ? b.z : b.w;
  return make_uint4(__funnelshift_r(w0, w1, shift), __funnelshift_r(w1, w2, shift),
                    __funnelshift_r(w2, w3, shift), __funnelshift_r(w3, w4, shift));
}

}  // namespace nautilus_device
)";

}  // namespace

const char* cuda_prelude() { return kPrelude; }
const char* cuda_hopper_prelude() { return kHopperPrelude; }

int64_t device_swizzle(int64_t offset, const layout::Swizzle& s) {
  const int64_t mask = ((int64_t{1} << s.bits) - 1) << s.base;
  return s.shift >= 0 ? offset ^ ((offset >> s.shift) & mask) : offset ^ ((offset & mask) << -s.shift);
}

}  // namespace nautilus::codegen
