#!/usr/bin/env python3
"""Persistent CTAs with the dynamic tile scheduler against one CTA per tile and the static walk
(docs/schedules.md "persistent"), on every attention row of ANCHORS.md and GEMM 4096³ / 8192³.

Step 1, `prepare` (any machine with the build; NVRTC compiles sm_90a): per configuration
  - `nautilus schedule` twice: as it searches now ("searched"; the search offers persistent CTAs
    only with SearchOptions::offer_persistent, off since the H100 measurement in bench/RESULTS.md
    "Persistent CTAs with the dynamic tile scheduler"), and with `--forbid 'persistent(BLOCK)'`
    ("base", the search without persistent CTAs);
  - packages (`nautilus compile --arch sm_90a`) of: base; base + persistent(X, scheduler=static);
    base + persistent(X) (dynamic); searched (when it differs from both); and the unscheduled
    reference every package is validated against.
  Writes bench/out-dynsched/ (packages, schedules, the nautilus-runner binary, manifest.json).
Step 2, `measure` (the GPU machine): runs nautilus-runner on every package against its
  configuration's reference (CUPTI medians, L2 flushed, one reference run per configuration
  through --reference-cache) and prints the table (also results.md, results.json). Every package
  must pass validation: a failure is printed with the runner's first error.

Usage (repository root): python3 bench/dynamic_persistent.py prepare [--build DIR]
                         python3 bench/dynamic_persistent.py measure [--reps N]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out-dynsched")

# (B, H, S, D, causal): every attention row of ANCHORS.md (16384 tokens, H * D = 2048).
ATTENTION = [(16384 // s, 2048 // d, s, d, causal)
             for d in (64, 128) for s in (512, 2048, 8192, 16384) for causal in (False, True)]
GEMM = [4096, 8192]
FORMS = ("base", "static", "dynamic", "searched")


def configs():
    out = [(f"attention_B{b}_H{h}_S{s}_D{d}_{'causal' if c else 'full'}",
            os.path.join("assets", "specs", ("causal_attention" if c else "attention") + ".nt"),
            [f"B={b}", f"H={h}", f"M={s}", f"N={s}", f"D={d}"], "O_sum_acc")
           for b, h, s, d, c in ATTENTION]
    out += [(f"gemm_{n}", os.path.join("assets", "specs", "gemm.nt"), [f"M={n}", f"N={n}", f"K={n}"], "C_sum")
            for n in GEMM]
    return out


def run(command):
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stdout}{done.stderr}")
    return done.stdout


def sizes_args(sizes):
    return [a for s in sizes for a in ("-D", s)]


def estimate_of(text):
    found = re.search(r"^estimate: ([0-9.]+) ", text, re.M)
    return float(found.group(1)) if found else None


def prepare(build):
    nautilus = os.path.join(build, "app", "nautilus")
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(os.path.join(OUT, "schedules"))
    shutil.copy(os.path.join(build, "app", "nautilus-runner"), OUT)
    manifest = {"configs": []}
    for name, spec, sizes, block in configs():
        entry = {"name": name, "spec": spec, "sizes": sizes, "packages": {}}
        schedules = {}
        for form, extra in (("searched", []), ("base", ["--forbid", f"persistent({block})"])):
            path = os.path.join(OUT, "schedules", f"{name}.{form}.json")
            started = time.time()
            text = run([nautilus, "schedule", spec, *sizes_args(sizes), *extra, "-o", path])
            entry[f"{form}_search_s"] = round(time.time() - started, 1)
            entry[f"{form}_estimate_us"] = estimate_of(text)
            schedules[form] = json.load(open(path))["decisions"]
        base = schedules["base"]
        target = next((re.match(r"warp_spec\((\w+)", d).group(1) for d in base if d.startswith("warp_spec(")), block)
        variants = {"base": base,
                    "static": base + [f"persistent({target}, scheduler=static)"],
                    "dynamic": base + [f"persistent({target})"]}
        if schedules["searched"] not in (variants["base"], variants["dynamic"]):
            variants["searched"] = schedules["searched"]
        entry["schedules"] = variants
        entry["searched_is"] = next((f for f, d in variants.items() if d == schedules["searched"]), "searched")
        for form, decisions in variants.items():
            path = os.path.join(OUT, "schedules", f"{name}.{form}.compile.json")
            json.dump({"decisions": decisions}, open(path, "w"), indent=1)
            package = os.path.join(OUT, name, form)
            run([nautilus, "compile", spec, *sizes_args(sizes), "--schedule", path, "--arch", "sm_90a", "-o", package])
            entry["packages"][form] = os.path.relpath(package, OUT)
        reference = os.path.join(OUT, name, "reference")
        run([nautilus, "compile", spec, *sizes_args(sizes), "--arch", "sm_90a", "-o", reference])
        entry["reference"] = os.path.relpath(reference, OUT)
        manifest["configs"].append(entry)
        print(f"{name}: searched = {entry['searched_is']} (estimate {entry['searched_estimate_us']} us, "
              f"without persistent {entry['base_estimate_us']} us)", flush=True)
    json.dump(manifest, open(os.path.join(OUT, "manifest.json"), "w"), indent=1)


def measure(reps):
    manifest = json.load(open(os.path.join(OUT, "manifest.json")))
    cache = os.path.join(OUT, "reference-cache")
    rows, results = [], []
    for entry in manifest["configs"]:
        result = {"name": entry["name"], "searched_is": entry["searched_is"], "us": {}, "validation": {}}
        for form in FORMS:
            if form not in entry["packages"]:
                continue
            command = [os.path.join(OUT, "nautilus-runner"), os.path.join(OUT, entry["packages"][form]),
                       "--reference", os.path.join(OUT, entry["reference"]), "--reference-cache", cache,
                       "--reps", str(reps), "--warmup", "5", "--timeout", "10"]
            done = subprocess.run(command, capture_output=True, text=True, timeout=600)
            try:
                report = json.loads(done.stdout)
            except json.JSONDecodeError:
                report = {"status": "no report", "errors": [{"message": done.stderr[-300:]}]}
            median = ((report.get("timing") or {}).get("total") or {}).get("median_us")
            status = (report.get("validation") or {}).get("status", report.get("status"))
            result["us"][form] = median
            result["validation"][form] = status
            if status != "passed":
                print(f"{entry['name']} {form}: {status}: {json.dumps(report.get('errors'))[:300]}", flush=True)
        results.append(result)
        us = result["us"]
        cell = lambda form: f"{us[form]:.1f}" if us.get(form) else "-"
        ratio = f"{us['base'] / us['dynamic']:.3f}" if us.get("base") and us.get("dynamic") else "-"
        rows.append(f"| {entry['name']} | {cell('base')} | {cell('static')} | {cell('dynamic')} | "
                    f"{cell('searched')} | {entry['searched_is']} | {ratio} | "
                    f"{'/'.join(str(result['validation'].get(f, '-')) for f in FORMS)} |")
        print(rows[-1], flush=True)
    header = ["| row | base µs | + static µs | + dynamic µs | searched µs (if other) | search picks | base / dynamic | validation (base/static/dynamic/searched) |",
              "|---|---|---|---|---|---|---|---|"]
    open(os.path.join(OUT, "results.md"), "w").write("\n".join(header + rows) + "\n")
    json.dump(results, open(os.path.join(OUT, "results.json"), "w"), indent=1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("step", choices=("prepare", "measure"))
    parser.add_argument("--build", default=os.environ.get("NAUTILUS_BUILD_DIR", os.path.join(ROOT, "build")))
    parser.add_argument("--reps", type=int, default=20)
    options = parser.parse_args()
    prepare(options.build) if options.step == "prepare" else measure(options.reps)


if __name__ == "__main__":
    main()
