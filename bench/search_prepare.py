#!/usr/bin/env python3
"""Auto-scheduler benchmark, step 1 (on the development machine): for each configuration it
compiles (sm_90a) the hand schedule from assets/schedules, the schedule `nautilus schedule`
chooses, and a family of variants of the hand schedule (tile sizes, warps, pipeline stages), and
records the cost model's estimate of each (`nautilus lower --estimate h100`). Step 2,
bench/search_measure.py on the GPU machine, times them all and checks that the model's top five
contain the measured best and that the searched schedule is within 5% of the hand one.

Usage (from the repository root, after a build): python3 bench/search_prepare.py [--build DIR]
[--step all|search|compile]
Writes bench/out-search/ (the packages, the runner, manifest.json). The searches run one at a
time (their wall time is reported); the candidates then compile on every core.
"""
import argparse
import concurrent.futures
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out-search")

# (B, H, S, D, causal): every attention row of ANCHORS.md (16384 tokens, H * D = 2048).
ATTENTION = [(16384 // s, 2048 // d, s, d, causal)
             for d in (64, 128) for s in (512, 2048, 8192, 16384) for causal in (False, True)]
GEMM = [4096, 8192]


def attention_variants(spec_is_causal):
    hand = json.load(open(os.path.join(ROOT, "assets", "schedules",
                                       ("causal_attention" if spec_is_causal else "attention") + ".json")))
    for m, n, warps, stages in itertools.product((64, 128), (32, 64, 128), (4, 8), (1, 2)):
        decisions = []
        for d in hand["decisions"]:
            d = re.sub(r"rolling_update\(O_sum, n, tile=\d+\)", f"rolling_update(O_sum, n, tile={n})", d)
            d = re.sub(r"tile\(O_sum_acc, m=\d+\)", f"tile(O_sum_acc, m={m})", d)
            d = re.sub(r"launch\(O_sum_acc, .*\)", f"launch(O_sum_acc, warps={warps}, stages={stages})", d)
            decisions.append(d)
        yield f"m{m}_n{n}_w{warps}_s{stages}", {"decisions": decisions}


def gemm_variants():
    for (m, n), k, warps, stages in itertools.product(((128, 128), (128, 256), (256, 128), (64, 128), (128, 64)),
                                                      (32, 64), (4, 8), (2, 3)):
        yield f"m{m}_n{n}_k{k}_w{warps}_s{stages}", {"decisions": [
            f"tile(C_sum, m={m}, n={n}, k={k})", "reverse_compute_at(C, C_sum, n_o)",
            "bind(C_sum, m_o=grid.y, n_o=grid.x)", f"launch(C_sum, warps={warps}, stages={stages})"]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.environ.get("NAUTILUS_BUILD_DIR", os.path.join(ROOT, "build")))
    parser.add_argument("--step", choices=("all", "search", "compile"), default="all",
                        help="search: the searches and the candidate list only (manifest.json, with the "
                        "nautilus and nautilus-runner binaries copied into bench/out-search); compile: the "
                        "estimates and packages of that manifest, with the copied nautilus, on every core "
                        "(run it on the GPU machine, whose 16 cores compile 500 candidates in minutes)")
    options = parser.parse_args()
    if options.step == "compile":
        compile_candidates(os.path.join(OUT, "nautilus"))
        return
    nautilus = os.path.join(options.build, "app", "nautilus")
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(os.path.join(OUT, "schedules"))
    for binary in ("nautilus", "nautilus-runner"):
        shutil.copy(os.path.join(options.build, "app", binary), OUT)
        subprocess.run(["strip", os.path.join(OUT, binary)], check=False)

    configs = [("attention", f"attention_B{b}_H{h}_S{s}_D{d}_{'causal' if c else 'full'}",
                "causal_attention" if c else "attention", [f"B={b}", f"H={h}", f"M={s}", f"N={s}", f"D={d}"])
               for b, h, s, d, c in ATTENTION]
    configs += [("gemm", f"gemm_{n}", "gemm", [f"M={n}", f"N={n}", f"K={n}"]) for n in GEMM]
    manifest = {"configs": []}
    # Step 1, one configuration at a time so that the search times are those of an otherwise idle
    # machine: the search.
    for family, name, spec, sizes in configs:
        spec_path = os.path.join("assets", "specs", spec + ".nt")
        size_args = [a for s in sizes for a in ("-D", s)]
        candidates = {"hand": json.load(open(os.path.join(ROOT, "assets", "schedules", spec + ".json")))}
        started = time.time()
        searched_path = os.path.join(OUT, "schedules", name + "_searched.json")
        search = subprocess.run([nautilus, "schedule", spec_path, *size_args, "-o", searched_path],
                                capture_output=True, text=True, cwd=ROOT)
        search_seconds = time.time() - started
        if search.returncode == 0:
            candidates["searched"] = json.load(open(searched_path))
        else:
            print(f"{name}: schedule failed: {search.stderr.strip()}", file=sys.stderr)
        variants = attention_variants(spec == "causal_attention") if family == "attention" else gemm_variants()
        for variant, schedule in variants:
            candidates["variant_" + variant] = schedule
        config = {"name": name, "family": family, "spec": spec, "sizes": sizes,
                  "search_seconds": round(search_seconds, 2), "candidates": []}
        manifest["configs"].append(config)
        for label, schedule in candidates.items():
            config["candidates"].append({"label": label, "decisions": schedule["decisions"]})
        print(f"{name}: search {search_seconds:.1f} s", file=sys.stderr, flush=True)
    json.dump(manifest, open(os.path.join(OUT, "manifest.json"), "w"), indent=1)
    if options.step == "all":
        compile_candidates(nautilus)


def compile_candidates(nautilus):
    """Step 2, on every core: each candidate's estimate (nautilus lower --estimate h100) and
    package (nautilus compile --arch sm_90a), recorded in manifest.json."""
    manifest = json.load(open(os.path.join(OUT, "manifest.json")))
    os.makedirs(os.path.join(OUT, "schedules"), exist_ok=True)
    jobs = []
    for config in manifest["configs"]:
        spec_path = os.path.join("assets", "specs", config["spec"] + ".nt")
        size_args = [a for s in config["sizes"] for a in ("-D", s)]
        for entry in config["candidates"]:
            jobs.append((entry, config["name"], spec_path, size_args))

    def prepare(job):
        entry, name, spec_path, size_args = job
        schedule_path = os.path.join(OUT, "schedules", f"{name}_{entry['label']}.json")
        json.dump({"decisions": entry["decisions"]}, open(schedule_path, "w"), indent=2)
        package = os.path.join(OUT, "packages", f"{name}_{entry['label']}")
        lowered = subprocess.run([nautilus, "lower", spec_path, *size_args, "--schedule", schedule_path,
                                  "--stage", "matile", "--estimate", "h100"],
                                 capture_output=True, text=True, cwd=ROOT)
        estimate = re.search(r"^\S+: ([0-9.]+) us, \d+ kernel", lowered.stdout, re.M)
        infeasible = "infeasible" in lowered.stdout
        entry["estimate_us"] = float(estimate.group(1)) if estimate and not infeasible else None
        if lowered.returncode != 0:
            entry["error"] = lowered.stderr.strip().splitlines()[-1] if lowered.stderr.strip() else "lower failed"
            return
        compiled = subprocess.run([nautilus, "compile", spec_path, *size_args, "--schedule", schedule_path,
                                   "--arch", "sm_90a", "-o", package], capture_output=True, text=True, cwd=ROOT)
        if compiled.returncode != 0:
            entry["error"] = compiled.stderr.strip().splitlines()[-1]
        else:
            entry["package"] = os.path.relpath(package, OUT)

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for done, _ in enumerate(pool.map(prepare, jobs), 1):
            if done % 50 == 0:
                print(f"{done} of {len(jobs)} candidates compiled", file=sys.stderr, flush=True)
    json.dump(manifest, open(os.path.join(OUT, "manifest.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
