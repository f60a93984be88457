#!/usr/bin/env python3
"""PyTorch's side of issue 37's dynamic-shape table: a transformers model (the builders of
tests/e2e/export_real_models.py, full size, random weights) in eager mode and under torch.compile
with dynamic shapes (dynamic=True; modes default, reduce-overhead and max-autotune, which also
records CUDA graphs and tunes each GEMM and convolution among Triton templates), fp32 with TF32 off (as
Baton's fp32 programs) or fp16 (--dtype fp16: weights and float inputs half, as Baton's fp16
programs), called at each shape repeated and at the shapes in turn.

  python3 bench/torch_dynamic_bench.py --model bert --shapes 1x16,1x128,8x128,8x512 \\
      [--modes eager,default,reduce-overhead,max-autotune] [-n 50] [--warmup 10] [--json OUT.json]
  python3 bench/torch_dynamic_bench.py --model resnet --shapes 1,8,32,64   (ResNet-50, 224x224)

max-autotune compiles for minutes on a full-size model: give it a process (and a device call) of
its own. Per mode and shape: the first call (reduce-overhead records a CUDA graph per shape then), the
median and p90 of repeated calls and of the shapes called in turn (wall clock around the call and
a synchronize; inputs on the GPU, built before timing). With --profile-calls K, also the kernels
of one call at each shape (torch.profiler over K calls: their count, the sum of their durations
and the largest), to set Baton's GPU time against torch's kernels alone where the host no
longer shows (issue 37's compute-bound shapes).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import export_real_models as erm  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common as gc  # noqa: E402


def quantile(v, q):
    """The q-quantile by nearest rank (bench/quantile.h's)."""
    s = sorted(v)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["bert", "gpt2", "resnet"], required=True)
    ap.add_argument("--shapes", required=True,
                    help="BxS,BxS,... (resnet: batch sizes B,B,..., images 224x224)")
    ap.add_argument("--modes", default="eager,default,reduce-overhead")
    ap.add_argument("-n", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--json", default="")
    ap.add_argument("--dtype", choices=["fp32", "fp16"], default="fp32")
    ap.add_argument("--profile-calls", type=int, default=0,
                    help="profile this many calls per shape and mode (kernel count and sum)")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model, _, _ = getattr(erm, a.model)(True)
    model = model.cuda().eval()
    half = a.dtype == "fp16"
    if half:
        model = model.half()
    if a.model == "resnet":
        # (batch, image side): ResNet-50 over a batch range, as Baton's --dim batch=1..64.
        shapes = [(int(s), 224) for s in a.shapes.split(",")]
        inputs = {s: (erm.image_input(s[0], s[1]).cuda(),) for s in shapes}
        if half:
            inputs = {s: tuple(t.half() for t in v) for s, v in inputs.items()}
    else:
        shapes = [tuple(int(x) for x in s.split("x")) for s in a.shapes.split(",")]
        vocab = model.model.config.vocab_size
        inputs = {s: tuple(t.cuda() for t in erm.text_inputs(s[0], s[1], vocab, True))
                  for s in shapes}
    results = {}
    for mode in a.modes.split(","):
        torch._dynamo.reset()
        fn = model if mode == "eager" else torch.compile(model, dynamic=True, mode=mode)

        def call(s):
            start = time.perf_counter()
            with torch.no_grad():
                fn(*inputs[s])
            torch.cuda.synchronize()
            return (time.perf_counter() - start) * 1e3

        row = {}
        for s in shapes:
            # The first call compiles (and, under reduce-overhead or max-autotune, records a CUDA
            # graph); printed at once, so that a run cut off by a time limit still shows how far
            # the compiles got.
            row[s] = {"first_ms": call(s)}
            print(f"{a.model} {mode:16s} {s[0]}x{s[1]:<4d} first call {row[s]['first_ms']:9.2f} ms",
                  file=sys.stderr, flush=True)
        for s in shapes:
            for _ in range(a.warmup):
                call(s)
            t = [call(s) for _ in range(a.n)]
            row[s]["repeated"] = {"median_ms": statistics.median(t), "p90_ms": quantile(t, 0.9)}
        alt = {s: [] for s in shapes}
        for i in range(a.warmup + a.n):
            for s in shapes:
                ms = call(s)
                if i >= a.warmup:
                    alt[s].append(ms)
        for s in shapes:
            row[s]["alternating"] = {"median_ms": statistics.median(alt[s]),
                                     "p90_ms": quantile(alt[s], 0.9)}
        if a.profile_calls > 0:
            for s in shapes:
                row[s]["kernels"] = gc.kernel_profile(lambda: fn(*inputs[s]), a.profile_calls, 10)
                k = row[s]["kernels"]
                print(f"{a.model} {mode:16s} {s[0]}x{s[1]:<4d} kernels per call {k['count']:.0f}, "
                      f"kernel sum {k['ms']:.3f} ms; largest: "
                      + "; ".join(f"{t['us']:.1f} us x{t['per_call']:.0f} {t['name'][:60]}"
                                  for t in k["top"][:6]), flush=True)
        results[mode] = {f"{b}x{q}": v for (b, q), v in row.items()}
        for s in shapes:
            r = row[s]
            print(f"{a.model} {mode:16s} {s[0]}x{s[1]:<4d} first {r['first_ms']:9.2f} ms  repeated "
                  f"{r['repeated']['median_ms']:8.3f} (p90 {r['repeated']['p90_ms']:.3f})  "
                  f"alternating {r['alternating']['median_ms']:8.3f} ms", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "dtype": a.dtype, "torch": torch.__version__,
                       "gpu": torch.cuda.get_device_name(), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
