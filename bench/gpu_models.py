#!/usr/bin/env python3
"""Full-size real models on the GPU: Baton's output against PyTorch's, both exporters, fp32 and
fp16 (bf16 with --bf16), batch 1 and 8, models exported in fp32 (and in fp16 with --export-dtypes)
(issue 11, correctness).

On the GPU host, from the repository root, with a bundle (scripts/run_gpu_models.sh does this):
  python3 bench/gpu_models.py --baton BUNDLE/bin/baton --out LOG/models [--work /tmp/gpu_models]
      [--only resnet,bert] [--batches 1,8] [--precisions fp32,fp16] [--bf16]
      [--exporters torchscript17,dynamo18] [--export-dtypes fp32,fp16] [--models-from DIR]
      [--jobs 8] [--budget-s 540]
Subsets that fit a 10-minute call (each a separate invocation; the default is the 48 cases below):
  --precisions bf16 --batches 1                  bf16 compiles of the fp32 exports (12 cases)
  --export-dtypes fp16 --batches 1               models exported in fp16 (12 cases)
Locally, without a GPU (a dry run of the whole pipeline on small configurations):
  python3 bench/gpu_models.py --baton build/tools/baton/baton --out /tmp/gm --device cpu --small
Without a GPU, to see what the GPU compile makes of the full models (compile + inspect only):
  python3 bench/gpu_models.py --baton build/tools/baton/baton --out /tmp/gm --compile-only --arch sm_90

For each family (torchvision resnet50, mobilenet_v3_large, squeezenet1_1, vit_b_16; transformers
BertModel and GPT2LMHeadModel at sequence 128 with an attention mask; random weights from
tests/e2e/export_real_models.py's builders and seed, model.eval()):
- export with the TorchScript exporter (opset 17; symbolic batch and sequence, fixed at compile
  time with --shape; one export for every batch) and the dynamo exporter (opset 18, static: one
  export per batch). Exports run in a process pool (--jobs) while the main process computes
  PyTorch's references on the GPU.
- `baton compile X.onnx -o X.baton --device cuda:0 --precision P [--shape ...]` in a pool of
  --jobs, then one at a time on the GPU `baton run X.baton --input NAME=FILE ... -o DIR -n 1
  --warmup 0 -q` on the inputs PyTorch gets.
- --export-dtypes fp16: the model is also exported in fp16 (model.half() and fp16 inputs before
  torch.onnx.export, on the CPU; integer inputs stay int64), compiled with --precision fp16
  (whatever --precisions says) and run on the fp16-rounded inputs. An exporter that cannot
  export a family in fp16 gives a row with status "no export" and its error, not a failure of
  the run (the exit status ignores those rows).
- Error metric: relative L2, ||baton - ref|| / ||ref||, the tests' `relative_error`
  (tests/testing/random.cpp); max|baton - ref| / max|ref| is reported beside it. The reference is
  the fp32 PyTorch model on the GPU with TF32 off (torch.backends.cuda.matmul.allow_tf32 and
  torch.backends.cudnn.allow_tf32 False), for fp16-exported models too. fp32 passes at <= 1e-3;
  fp16 / bf16 (and fp16 exports) pass at <= 2 x the PyTorch fp16 / bf16 model's own error
  against that reference on the same inputs.
- Also recorded: compile seconds, the CPU kernel instructions left in the program (by op, from
  `baton inspect --json`), the delegate and copy counts.

Writes OUT/gpu_models.json (every case; rewritten after each one, so a run cut short keeps what
it had), OUT/gpu_models.md (the table for bench/RESULTS.md) and OUT/logs/ (compile/run logs).
Large files (ONNX, programs, outputs) stay under --work. One case failing never stops the others.
A case over its bound runs its program twice more (the errors go in the message and in
"rerun_errors": the same error each time says the program is wrong, a different one says the run
went wrong), writes `baton inspect` of it (its steps and recorded choices) to
OUT/logs/CASE.inspect.log, and keeps the program and its output under --work even without --keep
(a full-size ResNet-50 fp16 case failed once in 34 runs in issue 12's seventh pass, and its
program was gone).
Exit status 0 only when every case passed (or is an fp16 export its exporter could not make); 1
when any failed, errored or was skipped (--budget-s).

Expected time on an H100 host with 16 CPUs (default: 6 families x 2 exporters x 2 batches x 2
precisions = 48 cases, 18 exports): about 4-6 minutes, most of it exports and compiles; --budget-s
(default 540) stops starting new GPU runs after that many seconds and writes what it has.
"""
import argparse
import concurrent.futures as cf
import copy
import json
import multiprocessing
import os
import sys
import threading
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common as gc  # noqa: E402

FP32_BOUND = 1e-3
LOW_PRECISION_FACTOR = 2.0


# ---- references ---------------------------------------------------------------------------


def torch_dtype(torch, precision):
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]


def compute_references(torch, args, family, low_precisions, work):
    """PyTorch on args.device: the fp32 output (the reference) per batch and the fp16 / bf16
    models' own errors against it. Saves the inputs as .npy for baton run (and, for fp16 exports,
    the inputs rounded to fp16)."""
    out = {"batches": {}}
    device = torch.device(args.device)
    model = None
    for batch in args.batches:
        m, inputs, names = gc.build(family, not args.small, batch)
        if model is None:
            model = m
            out["fingerprint"] = gc.fingerprint(model)
            out["names"] = names
        files = []
        for name, t in zip(names, inputs):
            f = os.path.join(work, "inputs", f"{family}_b{batch}.{name}.npy")
            np.save(f, t.numpy())
            files.append((name, f))
        entry = {"inputs": files}
        if "fp16" in args.export_dtypes:
            entry["inputs_fp16"] = []
            for name, t in zip(names, gc.to_dtype(torch, inputs, "fp16")):
                f = os.path.join(work, "inputs", f"{family}_b{batch}.{name}.fp16.npy")
                np.save(f, t.numpy())
                entry["inputs_fp16"].append((name, f))
        start = time.time()
        model32 = model.to(device)
        with torch.inference_mode():
            ref = model32(*[t.to(device) for t in inputs]).float().cpu().numpy()
        if args.device == "cuda":
            torch.cuda.synchronize()
        entry["ref"] = ref
        entry["ref_s"] = time.time() - start
        for p in low_precisions:
            try:
                dt = torch_dtype(torch, p)
                mp = copy.deepcopy(model32).to(dt)
                xs = [t.to(device).to(dt) if t.is_floating_point() else t.to(device) for t in inputs]
                with torch.inference_mode():
                    y = mp(*xs).float().cpu().numpy()
                entry[f"torch_{p}_error"] = gc.relative_error(y, ref)
                entry[f"torch_{p}_max_error"] = gc.max_relative_error(y, ref)
                del mp
            except Exception as e:  # noqa: BLE001
                entry[f"torch_{p}_failure"] = f"{type(e).__name__}: {e}"[-800:]
        model = model32.cpu()
        out["batches"][batch] = entry
    del model
    if args.device == "cuda":
        torch.cuda.empty_cache()
    return out


# ---- the run ------------------------------------------------------------------------------


def fmt_err(x):
    return "—" if x is None else ("inf" if x == float("inf") else f"{x:.2e}")


def row_text(c):
    return (f"{c['family']:10s} {c['exporter']:13s} {c['export_dtype']}-model b{c['batch']:<2d} {c['precision']:4s} "
            f"err {fmt_err(c.get('error_l2')):>8s} (max {fmt_err(c.get('error_max')):>8s}) "
            f"bound {fmt_err(c.get('bound')):>8s}  {c['status']:7s} "
            f"compile {c.get('compile_s', 0):6.1f} s  cpu kernels {str(c.get('cpu_kernels', '—')):>4s}  "
            f"delegates {str(c.get('delegates', '—')):>4s}"
            + (f"  -- {c['message'][:160]}" if c.get("message") and c["status"] != "pass" else ""))


def markdown(cases, env, args):
    lines = [f"Correctness of full-size models (`bench/gpu_models.py`): {env.get('gpu')}, "
             f"torch {env.get('torch')}, {env.get('date')}, commit `{args.commit}`"
             + (" (SMALL configurations: a dry run)." if args.small else "."), "",
             "Error: relative L2 against PyTorch fp32 on the same device with TF32 off (max-norm "
             "error max|a-b|/max|ref| in parentheses). Bound: fp32 1e-3; fp16/bf16 2 × PyTorch's own "
             "fp16/bf16 error. Model: the dtype the model was exported in (fp16: model.half() before "
             "export, fp16 inputs, compiled with --precision fp16). CPU kernels: instructions left on the CPU "
             "(top ops).", "",
             "| model | exporter | model dtype | batch | precision | Baton error (max) | bound | PyTorch low-prec. error | result | compile s | CPU kernels | delegates |",
             "|---|---|---|---:|---|---|---|---|---|---:|---|---:|"]
    for c in cases:
        lines.append(f"| {gc.DISPLAY.get(c['family'], c['family'])} | {c['exporter']} | {c['export_dtype']} | {c['batch']} | {c['precision']} | "
                     f"{fmt_err(c.get('error_l2'))} ({fmt_err(c.get('error_max'))}) | {fmt_err(c.get('bound'))} | "
                     f"{fmt_err(c.get('torch_error'))} | {result_cell(c)} | {c.get('compile_s', 0):.1f} | {kernels_cell(c)} | "
                     f"{c.get('delegates', '—')} |")
    lines += ["", totals_line(cases)]
    return "\n".join(lines) + "\n"


def kernels_cell(c):
    """A case's CPU kernel instructions for the table: the count and its four commonest ops."""
    ops = c.get("cpu_kernel_ops") or {}
    top = ", ".join(f"{k} {v}" for k, v in list(ops.items())[:4])
    return f"{c['cpu_kernels']} ({top})" if c.get("cpu_kernels") else str(c.get("cpu_kernels", "—"))


def result_cell(c):
    return c["status"] if c["status"] == "pass" else f"**{c['status']}**: {c.get('message', '')[:200]}"


def totals_line(cases):
    counts = {}
    for c in cases:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    return "Totals: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baton", required=True, help="path of the baton CLI")
    ap.add_argument("--out", required=True, help="where JSON, markdown and logs go")
    ap.add_argument("--work", default="/tmp/baton_gpu_models", help="ONNX files, programs, outputs")
    ap.add_argument("--only", default="", help="families, e.g. resnet,bert (default all six)")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--precisions", default="fp32,fp16")
    ap.add_argument("--bf16", action="store_true", help="add bf16 to --precisions")
    ap.add_argument("--exporters", default="torchscript17,dynamo18")
    ap.add_argument("--export-dtypes", default="fp32",
                    help="fp32 and/or fp16: the dtype the models are exported in (fp16 exports run in fp16 only)")
    ap.add_argument("--models-from", default="", help="reuse ONNX exports from DIR (an earlier --work/onnx)")
    add_common_options(ap, compile_timeout=300, budget_s=540)
    args = ap.parse_args()
    t_start = time.time()
    families = [f for f in gc.FAMILY_ORDER + gc.ZOO_ORDER if f in gc.split_list(args.only)] \
        if args.only else list(gc.FAMILY_ORDER)
    args.batches = [int(b) for b in gc.split_list(args.batches)]
    precisions = gc.split_list(args.precisions) + (["bf16"] if args.bf16 and "bf16" not in args.precisions else [])
    exporters = gc.split_list(args.exporters)
    args.export_dtypes = gc.split_list(args.export_dtypes)
    for d in args.export_dtypes:
        if d not in ("fp32", "fp16"):
            ap.error(f"unknown export dtype {d} (fp32 or fp16)")
    for e in exporters:
        if e not in gc.EXPORTERS:
            ap.error(f"unknown exporter {e} (known: {', '.join(gc.EXPORTERS)})")
    for p in precisions:
        if p not in ("fp32", "fp16", "bf16"):
            ap.error(f"unknown precision {p}")
    out_dir, work = make_dirs(args)
    torch, env = torch_and_environment(args, "gpu_models")
    print(f"gpu_models: {env['gpu']}  torch {env['torch']}  families {','.join(families)}  batches "
          f"{args.batches}  precisions {precisions}  exporters {exporters}  export dtypes {args.export_dtypes}",
          flush=True)

    # Exports: one per (family, TorchScript) and one per (family, dynamo, batch).
    export_pool = cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn"))
    threads = max(1, (os.cpu_count() or 2) // args.jobs)
    exports = {}  # onnx path -> future returning the metadata
    reuse = os.path.abspath(args.models_from) if args.models_from else ""
    # The slowest exports first (dynamo before TorchScript; the transformers before the CNNs), so
    # that the pool's tail is short.
    slow = ["swin", "whisper", "vit", "gpt2", "bert", "convnext", "densenet", "regnet", "efficientnet", "unet",
            "resnet", "mobilenet", "squeezenet"]
    slow_first = sorted(((f, e) for f in families for e in exporters),
                        key=lambda fe: (not gc.EXPORTERS[fe[1]][0], slow.index(fe[0])))
    for family, exporter in slow_first:
        batches = args.batches if gc.EXPORTERS[exporter][0] else [min(args.batches)]
        for batch in batches:
            for dtype in args.export_dtypes:
                name = gc.onnx_name(family, exporter, batch, dtype)
                if reuse and os.path.exists(os.path.join(reuse, name)) and os.path.exists(os.path.join(reuse, name + ".json")):
                    f = cf.Future()
                    meta = json.load(open(os.path.join(reuse, name + ".json")))
                    meta["reused_from"] = reuse
                    f.set_result(meta)
                    exports[name] = (os.path.join(reuse, name), f)
                    continue
                path = os.path.join(work, "onnx", name)
                exports[name] = (path, export_pool.submit(gc.export_job, family, exporter, batch, not args.small, path,
                                                          threads, os.path.join(out_dir, "logs", "export_" + name + ".log"),
                                                          dtype))

    # Compiles, as soon as their export is there: threads that wait, --jobs compiling at once.
    compile_slots = threading.Semaphore(args.jobs)
    cases = []
    for family in families:
        for exporter in exporters:
            for batch in args.batches:
                for dtype in args.export_dtypes:
                    # An fp16 model runs in fp16.
                    for precision in precisions if dtype == "fp32" else ["fp16"]:
                        model = family if dtype == "fp32" else f"{family}_{dtype}model"
                        cases.append({"family": family, "exporter": exporter, "batch": batch, "precision": precision,
                                      "export_dtype": dtype, "name": f"{exporter}_{model}_b{batch}_{precision}"})

    def compile_case(case):
        path, fut = exports[gc.onnx_name(case["family"], case["exporter"], case["batch"], case["export_dtype"])]
        meta = fut.result()
        case["export"] = {k: v for k, v in meta.items() if k != "error"}
        if not meta.get("ok"):
            if case["export_dtype"] != "fp32":
                # The exporter's limit, not Baton's: a row that says so.
                case.update(status="no export", message=f"{case['exporter']} in {case['export_dtype']}: "
                            + meta.get("error", "?").replace("ValueError: ", ""))
            else:
                case.update(status="error", message="export failed: " + meta.get("error", "?"))
            return case
        shapes = {}
        for n, dims in (meta.get("shapes") or {}).items():
            shapes[n] = [case["batch"]] + list(dims[1:])
        program = os.path.join(work, "programs", case["name"] + ".baton")
        case["program"] = program
        return gc.compile_into(case, args, path, program, gc.shape_args(shapes),
                               os.path.join(out_dir, "logs", case["name"] + ".compile.log"),
                               compile_slots)

    compile_pool = cf.ThreadPoolExecutor(max_workers=len(cases) or 1)
    compiled = {compile_pool.submit(compile_case, c): c for c in cases}

    # References on the device while exports and compiles run (fp16 exports are judged by PyTorch's
    # fp16 error).
    low = [p for p in precisions if p != "fp32"]
    if "fp16" in args.export_dtypes and "fp16" not in low:
        low.append("fp16")
    refs = {}
    if not args.compile_only:
        for family in families:
            start = time.time()
            try:
                refs[family] = compute_references(torch, args, family, low, work)
                print(f"reference {family}: {time.time() - start:.1f} s "
                      + " ".join(f"b{b}: " + " ".join(f"torch {p} {fmt_err(e.get('torch_' + p + '_error'))}" for p in low)
                                 for b, e in refs[family]["batches"].items()), flush=True)
            except Exception as e:  # noqa: BLE001
                refs[family] = {"error": f"{type(e).__name__}: {e}"[-1200:]}
                print(f"reference {family}: FAILED {refs[family]['error'][:300]}", flush=True)
                traceback.print_exc()

    done = []
    json_path, md_path = os.path.join(out_dir, "gpu_models.json"), os.path.join(out_dir, "gpu_models.md")

    def save():
        ordered = sorted(done, key=lambda c: ((gc.FAMILY_ORDER + gc.ZOO_ORDER).index(c["family"]), c["exporter"], c["export_dtype"],
                                              c["batch"], c["precision"]))
        gc.write_json(json_path, {"environment": env, "elapsed_s": time.time() - t_start, "cases": ordered})
        with open(md_path, "w") as f:
            f.write(markdown(ordered, env, args))

    # Runs, one at a time on the GPU, in the order compiles finish.
    for fut in cf.as_completed(compiled):
        case = compiled[fut]
        try:
            fut.result()
        except Exception as e:  # noqa: BLE001
            case.update(status="error", message=f"{type(e).__name__}: {e}"[-800:])
        if "status" not in case:
            try:
                run_case(case, args, refs, work, out_dir, t_start)
            except Exception as e:  # noqa: BLE001  (one case failing never stops the others)
                traceback.print_exc()
                case.update(status="error", message=f"{type(e).__name__}: {e}"[-800:])
        done.append(case)
        print(row_text(case), flush=True)
        save()
    compile_pool.shutdown()
    export_pool.shutdown()
    save()
    print(f"\nwrote {json_path} and {md_path} ({time.time() - t_start:.0f} s)")
    passed = sum(1 for c in done if c["status"] == "pass")
    not_exported = sum(1 for c in done if c["status"] == "no export")
    print((f"{passed} of {len(done)} cases passed" + (f", {not_exported} not exported (fp16 exporter limits)"
                                                      if not_exported else "")) if not args.compile_only else
          f"{sum(1 for c in done if c['status'] == 'compiled')} of {len(done)} cases compiled")
    if args.compile_only:
        return 0 if all(c["status"] in ("compiled", "no export") for c in done) else 1
    return 0 if passed + not_exported == len(done) else 1


def run_case(case, args, refs, work, out_dir, t_start):
    if args.compile_only:
        case["status"] = "compiled"
        return
    if time.time() - t_start > args.budget_s:
        case.update(status="skipped", message=f"--budget-s {args.budget_s:.0f} s used up")
        return
    family, batch, precision = case["family"], case["batch"], case["precision"]
    ref_entry = refs.get(family, {})
    if "error" in ref_entry:
        case.update(status="error", message="PyTorch reference failed: " + ref_entry["error"])
        return
    if case["export"].get("fingerprint") != ref_entry.get("fingerprint"):
        case.update(status="error", message="the export's weights differ from the reference model's (fingerprint)")
        return
    entry = ref_entry["batches"][batch]
    if not set_bound(case, entry, precision):
        return
    inputs = entry["inputs_fp16"] if case["export_dtype"] == "fp16" else entry["inputs"]
    produced = run_and_compare(args, case, inputs, entry["ref"], work, out_dir)
    if produced is None:
        return
    output_file, outputs = produced
    ok = case["status"] == "pass"
    if not args.keep and ok:
        for f in (output_file, os.path.join(outputs, "outputs.json"), case["program"]):
            try:
                os.remove(f)
            except OSError:
                pass


def add_common_options(ap, compile_timeout, budget_s):
    """The options gpu_models.py and gpu_dynamic_models.py share."""
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cpu: dry run, Baton compiled for the CPU and PyTorch on the CPU")
    ap.add_argument("--gpu", type=int, default=0,
                    help="the GPU Baton's programs are built for and run on (cuda:N; PyTorch's "
                         "reference stays on its default GPU)")
    ap.add_argument("--small", action="store_true", help="small configurations (export_real_models.py's)")
    ap.add_argument("--compile-only", action="store_true", help="compile and inspect, run nothing")
    ap.add_argument("--arch", default="", help="baton compile --arch (with --compile-only on a host without a GPU)")
    ap.add_argument("--jobs", type=int, default=8, help="parallel exports and parallel compiles")
    ap.add_argument("--compile-timeout", type=int, default=compile_timeout)
    ap.add_argument("--run-timeout", type=int, default=180)
    ap.add_argument("--budget-s", type=float, default=budget_s, help="start no new run after this many seconds")
    ap.add_argument("--keep", action="store_true", help="keep programs and outputs under --work")
    ap.add_argument("--commit", default="COMMIT", help="the Baton commit the binary was built from")


def make_dirs(args):
    """--out (with logs/) and --work (onnx/, inputs/, programs/, outputs/), as absolute paths."""
    out_dir, work = os.path.abspath(args.out), os.path.abspath(args.work)
    for d in (out_dir, os.path.join(out_dir, "logs"), work, os.path.join(work, "onnx"), os.path.join(work, "inputs"),
              os.path.join(work, "programs"), os.path.join(work, "outputs")):
        os.makedirs(d, exist_ok=True)
    return out_dir, work


def torch_and_environment(args, tool):
    """PyTorch, with TF32 off for a GPU reference (exits when no GPU is visible), and the run's
    environment record."""
    import torch
    if args.device == "cuda" and not args.compile_only:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        if not torch.cuda.is_available():
            sys.exit(f"{tool}: no CUDA device visible to PyTorch (use --device cpu for a dry run)")
    env = gc.environment(torch, "none (compile only)" if args.compile_only else args.device)
    env.update({"baton": os.path.abspath(args.baton), "small": args.small, "metric": "relative L2 (tests' relative_error)",
                "fp32_bound": FP32_BOUND, "low_precision_bound": f"{LOW_PRECISION_FACTOR} x PyTorch's own error",
                "tf32": False, "commit": args.commit})
    return torch, env


def set_bound(case, entry, precision):
    """The case's bound: FP32_BOUND, or LOW_PRECISION_FACTOR x PyTorch's own error in
    `precision` on the reference entry's inputs. False (the case marked an error) when PyTorch's
    low-precision run failed."""
    if precision == "fp32":
        case["bound"] = FP32_BOUND
        return True
    torch_err = entry.get(f"torch_{precision}_error")
    if torch_err is None:
        case.update(status="error", message=f"PyTorch {precision} failed: " + entry.get(f"torch_{precision}_failure", "?"))
        return False
    case["torch_error"] = torch_err
    case["torch_max_error"] = entry.get(f"torch_{precision}_max_error")
    case["bound"] = LOW_PRECISION_FACTOR * torch_err
    return True


def run_and_compare(args, case, inputs, ref, work, out_dir):
    """`baton run` of case["program"] on `inputs` ([(name, .npy file)]), its output against `ref`:
    records run_s, error_l2, error_max, output_shape and status ("pass", "fail" with the reason and
    examine_failure's reruns, or "error"). Returns (output file, output folder), or None when the
    run gave no output."""
    outputs = os.path.join(work, "outputs", case["name"])
    cmd = [args.baton, "run", case["program"], "-o", outputs, "-n", "1", "--warmup", "0", "-q"]
    cmd += gc.input_args(inputs)
    rc, seconds, text = gc.run_cmd(cmd, args.run_timeout, os.path.join(out_dir, "logs", case["name"] + ".run.log"))
    case["run_s"] = seconds
    if rc != 0:
        case.update(status="error", message=("run timed out: " if rc is None else "run failed: ") + gc.tail(text, 1200))
        return None
    try:
        output_file = gc.baton_output_file(outputs)
        got = np.load(output_file)
    except Exception as e:  # noqa: BLE001
        case.update(status="error", message=f"no output: {e}")
        return None
    case["error_l2"] = gc.relative_error(got, ref)
    case["error_max"] = gc.max_relative_error(got, ref)
    case["output_shape"] = list(got.shape)
    ok = case["error_l2"] <= case["bound"]
    case["status"] = "pass" if ok else "fail"
    if not ok:
        case["message"] = f"relative L2 error {case['error_l2']:.3e} > bound {case['bound']:.3e}"
        if got.shape != ref.shape:
            case["message"] += f" (shape {list(got.shape)} vs {list(ref.shape)})"
        examine_failure(args, case, cmd, outputs, ref, out_dir)
    return output_file, outputs


def examine_failure(args, case, cmd, outputs, ref, out_dir):
    """A case over its bound: the same program run twice more (a wrong program gives the same
    error each time; a run that goes wrong only sometimes does not), its steps and recorded
    choices (`baton inspect`) in logs/, and the program and output kept under --work."""
    reruns = []
    for k in (1, 2):
        again = outputs + f".rerun{k}"
        rerun_cmd = cmd[:cmd.index("-o")] + ["-o", again] + cmd[cmd.index("-o") + 2:]
        rc, _, text = gc.run_cmd(rerun_cmd, args.run_timeout,
                                 os.path.join(out_dir, "logs", case["name"] + f".rerun{k}.log"))
        try:
            reruns.append(gc.relative_error(np.load(gc.baton_output_file(again)), ref) if rc == 0 else None)
        except Exception:  # noqa: BLE001
            reruns.append(None)
    case["rerun_errors"] = reruns
    gc.run_cmd([args.baton, "inspect", case["program"]], args.run_timeout,
               os.path.join(out_dir, "logs", case["name"] + ".inspect.log"))
    case["message"] += ("; reruns of the same program: "
                        + ", ".join("failed" if e is None else f"{e:.3e}" for e in reruns)
                        + f"; program kept at {case['program']}, its steps in logs/{case['name']}.inspect.log")


if __name__ == "__main__":
    sys.exit(main())
