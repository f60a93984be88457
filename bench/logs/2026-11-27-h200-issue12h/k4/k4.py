# k3 again with the check run captured in a CUDA graph (bundle 7d...): the rebuilt program, then whether the compile-time check now rejects that plan for that step
# (every plan checked: BATON_TUNE_CANDIDATES=32, BATON_LOG_LEVEL=debug).
import os, subprocess, sys
import numpy as np
sys.path.insert(0, "bench")
import gpu_common as gc
import torch
torch.backends.cudnn.allow_tf32 = False; torch.backends.cuda.matmul.allow_tf32 = False
B, L, INSPECT = sys.argv[1], sys.argv[2], sys.argv[3]
W = "/tmp/k2"; os.makedirs(W, exist_ok=True)
onnx = "/tmp/bgm/onnx/torchscript17_resnet.onnx"  # gpu_models.py exported it (call.sh runs it first)
def say(s): os.write(2, (s + "\n").encode())
if not os.path.exists(onnx):
    import concurrent.futures as cf, multiprocessing as mp
    with cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:  # it takes over fds 1, 2
        r = ex.submit(gc.export_job, "resnet", "torchscript17", 1, True, onnx, 8, f"{L}/export.log").result()
    say(f"export: {r.get('ok')}")
m, xs, names = gc.build("resnet", True, 1)
X = f"{W}/input.npy"; np.save(X, xs[0].numpy())
with torch.inference_mode():
    ref = m.cuda()(xs[0].cuda()).float().cpu().numpy()
def compile_(p, env={}, log=None):
    return subprocess.run([B, "compile", onnx, "-o", p, "--shape", "input=1x3x224x224", "--device", "cuda:0", "--precision", "fp16"], stdout=open(log, "w") if log else subprocess.DEVNULL, stderr=subprocess.STDOUT, env=dict(os.environ, **env)).returncode
def run(p, tag, env={}):
    out = f"{W}/out-{tag}"
    r = subprocess.run([B, "run", p, "--no-checksums", "-o", out, "-n", "1", "--warmup", "0", "-q", "--input", f"input={X}"], capture_output=True, text=True, env=dict(os.environ, **env))
    if r.returncode: return float("nan")
    return gc.relative_error(np.load(gc.baton_output_file(out)), ref)
p0 = f"{W}/k4-p0.baton"; say(f"compile p0: rc {compile_(p0)}")
s5 = f"{W}/k4-s5.baton"
say(subprocess.run([sys.executable, "tools/debug/patch_choices.py", p0, INSPECT, s5, "--steps", "5"], capture_output=True, text=True).stdout.strip())
for tag, env in [("p0", None), ("default", {}), ("graphs0", {"BATON_CUDA_GRAPHS": "0"})]:
    prog = p0 if env is None else s5
    say(f"{tag:>18}: " + " ".join(f"{run(prog, f'{tag}-{k}', env or {}):.2e}" for k in range(3)))
log = f"{L}/plans-ts-resnet-b1.log"
rc = compile_(f"{W}/k4-all.baton", {"BATON_LOG_LEVEL": "debug", "BATON_TUNE_CANDIDATES": "32"}, log)
text = open(log).read()
say(f"compile with every plan checked: rc {rc}; {text.count('cuDNN plan')} plan lines, {text.count(', rejected')} rejected")
for line in text.splitlines():
    if "step 5:" in line and "cuDNN plan" in line: say("  " + line[:300])
    elif "rejected for" in line: say("  " + line[:300])
say("as checked: " + " ".join(f"{run(f'{W}/k4-all.baton', f'all-{k}'):.2e}" for k in range(3)))
