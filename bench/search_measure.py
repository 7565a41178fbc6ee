#!/usr/bin/env python3
"""Auto-scheduler benchmark, step 2 (on the GPU machine): times every package that
bench/search_prepare.py compiled with nautilus-runner (CUPTI medians, L2 flushed) and prints,
per configuration, the hand schedule, the searched schedule and the best variant, and whether the
measured best is among the cost model's five lowest estimates. Writes
bench/out-search/results.md and results.json.

Usage (from the repository root): python3 bench/search_measure.py [--reps N]
"""
import argparse
import datetime
import json
import os
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out-search")


def median_us(package, reps):
    # A variant far off the good shapes (an FMA fallback, a spilling tile) can take seconds per
    # launch: the runner gives up on one wait after 5 s, and the whole package after 40 s.
    command = [os.path.join(OUT, "nautilus-runner"), os.path.join(OUT, package), "--reps", str(reps),
               "--warmup", "2", "--timeout", "5"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=40)
        report = json.loads(done.stdout)
    except (subprocess.TimeoutExpired, json.JSONDecodeError) as error:
        return None, str(error)[:200]
    total = ((report.get("timing") or {}).get("total") or {}).get("median_us")
    if total is None:
        return None, json.dumps(report.get("errors"))[:200]
    return total, None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--budget-s", type=float, default=480, help="stop timing after this many seconds")
    parser.add_argument("--variants", help="time the variants only of these configurations (comma-separated "
                        "names); the hand and searched schedules are always timed")
    parser.add_argument("--resume", action="store_true",
                        help="start from results.json of an earlier, cut-off run and time only what it did not")
    options = parser.parse_args()
    results_path = os.path.join(OUT, "results.json")
    manifest = json.load(open(results_path if options.resume and os.path.exists(results_path)
                              else os.path.join(OUT, "manifest.json")))
    lines = [f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC", "",
             "| configuration | hand µs | searched µs | searched / hand | best variant (µs) | model rank of best | best in model top 5 | candidates timed | search s |",
             "|---|---|---|---|---|---|---|---|---|"]
    deadline = time.time() + options.budget_s
    for config in manifest["configs"]:
        for entry in config["candidates"]:
            wanted = (not entry["label"].startswith("variant_") or options.variants is None or
                      config["name"] in options.variants.split(","))
            if "package" in entry and wanted and "measured_us" not in entry and time.time() < deadline:
                entry["measured_us"], entry["run_error"] = median_us(entry["package"], options.reps)
        timed = [e for e in config["candidates"] if e.get("measured_us")]
        by_label = {e["label"]: e for e in config["candidates"]}
        best = min(timed, key=lambda e: e["measured_us"]) if timed else None
        ranked = sorted([e for e in timed if e.get("estimate_us")], key=lambda e: e["estimate_us"])
        rank = next((i + 1 for i, e in enumerate(ranked) if best and e["label"] == best["label"]), None)
        hand = by_label.get("hand", {}).get("measured_us")
        searched = by_label.get("searched", {}).get("measured_us")
        config["best"] = best and best["label"]
        config["model_rank_of_best"] = rank
        lines.append(f"| {config['name']} | {hand and round(hand, 1)} | {searched and round(searched, 1)} | "
                     f"{round(searched / hand, 3) if hand and searched else '–'} | "
                     f"{best and best['label']} ({best and round(best['measured_us'], 1)}) | {rank} | "
                     f"{'yes' if rank and rank <= 5 else 'no'} | {len(timed)} | {config['search_seconds']} |")
        print(lines[-1], flush=True)
        # Written after every configuration, so a cut-off run keeps what it measured.
        json.dump(manifest, open(os.path.join(OUT, "results.json"), "w"), indent=1)
        open(os.path.join(OUT, "results.md"), "w").write("\n".join(lines) + "\n")

    # The searched kernels against the peers that bench/measure.py timed in the same job.
    peers_path = os.path.join(ROOT, "bench", "out", "results.json")
    if os.path.exists(peers_path):
        peers = {row["config"]: row for row in json.load(open(peers_path))["rows"]}
        lines += ["", "| configuration | searched TFLOP/s | FA2 | cuDNN | Flex | cuBLAS | searched / FA2 | "
                  "searched / cuDNN | searched / Flex | searched / cuBLAS |", "|---|---|---|---|---|---|---|---|---|---|"]
        for config in manifest["configs"]:
            searched = next((e.get("measured_us") for e in config["candidates"] if e["label"] == "searched"), None)
            sizes = dict(item.split("=") for item in config["sizes"])
            if config["family"] == "attention":
                causal = config["spec"] == "causal_attention"
                b, h, s, d = (int(sizes[k]) for k in ("B", "H", "M", "D"))
                flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
                label = f"attention B={b} H={h} S={s} D={d}{' causal' if causal else ''}"
            else:
                n = int(sizes["M"])
                flops, label = 2.0 * n ** 3, f"gemm {n}³"
            row = peers.get(label, {})
            ours = flops / (searched * 1e-6) / 1e12 if searched else None
            cells = [label, f"{ours:.0f}" if ours else "–"]
            for key in ("fa2", "cudnn", "flex", "cublas"):
                cells.append(f"{row[key + '_tflops']:.0f}" if row.get(key + "_tflops") else "–")
            for key in ("fa2", "cudnn", "flex", "cublas"):
                peer = row.get(key + "_tflops")
                cells.append(f"{ours / peer:.2f}" if ours and peer else "–")
            lines.append("| " + " | ".join(cells) + " |")
        open(os.path.join(OUT, "results.md"), "w").write("\n".join(lines) + "\n")
        print("\n".join(lines[-len(manifest["configs"]) - 2:]), flush=True)


if __name__ == "__main__":
    main()
