#!/usr/bin/env python3
"""Benchmark, step 2 (on the GPU machine): runs the packages bench/prepare.sh compiled through
nautilus-runner (validation first, then CUPTI timing with L2 flushes), and in the same job the
peers of ANCHORS.md — PyTorch SDPA with the flash (FA2) and cuDNN backends, FlexAttention and
cuBLAS — on the same configurations, then prints one table of TFLOP/s and our ratio to each peer
and writes bench/out/results.md and bench/out/results.json.

Usage (from the repository root): python3 bench/measure.py [--no-flex] [--reps N]
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys

import l2flush

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out")


def run_runner(args, timeout=300):
    command = [os.path.join(OUT, "nautilus-runner")] + args + l2flush.runner_args()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"errors": [{"kind": "timeout", "message": f"over {timeout} s"}]}, command
    try:
        return json.loads(done.stdout), command
    except json.JSONDecodeError:
        return {"errors": [{"kind": "malformed_output", "message": done.stderr[-500:]}]}, command


def attention_flops(b, h, s, d, causal):
    return 4.0 * b * h * s * s * d / (2 if causal else 1)


def timed(fn, reps):
    """Median milliseconds of `fn` over `reps` runs, L2 flushed before each (CUDA events)."""
    import torch
    flush = l2flush.buffer(torch)
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        l2flush.empty_l2(flush)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def peers_attention(b, h, s, d, causal, reps, flex):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn_like(q)
    v = torch.randn_like(q)
    result = {}
    for name, backend in (("fa2", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        try:
            with sdpa_kernel(backend):
                result[name] = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), reps)
        except Exception as error:  # a backend that does not support the shape
            result[name] = None
            print(f"  {name}: {error}", file=sys.stderr)
    if flex:
        try:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            import torch._dynamo
            # Every shape recompiles; past the default limit of 8, dynamo falls back to eager.
            torch._dynamo.config.recompile_limit = 64
            compiled = torch.compile(flex_attention)
            mask = None
            if causal:
                mask = create_block_mask(lambda bb, hh, qi, ki: qi >= ki, None, None, s, s)
            result["flex"] = timed(lambda: compiled(q, k, v, block_mask=mask), reps)
        except Exception as error:
            result["flex"] = None
            print(f"  flex: {error}", file=sys.stderr)
    return result


def peers_gemm(n, reps):
    import torch
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    return {"cublas": timed(lambda: a @ b, reps)}


def tflops(flops, ms):
    return None if not ms else flops / ms / 1e9


def fmt(value, digits=0):
    return "–" if value is None else f"{value:.{digits}f}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-flex", action="store_true", help="skip FlexAttention (compiles per shape)")
    parser.add_argument("--reps", type=int, default=30)
    options = parser.parse_args()
    import torch
    names = open(os.path.join(OUT, "packages.txt")).read().split()
    device = torch.cuda.get_device_name()
    print(f"device: {device}, torch {torch.__version__}, "
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC", flush=True)

    validation = []
    for name in names:
        if not name.startswith("validate_"):
            continue
        reference = name.replace("validate_", "reference_", 1)
        report, _ = run_runner([os.path.join(OUT, "packages", name), "--reference",
                                os.path.join(OUT, "packages", reference), "--reps", "3", "--warmup", "1"])
        v = report.get("validation", {})
        validation.append({"package": name, "status": v.get("status"), "max_relative_error":
                           v.get("max_relative_error"), "errors": report.get("errors")})
        print(f"validate {name}: {v.get('status')} (max relative error {v.get('max_relative_error')})",
              flush=True)

    rows = []
    for name in names:
        m = re.match(r"attention_B(\d+)_H(\d+)_S(\d+)_D(\d+)_(yes|no)$", name)
        g = re.match(r"gemm_(\d+)$", name)
        if not m and not g:
            continue
        report, _ = run_runner([os.path.join(OUT, "packages", name), "--reps", str(options.reps),
                                "--warmup", "5"])
        total = (report.get("timing") or {}).get("total") or {}
        ours_ms = total.get("median_us", 0) / 1000 or None
        if m:
            b, h, s, d = (int(x) for x in m.groups()[:4])
            causal = m.group(5) == "yes"
            flops = attention_flops(b, h, s, d, causal)
            peer = peers_attention(b, h, s, d, causal, options.reps, not options.no_flex)
            label = f"attention B={b} H={h} S={s} D={d}{' causal' if causal else ''}"
        else:
            n = int(g.group(1))
            flops = 2.0 * n ** 3
            peer = peers_gemm(n, options.reps)
            label = f"gemm {n}³"
        row = {"config": label, "ours_ms": ours_ms, "ours_tflops": tflops(flops, ours_ms),
               "errors": report.get("errors")}
        for key, ms in peer.items():
            row[key + "_ms"] = ms
            row[key + "_tflops"] = tflops(flops, ms)
            row["ratio_" + key] = (ms / ours_ms) if ms and ours_ms else None
        rows.append(row)
        print(json.dumps(row), flush=True)

    lines = [f"Device: {device}; torch {torch.__version__}; "
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}; command: "
             "`bench/prepare.sh` then `python3 bench/measure.py`", "",
             "| configuration | ours TFLOP/s | FA2 | cuDNN | Flex | cuBLAS | ours / FA2 | ours / cuDNN | ours / Flex | ours / cuBLAS |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| " + " | ".join([
            r["config"], fmt(r["ours_tflops"]), fmt(r.get("fa2_tflops")), fmt(r.get("cudnn_tflops")),
            fmt(r.get("flex_tflops")), fmt(r.get("cublas_tflops")), fmt(r.get("ratio_fa2"), 2),
            fmt(r.get("ratio_cudnn"), 2), fmt(r.get("ratio_flex"), 2), fmt(r.get("ratio_cublas"), 2)]) + " |")
    lines += ["", "Validation (scheduled vs unscheduled lowering, same inputs):", ""]
    for v in validation:
        lines.append(f"- {v['package']}: {v['status']}, max relative error {v['max_relative_error']}")
    table = "\n".join(lines)
    print(table)
    open(os.path.join(OUT, "results.md"), "w").write(table + "\n")
    json.dump({"device": device, "rows": rows, "validation": validation},
              open(os.path.join(OUT, "results.json"), "w"), indent=2)


if __name__ == "__main__":
    main()
