"""The baton Python package on a GPU, with PyTorch (issue 13): CUDA tensors in and out without a
copy (pointers checked), a caller stream, a green context, host arrays staged (logged once) or
refused in strict mode, and results equal to the C++ CLI's. Skips, saying why, where there is no
CUDA build, no PyTorch with CUDA, or no GPU (the build machine); runs on the GPU host from the
bundle (scripts/run_gpu_suite.sh)."""
import json
import logging
import os
import pathlib
import subprocess

import numpy as np
import pytest

import baton

REPO = pathlib.Path(__file__).resolve().parents[2]
MLP = REPO / "examples" / "mlp.onnx"
CLI = os.environ.get("BATON_CLI")

if not baton.cuda.is_built():
    pytest.skip("this baton package was built without CUDA", allow_module_level=True)
torch = pytest.importorskip("torch", reason="the GPU tests exchange tensors with PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no GPU here (PyTorch sees no CUDA device)", allow_module_level=True)


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    d = tmp_path_factory.mktemp("gpu")
    paths = {
        "device": d / "mlp_dev.baton",
        "strict": d / "mlp_strict.baton",
        "host": d / "mlp_cpu.baton",
    }
    baton.compile(MLP, paths["device"], device="cuda:0", io="device")
    baton.compile(MLP, paths["strict"], device="cuda:0", io="device", strict_staging=True)
    baton.compile(MLP, paths["host"])
    return paths


@pytest.fixture
def x():
    g = torch.Generator().manual_seed(3)
    return torch.randn(8, 48, generator=g)


def reference(programs, x):
    return baton.load(programs["host"])(x.numpy())[0]


def test_cuda_tensors_in_and_out_without_a_copy(programs, x):
    m = baton.load(programs["device"])
    assert [s.device for s in m.inputs] == ["cuda:0"]
    assert [s.device for s in m.outputs] == ["cuda:0"]
    xd = x.cuda()
    (y,) = m(xd)
    assert m._impl._last_input_pointers == [xd.data_ptr()]
    assert y.device == "cuda:0" and y.shape == [8, 24] and y.dtype == "float32"
    yt = torch.from_dlpack(y)  # Baton's allocation, seen by PyTorch: no copy
    assert yt.device.type == "cuda" and yt.data_ptr() == y.data_ptr
    assert torch.from_dlpack(y).data_ptr() == y.data_ptr  # converted again: the same memory
    np.testing.assert_allclose(yt.cpu().numpy(), reference(programs, x), rtol=1e-5, atol=1e-6)
    # Into a PyTorch buffer: the very tensor comes back, written in place.
    out = torch.full((8, 24), float("nan"), device="cuda")
    ptr = out.data_ptr()
    result = m.run(xd, out=[out])
    assert result[0] is out and out.data_ptr() == ptr
    np.testing.assert_allclose(out.cpu().numpy(), reference(programs, x), rtol=1e-5, atol=1e-6)
    c = m.counters()
    assert c["delegate0.staged_calls"] == 0 and c["delegate0.zero_copy_calls"] >= 2, c


def test_device_array_rows_are_views_that_keep_the_array_alive(programs, x):
    m = baton.load(programs["device"])
    (y,) = m(x.cuda())
    want = reference(programs, x)
    part = y.rows(2, 5)
    assert part.shape == [3, 24] and part.device == "cuda:0" and part.dtype == "float32"
    assert part.data_ptr == y.data_ptr + 2 * 24 * 4  # the same memory, three rows in
    del y  # the view holds the array
    np.testing.assert_allclose(torch.from_dlpack(part).cpu().numpy(), want[2:5], rtol=1e-5,
                               atol=1e-6)
    assert part.rows(0, 0).shape == [0, 24]
    with pytest.raises(IndexError):
        part.rows(1, 4)


def test_caller_stream(programs, x):
    m = baton.load(programs["device"])
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        xd = (x * 1.0).cuda()
        out = torch.empty(8, 24, device="cuda")
    ptr = out.data_ptr()
    result = m.run(xd, out=[out], stream=stream)  # may return before the GPU is done
    assert m._impl._last_input_pointers == [xd.data_ptr()]  # the PyTorch tensor, in place
    assert result[0] is out and out.data_ptr() == ptr
    stream.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), reference(programs, x), rtol=1e-5, atol=1e-6)
    # Baton's own output on the caller's stream, handed to PyTorch without a copy.
    (y,) = m.run(xd, stream=stream)
    stream.synchronize()
    yt = torch.from_dlpack(y)
    assert yt.data_ptr() == y.data_ptr
    assert torch.equal(yt, out)
    assert m.counters()["delegate0.staged_calls"] == 0
    # An integer handle works the same.
    out2 = torch.empty_like(out)
    m.run(xd, out=[out2], stream=stream.cuda_stream)
    stream.synchronize()
    assert torch.equal(out, out2)


def test_dynamic_program_on_a_caller_stream(tmp_path):
    """A dynamic GPU program (batch 1..6, device I/O) with stream=: the call and the copies of its
    outputs are enqueued on the stream; once it is synchronized, each batch's result is the CPU
    program's, at that batch's shape, on the GPU."""
    model = REPO / "tests" / "e2e" / "models" / "real" / "torchscript17_resnet.onnx"
    dims = {"batch": (1, 6)}
    gpu = baton.load(baton.compile(model, tmp_path / "r_gpu.baton", device="cuda:0", io="device", dims=dims))
    cpu = baton.load(baton.compile(model, tmp_path / "r_cpu.baton", dims=dims))
    stream = torch.cuda.Stream()
    g = torch.Generator().manual_seed(5)
    for batch in (4, 1, 6):
        x = torch.randn(batch, 3, 32, 32, generator=g)
        xd = x.cuda()
        torch.cuda.synchronize()
        (y,) = gpu.run(xd, stream=stream)
        stream.synchronize()
        assert y.device == "cuda:0" and y.shape == [batch, 10]
        np.testing.assert_allclose(torch.from_dlpack(y).cpu().numpy(), cpu(x.numpy())[0],
                                   rtol=1e-4, atol=1e-4, err_msg=f"batch {batch}")


def test_green_context(programs, x):
    ctx = baton.cuda.GreenContext(sms=16)
    assert ctx.sms >= 16 and ctx.stream != 0
    m = baton.load(programs["device"])
    xd = x.cuda()
    torch.cuda.synchronize()
    out = torch.empty(8, 24, device="cuda")
    m.run(xd, out=[out], stream=ctx.stream)
    torch.cuda.ExternalStream(ctx.stream).synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), reference(programs, x), rtol=1e-5, atol=1e-6)


def test_host_arrays_are_staged_and_logged_once(programs, x, caplog):
    caplog.set_level(logging.INFO, logger="baton")
    m = baton.load(programs["device"])
    (y1,) = m(x.numpy())
    (y2,) = m(x.numpy())
    np.testing.assert_allclose(torch.from_dlpack(y1).cpu().numpy(), reference(programs, x),
                               rtol=1e-5, atol=1e-6)
    staged = [r for r in caplog.records if r.name == "baton" and "stag" in r.getMessage()]
    assert len(staged) == 1, caplog.text
    assert m.counters()["delegate0.staged_calls"] == 2


def test_strict_staging_refuses_host_arrays(programs, x):
    m = baton.load(programs["strict"])
    with pytest.raises(baton.BatonError, match="stag"):
        m(x.numpy())
    (y,) = m(x.cuda())
    np.testing.assert_allclose(torch.from_dlpack(y).cpu().numpy(), reference(programs, x),
                               rtol=1e-5, atol=1e-6)


def test_results_equal_the_cli(programs, tmp_path):
    if not CLI:
        pytest.skip("BATON_CLI is not set")
    x = np.random.default_rng(5).standard_normal((8, 48)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    subprocess.run([CLI, "run", str(programs["device"]), "--input", f"input={tmp_path / 'x.npy'}",
                    "--iterations", "1", "--output-dir", str(tmp_path / "cli")], check=True,
                   capture_output=True)
    (y,) = baton.load(programs["device"])(torch.from_numpy(x).cuda())
    manifest = json.loads((tmp_path / "cli" / "outputs.json").read_text())
    np.testing.assert_array_equal(torch.from_dlpack(y).cpu().numpy(),
                                  np.load(manifest["outputs"][0]["file"]))
