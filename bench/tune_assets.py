#!/usr/bin/env python3
"""Measured tuning of every asset: `nautilus tune` with a budget per asset, on several GPUs.

Step 1, `pack` (development machine, after a build): copies the CLI, the runner and the shared
libraries the CLI needs on a GPU host without Z3 or SQLite (libz3, libsqlite3, libstdc++,
libgcc_s) into bench/out-tune/bin (git-ignored; $NAUTILUS_TUNE_BENCH names another folder).
Step 2, `run` (GPU machine, from the repository root): one `nautilus tune SPEC --budget N
--resume --devices G` per asset at the sizes below, the assets queued over the listed GPUs (one
tune per GPU at a time, the longest first), all into one database (bench/out-tune/tune.db).
`--deadline S` interrupts the tunes still running after S seconds (SIGINT: the candidates in
flight are recorded) and starts no new one in the last 30, so a call that ends before the queue
does leaves the rest to a later `run`, which resumes: every tune runs with `--resume`, so
what an earlier call measured counts against the budget and is not measured again.
Step 3, `resume-check` (GPU machine): each asset's tune once more with `--resume`; each must
measure nothing. Step `report`: the table (measured, failures, duplicates, time, candidates per
minute, best, the search's own pick and the gain) from the logs, with the database's own count
of measured records and best (a run killed at its deadline leaves no summary line), printed and written to
bench/out-tune/tune_assets.md (and $OUT when set).

Usage: python3 bench/tune_assets.py pack
       python3 bench/tune_assets.py run --gpus 0,1,2,3 [--budget 64] [--deadline S] [--only NAME...]
       python3 bench/tune_assets.py resume-check --gpus 0,1,2,3 [--only NAME...]
       python3 bench/tune_assets.py report
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.environ.get("NAUTILUS_TUNE_BENCH", os.path.join(ROOT, "bench", "out-tune"))
BIN = os.path.join(OUT, "bin")
DB = os.path.join(OUT, "tune.db")
LOGS = os.path.join(OUT, "logs")

# name, spec, sizes. Attention at the B 8 H 16 S 2048 d 128 rows of ANCHORS.md (every candidate
# is validated against the unscheduled reference at these sizes, whose naive kernels run one CTA
# per score element: at S 8192 that is 2^31 CTAs per kernel), GEMM at cuBLAS's 4096³ anchor; the
# other assets at their own `let` sizes (ANCHORS.md has no row for them). Longest tunes first,
# so the queue's tail is short.
ATTENTION_ROW = ["B=8", "H=16", "M=2048", "N=2048", "D=128"]
ASSETS = [
    ("causal_attention", "causal_attention", ATTENTION_ROW),
    ("attention", "attention", ATTENTION_ROW),
    ("attention_one_statement", "attention_one_statement", ATTENTION_ROW),
    ("gqa_attention", "gqa_attention", []),
    ("gated_mlp", "gated_mlp", []),
    ("gemm", "gemm", ["M=4096", "N=4096", "K=4096"]),
    ("batched_gemm", "batched_gemm", []),
    ("fp8_gemm", "fp8_gemm", []),
    ("fp8_gemm_nt", "fp8_gemm_nt", []),
    ("int8_weight_gemm", "int8_weight_gemm", []),
    ("layernorm", "layernorm", []),
    ("rmsnorm", "rmsnorm", []),
    ("softmax", "softmax", []),
    ("logsumexp", "logsumexp", []),
]


def selected(only):
    return [a for a in ASSETS if not only or a[0] in only]


def pack(_args):
    os.makedirs(BIN, exist_ok=True)
    build = os.path.join(ROOT, "build", "app")
    for program in ("nautilus", "nautilus-runner"):
        target = os.path.join(BIN, program)
        shutil.copy2(os.path.join(build, program), target)
        subprocess.run(["strip", target], check=True)
    # The CLI's libraries that a GPU host may lack, found by the loader here.
    ldd = subprocess.run(["ldd", os.path.join(build, "nautilus")], check=True,
                         capture_output=True, text=True).stdout
    for line in ldd.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if m and re.match(r"lib(z3|sqlite3|stdc\+\+|gcc_s)\.so", m.group(1)):
            shutil.copy2(m.group(2), os.path.join(BIN, m.group(1)))
    print(f"packed {sorted(os.listdir(BIN))} into {BIN}")


def tune_command(spec, sizes, gpu, budget, jobs):
    command = [os.path.join(BIN, "nautilus"), "tune", os.path.join(ROOT, "assets", "specs",
               spec + ".nt"), "--budget", str(budget), "--resume", "--devices", str(gpu),
               "--jobs", str(jobs), "--db", DB]
    for size in sizes:
        command += ["-D", size]
    if os.environ.get("NAUTILUS_TUNE_DRIVER"):  # a stand-in driver, to try the script without a GPU
        command += ["--driver", os.environ["NAUTILUS_TUNE_DRIVER"]]
    return command


def environment():
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = BIN + ":/usr/local/cuda/lib64:" + env.get("LD_LIBRARY_PATH", "")
    return env


def run_queue(assets, gpus, make_command, log_suffix, end=None):
    """Runs one command per asset, at most one per GPU at a time, in the order given. At `end`
    (a time.time() value) a command still running gets SIGINT, Ctrl-C's clean stop: the tuner
    records the candidates in flight and exits, and a later `run` resumes (a tune cannot take
    --time beside --budget)."""
    os.makedirs(LOGS, exist_ok=True)
    queue = list(assets)
    lock = threading.Lock()

    def worker(gpu):
        while True:
            with lock:
                if not queue:
                    return
                name, spec, sizes = queue.pop(0)
            if end is not None and end - time.time() < 30:
                return
            command = make_command(spec, sizes, gpu)
            started = time.time()
            log = os.path.join(LOGS, name + log_suffix)
            if "{n}" in log:  # the first free run number: every call of `run` keeps its log
                n = 1
                while os.path.exists(log.format(n=n)):
                    n += 1
                log = log.format(n=n)
            with open(log, "w") as out:
                out.write("$ " + " ".join(command) + "\n")
                out.flush()
                process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                           env=environment())
                try:
                    rc = process.wait(None if end is None else max(end - time.time(), 1))
                except subprocess.TimeoutExpired:
                    process.send_signal(signal.SIGINT)
                    try:
                        rc = process.wait(60)
                    except subprocess.TimeoutExpired:  # a clean stop that does not come
                        process.kill()
                        rc = process.wait()
                out.write(f"exit {rc} after {time.time() - started:.1f} s on GPU {gpu}\n")
            print(f"{name}: exit {rc}, {time.time() - started:.1f} s on GPU {gpu}", flush=True)

    threads = [threading.Thread(target=worker, args=(gpu,)) for gpu in gpus]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run(args):
    gpus = [int(g) for g in args.gpus.split(",")]
    jobs = max(1, (os.cpu_count() or 4) // len(gpus))
    end = time.time() + args.deadline if args.deadline else None
    run_queue(selected(args.only), gpus,
              lambda spec, sizes, gpu: tune_command(spec, sizes, gpu, args.budget, jobs),
              ".run{n}.log", end)
    report(args)


def resume_check(args):
    gpus = [int(g) for g in args.gpus.split(",")]
    jobs = max(1, (os.cpu_count() or 4) // len(gpus))
    run_queue(selected(args.only), gpus,
              lambda spec, sizes, gpu: tune_command(spec, sizes, gpu, args.budget, jobs),
              ".resume.log")
    report(args)


def parse_log(path):
    if not os.path.exists(path):
        return None
    text = open(path).read()
    row = {}
    m = re.search(r"tuned \S+ at (\S+) on .*?: (\d+) measured \((\d+) failed.*?\), (\d+) already in "
                  r"the database, (\d+) duplicates", text)
    if m:
        row.update(sizes=m.group(1), measured=int(m.group(2)), failed=int(m.group(3)),
                   skipped=int(m.group(4)), duplicates=int(m.group(5)))
    m = re.search(r"time: ([\d.]+) s", text)
    if m:
        row["seconds"] = float(m.group(1))
    m = re.search(r"^best: ([\d.]+) µs \(record (\d+)", text, re.M)
    if m:
        row["best_us"] = float(m.group(1))
    m = re.search(r"the search's own pick: ([\d.]+) µs", text)
    if m:
        row["pick_us"] = float(m.group(1))
    row["interrupted"] = "interrupted" in text
    row["exhausted"] = "no new candidate left" in text
    m = re.search(r"^exit (-?\d+)", text, re.M)
    row["exit"] = int(m.group(1)) if m else None
    return row


def combine(runs):
    """One row for the calls of `run` that tuned an asset: counts and times summed, the last
    call's best and pick (the database's best so far, the search's pick measured in any call)."""
    finished = [r for r in runs if "sizes" in r]
    if not finished:
        return runs[-1]
    row = dict(finished[-1])
    for field in ("measured", "failed", "duplicates", "seconds"):
        row[field] = sum(r.get(field, 0) for r in finished)
    row["skipped"] = finished[0]["skipped"]
    for r in finished:
        row.setdefault("pick_us", r.get("pick_us"))
    if row.get("pick_us") is None:
        row.pop("pick_us")
    return row


def database_counts(name, sizes):
    """(measured records, best validated median) of the tuning database for `name` at `sizes`
    (every size when None): the count a killed run's log cannot give."""
    if not os.path.exists(DB):
        return None
    import sqlite3
    connection = sqlite3.connect(DB)
    try:
        query = ("select count(*), min(case when validation = 'passed' then median_us end) from measurements "
                 "where spec_name = ? and source = 'tune' and status != 'duplicate'")
        arguments = [name]
        if sizes:
            query += " and sizes = ?"
            arguments.append(sizes)
        return connection.execute(query, arguments).fetchone()
    finally:
        connection.close()


def report(args):
    lines = ["| asset | sizes | measured | failed | duplicates | time s | candidates / min "
             "| best µs | the search's pick µs | pick / best | resume: measured, s | database: measured, best µs |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, _spec, _sizes in selected(getattr(args, "only", None)):
        runs = [parse_log(os.path.join(LOGS, f)) for f in sorted(os.listdir(LOGS))
                if re.fullmatch(re.escape(name) + r"\.run\d+\.log", f)] if os.path.isdir(LOGS) else []
        again = parse_log(os.path.join(LOGS, name + ".resume.log"))
        if not runs:
            continue
        row = combine(runs)
        counts = database_counts(name, row.get("sizes"))
        stored = (f"{counts[0]}, " + (f"{counts[1]:.1f}" if counts[1] is not None else "–")) if counts else "–"
        if "sizes" not in row:
            lines.append(f"| {name} | – | no result (exit {row['exit']}) | | | | | | | | | {stored} |")
            continue
        rate = row["measured"] * 60 / row["seconds"] if row.get("seconds") else 0
        gain = (f"{row['pick_us'] / row['best_us']:.3f}" if "pick_us" in row and "best_us" in row
                else "–")
        end = " (interrupted)" if row["interrupted"] else " (space used up)" if row["exhausted"] else ""
        resumed = (f"{again.get('measured', '–')}, {again.get('seconds', 0):.1f}" if again else "–")
        lines.append(f"| {name} | {row['sizes']} | {row['measured']}{end} | {row['failed']} | {row['duplicates']} | {row.get('seconds', 0):.1f} | "
                     f"{rate:.1f} | {row.get('best_us', '–')} | {row.get('pick_us', '–')} | {gain} | "
                     f"{resumed} | {stored} |")
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(OUT, "tune_assets.md"), "w") as f:
        f.write(text)
    if os.environ.get("OUT"):
        shutil.copy2(os.path.join(OUT, "tune_assets.md"), os.environ["OUT"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    sub.add_parser("pack")
    for step in ("run", "resume-check"):
        p = sub.add_parser(step)
        p.add_argument("--gpus", default="0")
        p.add_argument("--budget", type=int, default=64)
        p.add_argument("--only", nargs="*")
        if step == "run":
            p.add_argument("--deadline", type=float, help="seconds this call may take")
    p = sub.add_parser("report")
    p.add_argument("--only", nargs="*")
    args = parser.parse_args()
    {"pack": pack, "run": run, "resume-check": resume_check, "report": report}[args.step](args)


if __name__ == "__main__":
    sys.exit(main())
