# The plans cuDNN offers for ResNet-50's fp16 convolutions (dynamo18 export, batch 1), every one
# timed and checked against the reference plan (BATON_TUNE_CANDIDATES=32, BATON_LOG_LEVEL=debug).
import os, subprocess, sys
sys.path.insert(0, "bench")
import gpu_common as gc
B, L = sys.argv[1], sys.argv[2]
os.makedirs("/tmp/diag", exist_ok=True)
for batch in (1, 32):
    onnx = f"/tmp/diag/dynamo18_resnet_b{batch}.onnx"
    if not os.path.exists(onnx):
        r = gc.export_job("resnet", "dynamo18", batch, True, onnx, 8, f"{L}/export-b{batch}.log")
        sys.__stdout__.write(f"export b{batch}: {r.get('ok')}\n")
    env = dict(os.environ, BATON_LOG_LEVEL="debug", BATON_TUNE_CANDIDATES="32")
    with open(f"{L}/plans-resnet-b{batch}.log", "w") as f:
        rc = subprocess.run([B, "compile", onnx, "-o", f"/tmp/diag/r{batch}.baton", "--device", "cuda:0",
                             "--precision", "fp16"], env=env, stdout=f, stderr=subprocess.STDOUT, timeout=240).returncode
    sys.__stdout__.write(f"compile b{batch}: rc {rc}\n")
