"""Issue 38's LSTM tagger, ESPCN, a small Swin, a small Whisper encoder and a small UNet, and
issue 41's small T5 encoder and LLaMA-style stack (tests/e2e/models/zoo, exported from PyTorch by
tests/e2e/export_real_models.py --only lstm_tagger,espcn,swin,whisper,unet,t5,llama through both
exporters)
on the CPU
against onnxruntime: at the exported shape, at other shapes where the export left dimensions
symbolic (TorchScript's batch and sequence), one program over a range of shapes (dims), and on
one and two threads. Random token ids and images, never zeros."""
import json
import os

import numpy as np
import pytest

import baton

ort = pytest.importorskip("onnxruntime")

ZOO = os.path.join(os.path.dirname(__file__), "..", "e2e", "models", "zoo")
with open(os.path.join(ZOO, "manifest.json")) as f:
    CASES = {c["name"]: c for c in json.load(f)["cases"]}
NAMES = sorted(CASES)


def onnxruntime(name, feeds):
    sess = ort.InferenceSession(os.path.join(ZOO, name + ".onnx"),
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def random_input(name, shape, rng):
    if "lstm" in name:  # token ids below the small tagger's vocabulary (200)
        return rng.integers(0, 200, shape, dtype=np.int64)
    return rng.standard_normal(shape).astype(np.float32)


def test_the_zoo_has_both_exporters_for_both_models():
    for model in ("lstm_tagger", "espcn"):
        for style in ("torchscript17", "dynamo18", "dynamo20"):
            assert f"{style}_{model}" in CASES


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("threads", [1, 2])
def test_exported_shape_matches_torch_and_onnxruntime(name, threads):
    case = CASES[name]
    inputs = [np.load(os.path.join(ZOO, f"{name}.input_{i}.npy"))
              for i in range(len(case["inputs"]))]
    torch_out = np.load(os.path.join(ZOO, f"{name}.output_0.npy"))
    feeds = dict(zip(case["inputs"], inputs))
    program = baton.compile(os.path.join(ZOO, case["model"]), shapes=case["shapes"] or None)
    (got,) = baton.load(program, threads=threads)(**feeds)
    want = onnxruntime(name, feeds)
    assert got.shape == want.shape == torch_out.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, torch_out, rtol=1e-4, atol=1e-5)
    assert np.abs(want).max() > 0.1  # outputs of order one: not a degenerate comparison


# TorchScript exports keep the batch (and the tagger's sequence) symbolic: each shape fixed at
# compile, and then one program whose dimensions stay dynamic over a range.
SHAPES = {"torchscript17_lstm_tagger": [(1, 1), (3, 20), (2, 57)],
          "torchscript17_espcn": [(2, 3, 16, 16), (5, 3, 16, 16)],
          "torchscript17_unet": [(3, 3, 32, 32)],
          "torchscript17_whisper": [(2, 80, 200)]}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_other_shapes_match_onnxruntime(name):
    case = CASES[name]
    rng = np.random.default_rng(len(name))
    for shape in SHAPES[name]:
        x = random_input(name, shape, rng)
        feeds = {case["inputs"][0]: x}
        program = baton.compile(os.path.join(ZOO, case["model"]), shapes={case["inputs"][0]: shape})
        (got,) = baton.load(program, threads=1)(**feeds)
        np.testing.assert_allclose(got, onnxruntime(name, feeds), rtol=1e-4, atol=1e-5,
                                   err_msg=str(shape))


def test_one_dynamic_tagger_program_serves_every_shape():
    name = "torchscript17_lstm_tagger"
    program = baton.compile(os.path.join(ZOO, CASES[name]["model"]),
                            dims={"batch": (1, 4), "sequence": (1, 64)})
    module = baton.load(program, threads=2)
    rng = np.random.default_rng(7)
    for shape in [(1, 1), (4, 64), (2, 9), (3, 33), (1, 64)]:
        ids = random_input(name, shape, rng)
        (got,) = module(input_ids=ids)
        np.testing.assert_allclose(got, onnxruntime(name, {"input_ids": ids}), rtol=1e-4,
                                   atol=1e-5, err_msg=str(shape))
