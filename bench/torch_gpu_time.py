#!/usr/bin/env python3
"""Where torch.compile's wall time goes, for the rows of gpu_bench.py: the same models, inputs and
modes (fp16, device-resident, batch as in gpu_bench.py), compiled once per mode, then

- wall: median and p90 ms of a call with the result ready (time.perf_counter around the call and
  torch.cuda.synchronize, as gpu_bench.py times it);
- GPU span: median ms between a CUDA event recorded before the call and one after it (the stream's
  time from the first kernel's launch to the last one's end, including any idle gaps while the host
  is still launching);
- kernels: the number of kernels of one call and the sum of their durations (torch.profiler over
  --profile-calls calls, divided by them), and the largest kernels by total time.

wall minus GPU span is host time the GPU does not hide (Python, guards, the graph launch and the
synchronization); GPU span minus the kernel sum is idle time between kernels.

    python3 bench/torch_gpu_time.py --models bert,gpt2 --modes reduce-overhead,max-autotune --out DIR
"""
import argparse
import json
import os
import statistics
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common as gc  # noqa: E402

CASES = {"resnet": ("resnet", 1), "resnet32": ("resnet", 32), "mobilenet": ("mobilenet", 1),
         "squeezenet": ("squeezenet", 1), "vit": ("vit", 1), "bert": ("bert", 1), "gpt2": ("gpt2", 1),
         "mlp": ("mlp", 8)}


def measure(name, mode, iterations, warmup, profile_calls):
    import torch
    family, batch = CASES[name]
    model, inputs, _ = gc.build(family, True, batch)
    dtype = torch.float16
    model = model.to(device="cuda", dtype=dtype).eval()
    xs = [t.to(device="cuda", dtype=dtype) if t.is_floating_point() else t.to("cuda") for t in inputs]
    fn = torch.compile(model, mode=mode)
    out = {"model": name, "batch": batch, "mode": mode}
    with torch.no_grad():
        start = time.time()
        for _ in range(3):
            fn(*xs)
        torch.cuda.synchronize()
        out["compile_s"] = round(time.time() - start, 1)
        for _ in range(warmup):
            fn(*xs)
        torch.cuda.synchronize()
        walls, spans = [], []
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(iterations):
            t0 = time.perf_counter()
            begin.record()
            fn(*xs)
            end.record()
            torch.cuda.synchronize()
            walls.append((time.perf_counter() - t0) * 1e3)
            spans.append(begin.elapsed_time(end))
        walls.sort()
        spans.sort()
        out["wall_ms"] = statistics.median(walls)
        out["wall_p90_ms"] = walls[int(0.9 * (len(walls) - 1))]
        out["gpu_span_ms"] = statistics.median(spans)
    k = gc.kernel_profile(lambda: fn(*xs), profile_calls)
    out["kernels_per_call"] = k["count"]
    out["kernel_ms_per_call"] = k["ms"]
    out["top_kernels"] = [{"name": t["name"], "per_call": t["per_call"], "us_per_call": t["us"]}
                          for t in k["top"]]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="vit,bert,gpt2,mlp")
    ap.add_argument("--modes", default="reduce-overhead,max-autotune")
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--profile-calls", type=int, default=20)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = []
    lines = ["| model | mode | wall ms (p90) | GPU span ms | kernels per call | kernel ms per call | wall − span | span − kernels |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name in gc.split_list(args.models):
        for mode in gc.split_list(args.modes):
            try:
                r = measure(name, mode, args.iterations, args.warmup, args.profile_calls)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                r = {"model": name, "mode": mode, "error": f"{type(e).__name__}: {e}"[-500:]}
            results.append(r)
            if "wall_ms" in r:
                line = (f"| {name} | {mode} | {r['wall_ms']:.3f} ({r['wall_p90_ms']:.3f}) | {r['gpu_span_ms']:.3f} | "
                        f"{r['kernels_per_call']:.0f} | {r['kernel_ms_per_call']:.3f} | "
                        f"{r['wall_ms'] - r['gpu_span_ms']:.3f} | {r['gpu_span_ms'] - r['kernel_ms_per_call']:.3f} |")
            else:
                line = f"| {name} | {mode} | failed: {r['error'][:80]} | | | | | |"
            lines.append(line)
            print(line, flush=True)
            with open(os.path.join(args.out, "torch_gpu_time.json"), "w") as f:
                json.dump(results, f, indent=1)
    with open(os.path.join(args.out, "torch_gpu_time.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    for r in results:
        if "top_kernels" in r:
            print(f"\n{r['model']} {r['mode']}: largest kernels per call")
            for k in r["top_kernels"][:8]:
                print(f"  {k['us_per_call']:8.1f} us  x{k['per_call']:.0f}  {k['name'][:90]}")


if __name__ == "__main__":
    main()
