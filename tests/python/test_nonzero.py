"""NonZero (issue 38): a data-dependent output size (docs/dynamic_shapes.md). The output is
planned for every element being non-zero; the kernel gives the count when it runs and the sizes
after it are resolved again, so the ops that read it (Transpose, GatherND, elementwise) run at
the real count. Against onnxruntime at counts from 0 to every element, with static and dynamic
inputs, several dtypes; a constant input folds at compile; a GPU compile leaves the nodes whose
sizes follow the count on the CPU and says why."""
import numpy as np
import pytest

import baton

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

ONNX_TYPE = {np.float32: TensorProto.FLOAT, np.int32: TensorProto.INT32, np.bool_: TensorProto.BOOL,
             np.float16: TensorProto.FLOAT16, np.int64: TensorProto.INT64}


def gather_model(dtype, dims):
    """x -> NonZero -> Transpose -> GatherND(x) -> the non-zero values, and the indices."""
    x = helper.make_tensor_value_info("x", ONNX_TYPE[dtype], dims)
    nodes = [helper.make_node("NonZero", ["x"], ["nz"], name="nz"),
             helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0], name="tr"),
             helper.make_node("GatherND", ["x", "idx"], ["vals"], name="gnd")]
    g = helper.make_graph(nodes, "g", [x], [
        helper.make_tensor_value_info("nz", TensorProto.INT64, None),
        helper.make_tensor_value_info("vals", ONNX_TYPE[dtype], None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def sparse(rng, shape, density, dtype):
    values = rng.standard_normal(shape) * 3
    if dtype == np.bool_:
        return rng.random(shape) < density
    if dtype in (np.int32, np.int64):
        values = np.where(values == 0, 1, np.round(values) + np.sign(values))
    return (values * (rng.random(shape) < density)).astype(dtype)


def check(module, m, feeds):
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    got = module(**feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_array_equal(g, w)
    return got


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.int64])
def test_counts_from_none_to_all_match_onnxruntime(dtype):
    m = gather_model(dtype, [3, 5, 4])
    module = baton.load(baton.compile(m), threads=1)
    rng = np.random.default_rng(3)
    counts = set()
    for density in [0.0, 0.1, 0.5, 0.9, 1.0, 0.3, 0.0]:
        (nz, _) = check(module, m, {"x": sparse(rng, (3, 5, 4), density, dtype)})
        counts.add(nz.shape[1])
    assert 0 in counts and 60 in counts and len(counts) >= 5


def test_float_zeros_of_both_signs_and_nan():
    m = gather_model(np.float32, [6])
    x = np.array([0.0, -0.0, np.nan, 1.0, -2.0, 0.0], dtype=np.float32)
    (nz, vals) = baton.load(baton.compile(m))(x=x)
    np.testing.assert_array_equal(nz, [[2, 3, 4]])  # -0 is zero, NaN is not
    assert np.isnan(vals[0]) and list(vals[1:]) == [1.0, -2.0]


def test_float16_matches_onnxruntime():
    m = helper.make_model(helper.make_graph(
        [helper.make_node("NonZero", ["x"], ["nz"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [4, 7])],
        [helper.make_tensor_value_info("nz", TensorProto.INT64, None)]),
        opset_imports=[helper.make_opsetid("", 13)])
    module = baton.load(baton.compile(m))
    rng = np.random.default_rng(4)
    for density in [0.0, 0.4, 1.0]:
        check(module, m, {"x": sparse(rng, (4, 7), density, np.float16)})


def test_a_dynamic_input_and_a_data_dependent_count_in_one_program():
    m = gather_model(np.float32, ["batch", 8])
    module = baton.load(baton.compile(m, dims={"batch": (1, 6)}), threads=2)
    rng = np.random.default_rng(5)
    for batch, density in [(6, 1.0), (1, 0.0), (3, 0.5), (6, 0.2), (2, 1.0), (1, 0.7)]:
        check(module, m, {"x": sparse(rng, (batch, 8), density, np.float32)})


def test_the_count_feeds_elementwise_ops_and_a_reduction():
    """The count reaches a broadcast against a constant and a ReduceSum over it."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 6])
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]),
             helper.make_node("Cast", ["nz"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["f", "w"], ["g"]),
             helper.make_node("ReduceSum", ["g"], ["s"], keepdims=0),
             helper.make_node("Shape", ["nz"], ["shape"])]
    g = helper.make_graph(nodes, "g", [x], [
        helper.make_tensor_value_info("s", TensorProto.FLOAT, None),
        helper.make_tensor_value_info("shape", TensorProto.INT64, None)],
        [numpy_helper.from_array(np.array([[1.5], [-0.5]], dtype=np.float32), "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    module = baton.load(baton.compile(m))
    rng = np.random.default_rng(6)
    for density in [0.5, 0.0, 1.0, 0.2]:
        check(module, m, {"x": sparse(rng, (5, 6), density, np.float32)})


def test_a_constant_input_folds_at_compile(tmp_path):
    mask = np.zeros((4, 4), dtype=np.bool_)
    mask[1, 2] = mask[3, 0] = True
    g = helper.make_graph(
        [helper.make_node("NonZero", ["mask"], ["nz"]),
         helper.make_node("Cast", ["nz"], ["f"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["f", "x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(mask, "mask")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = baton.compile(m, tmp_path / "m.baton")
    info = baton.inspect(path)["methods"][0]
    assert info["symbols"] == []  # the count is known: no data-dependent size
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    check(baton.load(path), m, {"x": x})


def test_a_gpu_compile_leaves_the_count_on_the_cpu_and_says_why(tmp_path):
    if not baton.cuda.is_built():
        pytest.skip("needs the CUDA backend's compiler (builds for sm_90 without a GPU)")
    m = gather_model(np.float32, [16, 16])
    relu = helper.make_node("Relu", ["x"], ["r"], name="relu")
    m.graph.node[0].input[0] = "r"
    m.graph.node.insert(0, relu)
    path = baton.compile(m, tmp_path / "g.baton", device="cuda:0", arch="sm_90")
    info = baton.inspect(path)["methods"][0]
    reasons = {f["node"]: f["reason"] for f in info["fallbacks"]}
    assert set(reasons) == {"nz", "tr", "gnd"}, reasons
    assert all("dynamic output size" in r for r in reasons.values())
    (sym,) = info["symbols"]
    assert sym["min"] == 0 and sym["max"] == 256 and "source" in sym
    with pytest.raises(baton.BatonError, match="dynamic output size"):
        baton.compile(m, tmp_path / "h.baton", device="cuda:0", arch="sm_90", fallback="error")


def test_a_scalar_has_one_index_row_as_in_onnxruntime():
    m = helper.make_model(helper.make_graph(
        [helper.make_node("NonZero", ["x"], ["nz"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("nz", TensorProto.INT64, None)]),
        opset_imports=[helper.make_opsetid("", 13)])
    module = baton.load(baton.compile(m))
    for value in [2.5, 0.0]:
        (nz,) = check(module, m, {"x": np.array(value, dtype=np.float32)})
        assert nz.shape == (1, 1 if value else 0)


def test_two_nonzeros_of_one_input_are_not_merged():
    """The optimizer's common-subexpression pass would merge them, leaving one count without
    the kernel that gives it."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 5])
    nodes = [helper.make_node("NonZero", ["x"], ["a"], name="nz_a"),
             helper.make_node("NonZero", ["x"], ["b"], name="nz_b"),
             helper.make_node("Concat", ["a", "b"], ["ab"], axis=1)]
    g = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("ab", TensorProto.INT64, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    module = baton.load(baton.compile(m))
    rng = np.random.default_rng(9)
    for density in [0.3, 1.0, 0.0]:
        check(module, m, {"x": sparse(rng, (4, 5), density, np.float32)})


def test_a_dynamic_gpu_compile_pins_the_count_in_its_engines(tmp_path):
    if not baton.cuda.is_built():
        pytest.skip("needs the CUDA backend's compiler (builds for sm_90 without a GPU)")
    m = gather_model(np.float32, ["batch", 16])
    relu = helper.make_node("Relu", ["x"], ["r"], name="relu")
    m.graph.node[0].input[0] = "r"
    m.graph.node.insert(0, relu)
    path = baton.compile(m, tmp_path / "g.baton", device="cuda:0", arch="sm_90",
                         dims={"batch": (1, 8)})
    info = baton.inspect(path)["methods"][0]
    assert {f["node"] for f in info["fallbacks"]} == {"nz", "tr", "gnd"}
    names = [s["name"] for s in info["symbols"]]
    assert names == ["batch", "count(nz)"], names


def test_a_count_over_shape_values_follows_the_call():
    """NonZero of shape arithmetic over a dynamic size ([N - 1, 4 - 4]) is a count of its own:
    0 at N = 1, 1 above, not the count at the largest N."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Sub", ["s", "one_four"], ["d"]),
             helper.make_node("NonZero", ["d"], ["nz"])]
    g = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("nz", TensorProto.INT64, None)],
                          [numpy_helper.from_array(np.array([1, 4], dtype=np.int64), "one_four")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    module = baton.load(baton.compile(m, dims={"N": (1, 4)}))
    for n in [1, 3, 1, 4]:
        (nz,) = check(module, m, {"x": np.ones((n, 4), dtype=np.float32)})
        assert nz.shape == (1, 0 if n == 1 else 1)
