# The fix (BATON_CUDA_GRAPH_EDGES=own, now the default) on the failing case: a fresh compile of
# torchscript17 ResNet-50 fp16 b1 with step 5's plan replaced by the one that failed in the graph
# (tools/debug/patch_choices.py), run with -q (the graph's output) under each edge mode; then
# fresh compiles, each checked in the graph by default. Errors: relative L2 against PyTorch fp32.
import os, subprocess, sys
import numpy as np
sys.path.insert(0, "bench")
import gpu_common as gc
import torch
torch.backends.cudnn.allow_tf32 = False; torch.backends.cuda.matmul.allow_tf32 = False
B, INSPECT, FRESH = sys.argv[1], sys.argv[2], int(sys.argv[3])
W = "/tmp/k8"; os.makedirs(W, exist_ok=True)
onnx = "/tmp/k8/torchscript17_resnet.onnx"  # call.sh exports it first
def say(s): os.write(2, (s + "\n").encode())
m, xs, names = gc.build("resnet", True, 1)
X = f"{W}/input.npy"; np.save(X, xs[0].numpy())
with torch.inference_mode():
    ref = m.cuda()(xs[0].cuda()).float().cpu().numpy()
def compile_(p):
    return subprocess.run([B, "compile", onnx, "-o", p, "--shape", "input=1x3x224x224", "--device", "cuda:0", "--precision", "fp16", "-q"]).returncode
def run(p, tag, env={}):
    out = f"{W}/out-{tag}"
    r = subprocess.run([B, "run", p, "--no-checksums", "-o", out, "-n", "1", "--warmup", "0", "-q", "--input", f"input={X}"], capture_output=True, text=True, env=dict(os.environ, **env))
    edges = [l for l in (r.stdout + r.stderr).splitlines() if "programmatic edges" in l]
    if r.returncode: return float("nan"), (r.stdout + r.stderr)[-400:]
    return gc.relative_error(np.load(gc.baton_output_file(out)), ref), " ".join(edges)[-200:]
p0 = f"{W}/p0.baton"
say("compile p0: rc %d" % compile_(p0))
s5 = f"{W}/s5.baton"
say(subprocess.run([sys.executable, "tools/debug/patch_choices.py", p0, INSPECT, s5, "--steps", "5"], capture_output=True, text=True).stdout.strip())
for tag, env in [("default", {}), ("captured", {"BATON_CUDA_GRAPH_EDGES": "captured"}),
                 ("full", {"BATON_CUDA_GRAPH_EDGES": "full"}), ("graphs-off", {"BATON_CUDA_GRAPHS": "0"})]:
    res = [run(s5, f"{tag}-{k}", dict(env, BATON_LOG_LEVEL="debug")) for k in range(3)]
    say(f"step-5 plan {tag:>10}: " + " ".join(f"{e:.2e}" for e, _ in res) + "   " + res[0][1])
say("p0 default: %.2e %s" % run(p0, "p0", {"BATON_LOG_LEVEL": "debug"}))
for i in range(FRESH):
    p = f"{W}/fresh{i}.baton"
    rc = compile_(p)
    res = [run(p, f"fresh{i}-{k}") for k in range(2)]
    say(f"fresh compile {i}: rc {rc}, " + " ".join(f"{e:.2e}" for e, _ in res))
