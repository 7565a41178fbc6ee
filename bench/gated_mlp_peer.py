# The gated MLP in PyTorch (cuBLAS bf16 GEMMs, silu * mul in between), timed like the variants'
# peers: CUDA events around the call, L2 flushed by a read before each repetition. On a GPU
# machine, from the repository root: python3 bench/gated_mlp_peer.py (the sizes of
# assets/specs/gated_mlp.nt; bench/RESULTS.md compares it with the compiler's kernels).
import statistics, sys, torch
sys.path.insert(0, "bench")
import l2flush
T, H, F = 4096, 4096, 11008
torch.manual_seed(0)
X = torch.randn(T, H, device="cuda", dtype=torch.bfloat16)
Wg = torch.randn(H, F, device="cuda", dtype=torch.bfloat16) / H ** 0.5
Wu = torch.randn(H, F, device="cuda", dtype=torch.bfloat16) / H ** 0.5
Wd = torch.randn(F, H, device="cuda", dtype=torch.bfloat16) / F ** 0.5
def eager():
    return (torch.nn.functional.silu(X @ Wg) * (X @ Wu)) @ Wd
Wgu = torch.cat([Wg, Wu], dim=1)
def fused_gate_up():
    gu = X @ Wgu
    return (torch.nn.functional.silu(gu[:, :F]) * gu[:, F:]) @ Wd
flush = l2flush.buffer(torch)
for name, fn in (("eager", eager), ("gate_up_one_gemm", fused_gate_up)):
    for _ in range(3): fn()
    times = []
    for _ in range(20):
        l2flush.empty_l2(flush)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    print(f"gated_mlp peer {name}: {statistics.median(times):.1f} us (median of 20)")
