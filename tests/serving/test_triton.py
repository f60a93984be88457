"""Baton behind a real Triton Inference Server (issue 40; docs/serving.md).

Writes model repositories with `baton triton-repo` (and `baton.triton_repo`), starts the
`tritonserver` of PyPI's nvidia-pytriton wheel on 127.0.0.1 with free ports, and talks to it with
tritonclient over HTTP and gRPC: outputs against the same program run by Baton alone, at several
batch sizes and concurrencies; the server's statistics show that dynamic batching joined requests;
bad requests get Triton errors while the server keeps serving; the server stops cleanly. Every
loop is bounded in count and time. CPU programs only (the GPU run is bench/triton_bench.py's, on a
GPU host).
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import baton

tritonclient = pytest.importorskip("tritonclient.http", reason="tritonclient is installed by "
                                   "scripts/setup.sh")
import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

CLI = os.environ.get("BATON_CLI", "baton")
MAX_BATCH = 8
START_TIMEOUT_S = 90


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mlp_onnx(path, batch):
    """x [batch|2, 16] -> MatMul, Relu, MatMul -> y [.., 4] and its softmax p."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(7)
    w1 = numpy_helper.from_array((rng.standard_normal((16, 32)) * 0.3).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((32, 4)) * 0.3).astype(np.float32), "w2")
    lead = "batch" if batch else 2
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["y"]),
         helper.make_node("Softmax", ["y"], ["p"], axis=-1)],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [lead, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [lead, 4]),
         helper.make_tensor_value_info("p", TensorProto.FLOAT, [lead, 4])],
        [w1, w2])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def _python_path():
    import numpy
    dirs = []
    for module in (baton.__file__, numpy.__file__):
        site = os.path.dirname(os.path.dirname(os.path.abspath(module)))
        if site not in dirs:
            dirs.append(site)
    return dirs


def _pytriton():
    import importlib.util
    spec = importlib.util.find_spec("pytriton")
    assert spec is not None, "nvidia-pytriton is not installed: run scripts/setup.sh"
    root = os.path.dirname(spec.origin)
    return os.path.join(root, "tritonserver"), os.path.join(os.path.dirname(root),
                                                            "nvidia_pytriton.libs")


class Server:
    def __init__(self, repo, workdir):
        server_dir, libs = _pytriton()
        # The Python backend, with the stub for this interpreter's version (it embeds the
        # system's libpython of that version; docs/serving.md).
        backends = os.path.join(workdir, "backends")
        shutil.copytree(os.path.join(server_dir, "backends", "python"),
                        os.path.join(backends, "python"))
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        stub = os.path.join(server_dir, "python_backend_stubs", version,
                            "triton_python_backend_stub")
        assert os.path.exists(stub), f"pytriton has no Python backend stub for {version}"
        shutil.copy(stub, os.path.join(backends, "python"))
        self.http_port, self.grpc_port, self.metrics_port = (_free_port() for _ in range(3))
        self.log_path = os.path.join(workdir, "tritonserver.log")
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = libs + os.pathsep + env.get("LD_LIBRARY_PATH", "")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [os.path.join(server_dir, "bin", "tritonserver"), "--model-repository", repo,
             "--backend-directory", backends, "--http-address", "127.0.0.1",
             "--http-port", str(self.http_port), "--grpc-address", "127.0.0.1",
             "--grpc-port", str(self.grpc_port), "--metrics-address", "127.0.0.1",
             "--metrics-port", str(self.metrics_port), "--exit-timeout-secs", "20"],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.http = httpclient.InferenceServerClient(f"127.0.0.1:{self.http_port}",
                                                     concurrency=16, network_timeout=60)
        self.grpc = grpcclient.InferenceServerClient(f"127.0.0.1:{self.grpc_port}")
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"tritonserver exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                if self.http.is_server_ready():
                    return
            except Exception:  # not listening yet
                pass
            time.sleep(0.25)
        self.stop()
        pytest.fail(f"tritonserver was not ready in {START_TIMEOUT_S} s:\n{self.log_tail()}")

    def log_tail(self, n=40):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path) as f:
            return "".join(f.readlines()[-n:])

    def stop(self):
        """SIGTERM, then a bounded wait; the exit status. The clients close first: the server
        waits (up to --exit-timeout-secs, then exits with 1) for open connections."""
        self.http.close()
        self.grpc.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
                pytest.fail(f"tritonserver did not stop within 40 s of SIGTERM:\n{self.log_tail()}")
        self.log.close()
        return self.proc.returncode


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    work = str(tmp_path_factory.mktemp("triton"))
    repo = os.path.join(work, "repo")
    programs = {}
    for name, batch in (("mlp", True), ("fixed", False)):
        onnx_path = os.path.join(work, f"{name}.onnx")
        _mlp_onnx(onnx_path, batch)
        program = os.path.join(work, f"{name}.baton")
        cmd = [CLI, "compile", onnx_path, "-o", program, "-q"]
        if batch:
            cmd += ["--dim", f"batch=1..{MAX_BATCH}"]
        subprocess.run(cmd, check=True, timeout=120)
        programs[name] = program
    # The batching model through the CLI (two instances, a queue delay long enough for concurrent
    # requests to meet), the fixed-shape one through the Python API.
    args = [CLI, "triton-repo", programs["mlp"], repo, "--max-batch", str(MAX_BATCH),
            "--instances", "2", "--queue-delay-us", "20000", "--threads", "1"]
    for d in _python_path():
        args += ["--baton-python", d]
    out = subprocess.run(args, check=True, timeout=60, capture_output=True, text=True)
    assert "batching: up to 8" in out.stdout
    written = baton.triton_repo(programs["fixed"], repo, threads=1)
    assert written["max_batch_size"] == 0 and written["batch_symbol"] == ""
    server = Server(repo, work)
    yield server, {k: baton.load(v, threads=1) for k, v in programs.items()}
    code = server.stop()
    assert code == 0, f"tritonserver exited with {code} after SIGTERM:\n{server.log_tail()}"


def _http_infer(client, model, x, name="x", datatype="FP32"):
    i = httpclient.InferInput(name, list(x.shape), datatype)
    i.set_data_from_numpy(x)
    r = client.infer(model, [i])
    return r.as_numpy("y"), r.as_numpy("p")


def _grpc_infer(client, model, x):
    i = grpcclient.InferInput("x", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    r = client.infer(model, [i], client_timeout=60)
    return r.as_numpy("y"), r.as_numpy("p")


def _expect_close(got, want):
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_config_describes_the_program(served):
    server, _ = served
    config = server.http.get_model_config("mlp")
    assert config["max_batch_size"] == MAX_BATCH
    assert [i["name"] for i in config["input"]] == ["x"]
    assert config["input"][0]["data_type"] == "TYPE_FP32" and config["input"][0]["dims"] == [16]
    assert [o["name"] for o in config["output"]] == ["y", "p"]
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == 20000
    assert config["instance_group"][0]["count"] == 2
    assert config["instance_group"][0]["kind"] == "KIND_CPU"
    fixed = server.http.get_model_config("fixed")
    assert fixed["max_batch_size"] == 0 and fixed["input"][0]["dims"] == [2, 16]


@pytest.mark.parametrize("rows", [1, 3, MAX_BATCH])
def test_http_and_grpc_give_batons_outputs(served, rows):
    server, modules = served
    x = np.random.default_rng(rows).standard_normal((rows, 16)).astype(np.float32)
    want = modules["mlp"].run(x)
    _expect_close(_http_infer(server.http, "mlp", x), want)
    _expect_close(_grpc_infer(server.grpc, "mlp", x), want)


def test_a_model_without_a_batch_dimension_serves_its_shape(served):
    server, modules = served
    x = np.random.default_rng(11).standard_normal((2, 16)).astype(np.float32)
    _expect_close(_http_infer(server.http, "fixed", x), modules["fixed"].run(x))
    _expect_close(_grpc_infer(server.grpc, "fixed", x), modules["fixed"].run(x))


@pytest.mark.parametrize("concurrency", [4, 16])
def test_concurrent_requests_are_batched_and_answered_right(served, concurrency):
    server, modules = served
    before = server.http.get_inference_statistics("mlp")["model_stats"][0]
    rng = np.random.default_rng(concurrency)
    # Each request its own rows (1 to 3), so a mix-up between requests would show. One client
    # with `concurrency` connections keeps that many requests in flight (tritonclient.http runs
    # on gevent: a client belongs to the thread that made it).
    inputs = [rng.standard_normal((int(rng.integers(1, 4)), 16)).astype(np.float32)
              for _ in range(4 * concurrency)]
    client = httpclient.InferenceServerClient(f"127.0.0.1:{server.http_port}",
                                              concurrency=concurrency, network_timeout=60)
    pending = []
    for x in inputs:
        i = httpclient.InferInput("x", list(x.shape), "FP32")
        i.set_data_from_numpy(x)
        pending.append(client.async_infer("mlp", [i]))
    for x, request in zip(inputs, pending):
        r = request.get_result(timeout=60)
        _expect_close((r.as_numpy("y"), r.as_numpy("p")), modules["mlp"].run(x))
    client.close()
    after = server.http.get_inference_statistics("mlp")["model_stats"][0]
    requests = int(after["inference_count"]) - int(before["inference_count"])
    executions = int(after["execution_count"]) - int(before["execution_count"])
    assert requests == sum(x.shape[0] for x in inputs)  # Triton counts rows
    # Dynamic batching joined requests: fewer calls than requests, and during this test a call of
    # more than 3 rows, which only two or more of these requests (1 to 3 rows each) make.
    assert executions < len(inputs), (executions, len(inputs))

    def calls_by_size(stats):
        return {int(b["batch_size"]): int(b["compute_infer"]["count"])
                for b in stats.get("batch_stats", [])}

    old, new = calls_by_size(before), calls_by_size(after)
    grown = [size for size, count in new.items() if count > old.get(size, 0)]
    assert grown and max(grown) > 3, (old, new)


def test_bad_requests_get_errors_and_the_server_keeps_serving(served):
    server, modules = served
    x = np.ones((2, 16), np.float32)
    bad = [
        ("wrong shape", lambda: _http_infer(server.http, "mlp", np.ones((2, 15), np.float32))),
        ("wrong dtype", lambda: _http_infer(server.http, "mlp", x.astype(np.float64),
                                            datatype="FP64")),
        ("wrong name", lambda: _http_infer(server.http, "mlp", x, name="z")),
        ("too many rows", lambda: _http_infer(server.http, "mlp",
                                              np.ones((MAX_BATCH + 1, 16), np.float32))),
        ("unknown model", lambda: _http_infer(server.http, "nope", x)),
        ("wrong shape over gRPC", lambda: _grpc_infer(server.grpc, "mlp",
                                                      np.ones((2, 17), np.float32))),
    ]
    for what, call in bad:
        with pytest.raises(InferenceServerException):
            call()
        assert server.proc.poll() is None, f"the server died after a request with a {what}"
    _expect_close(_http_infer(server.http, "mlp", x), modules["mlp"].run(x))
    assert server.http.is_model_ready("mlp")


def test_metrics_count_the_requests(served):
    server, _ = served
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics",
                                timeout=10) as r:
        text = r.read().decode()
    lines = [l for l in text.splitlines()
             if l.startswith("nv_inference_request_success") and 'model="mlp"' in l]
    assert lines and float(lines[0].rsplit(" ", 1)[1]) > 0, text[:2000]
