"""RNN, GRU and LSTM on the CPU against onnxruntime (issue 38), in the forms ONNX's node tests
leave out: both directions, reverse, sequence lengths (with reverse), LSTM's input_forget and
Y_c, GRU's linear_before_reset. `clip` and other activations are refused (below)."""
import numpy as np
import pytest

import baton

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
T, B, I, H = 6, 3, 5, 4


def model(op, direction, layout, lens, attrs, rng):
    g, d = GATES[op], (2 if direction == "bidirectional" else 1)
    init = {"W": rng.uniform(-0.6, 0.6, (d, g * H, I)), "R": rng.uniform(-0.6, 0.6, (d, g * H, H)),
            "B": rng.uniform(-0.3, 0.3, (d, 2 * g * H))}
    state = [d, B, H] if layout == 0 else [B, d, H]
    inputs = ["X", "W", "R", "B", "sequence_lens" if lens else "", "initial_h"]
    graph_inputs = [helper.make_tensor_value_info(
        "X", TensorProto.FLOAT, [T, B, I] if layout == 0 else [B, T, I]),
        helper.make_tensor_value_info("initial_h", TensorProto.FLOAT, state)]
    if lens:
        init_lens = numpy_helper.from_array(np.array([T, 2, 4], dtype=np.int32), "sequence_lens")
    outputs = ["Y", "Y_h"]
    if op == "LSTM":
        inputs += ["initial_c", "P"]
        graph_inputs.append(helper.make_tensor_value_info("initial_c", TensorProto.FLOAT, state))
        init["P"] = rng.uniform(-0.5, 0.5, (d, 3 * H))
        outputs.append("Y_c")
    node = helper.make_node(op, inputs, outputs, hidden_size=H, direction=direction,
                            layout=layout, **attrs)
    y_shape = [T, d, B, H] if layout == 0 else [B, T, d, H]
    graph = helper.make_graph(
        [node], op, graph_inputs,
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, y_shape)] +
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, state) for o in outputs[1:]],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in init.items()] +
        ([init_lens] if lens else []))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    feeds = {"X": rng.standard_normal([T, B, I] if layout == 0 else [B, T, I]).astype(np.float32),
             "initial_h": rng.standard_normal(state).astype(np.float32) * 0.5}
    if op == "LSTM":
        feeds["initial_c"] = rng.standard_normal(state).astype(np.float32) * 0.5
    return m, feeds, outputs


# Batch-major layout (1) is left to ONNX's node tests: onnxruntime's CPU kernels refuse it.
CASES = [
    ("RNN", "bidirectional", 0, True, {}),
    ("RNN", "reverse", 0, False, {}),
    ("GRU", "bidirectional", 0, True, {}),
    ("GRU", "forward", 0, True, {"linear_before_reset": 1}),
    ("GRU", "reverse", 0, True, {}),
    ("LSTM", "bidirectional", 0, True, {}),
    ("LSTM", "reverse", 0, True, {"input_forget": 1}),
    ("LSTM", "forward", 0, False, {}),
]


@pytest.mark.parametrize("op,direction,layout,lens,attrs", CASES)
def test_recurrent_layers_match_onnxruntime(op, direction, layout, lens, attrs):
    rng = np.random.default_rng(hash((op, direction, layout)) % 2**32)
    m, feeds, outputs = model(op, direction, layout, lens, attrs, rng)
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(outputs, feeds)
    got = baton.load(baton.compile(m))(**feeds)
    assert len(got) == len(want)
    for name, g, w in zip(outputs, got, want):
        assert g.shape == w.shape, name
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)
    assert np.abs(want[1]).max() > 0.1  # not a degenerate comparison


def test_clip_and_other_activations_are_refused():
    m, _, _ = model("RNN", "forward", 0, False, {"activations": ["Relu"]}, np.random.default_rng(1))
    with pytest.raises(baton.BatonError, match="activations"):
        baton.compile(m)
    m, _, _ = model("LSTM", "forward", 0, False, {"clip": 0.9}, np.random.default_rng(1))
    with pytest.raises(baton.BatonError, match="'clip'"):
        baton.compile(m)
