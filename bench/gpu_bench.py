#!/usr/bin/env python3
"""Baton against PyTorch eager and torch.compile on one GPU, in one run, fp16, device-resident
I/O on both sides (issue 11, benchmarks).

On the GPU host, from the repository root, with a bundle (scripts/run_gpu_models.sh does this):
  python3 bench/gpu_bench.py --baton BUNDLE/bin/baton --out LOG/bench --commit SHA
      [--work /tmp/gpu_bench] [--only|--models resnet,resnet32,bert,mlp] [--iterations 300]
      [--warmup 30] [--no-max-autotune] [--runners|--modes baton,eager,reduce-overhead,max-autotune]
      [--compile-timeout 300] [--budget-s 540] [--models-from DIR] [--merge-into A/gpu_bench.json]
  python3 bench/gpu_bench.py --merge A/gpu_bench.json B/gpu_bench.json --out LOG/merged
      (one table from runs that each did some runners, e.g. max-autotune in a call of its own)
max-autotune for some models in a call of its own, merged into an earlier run's table:
  python3 bench/gpu_bench.py --out LOG2/bench --commit SHA --modes max-autotune \
      --models resnet50,mobilenetv3 --merge-into LOG/bench/gpu_bench.json
  (--baton is needed only when the baton runner runs. --merge-into PATH: PATH's rows as they were
  when this call started, with this call's runners merged in — a runner that succeeded here
  replaces PATH's, one that failed here does not replace PATH's success — are written back to PATH
  and its gpu_bench.md after every runner; this call's own results go to OUT/gpu_bench.json, or to
  OUT/gpu_bench.run.json when OUT is PATH's folder.)
Locally, without a GPU (a dry run of the pipeline: Baton compiled for the CPU, PyTorch on the
CPU in fp32, small configurations):
  python3 bench/gpu_bench.py --baton build/tools/baton/baton --out /tmp/gb --device cpu --small

Cases (--only / --models takes these names): resnet (batch 1), resnet32 (ResNet-50 batch 32),
mobilenet, squeezenet, vit, bert, gpt2 (batch 1; text at sequence 128 with an attention mask), mlp
(bench/mlp_bench.py's 4 x (Linear 4096->4096, GELU), batch 8); also by the torchvision and
transformers names (ALIASES: resnet50, resnet50-b32, mobilenetv3, squeezenet1_1, vit_b_16,
bert-base, gpt2-small); and, only when named, densenet, efficientnet and unet (issue 38's zoo,
batch 1) and densenet8, efficientnet8, unet8 (the same at batch 8). Models and inputs come from
tests/e2e/export_real_models.py's builders (random weights, fixed seed); the ONNX file is the
TorchScript exporter's (opset 17, symbolic batch; --shape fixes it), shared with
bench/gpu_models.py (--models-from its --work/onnx).

Runners, one after the other on the same GPU:
- baton: `baton compile X.onnx --device cuda:0 --precision fp16 --io device` (compiles run one
  at a time, --compile-jobs, before anything is timed: each times its GEMM algorithms and cuDNN
  plans on the GPU and records them), then `baton run X.baton --device-io --input ... -n N
  --warmup W`: inputs and outputs in GPU memory bound zero-copy, the default stream, execute()
  returning with results ready; its latency line (wall clock around each execute, nearest-rank
  median and p90) and the per-instruction GPU medians are parsed. If the device-I/O program fails,
  it falls back to a host-I/O program and says so in the row.
- eager: model.half().cuda() under torch.inference_mode(), inputs already on the GPU.
- reduce-overhead / max-autotune: torch.compile(model, mode=...) under torch.no_grad(), compiled
  by a few calls (compile seconds recorded), then timed.
Every PyTorch runner runs in a subprocess of its own with a time limit (--compile-timeout for the
compiled modes), so a failing or hanging torch.compile is recorded and the others go on. Times:
wall clock per call until torch.cuda.synchronize() returns, nearest-rank median and p90 over
--iterations calls after --warmup calls (the same statistic as baton run's).

Writes OUT/gpu_bench.json (rewritten after every runner) and OUT/gpu_bench.md (the table for
bench/RESULTS.md: GPU, date, torch version, --commit), logs under OUT/logs.

Expected time on an H100 with 16 CPUs, 8 cases: exports + Baton compiles ~1-2 min; Baton runs and
eager ~1 min; reduce-overhead ~20-60 s of compiling per model (~4-6 min for all eight on a cold
inductor cache); max-autotune 1-5 min per model (capped by --compile-timeout, default 300 s): run
it in a separate call (`--runners max-autotune`) or leave it out (--no-max-autotune), and merge
the JSON files with --merge. --budget-s (default 540) starts no new runner after that many seconds.
"""
import argparse
import concurrent.futures as cf
import json
import multiprocessing
import os
import subprocess
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common as gc  # noqa: E402

# case name -> (family, batch)
CASES = {"resnet": ("resnet", 1), "resnet32": ("resnet", 32), "mobilenet": ("mobilenet", 1),
         "squeezenet": ("squeezenet", 1), "vit": ("vit", 1), "bert": ("bert", 1), "gpt2": ("gpt2", 1),
         "mlp": ("mlp", 8)}
# Issue 38's zoo rows (batch 1, and batch 8 as densenet8, ...): only when named by --only, so the
# default run stays the eight above.
ZOO_CASES = {"densenet": ("densenet", 1), "efficientnet": ("efficientnet", 1), "unet": ("unet", 1),
             "densenet8": ("densenet", 8), "efficientnet8": ("efficientnet", 8), "unet8": ("unet", 8)}
CASES.update(ZOO_CASES)
# Other names a case is known by (--only / --models).
ALIASES = {"resnet50": "resnet", "resnet-50": "resnet", "resnet50-b32": "resnet32", "resnet50_b32": "resnet32",
           "mobilenetv3": "mobilenet", "mobilenet_v3_large": "mobilenet", "mobilenetv3-large": "mobilenet",
           "squeezenet1_1": "squeezenet", "squeezenet1.1": "squeezenet", "vit_b_16": "vit", "vit-b16": "vit",
           "vit-b/16": "vit", "bert-base": "bert", "bert_base": "bert", "gpt2-small": "gpt2", "gpt-2": "gpt2"}
RUNNERS = ["baton", "eager", "reduce-overhead", "max-autotune"]
EXPORTER = "torchscript17"


def quantile(sorted_values, q):
    """Nearest rank, as tools/baton/cmd_run.cpp."""
    n = len(sorted_values)
    rank = int(np.ceil(q * n))
    return sorted_values[min(n - 1, max(0, rank - 1))]


# ---- PyTorch runners (each in a subprocess: --torch-worker) --------------------------------


def torch_worker(args):
    import torch
    result = {"runner": args.mode, "family": args.family, "batch": args.batch}

    def save():
        gc.write_json(args.result, result)

    try:
        cuda = args.device == "cuda"
        dtype = torch.float16 if cuda else torch.float32
        device = torch.device(args.device)
        model, inputs, _ = gc.build(args.family, not args.small, args.batch)
        model = model.to(device=device, dtype=dtype).eval()
        xs = [t.to(device=device, dtype=dtype) if t.is_floating_point() else t.to(device) for t in inputs]
        result["dtype"] = str(dtype)
        sync = torch.cuda.synchronize if cuda else (lambda: None)

        def timed(fn):
            for _ in range(args.warmup):
                fn()
            sync()
            samples = []
            for _ in range(args.iterations):
                start = time.perf_counter()
                fn()
                sync()
                samples.append((time.perf_counter() - start) * 1e3)
            samples.sort()
            return {"median_ms": quantile(samples, 0.5), "p90_ms": quantile(samples, 0.9), "min_ms": samples[0],
                    "iterations": args.iterations, "warmup": args.warmup}

        if args.mode == "eager":
            with torch.inference_mode():
                result.update(timed(lambda: model(*xs)))
        else:
            compiled = torch.compile(model, mode=args.mode)
            with torch.no_grad():
                start = time.time()
                for _ in range(3):  # compile, then the CUDA graph recording runs
                    compiled(*xs)
                sync()
                result["compile_s"] = time.time() - start
                save()
                result.update(timed(lambda: compiled(*xs)))
        result["ok"] = True
    except Exception as e:  # noqa: BLE001
        result["ok"] = False
        result["error"] = f"{type(e).__name__}: {e}"[-1500:]
        traceback.print_exc()
    save()
    return 0 if result["ok"] else 1


def run_torch(args, name, family, batch, mode, out_dir, work):
    result_path = os.path.join(work, f"{name}.{mode}.json")
    if os.path.exists(result_path):
        os.remove(result_path)
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", "--family", family, "--batch", str(batch),
           "--mode", mode, "--iterations", str(args.iterations), "--warmup", str(args.warmup),
           "--result", result_path, "--device", args.device] + (["--small"] if args.small else [])
    limit = args.eager_timeout if mode == "eager" else args.compile_timeout
    rc, seconds, text = gc.run_cmd(cmd, limit, os.path.join(out_dir, "logs", f"{name}.{mode}.log"))
    try:
        result = json.load(open(result_path))
    except Exception:  # noqa: BLE001
        result = {"ok": False}
    result["wall_s"] = seconds
    if rc is None:
        result.update(ok=False, error=f"timed out after {limit} s" + (
            f" (compiled in {result['compile_s']:.0f} s, then timing ran out)" if "compile_s" in result else ""))
    elif not result.get("ok"):
        result.setdefault("error", f"exit {rc}: " + gc.tail(text, 800))
    return result


# ---- Baton ---------------------------------------------------------------------------------


def baton_compile(args, name, onnx, shapes, batch, out_dir, work, io):
    fixed = {n: [batch] + list(d[1:]) for n, d in (shapes or {}).items()}
    if args.device == "cuda":
        device = ["--device", "cuda:0", "--precision", "fp16"] + (["--io", "device"] if io == "device" else [])
    else:
        device = ["--device", "cpu"]
    return gc.baton_compile(args.baton, onnx, os.path.join(work, f"{name}.{io}.baton"), fixed, device,
                            args.baton_compile_timeout, os.path.join(out_dir, "logs", f"{name}.{io}.compile.log"))


def baton_time(args, name, compiled, inputs, out_dir, io):
    cmd = [args.baton, "run", compiled["program"], "-n", str(args.iterations), "--warmup", str(args.warmup)]
    if io == "device" and args.device == "cuda":
        cmd.append("--device-io")
    cmd += gc.input_args(inputs)
    rc, seconds, text = gc.run_cmd(cmd, args.eager_timeout, os.path.join(out_dir, "logs", f"{name}.{io}.run.log"))
    parsed = gc.parse_baton_run(text) if rc == 0 else None
    if not parsed:
        return {"ok": False, "error": ("run timed out: " if rc is None else f"run failed (exit {rc}): ") + gc.tail(text, 1000)}
    parsed.update(ok=True, run_cmd=" ".join(cmd), wall_s=seconds)
    return parsed


# ---- tables --------------------------------------------------------------------------------


def ms(r):
    if not r:
        return "—"
    if not r.get("ok"):
        return "skipped" if str(r.get("error", "")).startswith("skipped") else ("failed" if r.get("error") else "—")
    return f"{r['median_ms']:.3f} ({r['p90_ms']:.3f})"


def markdown(rows, env):
    lines = [f"{env.get('gpu')} · driver {env.get('driver', '?')} · PyTorch {env.get('torch')} · {env.get('date')} · "
             f"Baton commit `{env.get('commit')}` · `bench/gpu_bench.py` ({env.get('iterations')} runs after "
             f"{env.get('warmup')} warm-up; {env.get('precision', 'fp16')}; device-resident inputs and outputs on both sides)"
             + (" SMALL configurations: a dry run." if env.get("small") else ""), "",
             "Median (p90) wall ms per call with the result ready. Ratio: Baton / the best torch.compile median "
             "(below 1: Baton is faster).", ""]
    if len(env.get("merged_runs") or []) > 1:
        lines += ["Merged from these runs (each runner's result keeps its run's date and commit in the JSON): " + "; ".join(
            f"{r.get('gpu')}, {r.get('date')}, commit `{r.get('commit')}` ({', '.join(r.get('runners') or [])}; "
            f"{r.get('iterations')} runs after {r.get('warmup')})" for r in env["merged_runs"]) + ".", ""]
    lines += [
             "| model | batch | Baton | Baton GPU time | Baton kernels | eager | compile reduce-overhead | compile max-autotune | Baton / best torch.compile | CPU kernels left |",
             "|---|---:|---|---:|---:|---|---|---|---:|---|"]
    notes = []
    for row in rows:
        r = row["runners"]
        b = r.get("baton") or {}
        best = [r[m]["median_ms"] for m in ("reduce-overhead", "max-autotune") if r.get(m, {}).get("ok")]
        ratio = f"{b['median_ms'] / min(best):.3g}" if b.get("ok") and best else "—"
        gpu = f"{b['gpu_sum_of_step_medians_ms']:.3f}" if b.get("gpu_sum_of_step_medians_ms") is not None else "—"
        ops = b.get("cpu_kernel_ops") or {}
        kern = (f"{b['cpu_kernels']} ({', '.join(f'{k} {v}' for k, v in list(ops.items())[:3])})"
                if b.get("cpu_kernels") else str(b.get("cpu_kernels", "—")))
        label = gc.DISPLAY.get(row["family"], row["family"]) + (" (host I/O)" if b.get("io") == "host" else "")
        nk = str(b["gpu_kernels"]) if b.get("gpu_kernels") is not None else "—"
        lines.append(f"| {label} | {row['batch']} | {ms(b)} | {gpu} | {nk} | {ms(r.get('eager'))} | {ms(r.get('reduce-overhead'))} | "
                     f"{ms(r.get('max-autotune'))} | {ratio} | {kern} |")
        for m in RUNNERS:
            if r.get(m) and not r[m].get("ok") and r[m].get("error"):
                notes.append(f"- {row['name']} {m}: {r[m]['error'][:300]}")
            if m == "baton" and r.get(m, {}).get("device_io_error"):
                notes.append(f"- {row['name']} baton: device I/O failed, host I/O used: {r[m]['device_io_error'][:300]}")
    if notes:
        lines += ["", "Failures:"] + [n.replace("\n", " ") for n in notes]
    compile_s = [f"{row['name']} " + "/".join(f"{row['runners'][m]['compile_s']:.0f}" if row["runners"].get(m, {}).get("compile_s") else "—"
                                              for m in ("reduce-overhead", "max-autotune")) for row in rows]
    lines += ["", "torch.compile seconds (reduce-overhead/max-autotune): " + ", ".join(compile_s)]
    return "\n".join(lines) + "\n"


def merge_results(results):
    """One result from several (each a gpu_bench.json's content), in order: a later runner result
    replaces an earlier one when it succeeded or when there was none. Each runner result keeps the
    date and commit of the run that made it; the environment is the first's, with every run listed
    under merged_runs."""
    rows, env, runs = {}, {}, []
    for j in results:
        env = env or dict(j["environment"])
        for run in j["environment"].get("merged_runs") or [j["environment"]]:
            runs.append({k: run.get(k) for k in ("date", "commit", "gpu", "iterations", "warmup", "runners", "torch")})
        for row in j["rows"]:
            dst = rows.setdefault(row["name"], {k: v for k, v in row.items() if k != "runners"} | {"runners": {}})
            for m, r in row["runners"].items():
                r = dict(r)
                r.setdefault("date", j["environment"].get("date"))
                r.setdefault("commit", j["environment"].get("commit"))
                if r.get("ok") or m not in dst["runners"]:
                    dst["runners"][m] = r
    env["merged_runs"] = runs
    return env, [rows[n] for n in CASES if n in rows]


def write_results(path, env, rows, **extra):
    gc.write_json(path, {"environment": env, "rows": rows} | extra)
    with open(os.path.join(os.path.dirname(path), "gpu_bench.md"), "w") as f:
        f.write(markdown(rows, env))


def merge(paths, out_dir):
    env, rows = merge_results([json.load(open(p)) for p in paths])
    os.makedirs(out_dir, exist_ok=True)
    write_results(os.path.join(out_dir, "gpu_bench.json"), env, rows, merged_from=paths)
    print(open(os.path.join(out_dir, "gpu_bench.md")).read())
    return 0


# ---- main ----------------------------------------------------------------------------------


def bundle_commit(baton):
    """The commit in the bundle's BUILD_INFO (scripts/make_bundle.sh) beside `baton`'s bin/
    folder, or None."""
    if not baton:
        return None
    info = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(baton))), "BUILD_INFO")
    try:
        with open(info) as f:
            for line in f:
                key, _, value = line.strip().partition(" ")
                if key == "commit" and value:
                    return value
    except OSError:
        return None
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baton", help="path of the baton CLI")
    ap.add_argument("--out", help="where JSON, markdown and logs go")
    ap.add_argument("--work", default="/tmp/baton_gpu_bench")
    ap.add_argument("--only", "--models", dest="only", default="",
                    help="cases: " + ",".join(CASES) + " (or " + ",".join(ALIASES) + ")")
    ap.add_argument("--runners", "--modes", dest="runners", default=",".join(RUNNERS))
    ap.add_argument("--no-max-autotune", action="store_true")
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--compile-timeout", type=int, default=300, help="seconds per torch.compile runner (compile + timing)")
    ap.add_argument("--eager-timeout", type=int, default=180, help="seconds per eager runner and per baton run")
    ap.add_argument("--baton-compile-timeout", type=int, default=600)
    ap.add_argument("--budget-s", type=float, default=540, help="start no new runner after this many seconds")
    ap.add_argument("--jobs", type=int, default=8, help="parallel exports")
    ap.add_argument("--compile-jobs", type=int, default=1,
                    help="parallel Baton compiles (each times its choices on the GPU: keep 1 for timing)")
    ap.add_argument("--models-from", default="", help="reuse ONNX exports from DIR (gpu_models.py's --work/onnx)")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: dry run")
    ap.add_argument("--small", action="store_true", help="small configurations (dry runs)")
    ap.add_argument("--commit", default="",
                    help="the Baton commit to label the run with (default: the bundle's BUILD_INFO "
                         "next to --baton's bin/, else COMMIT)")
    ap.add_argument("--merge", nargs="+", help="merge gpu_bench.json files into one table (no runs)")
    ap.add_argument("--merge-into", default="",
                    help="merge this run's results into this gpu_bench.json (and its gpu_bench.md) as they come")
    # Internal: one PyTorch runner in this process.
    ap.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--family", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker:
        return torch_worker(args)
    if not args.out:
        ap.error("--out is required")
    if args.merge:
        return merge(args.merge, args.out)
    if not args.commit:
        args.commit = bundle_commit(args.baton) or "COMMIT"
    t_start = time.time()
    wanted = [ALIASES.get(n.lower(), n.lower()) for n in gc.split_list(args.only)]
    unknown = [n for n in wanted if n not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {unknown} (known: {', '.join(CASES)}; aliases: {', '.join(ALIASES)})")
    names = [n for n in CASES if (n in wanted if wanted else n not in ZOO_CASES)]
    runners = [r for r in gc.split_list(args.runners) if not (args.no_max_autotune and r == "max-autotune")]
    bad = [r for r in runners if r not in RUNNERS]
    if bad:
        ap.error(f"unknown runner(s) {bad} (known: {', '.join(RUNNERS)})")
    if "baton" in runners and not args.baton:
        ap.error("--baton is required for the baton runner")
    base = None
    if args.merge_into:
        args.merge_into = os.path.abspath(args.merge_into)
        if os.path.exists(args.merge_into):
            base = json.load(open(args.merge_into))  # as it is now: every save merges into this
        else:
            print(f"gpu_bench: --merge-into {args.merge_into} does not exist yet: it will hold this run only", flush=True)
    out_dir, work = os.path.abspath(args.out), os.path.abspath(args.work)
    for d in (out_dir, os.path.join(out_dir, "logs"), work, os.path.join(work, "onnx")):
        os.makedirs(d, exist_ok=True)

    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_bench: no CUDA device visible to PyTorch (use --device cpu for a dry run)")
    env = gc.environment(torch, args.device)
    env.update({"commit": args.commit, "iterations": args.iterations, "warmup": args.warmup, "runners": runners,
                "precision": "fp16" if args.device == "cuda" else "fp32 (CPU dry run)", "small": args.small,
                "baton": os.path.abspath(args.baton) if args.baton else None})
    print(f"gpu_bench: {env['gpu']}  torch {env['torch']}  cases {','.join(names)}  runners {','.join(runners)}", flush=True)

    # Exports (TorchScript, symbolic batch: one per family) and inputs, in a process pool; only the
    # baton runner needs them.
    families = sorted({CASES[n][0] for n in names}, key=lambda f: (gc.FAMILY_ORDER + ["mlp"] + gc.ZOO_ORDER).index(f))
    if "baton" not in runners:
        families = []
    pool = cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn"))
    threads = max(1, (os.cpu_count() or 2) // args.jobs)
    exports = {}
    reuse = os.path.abspath(args.models_from) if args.models_from else ""
    for family in families:
        name = gc.onnx_name(family, EXPORTER, 1)
        if reuse and os.path.exists(os.path.join(reuse, name + ".json")) and os.path.exists(os.path.join(reuse, name)):
            f = cf.Future()
            f.set_result(json.load(open(os.path.join(reuse, name + ".json"))) | {"reused_from": reuse})
            exports[family] = (os.path.join(reuse, name), f)
        else:
            path = os.path.join(work, "onnx", name)
            exports[family] = (path, pool.submit(gc.export_job, family, EXPORTER, 1, not args.small, path, threads,
                                                 os.path.join(out_dir, "logs", f"export_{name}.log")))

    rows = []
    json_path, md_path = os.path.join(out_dir, "gpu_bench.json"), os.path.join(out_dir, "gpu_bench.md")

    if args.merge_into and os.path.dirname(args.merge_into) == out_dir:
        # OUT is the merged table's folder: this run's own results go beside it.
        json_path, md_path = os.path.join(out_dir, "gpu_bench.run.json"), os.path.join(out_dir, "gpu_bench.run.md")

    def save():
        gc.write_json(json_path, {"environment": env, "elapsed_s": time.time() - t_start, "rows": rows})
        with open(md_path, "w") as f:
            f.write(markdown(rows, env))
        if args.merge_into:
            own = {"environment": env, "rows": rows}
            merged_env, merged_rows = merge_results(([base] if base else []) + [own])
            write_results(args.merge_into, merged_env, merged_rows,
                          merged_from=([args.merge_into] if base else []) + [json_path])

    for n in names:
        family, batch = CASES[n]
        rows.append({"name": n, "family": family, "batch": batch, "runners": {}})

    # Inputs (the builders' own, at each case's batch) for baton run.
    inputs = {}
    for row in rows if "baton" in runners else []:
        try:
            _, xs, input_names = gc.build(row["family"], not args.small, row["batch"])
            files = []
            for nm, t in zip(input_names, xs):
                f = os.path.join(work, f"{row['name']}.{nm}.npy")
                np.save(f, t.numpy())
                files.append((nm, f))
            inputs[row["name"]] = files
        except Exception as e:  # noqa: BLE001
            row["runners"]["baton"] = {"ok": False, "error": f"inputs: {type(e).__name__}: {e}"[-800:]}

    # Baton compiles (device I/O), in parallel, before anything is timed.
    compiled = {}
    if "baton" in runners:
        def compile_row(row):
            path, fut = exports[row["family"]]
            meta = fut.result()
            if not meta.get("ok"):
                return {"error": "export failed: " + meta.get("error", "?")}
            r = baton_compile(args, row["name"], path, meta.get("shapes"), row["batch"], out_dir, work, "device")
            r["export"] = meta
            return r
        # One compile at a time by default: with the GPU present each compile times its GEMM
        # algorithms and cuDNN plans there (docs/engine-format.md, "Choices"), and compiles side
        # by side would time each other's work.
        with cf.ThreadPoolExecutor(max_workers=args.compile_jobs) as tp:
            futures = {row["name"]: tp.submit(compile_row, row) for row in rows if row["name"] in inputs}
            for name, fut in futures.items():
                try:
                    compiled[name] = fut.result()
                except Exception as e:  # noqa: BLE001
                    compiled[name] = {"error": f"{type(e).__name__}: {e}"[-800:]}
                print(f"baton compile {name}: " + (f"{compiled[name]['compile_s']:.1f} s, cpu kernels "
                      f"{compiled[name].get('cpu_kernels')}, delegates {compiled[name].get('delegates')}"
                      if "error" not in compiled[name] else compiled[name]["error"][:300]), flush=True)
    pool.shutdown()
    print(f"exports and compiles done at {time.time() - t_start:.0f} s", flush=True)

    # Runner by runner (Baton and eager for every model first, then each torch.compile mode), so
    # that running out of --budget-s drops the slow compiled modes, not whole models.
    for mode in runners:
        for row in rows:
            name, batch = row["name"], row["batch"]
            if mode in row["runners"]:
                continue
            if time.time() - t_start > args.budget_s:
                row["runners"][mode] = {"ok": False, "error": f"skipped: --budget-s {args.budget_s:.0f} s used up"}
                continue
            try:
                r = run_runner(args, row, mode, compiled, exports, inputs, out_dir, work)
            except Exception as e:  # noqa: BLE001  (one runner failing never stops the others)
                traceback.print_exc()
                r = {"ok": False, "error": f"{type(e).__name__}: {e}"[-800:]}
            row["runners"][mode] = r
            print(f"{name:10s} b{batch:<2d} {mode:16s} " + (
                f"median {r['median_ms']:.3f} ms  p90 {r['p90_ms']:.3f} ms"
                + (f"  (compile {r['compile_s']:.0f} s)" if r.get("compile_s") and mode != "baton" else "")
                + (f"  GPU {r['gpu_sum_of_step_medians_ms']:.3f} ms" if r.get("gpu_sum_of_step_medians_ms") else "")
                if r.get("ok") else "FAILED: " + str(r.get("error"))[:300].replace("\n", " ")), flush=True)
            save()
    save()
    print("\n" + open(md_path).read())
    print(f"wrote {json_path} and {md_path} ({time.time() - t_start:.0f} s)")
    if args.merge_into:
        md = os.path.join(os.path.dirname(args.merge_into), "gpu_bench.md")
        print("\nmerged into " + args.merge_into + ":\n" + open(md).read())
    return 0 if all(r.get("ok") for row in rows for r in row["runners"].values()) else 1


def run_runner(args, row, mode, compiled, exports, inputs, out_dir, work):
    name, family, batch = row["name"], row["family"], row["batch"]
    if mode == "baton":
        c = compiled.get(name, {"error": "not compiled"})
        r = {"io": "device"}
        if "error" in c:
            r.update(ok=False, error=c["error"])
        else:
            r.update(baton_time(args, name, c, inputs[name], out_dir, "device"))
        if not r.get("ok") and args.device == "cuda" and "export failed" not in r.get("error", ""):
            # Fall back to host I/O so that the row still has a Baton number.
            host = baton_compile(args, name, exports[family][0], c.get("export", {}).get("shapes"), batch,
                                 out_dir, work, "host")
            if "error" not in host:
                hr = baton_time(args, name, host, inputs[name], out_dir, "host")
                if hr.get("ok"):
                    r = dict(hr, io="host", device_io_error=r.get("error"))
                    c = host
        r.update({k: c.get(k) for k in ("compile_s", "cpu_kernels", "cpu_kernel_ops", "delegates", "copies",
                                          "compile_cmd") if k in c})
        return r
    return run_torch(args, name, family, batch, mode, out_dir, work)


if __name__ == "__main__":
    sys.exit(main())
