#!/usr/bin/env python3
"""Pinned forms of one spec: each partial schedule completed by the search, its estimate beside
its measured time, validated at small sizes on the GPU. How a model miss or a schedule the search
did not take is studied (bench/NOTES.md).

Step 1, `prepare` (development machine, after a build): per form, `nautilus schedule --schedule
PARTIAL` completes the partial schedule (the decisions as pins; --as-written compiles them with no
completion) and records the estimate; the completed schedule is compiled for sm_90a at the spec's
sizes (or -D NAME=VALUE) and at the validation sizes (-V NAME=VALUE, over -D), beside the unscheduled package at those sizes
as the reference. Writes DIR/manifest.json and DIR/pk/.
Step 2, `measure` (GPU machine, from a copy of DIR that holds bin/nautilus-runner, which prepare
copies there): validates each form against the reference and times it (CUPTI median of --reps,
L2 flushed by the runner's read), then prints a table of measured against estimated times, with
each kernel's own median and registers, and writes DIR/forms.md (and $OUT/forms.md when $OUT is
set).

Usage: python3 bench/forms.py prepare DIR SPEC --form LABEL='D1;D2;...' [--form ...]
           [--as-written LABEL] [--grouped LABEL] [--flags LABEL='FLAGS'] [-D NAME=VALUE]... [-V NAME=VALUE]... [--device h100|h200]
           [--arch sm_90a]
       python3 DIR/forms.py measure DIR [--reps N]
DIR is best inside bench/out-gpu*/ (git-ignored), which travels to a GPU machine as one folder
(a few MB: the stripped runner, its C++ runtime, the packages).
"""
import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE) if os.path.basename(HERE) == "bench" else None


def run(command, timeout=900):
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout + done.stderr


def prepare(args):
    if ROOT is None:
        sys.exit("prepare runs from the repository (bench/forms.py)")
    os.makedirs(os.path.join(args.dir, "pk"), exist_ok=True)
    os.makedirs(os.path.join(args.dir, "bin"), exist_ok=True)
    for name in ("nautilus", "nautilus-runner"):
        shutil.copy2(os.path.join(ROOT, "build", "app", name), os.path.join(args.dir, "bin", name))
    subprocess.run(["strip", os.path.join(args.dir, "bin", "nautilus-runner")], check=False)
    # The C++ runtime the runner was linked with: the GPU host's may be older.
    ldd = subprocess.run(["ldd", os.path.join(args.dir, "bin", "nautilus-runner")], capture_output=True, text=True)
    for line in ldd.stdout.splitlines():
        found = re.search(r"(libstdc\+\+\.so\.6|libgcc_s\.so\.1) => (\S+)", line)
        if found:
            shutil.copy2(found.group(2), os.path.join(args.dir, "bin", found.group(1)))
    shutil.copy2(os.path.abspath(__file__), os.path.join(args.dir, "forms.py"))
    nautilus = os.path.join(args.dir, "bin", "nautilus")
    spec = os.path.abspath(args.spec)
    sizes = [arg for size in args.sizes for arg in ("-D", size)]
    # The validation sizes after the realistic ones: a size named in both takes its -V value.
    validation = sizes + [arg for size in args.validate for arg in ("-D", size)]
    pk = lambda *parts: os.path.join(args.dir, "pk", *parts)
    rc, out = run([nautilus, "compile", spec, "--arch", args.arch, "-o", pk("reference")] + validation)
    if rc != 0:
        sys.exit("the reference did not compile: " + out[-400:])
    manifest = {"spec": spec, "sizes": args.sizes, "device_model": args.device, "arch": args.arch,
                "validation_sizes": args.validate, "forms": [],
                "prepared": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    extra_flags = {}
    for text in args.flags:
        label, _, flags = text.partition("=")
        extra_flags[label] = flags.split()
    for text in args.form:
        label, _, decisions = text.partition("=")
        partial = [d.strip() for d in decisions.split(";") if d.strip()]
        json.dump({"decisions": partial}, open(pk(label + ".partial.json"), "w"), indent=1)
        form = {"label": label, "partial": partial}
        flags = extra_flags.get(label, [])
        if label in args.as_written:
            shutil.copy2(pk(label + ".partial.json"), pk(label + ".json"))
            # The model's estimate of the form as written, lowered with the form's flags.
            rc, out = run([nautilus, "lower", spec, *sizes, "--stage", "matile", "--arch", args.arch,
                           "--schedule", pk(label + ".json"), *flags, "--estimate", args.device])
            found = re.search(r"^\S+: ([0-9.]+) us, ", out, re.M)
            form["estimate_us"] = float(found.group(1)) if found else None
        else:
            rc, out = run([nautilus, "schedule", spec, *sizes, "--device", args.device, "--ignore-db",
                           "--schedule", pk(label + ".partial.json"), "-o", pk(label + ".json")])
            found = re.search(r"^estimate: ([0-9.]+)", out, re.M)
            form["estimate_us"] = float(found.group(1)) if found else None
        if rc != 0:
            form["error"] = out[-400:]
        else:
            form["decisions"] = json.load(open(pk(label + ".json")))["decisions"]
            reads = ["--shared-reads", "grouped"] if label in args.grouped else []
            form["shared_reads"] = "grouped" if reads else "elements"
            reads += flags
            if flags:
                form["flags"] = flags
            a = run([nautilus, "compile", spec, *sizes, "--arch", args.arch, "--schedule", pk(label + ".json"),
                     *reads, "-o", pk(label)])
            b = run([nautilus, "compile", spec, "--arch", args.arch, "--schedule", pk(label + ".json"),
                     *reads, "-o", pk(label + "__validate")] + validation)
            if a[0] != 0 or b[0] != 0:
                form["error"] = (a[1] + b[1])[-400:]
        manifest["forms"].append(form)
        json.dump(manifest, open(os.path.join(args.dir, "manifest.json"), "w"), indent=1)
        print(label, "estimate", form.get("estimate_us"), "error" if form.get("error") else "ok",
              form.get("decisions", [])[len(partial):], form.get("error", "")[-200:], flush=True)
    # The compiler's snapshot served this run only; DIR travels to the GPU machine without it.
    os.remove(nautilus)


def runner(directory, *args):
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.path.join(directory, "bin") + ":" + env.get("LD_LIBRARY_PATH", "")
    rc, out = run([os.path.join(directory, "bin", "nautilus-runner"), *args], timeout=300)
    try:
        return json.loads(out[out.index("{"):])
    except ValueError:
        return {"error": out[-300:]}


def measure(args):
    manifest = json.load(open(os.path.join(args.dir, "manifest.json")))
    pk = lambda *parts: os.path.join(args.dir, "pk", *parts)
    device = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip()
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"{os.path.basename(manifest['spec'])} {' '.join(manifest.get('sizes', []))} on {device}, {started}; cost model "
             f"{manifest['device_model']}; CUPTI median of {args.reps}, L2 flushed (read); validated at "
             f"{' '.join(manifest['validation_sizes'])}.", "",
             "| form | µs | estimate µs | measured / estimate | kernels µs (registers) | validation | decisions |",
             "|---|---|---|---|---|---|---|"]
    for form in manifest["forms"]:
        if form.get("error"):
            lines.append(f"| {form['label']} | – | – | – | – | not compiled | {form['error'][-120:]} |")
            continue
        check = runner(args.dir, pk(form["label"] + "__validate"), "--reference", pk("reference"),
                       "--reps", "1", "--warmup", "0")
        validation = check.get("validation") or {}
        status = f"{validation.get('status')} {validation.get('max_relative_error')}" if validation else \
            str(check.get("errors") or check.get("error"))[:120]
        timing = runner(args.dir, pk(form["label"]), "--reps", str(args.reps), "--warmup", "5")
        us = ((timing.get("timing") or {}).get("total") or {}).get("median_us")
        estimate = form.get("estimate_us")
        ratio = f"{us / estimate:.2f}" if us and estimate else "–"
        # Each kernel's own median, so that a change in one kernel of several is seen.
        kernels = ", ".join(f"{k.get('name')} {k.get('median_us', 0):.1f} ({k.get('registers')})"
                            for k in (timing.get("timing") or {}).get("kernels") or [])
        lines.append(f"| {form['label']} | {us:.1f} | {estimate if estimate else '–'} | {ratio} | {kernels} | {status} | "
                     f"{'; '.join(form['decisions'])}{' [' + ' '.join(form['flags']) + ']' if form.get('flags') else ''} |" if us else
                     f"| {form['label']} | – | {estimate} | – | – | {status} | {str(timing.get('errors') or timing.get('error'))[:120]} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    for folder in {args.dir, os.environ.get("OUT") or args.dir}:
        open(os.path.join(folder, "forms.md"), "w").write(text)
    print(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("dir")
    p.add_argument("spec")
    p.add_argument("--form", action="append", required=True, help="LABEL=D1;D2: a partial schedule")
    p.add_argument("--as-written", action="append", default=[], help="LABEL: compile the form with no completion")
    p.add_argument("--grouped", action="append", default=[],
                   help="LABEL: compile the form with --shared-reads grouped")
    p.add_argument("--flags", action="append", default=[],
                   help="LABEL='FLAGS': compile (and estimate) the form with these nautilus compile flags, "
                        "e.g. --flags early='--ring-release early'")
    p.add_argument("-D", dest="sizes", action="append", default=[], help="NAME=VALUE: a size of the timed package")
    p.add_argument("-V", dest="validate", action="append", default=[], help="NAME=VALUE: a validation size")
    p.add_argument("--device", default="h100", help="the cost model's GPU (nautilus schedule --device)")
    p.add_argument("--arch", default="sm_90a")
    m = sub.add_parser("measure")
    m.add_argument("dir")
    m.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()
    args.dir = os.path.abspath(args.dir)
    prepare(args) if args.step == "prepare" else measure(args)


if __name__ == "__main__":
    main()
