#!/usr/bin/env python3
"""Layout synthesis against the first-wins rules: the same schedules compiled both ways and timed
side by side (docs/matile.md, rule 4, "Layout synthesis").

Step 1, `prepare` (development machine, after a build): for every asset below, its hand schedule
and the search's pick (`nautilus schedule`), each compiled for sm_90a with `--layouts
synthesized` and `--layouts rules`, plus the unscheduled package as the reference; the count of
shared-memory conversions of each is read from the MA tile IR. Kernels whose code is the same
both ways are left out of the timing.
The packages keep their cubin, not their PTX, and bin/ holds the stripped runner, so the folder
travels to the GPU machine as it is (its libstdc++ may be older: set LD_LIBRARY_PATH to a folder
with the one the runner was linked with, as bench/attention_rows.py pack copies).
Step 2, `measure` (GPU machine, from the repository root): validates every package against the
reference and times it with nautilus-runner (CUPTI medians, L2 flushed; two runs, the better
kept), then prints the table and writes it to $OUT/layouts.md when OUT is set.

Usage: python3 bench/layouts.py prepare
       python3 bench/layouts.py measure [--reps N]
Writes bench/out-layouts/ (git-ignored).
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out-layouts")
ASSETS = ["softmax", "logsumexp", "layernorm", "rmsnorm"]


def nautilus(*args):
    return subprocess.run([os.path.join(ROOT, "build", "app", "nautilus"), *args], capture_output=True, text=True)


def slim(package):
    """The GPU machine loads the cubin: the PTX stays here (the folder travels to the GPU)."""
    launch_path = os.path.join(package, "launch.json")
    if not os.path.exists(launch_path):
        return
    launch = json.load(open(launch_path))
    launch.pop("ptx", None)
    json.dump(launch, open(launch_path, "w"))
    for f in os.listdir(package):
        if f.endswith(".ptx"):
            os.remove(os.path.join(package, f))


def prepare():
    os.makedirs(os.path.join(OUT, "bin"), exist_ok=True)
    subprocess.run(["strip", "-o", os.path.join(OUT, "bin", "nautilus-runner"),
                    os.path.join(ROOT, "build", "app", "nautilus-runner")], check=True)
    manifest = []
    for asset in ASSETS:
        spec = os.path.join(ROOT, "assets", "specs", asset + ".nt")
        hand = os.path.join(ROOT, "assets", "schedules", asset + ".json")
        picked = os.path.join(OUT, asset + ".searched.json")
        done = nautilus("schedule", spec, "--ignore-db", "-o", picked)
        if done.returncode != 0:
            print(asset, "schedule failed:", done.stderr[-400:])
            continue
        reference = os.path.join(OUT, "pk", asset + ".reference")
        nautilus("compile", spec, "--arch", "sm_90a", "-o", reference)
        slim(reference)
        for label, schedule in (("hand", hand), ("searched", picked)):
            entry = {"asset": asset, "schedule": label, "reference": os.path.relpath(reference, OUT)}
            texts = {}
            for layouts in ("synthesized", "rules"):
                package = os.path.join(OUT, "pk", f"{asset}.{label}.{layouts}")
                compiled = nautilus("compile", spec, "--arch", "sm_90a", "--schedule", schedule,
                                    "--layouts", layouts, "-o", package)
                lowered = nautilus("lower", spec, "--stage", "matile", "--arch", "sm_90a", "--schedule",
                                   schedule, "--layouts", layouts)
                texts[layouts] = lowered.stdout
                slim(package)
                entry[layouts] = {
                    "package": os.path.relpath(package, OUT),
                    "ok": compiled.returncode == 0,
                    "shared_conversions": sum("convert_layout" in line and "via shared" in line
                                              for line in lowered.stdout.splitlines()),
                    "conversions": lowered.stdout.count("convert_layout"),
                }
            entry["changed"] = texts["synthesized"] != texts["rules"]
            manifest.append(entry)
            print(asset, label, "changed" if entry["changed"] else "same",
                  {k: entry[k]["shared_conversions"] for k in ("rules", "synthesized")})
    json.dump(manifest, open(os.path.join(OUT, "manifest.json"), "w"), indent=1)


def run_runner(args):
    runner = os.path.join(OUT, "bin", "nautilus-runner")
    try:
        done = subprocess.run([runner, *args], capture_output=True, text=True, timeout=120)
        return json.loads(done.stdout)
    except Exception as error:  # a timeout or a crash: report it, go on
        return {"errors": [{"kind": "runner", "message": str(error)}]}


def total_median(report):
    return ((report.get("timing") or {}).get("total") or {}).get("median_us")


def measure(reps):
    manifest = json.load(open(os.path.join(OUT, "manifest.json")))
    lines = [f"layouts.py measure, {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC", "",
             "| asset | schedule | shared conversions (rules -> synthesized) | validation | rules µs | synthesized µs | rules / synthesized |",
             "|---|---|---|---|---|---|---|"]
    for entry in manifest:
        if not entry["changed"]:
            continue
        times, validation = {}, []
        for layouts in ("rules", "synthesized"):
            package = os.path.join(OUT, entry[layouts]["package"])
            checked = run_runner([package, "--reference", os.path.join(OUT, entry["reference"]), "--reps", "3"])
            validation.append(f"{layouts}: {(checked.get('validation') or {}).get('status', checked.get('errors'))}")
            best = None
            for _ in range(2):
                timed = total_median(run_runner([package, "--reps", str(reps), "--warmup", "5"]))
                if timed is not None and (best is None or timed < best):
                    best = timed
            times[layouts] = best
        ratio = (f"{times['rules'] / times['synthesized']:.3f}"
                 if times["rules"] and times["synthesized"] else "–")
        fmt = lambda t: f"{t:.1f}" if t else "–"
        lines.append(f"| {entry['asset']} | {entry['schedule']} | {entry['rules']['shared_conversions']} -> "
                     f"{entry['synthesized']['shared_conversions']} | {'; '.join(validation)} | "
                     f"{fmt(times['rules'])} | {fmt(times['synthesized'])} | {ratio} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if os.environ.get("OUT"):
        open(os.path.join(os.environ["OUT"], "layouts.md"), "w").write(text)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("step", choices=["prepare", "measure"])
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    if args.step == "prepare":
        prepare()
    else:
        measure(args.reps)


if __name__ == "__main__":
    sys.exit(main())
