#!/usr/bin/env python3
"""Dynamic programs of the six real model families on the GPU: one program per model and
precision, compiled with --dim ranges, run at five or more shapes each and compared with PyTorch
on the same GPU (issue 37 item 6, with issue 11's bounds).

On the GPU host, from the repository root, with a bundle at $B:
  python3 bench/gpu_dynamic_models.py --baton $B/bin/baton --out LOG/dynamic
      [--work /tmp/baton_gpu_dynamic_models] [--only resnet,bert] [--precisions fp32,fp16]
      [--exporters torchscript17,dynamo18dyn] [--models-from DIR] [--jobs 8] [--budget-s 520]
      [--image-batch 1..16] [--image-batches 1,3,8,13,16]
      [--text-batch 1..8] [--text-seq 1..256] [--text-shapes 1x16,2x77,8x128,3x200,8x256]
Locally, without a GPU (a dry run of the whole pipeline on small configurations):
  python3 bench/gpu_dynamic_models.py --baton build/tools/baton/baton --out /tmp/gdm --device cpu --small
Without a GPU, to see what the GPU compile makes of the dynamic models (compile + inspect only):
  python3 bench/gpu_dynamic_models.py --baton build/tools/baton/baton --out /tmp/gdm --compile-only --arch sm_90

For each family (tests/e2e/export_real_models.py's, as in bench/gpu_models.py: random weights
from its seed, full size unless --small) and exporter:
- torchscript17: the TorchScript exporter, opset 17, with symbolic `batch` (and `sequence`)
  dimensions (the same file as gpu_models.py's torchscript17 export, so its --work/onnx can be
  given to --models-from); dynamo18dyn: the dynamo exporter, opset 18, with torch.export
  dynamic shapes (Dim.DYNAMIC on batch and sequence, traced at batch 2), whose dim_params are
  torch's names (`s77`; text inputs `[s33, s50]` and `[s6, s50]` or `[s6, s81]`).
- The ONNX inputs' dim_params are mapped by position: axis 0 is the batch, axis 1 of a text
  input the sequence. The first name at an axis gets the range (--image-batch, or --text-batch
  and --text-seq; MIN..MAX or MIN..MAX@OPT), every other name there `--dim OTHER=FIRST` (the same
  dimension). `baton compile X.onnx -o X.baton --device cuda:N --precision P --dim ...` once per
  model and precision, --jobs at once, then `baton run X.baton --input NAME=FILE ... -o DIR -n 1
  --warmup 0 -q` of that one program at every shape, one run at a time on the GPU.
- Shapes: --image-batches (default 1,3,8,13,16), --text-shapes BxS (default 1x16,2x77,8x128,
  3x200,8x256; --small: 1x16,2x7,8x33,3x50,8x64 within 1..64, the small models' positions).
  Inputs are export_real_models.py's image_input / text_inputs at each shape (token ids, and an
  attention mask whose last quarter is padding).
- Metric and bounds are gpu_models.py's: relative L2 against the fp32 PyTorch model on the same
  GPU with TF32 off, max|a-b|/max|ref| beside it; fp32 passes at <= 1e-3, fp16 at <= 2 x the
  PyTorch fp16 model's own error at that shape.
- Also recorded per program: compile seconds, the CPU kernel instructions left (by op) and the
  delegates (GPU partitions) from `baton inspect --json`. A dynamic program is expected to be one
  GPU engine with no CPU kernel; that is reported, not judged.

--device cpu compiles for the CPU (every precision gives the same CPU program) and runs PyTorch
on the CPU: the pipeline without a GPU.

Writes OUT/gpu_dynamic_models.json (every case, one per model, precision and shape; rewritten
after each), OUT/gpu_dynamic_models.md (the table) and OUT/logs/. A case over its bound is run
twice more and its program kept, as in gpu_models.py. Exit status 0 only when every case passed.

Expected time on an H200 host with 16 CPUs (6 families x 2 exporters x 2 precisions = 24
compiles, 12 exports, 120 runs): about 6-9 minutes, most of it full-size dynamo exports, dynamic
compiles and the 120 program loads; --budget-s (default 520) stops starting runs after that many
seconds. Splitting by --only (the CNNs, then vit,bert,gpt2) halves each call; --models-from an
earlier call's --work/onnx skips the exports.
"""
import argparse
import concurrent.futures as cf
import copy
import glob
import json
import multiprocessing
import os
import site
import sys
import threading
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_common as gc  # noqa: E402
import gpu_models as gm  # noqa: E402  (bounds, torch dtypes, failure examination)

# exporter -> (dynamo, opset); both keep the batch (and sequence) symbolic.
EXPORTERS = {"torchscript17": (False, 17), "dynamo18dyn": (True, 18)}
TEXT_FAMILIES = ("bert", "gpt2")


# ---- exports ------------------------------------------------------------------------------


def onnx_name(family, exporter):
    return f"{exporter}_{family}.onnx"


def export_job(family, exporter, full, path, threads, log_path):
    """Runs in a spawned process. torchscript17 is gpu_models.py's export (symbolic batch and
    sequence); dynamo18dyn exports with torch.export dynamic shapes, traced at batch 2 (torch.export
    specializes a dimension of size 1). Returns gc.export_job's metadata."""
    if exporter == "torchscript17":
        return gc.export_job(family, exporter, 1, full, path, threads, log_path)
    import torch
    gc.log_to(log_path, torch, threads)
    start = time.time()
    try:
        model, inputs, names = gc.build(family, full, 2)
        dynamo, opset = EXPORTERS[exporter]
        shapes = gc.erm.export_onnx(path + ".part", model, inputs, names, dynamo, opset, dynamic=True)
        os.replace(path + ".part", path)
        meta = {"ok": True, "fingerprint": gc.fingerprint(model), "shapes": shapes, "names": names,
                "export_batch": 2, "export_dtype": "fp32", "export_s": time.time() - start}
    except Exception as e:  # noqa: BLE001  (reported per case)
        meta = {"ok": False, "error": f"{type(e).__name__}: {e}"[-1500:], "export_s": time.time() - start}
    gc.write_json(path + ".json", meta)
    return meta


def symbolic_inputs(path):
    """[(name, [dim_param or size, ...])] of the model's inputs (initializers left out)."""
    import onnx
    model = onnx.load(path, load_external_data=False)
    init = {i.name for i in model.graph.initializer}
    return [(i.name, [d.dim_param if d.dim_param else d.dim_value for d in i.type.tensor_type.shape.dim])
            for i in model.graph.input if i.name not in init]


def dim_flags(path, ranges):
    """--dim flags for the model's dim_params, by position: ranges maps an axis (0: batch, 1:
    sequence) to MIN..MAX[@OPT]; the first name at an axis gets the range, later ones alias it."""
    first, seen, flags = {}, set(), []
    for name, dims in symbolic_inputs(path):
        for axis, d in enumerate(dims):
            if not isinstance(d, str) or d in seen:
                continue
            seen.add(d)
            if axis not in ranges:
                raise ValueError(f"input {name} has symbolic dimension {d!r} at axis {axis}, which has no range here")
            if axis in first:
                flags += ["--dim", f"{d}={first[axis]}"]
            else:
                first[axis] = d
                flags += ["--dim", f"{d}={ranges[axis]}"]
    return flags


def parse_range(text):
    """MIN..MAX[@OPT] -> (MIN, MAX)."""
    lo, _, hi = text.split("@")[0].partition("..")
    return int(lo), int(hi)


# ---- references ---------------------------------------------------------------------------


def shape_label(shape):
    return "x".join(str(v) for v in shape)


def inputs_at(family, model, base, shape):
    """export_real_models.py's inputs of the family at this shape ((batch,) or (batch, sequence))."""
    if family in TEXT_FAMILIES:
        return gc.erm.text_inputs(shape[0], shape[1], model.model.config.vocab_size, len(base) > 1)
    return (gc.erm.image_input(shape[0], base[0].shape[-1]),)


def compute_references(torch, args, family, shapes, low_precisions, work):
    """PyTorch on args.device at each shape: the fp32 output (the reference) and the low-precision
    models' own errors against it; the inputs saved as .npy for baton run."""
    device = torch.device(args.device)
    model, base, names = gc.build(family, not args.small, 1)
    out = {"fingerprint": gc.fingerprint(model), "names": names, "shapes": {}}
    model = model.to(device)
    low_models = {}
    for p in low_precisions:
        try:
            low_models[p] = copy.deepcopy(model).to(gm.torch_dtype(torch, p))
        except Exception as e:  # noqa: BLE001
            low_models[p] = f"{type(e).__name__}: {e}"[-800:]
    for shape in shapes:
        label = shape_label(shape)
        inputs = inputs_at(family, model, base, shape)
        entry = {"inputs": []}
        for name, t in zip(names, inputs):
            f = os.path.join(work, "inputs", f"{family}_{label}.{name}.npy")
            np.save(f, t.numpy())
            entry["inputs"].append((name, f))
        start = time.time()
        with torch.inference_mode():
            entry["ref"] = model(*[t.to(device) for t in inputs]).float().cpu().numpy()
        entry["ref_s"] = time.time() - start
        for p, mp in low_models.items():
            if isinstance(mp, str):
                entry[f"torch_{p}_failure"] = mp
                continue
            try:
                dt = gm.torch_dtype(torch, p)
                xs = [t.to(device).to(dt) if t.is_floating_point() else t.to(device) for t in inputs]
                with torch.inference_mode():
                    y = mp(*xs).float().cpu().numpy()
                entry[f"torch_{p}_error"] = gc.relative_error(y, entry["ref"])
                entry[f"torch_{p}_max_error"] = gc.max_relative_error(y, entry["ref"])
            except Exception as e:  # noqa: BLE001
                entry[f"torch_{p}_failure"] = f"{type(e).__name__}: {e}"[-800:]
        out["shapes"][label] = entry
    del model, low_models
    if args.device == "cuda":
        torch.cuda.empty_cache()
    return out


# ---- report -------------------------------------------------------------------------------


def row_text(c):
    fe = gm.fmt_err
    return (f"{c['family']:10s} {c['exporter']:12s} {c['precision']:4s} {c['shape']:>7s} "
            f"err {fe(c.get('error_l2')):>8s} (max {fe(c.get('error_max')):>8s}) bound {fe(c.get('bound')):>8s}  "
            f"{c['status']:7s} compile {c.get('compile_s', 0):6.1f} s  cpu kernels {str(c.get('cpu_kernels', '—')):>4s}  "
            f"delegates {str(c.get('delegates', '—')):>3s}"
            + (f"  -- {c['message'][:160]}" if c.get("message") and c["status"] != "pass" else ""))


def markdown(cases, env, args):
    fe = gm.fmt_err
    lines = [f"Dynamic programs against PyTorch (`bench/gpu_dynamic_models.py`): {env.get('gpu')}, "
             f"torch {env.get('torch')}, {env.get('date')}, commit `{args.commit}`"
             + (" (SMALL configurations: a dry run)." if args.small else "."), "",
             "One program per model and precision, compiled with `--dim` ranges (images: batch "
             f"{args.image_batch}; text: batch {args.text_batch}, sequence {args.text_seq}), run at each shape. "
             "Error: relative L2 against PyTorch fp32 on the same device with TF32 off (max|a-b|/max|ref| "
             "in parentheses). Bound: fp32 1e-3; fp16 2 × PyTorch's own fp16 error at that shape. CPU "
             "kernels: instructions left on the CPU (top ops); delegates: GPU partitions.", "",
             "| model | exporter | precision | shape | Baton error (max) | bound | PyTorch fp16 error | result | compile s | CPU kernels | delegates |",
             "|---|---|---|---|---|---|---|---|---:|---|---:|"]
    for c in cases:
        lines.append(f"| {gc.DISPLAY.get(c['family'], c['family']).split(' seq')[0]} | {c['exporter']} | {c['precision']} | "
                     f"{c['shape']} | {fe(c.get('error_l2'))} ({fe(c.get('error_max'))}) | {fe(c.get('bound'))} | "
                     f"{fe(c.get('torch_error'))} | {gm.result_cell(c)} | {c.get('compile_s', 0):.1f} | "
                     f"{gm.kernels_cell(c)} | {c.get('delegates', '—')} |")
    lines += ["", gm.totals_line(cases)]
    return "\n".join(lines) + "\n"


def library_path(baton):
    """The bundle's lib/ and pip's NVIDIA libraries on LD_LIBRARY_PATH for the baton processes,
    as scripts/run_gpu_models.sh sets them."""
    paths = [os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(baton))), "lib")]
    for s in site.getsitepackages():
        paths += sorted(glob.glob(os.path.join(s, "nvidia", "*", "lib")))
    paths.append("/usr/local/cuda/lib64")
    have = os.environ.get("LD_LIBRARY_PATH", "")
    add = [p for p in paths if os.path.isdir(p) and p not in have.split(":")]
    if add:
        os.environ["LD_LIBRARY_PATH"] = ":".join(add + ([have] if have else []))


# ---- the run ------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baton", required=True, help="path of the baton CLI")
    ap.add_argument("--out", required=True, help="where JSON, markdown and logs go")
    ap.add_argument("--work", default="/tmp/baton_gpu_dynamic_models", help="ONNX files, programs, outputs")
    ap.add_argument("--only", default="", help="families, e.g. resnet,bert (default the six)")
    ap.add_argument("--precisions", default="fp32,fp16")
    ap.add_argument("--exporters", default="torchscript17,dynamo18dyn")
    ap.add_argument("--models-from", default="",
                    help="reuse ONNX exports from DIR (an earlier --work/onnx, or gpu_models.py's for torchscript17)")
    ap.add_argument("--image-batch", default="1..16", help="--dim range of the image models' batch")
    ap.add_argument("--image-batches", default="1,3,8,13,16", help="batches the image programs run at")
    ap.add_argument("--text-batch", default="1..8", help="--dim range of the text models' batch")
    ap.add_argument("--text-seq", default="", help="--dim range of the sequence (default 1..256; --small 1..64)")
    ap.add_argument("--text-shapes", default="",
                    help="BxS shapes the text programs run at (default 1x16,2x77,8x128,3x200,8x256; "
                         "--small 1x16,2x7,8x33,3x50,8x64)")
    gm.add_common_options(ap, compile_timeout=400, budget_s=520)
    args = ap.parse_args()
    t_start = time.time()
    families = [f for f in gc.FAMILY_ORDER if f in gc.split_list(args.only)] if args.only else list(gc.FAMILY_ORDER)
    precisions = gc.split_list(args.precisions)
    exporters = gc.split_list(args.exporters)
    for e in exporters:
        if e not in EXPORTERS:
            ap.error(f"unknown exporter {e} (known: {', '.join(EXPORTERS)})")
    for p in precisions:
        if p not in ("fp32", "fp16", "bf16"):
            ap.error(f"unknown precision {p}")
    args.text_seq = args.text_seq or ("1..64" if args.small else "1..256")
    args.text_shapes = args.text_shapes or ("1x16,2x7,8x33,3x50,8x64" if args.small else "1x16,2x77,8x128,3x200,8x256")
    image_shapes = [(int(b),) for b in gc.split_list(args.image_batches)]
    text_shapes = [tuple(int(v) for v in s.split("x")) for s in gc.split_list(args.text_shapes)]
    for shapes, ranges in ((image_shapes, [args.image_batch]), (text_shapes, [args.text_batch, args.text_seq])):
        for shape in shapes:
            if len(shape) != len(ranges) or any(not lo <= v <= hi for v, (lo, hi) in zip(shape, map(parse_range, ranges))):
                ap.error(f"shape {shape_label(shape)} is outside the ranges {' x '.join(ranges)}")
    out_dir, work = gm.make_dirs(args)
    library_path(args.baton)
    torch, env = gm.torch_and_environment(args, "gpu_dynamic_models")
    env.update({"image_batch": args.image_batch, "text_batch": args.text_batch, "text_seq": args.text_seq})
    print(f"gpu_dynamic_models: {env['gpu']}  torch {env['torch']}  families {','.join(families)}  precisions "
          f"{precisions}  exporters {exporters}  images {args.image_batch} at {args.image_batches}  text "
          f"{args.text_batch} x {args.text_seq} at {args.text_shapes}", flush=True)

    def shapes_of(family):
        return text_shapes if family in TEXT_FAMILIES else image_shapes

    # Exports, the slowest first (dynamo before TorchScript; the transformers before the CNNs).
    export_pool = cf.ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn"))
    threads = max(1, (os.cpu_count() or 2) // args.jobs)
    reuse = os.path.abspath(args.models_from) if args.models_from else ""
    slow = ["vit", "gpt2", "bert", "resnet", "mobilenet", "squeezenet"]
    exports = {}
    for family, exporter in sorted(((f, e) for f in families for e in exporters),
                                   key=lambda fe: (not EXPORTERS[fe[1]][0], slow.index(fe[0]))):
        name = onnx_name(family, exporter)
        if reuse and os.path.exists(os.path.join(reuse, name)) and os.path.exists(os.path.join(reuse, name + ".json")):
            f = cf.Future()
            meta = json.load(open(os.path.join(reuse, name + ".json")))
            meta["reused_from"] = reuse
            f.set_result(meta)
            exports[name] = (os.path.join(reuse, name), f)
            continue
        path = os.path.join(work, "onnx", name)
        exports[name] = (path, export_pool.submit(export_job, family, exporter, not args.small, path, threads,
                                                  os.path.join(out_dir, "logs", "export_" + name + ".log")))

    # One compile per (family, exporter, precision), as soon as its export is there.
    compile_slots = threading.Semaphore(args.jobs)
    programs = [{"family": f, "exporter": e, "precision": p, "name": f"{e}_{f}_{p}"}
                for f in families for e in exporters for p in precisions]

    def compile_program(prog):
        path, fut = exports[onnx_name(prog["family"], prog["exporter"])]
        meta = fut.result()
        prog["export"] = {k: v for k, v in meta.items() if k != "error"}
        if not meta.get("ok"):
            prog.update(status="error", message="export failed: " + meta.get("error", "?"))
            return prog
        ranges = {0: args.text_batch, 1: args.text_seq} if prog["family"] in TEXT_FAMILIES else {0: args.image_batch}
        try:
            dims = dim_flags(path, ranges)
        except Exception as e:  # noqa: BLE001
            prog.update(status="error", message=f"dims: {type(e).__name__}: {e}")
            return prog
        program = os.path.join(work, "programs", prog["name"] + ".baton")
        prog["program"] = program
        prog["dims"] = " ".join(dims)
        return gc.compile_into(prog, args, path, program, dims,
                               os.path.join(out_dir, "logs", prog["name"] + ".compile.log"),
                               compile_slots)

    compile_pool = cf.ThreadPoolExecutor(max_workers=len(programs) or 1)
    compiled = {compile_pool.submit(compile_program, p): p for p in programs}

    # References on the device while exports and compiles run.
    low = [p for p in precisions if p != "fp32"]
    refs = {}
    if not args.compile_only:
        for family in families:
            start = time.time()
            try:
                refs[family] = compute_references(torch, args, family, shapes_of(family), low, work)
                print(f"reference {family}: {time.time() - start:.1f} s "
                      + " ".join(f"{s}: " + " ".join(f"torch {p} {gm.fmt_err(e.get('torch_' + p + '_error'))}" for p in low)
                                 for s, e in refs[family]["shapes"].items()), flush=True)
            except Exception as e:  # noqa: BLE001
                refs[family] = {"error": f"{type(e).__name__}: {e}"[-1200:]}
                print(f"reference {family}: FAILED {refs[family]['error'][:300]}", flush=True)
                traceback.print_exc()

    done = []
    json_path, md_path = os.path.join(out_dir, "gpu_dynamic_models.json"), os.path.join(out_dir, "gpu_dynamic_models.md")
    program_keys = ("compile_s", "compile_cmd", "dims", "cpu_kernels", "cpu_kernel_ops", "delegates", "copies",
                    "instructions", "program_bytes", "inspect_error")

    def save():
        ordered = sorted(done, key=lambda c: (gc.FAMILY_ORDER.index(c["family"]), c["exporter"], c["precision"],
                                              c["shape_index"]))
        gc.write_json(json_path, {"environment": env, "elapsed_s": time.time() - t_start, "cases": ordered})
        with open(md_path, "w") as f:
            f.write(markdown(ordered, env, args))

    # Runs, one at a time on the device, each program at all its shapes, in the order compiles finish.
    for fut in cf.as_completed(compiled):
        prog = compiled[fut]
        try:
            fut.result()
        except Exception as e:  # noqa: BLE001
            prog.update(status="error", message=f"{type(e).__name__}: {e}"[-800:])
        all_passed = True
        for index, shape in enumerate(shapes_of(prog["family"])):
            label = shape_label(shape)
            case = {"family": prog["family"], "exporter": prog["exporter"], "precision": prog["precision"],
                    "shape": label, "shape_index": index, "name": f"{prog['name']}_{label}",
                    "program": prog.get("program")}
            case.update({k: prog[k] for k in program_keys if k in prog})
            if "status" in prog:
                case.update(status=prog["status"], message=prog.get("message", ""))
            else:
                try:
                    run_case(case, args, refs, work, out_dir, t_start, prog["export"])
                except Exception as e:  # noqa: BLE001  (one case failing never stops the others)
                    traceback.print_exc()
                    case.update(status="error", message=f"{type(e).__name__}: {e}"[-800:])
            all_passed = all_passed and case["status"] in ("pass", "compiled")
            done.append(case)
            print(row_text(case), flush=True)
            save()
        if all_passed and not args.keep and prog.get("program") and not args.compile_only:
            try:
                os.remove(prog["program"])
            except OSError:
                pass
    compile_pool.shutdown()
    export_pool.shutdown()
    save()
    print(f"\nwrote {json_path} and {md_path} ({time.time() - t_start:.0f} s)")
    if args.compile_only:
        n = sum(1 for c in done if c["status"] == "compiled")
        print(f"{n} of {len(done)} cases compiled")
        return 0 if n == len(done) else 1
    passed = sum(1 for c in done if c["status"] == "pass")
    print(f"{passed} of {len(done)} cases passed")
    return 0 if passed == len(done) else 1


def run_case(case, args, refs, work, out_dir, t_start, export_meta):
    if args.compile_only:
        case["status"] = "compiled"
        return
    if time.time() - t_start > args.budget_s:
        case.update(status="skipped", message=f"--budget-s {args.budget_s:.0f} s used up")
        return
    ref_entry = refs.get(case["family"], {})
    if "error" in ref_entry:
        case.update(status="error", message="PyTorch reference failed: " + ref_entry["error"])
        return
    if export_meta.get("fingerprint") != ref_entry.get("fingerprint"):
        case.update(status="error", message="the export's weights differ from the reference model's (fingerprint)")
        return
    entry = ref_entry["shapes"][case["shape"]]
    if not gm.set_bound(case, entry, case["precision"]):
        return
    produced = gm.run_and_compare(args, case, entry["inputs"], entry["ref"], work, out_dir)
    if produced is None:
        return
    output_file, outputs = produced
    if case["status"] == "pass" and not args.keep:
        for f in (output_file, os.path.join(outputs, "outputs.json")):
            try:
                os.remove(f)
            except OSError:
                pass
        try:
            os.rmdir(outputs)
        except OSError:
            pass


if __name__ == "__main__":
    sys.exit(main())
