#!/usr/bin/env python3
"""Finds the first node whose output differs between Baton and onnxruntime (CPU).

Every intermediate float value of MODEL becomes a graph output (which also makes it a partition
output, so fusions across it are cut), Baton runs the result with the given compile flags, and
each value is compared with onnxruntime's in graph order. Needs onnx, onnxruntime and numpy.

  first_divergence.py MODEL.onnx --baton BIN/baton [--shape NAME=DxD] [--input FILE.npy]...
      [--compile-arg=--device=cuda:0 ...] [--rtol 1e-3] [--work DIR]
"""
import argparse, os, subprocess, sys, tempfile
import numpy as np
import onnx
import onnxruntime as ort

p = argparse.ArgumentParser()
p.add_argument("model")
p.add_argument("--baton", required=True)
p.add_argument("--input", action="append", default=[])
p.add_argument("--compile-arg", action="append", default=[])
p.add_argument("--tol", type=float, default=1e-3)
p.add_argument("--work", default=None)
p.add_argument("--show", type=int, default=8)
a = p.parse_args()
work = a.work or tempfile.mkdtemp()
os.makedirs(work, exist_ok=True)
m = onnx.load(a.model)
m = onnx.shape_inference.infer_shapes(m)
types = {vi.name: vi.type.tensor_type.elem_type for vi in list(m.graph.value_info) + list(m.graph.output)}
existing = {o.name for o in m.graph.output}
names = []
for n in m.graph.node:
    for o in n.output:
        if o and o not in existing and types.get(o) == onnx.TensorProto.FLOAT:
            names.append((n.name or n.op_type, n.op_type, o))
for _, _, o in names:
    m.graph.output.append(onnx.helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None))
path = os.path.join(work, "all_outputs.onnx")
onnx.save(m, path)
sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
feeds = {}
for i, inp in enumerate(sess.get_inputs()):
    feeds[inp.name] = np.load(a.input[i])
ref = sess.run(None, feeds)
prog = os.path.join(work, "prog.baton")
subprocess.run([a.baton, "compile", path, "-o", prog, "-q"] + a.compile_arg, check=True)
outdir = os.path.join(work, "out")
cmd = [a.baton, "run", prog, "-n", "1", "--warmup", "0", "-q", "-o", outdir]
for f in a.input:
    cmd += ["--input", f]
subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
outs = [o.name for o in m.graph.output]
node_of = {o: (n, t) for n, t, o in names}
shown = 0
for i, name in enumerate(outs):
    got = np.load(os.path.join(outdir, f"output_{i}.npy")).astype(np.float64)
    want = np.asarray(ref[i], dtype=np.float64)
    if got.shape != want.shape:
        print(f"{name}: shape {got.shape} vs {want.shape}")
        continue
    scale = max(np.abs(want).max(), 1e-30)
    err = np.abs(got - want).max() / scale
    n, t = node_of.get(name, ("(graph output)", ""))
    flag = "  <-- differs" if err > a.tol else ""
    if err > a.tol or shown < 0:
        print(f"{i:4d} {t:20s} {n:40s} {name:30s} err {err:.3g}{flag}")
        shown += 1
        if shown >= a.show:
            break
print(f"checked {len(outs)} values")
