# Step 5's plan is wrong only inside the engine's CUDA graph (k3). Which switch makes the rebuilt
# program right: serialized programmatic edges (BATON_CUDA_GRAPH_EDGES=full) or a workspace per
# cuDNN step (BATON_CUDA_STEP_WORKSPACES=1)? And how many programmatic edges the graph has.
import os, subprocess, sys
import numpy as np
sys.path.insert(0, "bench")
import gpu_common as gc
import torch
torch.backends.cudnn.allow_tf32 = False; torch.backends.cuda.matmul.allow_tf32 = False
B, L, INSPECT = sys.argv[1], sys.argv[2], sys.argv[3]
W = "/tmp/k2"; os.makedirs(W, exist_ok=True)
onnx = "/tmp/bgm/onnx/torchscript17_resnet.onnx"  # call.sh runs gpu_models.py first
def say(s): os.write(2, (s + "\n").encode())
m, xs, names = gc.build("resnet", True, 1)
X = f"{W}/input.npy"; np.save(X, xs[0].numpy())
with torch.inference_mode():
    ref = m.cuda()(xs[0].cuda()).float().cpu().numpy()
p0 = "/tmp/bgm/programs/torchscript17_resnet_b1_fp16.baton"

s5 = p0

def run(p, tag, env={}):
    out = f"{W}/out-{tag}"
    r = subprocess.run([B, "run", p, "--no-checksums", "-o", out, "-n", "1", "--warmup", "0", "--input", f"input={X}"], capture_output=True, text=True, env=dict(os.environ, **env))
    edges = [l for l in (r.stdout + r.stderr).splitlines() if "programmatic edges" in l]
    if r.returncode: return float("nan"), (r.stdout + r.stderr)[-400:]
    return gc.relative_error(np.load(gc.baton_output_file(out)), ref), " ".join(edges)[-200:]
for tag, env in [("default", {}), ("edges-full", {"BATON_CUDA_GRAPH_EDGES": "full"}),
                 ("step-workspaces", {"BATON_CUDA_STEP_WORKSPACES": "1"}),
                 ("pdl0", {"BATON_CUDA_PDL": "0"}), ("pdl0+edges-full", {"BATON_CUDA_PDL": "0", "BATON_CUDA_GRAPH_EDGES": "full"})]:
    res = [run(s5, f"{tag}-{k}", dict(env, BATON_LOG_LEVEL="debug")) for k in range(3)]
    say(f"{tag:>16}: " + " ".join(f"{e:.2e}" for e, _ in res) + "   " + res[0][1])
say("p0 edges: %.2e %s" % run(p0, "p0", {"BATON_LOG_LEVEL": "debug"}))
