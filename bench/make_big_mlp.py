#!/usr/bin/env python3
"""Writes an MLP ONNX model whose weights total about --megabytes MB (float32, random), for
measuring program load time (bench/load_bench.cpp, docs/format.md):

    python3 bench/make_big_mlp.py /tmp/big.onnx --megabytes 128
    baton compile /tmp/big.onnx -o /tmp/big.baton
    baton_load_bench /tmp/big.baton --runs 21
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("output")
    parser.add_argument("--megabytes", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=1)
    args = parser.parse_args()
    h = args.hidden
    layers = max(1, round(args.megabytes * 1e6 / (4 * h * h)))
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    x = "x"
    for i in range(layers):
        w = (rng.standard_normal((h, h), dtype=np.float32) / np.sqrt(h)).astype(np.float32)
        b = np.zeros(h, dtype=np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        y = f"h{i}" if i + 1 < layers else "y"
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [f"g{i}"], name=f"fc{i}"))
        nodes.append(helper.make_node("Relu", [f"g{i}"], [y], name=f"relu{i}"))
        x = y
    graph = helper.make_graph(
        nodes, "big_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [args.batch, h])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [args.batch, h])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, args.output)
    print(f"{args.output}: {layers} layers of {h}x{h}, {layers * 4 * h * h / 1e6:.0f} MB of weights")


if __name__ == "__main__":
    main()
