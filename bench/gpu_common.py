"""Helpers shared by bench/gpu_models.py and bench/gpu_bench.py (not a script).

The model families, their random weights and inputs, and the exporter workarounds come from
tests/e2e/export_real_models.py (imported, not copied).
"""
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))

import export_real_models as erm  # noqa: E402  (the families, SEED, export_onnx)

FAMILY_ORDER = ["resnet", "mobilenet", "squeezenet", "vit", "bert", "gpt2"]
# Issue 38's zoo (export_real_models.ZOO): only where --only names them.
ZOO_ORDER = ["densenet", "regnet", "swin", "efficientnet", "convnext", "whisper", "unet"]
DISPLAY = {"resnet": "ResNet-50", "mobilenet": "MobileNetV3-Large", "squeezenet": "SqueezeNet 1.1",
           "vit": "ViT-B/16", "bert": "BERT-base seq 128", "gpt2": "GPT-2 small seq 128",
           "mlp": "MLP 4x(4096->4096, GELU)", "densenet": "DenseNet-121", "regnet": "RegNetY-400MF",
           "swin": "Swin-T", "efficientnet": "EfficientNet-B0", "convnext": "ConvNeXt-T",
           "whisper": "Whisper-base encoder", "unet": "UNet (64 wide, 4 levels)"}
# exporter style -> (dynamo, opset)
EXPORTERS = {"torchscript17": (False, 17), "dynamo18": (True, 18)}


def kernel_profile(call, calls, top=12):
    """The CUDA kernels of one `call()` (torch.profiler over `calls` calls, copies and memsets left
    out): {"count": kernels per call, "ms": their summed duration per call, "top": the largest by
    total time, each {"name", "per_call", "us"} per call}."""
    import collections
    import torch
    from torch.profiler import ProfilerActivity, profile
    with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    totals = collections.defaultdict(lambda: [0, 0.0])
    count, total_us = 0, 0.0
    for e in prof.events():
        name = e.name.lower()
        if e.device_type != torch.autograd.DeviceType.CUDA or "memcpy" in name or "memset" in name:
            continue
        us = e.device_time if hasattr(e, "device_time") else e.cuda_time
        count += 1
        total_us += us
        totals[e.name][0] += 1
        totals[e.name][1] += us
    largest = sorted(totals.items(), key=lambda kv: -kv[1][1])[:top]
    return {"count": count / calls, "ms": total_us / calls / 1e3,
            "top": [{"name": k[:120], "per_call": v[0] / calls, "us": v[1] / calls} for k, v in largest]}


def split_list(text):
    return [x for x in (text or "").split(",") if x]


def mlp(full, batch=8):
    """bench/mlp_bench.py's MLP, 4 x (Linear 4096->4096, GELU) (small: 2 x 256), fp32."""
    import torch
    from mlp_bench import Mlp
    model = Mlp() if full else Mlp(width=256, layers=2)
    width = model.net[0].in_features
    x = torch.randn(batch, width, generator=torch.Generator().manual_seed(erm.SEED))
    return model.eval(), (x,), ["input"]


def build(family, full, batch):
    """The family's model (eval, random weights from erm.SEED) and its inputs at this batch."""
    import torch
    torch.manual_seed(erm.SEED)
    if family == "mlp":
        return mlp(full, batch)
    return erm.ALL_FAMILIES[family](full, batch)


def onnx_name(family, exporter, batch, dtype="fp32"):
    # TorchScript exports keep a symbolic batch: one file serves every batch.
    stem = f"{exporter}_{family}" + ("" if dtype == "fp32" else f"_{dtype}")
    return f"{stem}.onnx" if not EXPORTERS[exporter][0] else f"{stem}_b{batch}.onnx"


def to_dtype(torch, inputs, dtype):
    """The inputs with floating ones cast to `dtype` ("fp32" or "fp16"); integer ones unchanged."""
    if dtype == "fp32":
        return tuple(inputs)
    dt = {"fp16": torch.float16}[dtype]
    return tuple(t.to(dt) if t.is_floating_point() else t for t in inputs)


def log_to(log_path, torch, threads):
    """In a spawned export process: torch on `threads` threads, and the process's stdout and
    stderr (the exporters' chatter) into log_path."""
    torch.set_num_threads(threads)
    sys.stdout.flush()
    sys.stderr.flush()
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)


def compile_into(entry, args, path, program, extra, log_path, slots):
    """`baton compile path -o program EXTRA` for args.device (cuda:args.gpu at entry's precision,
    with args.arch if given, or the CPU), at most as many at once as `slots` lets through; records
    compile_s, compile_cmd and inspect_stats in `entry`, or status "error" and the log's tail."""
    cmd = [args.baton, "compile", path, "-o", program] + extra
    if args.device == "cuda":
        cmd += ["--device", "cuda:%d" % args.gpu, "--precision", entry["precision"]]
        if args.arch:
            cmd += ["--arch", args.arch]
    else:
        cmd += ["--device", "cpu"]
    with slots:
        rc, seconds, text = run_cmd(cmd, args.compile_timeout, log_path)
    entry["compile_s"] = seconds
    entry["compile_cmd"] = " ".join(cmd)
    if rc != 0:
        entry.update(status="error", message=("compile timed out: " if rc is None else
                                              "compile failed: ") + tail(text, 1200))
        return entry
    entry.update(inspect_stats(args.baton, program))
    return entry


def export_job(family, exporter, batch, full, path, threads, log_path, dtype="fp32"):
    """Runs in a spawned process: build the family from the seed, export it (dtype "fp16":
    model.half() and fp16 inputs, exported on the CPU), return the fingerprint of its fp32
    weights, the --shape values and the time taken. The exporters' chatter goes to log_path."""
    import torch
    log_to(log_path, torch, threads)
    start = time.time()
    try:
        model, inputs, names = build(family, full, batch)
        weights = fingerprint(model)
        if dtype != "fp32":
            model, inputs = model.half(), to_dtype(torch, inputs, dtype)
        dynamo, opset = EXPORTERS[exporter]
        shapes = erm.export_onnx(path + ".part", model, inputs, names, dynamo, opset)
        if dtype != "fp32":
            # The TorchScript exporter writes fp16 BERT with float32 LayerNorm inputs, which
            # onnxruntime and the ONNX checker refuse too: an exporter failure, not Baton's.
            import onnx
            try:
                onnx.checker.check_model(path + ".part", full_check=True)
            except Exception as e:  # noqa: BLE001
                raise ValueError(f"wrote invalid ONNX (onnx.checker: {e})") from e
        os.replace(path + ".part", path)
        meta = {"ok": True, "fingerprint": weights, "shapes": shapes, "names": names,
                "export_batch": batch, "export_dtype": dtype, "export_s": time.time() - start}
    except Exception as e:  # noqa: BLE001  (reported per case)
        meta = {"ok": False, "error": f"{type(e).__name__}: {e}"[-1500:], "export_s": time.time() - start}
    write_json(path + ".json", meta)
    return meta


def fingerprint(model):
    """SHA-1 of every parameter and buffer: the export and the reference must use the same
    weights (both are rebuilt from the same seed, in different processes)."""
    h = hashlib.sha1()
    for name, t in model.state_dict().items():
        h.update(name.encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def relative_error(got, ref):
    """The tests' metric (tests/testing/random.cpp relative_error): ||got - ref||_2 / ||ref||_2,
    infinity on a shape or NaN-pattern mismatch."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape or (np.isnan(got) != np.isnan(ref)).any():
        return float("inf")
    got, ref = np.nan_to_num(got), np.nan_to_num(ref)
    den = float(np.sqrt(np.sum(ref * ref)))
    num = float(np.sqrt(np.sum((got - ref) ** 2)))
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / den


def max_relative_error(got, ref):
    """max |got - ref| / max |ref| (reported beside the L2 metric, not used for pass/fail)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape or (np.isnan(got) != np.isnan(ref)).any():
        return float("inf")
    den = float(np.nanmax(np.abs(ref)))
    num = float(np.nanmax(np.abs(got - ref)))
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / den


def shape_args(shapes):
    out = []
    for name, dims in (shapes or {}).items():
        out += ["--shape", f"{name}=" + "x".join(str(d) for d in dims)]
    return out


def run_cmd(cmd, timeout, log_path=None):
    """Runs a command; returns (returncode or None on timeout, seconds, combined output)."""
    start = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        rc, text = p.returncode, (p.stdout or "") + (p.stderr or "")
    except OSError as e:  # the binary is missing or not executable
        rc, text = -1, f"cannot run {cmd[0]}: {type(e).__name__}: {e}"
    except subprocess.TimeoutExpired as e:
        rc = None
        text = ((e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""))
        text += f"\n[timed out after {timeout} s]"
    seconds = time.time() - start
    if log_path:
        with open(log_path, "w") as f:
            f.write(" ".join(cmd) + "\n" + text)
    return rc, seconds, text


def tail(text, n=600):
    text = (text or "").strip()
    return text[-n:]


def inspect_stats(baton, program, timeout=120):
    """What remains on the CPU: the program's CPU kernel instructions (by op), delegates, copies."""
    rc, _, text = run_cmd([baton, "inspect", program, "--json"], timeout)
    if rc != 0:
        return {"inspect_error": tail(text, 300)}
    j = json.loads(text[text.index("{"):])
    m = j["methods"][0]
    ops = {}
    for x in m["instructions"]:
        if x["kind"] == "kernel":
            ops[x["op"]] = ops.get(x["op"], 0) + 1
    return {"cpu_kernels": sum(ops.values()), "cpu_kernel_ops": dict(sorted(ops.items(), key=lambda kv: -kv[1])),
            "delegates": len(m["delegates"]),
            "copies": sum(1 for x in m["instructions"] if x["kind"] == "copy"),
            "instructions": len(m["instructions"]), "program_bytes": j.get("file_size")}


# Durations are printed in ms, or in us under 0.1 ms (tools/baton/run_common.cpp, duration_text).
_D = r"([\d.]+) (ms|us)"
LATENCY_RE = re.compile(r"latency over (\d+) runs? \(after (\d+) warm-up\): min " + _D + r"\s+median " + _D +
                        r"\s+p90 " + _D + r"\s+p99 " + _D)
GPU_STEP_RE = re.compile(r"\(GPU " + _D + r"\)")
GRAPH_KERNELS_RE = re.compile(r"^delegate \d+: .*\bgraph_kernels=(\d+)", re.M)


def _ms(value, unit):
    return float(value) / (1000.0 if unit == "us" else 1.0)


def baton_compile(baton, onnx, program, shapes, device_args, timeout, log_path):
    """`baton compile ONNX -o PROGRAM` with fixed input shapes and the device options given; the
    program, compile time and command, then the inspect stats or an "error"."""
    cmd = [baton, "compile", onnx, "-o", program] + shape_args(shapes) + list(device_args)
    rc, seconds, text = run_cmd(cmd, timeout, log_path)
    r = {"program": program, "compile_s": seconds, "compile_cmd": shlex.join(cmd)}
    if rc != 0:
        r["error"] = ("compile timed out: " if rc is None else "compile failed: ") + tail(text, 1000)
    else:
        r.update(inspect_stats(baton, program))
    return r


def input_args(inputs):
    """`--input NAME=FILE` for each (name, file)."""
    out = []
    for name, f in inputs:
        out += ["--input", f"{name}={f}"]
    return out


def baton_output_file(out_dir, index=0):
    """The file `baton run -o OUT_DIR` wrote output `index` to: OUT_DIR/outputs.json names it
    (output_<i>_<name>.npy, docs/cli.md)."""
    with open(os.path.join(out_dir, "outputs.json")) as f:
        return json.load(f)["outputs"][index]["file"]


def parse_baton_run(text):
    """The latency line `baton run` prints (tools/baton/cmd_run.cpp), and the sum of the per-
    instruction GPU medians when it printed them (not with -q)."""
    m = LATENCY_RE.search(text)
    if not m:
        return None
    out = {"iterations": int(m.group(1)), "warmup": int(m.group(2)), "min_ms": _ms(m.group(3), m.group(4)),
           "median_ms": _ms(m.group(5), m.group(6)), "p90_ms": _ms(m.group(7), m.group(8)),
           "p99_ms": _ms(m.group(9), m.group(10))}
    gpu = [_ms(v, u) for v, u in GPU_STEP_RE.findall(text)]
    if gpu:
        out["gpu_sum_of_step_medians_ms"] = sum(gpu)
    # Each GPU partition's counters line: its CUDA graph's kernel nodes (what one call launches).
    kernels = [int(k) for k in GRAPH_KERNELS_RE.findall(text)]
    if kernels:
        out["gpu_kernels"] = sum(kernels)
    return out


def environment(torch, device):
    env = {"torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
           "device": device, "hostname": os.uname().nodename, "cpus": os.cpu_count()}
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0)
        try:
            env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=30).stdout.strip()
        except Exception:  # noqa: BLE001
            pass
    else:
        env["gpu"] = "none (CPU dry run)" if device == "cpu" else device
    try:
        import transformers
        import torchvision
        env["torchvision"], env["transformers"] = torchvision.__version__, transformers.__version__
    except Exception:  # noqa: BLE001
        pass
    return env


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=2, default=str)
    os.replace(tmp, path)
