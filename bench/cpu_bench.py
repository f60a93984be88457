#!/usr/bin/env python3
"""Baton against onnxruntime on the CPU, fp32, in one run: the median and p90 latency of each model.

  python3 bench/cpu_bench.py MODELS_DIR --baton build/tools/baton/baton \\
      --bench build/bench/baton_bench [--threads 1,2] [--iterations 50] [--json OUT.json]

MODELS_DIR holds tests/e2e/export_real_models.py's output (e.g. `--full --styles dynamo18`):
manifest.json, CASE.onnx and CASE.input_<i>.npy. Each model is compiled once with
`baton compile --device cpu` (with the manifest's --shape values), then timed with baton_bench
(warm-up, then wall clock around each execute) on the recorded inputs, and with onnxruntime's
InferenceSession (all graph optimizations, sequential execution, intra_op_num_threads = each of
--threads) on the same inputs. Baton runs with the same thread counts (baton_bench --threads,
MethodOptions::threads): each ratio is Baton at T threads over onnxruntime at T threads.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort


def quantile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(np.ceil(q * len(v))) - 1))]


def time_ort(path, feed, threads, iterations, warmup):
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    for _ in range(warmup):
        sess.run(None, feed)
    wall = []
    for _ in range(iterations):
        start = time.perf_counter()
        sess.run(None, feed)
        wall.append((time.perf_counter() - start) * 1e3)
    return quantile(wall, 0.5), quantile(wall, 0.9)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("models_dir")
    parser.add_argument("--baton", required=True)
    parser.add_argument("--bench", required=True)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    manifest = json.load(open(os.path.join(args.models_dir, "manifest.json")))
    rows = []
    for case in manifest["cases"]:
        name = case["name"]
        onnx_path = os.path.join(args.models_dir, case["model"])
        inputs = [os.path.join(args.models_dir, f"{name}.input_{i}.npy")
                  for i in range(len(case["inputs"]))]
        program = os.path.join(args.models_dir, name + ".baton")
        cmd = [args.baton, "compile", onnx_path, "-o", program, "--device", "cpu"]
        for n, dims in case.get("shapes", {}).items():
            cmd += ["--shape", f"{n}=" + "x".join(str(d) for d in dims)]
        compiled = subprocess.run(cmd, capture_output=True, text=True)
        if compiled.returncode != 0:
            print(f"{name}: baton compile failed: {compiled.stderr.strip()[-400:]}", file=sys.stderr)
            continue
        feed = {n: np.load(f) for n, f in zip(case["inputs"], inputs)}
        row = {"model": name}
        for t in [int(x) for x in args.threads.split(",")]:
            bench = [args.bench, program, "--iterations", str(args.iterations), "--warmup",
                     str(args.warmup), "--threads", str(t)]
            for f in inputs:
                bench += ["--input", f]
            out = subprocess.run(bench, capture_output=True, text=True)
            if out.returncode != 0:
                print(f"{name}: baton_bench failed: {out.stderr.strip()[-400:]}", file=sys.stderr)
                break
            baton = json.loads(out.stdout)
            row[f"baton{t}_median_ms"], row[f"baton{t}_p90_ms"] = baton["median_ms"], baton["p90_ms"]
            med, p90 = time_ort(onnx_path, feed, t, args.iterations, args.warmup)
            row[f"ort{t}_median_ms"], row[f"ort{t}_p90_ms"] = med, p90
            row[f"ratio{t}"] = baton["median_ms"] / med
        else:
            rows.append(row)
            cells = " | ".join(
                f"{t}T baton {row[f'baton{t}_median_ms']:.2f} (p90 {row[f'baton{t}_p90_ms']:.2f}) "
                f"ort {row[f'ort{t}_median_ms']:.2f} (p90 {row[f'ort{t}_p90_ms']:.2f}) "
                f"{row[f'ratio{t}']:.2f}x" for t in [int(x) for x in args.threads.split(",")])
            print(f"{name}: {cells}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "onnxruntime": ort.__version__, "iterations": args.iterations},
                      f, indent=2)


if __name__ == "__main__":
    main()
