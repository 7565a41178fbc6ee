#!/usr/bin/env python3
"""The 16 attention rows of ANCHORS.md: the searched kernel and schedule variants against cuDNN and
FlashAttention-2 in the same job.

Step 1, `prepare` (development machine, after a build): per row `nautilus schedule` searches
(its pipeline solver completing the schedule), then every variant is compiled for sm_90a:
  --append LABEL=D1;D2   the searched schedule with decisions D1, D2 appended
                         (e.g. --append 'persistent=persistent(O_sum_acc)');
  --pin LABEL=D1;D2      a search of its own with D1, D2 pinned (`nautilus schedule --pin`);
  --forbid LABEL=D1;D2   a search of its own with D1, D2 forbidden (`nautilus schedule --forbid`,
                         e.g. --forbid 'tiles=persistent(O_sum_acc)': one CTA per tile);
  --compile LABEL=O1;O2  the searched schedule compiled with `nautilus compile` options O1, O2
                         (e.g. --compile 'fragments=--epilogue;fragments');
  --schedule LABEL=D1;D2 the decisions D1, D2 as written, no search (a hand schedule).
Each variant is compiled once more at validation sizes that are not tile multiples (B 1, H 2,
1000 query rows over 1024 keys: a partial query tile at every tile height; a partial key tile is
a kernel of its own, which the tests check), beside the unscheduled package as the reference.
Step 2, `pack DEST` (development machine): a copy for the GPU machine: the packages without PTX,
the stripped runner and the C++ runtime it was linked with.
Step 3, `measure` (GPU machine, from DEST or OUT): validates every variant against the reference,
times each package with nautilus-runner (CUPTI medians, L2 flushed; two runs, the better kept)
and the peers through torch SDPA's cuDNN and flash backends (CUDA events, L2 flushed, median of
30), then writes attention_rows.md and .json after every row.

Usage: python3 bench/attention_rows.py prepare [--only ROW...] [--append L=D]... [--pin L=D]...
                                               [--forbid L=D]... [--compile L=O]... [--schedule L=D]...
       python3 bench/attention_rows.py pack DEST
       python3 bench/attention_rows.py measure [--reps N] [--only ROW...] [--no-peers]
Writes bench/out-attention/ (git-ignored; $NAUTILUS_ATTENTION_BENCH names another folder).
"""
import argparse
import datetime
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import l2flush  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.environ.get("NAUTILUS_ATTENTION_BENCH", os.path.join(ROOT, "bench", "out-attention"))

# name, spec, B, H, S, D, causal: every attention row of ANCHORS.md (16384 tokens, H * D = 2048).
ROWS = []
for d in (64, 128):
    for s in (512, 2048, 8192, 16384):
        for causal in (False, True):
            b, h = 16384 // s, 2048 // d
            ROWS.append((f"B{b}_H{h}_S{s}_D{d}_{'causal' if causal else 'full'}",
                         "causal_attention" if causal else "attention", b, h, s, d, causal))


def sizes_of(b, h, s, d):
    return [f"B={b}", f"H={h}", f"M={s}", f"N={s}", f"D={d}"]


def validation_sizes(d):
    return ["B=1", "H=2", "M=1000", "N=1024", f"D={d}"]


def defines(sizes):
    out = []
    for s in sizes:
        out += ["-D", s]
    return out


def nautilus(*args, timeout=900):
    # A copy taken when prepare starts: a rebuild during the run does not change the compiler.
    return subprocess.run([os.path.join(OUT, "bin", "nautilus"), *args], capture_output=True,
                          text=True, timeout=timeout)


def parse_variants(items, kind):
    out = []
    for item in items or []:
        label, _, decisions = item.partition("=")
        if not label or not decisions or not re.fullmatch(r"[A-Za-z0-9_+-]+", label):
            sys.exit(f"--{kind} expects LABEL=DECISION[;DECISION...], got '{item}'")
        out.append((label, kind, [d.strip() for d in decisions.split(";") if d.strip()]))
    return out


DEVICE = []  # nautilus schedule's --device, from prepare --device


def prepare(only, variants):
    os.makedirs(os.path.join(OUT, "pk"), exist_ok=True)
    os.makedirs(os.path.join(OUT, "bin"), exist_ok=True)
    for name in ("nautilus", "nautilus-runner"):
        shutil.copy2(os.path.join(ROOT, "build", "app", name), os.path.join(OUT, "bin", name))
    path = os.path.join(OUT, "manifest.json")
    kept = [e for e in json.load(open(path)) if only and e["name"] not in only] if os.path.exists(path) else []
    manifest = list(kept)
    references = {}
    for name, spec, b, h, s, d, causal in ROWS:
        if only and name not in only:
            continue
        spec_path = os.path.join(ROOT, "assets", "specs", spec + ".nt")
        entry = {"name": name, "spec": spec, "B": b, "H": h, "S": s, "D": d, "causal": causal,
                 "variants": {}}
        searched = os.path.join(OUT, "pk", name + ".searched.json")
        start = time.time()
        done = nautilus("schedule", spec_path, *defines(sizes_of(b, h, s, d)), "--ignore-db", *DEVICE, "-o", searched)
        entry["search_seconds"] = round(time.time() - start, 2)
        entry["search_output"] = done.stdout[-3000:] + done.stderr[-1000:]
        if done.returncode != 0:
            entry["error"] = "schedule failed: " + done.stderr[-300:]
            manifest.append(entry)
            print(name, entry["error"], flush=True)
            continue
        schedules = {"searched": json.load(open(searched))["decisions"]}
        compile_options = {}
        for label, kind, decisions in variants:
            if kind == "compile":
                schedules[label] = schedules["searched"]
                compile_options[label] = decisions
                continue
            if kind == "append":
                schedules[label] = schedules["searched"] + decisions
                continue
            if kind == "schedule":
                schedules[label] = decisions
                continue
            pinned = os.path.join(OUT, "pk", f"{name}.{label}.json")
            pins = []
            for decision in decisions:
                pins += ["--forbid" if kind == "forbid" else "--pin", decision]
            p = nautilus("schedule", spec_path, *defines(sizes_of(b, h, s, d)), "--ignore-db", *DEVICE, *pins, "-o", pinned)
            schedules[label] = json.load(open(pinned))["decisions"] if p.returncode == 0 else None
            if p.returncode != 0:
                entry["variants"][label] = {"ok": False, "error": (p.stderr or p.stdout)[-400:]}
        ref_key = f"{spec}_{d}"
        if ref_key not in references:
            ref = os.path.join(OUT, "pk", "ref_" + ref_key)
            r = nautilus("compile", spec_path, "--arch", "sm_90a", *defines(validation_sizes(d)), "-o", ref)
            references[ref_key] = os.path.basename(ref) if r.returncode == 0 else None
        entry["reference_package"] = references[ref_key]
        for label, decisions in schedules.items():
            if decisions is None:
                continue
            schedule_path = os.path.join(OUT, "pk", f"{name}.{label}.json")
            json.dump({"decisions": decisions}, open(schedule_path, "w"), indent=2)
            package = os.path.join(OUT, "pk", f"{name}__{label}")
            extra = compile_options.get(label, [])
            c = nautilus("compile", spec_path, "--arch", "sm_90a", *extra, "--schedule", schedule_path,
                         *defines(sizes_of(b, h, s, d)), "-o", package)
            v = nautilus("compile", spec_path, "--arch", "sm_90a", *extra, "--schedule", schedule_path,
                         *defines(validation_sizes(d)), "-o", package + "__validate")
            entry["variants"][label] = {
                "decisions": decisions, "ok": c.returncode == 0 and v.returncode == 0,
                "package": os.path.basename(package), "validation_package": os.path.basename(package) + "__validate",
                "error": None if c.returncode == 0 and v.returncode == 0 else ((c.stderr or c.stdout) + (v.stderr or v.stdout))[-400:]}
        manifest.append(entry)
        json.dump(manifest, open(path, "w"), indent=1)  # after each row: an interrupted run keeps its work
        print(name, {k: v["ok"] for k, v in entry["variants"].items()}, f"{entry['search_seconds']} s", flush=True)


def pack(dest):
    """The GPU machine's copy: manifest, packages without PTX (the runner loads the cubin), the
    stripped runner, and the libstdc++ / libgcc_s it was linked with (the GPU host's may be older)."""
    if os.path.exists(dest):
        shutil.rmtree(dest)
    os.makedirs(os.path.join(dest, "bin"))
    shutil.copy2(os.path.join(OUT, "manifest.json"), dest)
    shutil.copy2(os.path.abspath(__file__), dest)
    shutil.copy2(l2flush.__file__, dest)
    runner = os.path.join(OUT, "bin", "nautilus-runner")
    subprocess.run(["strip", "-o", os.path.join(dest, "bin", "nautilus-runner"), runner], check=True)
    for line in subprocess.run(["ldd", runner], capture_output=True, text=True).stdout.splitlines():
        m = re.search(r"(libstdc\+\+\.so\.6|libgcc_s\.so\.1) => (\S+)", line)
        if m:
            shutil.copy2(m.group(2), os.path.join(dest, "bin", m.group(1)))
    for package in os.listdir(os.path.join(OUT, "pk")):
        source = os.path.join(OUT, "pk", package)
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


def run_runner(args, timeout=300):
    runner = os.path.join(OUT, "bin", "nautilus-runner")
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.path.join(OUT, "bin") + ":" + env.get("LD_LIBRARY_PATH", "")
    try:
        done = subprocess.run([runner, *args, *l2flush.runner_args()], capture_output=True, text=True, timeout=timeout, env=env)
        return json.loads(done.stdout)
    except (subprocess.TimeoutExpired, json.JSONDecodeError) as error:
        return {"error": str(error)[-300:]}


def peer_times(b, h, s, d, causal, reps=30):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    k, v = torch.randn_like(q), torch.randn_like(q)
    flush = l2flush.buffer(torch)
    out = {}
    for label, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("fa2", SDPBackend.FLASH_ATTENTION)):
        try:
            with sdpa_kernel(backend):
                call = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
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
                out[label] = sorted(times)[len(times) // 2]
        except Exception as error:  # a backend that does not take this shape
            out[label] = None
            out[label + "_error"] = str(error)[:200]
    return out


def geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def measure(reps, only, peers):
    manifest = json.load(open(os.path.join(OUT, "manifest.json")))
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
        row = {"name": entry["name"], "us": {}, "validation": {}}
        for label, variant in entry.get("variants", {}).items():
            if not variant.get("ok"):
                row["us"][label] = None
                row["validation"][label] = "not compiled"
                continue
            if entry.get("reference_package"):
                r = run_runner([os.path.join(OUT, "pk", variant["validation_package"]), "--reference",
                                os.path.join(OUT, "pk", entry["reference_package"]), "--reps", "3", "--warmup", "1"])
                val = r.get("validation") or {}
                row["validation"][label] = f"{val.get('status')} {val.get('max_relative_error')}" if val else str(r.get("errors") or r.get("error"))[:200]
            best = None
            for _ in range(2):
                r = run_runner([os.path.join(OUT, "pk", variant["package"]), "--reps", str(reps), "--warmup", "5"])
                t = ((r.get("timing") or {}).get("total") or {}).get("median_us")
                if t and (best is None or t < best):
                    best = t
            row["us"][label] = best
        if peers:
            row.update(peer_times(entry["B"], entry["H"], entry["S"], entry["D"], entry["causal"]))
        results.append(row)
        print(row["name"], {k: (round(v, 1) if v else v) for k, v in row["us"].items()},
              "cudnn", row.get("cudnn") and round(row["cudnn"], 1), "fa2", row.get("fa2") and round(row["fa2"], 1),
              row["validation"], flush=True)
        write(results, labels, device, started, reps)


def write(results, labels, device, started, reps):
    lines = [f"Device {device or '?'}, {started}; nautilus-runner best of two medians of {reps}; "
             "cuDNN and FA2 through torch SDPA, median of 30, L2 flushed (" + l2flush.MODE + ", bench/l2flush.py).", ""]
    lines.append("| row | " + " | ".join(f"{l} µs" for l in labels) + " | cuDNN µs | FA2 µs | " +
                 " | ".join(f"cuDNN / {l}" for l in labels) + " | validation |")
    lines.append("|---" * (2 * len(labels) + 4) + "|")
    fmt = lambda v, n=1: f"{v:.{n}f}" if v else "-"
    for r in results:
        ratios = [r["cudnn"] / r["us"][l] if r.get("cudnn") and r["us"].get(l) else None for l in labels]
        lines.append(f"| {r['name']} | " + " | ".join(fmt(r["us"].get(l)) for l in labels) +
                     f" | {fmt(r.get('cudnn'))} | {fmt(r.get('fa2'))} | " +
                     " | ".join(fmt(x, 3) for x in ratios) + " | " +
                     "; ".join(f"{l}: {v}" for l, v in r["validation"].items()) + " |")
    lines.append("")
    for l in labels:
        g = geomean([r["cudnn"] / r["us"][l] for r in results if r.get("cudnn") and r["us"].get(l)])
        f = geomean([r["fa2"] / r["us"][l] for r in results if r.get("fa2") and r["us"].get(l)])
        lines.append(f"- {l}: geomean cuDNN / ours {fmt(g, 3)}, FA2 / ours {fmt(f, 3)}")
    open(os.path.join(OUT, "attention_rows.md"), "w").write("\n".join(lines) + "\n")
    json.dump(results, open(os.path.join(OUT, "attention_rows.json"), "w"), indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--only", nargs="*")
    p.add_argument("--device", help="the cost model's GPU for the searches (nautilus schedule --device; default h100)")
    p.add_argument("--append", action="append", help="LABEL=D1;D2: the searched schedule with D1, D2 appended")
    p.add_argument("--pin", action="append", help="LABEL=D1;D2: a search with D1, D2 pinned")
    p.add_argument("--forbid", action="append", help="LABEL=D1;D2: a search with D1, D2 forbidden")
    p.add_argument("--compile", action="append", help="LABEL=O1;O2: the searched schedule compiled with options O1, O2")
    p.add_argument("--schedule", action="append", help="LABEL=D1;D2: the decisions as written, no search")
    k = sub.add_parser("pack")
    k.add_argument("dest")
    m = sub.add_parser("measure")
    m.add_argument("--reps", type=int, default=20)
    m.add_argument("--only", nargs="*")
    m.add_argument("--no-peers", action="store_true")
    args = parser.parse_args()
    if args.step == "prepare":
        if args.device:
            DEVICE[:] = ["--device", args.device]
        prepare(args.only, parse_variants(args.append, "append") + parse_variants(args.pin, "pin") +
                parse_variants(args.forbid, "forbid") + parse_variants(args.compile, "compile") +
                parse_variants(args.schedule, "schedule"))
    elif args.step == "pack":
        pack(os.path.abspath(args.dest))
    else:
        measure(args.reps, args.only, not args.no_peers)


if __name__ == "__main__":
    main()
