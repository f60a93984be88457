#!/usr/bin/env python3
"""One dynamic Baton program against onnxruntime at several shapes (issue 36's "Done when").

  python3 tests/e2e/dynamic_vs_onnxruntime.py MODEL.onnx --baton BIN/baton \\
      --dim batch=1..32 --dim sequence=1..384 \\
      --at batch=1,sequence=1 --at batch=2,sequence=9 ... [--threads 16] [--json OUT.json]

Compiles MODEL once with the --dim ranges (`baton compile --device cpu`), then for each --at
binding of the model's dim_params: makes the inputs (float inputs standard normal; int64 token
ids in 0..99; an input named like a mask holds ones with the last quarter of each row zero, as
tests/e2e/export_real_models.py writes them), runs the program on them (`baton run --input`),
runs onnxruntime on the same inputs, and compares every output: the shapes must be equal and
the relative error ||baton - ort|| / ||ort|| at most --tolerance. Prints one row per shape and
exits 1 if any differs.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort


def binding(text):
    out = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        out[name] = int(value)
    return out


def input_specs(model):
    initializers = {i.name for i in model.graph.initializer}
    specs = []
    for i in model.graph.input:
        if i.name in initializers:
            continue
        t = i.type.tensor_type
        dims = [d.dim_param if d.dim_param else d.dim_value for d in t.shape.dim]
        specs.append((i.name, onnx.helper.tensor_dtype_to_np_dtype(t.elem_type), dims))
    return specs


def make_input(name, dtype, shape, rng):
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    if "mask" in name:
        x = np.ones(shape, dtype)
        if len(shape) == 2 and shape[1] >= 4:
            x[:, shape[1] - shape[1] // 4:] = 0
        return x
    return rng.integers(0, 100, shape).astype(dtype)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--baton", required=True)
    ap.add_argument("--dim", action="append", required=True,
                    help="NAME=MIN..MAX, or NAME=OTHER (the same dimension as OTHER)")
    ap.add_argument("--at", action="append", required=True, type=binding,
                    help="NAME=SIZE,NAME=SIZE: one call's sizes")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    ap.add_argument("--json", default="")
    args = ap.parse_args()

    model = onnx.load(args.model, load_external_data=False)
    specs = input_specs(model)
    work = tempfile.mkdtemp(prefix="baton-dyn-")
    program = os.path.join(work, "program.baton")
    start = time.perf_counter()
    compile_cmd = [args.baton, "compile", "-q", args.model, "--device", "cpu", "-o", program]
    for d in args.dim:
        compile_cmd += ["--dim", d]
    subprocess.run(compile_cmd, check=True)
    compile_s = time.perf_counter() - start
    print(f"compiled {os.path.basename(args.model)} once with {' '.join(args.dim)} in "
          f"{compile_s:.1f} s ({os.path.getsize(program) / 1e6:.1f} MB)", flush=True)

    options = ort.SessionOptions()
    if args.threads:
        options.intra_op_num_threads = args.threads
    session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(36)
    rows = []
    failed = 0
    # --dim s6=s33: s6 takes s33's size in every call.
    same = dict(d.split("=", 1) for d in args.dim if ".." not in d)
    for at in args.at:
        shapes = {name: [at[same.get(d, d)] if isinstance(d, str) else d for d in dims]
                  for name, _, dims in specs}
        feed = {name: make_input(name, dtype, shapes[name], rng) for name, dtype, _ in specs}
        run_dir = os.path.join(work, "run")
        cmd = [args.baton, "run", program, "-n", "1", "--warmup", "0", "-o", run_dir]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        for name, value in feed.items():
            path = os.path.join(work, f"{name}.npy")
            np.save(path, value)
            cmd += ["--input", f"{name}={path}"]
        run = subprocess.run(cmd, capture_output=True, text=True)
        label = ",".join(f"{k}={v}" for k, v in at.items())
        if run.returncode != 0:
            print(f"{label}: baton run failed: {run.stderr.strip()[-400:]}", flush=True)
            rows.append({"at": at, "ok": False, "error": run.stderr.strip()[-400:]})
            failed += 1
            continue
        outputs = json.load(open(os.path.join(run_dir, "outputs.json")))["outputs"]
        ours = [np.load(o["file"]) for o in outputs]
        theirs = session.run(None, feed)
        row = {"at": at, "ok": True, "outputs": []}
        for k, (a, b) in enumerate(zip(ours, theirs)):
            same_shape = list(a.shape) == list(b.shape)
            err = float(np.linalg.norm(a.astype(np.float64) - b) / max(np.linalg.norm(b), 1e-30)) \
                if same_shape else float("inf")
            ok = same_shape and err <= args.tolerance
            row["outputs"].append({"shape": list(a.shape), "reference_shape": list(b.shape),
                                   "relative_error": err, "ok": ok})
            row["ok"] = row["ok"] and ok
        failed += 0 if row["ok"] else 1
        rows.append(row)
        o = row["outputs"][0]
        print(f"{label}: output {o['shape']} (onnxruntime {o['reference_shape']}), relative error "
              f"{o['relative_error']:.2e}  {'ok' if row['ok'] else 'DIFFERS'}", flush=True)
    print(f"{len(rows) - failed} of {len(rows)} shapes match onnxruntime "
          f"(tolerance {args.tolerance:g})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "dims": args.dim, "compile_s": compile_s,
                       "program_bytes": os.path.getsize(program), "rows": rows}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
