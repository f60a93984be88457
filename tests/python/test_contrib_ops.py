"""The com.microsoft ops onnxruntime's transformer optimizer writes (issue 38), against
onnxruntime on the CPU: Baton imports them as the standard ops they compute, so the CPU runs them
and a GPU compile takes them whole."""
import numpy as np
import pytest

import baton

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

B, S, H = 2, 5, 16


def contrib_model(rng):
    """x, skip [B, S, H] -> SkipLayerNormalization (beta, bias, the sum as an output) ->
    BiasGelu -> FastGelu (with a bias) -> Gelu -> FastGelu (no bias) -> SkipLayerNormalization
    (default epsilon, no beta or bias) -> y; outputs y and the first sum."""
    init = {
        "gamma": rng.uniform(0.5, 1.5, H), "beta": rng.standard_normal(H) * 0.1,
        "bias": rng.standard_normal(H) * 0.1, "b1": rng.standard_normal(H) * 0.1,
        "b2": rng.standard_normal(H) * 0.1,
    }
    ms = "com.microsoft"
    nodes = [
        helper.make_node("SkipLayerNormalization", ["x", "skip", "gamma", "beta", "bias"],
                         ["ln", "", "", "sum"], domain=ms, epsilon=1e-5, name="sln"),
        helper.make_node("BiasGelu", ["ln", "b1"], ["g1"], domain=ms, name="bias_gelu"),
        helper.make_node("FastGelu", ["g1", "b2"], ["g2"], domain=ms, name="fast_gelu"),
        helper.make_node("Gelu", ["g2"], ["g3"], domain=ms, name="gelu"),
        helper.make_node("FastGelu", ["g3"], ["g4"], domain=ms, name="fast_gelu_plain"),
        helper.make_node("SkipLayerNormalization", ["g4", "sum", "gamma"], ["y"], domain=ms,
                         name="sln_2"),
    ]
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "contrib",
        [helper.make_tensor_value_info(n, f, [B, S, H]) for n in ("x", "skip")],
        [helper.make_tensor_value_info(n, f, [B, S, H]) for n in ("y", "sum")],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in init.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(ms, 1)])


def test_contrib_ops_match_onnxruntime_on_the_cpu(tmp_path):
    rng = np.random.default_rng(38)
    model = contrib_model(rng)
    x = rng.standard_normal((B, S, H)).astype(np.float32)
    skip = rng.standard_normal((B, S, H)).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want_y, want_sum = sess.run(["y", "sum"], {"x": x, "skip": skip})
    got_y, got_sum = baton.load(baton.compile(model))(x=x, skip=skip)
    np.testing.assert_allclose(got_sum, want_sum, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got_y, want_y, rtol=1e-4, atol=1e-4)
    assert np.abs(want_y).max() > 0.5  # not a degenerate comparison


def test_contrib_ops_run_whole_on_the_gpu(tmp_path):
    # A GPU compile (built here for sm_90, no GPU needed) refuses any fallback: the rewritten ops
    # are the GPU's own (Gelu, Add + LayerNormalization).
    model = contrib_model(np.random.default_rng(38))
    path = tmp_path / "contrib.baton"
    baton.compile(model, path, device="cuda:0", arch="sm_90", fallback="error")
    method = baton.inspect(path)["methods"][0]
    assert method["fallbacks"] == []
    assert len(method["delegates"]) == 1


def test_what_cannot_be_rewritten_is_refused_by_name():
    # SkipLayerNormalization's training outputs.
    model = contrib_model(np.random.default_rng(38))
    model.graph.node[0].output[1] = "mean"
    model.graph.output.append(helper.make_tensor_value_info("mean", TensorProto.FLOAT, None))
    with pytest.raises(baton.BatonError, match="uses its mean or inv_std_var output"):
        baton.compile(model)
    # A node whose first output is unnamed computes nothing anyone reads: refused, naming it.
    model = contrib_model(np.random.default_rng(38))
    model.graph.node[1].output[0] = ""
    with pytest.raises(baton.BatonError, match="node 'bias_gelu' .com.microsoft BiasGelu. has no "
                                               "first output"):
        baton.compile(model)
