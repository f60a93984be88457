#!/usr/bin/env python3
"""Baton against onnxruntime on the CPU, fp32, in interleaved rounds (issue 41's benchmark).

  python3 bench/cpu_bench.py [MODELS_DIR] --baton build/tools/baton/baton \\
      --bench build/bench/baton_bench [--threads 1,2] [--iterations 60] [--rounds 5]
      [--warmup 5] [--only NAME,...] [--one-node] [--one-node-size N] [--json OUT.json]
      [--md OUT.md]

MODELS_DIR holds tests/e2e/export_real_models.py's output (e.g. `--full --styles dynamo18`) or
make_models.py's: manifest.json, CASE.onnx and CASE.input_<i>.npy. --one-node adds one-node
models written here (Sigmoid, Tanh, Erf, Exp, HardSwish, Log of positive inputs, Pow(x, 2),
Gelu-as-Erf chain; --one-node-size elements, default 1M floats), the issue's per-op goals; MODELS_DIR may
then be left out.

Each model is compiled once with `baton compile --device cpu` (with the manifest's --shape
values). Then, for each thread count, --rounds rounds, each timing Baton (baton_bench: a fresh
process, --warmup calls, then --iterations / --rounds timed calls, every sample returned) and
onnxruntime (one InferenceSession for the whole model, all graph optimizations, sequential
execution, intra_op_num_threads = the thread count; --warmup calls then as many timed calls) on
the same inputs. The order alternates round by round (Baton first, then onnxruntime first), so
drift of a busy machine falls on both alike. The table reports the median and p90 of the pooled
samples and their ratio, and the spread of the per-round median ratios (min..max): a wide spread
says the machine was not quiet enough to trust the row.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort


def quantile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(np.ceil(q * len(v))) - 1))]


def one_node_models(out_dir, size):
    """Single-op models (and GELU's erf chain) over `size` float32 elements: cases like the
    manifest's."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(41)
    cases = []

    def write(name, nodes, inits=(), positive=False):
        g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [size])], list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])  # HardSwish: 14
        onnx.save(m, os.path.join(out_dir, f"{name}.onnx"))
        x = rng.standard_normal(size).astype(np.float32) * 3
        if positive:
            x = np.abs(x) + 1e-3
        np.save(os.path.join(out_dir, f"{name}.input_0.npy"), x)
        cases.append({"name": name, "model": f"{name}.onnx", "inputs": ["x"]})

    for op in ("Sigmoid", "Tanh", "Erf", "Exp", "HardSwish"):
        write(f"node_{op.lower()}", [helper.make_node(op, ["x"], ["y"])])
    write("node_log", [helper.make_node("Log", ["x"], ["y"])], positive=True)
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    write("node_pow2", [helper.make_node("Pow", ["x", "two"], ["y"])], [two])
    c = {n: numpy_helper.from_array(np.array(v, np.float32), n)
         for n, v in (("s2", 1.4142135), ("one", 1.0), ("half", 0.5))}
    write("node_gelu_chain", [helper.make_node("Div", ["x", "s2"], ["a"]), helper.make_node("Erf", ["a"], ["b"]),
                              helper.make_node("Add", ["b", "one"], ["d"]), helper.make_node("Mul", ["x", "d"], ["e"]),
                              helper.make_node("Mul", ["e", "half"], ["y"])], c.values())
    return cases


class Ort:
    # profile_prefix: onnxruntime's own per-node profiling into files with this prefix
    # (bench/cpu_profile.py).
    def __init__(self, path, threads, profile_prefix=None):
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if profile_prefix:
            options.enable_profiling = True
            options.profile_file_prefix = profile_prefix
        self.sess = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

    def samples(self, feed, n, warmup):
        for _ in range(warmup):
            self.sess.run(None, feed)
        out = []
        for _ in range(n):
            start = time.perf_counter()
            self.sess.run(None, feed)
            out.append((time.perf_counter() - start) * 1e3)
        return out


def baton_samples(args, program, inputs, threads, n):
    cmd = [args.bench, program, "--iterations", str(n), "--warmup", str(args.warmup), "--threads", str(threads),
           "--samples"]
    for f in inputs:
        cmd += ["--input", f]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"baton_bench failed: {out.stderr.strip()[-400:]}")
    return json.loads(out.stdout)["samples_ms"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models_dir", nargs="?", default="")
    parser.add_argument("--baton", required=True)
    parser.add_argument("--bench", required=True)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--iterations", type=int, default=60, help="timed calls per runner, over all rounds")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls before each round's timed ones")
    parser.add_argument("--only", default="", help="case names (comma-separated)")
    parser.add_argument("--one-node", action="store_true", help="add the one-node models")
    parser.add_argument("--one-node-size", type=int, default=1 << 20)
    parser.add_argument("--json", default="")
    parser.add_argument("--md", default="")
    args = parser.parse_args()
    if not args.models_dir and not args.one_node:
        parser.error("give MODELS_DIR, --one-node, or both")
    if args.rounds < 1 or args.iterations < args.rounds:
        parser.error("--rounds must be at least 1 and at most --iterations")
    threads = [int(x) for x in args.threads.split(",")]
    per_round = args.iterations // args.rounds

    cases = []  # (directory, case)
    if args.models_dir:
        manifest = json.load(open(os.path.join(args.models_dir, "manifest.json")))
        cases += [(args.models_dir, c) for c in manifest["cases"]]
    tmp = tempfile.TemporaryDirectory(prefix="cpu_bench_")
    if args.one_node:
        cases += [(tmp.name, c) for c in one_node_models(tmp.name, args.one_node_size)]
    only = set(filter(None, args.only.split(",")))
    if only:
        unknown = only - {c["name"] for _, c in cases}
        if unknown:
            parser.error(f"unknown case(s) {sorted(unknown)}; known: {', '.join(c['name'] for _, c in cases)}")
        cases = [(d, c) for d, c in cases if c["name"] in only]

    rows = []
    print(f"cpu_bench: {len(cases)} models, threads {threads}, {args.rounds} rounds of {per_round} calls "
          f"per runner, onnxruntime {ort.__version__}", flush=True)
    for directory, case in cases:
        name = case["name"]
        onnx_path = os.path.join(directory, case["model"])
        inputs = [os.path.join(directory, f"{name}.input_{i}.npy") for i in range(len(case["inputs"]))]
        program = os.path.join(tmp.name, name + ".baton")
        cmd = [args.baton, "compile", onnx_path, "-o", program, "--device", "cpu", "-q"]
        for n, dims in case.get("shapes", {}).items():
            cmd += ["--shape", f"{n}=" + "x".join(str(d) for d in dims)]
        compiled = subprocess.run(cmd, capture_output=True, text=True)
        if compiled.returncode != 0:
            print(f"{name}: baton compile failed: {compiled.stderr.strip()[-400:]}", file=sys.stderr)
            rows.append({"model": name, "error": "baton compile failed"})
            continue
        feed = {n: np.load(f) for n, f in zip(case["inputs"], inputs)}
        row = {"model": name}
        try:
            for t in threads:
                session = Ort(onnx_path, t)
                baton, ref, ratios = [], [], []
                for r in range(args.rounds):
                    first_baton = r % 2 == 0
                    b = o = None
                    for side in (("baton", "ort") if first_baton else ("ort", "baton")):
                        if side == "baton":
                            b = baton_samples(args, program, inputs, t, per_round)
                        else:
                            o = session.samples(feed, per_round, args.warmup)
                    baton += b
                    ref += o
                    ratios.append(quantile(b, 0.5) / quantile(o, 0.5))
                row[f"t{t}"] = {"baton_median_ms": quantile(baton, 0.5), "baton_p90_ms": quantile(baton, 0.9),
                                "ort_median_ms": quantile(ref, 0.5), "ort_p90_ms": quantile(ref, 0.9),
                                "ratio": quantile(baton, 0.5) / quantile(ref, 0.5),
                                "round_ratio_min": min(ratios), "round_ratio_max": max(ratios)}
        except RuntimeError as e:
            print(f"{name}: {e}", file=sys.stderr)
            row["error"] = str(e)
        rows.append(row)
        if "error" not in row:
            print(f"{name}: " + " | ".join(
                f"{t}T baton {row[f't{t}']['baton_median_ms']:.3f} (p90 {row[f't{t}']['baton_p90_ms']:.3f}) "
                f"ort {row[f't{t}']['ort_median_ms']:.3f} (p90 {row[f't{t}']['ort_p90_ms']:.3f}) "
                f"{row[f't{t}']['ratio']:.2f}x [{row[f't{t}']['round_ratio_min']:.2f}..{row[f't{t}']['round_ratio_max']:.2f}]"
                for t in threads), flush=True)

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "onnxruntime": ort.__version__, "iterations": args.iterations,
                       "rounds": args.rounds, "threads": threads, "cpus": os.cpu_count()}, f, indent=2)
    if args.md:
        head = "| model | " + " | ".join(f"{t} thread{'s' if t > 1 else ''}: Baton / onnxruntime ms (ratio, rounds)"
                                         for t in threads) + " |\n"
        head += "|---|" + "---|" * len(threads) + "\n"
        lines = []
        for row in rows:
            if "error" in row:
                lines.append(f"| {row['model']} | " + " | ".join(["failed"] * len(threads)) + " |")
                continue
            cells = [f"{row[f't{t}']['baton_median_ms']:.3f} / {row[f't{t}']['ort_median_ms']:.3f} "
                     f"({row[f't{t}']['ratio']:.2f}x, {row[f't{t}']['round_ratio_min']:.2f}-"
                     f"{row[f't{t}']['round_ratio_max']:.2f})" for t in threads]
            lines.append(f"| {row['model']} | " + " | ".join(cells) + " |")
        with open(args.md, "w") as f:
            f.write(head + "\n".join(lines) + "\n")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
