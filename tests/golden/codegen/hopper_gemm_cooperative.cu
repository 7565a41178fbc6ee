// Kernel hopper_gemm_gemm_ws (MA kernel gemm_ws): grid (2, 2, 1), 384 threads, 90160 bytes of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(384, 1) hopper_gemm_gemm_ws(
    const __nv_bfloat16* __restrict__ A,
    const __nv_bfloat16* __restrict__ B,
    __nv_bfloat16* __restrict__ C,
    const __grid_constant__ tensor_map tmA,
    const __grid_constant__ tensor_map tmB,
    const __grid_constant__ tensor_map tmC) {
  extern __shared__ __align__(1024) unsigned char shared_memory[];
  // As: bf16[128, 64] x 3 stages, bytes [0, 49152): A stages
  __nv_bfloat16* const As = reinterpret_cast<__nv_bfloat16*>(shared_memory + 0);
  // Bs: bf16[64, 64] x 3 stages, bytes [49152, 73728): B stages
  __nv_bfloat16* const Bs = reinterpret_cast<__nv_bfloat16*>(shared_memory + 49152);
  // Cs: bf16[128, 64] x 1 stage, bytes [73728, 90112): C tile
  __nv_bfloat16* const Cs = reinterpret_cast<__nv_bfloat16*>(shared_memory + 73728);
  // mbarriers full[3], 1 arrival a phase, bytes [90112, 90136): stage loaded
  const unsigned full_addr = shared_address(shared_memory + 90112);
  // mbarriers empty[3], 1 arrival a phase, bytes [90136, 90160): stage released by the consumers
  const unsigned empty_addr = shared_address(shared_memory + 90136);
  if (shared_address(shared_memory) % 1024u != 0u) __trap();
  const int tid = threadIdx.x;
  const int pid_m = blockIdx.x;  // 0..1
  const int pid_n = blockIdx.y;  // 0..1
  // mbarrier.init full
  if (tid == 0) {
  #pragma unroll
    for (int i = 0; i < 3; ++i) mbarrier_init(full_addr + i * 8u, 1u);
    fence_mbarrier_init();
  }
  // mbarrier.init empty
  if (tid == 0) {
  #pragma unroll
    for (int i = 0; i < 3; ++i) mbarrier_init(empty_addr + i * 8u, 1u);
    fence_mbarrier_init();
  }
  // bar.sync
  __syncthreads();
  // %0 = full 128 : index #L0
  const int v0 = 128;
  // %m0 = mul %pid_m, %0 : index #L0
  const int m0 = pid_m * v0;
  // %1 = full 64 : index #L0
  const int v1 = 64;
  // %n0 = mul %pid_n, %1 : index #L0
  const int n0 = pid_n * v1;
  // roles
  {
    const int warpgroup = threadIdx.x / 128;
    if (warpgroup < 1) {  // role producer: warpgroups [0, 1), 40 registers
      setmaxnreg_dec<40>();
      const int tid = threadIdx.x - 0;
      const unsigned As_addr = shared_address(As);
      const unsigned Bs_addr = shared_address(Bs);
      // for k
      for (int k_1 = 0; k_1 < 6; ++k_1) {
        // %2 = full 3 : index #L1
        const int v2 = 3;
        // %s = mod %k, %2 : index #L1
        const int s_1 = floor_mod(k_1, v2);
        // %3 = full 3 : index #L1
        const int v3 = 3;
        // %round = floordiv %k, %3 : index #L1
        const int round = floor_div(k_1, v3);
        // %4 = full 2 : index #L1
        const int v4 = 2;
        // %phase = mod %round, %4 : index #L1
        const int phase = floor_mod(round, v4);
        // %5 = full 1 : index #L1
        const int v5 = 1;
        // %released = sub %5, %phase : index #L1
        const int released = v5 - phase;
        // mbarrier.wait empty[%s] parity %released
        mbarrier_wait(empty_addr + static_cast<unsigned>(s_1) * 8u, released);
        // mbarrier.arrive.expect_tx full[%s] tx 24576
        if (tid == 0) mbarrier_arrive_expect_tx(full_addr + static_cast<unsigned>(s_1) * 8u, 24576u);
        // %6 = full 64 : index #L1
        const int v6 = 64;
        // %k0 = mul %k, %6 : index #L1
        const int k0 = k_1 * v6;
        // tma.load As[%s][0, 0] <- tmA[%m0, %k0] mbarrier full[%s]
        // 1 box of {64, 128}, 16384 bytes each (layout::plan_tma_tile)
        if (tid == 0) {
          tma_load_2d(As_addr + static_cast<unsigned>(s_1) * 16384u + 0u, &tmA, full_addr + static_cast<unsigned>(s_1) * 8u, k0 + 0, m0 + 0);
        }
        // tma.load Bs[%s][0, 0] <- tmB[%n0, %k0] mbarrier full[%s]
        // 1 box of {64, 64}, 8192 bytes each (layout::plan_tma_tile)
        if (tid == 0) {
          tma_load_2d(Bs_addr + static_cast<unsigned>(s_1) * 8192u + 0u, &tmB, full_addr + static_cast<unsigned>(s_1) * 8u, k0 + 0, n0 + 0);
        }
      }
    } else if (warpgroup < 3) {  // role consumers: warpgroups [1, 3), 232 registers
      setmaxnreg_inc<232>();
      const int tid = threadIdx.x - 128;
      const unsigned smem_base = shared_address(shared_memory);
      const unsigned Cs_addr = shared_address(Cs);
      const unsigned lane_offset = (swizzle((16 * (tid / 32) + tid % 8 + 8 * ((tid / 8) % 2)) * 64 + 8 * ((tid / 16) % 2), 3, 3, 3)) * 2u;
      // %acc0 = full 0.0 : f32[128, 64] #L2
      float acc0[32];
      // not written: the wgmmas that read it start with scale-d 0
      // wgmma.fence
      #pragma unroll
      for (int s = 0; s < 32; ++s) fence_register(acc0[s]);
      wgmma_fence();
      // %first = full 0 : index #L3
      const int first = 0;
      // mbarrier.wait full[%first] parity %first
      mbarrier_wait(full_addr + static_cast<unsigned>(first) * 8u, first);
      // %acc_k0 = wgmma.m64n64k16 As[%first][0, 0], Bs[%first][0, 0]^T, %acc0 k 64 : f32[128, 64] #L2
      // A: As K-major start 0x0 LBO 16 SBO 1024 base 0 SW128
      // B: Bs K-major start 0xc000 LBO 16 SBO 1024 base 0 SW128
      {
        const unsigned long long b_desc = static_cast<unsigned long long>((smem_base + static_cast<unsigned>(first) * 8192u) >> 4);
        const unsigned long long a_desc = static_cast<unsigned long long>((smem_base + static_cast<unsigned>(first) * 16384u) >> 4);
        wgmma_m64n64k16_bf16_ss_00(acc0, a_desc + (tid / 128 == 0 ? 0x4000004000010000ull : 0x4000004000010200ull), b_desc + 0x4000004000010c00ull, 0);
        wgmma_m64n64k16_bf16_ss_00(acc0, a_desc + (tid / 128 == 0 ? 0x4000004000010002ull : 0x4000004000010202ull), b_desc + 0x4000004000010c02ull, 1);
        wgmma_m64n64k16_bf16_ss_00(acc0, a_desc + (tid / 128 == 0 ? 0x4000004000010004ull : 0x4000004000010204ull), b_desc + 0x4000004000010c04ull, 1);
        wgmma_m64n64k16_bf16_ss_00(acc0, a_desc + (tid / 128 == 0 ? 0x4000004000010006ull : 0x4000004000010206ull), b_desc + 0x4000004000010c06ull, 1);
      }
      // wgmma.commit_group
      wgmma_commit_group();
      // for j
      for (int j_1 = 0; j_1 < 5; ++j_1) {
        // %7 = full 1 : index #L3
        const int v7 = 1;
        // %k.1 = add %j, %7 : index #L3
        const int k_1_1 = j_1 + v7;
        // %8 = full 3 : index #L3
        const int v8 = 3;
        // %s.1 = mod %k.1, %8 : index #L3
        const int s_1_1 = floor_mod(k_1_1, v8);
        // %9 = full 3 : index #L3
        const int v9 = 3;
        // %10 = floordiv %k.1, %9 : index #L3
        const int v10 = floor_div(k_1_1, v9);
        // %11 = full 2 : index #L3
        const int v11 = 2;
        // %phase.1 = mod %10, %11 : index #L3
        const int phase_1 = floor_mod(v10, v11);
        // mbarrier.wait full[%s.1] parity %phase.1
        mbarrier_wait(full_addr + static_cast<unsigned>(s_1_1) * 8u, phase_1);
        // %acc_k = wgmma.m64n64k16 As[%s.1][0, 0], Bs[%s.1][0, 0]^T, %acc_i k 64 : f32[128, 64] #L2
        // A: As K-major start 0x0 LBO 16 SBO 1024 base 0 SW128
        // B: Bs K-major start 0xc000 LBO 16 SBO 1024 base 0 SW128
        {
          const unsigned long long b_desc_1 = static_cast<unsigned long long>((smem_base + static_cast<unsigned>(s_1_1) * 8192u) >> 4);
          const unsigned long long a_desc_1 = static_cast<unsigned long long>((smem_base + static_cast<unsigned>(s_1_1) * 16384u) >> 4);
          wgmma_m64n64k16_bf16_ss_00(acc0, a_desc_1 + (tid / 128 == 0 ? 0x4000004000010000ull : 0x4000004000010200ull), b_desc_1 + 0x4000004000010c00ull, 1);
          wgmma_m64n64k16_bf16_ss_00(acc0, a_desc_1 + (tid / 128 == 0 ? 0x4000004000010002ull : 0x4000004000010202ull), b_desc_1 + 0x4000004000010c02ull, 1);
          wgmma_m64n64k16_bf16_ss_00(acc0, a_desc_1 + (tid / 128 == 0 ? 0x4000004000010004ull : 0x4000004000010204ull), b_desc_1 + 0x4000004000010c04ull, 1);
          wgmma_m64n64k16_bf16_ss_00(acc0, a_desc_1 + (tid / 128 == 0 ? 0x4000004000010006ull : 0x4000004000010206ull), b_desc_1 + 0x4000004000010c06ull, 1);
        }
        // wgmma.commit_group
        wgmma_commit_group();
        // wgmma.wait_group 1
        wgmma_wait_group<1>();
        // %12 = full 3 : index #L3
        const int v12 = 3;
        // %previous = mod %j, %12 : index #L3
        const int previous = floor_mod(j_1, v12);
        // mbarrier.arrive empty[%previous]
        named_barrier_sync(15, 256);  // the role's warpgroups are done before the elected arrive
        if (tid == 0) mbarrier_arrive(empty_addr + static_cast<unsigned>(previous) * 8u);
        // yield
      }
      // wgmma.wait_group 0
      wgmma_wait_group<0>();
      #pragma unroll
      for (int s = 0; s < 32; ++s) fence_register(acc0[s]);
      // %last = full 2 : index #L3
      const int last = 2;
      // mbarrier.arrive empty[%last]
      named_barrier_sync(15, 256);  // the role's warpgroups are done before the elected arrive
      if (tid == 0) mbarrier_arrive(empty_addr + static_cast<unsigned>(last) * 8u);
      // %c16 = cast %acc : bf16[128, 64] #L2
      __nv_bfloat16 c16[32];
      #pragma unroll
      for (int s = 0; s < 32; s += 2) {
        const __nv_bfloat162 pair = __floats2bfloat162_rn(acc0[s], acc0[s + 1]);
        c16[s] = pair.x;
        c16[s + 1] = pair.y;
      }
      // stmatrix.x4 Cs[0, 0], %c16
      stmatrix_x4((Cs_addr + lane_offset), pack2(c16[0], c16[1]), pack2(c16[2], c16[3]), pack2(c16[4], c16[5]), pack2(c16[6], c16[7]));
      stmatrix_x4((Cs_addr + (lane_offset ^ 32u)), pack2(c16[8], c16[9]), pack2(c16[10], c16[11]), pack2(c16[12], c16[13]), pack2(c16[14], c16[15]));
      stmatrix_x4((Cs_addr + (lane_offset ^ 64u)), pack2(c16[16], c16[17]), pack2(c16[18], c16[19]), pack2(c16[20], c16[21]), pack2(c16[22], c16[23]));
      stmatrix_x4((Cs_addr + (lane_offset ^ 96u)), pack2(c16[24], c16[25]), pack2(c16[26], c16[27]), pack2(c16[28], c16[29]), pack2(c16[30], c16[31]));
      // fence.proxy.async
      fence_proxy_async();
      // bar.sync 1, 256
      named_barrier_sync(1, 256);
      // tma.store tmC[%m0, %n0] <- Cs[0, 0]
      // 1 box of {64, 128}, 16384 bytes each (layout::plan_tma_tile)
      if (tid == 0) {
        tma_store_2d(&tmC, Cs_addr + 0u, n0 + 0, m0 + 0);
      }
      // cp.async.bulk.commit_group
      if (tid == 0) bulk_commit_group();
      // cp.async.bulk.wait_group.read 0
      if (tid == 0) bulk_wait_group_read<0>();
    }
  }
}
