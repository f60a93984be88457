"""The baton Python package on the CPU (issue 13): compile / load / run / inspect, DLPack round
trips with NumPy without copies (pointers checked), and every error path. Run by `make test`
(CTest `python_test`) with the package from the build tree on PYTHONPATH."""
import json
import logging
import os
import pathlib
import subprocess

import numpy as np
import pytest

import baton

REPO = pathlib.Path(__file__).resolve().parents[2]
MODELS = REPO / "tests" / "e2e" / "models"
MLP = REPO / "examples" / "mlp.onnx"
CLI = os.environ.get("BATON_CLI")


def pointer(a):
    return a.__array_interface__["data"][0]


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    path = tmp_path_factory.mktemp("mlp") / "mlp.baton"
    assert baton.compile(MLP, path) == str(path)
    return path


@pytest.fixture
def x():
    return np.random.default_rng(7).standard_normal((8, 48)).astype(np.float32)


def test_metadata(mlp):
    m = baton.load(mlp)
    assert [(s.name, s.dtype, s.shape, s.device) for s in m.inputs] == [
        ("input", "float32", [8, 48], "cpu")]
    assert [(s.name, s.dtype, s.shape, s.device) for s in m.outputs] == [
        ("output", "float32", [8, 24], "cpu")]
    assert "input" in repr(m)


@pytest.mark.parametrize("name", ["torchscript17_mlp_gelu", "dynamo18_mlp_relu",
                                  "dynamo20_mlp_gelu_odd"])
def test_committed_models_match_their_reference_and_the_cli(name, tmp_path):
    """Each committed e2e model: Baton's Python result equals `baton run`'s (same program, same
    input) and the reference output written when the model was exported."""
    onnx_path = MODELS / f"{name}.onnx"
    x = np.load(MODELS / f"{name}.input_0.npy")
    expected = np.load(MODELS / f"{name}.output_0.npy")
    case = next(c for c in json.loads((MODELS / "manifest.json").read_text())["cases"]
                if c["name"] == name)
    program = tmp_path / "m.baton"
    baton.compile(onnx_path, program, shapes=case["shapes"])
    m = baton.load(program)
    (y,) = m(x)
    np.testing.assert_allclose(y, expected, rtol=case["tolerance"], atol=case["tolerance"])
    if CLI:
        name_in = m.inputs[0].name
        subprocess.run([CLI, "run", str(program), "--input", f"{name_in}={MODELS / f'{name}.input_0.npy'}",
                        "--iterations", "1", "--output-dir", str(tmp_path / "cli")],
                       check=True, capture_output=True)
        # outputs.json names the file of each output (output_<i>_<name>.npy).
        manifest = json.loads((tmp_path / "cli" / "outputs.json").read_text())
        assert manifest["outputs"][0]["name"] == m.outputs[0].name
        np.testing.assert_array_equal(y, np.load(manifest["outputs"][0]["file"]))


def test_inputs_are_bound_without_a_copy(mlp, x):
    m = baton.load(mlp)
    m(x)
    assert m._impl._last_input_pointers == [pointer(x)]
    # A contiguous view into a larger array is bound where it is, too.
    big = np.random.default_rng(1).standard_normal((10, 48)).astype(np.float32)
    view = big[1:9]
    (y,) = m(view)
    assert m._impl._last_input_pointers == [pointer(big) + 48 * 4]
    np.testing.assert_array_equal(y, m(np.ascontiguousarray(view))[0])


def test_outputs_come_back_without_a_copy(mlp, x):
    m = baton.load(mlp)
    out = np.full((8, 24), np.nan, dtype=np.float32)
    before = pointer(out)
    result = m.run(x, out=[out])
    assert result[0] is out and pointer(out) == before
    assert not np.isnan(out).any()
    (y,) = m(x)
    np.testing.assert_array_equal(y, out)
    # A fresh output is a NumPy array owning Baton's allocation; DLPack hands the same memory on.
    assert isinstance(y, np.ndarray)
    assert pointer(np.from_dlpack(y)) == pointer(y)


def test_named_inputs_and_bytes_programs(mlp, x):
    m = baton.load(mlp)
    (a,) = m(input=x)
    program = baton.compile(MLP)
    assert isinstance(program, bytes) and program[4:8] != b""
    (b,) = baton.load(program)(x)
    np.testing.assert_array_equal(a, b)


def test_compile_takes_a_model_proto(x):
    onnx = pytest.importorskip("onnx")
    program = baton.compile(onnx.load(MLP))
    (a,) = baton.load(program)(x)
    (b,) = baton.load(baton.compile(MLP))(x)
    np.testing.assert_array_equal(a, b)


def test_results_are_stable_across_calls_and_threads(mlp, x):
    m = baton.load(mlp, threads=1)
    (a,) = m(x)
    (b,) = baton.load(mlp, threads=2)(x)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    (c,) = m(x)
    np.testing.assert_array_equal(a, c)
    x2 = x * 2
    (d,) = m(x2)
    assert not np.array_equal(a, d)


def test_inspect_matches_the_cli(mlp):
    info = baton.inspect(mlp)
    assert info["methods"][0]["name"] == "forward"
    if CLI:
        cli = json.loads(subprocess.run([CLI, "inspect", str(mlp), "--json"], check=True,
                                        capture_output=True, text=True).stdout)
        assert info == cli


# ---- error paths: each raises baton.BatonError (a RuntimeError) with Baton's message ----------

def test_error_is_a_runtime_error():
    assert issubclass(baton.BatonError, RuntimeError)


def test_error_missing_model(tmp_path):
    with pytest.raises(baton.BatonError, match="nonexistent.onnx"):
        baton.compile(tmp_path / "nonexistent.onnx")


def test_error_not_a_model(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\x01 not a model")
    with pytest.raises(baton.BatonError):
        baton.compile(bad)
    with pytest.raises(baton.BatonError, match="model= takes a path"):
        baton.compile(42)


def test_error_bad_compile_options():
    with pytest.raises(baton.BatonError, match="is not a GPU"):
        baton.compile(MLP, device="tpu:0")
    with pytest.raises(baton.BatonError, match="apply to GPU targets"):
        baton.compile(MLP, precision="fp16")
    with pytest.raises(baton.BatonError, match="io='sideways'"):
        baton.compile(MLP, io="sideways")
    with pytest.raises(baton.BatonError, match="no optimizer pass 'nope'"):
        baton.compile(MLP, disable_passes=["nope"])
    with pytest.raises(baton.BatonError, match="nope"):
        baton.compile(MLP, shapes={"nope": (1, 2)})
    with pytest.raises(baton.BatonError, match="does not exist"):
        baton.compile(MLP, "/nonexistent-folder/m.baton")


def test_error_missing_or_damaged_program(tmp_path, mlp):
    with pytest.raises(baton.BatonError, match="cannot open"):
        baton.load(tmp_path / "nope.baton")
    damaged = bytearray(pathlib.Path(mlp).read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    with pytest.raises(baton.BatonError, match="checksum"):
        baton.load(bytes(damaged))
    with pytest.raises(baton.BatonError, match="no method 'backward'|method 'backward'"):
        baton.load(mlp, method="backward")
    with pytest.raises(baton.BatonError):
        baton.inspect(tmp_path / "nope.baton")


def test_error_wrong_inputs(mlp, x):
    m = baton.load(mlp)
    with pytest.raises(baton.BatonError, match="takes 1 inputs"):
        m(x, x)
    with pytest.raises(baton.BatonError, match="takes 1 inputs"):
        m()
    with pytest.raises(baton.BatonError, match="no input 'wrong'"):
        m(input=x, wrong=x)
    with pytest.raises(baton.BatonError, match="input 'input' is missing"):
        m(other=x)
    with pytest.raises(baton.BatonError, match="either in order or by name"):
        m._impl._run([x], {"input": x}, None, None)
    with pytest.raises(baton.BatonError, match="not C-contiguous"):
        m(np.asfortranarray(x))
    with pytest.raises(baton.BatonError, match="float64|dtype"):
        m(x.astype(np.float64))
    with pytest.raises(baton.BatonError, match=r"\[8, 48\]|shape|sizes"):
        m(x[:4])
    with pytest.raises(baton.BatonError, match="DLPack dtype"):
        m(np.zeros((8, 48), dtype=np.complex64))


def test_error_wrong_out_buffers(mlp, x):
    m = baton.load(mlp)
    with pytest.raises(baton.BatonError, match="out= has 2 buffers"):
        m.run(x, out=[np.empty((8, 24), np.float32)] * 2)
    with pytest.raises(baton.BatonError, match=r"\[8, 24\]|shape|sizes"):
        m.run(x, out=[np.empty((8, 25), np.float32)])
    with pytest.raises(baton.BatonError, match="not C-contiguous"):
        m.run(x, out=[np.empty((24, 8), np.float32).T])


def test_error_stream_argument(mlp, x):
    m = baton.load(mlp)
    with pytest.raises(baton.BatonError, match="stream= takes"):
        m.run(x, stream="fast")


def test_green_context_says_why_it_cannot_be_made():
    """Without CUDA in the build, or without a GPU, asking for a green context raises BatonError
    saying which; on a GPU host it is made (test_baton_cuda.py runs a program in one)."""
    try:
        ctx = baton.cuda.GreenContext(sms=16)
    except baton.BatonError as e:
        text = str(e)
        if not baton.cuda.is_built():
            assert "without CUDA" in text
        else:
            assert any(w in text for w in ("GPU", "device", "driver", "CUDA")), text
    else:
        assert ctx.sms >= 16 and ctx.stream != 0


def test_log_messages_reach_python_logging(caplog):
    """Baton's log lines go to Python's logging, logger "baton": here the compiler's warning
    about a partition map naming partitions the model does not have."""
    if not baton.cuda.is_built():
        pytest.skip("needs the CUDA backend's compiler (builds for sm_90 without a GPU)")
    caplog.set_level(logging.INFO, logger="baton")
    baton.compile(MLP, device="0=cuda:0,5=cuda:0", arch="sm_90")
    warnings = [r for r in caplog.records if r.name == "baton" and r.levelno == logging.WARNING]
    assert any("partition map names partitions" in r.getMessage() for r in warnings), caplog.text


def test_cuda_and_load_options_are_dictionaries_checked_by_name(tmp_path):
    """cuda_options= and load_options= are the CLI's --cuda-option and --load-option: recorded in
    each engine (inspect shows them) and refused by name with the valid keys or values."""
    with pytest.raises(baton.BatonError, match="apply to GPU targets"):
        baton.compile(MLP, cuda_options={"conv_rows": "cudnn"})
    plain = baton.compile(MLP)
    with pytest.raises(baton.BatonError, match="unknown load option 'cuda_graph'"):
        baton.load(plain, load_options={"cuda_graph": False})
    if not baton.cuda.is_built():
        pytest.skip("needs the CUDA backend (builds for sm_90 without a GPU)")
    # A valid CUDA load option is taken by a CPU-only program too; booleans are 1 / 0.
    assert baton.load(plain, load_options={"cuda_graphs": False, "graph_edges": "full"}).inputs
    with pytest.raises(baton.BatonError,
                       match="load option graph_edges='captured': the value is one of own, full"):
        baton.load(plain, load_options={"graph_edges": "captured"})
    with pytest.raises(baton.BatonError, match="cuda_options=: CUDA build option "
                       "conv_rows='sideways': the value is one of kernel, cudnn"):
        baton.compile(MLP, device="cuda:0", arch="sm_90", cuda_options={"conv_rows": "sideways"})
    with pytest.raises(baton.BatonError, match="unknown CUDA build option 'conv_row'"):
        baton.compile(MLP, device="cuda:0", arch="sm_90", cuda_options={"conv_row": "cudnn"})
    path = tmp_path / "gpu.baton"
    baton.compile(MLP, path, device="cuda:0", arch="sm_90",
                  cuda_options={"gemm_gelu": "kernel", "tune_candidates": 1})
    delegates = baton.inspect(path)["methods"][0]["delegates"]
    assert delegates
    for d in delegates:
        assert d["engine"]["options"]["gemm_gelu"] == "kernel"
        assert d["engine"]["options"]["tune_candidates"] == "1"
        assert d["engine"]["options"]["conv_rows"] == "kernel"


def test_the_gil_is_released_while_a_program_runs(tmp_path):
    """Another Python thread keeps running while run() executes: with the GIL held, the main
    thread's loop below would stall for the whole call (hundreds of ms)."""
    import threading
    import time

    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((1024, 1024)).astype(np.float32), "w")
    nodes, prev = [], "x"
    for i in range(8):
        nodes.append(helper.make_node("MatMul", [prev, "w"], [f"h{i}"]))
        prev = f"h{i}"
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [512, 1024])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [512, 1024])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m = baton.load(baton.compile(model), threads=1)
    x = (rng.standard_normal((512, 1024)) * 0.03).astype(np.float32)

    start = time.perf_counter()
    m(x)
    call = time.perf_counter() - start
    if call < 0.05:
        pytest.skip(f"one call takes {call * 1e3:.0f} ms here: too short to tell")

    done = threading.Event()
    worker = threading.Thread(target=lambda: (m(x), done.set()))
    worker.start()
    gaps, last = [], time.perf_counter()
    while not done.is_set():
        sum(range(200))  # pure Python: needs the GIL
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
    worker.join()
    assert len(gaps) > 10 and max(gaps) < call / 2, (call, max(gaps), len(gaps))


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", "int64", "int32", "int16",
                                   "int8", "uint8", "bool"])
def test_every_dtype_round_trips(dtype):
    """Each dtype Baton has goes in and comes back as the same NumPy dtype and values (DLPack's
    type codes both ways), through an Identity program."""
    onnx = pytest.importorskip("onnx")
    from onnx import helper

    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "id",
                              [helper.make_tensor_value_info("x", elem, [3, 5])],
                              [helper.make_tensor_value_info("y", elem, [3, 5])])
    m = baton.load(baton.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])))
    assert m.inputs[0].dtype == dtype
    x = (np.random.default_rng(2).standard_normal((3, 5)) * 50).astype(dtype)
    (y,) = m(x)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(y, x)


def test_every_cli_compile_option_is_a_keyword(tmp_path):
    # One request builder serves the CLI and Python (baton/compiler/request.h): the options the
    # Python package lacked before it now work here and are checked the same way.
    plain = baton.load(baton.compile(MLP))
    exposed = baton.load(baton.compile(MLP, expose_intermediates=True))
    assert len(exposed.outputs) > len(plain.outputs)
    with pytest.raises(baton.BatonError, match="arena"):
        baton.compile(MLP, max_arena_bytes=64)
    kept = baton.compile(MLP, max_fold_bytes=0, max_total_fold_bytes=0, max_fold_work=0)
    assert baton.load(kept).outputs[0].shape == plain.outputs[0].shape
    for gpu_only in ({"target_device": "cuda:0"}, {"max_partition_nodes": 2}):
        with pytest.raises(baton.BatonError, match="apply to GPU targets: add device=.cuda:N."):
            baton.compile(MLP, **gpu_only)
    with pytest.raises(baton.BatonError, match="device='cuda:x'"):
        baton.compile(MLP, device="cuda:x")
    # fallback= is --fallback: the MLP runs whole on the GPU, so even "error" compiles, and the
    # program lists no node left on the CPU.
    whole = baton.compile(MLP, tmp_path / "whole.baton", device="cuda:0", arch="sm_90",
                          fallback="error")
    assert baton.inspect(whole)["methods"][0]["fallbacks"] == []
    with pytest.raises(baton.BatonError, match="fallback='sometimes': expected 'allow', 'warn' or"):
        baton.compile(MLP, device="cuda:0", arch="sm_90", fallback="sometimes")


def test_dynamic_programs_take_any_shape_in_range(tmp_path):
    """dims= keeps dim_params dynamic (docs/dynamic_shapes.md): one program runs at every shape
    in the ranges, equal to the program compiled for that shape, and bad shapes say which input,
    axis, size and range."""
    model = MODELS / "real" / "torchscript17_bert.onnx"
    program = baton.compile(model, tmp_path / "bert.baton", dims={"batch": (1, 4), "sequence": (1, 16, 8)})
    m = baton.load(program)
    assert [s.dims for s in m.inputs] == [["batch", "sequence"], ["batch", "sequence"]]
    assert m.inputs[0].shape == [4, 16]
    assert m.outputs[0].dims[:2] == ["batch", "sequence"]
    rng = np.random.default_rng(3)
    for batch, seq in [(1, 1), (3, 9), (4, 16), (2, 5)]:
        ids = rng.integers(0, 99, (batch, seq), dtype=np.int64)
        mask = rng.integers(0, 2, (batch, seq), dtype=np.int64)
        (y,) = m(ids, mask)
        assert y.shape[:2] == (batch, seq)
        fixed = baton.load(baton.compile(model, shapes={"input_ids": (batch, seq),
                                                        "attention_mask": (batch, seq)}))
        (z,) = fixed(ids, mask)
        np.testing.assert_array_equal(y, z)
    with pytest.raises(baton.BatonError, match=r"axis 1 \('sequence'\) has size 17, outside the range 1..16"):
        m(np.zeros((2, 17), np.int64), np.zeros((2, 17), np.int64))
    with pytest.raises(baton.BatonError, match="inputs that share a dimension name must agree"):
        m(np.zeros((2, 5), np.int64), np.zeros((3, 5), np.int64))
    with pytest.raises(baton.BatonError, match=r"dims=: --dim 'batch=0..4'"):
        baton.compile(model, dims={"batch": (0, 4), "sequence": (1, 8)})
    with pytest.raises(baton.BatonError, match=r"needs \(MIN, MAX\) or \(MIN, MAX, OPT\)"):
        baton.compile(model, dims={"batch": (4,)})
    with pytest.raises(baton.BatonError, match="--dim sequence=MIN..MAX"):
        baton.compile(model, dims={"batch": (1, 4)})
    with pytest.raises(baton.BatonError, match="out= with a dynamic program is not supported"):
        m(np.zeros((2, 5), np.int64), np.zeros((2, 5), np.int64), out=[np.zeros((4, 16, 32), np.float32)])
    # stream= is read as for a static program (its GPU use is test_baton_cuda.py's).
    with pytest.raises(baton.BatonError, match="stream= takes"):
        m(np.zeros((2, 5), np.int64), np.zeros((2, 5), np.int64), stream="fast")


def test_dynamic_programs_prepare_shapes_by_symbol(tmp_path):
    """Module.prepare_shape and load(prepare_shapes=...) (Method::prepare_shape): a shape is
    named by its symbols, checked by name and range, and preparing it changes nothing a call
    sees; on the CPU there is nothing else to prepare."""
    model = MODELS / "real" / "torchscript17_bert.onnx"
    program = baton.compile(model, tmp_path / "bert.baton", dims={"batch": (1, 4), "sequence": (1, 16)})
    m = baton.load(program, prepare_shapes=[{"batch": 1, "sequence": 16}, {"sequence": 3, "batch": 4}])
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 99, (2, 5), dtype=np.int64)
    mask = rng.integers(0, 2, (2, 5), dtype=np.int64)
    (before,) = m(ids, mask)
    m.prepare_shape(batch=3, sequence=9)
    (after,) = m(ids, mask)
    assert after.shape[:2] == (2, 5)
    np.testing.assert_array_equal(before, after)
    with pytest.raises(baton.BatonError, match="has no symbol 'seq' to prepare a shape for; its symbols are batch, sequence"):
        m.prepare_shape(batch=1, seq=3)
    with pytest.raises(baton.BatonError, match="gives no size for 'sequence'"):
        m.prepare_shape(batch=1)
    with pytest.raises(baton.BatonError, match=r"cannot prepare sequence=0, outside the range 1..16"):
        baton.load(program, prepare_shapes=[{"batch": 1, "sequence": 0}])
    with pytest.raises(TypeError, match="a list of shapes"):
        baton.load(program, prepare_shapes={"batch": 1, "sequence": 2})


def test_dims_named_separately_by_torch_export_are_made_one(tmp_path):
    """torch.export names each input's batch separately (input_ids [s33, s50], attention_mask
    [s6, s50]); dims={"s6": "s33"} makes them one dimension (--dim s6=s33)."""
    model = MODELS / "real" / "dynamo18dyn_bert.onnx"
    m = baton.load(baton.compile(model, dims={"s33": (1, 4), "s6": "s33", "s50": (1, 16)}))
    assert [s.dims for s in m.inputs] == [["s33", "s50"], ["s33", "s50"]]
    rng = np.random.default_rng(5)
    for batch, seq in [(1, 1), (3, 9), (4, 16)]:
        (y,) = m(rng.integers(0, 99, (batch, seq), dtype=np.int64),
                 rng.integers(0, 2, (batch, seq), dtype=np.int64))
        assert y.shape[:2] == (batch, seq)
    with pytest.raises(baton.BatonError, match="must agree"):
        m(np.zeros((2, 5), np.int64), np.zeros((3, 5), np.int64))
    with pytest.raises(baton.BatonError, match="'s33', which has no range"):
        baton.compile(model, dims={"s6": "s33", "s50": (1, 16)})
