#!/usr/bin/env python3
"""Consumer ping-pong benchmark: the searched schedule against the same with warp_spec's
pingpong=1, on every attention row of ANCHORS.md.

Step 1, `prepare` (development machine, after a build): for each row (d 64: H 32, d 128: H 16,
B = 16384 / S, S in 512 2048 8192 16384, plain and causal), `nautilus schedule` searches and the
pipeline solver completes the schedule; then two variants of it are compiled for sm_90a:
  off  every pingpong removed (warp_spec and the solver's pipeline decision),
  on   warp_spec(..., pingpong=1) added (recorded as not applicable where the search chose no
       warp specialization or one consumer warpgroup: ping-pong needs two),
and, so that every row has a comparison, the hand-written Hopper form of docs/schedules.md
(128 x 128 tiles, warp_spec consumers=2 stages=3 overlap=1) without and with pingpong=1
(hand_off, hand_on),
each once more at validation sizes that are not tile multiples (B 1, H 2, S 1000 at d 64,
1024 at d 128, where the overlapped form needs whole key tiles), beside the unscheduled package
at those sizes.
Step 2, `measure` (GPU machine): validates both variants against the unscheduled package and
times every package with nautilus-runner (CUPTI medians, L2 flushed; two runs each, the better
kept); prints the table and writes $OUT/pingpong.md and .json.

Usage: python3 bench/pingpong.py prepare [--only NAME...] [--solver-time S]
       python3 bench/pingpong.py measure [--reps N] [--only NAME...]
Writes bench/out-pingpong/ (git-ignored; $NAUTILUS_PINGPONG_BENCH names another folder: `measure`
needs only manifest.json, the packages and bin/nautilus-runner).
"""
import argparse
import datetime
import json
import os
import re
import shutil
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.environ.get("NAUTILUS_PINGPONG_BENCH", os.path.join(ROOT, "bench", "out-pingpong"))

ROWS = []
for d in (64, 128):
    for s in (512, 2048, 8192, 16384):
        for causal in (False, True):
            b, h = 16384 // s, 2048 // d
            v = 1000 if d == 64 else 1024
            ROWS.append((f"att_B{b}_H{h}_S{s}_D{d}_{'causal' if causal else 'full'}",
                         "causal_attention" if causal else "attention",
                         [f"B={b}", f"H={h}", f"M={s}", f"N={s}", f"D={d}"],
                         ["B=1", "H=2", f"M={v}", f"N={v}", f"D={d}"]))


def nautilus(*args, timeout=900):
    # A copy taken when prepare starts: a rebuild during the run does not change the compiler.
    return subprocess.run([os.path.join(OUT, "bin", "nautilus"), *args], capture_output=True, text=True,
                          timeout=timeout)


def defines(sizes):
    out = []
    for s in sizes:
        out += ["-D", s]
    return out


def without_pingpong(decisions):
    return [re.sub(r", pingpong=\d", "", d) for d in decisions]


def with_pingpong(decisions):
    """The schedule with warp_spec's pingpong=1, or None where its warp_spec has one consumer."""
    out, applied = [], False
    for d in without_pingpong(decisions):
        if d.startswith("warp_spec("):
            consumers = re.search(r"consumers=(\d)", d)
            if not consumers or int(consumers.group(1)) < 2:
                return None
            d = d[:-1] + ", pingpong=1)"
            applied = True
        out.append(d)
    return out if applied else None


def hand_hopper(causal):
    d = ["rolling_update(O_sum, n, tile=128)", "compute_at(S, Mx, n_o)"]
    if causal:
        d.append("compute_at(S_sum, S, n_o)")
    d += ["tile(O_sum_acc, m=128)", "reverse_compute_at(O, O_sum, m_o)",
          "bind(O_sum_acc, b=grid.z, h=grid.y, m_o=grid.x)"]
    if causal:
        d.append("skip_masked(S, n_o)")
    return d + ["warp_spec(O_sum_acc, consumers=2, stages=3, overlap=1)"]


def compile_package(spec_path, schedule, sizes, package):
    args = ["compile", spec_path, "--arch", "sm_90a", *defines(sizes), "-o", package]
    if schedule:
        args[4:4] = ["--schedule", schedule]
    done = nautilus(*args)
    return done.returncode == 0, None if done.returncode == 0 else (done.stderr or done.stdout)[-400:]


def prepare(only, solver_time):
    pk = os.path.join(OUT, "pk")
    os.makedirs(pk, exist_ok=True)
    os.makedirs(os.path.join(OUT, "bin"), exist_ok=True)
    for name in ("nautilus", "nautilus-runner"):
        shutil.copy2(os.path.join(ROOT, "build", "app", name), os.path.join(OUT, "bin", name))
    path = os.path.join(OUT, "manifest.json")
    manifest = [e for e in json.load(open(path)) if only and e["name"] not in only] if os.path.exists(path) else []
    references = {}
    for name, spec, sizes, vsizes in ROWS:
        if only and name not in only:
            continue
        spec_path = os.path.join(ROOT, "assets", "specs", spec + ".nt")
        entry = {"name": name, "spec": spec, "sizes": sizes, "validation_sizes": vsizes, "variants": {}}
        searched = os.path.join(pk, name + ".searched.json")
        done = nautilus("schedule", spec_path, *defines(sizes), "--ignore-db", "--solver-time", str(solver_time),
                        "-o", searched)
        entry["schedule_output"] = done.stdout[-3000:] + done.stderr[-1000:]
        if done.returncode != 0:
            entry["error"] = "schedule failed"
            manifest.append(entry)
            print(name, "schedule failed", done.stderr[-300:], flush=True)
            continue
        decisions = json.load(open(searched))["decisions"]
        entry["searched"] = decisions
        hand = hand_hopper(spec == "causal_attention")
        forms = {"off": without_pingpong(decisions), "on": with_pingpong(decisions),
                 "hand_off": hand, "hand_on": with_pingpong(hand)}
        for label, ds in forms.items():
            variant = {"decisions": ds}
            if ds is None:
                variant["error"] = "n/a: the searched schedule has no warp_spec of 2 or more consumers"
                entry["variants"][label] = variant
                continue
            schedule = os.path.join(pk, f"{name}.{label}.json")
            json.dump({"decisions": ds}, open(schedule, "w"), indent=2)
            package = os.path.join(pk, f"{name}__{label}")
            variant["ok"], variant["error"] = compile_package(spec_path, schedule, sizes, package)
            variant["package"] = os.path.basename(package)
            vpackage = os.path.join(pk, f"{name}__{label}__validate")
            ok, error = compile_package(spec_path, schedule, vsizes, vpackage)
            variant["validation_package"] = os.path.basename(vpackage) if ok else None
            variant["validation_error"] = error
            entry["variants"][label] = variant
        ref_key = spec + "|" + ",".join(vsizes)
        if ref_key not in references:
            ref = os.path.join(pk, "ref_" + re.sub(r"[^A-Za-z0-9]+", "_", ref_key))
            ok, _ = compile_package(spec_path, None, vsizes, ref)
            references[ref_key] = os.path.basename(ref) if ok else None
        entry["reference_package"] = references[ref_key]
        manifest.append(entry)
        json.dump(manifest, open(path, "w"), indent=1)  # after each: an interrupted run keeps its work
        print(name, {k: v.get("ok", v.get("error")) for k, v in entry["variants"].items()}, flush=True)


def run_runner(args, timeout=120):
    try:
        done = subprocess.run([os.path.join(OUT, "bin", "nautilus-runner"), *args], capture_output=True,
                              text=True, timeout=timeout)
        return json.loads(done.stdout)
    except Exception as error:  # a timeout or a crash of the runner: report, go on
        return {"error": str(error)[:300]}


def measure(reps, only):
    manifest = json.load(open(os.path.join(OUT, "manifest.json")))
    pk = os.path.join(OUT, "pk")
    device = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"device {device}, {when}, reps {reps}, best of 2 runs, L2 flushed",
             "| config | searched warp_spec | validation off / on | off µs | on µs | off / on | "
             "hand validation off / on | hand off µs | hand on µs | hand off / on |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    rows = []
    fmt = lambda x: f"{x:.1f}" if x else "–"
    for entry in manifest:
        if only and entry["name"] not in only:
            continue
        if entry.get("error"):
            lines.append(f"| {entry['name']} | {entry['error']} | | | | | |")
            continue
        warp_spec = next((d for d in entry["searched"] if d.startswith("warp_spec(")), "none")
        times, validations = {}, {}
        for label in ("off", "on", "hand_off", "hand_on"):
            variant = entry["variants"].get(label, {})
            times[label], validations[label] = None, variant.get("error") or "not built"
            if not variant.get("ok"):
                continue
            for _ in range(2):
                r = run_runner([os.path.join(pk, variant["package"]), "--reps", str(reps), "--warmup", "3",
                                "--timeout", "5"])
                t = ((r.get("timing") or {}).get("total") or {}).get("median_us")
                if t:
                    times[label] = t if times[label] is None else min(times[label], t)
            if variant.get("validation_package") and entry.get("reference_package"):
                r = run_runner([os.path.join(pk, variant["validation_package"]), "--reference",
                                os.path.join(pk, entry["reference_package"]), "--reps", "2", "--warmup", "1"],
                               timeout=300)
                validations[label] = (r.get("validation") or {}).get("status", r.get("error", "?"))
        ratio = times["off"] / times["on"] if times["off"] and times["on"] else None
        hand = times["hand_off"] / times["hand_on"] if times["hand_off"] and times["hand_on"] else None
        lines.append(f"| {entry['name']} | {warp_spec} | {validations['off']} / {validations['on']} | "
                     f"{fmt(times['off'])} | {fmt(times['on'])} | {ratio and f'{ratio:.3f}'} | "
                     f"{validations['hand_off']} / {validations['hand_on']} | {fmt(times['hand_off'])} | "
                     f"{fmt(times['hand_on'])} | {hand and f'{hand:.3f}'} |")
        rows.append({"name": entry["name"], "warp_spec": warp_spec, "times": times, "validation": validations,
                     "speedup": ratio, "hand_speedup": hand})
        print(lines[-1], flush=True)
        out = os.environ.get("OUT", OUT)  # after every row: a job stopped by its limit keeps its rows
        open(os.path.join(out, "pingpong.md"), "w").write("\n".join(lines) + "\n")
        json.dump(rows, open(os.path.join(out, "pingpong.json"), "w"), indent=1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["prepare", "measure"])
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--solver-time", type=float, default=20,
                        help="the pipeline solver's limit per kernel (nautilus schedule --solver-time)")
    args = parser.parse_args()
    if args.step == "prepare":
        prepare(args.only, args.solver_time)
    else:
        measure(args.reps, args.only)


if __name__ == "__main__":
    main()
