"""RNN, GRU and LSTM on the CPU against onnxruntime (issue 38), in the forms ONNX's node tests
leave out: both directions, reverse, sequence lengths (with reverse), LSTM's input_forget and
Y_c, GRU's linear_before_reset, and activations other than the defaults, with their alphas and
betas consumed in order, and `clip`."""
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


# Non-default activations: (op, direction, activations, alphas, betas). The alphas and betas are
# consumed in order by the functions that take them; the ones left out get their defaults.
ACTIVATION_CASES = [
    ("RNN", "forward", ["Relu"], [], []),
    # onnxruntime's RNN (unlike its GRU and LSTM) reads alpha i for activation i, which agrees
    # with consuming them in order when every activation takes one.
    ("RNN", "bidirectional", ["LeakyRelu", "Elu"], [0.2, 0.7], []),
    ("GRU", "bidirectional", ["HardSigmoid", "Elu", "Sigmoid", "ScaledTanh"], [0.3, 0.9, 0.7], [0.45, 1.2]),
    ("GRU", "reverse", ["sigmoid", "softplus"], [], []),
    ("LSTM", "forward", ["HardSigmoid", "Tanh", "Softplus"], [], []),
    ("LSTM", "reverse", ["Sigmoid", "Affine", "ThresholdedRelu"], [0.5, 0.1], [0.2]),
    ("LSTM", "bidirectional", ["Sigmoid", "Tanh", "Relu", "HardSigmoid", "Elu", "Softsign"], [0.25, 0.8], [0.4]),
]


@pytest.mark.parametrize("op,direction,acts,alphas,betas", ACTIVATION_CASES)
def test_other_activations_match_onnxruntime(op, direction, acts, alphas, betas):
    rng = np.random.default_rng(len(acts) * 7 + len(op))
    attrs = {"activations": acts}
    if alphas:
        attrs["activation_alpha"] = alphas
    if betas:
        attrs["activation_beta"] = betas
    m, feeds, outputs = model(op, direction, 0, True, attrs, rng)
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(outputs, feeds)
    got = baton.load(baton.compile(m))(**feeds)
    for name, g, w in zip(outputs, got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)
    assert np.abs(want[1]).max() > 0.1  # not a degenerate comparison
    # The default activations give other results: the attribute was applied.
    default, _, _ = model(op, direction, 0, True, {}, np.random.default_rng(len(acts) * 7 + len(op)))
    assert np.abs(baton.load(baton.compile(default))(**feeds)[1] - want[1]).max() > 1e-3


# `clip` bounds the gates' and candidates' pre-activations to [-clip, clip] (LSTM's gates after
# their peepholes; its cell state reaches the output function unclipped, as onnxruntime
# computes it). Small clips, so that most values are clipped.
CLIP_CASES = [
    ("RNN", "bidirectional", 0.3, {}),
    ("GRU", "forward", 0.4, {}),
    ("GRU", "reverse", 0.25, {"linear_before_reset": 1}),
    ("LSTM", "bidirectional", 0.35, {}),
    ("LSTM", "forward", 0.2, {"activations": ["HardSigmoid", "Elu", "Softplus"]}),
]


@pytest.mark.parametrize("op,direction,clip,attrs", CLIP_CASES)
def test_clip_matches_onnxruntime(op, direction, clip, attrs):
    rng = np.random.default_rng(int(clip * 100))
    m, feeds, outputs = model(op, direction, 0, True, dict(attrs, clip=clip), rng)
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(outputs, feeds)
    got = baton.load(baton.compile(m))(**feeds)
    for name, g, w in zip(outputs, got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)
    unclipped, _, _ = model(op, direction, 0, True, attrs, np.random.default_rng(int(clip * 100)))
    assert np.abs(baton.load(baton.compile(unclipped))(**feeds)[1] - want[1]).max() > 1e-3


def test_bad_clips_and_activation_lists_are_refused():
    m, _, _ = model("LSTM", "forward", 0, False, {"clip": -0.5}, np.random.default_rng(1))
    with pytest.raises(baton.BatonError, match="'clip' is a positive threshold"):
        baton.compile(m)
    m, _, _ = model("GRU", "bidirectional", 0, False, {"activations": ["Sigmoid", "Tanh"]},
                    np.random.default_rng(1))
    with pytest.raises(baton.BatonError, match="2 per direction, 4 in all"):
        baton.compile(m)
    m, _, _ = model("RNN", "forward", 0, False, {"activations": ["Gelu"]}, np.random.default_rng(1))
    with pytest.raises(baton.BatonError, match="'Gelu' is not one of"):
        baton.compile(m)
    m, _, _ = model("RNN", "forward", 0, False, {"activations": ["Affine"]}, np.random.default_rng(1))
    with pytest.raises(baton.BatonError, match="needs its alpha and beta"):
        baton.compile(m)
