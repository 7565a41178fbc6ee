"""How the benchmarks empty L2 before each timed repetition, for our kernels (nautilus-runner's
--flush) and the PyTorch peers alike, so both sides start every repetition the same way.

NAUTILUS_L2_FLUSH=read (default): a reduction reads a 256 MB buffer. L2 is left full of clean
lines, which the timed kernel's misses evict for free.
NAUTILUS_L2_FLUSH=write: the buffer is zeroed. L2 is left full of dirty lines, and the timed
kernel pays their write-back to DRAM (up to the L2's size: about 10 µs on an H200), which inflates
short memory-bound kernels. Kept to compare with numbers taken before 2026-11-28.
NAUTILUS_L2_FLUSH=none: nothing.

After the flush, in every mode, the GPU spins for about 200 µs (torch.cuda._sleep) before the
timed call's start event: by then the CPU has queued the event and the call, so a peer's CPU
dispatch cost (tens of µs for an SDPA call) is never timed as GPU idle time between the start
event and its kernel. Without it the decode peers' times moved by 20 µs between jobs with the
flush mode alone (2026-11-28). Our kernels are timed by CUPTI on the GPU and need no such wait.
"""
import os

MODE = os.environ.get("NAUTILUS_L2_FLUSH", "read")
if MODE not in ("read", "write", "none"):
    raise SystemExit(f"NAUTILUS_L2_FLUSH must be read, write or none, not {MODE!r}")


def runner_args():
    """nautilus-runner's option for the same flush."""
    return ["--flush", MODE]


def buffer(torch):
    """The flush buffer: 256 MB, more than twice the L2 of any current GPU."""
    flush = torch.empty(256 * 1024 * 1024 // 4, device="cuda")
    flush.fill_(1.0)
    return flush


SPIN_CYCLES = 400_000  # about 200 µs at 2 GHz


def empty_l2(flush):
    """Queues one flush of L2 on the current stream, then the GPU-side wait described above."""
    import torch
    if MODE == "read":
        flush.sum()
    elif MODE == "write":
        flush.zero_()
    torch.cuda._sleep(SPIN_CYCLES)
