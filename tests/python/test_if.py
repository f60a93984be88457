"""If whose condition is known at compile time (issue 38): the compiled program is the chosen
branch alone; the other branch is dropped before its shapes are inferred. Against onnxruntime,
with conditions from shape arithmetic over static sizes (both ways), an initializer, a nested If,
two outputs and a branch that passes an outer value on; a condition that depends on an input's
values or on a dynamic size is refused naming the If."""
import numpy as np
import pytest

import baton

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def out(name):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, None)


def branch(name, nodes, outputs):
    return helper.make_graph(nodes, name, [], [out(o) for o in outputs])


def shape_condition(prefix="c"):
    """x's first dimension == 2, as a TorchScript export computes it."""
    return [helper.make_node("Shape", ["x"], [prefix + "_s"]),
            helper.make_node("Gather", [prefix + "_s", "zero"], [prefix + "_n"], axis=0),
            helper.make_node("Equal", [prefix + "_n", "two"], [prefix])]


CONSTANTS = [numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
             numpy_helper.from_array(np.array(2, dtype=np.int64), "two")]


def make(nodes, x_dims, outputs, inits=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims)],
                          [out(o) for o in outputs], CONSTANTS + list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def check(m, x):
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = baton.load(baton.compile(m))(x=x)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
    return got


def shape_if_model(rows):
    # The then branch reshapes to [8] (valid only when x is [2, 4]): at other shapes the dropped
    # branch would not even infer.
    then_g = branch("then", [helper.make_node("Reshape", ["x", "flat"], ["t_out"])], ["t_out"])
    else_g = branch("else", [helper.make_node("Neg", ["x"], ["e_out"])], ["e_out"])
    nodes = shape_condition() + [
        helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="the_if"),
        helper.make_node("Sigmoid", ["y"], ["z"])]
    return make(nodes, [rows, 4], ["z"],
                [numpy_helper.from_array(np.array([8], dtype=np.int64), "flat")])


@pytest.mark.parametrize("rows", [2, 3])
def test_a_shape_condition_picks_one_branch(rows):
    x = np.random.default_rng(rows).standard_normal((rows, 4)).astype(np.float32)
    (z,) = check(shape_if_model(rows), x)
    assert z.shape == ((8,) if rows == 2 else (rows, 4))


def test_the_dropped_branch_leaves_no_kernel(tmp_path):
    path = baton.compile(shape_if_model(3), tmp_path / "m.baton")
    ops = [i.get("op") for i in baton.inspect(path)["methods"][0]["instructions"]]
    assert "Neg" in ops and "Reshape" not in ops and "If" not in ops, ops


def test_an_initializer_condition_and_two_outputs():
    cond = numpy_helper.from_array(np.array(False), "flag")
    then_g = branch("then", [helper.make_node("Relu", ["x"], ["t0"]),
                             helper.make_node("Abs", ["x"], ["t1"])], ["t0", "t1"])
    # The else branch passes x on (onnxruntime wants an Identity, not the outer name itself).
    else_g = branch("else", [helper.make_node("Identity", ["x"], ["e0"]),
                             helper.make_node("Exp", ["x"], ["e1"])], ["e0", "e1"])
    nodes = [helper.make_node("If", ["flag"], ["a", "b"], then_branch=then_g, else_branch=else_g),
             helper.make_node("Add", ["a", "b"], ["y"])]
    m = make(nodes, [3, 5], ["y", "a"], [cond])
    x = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    y, a = check(m, x)
    np.testing.assert_array_equal(a, x)


def test_a_nested_if():
    inner_then = branch("inner_then", [helper.make_node("Tanh", ["x"], ["it"])], ["it"])
    inner_else = branch("inner_else", [helper.make_node("Sin", ["x"], ["ie"])], ["ie"])
    then_g = branch("then", shape_condition("ic") + [
        helper.make_node("Not", ["ic"], ["nic"]),
        helper.make_node("If", ["nic"], ["inner"], then_branch=inner_then, else_branch=inner_else),
        helper.make_node("Mul", ["inner", "inner"], ["t_out"])], ["t_out"])
    else_g = branch("else", [helper.make_node("Cos", ["x"], ["e_out"])], ["e_out"])
    nodes = shape_condition() + [
        helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    for rows in (2, 5):
        m = make(nodes, [rows, 3], ["y"])
        check(m, np.random.default_rng(rows).standard_normal((rows, 3)).astype(np.float32))


def test_a_condition_from_an_input_or_a_dynamic_size_is_refused_by_name():
    then_g = branch("then", [helper.make_node("Relu", ["x"], ["t_out"])], ["t_out"])
    else_g = branch("else", [helper.make_node("Neg", ["x"], ["e_out"])], ["e_out"])
    from_values = [helper.make_node("ReduceSum", ["x"], ["sum"], keepdims=0),
                   helper.make_node("Greater", ["sum", "zerof"], ["c"]),
                   helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g,
                                    name="value_if")]
    m = make(from_values, [2, 4], ["y"],
             [numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zerof")])
    with pytest.raises(baton.BatonError, match="If node 'value_if': its condition 'c' is not "
                                               "known at compile time"):
        baton.compile(m)
    dynamic = make(shape_condition() + [helper.make_node(
        "If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="dyn_if")], ["N", 4], ["y"])
    with pytest.raises(baton.BatonError, match="If node 'dyn_if'"):
        baton.compile(dynamic, dims={"N": (1, 4)})
    # The same model with the shape fixed compiles.
    baton.compile(dynamic, shapes={"x": (2, 4)})


def test_an_op_baton_lacks_matters_only_in_the_branch_that_is_kept():
    """The then branch uses Unique (no Baton kernel): dropped, it costs nothing; kept, the
    compile names it."""
    then_g = branch("then", [helper.make_node("Unique", ["x"], ["t_out"], name="uniq")], ["t_out"])
    else_g = branch("else", [helper.make_node("Neg", ["x"], ["e_out"])], ["e_out"])
    nodes = shape_condition() + [
        helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    x = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)
    check(make(nodes, [3, 4], ["y"]), x)  # x is [3, 4]: the else branch
    with pytest.raises(baton.BatonError, match="unsupported node in the branch its If keeps: "
                                               "node 'uniq': op 'Unique'"):
        baton.compile(make(nodes, [2, 4], ["y"]))


def test_a_condition_that_is_not_one_bool_is_refused_by_name():
    then_g = branch("then", [helper.make_node("Relu", ["x"], ["t_out"])], ["t_out"])
    else_g = branch("else", [helper.make_node("Neg", ["x"], ["e_out"])], ["e_out"])
    nodes = [helper.make_node("If", ["two"], ["y"], then_branch=then_g, else_branch=else_g,
                              name="int_if")]
    with pytest.raises(baton.BatonError, match="If node 'int_if': its condition 'two' is int64 "
                                               r"\[\], not one bool"):
        baton.compile(make(nodes, [2, 4], ["y"]))
