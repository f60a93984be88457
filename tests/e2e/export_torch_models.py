#!/usr/bin/env python3
"""Exports small MLPs with torch.onnx.export (both exporters) and records onnxruntime's outputs.

Usage (on a host with torch, onnxscript and onnxruntime; the GPU host has them):
  python3 tests/e2e/export_torch_models.py OUT_DIR

Writes OUT_DIR/{manifest.json, CASE.onnx, CASE.input_0.npy, CASE.output_0.npy}. The results are
committed under tests/e2e/models/ so CI (which has no torch) checks Baton against real exports.
"""
import json
import os
import sys

import numpy as np
import onnxruntime as ort
import torch


class Mlp(torch.nn.Module):
    def __init__(self, dims, act):
        super().__init__()
        layers = []
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
            layers.append(torch.nn.Linear(a, b))
            if i + 2 < len(dims):
                layers.append(torch.nn.GELU() if act == "gelu" else torch.nn.ReLU())
        self.net = torch.nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def export(out_dir, name, model, x, dynamo, opset, dynamic_batch):
    path = os.path.join(out_dir, name + ".onnx")
    kwargs = dict(input_names=["input"], output_names=["output"], opset_version=opset)
    if dynamo:
        torch.onnx.export(model, (x,), path, dynamo=True, external_data=False, **kwargs)
    else:
        if dynamic_batch:
            kwargs["dynamic_axes"] = {"input": {0: "batch"}, "output": {0: "batch"}}
        torch.onnx.export(model, (x,), path, dynamo=False, **kwargs)
    xs = x.numpy()
    np.save(os.path.join(out_dir, f"{name}.input_0.npy"), xs)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (out,) = sess.run(None, {sess.get_inputs()[0].name: xs})
    np.save(os.path.join(out_dir, f"{name}.output_0.npy"), out)
    with torch.no_grad():
        torch_out = model(x).numpy()
    err = float(np.linalg.norm(out - torch_out) / np.linalg.norm(torch_out))
    return {
        "name": name,
        "model": name + ".onnx",
        "inputs": ["input"],
        "outputs": 1,
        "shapes": {"input": list(x.shape)} if (dynamic_batch and not dynamo) else {},
        "tolerance": 1e-5,
        "exporter": "dynamo" if dynamo else "torchscript",
        "opset": opset,
        "torch": torch.__version__,
        "onnxruntime_vs_torch": err,
    }


def export_fp16(out_dir, name, model, x, dynamo, opset):
    """model.half() exported: float16 weights, input and output. onnxruntime's CPU provider has no
    float16 MatMul, so the reference is PyTorch in float32 on the same (float16-rounded) weights
    and input; the tolerance is twice PyTorch's own float16 error against it (DESIGN.md §8)."""
    path = os.path.join(out_dir, name + ".onnx")
    half = model.half().eval()
    xh = x.half()
    kwargs = dict(input_names=["input"], output_names=["output"], opset_version=opset)
    if dynamo:
        torch.onnx.export(half, (xh,), path, dynamo=True, external_data=False, **kwargs)
    else:
        torch.onnx.export(half, (xh,), path, dynamo=False, **kwargs)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.no_grad():
        ref = half.float().to(device)(xh.float().to(device)).cpu().numpy()
        fp16 = half.half().to(device)(xh.to(device)).float().cpu().numpy()
    torch_err = float(np.linalg.norm(fp16 - ref) / np.linalg.norm(ref))
    np.save(os.path.join(out_dir, f"{name}.input_0.npy"), xh.numpy())
    np.save(os.path.join(out_dir, f"{name}.output_0.npy"), ref.astype(np.float32))
    return {
        "name": name,
        "model": name + ".onnx",
        "inputs": ["input"],
        "outputs": 1,
        "shapes": {},
        "tolerance": max(2 * torch_err, 1e-4),
        "exporter": "dynamo" if dynamo else "torchscript",
        "opset": opset,
        "torch": torch.__version__,
        "torch_fp16_vs_fp32": torch_err,
        "reference": f"torch float32 on {device}",
    }


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(2026)
    cases = []
    for act in ("gelu", "relu"):
        model = Mlp([48, 96, 96, 24], act).eval()
        x = torch.randn(8, 48)
        cases.append(export(out_dir, f"torchscript17_mlp_{act}", model, x, False, 17, True))
        cases.append(export(out_dir, f"dynamo18_mlp_{act}", model, x, True, 18, False))
    model = Mlp([33, 65, 17], "gelu").eval()
    x = torch.randn(5, 33)
    cases.append(export(out_dir, "dynamo20_mlp_gelu_odd", model, x, True, 20, False))
    # Exported after model.half().
    for dynamo, opset in ((False, 17), (True, 18)):
        model = Mlp([48, 96, 96, 24], "gelu").eval()
        x = torch.randn(8, 48)
        prefix = "dynamo18" if dynamo else "torchscript17"
        cases.append(export_fp16(out_dir, f"{prefix}_mlp_gelu_fp16", model, x, dynamo, opset))
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=2)
    for c in cases:
        err = c.get("onnxruntime_vs_torch", c.get("torch_fp16_vs_fp32"))
        print(f"{c['name']}: opset {c['opset']}, reference error {err:.2e}")


if __name__ == "__main__":
    main()
