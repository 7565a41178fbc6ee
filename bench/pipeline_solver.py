#!/usr/bin/env python3
"""Pipeline solver benchmark: the solver's pipeline against hand-pinned alternatives.

Step 1, `prepare` (development machine, after a build): for every asset with a pipelined kernel
at its own sizes and every attention row of ANCHORS.md, `nautilus schedule` searches and the
pipeline solver completes the schedule (its solve time per kernel is recorded); then the same
schedule with each kernel's ring pinned to 2, 3 and 4 stages instead (`pipeline(BLOCK,
stages=S)`), each with warp_spec's overlap=0 and overlap=1 (the hand-pinned alternatives; the
forms the lowering refuses are left out), is compiled for sm_90a, and the solver's schedule once
more at validation sizes that are not tile multiples, beside the unscheduled reference.
Step 2, `measure` (GPU machine): validates the solver's schedule against the reference and times
every package with nautilus-runner (CUPTI medians, L2 flushed; two runs each, the better kept),
then prints the table and writes it to $OUT/pipeline_solver.md and .json.

Step `solve-times` (development machine, idle): the solver alone on every kernel prepare solved,
its time per kernel, the median and the worst.

Usage: python3 bench/pipeline_solver.py prepare [--only NAME...] [--solver-time S]
       python3 bench/pipeline_solver.py solve-times [--only NAME...]
       python3 bench/pipeline_solver.py measure [--reps N]
Writes bench/out-pipeline/ (git-ignored; $NAUTILUS_PIPELINE_BENCH names another folder, e.g. a
copy for the GPU machine without the PTX and the compiler: `measure` needs only manifest.json, the
packages and bin/nautilus-runner).
"""
import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.environ.get("NAUTILUS_PIPELINE_BENCH", os.path.join(ROOT, "bench", "out-pipeline"))

# name, spec, timed sizes, validation sizes (multiples of 8 for TMA rows, not tile multiples
# where the form allows: at d 128 the overlapped form needs whole key tiles).
ASSETS = [
    ("gemm", "gemm", [], ["M=1160", "N=2000", "K=328"]),
    ("batched_gemm", "batched_gemm", [], ["Z=3", "M=1000", "N=520", "K=264"]),
    ("gated_mlp", "gated_mlp", [], ["T=520", "H=1024", "F=1000"]),
    ("attention", "attention", [], ["B=1", "H=2", "M=1024", "N=1024", "D=128"]),
    ("causal_attention", "causal_attention", [], ["B=1", "H=2", "M=1024", "N=1024", "D=128"]),
    ("attention_one_statement", "attention_one_statement", [], ["B=1", "H=2", "M=1024", "N=1024", "D=128"]),
    ("gqa_attention", "gqa_attention", [], ["B=1", "H=8", "KH=2", "M=1024", "N=1024", "D=128"]),
]
for d in (64, 128):
    for s in (512, 2048, 8192, 16384):
        for causal in (False, True):
            b, h = 16384 // s, 2048 // d
            v = 1000 if d == 64 else 1024
            ASSETS.append((f"att_B{b}_H{h}_S{s}_D{d}_{'causal' if causal else 'full'}",
                           "causal_attention" if causal else "attention",
                           [f"B={b}", f"H={h}", f"M={s}", f"N={s}", f"D={d}"],
                           ["B=1", "H=2", f"M={v}", f"N={v}", f"D={d}"]))

SOLVER_LINE = re.compile(r"^pipeline: kernel (\S+) \(([^)]*)\): (.*)$")


def nautilus(*args, timeout=900):
    # A copy taken when prepare starts: a rebuild during the run does not change the compiler.
    binary = os.path.join(OUT, "bin", "nautilus")
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout)


def defines(sizes):
    out = []
    for s in sizes:
        out += ["-D", s]
    return out


def prepare(only, solver_time):
    os.makedirs(os.path.join(OUT, "pk"), exist_ok=True)
    os.makedirs(os.path.join(OUT, "bin"), exist_ok=True)
    for name in ("nautilus", "nautilus-runner"):
        shutil.copy2(os.path.join(ROOT, "build", "app", name), os.path.join(OUT, "bin", name))
    # --only prepares some configurations again and keeps the others' entries.
    path = os.path.join(OUT, "manifest.json")
    kept = [e for e in json.load(open(path)) if only and e["name"] not in only] if os.path.exists(path) else []
    manifest = list(kept)
    references = {}
    for name, spec, sizes, vsizes in ASSETS:
        if only and name not in only:
            continue
        spec_path = os.path.join(ROOT, "assets", "specs", spec + ".nt")
        entry = {"name": name, "spec": spec, "sizes": sizes, "validation_sizes": vsizes,
                 "packages": {}, "kernels": []}
        start = time.time()
        solved = os.path.join(OUT, "pk", name + ".solved.json")
        done = nautilus("schedule", spec_path, *defines(sizes), "--ignore-db", "--solver-time",
                        str(solver_time), "-o", solved)
        entry["schedule_seconds"] = round(time.time() - start, 2)
        entry["schedule_output"] = done.stdout[-4000:] + done.stderr[-1000:]
        if done.returncode != 0:
            entry["error"] = "schedule failed"
            manifest.append(entry)
            print(name, "schedule failed", done.stderr[-300:], flush=True)
            continue
        for line in done.stdout.splitlines():
            m = SOLVER_LINE.match(line)
            if not m:
                continue
            seconds = re.search(r", ([0-9.]+) s( \(cached\))?", m.group(3))
            decision = re.search(r"-> (pipeline\([^)]*\))", m.group(3))
            entry["kernels"].append({"kernel": m.group(1), "form": m.group(2), "line": m.group(3),
                                     "solve_seconds": float(seconds.group(1)) if seconds else None,
                                     "decision": decision.group(1) if decision else None})
        decisions = json.load(open(solved))["decisions"]
        solver = [d for d in decisions if d.startswith("pipeline(")]
        base = [d for d in decisions if not d.startswith("pipeline(")]
        if not solver:
            entry["error"] = ("solver: " + entry["kernels"][0]["line"][:300]) if entry["kernels"] else "no pipelined kernel"
            manifest.append(entry)
            print(name, "no pipelined kernel", flush=True)
            continue
        variants = {"solver": decisions, "search": base}
        # The hand-pinned alternatives: every ring depth, and warp_spec's other pipelining of
        # the consumers' loop (overlap=1 issues P·V behind the next QKᵀ; a GEMM refuses it).
        def with_overlap(ds, overlap):
            out = []
            for d in ds:
                if d.startswith("warp_spec("):
                    d = re.sub(r", overlap=\d", "", d)
                    d = d[:-1] + (", overlap=1)" if overlap else ")")
                out.append(d)
            return out
        for stages in (2, 3, 4):
            pinned = [re.sub(r"stages=\d+", f"stages={stages}", d) for d in solver]
            for overlap in (0, 1):
                variants[f"stages={stages},overlap={overlap}"] = with_overlap(base, overlap) + pinned
        for label, ds in variants.items():
            schedule_path = os.path.join(OUT, "pk", f"{name}.{label}.json")
            json.dump({"decisions": ds}, open(schedule_path, "w"), indent=2)
            package = os.path.join(OUT, "pk", f"{name}__{label.replace('=', '').replace(',', '_')}")
            c = nautilus("compile", spec_path, "--arch", "sm_90a", "--schedule", schedule_path, *defines(sizes), "-o", package)
            entry["packages"][label] = {"package": os.path.basename(package), "decisions": ds,
                                        "ok": c.returncode == 0,
                                        "error": None if c.returncode == 0 else (c.stderr or c.stdout)[-400:]}
        vpackage = os.path.join(OUT, "pk", f"{name}__validate")
        c = nautilus("compile", spec_path, "--arch", "sm_90a", "--schedule",
                     os.path.join(OUT, "pk", f"{name}.solver.json"), *defines(vsizes), "-o", vpackage)
        entry["validation_package"] = os.path.basename(vpackage) if c.returncode == 0 else None
        entry["validation_error"] = None if c.returncode == 0 else (c.stderr or c.stdout)[-400:]
        ref_key = spec + "|" + ",".join(vsizes)
        if ref_key not in references:
            ref = os.path.join(OUT, "pk", "ref_" + re.sub(r"[^A-Za-z0-9]+", "_", ref_key))
            r = nautilus("compile", spec_path, "--arch", "sm_90a", *defines(vsizes), "-o", ref)
            references[ref_key] = os.path.basename(ref) if r.returncode == 0 else None
        entry["reference_package"] = references[ref_key]
        manifest.append(entry)
        json.dump(manifest, open(path, "w"), indent=1)  # after each: an interrupted run keeps its work
        print(name, [k["line"][:90] for k in entry["kernels"]],
              {k: v["ok"] for k, v in entry["packages"].items()}, flush=True)
    # Packages are timed by the runner; the sources and PTX stay here.
    times = [k["solve_seconds"] for e in manifest for k in e["kernels"] if k["solve_seconds"] is not None]
    if times:
        print(f"solve time over {len(times)} kernels: median {statistics.median(times):.2f} s, "
              f"worst {max(times):.2f} s")


def solve_times(only):
    """`nautilus pipeline` on every solved kernel of the manifest, as the completion posed it (its
    kernel, machine and consumer count, the searched schedule without the pipeline decision):
    the solve time of each, then the median and the worst. Run it on an idle machine."""
    manifest = json.load(open(os.path.join(OUT, "manifest.json")))
    times = []
    for entry in manifest:
        if only and entry["name"] not in only:
            continue
        schedule = os.path.join(OUT, "pk", entry["name"] + ".search.json")
        if not os.path.exists(schedule):
            schedule = os.path.join(OUT, "pk", entry["name"] + ".solved.json")
        spec_path = os.path.join(ROOT, "assets", "specs", entry["spec"] + ".nt")
        for kernel in entry["kernels"]:
            args = ["pipeline", spec_path, "--schedule", schedule, "--kernel", kernel["kernel"],
                    *defines(entry["sizes"])]
            if kernel["form"] == "sm_90a roles":
                consumers = re.search(r"consumers=(\d)", kernel["decision"] or "")
                args += ["--arch", "sm_90a", "--consumers", consumers.group(1) if consumers else "2"]
            else:
                args += ["--arch", "sm_80"]
            done = nautilus(*args)
            seconds = re.search(r"solve time ([0-9.]+) s", done.stdout)
            status = re.search(r"^solution: (.*)$", done.stdout, re.M)
            t = float(seconds.group(1)) if seconds else None
            if t is not None:
                times.append(t)
            print(f"{entry['name']} {kernel['kernel']}: {status.group(1) if status else done.stderr[-200:]}, "
                  f"{t} s", flush=True)
    if times:
        print(f"solve time over {len(times)} kernels: median {statistics.median(times):.2f} s, "
              f"worst {max(times):.2f} s")


def run_runner(args, timeout=120):
    runner = os.path.join(OUT, "bin", "nautilus-runner")
    try:
        done = subprocess.run([runner, *args], capture_output=True, text=True, timeout=timeout)
        # The report is the JSON object on stdout; anything the driver prints before it is not.
        return json.loads(done.stdout[done.stdout.index("{"):])
    except Exception as error:  # a timeout or a crash of the runner: report, go on
        return {"error": (str(error) + " " + (done.stdout[-200:] + done.stderr[-200:] if "done" in locals() else ""))[:400]}


def measure(reps, only):
    manifest = json.load(open(os.path.join(OUT, "manifest.json")))
    pk = os.path.join(OUT, "pk")
    device = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rows, lines = [], [f"device {device}, {when}, reps {reps}, best of 2 runs, L2 flushed"]
    header = ("| config | solver pipeline | solve s | validation | solver µs | search µs | "
              "pinned (stages, overlap): µs | best pinned | solver / best pinned |")
    lines += [header, "|---|---|---|---|---|---|---|---|---|"]
    for entry in manifest:
        if only and entry["name"] not in only:
            continue
        if entry.get("error"):
            lines.append(f"| {entry['name']} | {entry['error']} | | | | | | | |")
            continue
        times = {}
        for label, p in entry["packages"].items():
            if not p["ok"]:
                times[label] = None
                continue
            best = None
            for _ in range(2):
                r = run_runner([os.path.join(pk, p["package"]), "--reps", str(reps), "--warmup", "3", "--timeout", "5"])
                t = ((r.get("timing") or {}).get("total") or {}).get("median_us")
                if t:
                    best = t if best is None else min(best, t)
            times[label] = best
        validation = "not built"
        if entry.get("validation_package") and entry.get("reference_package"):
            r = run_runner([os.path.join(pk, entry["validation_package"]), "--reference",
                            os.path.join(pk, entry["reference_package"]), "--reps", "2", "--warmup", "1"], timeout=300)
            v = r.get("validation") or {}
            validation = f"{v.get('status', r.get('error', '?'))}"
        pinned_labels = [k for k in times if k.startswith("stages=")]
        pinned = [times[k] for k in pinned_labels if times.get(k)]
        best_label = min((k for k in pinned_labels if times.get(k)), key=lambda k: times[k], default=None)
        ratio = (min(pinned) / times["solver"]) if pinned and times.get("solver") else None
        decision = "; ".join(k["decision"] or "kept" for k in entry["kernels"])
        solve = ", ".join(f"{k['solve_seconds']:.2f}" for k in entry["kernels"] if k["solve_seconds"] is not None)
        fmt = lambda x: f"{x:.1f}" if x else "–"
        lines.append(f"| {entry['name']} | {decision} | {solve} | {validation} | {fmt(times.get('solver'))} | "
                     f"{fmt(times.get('search'))} | "
                     + ", ".join(f"{k[7:].replace(',overlap=', '/')}: {fmt(times[k])}" for k in pinned_labels if times.get(k))
                     + f" | {best_label} | {ratio and f'{ratio:.3f}'} |")
        rows.append({"name": entry["name"], "times": times, "validation": validation, "ratio": ratio,
                     "kernels": entry["kernels"]})
        print(lines[-1], flush=True)
        # After every row: a job stopped by its time limit keeps what it measured.
        out = os.environ.get("OUT", OUT)
        open(os.path.join(out, "pipeline_solver.md"), "w").write("\n".join(lines) + "\n")
        json.dump(rows, open(os.path.join(out, "pipeline_solver.json"), "w"), indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["prepare", "measure", "solve-times"])
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--solver-time", type=float, default=20,
                        help="the pipeline solver's limit per kernel (nautilus schedule --solver-time)")
    args = parser.parse_args()
    if args.step == "prepare":
        prepare(args.only, args.solver_time)
    elif args.step == "solve-times":
        solve_times(args.only)
    else:
        measure(args.reps, args.only)


if __name__ == "__main__":
    main()
