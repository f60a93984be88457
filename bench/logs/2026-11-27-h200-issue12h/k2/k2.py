# c1's failing program rebuilt: torchscript17 ResNet-50 b1 compiled as gpu_models.py does, then its
# cuDNN choices replaced by the failing program's (tools/debug/patch_choices.py), all at once and
# one step at a time; errors against PyTorch fp32; compute-sanitizer on the failing one.
import os, subprocess, sys, concurrent.futures as cf
import numpy as np
sys.path.insert(0, "bench")
import gpu_common as gc
import torch
torch.backends.cudnn.allow_tf32 = False; torch.backends.cuda.matmul.allow_tf32 = False
B, L, INSPECT = sys.argv[1], sys.argv[2], sys.argv[3]
W = "/tmp/k2"; os.makedirs(W, exist_ok=True)
onnx = f"{W}/torchscript17_resnet.onnx"
if not os.path.exists(onnx):
    r = gc.export_job("resnet", "torchscript17", 1, True, onnx, 8, f"{L}/export.log")
    sys.__stdout__.write(f"export: {r.get('ok')}\n")
m, xs, names = gc.build("resnet", True, 1)
X = f"{W}/input.npy"; np.save(X, xs[0].numpy())
with torch.inference_mode():
    ref = m.cuda()(xs[0].cuda()).float().cpu().numpy()
BOUND = 1.82e-3
def say(s): sys.__stdout__.write(s + "\n"); sys.__stdout__.flush()
def compile_(p, env={}):
    return subprocess.run([B, "compile", onnx, "-o", p, "--shape", "input=1x3x224x224", "--device", "cuda:0", "--precision", "fp16", "-q"], capture_output=True, text=True, env=dict(os.environ, **env)).returncode
def run(p, tag, pre=[]):
    out = f"{W}/out-{tag}"
    r = subprocess.run(pre + [B, "run", p, "--no-checksums", "-o", out, "-n", "1", "--warmup", "0", "-q", "--input", f"input={X}"], capture_output=True, text=True)
    if r.returncode: return float("nan"), r.stdout[-2000:] + r.stderr[-2000:]
    return gc.relative_error(np.load(gc.baton_output_file(out)), ref), r.stdout[-3000:] + r.stderr[-3000:]
p0 = f"{W}/p0.baton"; say(f"compile p0: rc {compile_(p0)}")
say("p0 as compiled: " + " ".join(f"{run(p0, f'p0-{k}')[0]:.2e}" for k in range(2)))
subprocess.run([B, "inspect", p0], stdout=open(f"{L}/p0.inspect.txt", "w"))
bad = f"{W}/bad.baton"
say(subprocess.run([sys.executable, "tools/debug/patch_choices.py", p0, INSPECT, bad], capture_output=True, text=True).stdout.strip())
say("all failing choices: " + " ".join(f"{run(bad, f'bad-{k}')[0]:.2e}" for k in range(3)))
subprocess.run([B, "inspect", bad, "--no-checksums"], stdout=open(f"{L}/bad.inspect.txt", "w"))
import re
steps = sorted(int(s) for s in re.findall(r"step (\d+): conv cuDNN", open(INSPECT).read()))
def one(s):
    p = f"{W}/s{s}.baton"
    subprocess.run([sys.executable, "tools/debug/patch_choices.py", p0, INSPECT, p, "--steps", str(s)], capture_output=True)
    e = [run(p, f"s{s}-{k}")[0] for k in range(2)]
    return s, e
with cf.ThreadPoolExecutor(8) as ex:
    res = list(ex.map(one, steps))
for s, e in res:
    say(f"step {s:>2} alone: " + " ".join(f"{x:.2e}" for x in e) + ("  <-- over" if max(e) > BOUND else ""))
guilty = [s for s, e in res if max(e) > BOUND]
target = f"{W}/s{guilty[0]}.baton" if guilty else bad
for tool in ("memcheck", "initcheck", "racecheck"):
    e, text = run(target, f"san-{tool}", ["timeout", "150", "compute-sanitizer", "--tool", tool, "--print-limit", "20"])
    open(f"{L}/sanitizer-{tool}.txt", "w").write(text)
    say(f"compute-sanitizer {tool} on {os.path.basename(target)}: err {e:.2e}; " + " | ".join(l for l in text.splitlines() if "ERROR SUMMARY" in l or "Error" in l)[:400])
