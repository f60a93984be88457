#!/usr/bin/env python3
"""Where a model's CPU time goes, Baton beside onnxruntime (issue 41: each miss profiled and
explained): both runtimes' own per-node profiles of one model at the same thread count, summed by
operator type, then each side's slowest nodes.

  python3 bench/cpu_profile.py MODEL.onnx --baton build/tools/baton/baton [--threads 1] \\
      [--runs 20] [--top 25] [--program MODEL.baton]

Baton: `baton run PROGRAM --threads T --profile-runs R --export-profile FILE` (each instruction's
median over the profiled runs; compiled here for the CPU unless --program is given). onnxruntime:
`SessionOptions.enable_profiling` over R runs after 3 warm-up runs (intra_op_num_threads T, all
graph optimizations), each node's median `_kernel_time`. Inputs: random normal floats (integers 0),
dynamic dimensions 1. The two sides name their nodes differently: onnxruntime's NCHWc
transformer fuses BatchNormalization and activations into its `Conv` and adds `ReorderInput` /
`ReorderOutput` nodes, Baton's fusions make `FusedConv`, `Linear` and the like; compare the
per-type totals with that in mind, and single layers by their output shapes.
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cpu_bench  # noqa: E402


def ort_profile(model, threads, runs):
    # cpu_bench.py's session (the benchmark's options), with profiling on.
    session = cpu_bench.Ort(model, threads,
                            os.path.join(tempfile.gettempdir(), "baton_cpu_profile")).sess
    rng = np.random.default_rng(0)
    feeds = {}
    for i in session.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        if "float" in i.type:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
        else:
            feeds[i.name] = np.zeros(shape, dtype=np.int64)
    for _ in range(3 + runs):
        session.run(None, feeds)
    path = session.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    times = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            args = e.get("args", {})
            shape = args.get("output_type_shape", "")
            times[(e["name"][: -len("_kernel_time")], args.get("op_name", "?"), str(shape))].append(
                e["dur"] / 1000.0)
    # The warm-up runs' events are in the file too: each node's median over all of them.
    return [(statistics.median(v), op, name, shape) for (name, op, shape), v in times.items()]


def baton_profile(baton, program, threads, runs):
    with tempfile.TemporaryDirectory() as work:
        out = os.path.join(work, "profile.json")
        p = subprocess.run([baton, "run", program, "--threads", str(threads), "-n", "3",
                            "--profile-runs", str(runs), "--export-profile", out],
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"cpu_profile: baton run failed:\n{p.stdout}{p.stderr}")
        with open(out) as f:
            profile = json.load(f)
    return [(i["host_ms_median"], i["op"] or i["kind"], i["name"] or i["description"], "")
            for i in profile["instructions"]]


def by_type(rows):
    total = {}
    for ms, op, _, _ in rows:
        t = total.setdefault(op, [0.0, 0])
        t[0] += ms
        t[1] += 1
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--baton", default="build/tools/baton/baton")
    ap.add_argument("--program", default="", help="a compiled program (default: compile MODEL)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        program = a.program
        if not program:
            program = os.path.join(work, "model.baton")
            p = subprocess.run([a.baton, "compile", a.model, "-o", program, "--device", "cpu",
                                "-q"], capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"cpu_profile: baton compile failed:\n{p.stdout}{p.stderr}")
        baton = baton_profile(a.baton, program, a.threads, a.runs)
    onnx_rt = ort_profile(a.model, a.threads, a.runs)
    print(f"{os.path.basename(a.model)}, {a.threads} thread(s), median of {a.runs} profiled runs "
          f"per node; onnxruntime {ort.__version__}")
    print(f"node time in all: Baton {sum(r[0] for r in baton):.3f} ms, "
          f"onnxruntime {sum(r[0] for r in onnx_rt):.3f} ms\n")
    tb, to = by_type(baton), by_type(onnx_rt)
    print(f"{'op type':28s} {'Baton ms (nodes)':>18s} {'onnxruntime ms (nodes)':>24s}")
    none = [0.0, 0]
    for op in sorted(set(tb) | set(to), key=lambda k: -max(tb.get(k, none)[0], to.get(k, none)[0])):
        b = f"{tb[op][0]:.3f} ({tb[op][1]})" if op in tb else "-"
        o = f"{to[op][0]:.3f} ({to[op][1]})" if op in to else "-"
        print(f"{op:28s} {b:>18s} {o:>24s}")
    for label, rows in (("Baton", baton), ("onnxruntime", onnx_rt)):
        print(f"\n{label}'s {a.top} slowest nodes:")
        for ms, op, name, shape in sorted(rows, reverse=True)[: a.top]:
            print(f"  {ms:8.3f} ms  {op:22s} {name[:48]:48s} {shape[:60]}")


if __name__ == "__main__":
    main()
