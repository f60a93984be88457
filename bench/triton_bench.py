"""Load test: Baton behind Triton against PyTorch behind Triton and Baton in-process (issue 40).

One invocation, one machine. For each model (ResNet-50, BERT-base; random weights, a dynamic
batch of 1..MAX_BATCH): exports it (torch.onnx.export, the dynamo exporter), compiles it with
`baton compile --dim batch=1..MAX_BATCH`, and serves it twice with the same Triton settings
(Python backend, dynamic batching with the same preferred sizes and queue delay, one instance
per GPU):

  baton-triton   the repository `baton triton-repo` writes
  torch-triton   a Python-backend model.py running the PyTorch model (fp16 on the GPU, under
                 torch.inference_mode), joining the batch's requests the same way
  baton-inproc   the same program run by `baton.load(...).run` in this process, one request at
                 a time (concurrency 1 only): what Triton's own overhead is measured against

Clients: tritonclient gRPC, one thread per concurrent client, each sending batch-1 requests in a
closed loop for --duration seconds after --warmup seconds; throughput (requests/s) and latency
p50/p99 per concurrency. Every server binds 127.0.0.1 on free ports and is stopped after its
model; every loop is bounded in time.

  python3 bench/triton_bench.py --baton BUILD/tools/baton/baton --work DIR --out R.json \\
      [--models resnet50,bert] [--device cuda:0] [--precision fp16] [--max-batch 32] \\
      [--concurrency 1,4,16,64] [--duration 10] [--warmup 3] [--queue-delay-us 200] \\
      [--runners baton-triton,torch-triton,baton-inproc]

Needs torch, torchvision, transformers, onnx, onnxscript, tritonclient[grpc], nvidia-pytriton
and the baton package (PYTHONPATH) built for this interpreter. `--models mlp --device cpu`
checks the script without torch's models (the torch runner is then left out).
"""
import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
T0 = time.time()


def log(msg):
    print(f"[{time.time() - T0:7.1f} s] {msg}", flush=True)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def site_of(module):
    return os.path.dirname(os.path.dirname(os.path.abspath(module.__file__)))


# --- models -------------------------------------------------------------------------------------

def build_torch(name):
    import torch
    torch.manual_seed(0)
    if name == "resnet50":
        import torchvision
        m = torchvision.models.resnet50()
        # Non-trivial BatchNorm statistics, so that outputs are O(1) and not a constant.
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.1, 0.1)
                mod.running_var.uniform_(0.5, 1.5)
        example = (torch.randn(1, 3, 224, 224),)
        names = (["input"], ["logits"])
    elif name == "bert":
        import transformers
        cfg = transformers.BertConfig(attn_implementation="eager")
        m = transformers.BertModel(cfg, add_pooling_layer=False)
        example = (torch.randint(0, cfg.vocab_size, (1, 128)), torch.ones(1, 128, dtype=torch.int64))
        names = (["input_ids", "attention_mask"], ["last_hidden_state"])
    else:
        raise SystemExit(f"no torch model '{name}'")
    return m.eval(), example, names


def export(name, path, max_batch):
    import torch
    model, example, (ins, outs) = build_torch(name)
    batch = torch.export.Dim("batch", min=1, max=max_batch)
    dynamic = tuple({0: batch} for _ in example)
    with torch.no_grad():
        torch.onnx.export(model, example, path, dynamo=True, opset_version=18, input_names=ins,
                          output_names=outs, dynamic_shapes=dynamic, optimize=True)
    return model


def mlp_onnx(path):
    """A small MLP (x [batch, 64] -> y [batch, 16]) for checking the script on a CPU."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.2).astype(np.float32), n)
             for n, s in (("w1", (64, 256)), ("w2", (256, 16)))]
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["y"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def sample_inputs(name, rng):
    """One request's inputs (batch 1), by input name."""
    if name == "resnet50":
        return {"input": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)}
    if name == "bert":
        return {"input_ids": rng.integers(0, 30522, (1, 128)).astype(np.int64),
                "attention_mask": np.ones((1, 128), np.int64)}
    return {"x": rng.standard_normal((1, 64)).astype(np.float32)}


TORCH_MODEL_PY = '''import json, os, sys
_HERE = os.path.dirname(os.path.abspath(__file__))
_S = json.load(open(os.path.join(_HERE, "settings.json")))
for p in reversed(_S["python_path"]):
    if p not in sys.path:
        sys.path.insert(0, p)
sys.path.insert(0, _S["repo"])
import numpy as np
import torch
import triton_python_backend_utils as pb_utils
sys.path.insert(0, os.path.join(_S["repo"], "bench"))
import triton_bench


class TritonPythonModel:
    def initialize(self, args):
        device_id = int(args.get("model_instance_device_id", "0"))
        self.device = "cpu" if _S["device"] == "cpu" else f"cuda:{device_id}"
        model, _, (self.inputs, self.outputs) = triton_bench.build_torch(_S["model"])
        model = model.to(self.device)
        if _S["precision"] == "fp16" and self.device != "cpu":
            model = model.half()
        self.model = model
        self.half = _S["precision"] == "fp16" and self.device != "cpu"

    def execute(self, requests):
        feeds = [[pb_utils.get_input_tensor_by_name(r, n).as_numpy() for n in self.inputs]
                 for r in requests]
        joined = [np.concatenate([f[k] for f in feeds], axis=0) for k in range(len(self.inputs))]
        with torch.inference_mode():
            args = []
            for a in joined:
                t = torch.from_numpy(a).to(self.device)
                if self.half and t.is_floating_point():
                    t = t.half()
                args.append(t)
            out = self.model(*args)
            out = out if isinstance(out, torch.Tensor) else out[0]
            out = out.float().cpu().numpy()
        responses, start = [], 0
        for f in feeds:
            rows = f[0].shape[0]
            responses.append(pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor(self.outputs[0], out[start:start + rows])]))
            start += rows
        return responses
'''


def torch_repo(repo, name, baton_config, device, precision):
    """The PyTorch model's repository: Baton's config.pbtxt with the name changed (the same
    inputs, outputs, batching and instances), and a model.py running torch."""
    import torch
    d = os.path.join(repo, "torch_" + name)
    os.makedirs(os.path.join(d, "1"), exist_ok=True)
    with open(baton_config) as f:
        config = f.read().replace(f'name: "{name}"', f'name: "torch_{name}"', 1)
    with open(os.path.join(d, "config.pbtxt"), "w") as f:
        f.write(config)
    with open(os.path.join(d, "1", "model.py"), "w") as f:
        f.write(TORCH_MODEL_PY)
    settings = {"python_path": [site_of(np), site_of(torch)], "repo": REPO, "model": name,
                "device": device, "precision": precision}
    with open(os.path.join(d, "1", "settings.json"), "w") as f:
        json.dump(settings, f)
    return "torch_" + name


# --- the server ---------------------------------------------------------------------------------

class Server:
    def __init__(self, repo, work, model):
        import importlib.util
        root = os.path.dirname(importlib.util.find_spec("pytriton").origin)
        server_dir = os.path.join(root, "tritonserver")
        libs = os.path.join(os.path.dirname(root), "nvidia_pytriton.libs")
        backends = os.path.join(work, "backends")
        if not os.path.exists(backends):
            shutil.copytree(os.path.join(server_dir, "backends", "python"),
                            os.path.join(backends, "python"))
            v = f"{sys.version_info.major}.{sys.version_info.minor}"
            shutil.copy(os.path.join(server_dir, "python_backend_stubs", v,
                                     "triton_python_backend_stub"),
                        os.path.join(backends, "python"))
        self.http_port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = libs + os.pathsep + env.get("LD_LIBRARY_PATH", "")
        self.log_path = os.path.join(work, f"tritonserver_{model}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [os.path.join(server_dir, "bin", "tritonserver"), "--model-repository", repo,
             "--backend-directory", backends, "--model-control-mode", "explicit",
             "--load-model", model, "--http-address", "127.0.0.1", "--http-port",
             str(self.http_port), "--grpc-address", "127.0.0.1", "--grpc-port",
             str(self.grpc_port), "--metrics-address", "127.0.0.1", "--metrics-port",
             str(self.metrics_port), "--exit-timeout-secs", "20"],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        import tritonclient.http as httpclient
        client = httpclient.InferenceServerClient(f"127.0.0.1:{self.http_port}")
        deadline = time.monotonic() + 600  # a full-size torch model loads for a while
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tritonserver exited:\n{self.tail()}")
            try:
                if client.is_model_ready(model):
                    client.close()
                    return
            except Exception:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"{model} was not ready in 600 s:\n{self.tail()}")

    def tail(self, n=30):
        self.log.flush()
        with open(self.log_path) as f:
            return "".join(f.readlines()[-n:])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()


# --- load ---------------------------------------------------------------------------------------

def load(port, model, name, concurrency, warmup, duration, output):
    """`concurrency` closed-loop gRPC clients sending batch-1 requests; per request latency (ms)
    of those that finished in the measured window, and the window."""
    import tritonclient.grpc as grpcclient
    latencies = [[] for _ in range(concurrency)]
    errors = []
    start = time.monotonic()
    measure_from, stop_at = start + warmup, start + warmup + duration

    def worker(k):
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
        rng = np.random.default_rng(k)
        feeds = sample_inputs(name, rng)
        inputs = []
        for n, a in feeds.items():
            i = grpcclient.InferInput(n, list(a.shape), "FP32" if a.dtype == np.float32 else "INT64")
            i.set_data_from_numpy(a)
            inputs.append(i)
        outs = [grpcclient.InferRequestedOutput(output)]
        while True:
            t = time.monotonic()
            if t >= stop_at:
                break
            try:
                client.infer(model, inputs, outputs=outs, client_timeout=60)
            except Exception as e:  # noqa: BLE001 (reported, and the run goes on)
                errors.append(str(e)[:200])
                break
            done = time.monotonic()
            if t >= measure_from and done <= stop_at:
                latencies[k].append((done - t) * 1e3)
        client.close()

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=warmup + duration + 90)
    flat = sorted(x for l in latencies for x in l)
    return summarize(flat, duration, errors)


def summarize(ms, window_s, errors=()):
    if not ms:
        return {"requests": 0, "errors": list(errors)[:3]}
    pick = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]
    return {"requests": len(ms), "throughput_per_s": len(ms) / window_s,
            "p50_ms": statistics.median(ms), "p99_ms": pick(0.99), "errors": list(errors)[:3]}


def inproc(program, name, warmup, duration, threads):
    import baton
    m = baton.load(program, threads=threads)
    feeds = sample_inputs(name, np.random.default_rng(0))
    ordered = [feeds[s.name] for s in m.inputs]
    start = time.monotonic()
    while time.monotonic() - start < warmup:
        m.run(*ordered)
    ms, start = [], time.monotonic()
    while time.monotonic() - start < duration:
        t = time.monotonic()
        m.run(*ordered)
        ms.append((time.monotonic() - t) * 1e3)
    return summarize(sorted(ms), duration)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--baton", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--models", default="resnet50,bert")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--precision", default="fp16")
    p.add_argument("--max-batch", type=int, default=32)
    p.add_argument("--concurrency", default="1,4,16,64")
    p.add_argument("--duration", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--queue-delay-us", type=int, default=200)
    p.add_argument("--runners", default="baton-triton,torch-triton,baton-inproc")
    a = p.parse_args()
    import baton
    os.makedirs(a.work, exist_ok=True)
    runners = a.runners.split(",")
    result = {"device": a.device, "precision": a.precision, "max_batch": a.max_batch,
              "duration_s": a.duration, "queue_delay_us": a.queue_delay_us, "models": {}}

    def save():
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)

    for name in a.models.split(","):
        r = result["models"][name] = {}
        onnx_path = os.path.join(a.work, f"{name}.onnx")
        if not os.path.exists(onnx_path):
            if name == "mlp":
                mlp_onnx(onnx_path)
            else:
                export(name, onnx_path, a.max_batch)
            log(f"{name}: exported")
        program = os.path.join(a.work, f"{name}_{a.precision}.baton")
        if not os.path.exists(program):
            cmd = [a.baton, "compile", onnx_path, "-o", program, "-q", "--dim",
                   f"batch=1..{a.max_batch}"]
            if a.device != "cpu":
                cmd += ["--device", a.device, "--precision", a.precision]
            subprocess.run(cmd, check=True)
            log(f"{name}: compiled")
        module = baton.load(program, threads=1)
        output = module.outputs[0].name.split("@")[0]
        del module
        repo = os.path.join(a.work, "repo")
        written = baton.triton_repo(program, repo, name=name, max_batch=a.max_batch,
                                    queue_delay_us=a.queue_delay_us, threads=1, overwrite=True)
        models = []
        if "baton-triton" in runners:
            models.append(("baton-triton", name))
        if "torch-triton" in runners and name != "mlp":
            models.append(("torch-triton", torch_repo(repo, name, os.path.join(
                written["model_dir"], "config.pbtxt"), a.device, a.precision)))
        for runner, model in models:
            server = Server(repo, a.work, model)
            try:
                r[runner] = {}
                for c in [int(x) for x in a.concurrency.split(",")]:
                    s = load(server.grpc_port, model, name, c, a.warmup, a.duration, output)
                    r[runner][str(c)] = s
                    log(f"{name} {runner} concurrency {c}: {s}")
                    save()
            finally:
                server.stop()
        if "baton-inproc" in runners:
            r["baton-inproc"] = {"1": inproc(program, name, a.warmup, a.duration,
                                             0 if a.device != "cpu" else 1)}
            log(f"{name} baton in-process: {r['baton-inproc']['1']}")
            save()
    save()
    log("done")


if __name__ == "__main__":
    main()
