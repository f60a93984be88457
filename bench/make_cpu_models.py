#!/usr/bin/env python3
"""Writes small models for bench/cpu_bench.py that need no PyTorch (a machine with numpy and onnx
only): a BERT-like encoder (2 layers, hidden 256, 4 heads, FFN 1024, sequence 64, the exporters'
op pattern: MatMul + Add, Reshape/Transpose heads, scaled Softmax attention, LayerNormalization,
GELU as its erf chain) and an MLP (4 x Linear 1024 + Relu, batch 8). Random weights scaled so
activations stay O(1). Writes OUT/manifest.json, OUT/CASE.onnx, OUT/CASE.input_0.npy.

    python3 bench/make_cpu_models.py /tmp/cpu_models
    python3 bench/cpu_bench.py /tmp/cpu_models --baton build/tools/baton/baton \\
        --bench build/bench/baton_bench --threads 1,2
"""
import argparse
import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, prefix):
        self.n += 1
        return f"{prefix}_{self.n}"

    def const(self, array, prefix="c"):
        name = self.name(prefix)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op, inputs, **attrs):
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def linear(self, x, n_in, n_out):
        w = (self.rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32)
        b = (self.rng.standard_normal(n_out) * 0.1).astype(np.float32)
        return self.op("Add", [self.op("MatMul", [x, self.const(w, "w")]), self.const(b, "b")])

    def layer_norm(self, x, n):
        g = (1 + 0.1 * self.rng.standard_normal(n)).astype(np.float32)
        b = (0.1 * self.rng.standard_normal(n)).astype(np.float32)
        return self.op("LayerNormalization", [x, self.const(g, "g"), self.const(b, "beta")], axis=-1,
                       epsilon=1e-12)

    def gelu(self, x):
        erf = self.op("Erf", [self.op("Div", [x, self.const(np.float32(1.4142135))])])
        half = self.op("Mul", [x, self.const(np.float32(0.5))])
        return self.op("Mul", [half, self.op("Add", [erf, self.const(np.float32(1.0))])])


def bert(seq=64, hidden=256, heads=4, ffn=1024, layers=2):
    b = Builder(1)
    d = hidden // heads
    x = "input"
    for _ in range(layers):
        def heads_of(t):
            r = b.op("Reshape", [t, b.const(np.array([1, seq, heads, d], np.int64))])
            return b.op("Transpose", [r], perm=[0, 2, 1, 3])
        q, k, v = (heads_of(b.linear(x, hidden, hidden)) for _ in range(3))
        kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
        scores = b.op("Div", [b.op("MatMul", [q, kt]), b.const(np.float32(np.sqrt(d)))])
        ctx = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])
        ctx = b.op("Reshape", [b.op("Transpose", [ctx], perm=[0, 2, 1, 3]),
                               b.const(np.array([1, seq, hidden], np.int64))])
        x = b.layer_norm(b.op("Add", [b.linear(ctx, hidden, hidden), x]), hidden)
        ff = b.linear(b.gelu(b.linear(x, hidden, ffn)), ffn, hidden)
        x = b.layer_norm(b.op("Add", [ff, x]), hidden)
    b.nodes[-1].output[0] = "output"
    return b, [1, seq, hidden], [1, seq, hidden]


def mlp(batch=8, width=1024, layers=4):
    b = Builder(2)
    x = "input"
    for _ in range(layers):
        x = b.op("Relu", [b.linear(x, width, width)])
    b.nodes[-1].output[0] = "output"
    return b, [batch, width], [batch, width]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cases = []
    for name, make in (("bert_small", bert), ("mlp_1024", mlp)):
        b, in_shape, out_shape = make()
        graph = helper.make_graph(b.nodes, name,
                                  [helper.make_tensor_value_info("input", TensorProto.FLOAT, in_shape)],
                                  [helper.make_tensor_value_info("output", TensorProto.FLOAT, out_shape)],
                                  b.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        onnx.checker.check_model(model, full_check=True)
        onnx.save(model, os.path.join(args.out, f"{name}.onnx"))
        x = np.random.default_rng(3).standard_normal(in_shape).astype(np.float32)
        np.save(os.path.join(args.out, f"{name}.input_0.npy"), x)
        cases.append({"name": name, "model": f"{name}.onnx", "inputs": ["input"]})
        print(f"wrote {name}.onnx ({len(b.nodes)} nodes)")
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=2)


if __name__ == "__main__":
    main()
