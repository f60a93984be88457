# Reproduce c1's failing dynamo18 ResNet-50 fp16 program: compile it N times with the GPU under load
# (tuning sees contention, as in c1 where the suites ran beside it), then, with the GPU idle, run
# each program 3 times against PyTorch fp32 and print the errors and each program's choices.
import os, subprocess, sys, time, glob, json
import numpy as np
sys.path.insert(0, "bench")
import gpu_common as gc
import torch
torch.backends.cudnn.allow_tf32 = False; torch.backends.cuda.matmul.allow_tf32 = False
B, L, N = sys.argv[1], sys.argv[2], int(sys.argv[3])
onnx = "/tmp/bgm/onnx/dynamo18_resnet_b1.onnx"
if not os.path.exists(onnx):
    r = gc.export_job("resnet", "dynamo18", 1, True, onnx, 8, L + "/export.log"); print("export", r.get("ok"))
m, xs, names = gc.build("resnet", True, 1)
np.save("/tmp/e2-input.npy", xs[0].numpy())
with torch.inference_mode():
    ref = m.cuda()(xs[0].cuda()).float().cpu().numpy()
# the load: another process with matmuls and copies for the compiles' duration
load = subprocess.Popen([sys.executable, "-c", "import torch,time\na=torch.randn(4096,4096,device='cuda',dtype=torch.half)\nt=time.time()\nwhile time.time()-t<%d:\n  b=a@a; c=a.float().sum(); torch.cuda.synchronize()" % (12 * N)])
progs = [f"/tmp/e2-p{i}.baton" for i in range(N)]
J = int(os.environ.get("E2_JOBS", "1"))
for s0 in range(0, N, J):  # J compiles side by side (gpu_models.py in c1 ran 8), beside the load
    t = time.time()
    ps = [subprocess.Popen([B, "compile", onnx, "-o", progs[i], "--device", "cuda:0", "--precision", "fp16", "-q"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(s0, min(N, s0 + J))]
    for i, pr in zip(range(s0, N), ps):
        out = pr.communicate()[0]
        print(f"compile {i} under load: rc {pr.returncode} {time.time()-t:.1f} s {out.strip()[-160:]}", flush=True)
load.kill(); load.wait()
for i, p in enumerate(progs):
    errs = []
    for k in range(3):
        out = f"/tmp/e2-out{i}-{k}"
        subprocess.run([B, "run", p, "-o", out, "-n", "1", "--warmup", "0", "-q", "--input", "input=/tmp/e2-input.npy"], check=True, capture_output=True)
        errs.append(gc.relative_error(np.load(gc.baton_output_file(out)), ref))
    ins = subprocess.run([B, "inspect", p], capture_output=True, text=True).stdout
    open(f"{L}/inspect-p{i}.txt", "w").write(ins)
    if max(errs) > 1.82e-3:  # c1's bound: rerun without programmatic dependent launch
        for k in range(3):
            out = f"/tmp/e2-out{i}-nopdl{k}"
            subprocess.run([B, "run", p, "-o", out, "-n", "1", "--warmup", "0", "-q", "--input", "input=/tmp/e2-input.npy"], check=True, capture_output=True, env=dict(os.environ, BATON_CUDA_PDL="0"))
            errs.append(gc.relative_error(np.load(gc.baton_output_file(out)), ref))
    print(f"program {i}: errors " + " ".join(f"{e:.2e}" for e in errs), flush=True)
