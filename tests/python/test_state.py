"""State (docs/state.md): small GPT-2 and LLaMA-style decoders with a static KV cache of 64
positions (tests/e2e/models/decode, made by bench/probes/decode_export/export.py FAMILY VARIANT
dynamo: `gpt2 index_put_full` and `llama index_put_full` write the cache update as ScatterND,
`gpt2 scatter` as ScatterElements), compiled with state so that the program keeps the caches and
the caller passes only the new tokens. Greedy generation, one program for the 8-token prefill and
every decode step, against onnxruntime running the same file with the caches fed back by hand."""
import os

import numpy as np
import pytest

import baton

ort = pytest.importorskip("onnxruntime")

DECODE = os.path.join(os.path.dirname(__file__), "..", "e2e", "models", "decode")
MODELS = ["gpt2_index_put_full_dynamo", "gpt2_scatter_dynamo", "llama_index_put_full_dynamo"]
MAX_LEN = 64
DIMS = {"batch": (1, 8), "new_tokens": (1, MAX_LEN)}


def path(name):
    return os.path.join(DECODE, name + ".onnx")


def feeds(tokens, start):
    batch, count = tokens.shape
    mask = np.zeros((batch, MAX_LEN), np.int64)
    mask[:, :start + count] = 1
    return {"input_ids": tokens, "cache_position": np.arange(start, start + count, dtype=np.int64),
            "attention_mask": mask}


class Reference:
    """onnxruntime with the caches passed in and taken out on every call."""

    def __init__(self, name, batch):
        self.sess = ort.InferenceSession(path(name), providers=["CPUExecutionProvider"])
        self.past = [i for i in self.sess.get_inputs() if i.name.startswith("past_")]
        self.cache = {i.name: np.zeros([batch] + i.shape[1:], np.float32) for i in self.past}

    def __call__(self, f):
        outs = self.sess.run(None, {**f, **self.cache})
        # The outputs after the logits are present_* in the inputs' past_* order.
        self.cache = {i.name: outs[1 + k] for k, i in enumerate(self.past)}
        return outs[0]


def generate(module, reference, prompt, steps):
    """Greedy decoding; returns the worst logits difference and both token sequences."""
    worst, ours, theirs = 0.0, [], []
    tokens, start = prompt, 0
    for _ in range(steps + 1):
        f = feeds(tokens, start)
        expected = reference(f)
        got = np.asarray(module.run(f["input_ids"], f["cache_position"], f["attention_mask"])[0])
        assert got.shape == expected.shape
        worst = max(worst, float(np.abs(got - expected).max()))
        ours.append(got[:, -1].argmax(-1))
        theirs.append(expected[:, -1].argmax(-1))
        start += tokens.shape[1]
        tokens = theirs[-1][:, None].astype(np.int64)  # both continue from the reference's token
    return worst, np.stack(ours), np.stack(theirs)


@pytest.mark.parametrize("name", MODELS)
def test_greedy_generation_with_the_cache_inside_the_program(name):
    module = baton.load(baton.compile(path(name), dims=DIMS, state="auto"), threads=1)
    # The caches are state, not inputs or outputs: the caller passes the new tokens only.
    assert [s.name for s in module.inputs] == ["input_ids", "cache_position", "attention_mask"]
    assert [s.name for s in module.outputs] == ["logits"]
    assert module.state == [(f"past_{kv}_{layer}", f"present_{kv}_{layer}")
                            for layer in range(2) for kv in ("key", "value")]
    rng = np.random.default_rng(11)
    prompt = rng.integers(0, 100, (2, 8)).astype(np.int64)
    worst, ours, theirs = generate(module, Reference(name, 2), prompt, steps=24)
    assert worst < 1e-4, f"{name}: logits differ by {worst}"
    np.testing.assert_array_equal(ours, theirs)

    # reset_state starts a new sequence: a batch-1 prompt from zeroed caches, as a fresh
    # reference sees it (the batch-2 caches of the run above are gone).
    module.reset_state()
    prompt = rng.integers(0, 100, (1, 5)).astype(np.int64)
    worst, ours, theirs = generate(module, Reference(name, 1), prompt, steps=6)
    assert worst < 1e-4, f"{name} after reset_state: logits differ by {worst}"
    np.testing.assert_array_equal(ours, theirs)


def ort_greedy(name, prompt, count):
    """Greedy tokens from onnxruntime fed its caches by hand (batch 1, whole prompt first)."""
    reference = Reference(name, 1)
    tokens, start, out = np.asarray([prompt], np.int64), 0, []
    while len(out) < count:
        logits = reference(feeds(tokens, start))
        out.append(int(logits[0, -1].argmax()))
        start += tokens.shape[1]
        tokens = np.asarray([[out[-1]]], np.int64)
    return out


@pytest.mark.parametrize("name", MODELS)
def test_module_generate_matches_onnxruntime(name):
    module = baton.load(baton.compile(path(name), dims=DIMS, state="auto"), threads=1)
    prompt = [5, 17, 42, 3, 99, 0, 61, 8]
    result = module.generate(prompt, 40)
    assert result["tokens"] == ort_greedy(name, prompt, 40)
    assert result["prefill_calls"] == 1
    assert len(result["token_ms"]) == 39 and result["first_token_ms"] > 0
    # A new sequence each call (reset by default): the same prompt gives the same tokens.
    assert module.generate(prompt, 40)["tokens"] == result["tokens"]
    stop = result["tokens"][5]
    stopped = module.generate(prompt, 40, eos_token_id=stop)["tokens"]
    assert stopped == result["tokens"][:result["tokens"].index(stop) + 1]


def test_module_generate_samples_inside_the_program():
    name = MODELS[2]
    module = baton.load(baton.compile(path(name), dims=DIMS, state="auto", sample="top-k=5"),
                        threads=1)
    assert "sample_uniform" in [s.name for s in module.inputs]
    assert [s.name for s in module.outputs] == ["next_tokens"]
    prompt = [4, 8, 15, 16, 23, 42]
    a = module.generate(prompt, 24, temperature=1.2, top_p=0.95, seed=7)["tokens"]
    assert module.generate(prompt, 24, temperature=1.2, top_p=0.95, seed=7)["tokens"] == a
    assert module.generate(prompt, 24, temperature=1.2, top_p=0.95, seed=8)["tokens"] != a
    # A vanishing temperature draws the most likely token: onnxruntime's greedy tokens.
    assert module.generate(prompt, 24, temperature=1e-4)["tokens"] == ort_greedy(name, prompt, 24)
    with pytest.raises(baton.BatonError, match="temperature must be > 0"):
        module.generate(prompt, 4, temperature=0.0)


def test_module_generate_refuses_a_program_without_state():
    module = baton.load(baton.compile(path(MODELS[0]), dims=DIMS), threads=1)
    with pytest.raises(baton.BatonError, match="keeps no state.*--state auto"):
        module.generate([1, 2], 4)


def test_state_declared_by_name_matches_auto():
    name = MODELS[0]
    pairs = {f"past_{kv}_{layer}": f"present_{kv}_{layer}" for layer in range(2)
             for kv in ("key", "value")}
    declared = baton.load(baton.compile(path(name), dims=DIMS, state=pairs), threads=1)
    assert sorted(declared.state) == sorted(pairs.items())
    auto = baton.load(baton.compile(path(name), dims=DIMS, state="auto"), threads=1)
    prompt = np.arange(16, dtype=np.int64).reshape(2, 8)
    for tokens, start in ((prompt, 0), (prompt[:, :1], 8), (prompt[:, 1:2], 9)):
        f = feeds(np.ascontiguousarray(tokens), start)
        a = declared.run(f["input_ids"], f["cache_position"], f["attention_mask"])[0]
        b = auto.run(f["input_ids"], f["cache_position"], f["attention_mask"])[0]
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_without_state_the_caches_stay_inputs_and_outputs():
    module = baton.load(baton.compile(path(MODELS[0]), dims=DIMS))
    assert module.state == []
    assert len(module.inputs) == 7 and len(module.outputs) == 5


def test_a_pair_that_is_not_an_in_place_update_is_refused_by_name():
    # The other layer's cache has this one's shape, but it is not this input's update.
    with pytest.raises(baton.BatonError, match="the output is computed by ScatterND .* only "
                                               "through a ScatterND or ScatterElements whose "
                                               "data is the input"):
        baton.compile(path(MODELS[0]), dims=DIMS, state={"past_key_0": "present_key_1"})
    with pytest.raises(baton.BatonError, match=r"the input is float32 \[batch, 2, 64, 16\] and "
                                               r"the output float32 \[batch, new_tokens, 100\]"):
        baton.compile(path(MODELS[0]), dims=DIMS, state={"past_key_0": "logits"})
    with pytest.raises(baton.BatonError, match="'past_key_9' is not an input of the model"):
        baton.compile(path(MODELS[0]), dims=DIMS, state={"past_key_9": "present_key_0"})
