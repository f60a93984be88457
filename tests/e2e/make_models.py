#!/usr/bin/env python3
"""Writes the end-to-end test models, random inputs and onnxruntime (CPU) reference outputs.

Usage: make_models.py OUT_DIR

For each case OUT_DIR gets CASE.onnx, CASE.input_<i>.npy, CASE.output_<i>.npy, and
OUT_DIR/manifest.json lists the cases with their inputs, any --shape overrides, and the relative
error bound. The models are built with onnx.helper in the shapes the two torch.onnx.export
exporters produce for the same modules:
  - TorchScript exporter (opset 17): Gemm(transB=1), Erf-based GELU (Div, Erf, Add, Mul, Mul),
    "/fc1/Gemm" node names, a symbolic batch dimension;
  - dynamo exporter (opset 18 and 20): MatMul + Add with pre-transposed weights, the Gelu op
    (opset 20), Constant nodes for shapes.
Real torch exports live in tests/e2e/models/ (made by tests/e2e/export_torch_models.py).
"""
import json
import math
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(20261122)


def weight(shape, scale=None):
    scale = scale if scale is not None else 1.0 / np.sqrt(shape[-1])
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def save(model, out_dir, name, inputs, shapes=None, tolerance=1e-5, opset=None):
    onnx.checker.check_model(model)
    path = os.path.join(out_dir, name + ".onnx")
    onnx.save(model, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = {}
    for i, (input_name, array) in enumerate(inputs):
        np.save(os.path.join(out_dir, f"{name}.input_{i}.npy"), array)
        feed[input_name] = array
    outputs = sess.run(None, feed)
    for i, out in enumerate(outputs):
        np.save(os.path.join(out_dir, f"{name}.output_{i}.npy"), out)
    return {
        "name": name,
        "model": name + ".onnx",
        "inputs": [n for n, _ in inputs],
        "outputs": len(outputs),
        "shapes": shapes or {},
        "tolerance": tolerance,
    }


def torchscript_mlp(batch, dims, activation="gelu"):
    """What torch.onnx.export(dynamo=False, opset_version=17) writes for Linear/GELU stacks."""
    nodes, inits = [], []
    x = "input"
    for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:])):
        w, b = f"fc{i + 1}.weight", f"fc{i + 1}.bias"
        inits += [numpy_helper.from_array(weight((d_out, d_in)), w),
                  numpy_helper.from_array(weight((d_out,), 0.1), b)]
        y = f"/fc{i + 1}/Gemm_output_0"
        nodes.append(helper.make_node("Gemm", [x, w, b], [y], name=f"/fc{i + 1}/Gemm",
                                      alpha=1.0, beta=1.0, transB=1))
        x = y
        if i + 2 == len(dims):
            break
        p = f"/act{i + 1}"
        if activation == "relu":
            nodes.append(helper.make_node("Relu", [x], [p + "/Relu_output_0"], name=p + "/Relu"))
            x = p + "/Relu_output_0"
            continue
        # GELU(x) = x * 0.5 * (1 + erf(x / sqrt(2))), as the TorchScript exporter spells it.
        c = lambda n, v: helper.make_node(  # noqa: E731
            "Constant", [], [f"{p}/{n}_output_0"], name=f"{p}/{n}",
            value=numpy_helper.from_array(np.array(v, dtype=np.float32)))
        nodes += [
            c("Constant", 1.4142135381698608),
            helper.make_node("Div", [x, f"{p}/Constant_output_0"], [f"{p}/Div_output_0"], name=f"{p}/Div"),
            helper.make_node("Erf", [f"{p}/Div_output_0"], [f"{p}/Erf_output_0"], name=f"{p}/Erf"),
            c("Constant_1", 1.0),
            helper.make_node("Add", [f"{p}/Erf_output_0", f"{p}/Constant_1_output_0"],
                             [f"{p}/Add_output_0"], name=f"{p}/Add"),
            helper.make_node("Mul", [x, f"{p}/Add_output_0"], [f"{p}/Mul_output_0"], name=f"{p}/Mul"),
            c("Constant_2", 0.5),
            helper.make_node("Mul", [f"{p}/Mul_output_0", f"{p}/Constant_2_output_0"],
                             [f"{p}/Mul_1_output_0"], name=f"{p}/Mul_1"),
        ]
        x = f"{p}/Mul_1_output_0"
    graph = helper.make_graph(
        nodes, "main_graph",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch_size", dims[0]])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch_size", dims[-1]])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="pytorch", producer_version="2.11.0")
    model.ir_version = 8
    return model


def dynamo_mlp(batch, dims, opset, use_gelu_op=True):
    """What torch.onnx.export(dynamo=True) writes: MatMul with transposed weights + Add, Gelu."""
    nodes, inits = [], []
    x = "x"
    for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:])):
        wt, b = f"fc{i + 1}.weight_t", f"fc{i + 1}.bias"
        inits += [numpy_helper.from_array(np.ascontiguousarray(weight((d_out, d_in)).T), wt),
                  numpy_helper.from_array(weight((d_out,), 0.1), b)]
        mm, add = f"matmul_{i}", f"linear_{i}"
        nodes += [helper.make_node("MatMul", [x, wt], [mm], name=f"node_MatMul_{i}"),
                  helper.make_node("Add", [mm, b], [add], name=f"node_linear_{i}")]
        x = add
        if i + 2 == len(dims):
            break
        act = f"gelu_{i}"
        if use_gelu_op:
            nodes.append(helper.make_node("Gelu", [x], [act], name=f"node_gelu_{i}", approximate="none"))
        else:
            nodes.append(helper.make_node("Relu", [x], [act], name=f"node_relu_{i}"))
        x = act
    graph = helper.make_graph(
        nodes, "main_graph",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, dims[0]])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [batch, dims[-1]])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="pytorch", producer_version="2.11.0")
    model.ir_version = 10
    return model


def attention_block(batch, seq, hidden, heads, opset=17):
    """Single-head-group self-attention with every shape op Baton supports: MatMul, Reshape,
    Transpose, Softmax, Concat, Unsqueeze, Squeeze, Sqrt, Pow, Sub, Div, Tanh, Sigmoid, Flatten,
    Identity."""
    head = hidden // heads
    inits = [numpy_helper.from_array(weight((hidden, hidden)), n) for n in ("wq", "wk", "wv")]
    inits += [numpy_helper.from_array(np.array([batch, seq, heads, head], np.int64), "split_shape"),
              numpy_helper.from_array(np.array([batch, seq, hidden], np.int64), "merge_shape"),
              numpy_helper.from_array(np.array([0], np.int64), "axis0"),
              numpy_helper.from_array(np.array(2.0, np.float32), "two"),
              numpy_helper.from_array(np.array(np.sqrt(head), np.float32), "scale")]
    n = helper.make_node
    nodes = []
    for name, w in (("q", "wq"), ("k", "wk"), ("v", "wv")):
        nodes += [n("MatMul", ["x", w], [name + "_lin"], name=name + "_proj"),
                  n("Reshape", [name + "_lin", "split_shape"], [name + "_split"], name=name + "_split"),
                  n("Transpose", [name + "_split"], [name + "_heads"], perm=[0, 2, 1, 3],
                    name=name + "_heads")]
    nodes += [
        n("Transpose", ["k_heads"], ["k_t"], perm=[0, 1, 3, 2], name="k_t"),
        n("MatMul", ["q_heads", "k_t"], ["scores"], name="scores"),
        n("Div", ["scores", "scale"], ["scaled"], name="scaled"),
        n("Softmax", ["scaled"], ["probs"], axis=-1, name="softmax"),
        n("MatMul", ["probs", "v_heads"], ["ctx"], name="ctx"),
        n("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3], name="ctx_t"),
        n("Reshape", ["ctx_t", "merge_shape"], ["merged"], name="merged"),
        n("Pow", ["merged", "two"], ["sq"], name="sq"),
        n("Add", ["sq", "two"], ["sq2"], name="sq2"),
        n("Sqrt", ["sq2"], ["root"], name="root"),
        n("Sub", ["merged", "root"], ["diff"], name="diff"),
        n("Tanh", ["diff"], ["t"], name="tanh"),
        n("Sigmoid", ["merged"], ["s"], name="sigmoid"),
        n("Concat", ["t", "s"], ["cat"], axis=-1, name="concat"),
        n("Unsqueeze", ["cat", "axis0"], ["unsq"], name="unsqueeze"),
        n("Squeeze", ["unsq", "axis0"], ["sqz"], name="squeeze"),
        n("Flatten", ["sqz"], ["flat"], axis=2, name="flatten"),
        n("Identity", ["flat"], ["y"], name="identity"),
    ]
    graph = helper.make_graph(
        nodes, "attention",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch * seq, hidden * 2])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def two_input_model():
    """Two inputs, two outputs, one output a constant-folded subgraph: exercises input order,
    multiple outputs and folding."""
    n = helper.make_node
    inits = [numpy_helper.from_array(weight((5, 7)), "w"),
             numpy_helper.from_array(np.array([7, 5], np.int64), "shape")]
    nodes = [n("Transpose", ["w"], ["wt"], perm=[1, 0], name="fold_me"),
             n("Reshape", ["wt", "shape"], ["wt2"], name="fold_me_too"),
             n("MatMul", ["a", "w"], ["aw"], name="aw"),
             n("Mul", ["aw", "b"], ["y"], name="scale_by_b"),
             n("Relu", ["wt2"], ["w_relu"], name="fold_relu")]
    graph = helper.make_graph(
        nodes, "two_inputs",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 5]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 7]),
         helper.make_tensor_value_info("w_relu", TensorProto.FLOAT, [7, 5])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    return model


def dynamo_mlp_fp16(batch, dims, opset=20):
    """The dynamo MLP after model.half(): float16 weights, inputs and outputs (Gelu op)."""
    model = dynamo_mlp(batch, dims, opset)
    for init in model.graph.initializer:
        array = numpy_helper.to_array(init).astype(np.float16)
        init.CopyFrom(numpy_helper.from_array(array, init.name))
    for vi in list(model.graph.input) + list(model.graph.output):
        vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    return model


def mlp_reference(model, x):
    """float64 numpy evaluation of a dynamo_mlp (MatMul, Add, Gelu/Relu) from its own weights."""
    weights = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in model.graph.initializer}
    values = {model.graph.input[0].name: x.astype(np.float64)}
    erf = np.vectorize(math.erf)
    for node in model.graph.node:
        a = [values.get(n, weights.get(n)) for n in node.input]
        if node.op_type == "MatMul":
            out = a[0] @ a[1]
        elif node.op_type == "Add":
            out = a[0] + a[1]
        elif node.op_type == "Gelu":
            out = 0.5 * a[0] * (1.0 + erf(a[0] / np.sqrt(2.0)))
        elif node.op_type == "Relu":
            out = np.maximum(a[0], 0.0)
        else:
            raise ValueError(node.op_type)
        values[node.output[0]] = out
    return values[model.graph.output[0].name]


def save_with_reference(model, out_dir, name, x, tolerance):
    """For models onnxruntime's CPU provider cannot run (float16 MatMul): the reference is numpy
    in float64 on the model's own (float16) weights and inputs, saved as float32."""
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out_dir, name + ".onnx"))
    np.save(os.path.join(out_dir, f"{name}.input_0.npy"), x)
    np.save(os.path.join(out_dir, f"{name}.output_0.npy"),
            mlp_reference(model, x).astype(np.float32))
    return {"name": name, "model": name + ".onnx", "inputs": [model.graph.input[0].name],
            "outputs": 1, "shapes": {}, "tolerance": tolerance}


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    f32 = lambda *s: RNG.standard_normal(s).astype(np.float32)  # noqa: E731
    cases = [
        save(torchscript_mlp(8, [64, 256, 256, 32]), out_dir, "ts17_mlp_gelu",
             [("input", f32(8, 64))], shapes={"input": [8, 64]}),
        save(torchscript_mlp(5, [33, 17, 9], activation="relu"), out_dir, "ts17_mlp_relu_odd",
             [("input", f32(5, 33))], shapes={"input": [5, 33]}),
        save(dynamo_mlp(8, [64, 128, 128, 16], opset=20), out_dir, "dynamo20_mlp_gelu",
             [("x", f32(8, 64))]),
        save(dynamo_mlp(3, [31, 63, 7], opset=18, use_gelu_op=False), out_dir,
             "dynamo18_mlp_relu_odd", [("x", f32(3, 31))]),
        save(attention_block(2, 7, 24, 3), out_dir, "attention_ops", [("x", f32(2, 7, 24))]),
        save(two_input_model(), out_dir, "two_inputs_folded",
             [("a", f32(3, 5)), ("b", f32(3, 7))]),
        # float16 activations between layers and a float16 output: within float16's rounding.
        save_with_reference(dynamo_mlp_fp16(8, [64, 128, 128, 16]), out_dir, "dynamo20_mlp_fp16",
                            f32(8, 64).astype(np.float16), tolerance=2e-3),
    ]
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=2)
    print(f"wrote {len(cases)} cases to {out_dir}")


if __name__ == "__main__":
    main()
