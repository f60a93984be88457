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
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=2)
    for c in cases:
        print(f"{c['name']}: opset {c['opset']}, onnxruntime vs torch {c['onnxruntime_vs_torch']:.2e}")


if __name__ == "__main__":
    main()
