"""Loop with a constant trip count (issue 38): unrolled at import into that many copies of its
body, the loop-carried values threaded through, scan outputs stacked. Against onnxruntime, at
opsets 13 and 17, with the iteration number used,
an outer value read, a Constant trip count, a trip count computed from a static size
(Gather(Shape(x), 0)) and zero trips; a trip count known only at run time (an input, or a dynamic
size) or an early exit is refused naming the Loop."""
import numpy as np
import pytest

import baton

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def body(early_exit=False, cast=False):
    """v_out = v * w + float(i) * x; scan = Tanh(v_out); the condition passed through."""
    nodes = [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "fi"], ["xi"]),
             helper.make_node("Mul", ["v", "w"], ["vw"]),
             helper.make_node("Add", ["vw", "xi"], ["v_out"]),
             helper.make_node("Tanh", ["v_out"], ["scan"])]
    if early_exit:
        nodes += [helper.make_node("ReduceSum", ["v_out"], ["total"], keepdims=0),
                  helper.make_node("Less", ["total", "limit"], ["cond_out"])]
    elif cast:  # the pass-through as the TorchScript exporter writes it
        nodes.append(helper.make_node("Cast", ["cond"], ["cond_out"], to=TensorProto.BOOL))
    else:
        nodes.append(helper.make_node("Identity", ["cond"], ["cond_out"]))
    return helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("scan", TensorProto.FLOAT, [2, 3])])


def model(trips, opset, trip_node=None, early_exit=False, name="the_loop", cast=False):
    inits = [numpy_helper.from_array(np.full((2, 3), 0.5, dtype=np.float32), "w"),
             numpy_helper.from_array(np.array(True), "go"),
             numpy_helper.from_array(np.array(1.0, dtype=np.float32), "limit")]
    nodes = []
    if trip_node == "constant":
        nodes.append(helper.make_node("Constant", [], ["M"], value=numpy_helper.from_array(
            np.array(trips, dtype=np.int64))))
    elif trip_node is None:
        inits.append(numpy_helper.from_array(np.array(trips, dtype=np.int64), "M"))
    nodes.append(helper.make_node("Loop", ["M", "go", "v0"], ["v_final", "scans"],
                                  body=body(early_exit, cast), name=name))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
              helper.make_tensor_value_info("v0", TensorProto.FLOAT, [2, 3])]
    if trip_node == "input":
        inputs.append(helper.make_tensor_value_info("M", TensorProto.INT64, []))
    g = helper.make_graph(nodes, "g", inputs,
                          [helper.make_tensor_value_info("v_final", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("scans", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def feeds():
    rng = np.random.default_rng(2)
    return {"x": rng.standard_normal((2, 3)).astype(np.float32),
            "v0": rng.standard_normal((2, 3)).astype(np.float32)}


@pytest.mark.parametrize("trips,opset,trip_node", [(3, 17, None), (5, 13, None), (4, 17, "constant"),
                                                   (1, 13, None)])
def test_an_unrolled_loop_matches_onnxruntime(trips, opset, trip_node):
    m = model(trips, opset, trip_node)
    f = feeds()
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, f)
    got = baton.load(baton.compile(m))(**f)
    assert got[1].shape == (trips, 2, 3)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_a_condition_passed_through_a_cast_unrolls():
    m = model(3, 17, cast=True)
    f = feeds()
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, f)
    got = baton.load(baton.compile(m))(**f)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_zero_trips_give_the_initial_values():
    g = model(0, 17).graph
    g.node[0].output.pop()  # no scan output: a zero-trip loop would stack nothing
    g.node[0].attribute[0].g.output.pop()
    g.output.pop()
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    f = feeds()
    (v,) = baton.load(baton.compile(m))(**f)
    np.testing.assert_array_equal(v, f["v0"])


def test_a_run_time_trip_count_or_an_early_exit_is_refused_by_name():
    with pytest.raises(baton.BatonError, match="Loop node 'the_loop': its trip count 'M' is not a "
                                               "constant int64"):
        baton.compile(model(3, 17, "input"))
    with pytest.raises(baton.BatonError, match="Loop node 'the_loop': its body computes its "
                                               "condition"):
        baton.compile(model(3, 17, early_exit=True))
    with pytest.raises(baton.BatonError, match="its trip count is 1000"):
        baton.compile(model(1000, 17))


def shape_trip_model(x_dims):
    """The trip count is x.size(0), as `for i in range(x.size(0))` exports it: Gather(Shape(x), 0)."""
    m = model(0, 17, trip_node="input")
    g = m.graph
    del g.input[2]  # M is computed, not an input
    g.input[0].CopyFrom(helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims))
    g.initializer.append(numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"))
    g.node.insert(0, helper.make_node("Gather", ["x_shape", "zero"], ["M"], axis=0))
    g.node.insert(0, helper.make_node("Shape", ["x"], ["x_shape"]))
    # The body reads x [N, 3] now: its carried value is [N, 3] too.
    for vi in list(g.node[-1].attribute[0].g.input)[2:] + list(g.node[-1].attribute[0].g.output)[1:]:
        vi.type.tensor_type.shape.dim[0].dim_param = "N"
    g.input[1].CopyFrom(helper.make_tensor_value_info("v0", TensorProto.FLOAT, x_dims))
    g.initializer[0].CopyFrom(numpy_helper.from_array(np.full((1, 3), 0.5, dtype=np.float32), "w"))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("rows", [1, 4, 6])
def test_a_trip_count_from_a_static_size_folds_and_unrolls(rows):
    m = shape_trip_model([rows, 3])
    rng = np.random.default_rng(rows)
    f = {"x": rng.standard_normal((rows, 3)).astype(np.float32),
         "v0": rng.standard_normal((rows, 3)).astype(np.float32)}
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, f)
    got = baton.load(baton.compile(m))(**f)
    assert got[1].shape == (rows, rows, 3)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("take_then", [True, False])
def test_a_trip_count_chosen_by_a_folding_if_unrolls(take_then):
    """M is an If's output (3 or 5 trips) whose condition, x.size(0) == 2 or == 7, folds: the Loop's
    trip count needs the nodes computing the If's condition and both branches' writers of M, all
    imported before it."""
    m = model(0, 17, trip_node="input")
    g = m.graph
    del g.input[2]
    g.initializer.extend([numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
                          numpy_helper.from_array(np.array(2 if take_then else 7, dtype=np.int64),
                                                  "rows")])
    g.node.insert(0, helper.make_node("Equal", ["x_rows", "rows"], ["pick"]))
    g.node.insert(0, helper.make_node("Gather", ["x_shape", "zero"], ["x_rows"], axis=0))
    g.node.insert(0, helper.make_node("Shape", ["x"], ["x_shape"]))

    def branch(name, trips):
        return helper.make_graph(
            [helper.make_node("Constant", [], [name], value=numpy_helper.from_array(
                np.array(trips, dtype=np.int64)))], name + "_g", [],
            [helper.make_tensor_value_info(name, TensorProto.INT64, [])])
    g.node.insert(3, helper.make_node("If", ["pick"], ["M"], then_branch=branch("m3", 3),
                                      else_branch=branch("m5", 5)))
    f = feeds()
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, f)
    got = baton.load(baton.compile(m))(**f)
    assert got[1].shape == ((3 if take_then else 5), 2, 3)
    for g_, w in zip(got, want):
        np.testing.assert_allclose(g_, w, rtol=1e-5, atol=1e-6)


def test_a_trip_count_whose_inference_fails_says_why():
    m = shape_trip_model([4, 3])
    m.graph.initializer.append(numpy_helper.from_array(np.array(5, dtype=np.int64), "five"))
    for n in m.graph.node:
        if n.op_type == "Gather":
            n.input[1] = "five"  # x has two dimensions: Shape(x)[5] does not exist
    with pytest.raises(baton.BatonError, match=r"Loop node 'the_loop': its trip count 'M' is not a "
                                               r"constant int64, nor computed from static sizes "
                                               r"\(inferring it: .*Gather"):
        baton.compile(m)


def test_a_trip_count_from_a_dynamic_size_is_refused_by_name():
    with pytest.raises(baton.BatonError, match="Loop node 'the_loop': its trip count 'M' is not a "
                                               "constant int64, nor computed from static sizes"):
        baton.compile(shape_trip_model(["N", 3]), dims={"N": (1, 8)})


def test_a_body_that_does_not_fit_the_node_is_refused_by_name():
    m = model(3, 17)
    m.graph.node[0].input.append("x")  # a second carried value the body does not take
    with pytest.raises(baton.BatonError, match="Loop node 'the_loop': its body has 3 inputs and 3 "
                                               "outputs for 2 carried values"):
        baton.compile(m)
