#!/usr/bin/env python3
"""FP8 and mixed-type GEMM on Hopper: our e4m3 x e4m3 kernels (wgmma's 8-bit form on K-major
operands) against torch._scaled_mm, and bf16 activations x int8 weights with per-group scales
against bf16 cuBLAS on the dequantized weights and the DRAM floor, in the same job.

Rows: C[M, N] bf16 = (A[M, K] B[N, K]^T) * SA * SB with A and B fp8e4m3, per-tensor f32 scales
(assets/specs/fp8_gemm_nt.nt, torch._scaled_mm's operand layout), at 8192^3 and 4096^3; and, for
the record, assets/specs/fp8_gemm.nt (B[K, N], N-major: the widened mma.sync path) at 4096^3.
Mixed type: Y[M, N] bf16 = X[M, K] bf16 x W[K, N] int8 x S[K / 128, N] bf16
(assets/specs/int8_weight_gemm.nt), and the same with int4 weights W[N, K] packed two to a byte
(assets/specs/int4_weight_gemm.nt; second peer: PyTorch's int4 weight-only kernel,
torch._weight_int4pack_mm, where it runs), at N = K = 4096, decode-like (M 1 and 16: the weights' DRAM
traffic is the floor) and prefill-like (M 4096); its peer is torch.matmul on X and the weights
dequantized to bf16 beforehand (cuBLAS), and the DRAM floor is the bytes moved (X, W, S, Y) at
the measuring GPU's DRAM bandwidth (3.35 TB/s on an H100, 4.8 on an H200). Two decode rows at a
70B-class projection (K 8192, N 28672) give a floor of tens of µs.

Step 1, `prepare` (development machine, after a build): per row `nautilus schedule --arch sm_90a`
searches, then every variant is compiled for sm_90a (`searched`; `hand`: the asset's hand schedule
from assets/schedules) at the row's sizes and once more at validation sizes that are not tile
multiples (M 1000, N 744, K 1040: every row stride a multiple of 16 bytes, as TMA needs), beside
the unscheduled package at those sizes as the reference.
Step 2, `pack DEST` (development machine): a copy for the GPU machine: manifest, packages without
PTX, this script, the stripped runner and the C++ runtime it was linked with.
Step 3, `measure` (GPU machine, from DEST): validates every variant against the reference, times
each package with nautilus-runner (CUPTI medians, L2 flushed; two runs, the better kept) and
torch._scaled_mm(A, B.t(), scale_a, scale_b, out_dtype=torch.bfloat16) on inputs of the same
shapes and dtypes (CUDA events, L2 flushed, median of 30), then prints a table and writes
fp8_gemm.md and fp8_gemm.json into $OUT (or the bench folder when $OUT is not set) after every row.

Usage: python3 bench/fp8_gemm.py prepare [--only ROW...] [--device h100|h200]
       python3 bench/fp8_gemm.py pack DEST
       python3 DEST/fp8_gemm.py measure [--reps N] [--only ROW...] [--no-peers]
Writes bench/out-fp8/ (git-ignored; $NAUTILUS_FP8_BENCH names another folder). A DEST inside the
repository such as bench/out-fp8-pack (git-ignored too, about 4 MB) travels to a GPU machine as
one folder; measure needs only what is in it (and torch for the peer).
"""
import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import l2flush  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
# In the repository the script sits in bench/; in a packed copy, at the copy's root.
ROOT = os.path.dirname(HERE) if os.path.basename(HERE) == "bench" else None
BENCH = os.environ.get("NAUTILUS_FP8_BENCH",
                       os.path.join(ROOT, "bench", "out-fp8") if ROOT else HERE)

# name, spec, M, N, K, variants (labels; `hand` is assets/schedules/SPEC.json, others in PINNED)
ROWS = [
    ("nt_8192", "fp8_gemm_nt", 8192, 8192, 8192, ("searched", "hand")),
    ("nt_4096", "fp8_gemm_nt", 4096, 4096, 4096, ("searched", "hand")),
    ("nn_4096_widened", "fp8_gemm", 4096, 4096, 4096, ("searched", "hand", "pick32", "tuned32")),
    ("w8_m1", "int8_weight_gemm", 1, 4096, 4096, ("searched", "hand", "split8", "rows1")),
    ("w8_m16", "int8_weight_gemm", 16, 4096, 4096, ("searched", "hand")),
    ("w8_m4096", "int8_weight_gemm", 4096, 4096, 4096, ("searched", "hand", "tile128x64")),
    # A 70B-class MLP projection (K 8192, N 28672): 235 MB of weights, a floor of tens of µs, so
    # the launch and the ramp no longer dominate a decode step.
    ("w8_m1_k8192_n28672", "int8_weight_gemm", 1, 28672, 8192, ("searched", "rows1n16")),
    ("w8_m16_k8192_n28672", "int8_weight_gemm", 16, 28672, 8192, ("searched",)),
    # int4 weights, nn.Linear's [out, in] = [N, K] packed two to a byte along K
    # (assets/specs/int4_weight_gemm.nt): read through global loads (no shared-memory staging).
    ("w4_m1", "int4_weight_gemm", 1, 4096, 4096, ("searched", "hand")),
    ("w4_m16", "int4_weight_gemm", 16, 4096, 4096, ("searched", "hand")),
    ("w4_m4096", "int4_weight_gemm", 4096, 4096, 4096, ("searched", "hand")),
    ("w4_m1_k8192_n28672", "int4_weight_gemm", 1, 28672, 8192, ("searched",)),
    ("w4_m16_k8192_n28672", "int4_weight_gemm", 16, 28672, 8192, ("searched",)),
]
# Variants searched with a pin (the search completes the rest of the schedule): what a
# decision the search did not take gives, measured beside its pick.
PINNED = {
    "split8": ["split_k_update(Y_sum, k, splits=8)"],
    "tile128x64": ["tile(Y_sum, m=128, n=64, k=128)"],
    "rows1": ["tile(Y_sum, m=1, n=64, k=128)"],  # the decode row on tensor cores, atom rows repeated
    "rows1n16": ["tile(Y_sum, m=1, n=16, k=128)"],  # twice the CTAs of the 32-column tile
}
# Variants compiled as written: the widened path's pick before the register estimate counted its
# byte fragments (it spills, tests/cost/registers_test.cpp), and the tuner's best on the H200
# (tuning database record 402, bench/RESULTS.md 2026-11-28).
FIXED = {
    "pick32": ["tile(C_sum, m=128, n=128, k=128)", "reverse_compute_at(C, C_sum, n_o)",
               "bind(C_sum, n_o=grid.y, m_o=grid.x)"],
    "tuned32": ["tile(C_sum, m=64, n=256, k=32)", "reverse_compute_at(C, C_sum, n_o)",
                "launch(C_sum, warps=4, stages=1)", "bind(C_sum, m_o=grid.y, n_o=grid.x)"],
}
# Validation sizes that are not tile multiples (K a multiple of the 128-row scale groups).
VALIDATION = {"M": 1000, "N": 744, "K": 1040}
VALIDATION_GROUPED = {"M": 1000, "N": 744, "K": 1024}
GROUP = 128  # int8_weight_gemm's rows of W per scale
# DRAM bandwidth per device name (bytes per µs): H100 SXM HBM3 3.35 TB/s, H200 HBM3e 4.8 TB/s.
DRAM_BYTES_PER_US = {"H200": 4.8e6, "H100": 3.35e6}


def dram_bytes_per_us(device):
    for name, rate in DRAM_BYTES_PER_US.items():
        if name in device:
            return rate
    return DRAM_BYTES_PER_US["H100"]


def grouped(spec):
    return spec in ("int8_weight_gemm", "int4_weight_gemm")


def validation_sizes(spec):
    return VALIDATION_GROUPED if grouped(spec) else VALIDATION


def defines(m, n, k, spec=""):
    out = ["-D", f"M={m}", "-D", f"N={n}", "-D", f"K={k}"]
    return out + ["-D", f"KG={k // GROUP}"] if grouped(spec) else out


def dram_floor_us(spec, m, n, k, device=""):
    """Microseconds to move the kernel's operands and result once at the device's DRAM bandwidth."""
    if grouped(spec):
        weight_bytes = k * n // 2 if spec == "int4_weight_gemm" else k * n
        moved = m * k * 2 + weight_bytes + (k // GROUP) * n * 2 + m * n * 2
    else:
        moved = m * k + n * k + m * n * 2
    return moved / dram_bytes_per_us(device)


def nautilus(*args, timeout=900):
    # A copy taken when prepare starts: a rebuild during the run does not change the compiler.
    return subprocess.run([os.path.join(BENCH, "bin", "nautilus"), *args], capture_output=True,
                          text=True, timeout=timeout)


def prepare(only, device):
    if ROOT is None:
        sys.exit("prepare runs from the repository (bench/fp8_gemm.py)")
    os.makedirs(os.path.join(BENCH, "pk"), exist_ok=True)
    os.makedirs(os.path.join(BENCH, "bin"), exist_ok=True)
    for name in ("nautilus", "nautilus-runner"):
        shutil.copy2(os.path.join(ROOT, "build", "app", name), os.path.join(BENCH, "bin", name))
    path = os.path.join(BENCH, "manifest.json")
    kept = [e for e in json.load(open(path)) if only and e["name"] not in only] if os.path.exists(path) else []
    manifest = list(kept)
    references = {}
    for name, spec, m, n, k, labels in ROWS:
        if only and name not in only:
            continue
        spec_path = os.path.join(ROOT, "assets", "specs", spec + ".nt")
        entry = {"name": name, "spec": spec, "M": m, "N": n, "K": k, "variants": {}}
        schedules = {}
        if "searched" in labels:
            searched = os.path.join(BENCH, "pk", name + ".searched.json")
            start = time.time()
            done = nautilus("schedule", spec_path, *defines(m, n, k, spec), "--ignore-db",
                            "--device", device, "-o", searched)
            entry["search_seconds"] = round(time.time() - start, 2)
            entry["search_output"] = done.stdout[-3000:] + done.stderr[-1000:]
            if done.returncode == 0:
                schedules["searched"] = json.load(open(searched))["decisions"]
            else:
                entry["variants"]["searched"] = {"ok": False, "error": "schedule failed: " + done.stderr[-300:]}
        for label in labels:
            if label not in PINNED:
                continue
            pinned = os.path.join(BENCH, "pk", f"{name}.{label}.searched.json")
            pins = [arg for pin in PINNED[label] for arg in ("--pin", pin)]
            done = nautilus("schedule", spec_path, *defines(m, n, k, spec), "--ignore-db", "--device", device,
                            *pins, "-o", pinned)
            if done.returncode == 0:
                schedules[label] = json.load(open(pinned))["decisions"]
            else:
                entry["variants"][label] = {"ok": False, "error": "schedule failed: " + done.stderr[-300:]}
        for label in labels:
            if label in FIXED:
                schedules[label] = FIXED[label]
        if "hand" in labels:
            hand = os.path.join(ROOT, "assets", "schedules", spec + ".json")
            schedules["hand"] = json.load(open(hand))["decisions"]
        valid = validation_sizes(spec)
        if spec not in references:
            ref = os.path.join(BENCH, "pk", "ref_" + spec)
            r = nautilus("compile", spec_path, "--arch", "sm_90a", *defines(valid["M"], valid["N"], valid["K"], spec), "-o", ref)
            references[spec] = os.path.basename(ref) if r.returncode == 0 else None
            if r.returncode != 0:
                print(name, "reference failed:", (r.stderr or r.stdout)[-300:], flush=True)
        entry["reference_package"] = references[spec]
        for label, decisions in schedules.items():
            schedule_path = os.path.join(BENCH, "pk", f"{name}.{label}.json")
            json.dump({"decisions": decisions}, open(schedule_path, "w"), indent=2)
            package = os.path.join(BENCH, "pk", f"{name}__{label}")
            c = nautilus("compile", spec_path, "--arch", "sm_90a", "--schedule", schedule_path,
                         *defines(m, n, k, spec), "-o", package)
            v = nautilus("compile", spec_path, "--arch", "sm_90a", "--schedule", schedule_path,
                         *defines(valid["M"], valid["N"], valid["K"], spec), "-o", package + "__validate")
            ok = c.returncode == 0 and v.returncode == 0
            instructions = ""
            ptx = os.path.join(package, "kernel.sm_90a.ptx")
            if c.returncode == 0 and os.path.exists(ptx):
                # The MMA instructions the kernel really issues (the PTX holds only those used).
                found = sorted(set(re.findall(r"(wgmma\.mma_async\.sync\.aligned\.m64n\d+k\d+\.f32\.\w+\.\w+"
                                              r"|mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.\w+\.\w+\.f32"
                                              r"|fma\.rn\.f32)",
                                              open(ptx).read())))
                instructions = ", ".join(found)
            entry["variants"][label] = {
                "decisions": decisions, "ok": ok, "instructions": instructions,
                "package": os.path.basename(package), "validation_package": os.path.basename(package) + "__validate",
                "error": None if ok else ((c.stderr or c.stdout) + (v.stderr or v.stdout))[-400:]}
        manifest.append(entry)
        json.dump(manifest, open(path, "w"), indent=1)  # after each row: an interrupted run keeps its work
        print(name, {k: (v["ok"], v.get("instructions")) for k, v in entry["variants"].items()},
              f"search {entry.get('search_seconds', '-')} s", flush=True)


def pack(dest):
    """The GPU machine's copy: manifest, packages without PTX (the runner loads the cubin), the
    stripped runner, and the libstdc++ / libgcc_s it was linked with (the GPU host's may be older)."""
    if os.path.exists(dest):
        shutil.rmtree(dest)
    os.makedirs(os.path.join(dest, "bin"))
    shutil.copy2(os.path.join(BENCH, "manifest.json"), dest)
    shutil.copy2(os.path.abspath(__file__), dest)
    shutil.copy2(l2flush.__file__, dest)
    runner = os.path.join(BENCH, "bin", "nautilus-runner")
    subprocess.run(["strip", "-o", os.path.join(dest, "bin", "nautilus-runner"), runner], check=True)
    for line in subprocess.run(["ldd", runner], capture_output=True, text=True).stdout.splitlines():
        m = re.search(r"(libstdc\+\+\.so\.6|libgcc_s\.so\.1) => (\S+)", line)
        if m:
            shutil.copy2(m.group(2), os.path.join(dest, "bin", m.group(1)))
    for package in os.listdir(os.path.join(BENCH, "pk")):
        source = os.path.join(BENCH, "pk", package)
        if not os.path.isdir(source):
            continue
        target = os.path.join(dest, "pk", package)
        os.makedirs(target)
        for f in os.listdir(source):
            if f.endswith(".cubin") or f in ("kernel.cu", "ptxas.json"):
                shutil.copy2(os.path.join(source, f), target)
        launch = json.load(open(os.path.join(source, "launch.json")))
        launch.pop("ptx", None)
        json.dump(launch, open(os.path.join(target, "launch.json"), "w"))
    print("packed", dest, subprocess.run(["du", "-sh", dest], capture_output=True, text=True).stdout.split()[0])


def run_runner(args, timeout=600):
    runner = os.path.join(BENCH, "bin", "nautilus-runner")
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.path.join(BENCH, "bin") + ":" + env.get("LD_LIBRARY_PATH", "")
    try:
        done = subprocess.run([runner, *args, *l2flush.runner_args()], capture_output=True, text=True, timeout=timeout, env=env)
        return json.loads(done.stdout)
    except (subprocess.TimeoutExpired, json.JSONDecodeError) as error:
        return {"error": str(error)[-300:]}


def scaled_mm_time(m, n, k, reps=30):
    """torch._scaled_mm on A[M, K] and B[N, K] in float8_e4m3fn (B passed transposed: the K-major
    "column-major" operand it requires), f32 scales, bf16 output: median microseconds."""
    import torch
    a = (torch.randn(m, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    b = (torch.randn(n, k, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    scale_a = torch.tensor(1.25, device="cuda")
    scale_b = torch.tensor(0.75, device="cuda")
    return timed(lambda: torch._scaled_mm(a, b.t(), scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16),
                 reps)


def dequantized_matmul_time(m, n, k, reps=30):
    """torch.matmul (cuBLAS) of X[M, K] bf16 and the int8 weights dequantized to bf16 beforehand
    (W * S per 128-row group): the bf16 GEMM the mixed-type kernel replaces. Median microseconds."""
    import torch
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randint(-127, 128, (k, n), device="cuda", dtype=torch.int8)
    s = torch.rand(k // GROUP, n, device="cuda", dtype=torch.bfloat16)
    dequantized = (w.to(torch.bfloat16) * s.repeat_interleave(GROUP, dim=0)).contiguous()
    return timed(lambda: torch.matmul(x, dequantized), reps)


def int4_dequantized_matmul_time(m, n, k, reps=30):
    """torch.matmul (cuBLAS) of X[M, K] bf16 and int4 weights [N, K] dequantized to bf16
    beforehand: the bf16 GEMM the mixed-type kernel replaces. Median microseconds."""
    import torch
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randint(-8, 8, (n, k), device="cuda", dtype=torch.int8)
    s = torch.rand(k // GROUP, n, device="cuda", dtype=torch.bfloat16)
    dequantized = (w.to(torch.bfloat16) * s.t().repeat_interleave(GROUP, dim=1)).contiguous()
    return timed(lambda: torch.matmul(x, dequantized.t()), reps)


def int4_weight_only_time(m, n, k, reps=30):
    """PyTorch's int4 weight-only kernel, torch._weight_int4pack_mm (tinygemm: its own tiled
    packing of [N, K / 2] bytes, bf16 scales and zero points per group of 128 along K).
    Median microseconds; raises where this torch or GPU has no such kernel."""
    import torch
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randint(0, 256, (n, k // 2), device="cuda", dtype=torch.uint8)
    packed = torch._convert_weight_to_int4pack(w, 8)
    scales_and_zeros = torch.rand(k // GROUP, n, 2, device="cuda", dtype=torch.bfloat16)
    return timed(lambda: torch._weight_int4pack_mm(x, packed, GROUP, scales_and_zeros), reps)


def timed(call, reps):
    import torch
    flush = l2flush.buffer(torch)
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        l2flush.empty_l2(flush)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    return sorted(times)[len(times) // 2]


def peer_time(spec, m, n, k):
    """The row's peer: (what it is, median microseconds)."""
    if spec == "int4_weight_gemm":
        return "cuBLAS bf16 on dequantized W", int4_dequantized_matmul_time(m, n, k)
    if grouped(spec):
        return "cuBLAS bf16 on dequantized W", dequantized_matmul_time(m, n, k)
    return "torch._scaled_mm", scaled_mm_time(m, n, k)


def second_peer_time(spec, m, n, k):
    """A row's second peer, where it has one: (what it is, median microseconds), or None."""
    if spec == "int4_weight_gemm":
        return "torch._weight_int4pack_mm", int4_weight_only_time(m, n, k)
    return None


def measure(reps, only, peers):
    manifest = json.load(open(os.path.join(BENCH, "manifest.json")))
    device = ""
    try:
        device = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    labels = []
    for entry in manifest:
        for label in entry.get("variants", {}):
            if label not in labels:
                labels.append(label)
    results = []
    for entry in manifest:
        if only and entry["name"] not in only:
            continue
        row = {"name": entry["name"], "spec": entry["spec"], "M": entry["M"], "N": entry["N"], "K": entry["K"],
               "us": {}, "validation": {}, "instructions": {}}
        for label, variant in entry.get("variants", {}).items():
            row["instructions"][label] = variant.get("instructions")
            if not variant.get("ok"):
                row["us"][label] = None
                row["validation"][label] = "not compiled"
                continue
            if entry.get("reference_package"):
                r = run_runner([os.path.join(BENCH, "pk", variant["validation_package"]), "--reference",
                                os.path.join(BENCH, "pk", entry["reference_package"]), "--reps", "3", "--warmup", "1"])
                val = r.get("validation") or {}
                row["validation"][label] = (f"{val.get('status')} {val.get('max_relative_error')}" if val
                                            else str(r.get("errors") or r.get("error"))[:200])
            best = None
            for _ in range(2):
                r = run_runner([os.path.join(BENCH, "pk", variant["package"]), "--reps", str(reps), "--warmup", "5"])
                t = ((r.get("timing") or {}).get("total") or {}).get("median_us")
                if t and (best is None or t < best):
                    best = t
                if not t and "timing_error" not in row:
                    row["timing_error"] = str(r.get("errors") or r.get("error"))[:300]
            row["us"][label] = best
        row["dram_floor"] = dram_floor_us(entry["spec"], entry["M"], entry["N"], entry["K"], device)
        if peers:
            try:
                row["peer_name"], row["scaled_mm"] = peer_time(entry["spec"], entry["M"], entry["N"], entry["K"])
            except Exception as error:  # no torch, or a torch without float8 support
                row["scaled_mm"] = None
                row["scaled_mm_error"] = str(error)[:200]
            try:
                second = second_peer_time(entry["spec"], entry["M"], entry["N"], entry["K"])
                if second:
                    row["peer2_name"], row["peer2"] = second
            except Exception as error:  # a torch without the kernel, or a GPU it does not run on
                row["peer2_error"] = str(error)[:200]
        results.append(row)
        print(row["name"], {k: (round(v, 1) if v else v) for k, v in row["us"].items()},
              "scaled_mm", row.get("scaled_mm") and round(row["scaled_mm"], 1), row["validation"], flush=True)
        write(results, labels, device, started, reps)
    print()
    print(open(os.path.join(os.environ.get("OUT") or BENCH, "fp8_gemm.md")).read())


def write(results, labels, device, started, reps):
    tflops = lambda r, us: 2.0 * r["M"] * r["N"] * r["K"] / (us * 1e-6) / 1e12 if us else None
    fmt = lambda v, n=1: f"{v:.{n}f}" if v else "-"
    lines = [f"Device {device or '?'}, {started}; nautilus-runner best of two CUPTI medians of {reps}, "
             "L2 flushed; the peer (torch._scaled_mm on A[M, K] @ B[N, K].t(), e4m3, f32 scales, bf16 out; "
             "or torch.matmul in bf16 on the dequantized weights): median of 30 CUDA-event timings, L2 "
             f"flushed. DRAM floor: the bytes of the operands and the result once at "
             f"{dram_bytes_per_us(device) / 1e6:.2f} TB/s.", ""]
    lines.append("| row | spec | " + " | ".join(f"{l} µs (TFLOP/s)" for l in labels) +
                 " | peer | peer µs (TFLOP/s) | " + " | ".join(f"peer / {l}" for l in labels) +
                 " | DRAM floor µs | " + " | ".join(f"floor / {l}" for l in labels) +
                 " | validation | instructions |")
    lines.append("|---" * (3 * len(labels) + 7) + "|")
    for r in results:
        ours = [f"{fmt(r['us'].get(l))} ({fmt(tflops(r, r['us'].get(l)), 0)})" for l in labels]
        peer = r.get("scaled_mm")
        ratios = [fmt(peer / r["us"][l], 3) if peer and r["us"].get(l) else "-" for l in labels]
        floor = r.get("dram_floor")
        floors = [fmt(floor / r["us"][l], 3) if floor and r["us"].get(l) else "-" for l in labels]
        lines.append(f"| {r['name']} | {r['spec']} {r['M']}x{r['N']}x{r['K']} | " + " | ".join(ours) +
                     f" | {r.get('peer_name', '-')} | {fmt(peer)} ({fmt(tflops(r, peer), 0)}) | " +
                     " | ".join(ratios) + f" | {fmt(floor, 2)} | " + " | ".join(floors) + " | " +
                     "; ".join(f"{l}: {v}" for l, v in r["validation"].items()) + " | " +
                     "; ".join(f"{l}: {v}" for l, v in r["instructions"].items() if v) + " |")
    lines.append("")
    for r in results:
        if r.get("peer2"):
            searched = r["us"].get("searched")
            lines.append(f"- {r['name']}: {r['peer2_name']} {fmt(r['peer2'])} µs" +
                         (f", {r['peer2_name']} / searched {fmt(r['peer2'] / searched, 3)}" if searched else ""))
    for r in results:
        for key in ("timing_error", "scaled_mm_error", "peer2_error"):
            if r.get(key):
                lines.append(f"- {r['name']} {key}: {r[key]}")
    text = "\n".join(lines) + "\n"
    for folder in {BENCH, os.environ.get("OUT") or BENCH}:
        os.makedirs(folder, exist_ok=True)
        open(os.path.join(folder, "fp8_gemm.md"), "w").write(text)
        json.dump(results, open(os.path.join(folder, "fp8_gemm.json"), "w"), indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--only", nargs="*")
    p.add_argument("--device", default="h100", help="the cost model's GPU for the search (h100, h200)")
    k = sub.add_parser("pack")
    k.add_argument("dest")
    m = sub.add_parser("measure")
    m.add_argument("--reps", type=int, default=20)
    m.add_argument("--only", nargs="*")
    m.add_argument("--no-peers", action="store_true")
    args = parser.parse_args()
    if args.step == "prepare":
        prepare(args.only, args.device)
    elif args.step == "pack":
        pack(os.path.abspath(args.dest))
    else:
        measure(args.reps, args.only, not args.no_peers)


if __name__ == "__main__":
    main()
