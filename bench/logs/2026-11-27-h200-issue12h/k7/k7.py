# k5 again with -q: without it `baton run` ends with profiled runs, launched without the graph,
# and writes their output (k5 and k6 passed for that reason). Which switch makes the graph run right?
# Also the program gpu_models.py kept, when its case failed.
import os, subprocess, sys
import numpy as np
sys.path.insert(0, "bench")
import gpu_common as gc
import torch
torch.backends.cudnn.allow_tf32 = False; torch.backends.cuda.matmul.allow_tf32 = False
B, L, INSPECT = sys.argv[1], sys.argv[2], sys.argv[3]
W = "/tmp/k2"; os.makedirs(W, exist_ok=True)
onnx = "/tmp/bgm/onnx/torchscript17_resnet.onnx"  # call.sh exports it first
def say(s): os.write(2, (s + "\n").encode())
m, xs, names = gc.build("resnet", True, 1)
X = f"{W}/input.npy"; np.save(X, xs[0].numpy())
with torch.inference_mode():
    ref = m.cuda()(xs[0].cuda()).float().cpu().numpy()
p0 = f"{W}/k5-p0.baton"
say("compile p0: rc %d" % subprocess.run([B, "compile", onnx, "-o", p0, "--shape", "input=1x3x224x224", "--device", "cuda:0", "--precision", "fp16", "-q"]).returncode)
s5 = f"{W}/k5-s5.baton"
say(subprocess.run([sys.executable, "tools/debug/patch_choices.py", p0, INSPECT, s5, "--steps", "5"], capture_output=True, text=True).stdout.strip())
def run(p, tag, env={}):
    out = f"{W}/out-{tag}"
    r = subprocess.run([B, "run", p, "--no-checksums", "-o", out, "-n", "1", "--warmup", "0", "-q", "--input", f"input={X}"], capture_output=True, text=True, env=dict(os.environ, **env))
    edges = [l for l in (r.stdout + r.stderr).splitlines() if "programmatic edges" in l]
    if r.returncode: return float("nan"), (r.stdout + r.stderr)[-400:]
    return gc.relative_error(np.load(gc.baton_output_file(out)), ref), " ".join(edges)[-200:]
for tag, env in [("default", {}), ("edges-full", {"BATON_CUDA_GRAPH_EDGES": "full"}),
                 ("edges-own", {"BATON_CUDA_GRAPH_EDGES": "own"}),
                 ("step-workspaces", {"BATON_CUDA_STEP_WORKSPACES": "1"}),
                 ("pdl0+edges-full", {"BATON_CUDA_PDL": "0", "BATON_CUDA_GRAPH_EDGES": "full"})]:
    res = [run(s5, f"{tag}-{k}", dict(env, BATON_LOG_LEVEL="debug")) for k in range(2)]
    say(f"{tag:>16}: " + " ".join(f"{e:.2e}" for e, _ in res) + "   " + res[0][1])
say("p0: %.2e %s" % run(p0, "p0", {"BATON_LOG_LEVEL": "debug"}))
K = "/tmp/bgm/programs/torchscript17_resnet_b1_fp16.baton"
if os.path.exists(K):
    for tag, env in [("kept", {}), ("kept-edges-full", {"BATON_CUDA_GRAPH_EDGES": "full"}), ("kept-edges-own", {"BATON_CUDA_GRAPH_EDGES": "own"}), ("kept-step-ws", {"BATON_CUDA_STEP_WORKSPACES": "1"})]:
        res = [run(K, f"{tag}-{k}", env) for k in range(2)]
        say(f"{tag:>16}: " + " ".join(f"{e:.2e}" for e, _ in res))
# What each edge mode costs: p0's latency (host I/O, so not the table's number; compare the modes).
import json as _json
for tag, env in [("default", {}), ("edges-own", {"BATON_CUDA_GRAPH_EDGES": "own"}), ("edges-full", {"BATON_CUDA_GRAPH_EDGES": "full"})] * 2:
    r = subprocess.run([B, "run", p0, "--no-checksums", "-n", "300", "--warmup", "30", "--profile-runs", "0", "--json", "--input", f"input={X}"], capture_output=True, text=True, env=dict(os.environ, **env))
    try:
        lat = _json.loads(r.stdout)["latency_ms"]
        say(f"latency {tag:>10}: median {lat['median']:.4f} ms  p90 {lat['p90']:.4f} ms")
    except Exception as e:  # noqa: BLE001
        say(f"latency {tag}: {e} {r.stderr[-300:]}")
