# Correctness of an edge mode on the failing case of issue 12 (a fresh torchscript17 ResNet-50
# fp16 b1 compile with step 5's plan replaced by the one that went wrong with the libraries' edges
# kept), run with -q (the graph's output), 3 runs per mode; then fresh compiles run under the
# mode. Errors: relative L2 against PyTorch fp32 (bound 1.82e-3).
#   python3 edges.py BATON INSPECT ONNX MODE[,MODE...] FRESH
import os, subprocess, sys
import numpy as np
sys.path.insert(0, "bench")
import gpu_common as gc
import torch
torch.backends.cudnn.allow_tf32 = False; torch.backends.cuda.matmul.allow_tf32 = False
B, INSPECT, onnx, MODES, FRESH = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(","), int(sys.argv[5])
W = "/tmp/edges"; os.makedirs(W, exist_ok=True)
def say(s): os.write(2, (s + "\n").encode())
m, xs, names = gc.build("resnet", True, 1)
X = f"{W}/input.npy"; np.save(X, xs[0].numpy())
with torch.inference_mode():
    ref = m.cuda()(xs[0].cuda()).float().cpu().numpy()
def compile_(p):
    return subprocess.run([B, "compile", onnx, "-o", p, "--shape", "input=1x3x224x224", "--device", "cuda:0", "--precision", "fp16", "-q"]).returncode
def run(p, tag, env):
    out = f"{W}/out-{tag}"
    r = subprocess.run([B, "run", p, "--no-checksums", "-o", out, "-n", "1", "--warmup", "0", "-q", "--input", f"input={X}"], capture_output=True, text=True, env=dict(os.environ, **env))
    if r.returncode: return float("nan")
    return gc.relative_error(np.load(gc.baton_output_file(out)), ref)
p0 = f"{W}/p0.baton"; say("compile p0: rc %d" % compile_(p0))
s5 = f"{W}/s5.baton"
say(subprocess.run([sys.executable, "tools/debug/patch_choices.py", p0, INSPECT, s5, "--steps", "5"], capture_output=True, text=True).stdout.strip())
for mode in MODES:
    env = {"BATON_CUDA_GRAPH_EDGES": mode}
    say(f"step-5 plan {mode:>10}: " + " ".join(f"{run(s5, f'{mode}-{k}', env):.2e}" for k in range(3)))
for i in range(FRESH):
    p = f"{W}/fresh{i}.baton"; rc = compile_(p)
    say(f"fresh compile {i} (rc {rc}): " + "  ".join(f"{mode} {run(p, f'fresh{i}-{mode}', {'BATON_CUDA_GRAPH_EDGES': mode}):.2e}" for mode in MODES))
