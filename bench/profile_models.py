#!/usr/bin/env python3
"""Where each benchmarked workload's GPU time goes: one replay of every Baton program of a
gpu_bench.py run under Nsight Compute (gpu__time_duration of every kernel), kernels grouped by
the op class they belong to, beside the wall and GPU time the benchmark measured.

    bench/profile_models.py --bench-json LOG/bench/gpu_bench.json --out DIR [--ncu PATH]

Run on the GPU host after `scripts/run_gpu_models.sh ... --bench-only` (whose programs and inputs
stay under its --work); LD_LIBRARY_PATH must find the bundle's and cuDNN's libraries, as that script
sets it. Writes DIR/profile.md (one table per workload and a summary) and DIR/profile.json; the raw
Nsight Compute CSV of each workload goes to DIR/logs/.

Nsight Compute serializes kernels and runs the SMs at its own fixed clocks, so its durations add up
to more than the GPU time of a timed replay: read the shares, not the microseconds, against the
benchmark's numbers. The gap between the benchmark's wall time and its GPU time is the host side
(launch of the CUDA graph, synchronization) plus the gaps between kernels.
"""
import argparse
import collections
import csv
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

# Op class of a kernel, from its name: cuDNN's and cuBLASLt's by their naming, Baton's generated
# kernels by the "k<N>_<what>" names the engine builder gives them.
LIBRARY_CLASSES = [
    (re.compile(r"nhwcSlice"), "cuDNN slice copy"),
    (re.compile(r"sdpa|fmha|flash|attention", re.I), "attention (cuDNN)"),
    (re.compile(r"fprop|implicit_gemm|conv|dgrad|wgrad", re.I), "convolution (cuDNN)"),
    (re.compile(r"nvjet|gemm|cutlass|splitK|sm90_xmma|cublas", re.I), "GEMM (cuBLASLt)"),
]
GENERATED = re.compile(r"^k\d+_(\w+)")
GENERATED_CLASSES = {
    "fused": "elementwise (fused)", "to_nhwc": "layout copy", "to_nchw": "layout copy",
    "gather": "layout copy", "copy": "layout copy", "cast": "cast",
}


def op_class(kernel):
    m = GENERATED.match(kernel)
    if m:
        what = m.group(1)
        return GENERATED_CLASSES.get(what, what.replace("_", " "))
    for pattern, name in LIBRARY_CLASSES:
        if pattern.search(kernel):
            return name
    return "other: " + kernel[:40]


def parse_ncu_csv(text):
    """[(kernel name, microseconds)] in launch order."""
    rows = [r for r in csv.reader(io.StringIO(text)) if len(r) > 10]
    if not rows or "Kernel Name" not in rows[0]:
        return []
    h = rows[0]
    k, v, u = h.index("Kernel Name"), h.index("Metric Value"), h.index("Metric Unit")
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
    out = []
    for r in rows[1:]:
        try:
            out.append((r[k], float(r[v].replace(",", "")) * scale.get(r[u], 1e-3)))
        except ValueError:
            continue
    return out


def profile(ncu, run_cmd, log_path, timeout, as_run=False):
    """One replay (no warm-up) of the benchmark's own `baton run` command under Nsight Compute.
    as_run: the GPU's own clocks and warm caches (Nsight Compute otherwise locks the clocks to base
    and flushes the caches before each kernel), so the durations are close to a timed replay's."""
    cmd = shlex.split(run_cmd)
    # One execute: no warm-up, one timed run, and none of `baton run`'s profiled pass.
    for flag, value in (("-n", "1"), ("--warmup", "0"), ("--profile-runs", "0")):
        if flag in cmd:
            cmd[cmd.index(flag) + 1] = value
        else:
            cmd += [flag, value]
    control = ["--clock-control", "none", "--cache-control", "none"] if as_run else []
    full = [ncu, "--metrics", "gpu__time_duration.sum", "--csv"] + control + cmd
    try:
        p = subprocess.run(full, capture_output=True, text=True, timeout=timeout)
        text = p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        text = "timed out"
    with open(log_path, "w") as f:
        f.write(" ".join(full) + "\n" + text)
    return parse_ncu_csv(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench-json", required=True, help="gpu_bench.py's gpu_bench.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--ncu", default="", help="default: on PATH, else /usr/local/cuda/bin/ncu")
    ap.add_argument("--timeout", type=int, default=240, help="seconds per workload")
    ap.add_argument("--as-run", action="store_true",
                    help="the GPU's own clocks and warm caches (default: Nsight Compute's base clocks, caches flushed)")
    ap.add_argument("--only", default="", help="comma-separated workload names (default: every one)")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    bench = json.load(open(args.bench_json))
    names = [row["name"] for row in bench["rows"]]
    if only - set(names):
        sys.exit(f"profile_models: --only names {', '.join(sorted(only - set(names)))}, which "
                 f"{args.bench_json} does not have: give some of {', '.join(names)}")
    ncu = args.ncu or shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    if not os.path.exists(ncu):
        sys.exit(f"profile_models: no Nsight Compute at {ncu}: give --ncu PATH")
    os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
    results, lines = [], []
    env = bench.get("environment", {})
    clocks = "the GPU's own clocks, warm caches" if args.as_run else "Nsight Compute's base clocks, caches flushed"
    lines += [f"{env.get('gpu')} · Baton commit `{env.get('commit')}` · one replay per workload under Nsight "
              f"Compute (`gpu__time_duration.sum` per kernel; {clocks}); wall and GPU time from the benchmark run "
              f"`{os.path.basename(args.bench_json)}` ({env.get('date')}).", ""]
    summary = ["| workload | batch | wall ms | GPU ms | wall − GPU | kernels | top op classes (share of kernel time) |",
               "|---|---:|---:|---:|---:|---:|---|"]
    for row in bench["rows"]:
        b = row.get("runners", {}).get("baton") if isinstance(row.get("runners"), dict) else None
        if not b or not b.get("ok") or "run_cmd" not in b:
            continue
        name = row["name"]
        if only and name not in only:
            continue
        print(f"profile_models: {name}", flush=True)
        kernels = profile(ncu, b["run_cmd"], os.path.join(args.out, "logs", f"{name}.ncu.csv"), args.timeout,
                          args.as_run)
        if not kernels:
            summary.append(f"| {name} | {row['batch']} | {b['median_ms']:.3f} | — | — | — | Nsight Compute gave no kernels (logs/{name}.ncu.csv) |")
            continue
        total = sum(t for _, t in kernels)
        by_class = collections.defaultdict(lambda: [0, 0.0])
        for k, t in kernels:
            c = by_class[op_class(k)]
            c[0] += 1
            c[1] += t
        ranked = sorted(by_class.items(), key=lambda kv: -kv[1][1])
        gpu = b.get("gpu_sum_of_step_medians_ms")
        gap = f"{b['median_ms'] - gpu:.3f}" if gpu is not None else "—"
        top = ", ".join(f"{c} {100 * v[1] / total:.0f}% ({v[0]})" for c, v in ranked[:4])
        summary.append(f"| {name} | {row['batch']} | {b['median_ms']:.3f} | "
                       f"{gpu if gpu is not None else '—'} | {gap} | {len(kernels)} | {top} |")
        lines += [f"### {name} (batch {row['batch']})", "",
                  f"{len(kernels)} kernels, {total:.1f} µs under Nsight Compute; benchmark: wall "
                  f"{b['median_ms']:.3f} ms, GPU {gpu} ms.", "",
                  "| op class | kernels | µs (Nsight Compute) | share |", "|---|---:|---:|---:|"]
        for c, (n, t) in ranked:
            lines.append(f"| {c} | {n} | {t:.1f} | {100 * t / total:.1f}% |")
        slowest = sorted(kernels, key=lambda kt: -kt[1])[:5]
        lines += ["", "Slowest kernels: " + "; ".join(f"`{k[:70]}` {t:.1f} µs" for k, t in slowest), ""]
        results.append({"name": name, "batch": row["batch"], "wall_ms": b["median_ms"], "gpu_ms": gpu,
                        "kernels": len(kernels), "kernel_us": total,
                        "classes": {c: {"kernels": n, "us": t} for c, (n, t) in ranked},
                        "launch_order": kernels})
    text = "\n".join(lines[:2] + summary + [""] + lines[2:]) + "\n"
    with open(os.path.join(args.out, "profile.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "profile.json"), "w") as f:
        json.dump({"environment": env, "workloads": results}, f, indent=1)
    print("\n".join(summary))


if __name__ == "__main__":
    main()
