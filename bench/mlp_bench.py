#!/usr/bin/env python3
"""MLP benchmark: Baton vs PyTorch eager vs torch.compile(mode="reduce-overhead"), one GPU, one run.

The model: batch 8, four Linear(4096, 4096) each followed by GELU. PyTorch runs it in fp16; the
fp32 module is exported with torch.onnx.export and Baton compiles it with --precision fp16 (fp16
weights and activations, fp32 accumulation, float32 program inputs/outputs).

Usage (on the GPU host, from the repository root, with a Baton bundle):
  python3 bench/mlp_bench.py --baton BIN/baton --bench BIN/baton_bench --work /tmp/bench [--json OUT.json]

Times are wall clock per call with the result ready (torch: after torch.cuda.synchronize()),
median and p90 over --iterations runs after --warmup runs. Baton's program keeps its inputs and
outputs on the host, so each Baton call includes a 128 KiB copy in and out; the PyTorch rows are
given both with device-resident tensors and with the same host copies.
"""
import argparse
import json
import os
import subprocess
import time

import numpy as np
import torch


class Mlp(torch.nn.Module):
    def __init__(self, width=4096, layers=4):
        super().__init__()
        self.net = torch.nn.Sequential(*[m for _ in range(layers) for m in (torch.nn.Linear(width, width), torch.nn.GELU())])

    def forward(self, x):
        return self.net(x)


def timed(fn, iterations, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) * 1e3)
    samples.sort()
    return {"median_ms": float(np.median(samples)), "p90_ms": float(samples[int(0.9 * (len(samples) - 1))]),
            "min_ms": samples[0]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baton", required=True)
    ap.add_argument("--bench", required=True)
    ap.add_argument("--work", default="/tmp/baton_mlp_bench")
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--json")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.manual_seed(0)
    gpu = torch.cuda.get_device_name(0)
    model32 = Mlp().eval()
    x32 = torch.randn(8, 4096)

    onnx_path = os.path.join(args.work, "mlp4096.onnx")
    t0 = time.time()
    torch.onnx.export(model32, (x32,), onnx_path, dynamo=False, opset_version=17,
                      input_names=["input"], output_names=["output"])
    export_s = time.time() - t0
    prog = os.path.join(args.work, "mlp4096.baton")
    t0 = time.time()
    subprocess.run([args.baton, "compile", onnx_path, "-o", prog, "--device", "cuda:0", "--precision", "fp16"], check=True)
    compile_s = time.time() - t0

    # Accuracy of the fp16 program against the fp32 PyTorch module.
    np.save(os.path.join(args.work, "x.npy"), x32.numpy())
    subprocess.run([args.baton, "run", "-q", prog, "--input", "input=" + os.path.join(args.work, "x.npy"),
                    "-o", os.path.join(args.work, "out"), "-n", "1", "--warmup", "0"], check=True)
    with open(os.path.join(args.work, "out", "outputs.json")) as f:  # names output_<i>_<name>.npy
        got = np.load(json.load(f)["outputs"][0]["file"])
    with torch.no_grad():
        ref = model32(x32).numpy()
    rel_err = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))

    baton = json.loads(subprocess.run([args.bench, prog, "--iterations", str(args.iterations), "--warmup", str(args.warmup)],
                                      check=True, capture_output=True, text=True).stdout)

    model16 = Mlp().eval()
    model16.load_state_dict(model32.state_dict())
    model16 = model16.half().cuda()
    x16 = x32.half().cuda()
    x16_host = x32.half()
    results = {"gpu": gpu, "torch": torch.__version__, "baton": baton, "baton_rel_err_vs_fp32": rel_err,
               "export_s": export_s, "compile_s": compile_s}
    with torch.no_grad():
        results["eager"] = timed(lambda: model16(x16), args.iterations, args.warmup)
        results["eager_host_io"] = timed(lambda: model16(x16_host.cuda()).cpu(), args.iterations, args.warmup)
        compiled = torch.compile(model16, mode="reduce-overhead")
        t0 = time.time()
        for _ in range(5):
            compiled(x16)
        results["torch_compile_s"] = time.time() - t0
        results["compile"] = timed(lambda: compiled(x16), args.iterations, args.warmup)
        results["compile_host_io"] = timed(lambda: compiled(x16_host.cuda()).cpu(), args.iterations, args.warmup)

    b = baton["median_ms"]
    print(f"GPU: {gpu}   torch {torch.__version__}")
    print(f"Baton fp16 program vs fp32 PyTorch: relative error {rel_err:.2e}")
    print(f"{'runner':34s} {'median ms':>10s} {'p90 ms':>10s} {'Baton / runner':>15s}")
    print(f"{'Baton (host I/O), execute()':34s} {b:10.4f} {baton['p90_ms']:10.4f} {'1.00':>15s}")
    print(f"{'  of which GPU (delegate events)':34s} {baton['device_median_ms']:10.4f}")
    for key, label in (("eager", "PyTorch eager (device tensors)"), ("eager_host_io", "PyTorch eager (host I/O)"),
                       ("compile", "torch.compile r-o (device)"), ("compile_host_io", "torch.compile r-o (host I/O)")):
        r = results[key]
        print(f"{label:34s} {r['median_ms']:10.4f} {r['p90_ms']:10.4f} {b / r['median_ms']:15.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
