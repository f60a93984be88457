# The kept failing program: run it again under settings, errors against PyTorch fp32.
import os, subprocess, sys
import numpy as np
sys.path.insert(0, "bench")
import gpu_common as gc
import torch
torch.backends.cudnn.allow_tf32 = False; torch.backends.cuda.matmul.allow_tf32 = False
B, L = sys.argv[1], sys.argv[2]
P = "/tmp/bgm/programs/torchscript17_resnet_b1_fp16.baton"
X = "/tmp/bgm/inputs/resnet_b1.input.npy"
m, xs, names = gc.build("resnet", True, 1)
x = np.load(X)
with torch.inference_mode():
    ref = m.cuda()(torch.from_numpy(x).cuda()).float().cpu().numpy()
print("names", names, "input", x.shape, x.dtype, flush=True)
def run(tag, env={}, extra=[], n=4):
    errs = []
    for k in range(n):
        out = f"/tmp/k1-{tag}-{k}"
        r = subprocess.run([B, "run", P, "-o", out, "-n", "1", "--warmup", "0", "-q", "--input", f"{names[0]}={X}"] + extra, capture_output=True, text=True, env=dict(os.environ, **env))
        if r.returncode: print(tag, "rc", r.returncode, r.stderr[-300:]); break
        errs.append(gc.relative_error(np.load(gc.baton_output_file(out)), ref))
    print(f"{tag:>12}: " + " ".join(f"{e:.2e}" for e in errs), flush=True)
run("default")
run("nopdl", {"BATON_CUDA_PDL": "0"})
run("blocking", {"CUDA_LAUNCH_BLOCKING": "1"})
run("warm10", extra=["-n", "3", "--warmup", "10"])
run("deviceio", extra=["--device-io"])
subprocess.run([B, "inspect", P], stdout=open(f"{L}/inspect.txt", "w"))
