#!/usr/bin/env python3
"""Held-out variant suite (issue 17): operator variants from public model families, written in
the spec language as a user would (bench/variants/*.nt), compiled with the schedule that
`nautilus schedule` finds and timed on an H100 against the best PyTorch peer.

Three steps, from the repository root:

  python3 bench/variants.py check [--build DIR] [--only NAME...]
      (development machine) `nautilus check` and `nautilus eval` (scalar stage, small sizes)
      of every spec: the unscheduled program against the float64 reference.
  python3 bench/variants.py prepare [--build DIR] [--only NAME...] [--search-timeout S]
      [--reuse-schedules] [--device NAME]
      (development machine) per variant: the search at the realistic sizes (one at a time, wall
      time and estimate recorded, a timeout recorded as such), then on every core: the package
      at the realistic sizes, a validation package at reduced sizes with its unscheduled
      reference, the inputs and float64 reference at tiny sizes for checking the PyTorch peers
      (`nautilus eval --save`), and the scheduled program on the CPU at tiny sizes
      (`eval --stage matile`). Writes bench/out-variants/ (packages, schedules, nautilus-runner,
      manifest.json).
  python3 bench/variants.py measure [--reps N] [--only NAME...] [--resume] [--no-flex]
      [--no-compile] [--budget-s S] [--seconds-per-package S]
      (GPU machine, torch and triton installed) per variant: validation of the small package
      against its reference with nautilus-runner, CUPTI median of the realistic package, and the
      PyTorch peers in the same job (L2 flushed, CUDA events, medians; each peer first checked
      at tiny sizes against the float64 reference that `prepare` saved). Writes
      bench/out-variants/results.md and results.json after every variant. The peers run even
      where our package did not compile; a package slower than --seconds-per-package for all
      its repetitions is timed with fewer. bench/out-variants/ is ignored by git: a device
      machine that gets the working tree needs it carried along.

Every spec file starts with a comment block: what the variant is, which model family uses it,
and `# calibration: held-out` (never to be used to calibrate the cost model) or `in`.
"""
import argparse
import concurrent.futures
import datetime
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import time

import l2flush

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECS = os.path.join(ROOT, "bench", "variants")
OUT = os.path.join(ROOT, "bench", "out-variants")

# H100 SXM (80 GB HBM3) DRAM bandwidth, for the floor of memory-bound variants when the runner's
# report does not give the device's own figure.
DRAM_BYTES_PER_S = 3.35e12

# Per variant: the peer family, whether it is memory-bound, the sizes of the small validation
# package (GPU, against the unscheduled reference: sizes that are not multiples of any tile, the
# naive reference must stay fast) and the tiny sizes of the CPU checks and of the peer check.
# Sizes not listed keep the spec's `let` value.
ATT_TINY = {"B": 1, "H": 2, "M": 72, "N": 72, "D": 16}
ATT_VALIDATE = {"B": 1, "H": 2, "M": 1000, "N": 1000}
VARIANTS = {
    "alibi_causal": {"peer": "attention", "validate": ATT_VALIDATE, "tiny": ATT_TINY},
    # FlexAttention with grouped heads fails to compile below 128 queries: tiny sizes of 128.
    "softcap_causal_inline": {"peer": "attention", "validate": {**ATT_VALIDATE, "H": 4, "KH": 2},
                              "tiny": {**ATT_TINY, "H": 4, "KH": 2, "M": 128, "N": 128}},
    "softcap_causal_stmt": {"peer": "attention", "validate": {**ATT_VALIDATE, "H": 4, "KH": 2},
                            "tiny": {**ATT_TINY, "H": 4, "KH": 2, "M": 128, "N": 128}},
    "sliding_window_bias": {"peer": "attention", "validate": {**ATT_VALIDATE, "H": 8, "KH": 2, "W": 200},
                            "tiny": {**ATT_TINY, "H": 8, "KH": 2, "M": 128, "N": 128, "W": 40}},
    "prefix_lm": {"peer": "attention", "validate": {**ATT_VALIDATE, "P": 300}, "tiny": {**ATT_TINY, "P": 20}},
    "document_mask": {"peer": "attention", "validate": {**ATT_VALIDATE, "Doc": 200},
                      "tiny": {**ATT_TINY, "Doc": 16}},
    "mqa_decode": {"peer": "attention", "memory_bound": True, "validate": {"B": 2, "N": 1000},
                   "tiny": {"B": 2, "H": 4, "N": 72, "D": 16}},
    "gqa_decode": {"peer": "attention", "memory_bound": True, "validate": {"B": 2, "N": 1000},
                   "tiny": {"B": 2, "H": 16, "KH": 2, "N": 72, "D": 16}},
    "gqa_prefill_causal": {"peer": "attention", "validate": {**ATT_VALIDATE, "H": 8, "KH": 2},
                           "tiny": {**ATT_TINY, "H": 8, "KH": 2, "M": 128, "N": 128}},
    "cross_attention_77x4096": {"peer": "attention", "validate": {"B": 1, "H": 2, "N": 1000},
                                "tiny": {"B": 1, "H": 2, "M": 13, "N": 72, "D": 24}},
    "cross_attention_sd": {"peer": "attention", "validate": {"B": 1, "H": 2, "M": 1000},
                           "tiny": {"B": 1, "H": 2, "M": 72, "N": 13, "D": 16}},
    "cross_attention_whisper": {"peer": "attention", "validate": {"B": 1, "H": 2},
                                "tiny": {"B": 1, "H": 2, "M": 40, "N": 75, "D": 16}},
    "attention_one_statement": {"peer": "attention", "validate": {"B": 1, "H": 2, "M": 130, "N": 130},
                                "tiny": {"B": 1, "H": 2, "M": 24, "N": 40, "D": 16}},
    "attention_d256_causal": {"peer": "attention", "validate": ATT_VALIDATE, "tiny": {**ATT_TINY, "D": 32}},
    "attention_phi2": {"peer": "attention", "validate": {"B": 1, "H": 2}, "tiny": {**ATT_TINY, "D": 40}},
    "softmax_temperature": {"peer": "rows", "memory_bound": True, "validate": {"R": 64, "C": 10007},
                            "tiny": {"R": 8, "C": 3001}},
    "log_softmax": {"peer": "rows", "memory_bound": True, "validate": {"R": 64, "C": 8003},
                    "tiny": {"R": 4, "C": 8003}},
    "cross_entropy_onehot": {"peer": "rows", "memory_bound": True, "validate": {"R": 64, "C": 8003},
                             "tiny": {"R": 4, "C": 8003}},
    "logsumexp_rows": {"peer": "rows", "memory_bound": True, "validate": {"R": 64, "C": 8003},
                       "tiny": {"R": 4, "C": 8003}},
    "residual_rmsnorm": {"peer": "rows", "memory_bound": True, "validate": {"T": 100, "H": 1000},
                         "tiny": {"T": 16, "H": 96}},
    # Validation sizes are ragged against every tile but keep rows a multiple of 16 bytes, as
    # the warp-specialized form's tensor maps need (its schedules are validated as searched).
    "rmsnorm_gemm": {"peer": "mlp", "validate": {"T": 1000, "H": 520, "N": 1032},
                     "tiny": {"T": 40, "H": 48, "N": 72}},
    "layernorm_gemm": {"peer": "mlp", "validate": {"T": 1000, "H": 520, "N": 1032},
                       "tiny": {"T": 40, "H": 48, "N": 72}},
    "rmsnorm_swiglu": {"peer": "mlp", "validate": {"T": 1000, "H": 520, "F": 1032},
                       "tiny": {"T": 40, "H": 48, "F": 72}},
    "geglu_mlp": {"peer": "mlp", "validate": {"T": 1000, "H": 520, "F": 1032},
                  "tiny": {"T": 40, "H": 48, "F": 72}},
    "llama_mlp": {"peer": "mlp", "validate": {"T": 1000, "H": 520, "F": 1032},
                  "tiny": {"T": 40, "H": 48, "F": 72}},
    "gemm_bias_gelu": {"peer": "mlp", "validate": {"T": 1000, "K": 520, "N": 1032},
                       "tiny": {"T": 40, "K": 48, "N": 72}},
    "gemm_bias_relu": {"peer": "mlp", "validate": {"T": 1000, "K": 520, "N": 1032},
                       "tiny": {"T": 40, "K": 48, "N": 72}},
    "bgemm_bt_gelu": {"peer": "mlp", "validate": {"E": 2, "C": 1000, "K": 520, "F": 1032},
                      "tiny": {"E": 2, "C": 40, "K": 48, "F": 72}},
    "router_softmax_combine": {"peer": "mlp", "memory_bound": True, "validate": {"T": 1000, "H": 520},
                               "tiny": {"T": 40, "H": 48}},
    "lm_head_gemm": {"peer": "mlp", "validate": {"T": 1000, "V": 5003}, "tiny": {"T": 40, "H": 48, "V": 101}},
}


# ---------------------------------------------------------------------------------------------
# The spec files

def read_spec(name):
    """The `let` sizes, the calibration mark and the first comment line of a variant's spec."""
    path = os.path.join(SPECS, name + ".nt")
    text = open(path).read()
    sizes = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("let "):
            for item in line[4:].split(","):
                key, value = item.split("=")
                sizes[key.strip()] = int(value)
    mark = re.search(r"^#\s*calibration:\s*(held-out|in)\s*$", text, re.M)
    about = re.search(r"^#\s*(.*)$", text, re.M)
    family = re.search(r"^#\s*Used by:\s*(.*)$", text, re.M)
    return {"path": os.path.relpath(path, ROOT), "sizes": sizes,
            "calibration": mark.group(1) if mark else "unmarked",
            "about": about.group(1) if about else "", "family": family.group(1) if family else ""}


def size_args(sizes):
    return [a for key, value in sizes.items() for a in ("-D", f"{key}={value}")]


def selected(names):
    if not names:
        return list(VARIANTS)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        sys.exit(f"unknown variants: {', '.join(unknown)}; known: {', '.join(VARIANTS)}")
    return names


def last_line(text):
    lines = [l for l in (text or "").strip().splitlines() if l.strip()]
    return lines[-1] if lines else ""


def run_tool(command, timeout):
    """Runs a command from the repository root; returns (returncode or 'timeout', stdout, stderr,
    seconds)."""
    started = time.time()
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=timeout)
        return done.returncode, done.stdout, done.stderr, time.time() - started
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
        err = expired.stderr.decode() if isinstance(expired.stderr, bytes) else (expired.stderr or "")
        return "timeout", out, err, time.time() - started


def binaries(options):
    nautilus = options.nautilus or os.path.join(options.build, "app", "nautilus")
    runner = options.runner or os.path.join(options.build, "app", "nautilus-runner")
    return nautilus, runner


# ---------------------------------------------------------------------------------------------
# check: the unscheduled program at tiny sizes on the CPU

def command_check(options):
    nautilus, _ = binaries(options)
    failures = 0
    for name in selected(options.only):
        spec = read_spec(name)
        tiny = VARIANTS[name]["tiny"]
        code, out, err, _ = run_tool([nautilus, "check", spec["path"]], 60)
        if code != 0:
            failures += 1
            print(f"{name}: check failed: {err.strip()}")
            continue
        code, out, err, seconds = run_tool([nautilus, "eval", spec["path"], *size_args(tiny)], options.eval_timeout)
        errors = re.findall(r"output (\w+) \((\w+)\): max relative error (\S+)", out)
        status = "PASS" if code == 0 else ("TIMEOUT" if code == "timeout" else "FAIL")
        failures += status != "PASS"
        detail = ", ".join(f"{t} {e}" for t, _, e in errors) or last_line(err)
        print(f"{name}: eval {status} in {seconds:.1f} s ({detail}) [{spec['calibration']}]", flush=True)
    print(f"{len(selected(options.only)) - failures} passed, {failures} failed")
    return 1 if failures else 0


# ---------------------------------------------------------------------------------------------
# prepare: search, packages, CPU checks (development machine)

def command_prepare(options):
    nautilus, runner = binaries(options)
    names = selected(options.only)
    os.makedirs(os.path.join(OUT, "schedules"), exist_ok=True)
    os.makedirs(os.path.join(OUT, "packages"), exist_ok=True)
    os.makedirs(os.path.join(OUT, "peercheck"), exist_ok=True)
    target = os.path.join(OUT, "nautilus-runner")
    if os.path.exists(runner) and os.path.abspath(runner) != os.path.abspath(target):
        shutil.copy(runner, target)
        subprocess.run(["strip", target], check=False, capture_output=True)
    manifest_path = os.path.join(OUT, "manifest.json")
    manifest = json.load(open(manifest_path)) if os.path.exists(manifest_path) else {"variants": {}}
    manifest["prepared"] = f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"
    manifest["nautilus"] = os.path.abspath(nautilus)

    # 1. The searches, one at a time, so that their wall times are those of an otherwise idle
    # machine (as far as this script is concerned).
    entries = {}
    for name in names:
        spec = read_spec(name)
        entry = {"name": name, **spec, "memory_bound": VARIANTS[name].get("memory_bound", False),
                 "peer": VARIANTS[name]["peer"], "validate_sizes": {**spec["sizes"], **VARIANTS[name]["validate"]},
                 "tiny_sizes": {**spec["sizes"], **VARIANTS[name]["tiny"]}, "errors": []}
        entries[name] = entry
        schedule_path = os.path.join(OUT, "schedules", name + ".json")
        previous = manifest["variants"].get(name, {})
        if options.reuse_schedules and os.path.exists(schedule_path) and "search" in previous:
            # The schedule and search record of an earlier `prepare`: packages and checks only.
            entry["search"] = previous["search"]
            entry["schedule"] = os.path.relpath(schedule_path, OUT)
            entry["errors"] += [e for e in previous.get("errors", []) if e.startswith("search")]
            print(f"{name}: schedule of an earlier search reused", file=sys.stderr, flush=True)
            continue
        if os.path.exists(schedule_path):
            os.remove(schedule_path)
        command = [nautilus, "schedule", spec["path"], "-o", schedule_path]
        if options.device:
            command += ["--device", options.device]
        if options.threads:
            command += ["--threads", str(options.threads)]
        code, out, err, seconds = run_tool(command, options.search_timeout)
        entry["search"] = {"seconds": round(seconds, 2), "status": "ok" if code == 0 else
                           ("timeout" if code == "timeout" else f"failed ({code})")}
        estimate = re.search(r"^estimate: ([0-9.]+) µs", out, re.M)
        stats = re.search(r"^search: .*$", out, re.M)
        entry["search"]["estimate_us"] = float(estimate.group(1)) if estimate else None
        entry["search"]["kernels"] = re.findall(r"^  (\S+): ([0-9.]+) µs, (\d+) CTAs, (\S+)-bound$", out, re.M)
        entry["search"]["stats"] = stats.group(0) if stats else None
        if code == "timeout":
            entry["errors"].append(f"search: timeout after {options.search_timeout} s")
        elif code != 0:
            entry["errors"].append(f"search: {last_line(err)}")
        if code == 0 and os.path.exists(schedule_path):
            entry["schedule"] = os.path.relpath(schedule_path, OUT)
            entry["search"]["decisions"] = json.load(open(schedule_path))["decisions"]
        print(f"{name}: search {entry['search']['status']} in {seconds:.1f} s, estimate "
              f"{entry['search']['estimate_us']} µs", file=sys.stderr, flush=True)

    # 2. Packages and CPU checks on every core.
    jobs = []
    for name, entry in entries.items():
        for step in ("timing", "validate", "reference", "peercheck", "cpu_matile"):
            if step in ("timing", "validate", "cpu_matile") and "schedule" not in entry:
                continue
            if step == "cpu_matile" and options.no_cpu_check:
                continue
            jobs.append((name, step))

    def work(job):
        name, step = job
        entry = entries[name]
        spec_path = entry["path"]
        schedule = os.path.join(OUT, entry["schedule"]) if "schedule" in entry else None
        package = lambda label: os.path.join(OUT, "packages", label)
        if step == "timing":
            code, _, err, seconds = run_tool([nautilus, "compile", spec_path, "--schedule", schedule, "--arch", "sm_90a",
                                              "-o", package(name)], options.compile_timeout)
            return job, code, err, seconds, {"package": os.path.relpath(package(name), OUT)}
        if step == "validate":
            code, _, err, seconds = run_tool([nautilus, "compile", spec_path, *size_args(entry["validate_sizes"]),
                                              "--schedule", schedule, "--arch", "sm_90a", "-o", package(name + "_validate")],
                                             options.compile_timeout)
            extra = {"validate_package": os.path.relpath(package(name + "_validate"), OUT),
                     "validate_schedule": "searched at the realistic sizes"}
            if code != 0:
                # The decisions found at the realistic sizes may not apply at the reduced ones:
                # search again at those sizes.
                reason = f"timeout after {options.compile_timeout:.0f} s" if code == "timeout" else last_line(err)[:200]
                small = os.path.join(OUT, "schedules", name + "_validate.json")
                code2, _, err2, _ = run_tool([nautilus, "schedule", spec_path, *size_args(entry["validate_sizes"]),
                                              *(["--device", options.device] if options.device else []),
                                              "-o", small], options.search_timeout)
                if code2 == 0:
                    code, _, err, seconds = run_tool(
                        [nautilus, "compile", spec_path, *size_args(entry["validate_sizes"]), "--schedule", small,
                         "--arch", "sm_90a", "-o", package(name + "_validate")], options.compile_timeout)
                    extra["validate_schedule"] = f"searched again at the validation sizes ({reason})"
            return job, code, err, seconds, extra
        if step == "reference":
            code, _, err, seconds = run_tool([nautilus, "compile", spec_path, *size_args(entry["validate_sizes"]),
                                              "--arch", "sm_90a", "-o", package(name + "_reference")],
                                             options.compile_timeout)
            return job, code, err, seconds, {"reference_package": os.path.relpath(package(name + "_reference"), OUT)}
        if step == "peercheck":
            directory = os.path.join(OUT, "peercheck", name)
            shutil.rmtree(directory, ignore_errors=True)
            code, out, err, seconds = run_tool([nautilus, "eval", spec_path, *size_args(entry["tiny_sizes"]),
                                                "--save", directory], options.eval_timeout)
            return job, code, err, seconds, {"peercheck": os.path.relpath(directory, OUT)}
        # cpu_matile: the scheduled program through the MA tile interpreter at tiny sizes; at the
        # validation sizes when a decision cannot apply at the tiny ones (a key split into 4 of a
        # 72-key sequence that has one key step).
        sizes_used = "tiny_sizes"
        code, out, err, seconds = run_tool([nautilus, "eval", spec_path, *size_args(entry["tiny_sizes"]), "--stage",
                                            "matile", "--schedule", schedule], options.eval_timeout)
        if code != 0 and code != "timeout" and "does not apply" in (err or ""):
            sizes_used = "validate_sizes"
            code, out, err, more = run_tool([nautilus, "eval", spec_path, *size_args(entry["validate_sizes"]),
                                             "--stage", "matile", "--schedule", schedule], options.eval_timeout)
            seconds += more
        errors = re.findall(r"output (\w+) \(\w+\): max relative error (\S+)", out)
        return job, code, err, seconds, {"cpu_matile": {
            "status": "pass" if code == 0 else ("timeout" if code == "timeout" else "fail"),
            "sizes": sizes_used, "seconds": round(seconds, 1), "errors": dict(errors),
            "message": "" if code == 0 else (last_line(err) or last_line(out))[:300]}}

    with concurrent.futures.ThreadPoolExecutor(max_workers=options.jobs or os.cpu_count() or 2) as pool:
        for future in concurrent.futures.as_completed([pool.submit(work, job) for job in jobs]):
            job, code, err, seconds, extra = future.result()
            name, step = job
            entry = entries[name]
            if step == "cpu_matile":
                entry.update(extra)
                print(f"{name}: {step} {extra['cpu_matile']['status']} ({seconds:.1f} s)", file=sys.stderr, flush=True)
                continue
            if code == 0:
                entry.update(extra)
                entry.setdefault("seconds", {})[step] = round(seconds, 1)
            else:
                entry["errors"].append(f"{step}: " + ("timeout" if code == "timeout" else last_line(err))[:400])
            print(f"{name}: {step} {'ok' if code == 0 else 'FAILED'} ({seconds:.1f} s)", file=sys.stderr, flush=True)

    for name, entry in entries.items():
        # Inputs and outputs at the realistic sizes from the checked spec (so that the peers run
        # even where our package did not compile), and the bytes that must move: each input read
        # once, each output written once.
        code, out, err, _ = run_tool([nautilus, "lower", entry["path"], "--stage", "spec", "--format", "json"], 60)
        if code == 0:
            tensors = json.loads(out)["tensors"]
            for role in ("input", "output"):
                entry[role + "s"] = [{"name": t["name"], "shape": t["shape"], "dtype": t["dtype"]}
                                     for t in tensors if t["role"] == role]
            entry["bytes"] = float(sum(math.prod(t["shape"]) * {"f32": 4, "f16": 2, "bf16": 2}[t["dtype"]]
                                       for t in entry["inputs"] + entry["outputs"]))
        launch = os.path.join(OUT, entry.get("package", "-"), "launch.json")
        if os.path.exists(launch):
            package = json.load(open(launch))
            entry["flops"] = package.get("flops")
            entry["kernels"] = [k["name"] for k in package.get("kernels", [])]
        manifest["variants"][name] = entry
    json.dump(manifest, open(manifest_path, "w"), indent=1)

    print("\n| variant | calibration | search s | status | estimate µs | kernels | CPU matile (tiny) | errors |")
    print("|---|---|---|---|---|---|---|---|")
    for name, entry in entries.items():
        cpu = entry.get("cpu_matile", {})
        print(f"| {name} | {entry['calibration']} | {entry['search']['seconds']} | {entry['search']['status']} | "
              f"{entry['search']['estimate_us']} | {len(entry.get('kernels', [])) or '–'} | "
              f"{cpu.get('status', '–')}{' (validation sizes)' if cpu.get('sizes') == 'validate_sizes' else ''} "
              f"{' '.join(f'{k} {v}' for k, v in cpu.get('errors', {}).items())} | "
              f"{'; '.join(entry['errors']) or '–'} |")
    print(f"\nmanifest: {os.path.relpath(manifest_path, ROOT)}")
    return 0


# ---------------------------------------------------------------------------------------------
# measure: validation, our timing and the PyTorch peers (GPU machine)

def run_runner(args, timeout):
    command = [os.path.join(OUT, "nautilus-runner")] + args + l2flush.runner_args()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"errors": [{"kind": "timeout", "message": f"runner over {timeout} s"}]}
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"errors": [{"kind": "malformed_output", "message": (done.stderr or done.stdout)[-500:]}]}


def validate_package(entry):
    if "validate_package" not in entry or "reference_package" not in entry:
        return {"status": "not compiled"}
    # The naive reference runs one CTA per element: give it time; each GPU wait is bounded too.
    report = run_runner([os.path.join(OUT, entry["validate_package"]), "--reference",
                         os.path.join(OUT, entry["reference_package"]), "--reps", "3", "--warmup", "1",
                         "--timeout", "60"], timeout=400)
    v = report.get("validation") or {}
    return {"status": v.get("status") or report.get("status") or "error",
            "max_relative_error": v.get("max_relative_error"), "tolerance": v.get("tolerance"),
            "errors": report.get("errors") or []}


def time_package(entry, reps, seconds_per_package):
    """(median µs, note, device section of the runner's report) of the realistic package."""
    if "package" not in entry:
        return None, "not compiled", {}
    package = os.path.join(OUT, entry["package"])
    # A schedule far off the good shapes can take seconds per launch: one probe launch first
    # (each GPU wait bounded), then as many repetitions as fit in the time given to a package.
    probe = run_runner([package, "--reps", "1", "--warmup", "0", "--timeout", "60"], timeout=180)
    probe_us = ((probe.get("timing") or {}).get("total") or {}).get("median_us")
    if probe_us is None:
        return None, "probe: " + json.dumps(probe.get("errors"))[:300], probe.get("device") or {}
    count, warmup = reps, 5
    if probe_us * (reps + warmup) > seconds_per_package * 1e6:
        count, warmup = max(1, int(seconds_per_package * 1e6 / probe_us) - 1), 1
    report = run_runner([package, "--reps", str(count), "--warmup", str(warmup), "--timeout", "60"],
                        timeout=seconds_per_package * 2 + 60)
    total = ((report.get("timing") or {}).get("total") or {}).get("median_us")
    if total is None:
        return probe_us, "one launch only: " + json.dumps(report.get("errors"))[:300], probe.get("device") or {}
    return total, None if count == reps else f"{count} repetitions only ({probe_us / 1e3:.0f} ms per launch)", \
        report.get("device") or {}


def read_npy(path):
    """A little-endian C-order .npy as (format, shape, bytes): `prepare` saves f2, f4 and f8."""
    data = open(path, "rb").read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError(f"{path}: not an .npy file")
    major = data[6]
    header_length = struct.unpack("<H", data[8:10])[0] if major == 1 else struct.unpack("<I", data[8:12])[0]
    start = 10 if major == 1 else 12
    header = data[start:start + header_length].decode("latin1")
    descr = re.search(r"'descr':\s*'([^']+)'", header).group(1)
    shape = tuple(int(x) for x in re.search(r"'shape':\s*\(([^)]*)\)", header).group(1).replace(" ", "").split(",") if x)
    if "True" in re.search(r"'fortran_order':\s*(\w+)", header).group(1):
        raise ValueError(f"{path}: Fortran order")
    return descr, shape, data[start + header_length:]


def load_tensor(path, dtype, torch):
    descr, shape, payload = read_npy(path)
    source = {"<f2": torch.float16, "<f4": torch.float32, "<f8": torch.float64}[descr]
    tensor = torch.frombuffer(bytearray(payload), dtype=source).reshape(shape)
    return tensor.to("cuda").to(dtype)


def torch_dtype(name, torch):
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]


def timed_us(fn, reps):
    """Median microseconds of `fn` over `reps` runs, L2 flushed before each (CUDA events): the
    protocol of bench/measure.py, whose `timed` this is."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from measure import timed
    return timed(fn, reps) * 1000.0


def peers_for(name, s, x, options):
    """The PyTorch peers of a variant: {label: callable returning the output(s)}, for sizes `s`
    (the spec's size symbols) and inputs `x` (spec input name -> CUDA tensor of the spec's
    dtype). Every peer computes the math of the spec: same masks, same scaling."""
    import torch
    import torch.nn.functional as F
    peers = {}
    compile_ok = not options.no_compile

    def compiled(fn):
        return torch.compile(fn, dynamic=False)

    def add_math(fn, large_bytes=0):
        """Eager and torch.compile of a plain PyTorch function (skipped when its intermediates
        would not fit on the GPU)."""
        if large_bytes > options.max_math_bytes:
            return
        peers["eager"] = fn
        if compile_ok:
            peers["compiled"] = compiled(fn)

    if VARIANTS[name]["peer"] == "attention":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        decode = x["Q"].dim() == 3
        q = x["Q"].unsqueeze(2) if decode else x["Q"]
        k = x["K"] if x["K"].dim() == 4 else x["K"].unsqueeze(1)
        v = x["V"] if x["V"].dim() == 4 else x["V"].unsqueeze(1)
        b, h, m, d = q.shape
        kh, n = k.shape[1], k.shape[2]
        group = h // kh
        scale = 1.0 / math.sqrt(d)
        # The mask of the variant as (causal, explicit float/bool mask, flex mask_mod, flex score_mod).
        causal, mask, mask_mod, score_mod = False, None, None, None
        qi = torch.arange(m, device="cuda").view(m, 1)
        ki = torch.arange(n, device="cuda").view(1, n)
        if name in ("gqa_prefill_causal", "attention_d256_causal", "attention_phi2"):
            causal = True
            mask_mod = lambda bb, hh, qq, kk: kk <= qq
        elif name == "alibi_causal":
            slope = x["Slope"]
            # f32 for the plain math; SDPA takes the mask in the query's dtype.
            bias32 = torch.where((ki <= qi).view(1, m, n), -(slope.view(h, 1, 1) * (qi - ki).view(1, m, n).float()),
                                 float("-inf"))
            mask = bias32.to(q.dtype)
            mask_mod = lambda bb, hh, qq, kk: kk <= qq
            score_mod = lambda sc, bb, hh, qq, kk: sc - slope[hh] * (qq - kk)
        elif name.startswith("softcap_causal"):
            mask_mod = lambda bb, hh, qq, kk: kk <= qq
            score_mod = lambda sc, bb, hh, qq, kk: 50.0 * torch.tanh(sc / 50.0)
        elif name == "sliding_window_bias":
            window, bias_in = s["W"], x["Bias"]
            keep = (ki <= qi) & (qi - ki < window)
            mask = torch.where(keep, bias_in.float(), float("-inf")).to(q.dtype)
            mask_mod = lambda bb, hh, qq, kk: (kk <= qq) & (qq - kk < window)
            score_mod = lambda sc, bb, hh, qq, kk: sc + bias_in[qq, kk]
        elif name == "prefix_lm":
            prefix = s["P"]
            mask = (ki <= qi) | (ki < prefix)
            mask_mod = lambda bb, hh, qq, kk: (kk <= qq) | (kk < prefix)
        elif name == "document_mask":
            doc = s["Doc"]
            mask = (qi // doc == ki // doc) & (ki <= qi)
            mask_mod = lambda bb, hh, qq, kk: (qq // doc == kk // doc) & (kk <= qq)

        def out_shape(o):
            return o.squeeze(2) if decode else o

        # PyTorch SDPA, one backend at a time (a backend that cannot take the mask raises).
        if score_mod is None or mask is not None:
            for label, backend in (("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                                   ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
                                   ("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION)):
                def sdpa(backend=backend):
                    with sdpa_kernel(backend):
                        return out_shape(F.scaled_dot_product_attention(
                            q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=group > 1))
                peers[label] = sdpa
                if group > 1 and backend != SDPBackend.FLASH_ATTENTION:
                    # As transformers' repeat_kv does before SDPA: key/value heads repeated on
                    # every call (counted in the time).
                    def sdpa_repeated(backend=backend):
                        with sdpa_kernel(backend):
                            return out_shape(F.scaled_dot_product_attention(
                                q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1),
                                attn_mask=mask, is_causal=causal))
                    peers[label + "_repeat_kv"] = sdpa_repeated

        # FlexAttention, compiled, with the variant's mask_mod and score_mod.
        if not options.no_flex:
            try:
                import torch._dynamo
                from torch.nn.attention.flex_attention import create_block_mask, flex_attention
                for key in ("recompile_limit", "cache_size_limit"):
                    if hasattr(torch._dynamo.config, key):
                        setattr(torch._dynamo.config, key, 256)
                flex = torch.compile(flex_attention, dynamic=False)
                block_mask = create_block_mask(mask_mod, None, None, m, n, device="cuda") if mask_mod else None
                peers["flex"] = lambda: out_shape(flex(q, k, v, score_mod=score_mod, block_mask=block_mask,
                                                       enable_gqa=group > 1))
            except Exception as error:  # FlexAttention missing in this torch
                peers["flex"] = error

        # The math written plainly (eager and torch.compile): scores for every (m, n).
        def attention_math():
            qg = q.view(b, kh, group, m, d)
            scores = torch.matmul(qg, k.view(b, kh, 1, n, d).transpose(-1, -2)).float() * scale
            scores = scores.view(b, h, m, n)
            if name == "alibi_causal":
                scores = scores + bias32
            elif name.startswith("softcap_causal"):
                scores = torch.where(ki <= qi, 50.0 * torch.tanh(scores / 50.0), float("-inf"))
            elif name == "sliding_window_bias":
                scores = scores + mask.float()
            elif mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            elif causal:
                scores = scores.masked_fill(ki > qi, float("-inf"))
            p = torch.softmax(scores, dim=-1).to(q.dtype).view(b, kh, group, m, n)
            return out_shape(torch.matmul(p, v.view(b, kh, 1, n, d)).view(b, h, m, d))
        add_math(attention_math, large_bytes=b * h * m * n * 4 * 3)
        return peers

    if name == "softmax_temperature":
        add_math(lambda: torch.softmax(x["X"] / 0.7, dim=-1))
    elif name == "log_softmax":
        add_math(lambda: F.log_softmax(x["X"], dim=-1, dtype=torch.float32))
    elif name == "cross_entropy_onehot":
        def cross_entropy():
            logits = x["X"].float()
            return torch.logsumexp(logits, dim=-1) - (x["T"].float() * logits).sum(-1)
        add_math(cross_entropy)
    elif name == "logsumexp_rows":
        add_math(lambda: torch.logsumexp(x["X"].float(), dim=-1))
    elif name == "residual_rmsnorm":
        def residual_rmsnorm():
            hs = x["X"] + x["Res"]
            hf = hs.float()
            y = hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-5) * x["W"].float()
            return hs, y.to(hs.dtype)
        add_math(residual_rmsnorm)
    elif name in ("rmsnorm_gemm", "rmsnorm_swiglu"):
        def rmsnorm(t, w):
            tf = t.float()
            return (tf * torch.rsqrt(tf.pow(2).mean(-1, keepdim=True) + 1e-5) * w.float()).to(t.dtype)
        if name == "rmsnorm_gemm":
            add_math(lambda: rmsnorm(x["X"], x["W"]) @ x["Wqkv"])
        else:
            def swiglu():
                xn = rmsnorm(x["X"], x["W"])
                return F.silu(xn @ x["Wg"]) * (xn @ x["Wu"])
            add_math(swiglu)
            # The usual fused gate/up projection: one GEMM against [Wg | Wu] (prepared once).
            gate_up = torch.cat([x["Wg"], x["Wu"]], dim=1)
            f = x["Wg"].shape[1]

            def fused():
                gu = rmsnorm(x["X"], x["W"]) @ gate_up
                return F.silu(gu[:, :f]) * gu[:, f:]
            peers["eager_gate_up"] = fused
            if compile_ok:
                peers["compiled_gate_up"] = compiled(fused)
    elif name == "layernorm_gemm":
        hidden = x["X"].shape[1]
        add_math(lambda: F.layer_norm(x["X"], (hidden,), x["G"], x["Bt"], 1e-5) @ x["Wp"])
    elif name == "llama_mlp":
        add_math(lambda: F.linear(F.silu(F.linear(x["X"], x["Wg"])) * F.linear(x["X"], x["Wu"]), x["Wd"]))
    elif name == "geglu_mlp":
        add_math(lambda: (F.gelu(x["X"] @ x["Wg"], approximate="tanh") * (x["X"] @ x["Wu"])) @ x["Wd"])
    elif name == "gemm_bias_gelu":
        add_math(lambda: F.gelu(torch.addmm(x["Bias"], x["X"], x["W"]), approximate="tanh"))
    elif name == "gemm_bias_relu":
        add_math(lambda: torch.relu(torch.addmm(x["Bias"], x["X"], x["W"])))
    elif name == "bgemm_bt_gelu":
        add_math(lambda: F.gelu(torch.bmm(x["X"], x["W"].transpose(1, 2)), approximate="tanh"))
    elif name == "router_softmax_combine":
        def router():
            weights = torch.softmax((x["X"] @ x["Wr"]).float(), dim=-1)
            return torch.bmm(weights.to(x["Eo"].dtype).unsqueeze(1), x["Eo"]).squeeze(1)
        add_math(router)
    elif name == "lm_head_gemm":
        add_math(lambda: F.linear(x["X"], x["Wte"]))
    return peers


def normwise_error(out, ref):
    out = out.double()
    ref = ref.double()
    scale = ref.abs().max().item()
    if not bool(out.isfinite().all()):
        return float("inf")
    return (out - ref).abs().max().item() / (scale if scale > 0 else 1.0)


TOLERANCE = {"f32": 1e-4, "f16": 5e-3, "bf16": 2e-2}


def check_peers(name, entry, options, torch):
    """Each peer at the tiny sizes on the inputs `nautilus eval --save` wrote, against its float64
    reference: {label: error (float), or the exception text}."""
    directory = os.path.join(OUT, entry.get("peercheck", "-"))
    if not os.path.exists(os.path.join(directory, "manifest.json")):
        return {}
    saved = json.load(open(os.path.join(directory, "manifest.json")))
    inputs, references, dtypes = {}, [], {}
    for f in saved["files"]:
        if f["kind"] == "input":
            inputs[f["tensor"]] = load_tensor(os.path.join(directory, f["file"]), torch_dtype(f["dtype"], torch), torch)
        elif f["kind"] == "reference":
            references.append((f["tensor"], load_tensor(os.path.join(directory, f["file"]), torch.float64, torch)))
    for o in saved["outputs"]:
        dtypes[o["tensor"]] = o["dtype"]
    order = [o["name"] for o in entry.get("outputs", [])] or [t for t, _ in references]
    references.sort(key=lambda item: order.index(item[0]) if item[0] in order else 0)
    result = {}
    for label, fn in peers_for(name, entry["tiny_sizes"], inputs, options).items():
        if isinstance(fn, Exception):
            result[label] = f"unavailable: {fn}"[:300]
            continue
        if label.startswith("compiled") and label.replace("compiled", "eager", 1) in result:
            # torch.compile of the eager peer's own function: the eager check covers its math.
            result[label] = result[label.replace("compiled", "eager", 1)]
            continue
        try:
            outs = fn()
            outs = outs if isinstance(outs, tuple) else (outs,)
            worst = 0.0
            for (tensor, ref), out in zip(references, outs):
                error = normwise_error(out, ref.reshape(out.shape))
                # Peers keep bf16/f16 intermediates where PyTorch does; allow the output dtype's
                # tolerance, and 1e-3 for f32 outputs computed from 16-bit inputs.
                worst = max(worst, error / max(TOLERANCE[dtypes.get(tensor, "f32")], 1e-3))
            result[label] = worst  # error relative to the allowed tolerance: <= 1 is correct
        except Exception as error:
            result[label] = f"error: {type(error).__name__}: {error}"[:300]
    return result


def measure_peers(name, entry, options, torch):
    sizes = entry["sizes"]
    x = {}
    for i in entry["inputs"]:
        x[i["name"]] = (torch.rand(i["shape"], device="cuda", dtype=torch.float32) * 2 - 1).to(
            torch_dtype(i["dtype"], torch))
    result = {}
    try:
        for label, fn in peers_for(name, sizes, x, options).items():
            if isinstance(fn, Exception):
                result[label] = f"unavailable: {fn}"[:300]
                continue
            try:
                result[label] = timed_us(fn, options.reps)
            except Exception as error:
                result[label] = f"error: {type(error).__name__}: {error}"[:300]
                torch.cuda.synchronize()
            print(f"  {label}: {result[label] if isinstance(result[label], str) else round(result[label], 1)}",
                  flush=True)
    finally:
        del x
        torch.cuda.empty_cache()
    return result


def fmt(value, digits=1):
    return "–" if value is None else f"{value:.{digits}f}"


def write_results(results, device, torch_version):
    lines = [f"Device: {device}; torch {torch_version}; "
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; command: "
             "`python3 bench/variants.py prepare` then `python3 bench/variants.py measure`; DRAM floor at "
             f"{max([r.get('dram_bytes_per_s') or 0 for r in results.values()] + [0]) / 1e12:.2f} TB/s "
             f"(the runner's figure for this device); L2 flush before each repetition: {l2flush.MODE} "
             "(bench/l2flush.py)", "",
             "| variant | sizes | ours µs | best peer (µs) | peer / ours | % of DRAM floor, memory-bound (ours / peer) | "
             "validation error | search s | estimate µs | calibration |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        best = r.get("best_peer")
        ratio = r.get("peer_over_ours")
        floor = "–"
        if r.get("memory_bound") and r.get("floor_us"):
            ours_pct = 100 * r["floor_us"] / r["ours_us"] if r.get("ours_us") else None
            peer_pct = 100 * r["floor_us"] / best[1] if best else None
            floor = " / ".join("–" if pct is None else f"{pct:.0f}%" for pct in (ours_pct, peer_pct))
        validation = r.get("validation", {})
        error = validation.get("max_relative_error")
        vtext = f"{validation.get('status')} {error:.2e}" if isinstance(error, (int, float)) else str(validation.get("status"))
        sizes = " ".join(f"{k}={v}" for k, v in r["sizes"].items())
        lines.append(f"| {name} | {sizes} | {fmt(r.get('ours_us'))} | "
                     f"{f'{best[0]} {best[1]:.1f}' if best else '–'} | {fmt(ratio, 2)} | {floor} | {vtext} | "
                     f"{r.get('search_seconds')}{' (' + r['search_status'] + ')' if r.get('search_status') != 'ok' else ''} | "
                     f"{r.get('estimate_us')} | {r.get('calibration')} |")
    lines += ["", "Peers (µs; `wrong`: failed the tiny-size check against the float64 reference, not counted as "
              "best; `unchecked`: the check itself did not run, counted):", ""]
    for name, r in results.items():
        cells = []
        for label, value in r.get("peers", {}).items():
            check = r.get("peer_check", {}).get(label)
            mark = " wrong" if isinstance(check, float) and check > 1 else (
                "" if isinstance(check, float) else " unchecked")
            cells.append(f"{label} {value:.1f}{mark}" if isinstance(value, float) else f"{label}: {value}")
        notes = "; ".join(r.get("notes", []))
        lines.append(f"- {name}: " + ", ".join(cells) + (f" — {notes}" if notes else ""))
    text = "\n".join(lines) + "\n"
    open(os.path.join(OUT, "results.md"), "w").write(text)
    json.dump({"device": device, "torch": torch_version, "variants": results},
              open(os.path.join(OUT, "results.json"), "w"), indent=1)
    return text


def command_measure(options):
    import torch
    manifest = json.load(open(os.path.join(OUT, "manifest.json")))
    results_path = os.path.join(OUT, "results.json")
    results = {}
    if options.resume and os.path.exists(results_path):
        results = json.load(open(results_path)).get("variants", {})
    device = torch.cuda.get_device_name()
    print(f"device: {device}, torch {torch.__version__}, "
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC", flush=True)
    deadline = time.time() + options.budget_s
    names = [n for n in selected(options.only) if n in manifest["variants"]]
    for name in names:
        if options.resume and name in results and not options.only:
            continue
        if time.time() > deadline:
            print(f"{name}: skipped, past --budget-s", flush=True)
            continue
        entry = manifest["variants"][name]
        row = {"sizes": entry["sizes"], "calibration": entry["calibration"], "memory_bound": entry["memory_bound"],
               "search_seconds": entry["search"]["seconds"], "search_status": entry["search"]["status"],
               "estimate_us": entry["search"]["estimate_us"], "prepare_errors": entry["errors"], "notes": []}
        if entry.get("validate_schedule", "").startswith("searched again"):
            row["notes"].append("validated with a schedule searched at the validation sizes: " + entry["validate_schedule"])
        print(f"{name}:", flush=True)
        try:
            row["validation"] = validate_package(entry)
            print(f"  validation: {row['validation']['status']} ({row['validation'].get('max_relative_error')})",
                  flush=True)
            row["ours_us"], note, device_report = time_package(entry, options.reps, options.seconds_per_package)
            if note:
                row["notes"].append(f"ours: {note}")
            print(f"  ours: {row['ours_us']}", flush=True)
            # The floor at the device's DRAM bandwidth as the runner reports it (3.35 TB/s on an
            # H100 SXM), the H100 figure when the runner did not say.
            row["dram_bytes_per_s"] = device_report.get("peak_memory_bandwidth_bytes_per_s") or DRAM_BYTES_PER_S
            if entry.get("bytes"):
                row["floor_us"] = entry["bytes"] / row["dram_bytes_per_s"] * 1e6
            if "inputs" in entry and not options.no_peers:
                try:
                    row["peer_check"] = check_peers(name, entry, options, torch)
                except Exception as error:
                    row["notes"].append(f"peer check: {type(error).__name__}: {error}"[:300])
                row["peers"] = measure_peers(name, entry, options, torch)
                correct = {label: us for label, us in row["peers"].items() if isinstance(us, float) and not (
                    isinstance(row.get("peer_check", {}).get(label), float) and row["peer_check"][label] > 1)}
                if correct:
                    label = min(correct, key=correct.get)
                    row["best_peer"] = [label, correct[label]]
                    if row.get("ours_us"):
                        row["peer_over_ours"] = correct[label] / row["ours_us"]
        except Exception as error:
            row["notes"].append(f"{type(error).__name__}: {error}"[:300])
            try:
                torch.cuda.synchronize()
            except Exception:
                pass
        results[name] = row
        write_results(results, device, torch.__version__)
    print(write_results(results, device, torch.__version__))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for command in ("check", "prepare"):
        p = sub.add_parser(command)
        p.add_argument("--build", default=os.environ.get("NAUTILUS_BUILD_DIR", os.path.join(ROOT, "build")))
        p.add_argument("--nautilus", help="the nautilus binary (default: BUILD/app/nautilus)")
        p.add_argument("--runner", help="the nautilus-runner binary (default: BUILD/app/nautilus-runner)")
        p.add_argument("--only", nargs="+", help="these variants only (names of bench/variants/*.nt)")
        p.add_argument("--eval-timeout", type=float, default=300, help="seconds for one CPU evaluation")
    prepare = sub.choices["prepare"]
    prepare.add_argument("--search-timeout", type=float, default=300, help="seconds for one search")
    prepare.add_argument("--compile-timeout", type=float, default=300, help="seconds for one compile")
    prepare.add_argument("--threads", type=int, help="--threads of nautilus schedule")
    prepare.add_argument("--device", help="the cost model's GPU for the searches (nautilus schedule --device; "
                                          "default h100): the GPU the packages will be measured on")
    prepare.add_argument("--jobs", type=int, help="parallel compiles (default: every core)")
    prepare.add_argument("--reuse-schedules", action="store_true",
                         help="keep the schedules and search records of an earlier prepare (no search)")
    prepare.add_argument("--no-cpu-check", action="store_true",
                         help="skip `eval --stage matile` of the searched schedule at tiny sizes")
    measure = sub.add_parser("measure")
    measure.add_argument("--reps", type=int, default=30)
    measure.add_argument("--only", nargs="+")
    measure.add_argument("--resume", action="store_true",
                         help="keep the variants results.json already has (measuring again those named by --only)")
    measure.add_argument("--no-flex", action="store_true", help="skip FlexAttention (compiles per shape)")
    measure.add_argument("--no-compile", action="store_true", help="skip the torch.compile peers")
    measure.add_argument("--no-peers", action="store_true", help="time our packages only")
    measure.add_argument("--max-math-bytes", type=float, default=24e9,
                         help="skip the plain-math attention peers whose score tensors exceed this")
    measure.add_argument("--budget-s", type=float, default=1e9, help="start no variant after this many seconds")
    measure.add_argument("--seconds-per-package", type=float, default=60,
                         help="fewer repetitions of our package when they would take longer than this")
    options = parser.parse_args()
    return {"check": command_check, "prepare": command_prepare, "measure": command_measure}[options.command](options)


if __name__ == "__main__":
    sys.exit(main())
