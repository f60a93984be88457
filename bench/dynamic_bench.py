#!/usr/bin/env python3
"""A dynamic program against the static programs compiled at the same shapes, on the CPU (issue
36: at any shape, at most 1.05x the static program's latency; file size and load time no worse
than the static program at the upper bound), or with --device cuda:N on the GPU (issue 37).

  python3 bench/dynamic_bench.py MODELS_DIR --baton BIN/baton [--threads 16] [--rounds 3] \\
      [-n 10] [--warmup 3] [--image-batches 1,4,16] [--text 1x32,4x128,8x256] \\
      [--image-max 32] [--text-max 32x384] [--json OUT.json] [--device cuda:0 --precision fp32]

MODELS_DIR holds tests/e2e/export_real_models.py's output with symbolic dimensions (the
torchscript17 style, or dynamo18dyn): image models get --dim batch=1..IMAGE_MAX, text models
--dim batch=1..B --dim sequence=1..S (--text-max BxS). Each model is compiled once dynamic and once
static per shape (--shape), and at the upper bound. Then, per shape, `baton run` of the dynamic
program (--shape: random inputs of that shape) and of the static one alternate for --rounds rounds
(A B A B ...), each run -n timed calls after --warmup; reported: the median of the rounds' medians
per side and their ratio dynamic / static. Inputs are `baton run`'s random ones (--seed 0), the
same on both sides.

With --bench BIN/baton_bench, each shape is instead one baton_bench process that loads both
programs and calls them in turn (--versus: A B, B A, ... with a pause before each call),
--rounds x -n calls per side, on the same inputs (written here: floats normal, masks of ones,
other integers in 0..9). Separate processes leave each side its own placement of threads and
memory, which on a large host moved a side by 10-20% from one process to the next; calls
interleaved in one process do not.

--prepare gives each dynamic run `--prepare-shape` for its shape (Method::prepare_shape: a GPU
engine times its choices for the shape and captures its graph before the first call); the table
then also reports each side's first call (`baton run`'s `first call`, the first warm-up run).
--device-io compiles with --io device and runs with --device-io (a GPU device only).
--load-runs N (default 3) loads each side N times at the upper bound for the file size and load
time row (0: no such row, and no static program at the upper bound is compiled). Progress
(compiles, loads, each run's median) goes to stderr.
--jobs N compiles a model's programs N at a time (full-size models take a minute or more each);
--compile-without-gpu hides the GPUs from the compiles (CUDA_VISIBLE_DEVICES=), so that they can
run side by side (the architecture is read with nvidia-smi and passed as --arch); the programs
then time their GPU choices at load.
"""
import argparse
import concurrent.futures
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx

_D = r"([\d.]+) (ms|us)"
LATENCY = re.compile(r"latency over \d+ runs? \(after \d+ warm-up\): min " + _D + r"\s+median " + _D)
LOADED = re.compile(r"loaded in " + _D)
FIRST = re.compile(r"^first call " + _D, re.M)
# `baton run`'s delegate counters: a GPU delegate's device memory at load (weights, scratch,
# workspace, staging), summed over the program's delegates.
DEVICE_BYTES = re.compile(r"device_bytes_at_load=(\d+)")


def ms(value, unit):
    return float(value) / (1000.0 if unit == "us" else 1.0)


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {p.stderr.strip()[-500:]}")
    return p.stdout


def inputs_of(path):
    model = onnx.load(path, load_external_data=False)
    init = {i.name for i in model.graph.initializer}
    out = []
    for i in model.graph.input:
        if i.name in init:
            continue
        dims = [d.dim_param if d.dim_param else d.dim_value for d in i.type.tensor_type.shape.dim]
        out.append((i.name, dims, i.type.tensor_type.elem_type))
    return out


def interleaved(args, work, name, inputs, flags, dyn, fixed):
    """Median ms of the dynamic and the static program, called in turn by one baton_bench."""
    # flags is ["--shape", "NAME=D0xD1", ...] in input order; names may hold "=", sizes never.
    shapes = [f.rsplit("=", 1)[1] for f in flags[1::2]]
    rng = np.random.default_rng(0)
    files = []
    for (n, _, elem), shape in zip(inputs, shapes):
        sizes = [int(v) for v in shape.split("x") if v]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
        if np.issubdtype(dtype, np.floating):
            data = rng.standard_normal(sizes).astype(dtype)
        elif "mask" in n.lower():
            data = np.ones(sizes, dtype=dtype)
        else:
            # Small integers, as `baton run` uses: valid token ids, positions and types alike.
            data = rng.integers(0, 10, sizes).astype(dtype)
        f = os.path.join(work, f"{name}.{n.replace('/', '_')}.npy")
        np.save(f, data)
        files += ["--input", f]
    thread_args = ["--threads", str(args.threads)] if args.threads else []
    out = run([args.bench, dyn, "--versus", fixed, "--iterations", str(args.rounds * args.n),
               "--warmup", str(args.warmup)] + thread_args + files)
    result = json.loads(out.strip().splitlines()[-1])
    return result["median_ms"], result["versus"]["median_ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models_dir")
    ap.add_argument("--baton", required=True)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--image-batches", default="1,4,16")
    ap.add_argument("--text", default="1x32,4x128,8x256")
    ap.add_argument("--image-max", type=int, default=32)
    ap.add_argument("--text-max", default="32x384")
    ap.add_argument("--only", default="")
    ap.add_argument("--bench", default="", help="baton_bench: interleave both sides in one process")
    ap.add_argument("--json", default="")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda:N for dynamic GPU engines")
    ap.add_argument("--precision", default="", help="the GPU engines' precision (fp32, fp16, ...)")
    ap.add_argument("--prepare", action="store_true",
                    help="prepare each dynamic run's shape before its first call (--prepare-shape)")
    ap.add_argument("--device-io", action="store_true",
                    help="compile with --io device and run with --device-io (GPU only)")
    ap.add_argument("--jobs", type=int, default=1, help="compiles run at once")
    ap.add_argument("--compile-without-gpu", action="store_true",
                    help="compile with the GPUs hidden (their choices are then timed at load)")
    ap.add_argument("--load-runs", type=int, default=3,
                    help="loads of each side at the upper bound, for file size and load time (0: none)")
    args = ap.parse_args()
    started = time.time()

    def progress(what):
        # On stderr, so that a run cut by a time limit shows where its time went (each GPU load
        # that times its choices takes seconds) without disturbing the table on stdout.
        print(f"[dynamic_bench {time.time() - started:6.1f} s] {what}", file=sys.stderr, flush=True)
    if args.prepare and args.bench:
        ap.error("--prepare runs `baton run` per side; it cannot be combined with --bench")
    if args.device_io and not args.device.startswith("cuda"):
        ap.error("--device-io needs --device cuda:N")
    target = ["--device", args.device] + (["--precision", args.precision] if args.precision else [])
    target += ["--io", "device"] if args.device_io else []
    if args.compile_without_gpu and args.device.startswith("cuda"):
        # With the GPUs hidden the compiler cannot ask the device for its architecture: read it
        # here (nvidia-smi prints the compute capability as "9.0") and pass it on.
        index = args.device.split(":")[1] if ":" in args.device else "0"
        cap = subprocess.run(["nvidia-smi", "-i", index, "--query-gpu=compute_cap",
                              "--format=csv,noheader"], capture_output=True, text=True, check=True)
        target += ["--arch", "sm_" + cap.stdout.strip().replace(".", "")]
    io_args = ["--device-io"] if args.device_io else []
    manifest = json.load(open(os.path.join(args.models_dir, "manifest.json")))
    work = tempfile.mkdtemp(prefix="baton-dynbench-")
    text_max = [int(v) for v in args.text_max.split("x")]
    rows = []
    if args.prepare:
        print("| model | shape | dynamic ms (prepared) | static ms | dynamic / static | first call "
              "dynamic / static ms |")
        print("|---|---|---:|---:|---:|---:|")
    else:
        print("| model | shape | dynamic ms | static ms | dynamic / static |")
        print("|---|---|---:|---:|---:|")
    for case in manifest["cases"]:
        name = case["name"]
        if args.only and not any(o in name for o in args.only.split(",")):
            continue
        path = os.path.join(args.models_dir, case["model"])
        inputs = inputs_of(path)
        text = len(inputs[0][1]) == 2
        if text:
            dims = {"batch": text_max[0], "sequence": text_max[1]}
            shapes = [dict(zip(("batch", "sequence"), map(int, s.split("x"))))
                      for s in args.text.split(",")]
        else:
            dims = {"batch": args.image_max}
            shapes = [{"batch": int(b)} for b in args.image_batches.split(",")]
        # The dim_params the exporter wrote are the symbols; map ours onto them by position.
        params = [d for d in inputs[0][1] if isinstance(d, str)]
        rename = dict(zip(("batch", "sequence"), params))
        dyn = os.path.join(work, f"{name}.dyn.baton")
        cmd = [args.baton, "compile", "-q", path, "-o", dyn] + target
        for k, v in dims.items():
            cmd += ["--dim", f"{rename[k]}=1..{v}"]

        def shape_flags(at):
            flags = []
            for n, d, _ in inputs:
                sizes = [at[{v: k for k, v in rename.items()}[x]] if isinstance(x, str) else x for x in d]
                flags += ["--shape", f"{n}={'x'.join(map(str, sizes))}"]
            return flags

        def static_path(tag):
            return os.path.join(work, f"{name}.{tag}.baton")

        def static(at, tag):
            return static_path(tag)

        # Every program of the model, compiled before any is run (--jobs at a time).
        compiles = [cmd]
        if args.load_runs > 0:
            compiles.append([args.baton, "compile", "-q", path, "-o", static_path("max")] + target
                            + shape_flags(dims))
        for at in shapes:
            compiles.append([args.baton, "compile", "-q", path, "-o",
                             static_path("x".join(map(str, at.values())))] + target
                            + shape_flags(at))
        env = dict(os.environ, CUDA_VISIBLE_DEVICES="") if args.compile_without_gpu else None
        progress(f"{name}: compiling {len(compiles)} programs, {max(1, args.jobs)} at a time")
        with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
            for _ in pool.map(lambda c: run(c, env), compiles):
                pass
        progress(f"{name}: compiled")

        top = static(dims, "max")
        thread_args = ["--threads", str(args.threads)] if args.threads else []
        # File size and load time at the upper bound.
        loads = {"dynamic": [], "static": []}
        device_bytes = {"dynamic": 0, "static": 0}
        for _ in range(args.load_runs):
            for side, prog in (("dynamic", dyn), ("static", top)):
                extra = shape_flags(dims) if side == "dynamic" else []
                out = run([args.baton, "run", prog, "-n", "1", "--warmup", "0", "--profile-runs", "0"]
                          + thread_args + io_args + extra)
                m = LOADED.search(out)
                loads[side].append(ms(*m.groups()))
                device_bytes[side] = sum(int(b) for b in DEVICE_BYTES.findall(out))
                progress(f"{name}: {side} loaded at the upper bound in {loads[side][-1]:.0f} ms")
        if args.load_runs > 0:
            row_size = {"model": name, "dynamic_bytes": os.path.getsize(dyn),
                        "static_max_bytes": os.path.getsize(top),
                        "dynamic_load_ms": statistics.median(loads["dynamic"]),
                        "static_max_load_ms": statistics.median(loads["static"]),
                        "dynamic_device_bytes": device_bytes["dynamic"],
                        "static_max_device_bytes": device_bytes["static"]}
            memory = ""
            if device_bytes["static"] > 0:
                memory = (f"device memory at load {device_bytes['dynamic'] / 1e6:.1f} MB against "
                          f"{device_bytes['static'] / 1e6:.1f} MB "
                          f"({device_bytes['dynamic'] / device_bytes['static']:.3f}x)")
            print(f"| {name} | file and load at the upper bound | {row_size['dynamic_bytes'] / 1e6:.1f} MB, "
                  f"{row_size['dynamic_load_ms']:.1f} ms | {row_size['static_max_bytes'] / 1e6:.1f} MB, "
                  f"{row_size['static_max_load_ms']:.1f} ms | {memory} |", flush=True)
            rows.append(row_size)
        for at in shapes:
            fixed = static(at, "x".join(map(str, at.values())))
            medians = {"dynamic": [], "static": []}
            if args.bench:
                d, s = interleaved(args, work, name, inputs, shape_flags(at), dyn, fixed)
                label = "x".join(map(str, at.values()))
                print(f"| {name} | {label} | {d:.3f} | {s:.3f} | {d / s:.3f} |", flush=True)
                rows.append({"model": name, "shape": at, "dynamic_ms": d, "static_ms": s,
                             "ratio": d / s, "interleaved_calls": args.rounds * args.n})
                continue
            firsts = {"dynamic": [], "static": []}
            prepare = ["--prepare-shape", ",".join(f"{rename[k]}={v}" for k, v in at.items())]
            for _ in range(args.rounds):
                for side, prog in (("dynamic", dyn), ("static", fixed)):
                    # A static program compiled with --io device takes its inputs' shapes from
                    # the program; the dynamic one from --shape.
                    extra = shape_flags(at) if side == "dynamic" else []
                    extra += prepare if side == "dynamic" and args.prepare else []
                    out = run([args.baton, "run", prog, "-n", str(args.n), "--warmup",
                               str(args.warmup), "--profile-runs", "0"] + thread_args
                              + io_args + extra)
                    m = LATENCY.search(out)
                    medians[side].append(ms(m.group(3), m.group(4)))
                    progress(f"{name} {'x'.join(map(str, at.values()))}: {side} median "
                             f"{medians[side][-1]:.3f} ms")
                    f = FIRST.search(out)
                    if f:
                        firsts[side].append(ms(*f.groups()))
            d = statistics.median(medians["dynamic"])
            s = statistics.median(medians["static"])
            label = "x".join(map(str, at.values()))
            row = {"model": name, "shape": at, "dynamic_ms": d, "static_ms": s, "ratio": d / s,
                   "rounds": medians, "first_call_ms": firsts, "prepared": args.prepare}
            if args.prepare and firsts["dynamic"] and firsts["static"]:
                fd, fs = statistics.median(firsts["dynamic"]), statistics.median(firsts["static"])
                print(f"| {name} | {label} | {d:.3f} | {s:.3f} | {d / s:.3f} | {fd:.2f} / {fs:.2f} |",
                      flush=True)
            else:
                print(f"| {name} | {label} | {d:.3f} | {s:.3f} | {d / s:.3f} |", flush=True)
            rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "rounds": args.rounds, "n": args.n, "rows": rows},
                      f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
