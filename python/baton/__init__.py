"""Baton from Python: compile ONNX models ahead of time into one program file, load it, and run it
with zero-copy DLPack tensors (NumPy, PyTorch, CuPy) on the CPU and on NVIDIA GPUs.

    import baton, numpy as np
    baton.compile("model.onnx", "model.baton", shapes={"input": (8, 48)})
    module = baton.load("model.baton")
    (y,) = module(input=np.random.rand(8, 48).astype(np.float32))

docs/python.md has the whole API and the device contract as Python sees it.
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from . import _baton
from ._baton import BatonError, DeviceArray, TensorSpec

__all__ = ["BatonError", "DeviceArray", "Module", "TensorSpec", "compile", "cuda", "inspect", "load",
           "triton_repo"]
__version__ = "0.1.0"


def compile(model: "str | os.PathLike | Any", output: "str | os.PathLike | None" = None, *,
            device: str = "cpu", precision: str | None = None, arch: str | None = None,
            shapes: Mapping[str, Sequence[int]] | None = None,
            dims: Mapping[str, "Sequence[int] | str"] | None = None, io: str = "host",
            strict_staging: bool = False, optimize: bool = True,
            disable_passes: Sequence[str] = (), target_device: str | None = None,
            max_partition_nodes: int = 0, expose_intermediates: bool = False,
            max_fold_bytes: int | None = None, max_total_fold_bytes: int | None = None,
            max_fold_work: float | None = None, max_arena_bytes: int | None = None,
            cuda_options: Mapping[str, Any] | None = None,
            fallback: str = "warn",
            state: "Mapping[str, str] | Sequence[str] | str" = (),
            sample: str | None = None) -> "str | bytes":
    """Compiles an ONNX model (a path or an ``onnx.ModelProto``) into a Baton program.

    Writes it to ``output`` and returns that path, or returns the program's bytes (which
    ``load`` takes) when no output is given. The keywords are ``baton compile``'s options, checked
    by the same code (docs/cli.md describes each): ``device`` ("cpu", "cuda:N", "cuda:0,cuda:1"),
    ``precision`` ("fp32", "tf32", "fp16", "bf16"), ``arch`` ("sm_90", needed to build for a GPU
    this machine lacks), ``shapes`` (``{"input": (8, 48)}`` fixes symbolic dimensions), ``dims``
    (``{"batch": (1, 32)}`` or ``(1, 32, 8)`` with the size to tune for: keeps a symbolic
    dimension dynamic over that range, ``--dim``; ``{"s6": "s33"}``: s6 is the same dimension as
    s33, which has a range; docs/dynamic_shapes.md), ``io``
    ("host" or "device": where the program's inputs and outputs live), ``strict_staging`` (GPU
    partitions refuse host memory), ``optimize`` / ``disable_passes`` (the graph optimizer),
    ``target_device`` (a verbatim device label for every partition), ``max_partition_nodes``,
    ``expose_intermediates`` (every intermediate value as an output too), the folding budgets
    ``max_fold_bytes``, ``max_total_fold_bytes`` and ``max_fold_work``, and ``max_arena_bytes``
    (None: the compiler's defaults, as `baton compile --help` shows them), and ``cuda_options``
    (the GPU engines' build options, ``{"conv_rows": "cudnn"}``: ``--cuda-option``'s KEY=VALUE,
    docs/options.md), and ``fallback`` ("allow", "warn" or "error": what a GPU compile does with
    nodes no GPU backend takes, ``--fallback``; ``inspect`` lists them either way), and
    ``state`` (``{"past_key_0": "present_key_0"}``, or ``"auto"``: model inputs kept inside the
    program across calls with the output that updates them in place, such as a KV cache,
    ``--state``; docs/state.md), and ``sample`` (``"greedy"``: the logits output becomes
    ``next_tokens``, the most likely token after each position, chosen inside the program,
    ``--sample``; docs/generate.md). Raises BatonError.
    """
    out = None if output is None else os.fspath(output)
    budgets = {name: value for name, value in (("max_fold_bytes", max_fold_bytes),
                                               ("max_total_fold_bytes", max_total_fold_bytes),
                                               ("max_fold_work", max_fold_work),
                                               ("max_arena_bytes", max_arena_bytes))
               if value is not None}
    return _baton.compile(model, out, device, precision, arch,
                          {k: [int(d) for d in v] for k, v in (shapes or {}).items()}, io,
                          strict_staging, optimize, list(disable_passes), target_device,
                          int(max_partition_nodes), bool(expose_intermediates),
                          _option_pairs(cuda_options), **budgets,
                          dims={k: [int(d) for d in v] for k, v in (dims or {}).items()
                                if not isinstance(v, str)},
                          same_dims={k: v for k, v in (dims or {}).items() if isinstance(v, str)},
                          fallback=fallback, state=_state_pairs(state), sample=sample or "")


def _state_pairs(state: "Mapping[str, str] | Sequence[str] | str") -> list[str]:
    """``--state``'s values: INPUT=OUTPUT for each pair of a mapping, or "auto"."""
    if isinstance(state, str):
        return [state]
    if isinstance(state, Mapping):
        return [f"{k}={v}" for k, v in state.items()]
    return [str(s) for s in state]


def _option_pairs(options: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """KEY=VALUE pairs as the CLI takes them: booleans as 1 / 0, everything else as str()."""
    pairs = []
    for key, value in (options or {}).items():
        if isinstance(value, bool):
            value = "1" if value else "0"
        pairs.append((str(key), str(value)))
    return pairs


class Module:
    """A loaded program's method, ready to run. Made by ``baton.load``.

    ``inputs`` / ``outputs``: one TensorSpec each (name, dtype, shape, device). Calls on one
    Module are serialized; use one Module per thread to run concurrently.
    """

    def __init__(self, impl: "_baton.Module"):
        self._impl = impl

    @property
    def inputs(self) -> list[TensorSpec]:
        return self._impl.inputs

    @property
    def outputs(self) -> list[TensorSpec]:
        return self._impl.outputs

    def run(self, *inputs: Any, out: Sequence[Any] | None = None, stream: Any = None,
            **named: Any) -> list[Any]:
        """Runs the method and returns its outputs, in order.

        Inputs are any objects with ``__dlpack__`` (NumPy arrays, PyTorch tensors, CuPy arrays),
        C-contiguous, in order or by name. They are bound without a copy where they are: memory
        on the program's GPU is read in place; host memory given to a GPU input is staged by
        the GPU delegate (logged once on the "baton" logger) or refused by a program compiled
        with ``strict_staging``. Outputs are new arrays on the devices the program puts them on
        (NumPy arrays on the host; ``baton.DeviceArray`` on a GPU: ``torch.from_dlpack`` takes them
        without a copy), or the caller's own buffers ``out=[...]``, which are returned.

        ``stream``: a ``torch.cuda.Stream``, an object with ``__cuda_stream__``, or an int
        (a ``cudaStream_t``). All GPU work then runs on that stream and, when nothing is staged,
        ``run`` returns before the GPU is done: synchronize the stream before reading the
        outputs (docs/device-contract.md). Without ``stream``, ``run`` returns with the results
        ready. The GIL is released while the program runs.
        """
        return self._impl._run(list(inputs), named, None if out is None else list(out), stream)

    __call__ = run

    def prepare_shape(self, /, **sizes: int) -> None:
        """Makes calls at one shape of a dynamic program as fast from the first as later ones
        (``Method::prepare_shape``): ``m.prepare_shape(batch=1, sequence=16)`` names every
        symbol the inputs give a size. A GPU engine times its GEMM algorithms and cuDNN plans for
        these sizes and captures the shape's CUDA graph; nothing runs and nothing a call sees
        changes. ``baton.load(..., prepare_shapes=[...])`` does it at load. The graph holds the
        addresses of the memory a call used last (or the program's own): calls that pass device
        arrays at new addresses each time capture again. Raises BatonError for an unknown,
        missing or out-of-range symbol."""
        self._impl.prepare_shape(sizes)

    @property
    def state(self) -> list[tuple[str, str]]:
        """The tensors the program keeps across calls (compiled with ``state=``): each one's name
        (the model input it replaces) and the output that updates it. Empty without state."""
        return [tuple(p) for p in self._impl.state]

    def reset_state(self) -> None:
        """Zeroes every kept tensor, as at load (``Method::reset_state``): a new sequence."""
        self._impl.reset_state()

    def generate(self, prompt_ids, max_new_tokens: int = 32, *, eos_token_id: int | None = None,
                 reset: bool = True, start_position: int = 0, temperature: float = 1.0,
                 top_p: float = 1.0, seed: int = 0) -> dict:
        """Greedy generation with a decoder compiled with ``state=`` (docs/generate.md): the
        prompt (a sequence of token ids, batch 1) in as few calls as the program's new-token range
        allows, then one call per new token, the key/value cache kept inside the program.

        Returns ``{"tokens": [...], "first_token_ms": float, "token_ms": [...],
        "prefill_calls": int}``: the new tokens (the prompt not included), the wall time to the
        first one and of each later one. ``eos_token_id`` stops after producing that token;
        ``reset=False`` continues the cached sequence at ``start_position``. A program compiled
        with ``sample="top-k=K"`` draws each token from the K most likely with ``temperature``
        and ``top_p``, from uniform numbers seeded by ``seed``. Raises BatonError when the
        program is not a decoder generation can drive (it names what is missing)."""
        ids = [int(t) for t in prompt_ids]
        return self._impl.generate(ids, int(max_new_tokens),
                                   -1 if eos_token_id is None else int(eos_token_id), bool(reset),
                                   int(start_position), float(temperature), float(top_p),
                                   int(seed))

    def counters(self) -> dict[str, int]:
        """Monitoring counters: the runtime's copies between devices ("copies.host_to_device",
        ...) and each GPU delegate's ("delegate0.zero_copy_calls", "delegate0.staged_calls",
        "delegate0.staged_bytes", ...)."""
        return self._impl.counters()

    def __repr__(self) -> str:
        return f"baton.Module(inputs={self.inputs}, outputs={self.outputs})"


def load(program: "str | os.PathLike | bytes", *, method: str = "forward", threads: int = 0,
         verify_checksums: bool = True, load_options: Mapping[str, Any] | None = None,
         prepare_shapes: Sequence[Mapping[str, int]] = (),
         device_map: "Mapping[str, str] | str | None" = None) -> Module:
    """Loads a program (a path, or the bytes ``compile`` returns), verifies it, and prepares
    ``method`` (GPU engines are loaded on their device). ``threads``: CPU threads for the CPU
    kernels (0: one per CPU). ``load_options``: ``baton run --load-option``'s KEY=VALUE as a
    dictionary (``{"cuda_graphs": False}``; docs/options.md); an unknown key or value is refused.
    ``prepare_shapes``: shapes of a dynamic program to prepare at load, each as
    ``Module.prepare_shape`` takes it (``[{"batch": 1, "sequence": 16}]``).
    ``device_map``: run what the program built for one GPU on another, ``{"cuda:0": "cuda:1"}``
    (or ``baton run --device-map``'s text, ``"cuda:0=cuda:1"``); docs/serving.md.
    Raises BatonError naming what is wrong and how to fix it."""
    if not isinstance(program, bytes):
        program = os.fspath(program)
    if isinstance(prepare_shapes, Mapping):
        raise TypeError("prepare_shapes takes a list of shapes, each a dict of symbol sizes: "
                        f"[{dict(prepare_shapes)!r}]")
    if device_map is None:
        device_map = ""
    elif isinstance(device_map, Mapping):
        device_map = ",".join(f"{k}={v}" for k, v in device_map.items())
    elif not isinstance(device_map, str):
        raise TypeError("device_map takes a dict {'cuda:0': 'cuda:1'} or the text "
                        f"'cuda:0=cuda:1', not {type(device_map).__name__}")
    return Module(_baton.load(program, method, threads, verify_checksums,
                              _option_pairs(load_options),
                              [{str(k): int(v) for k, v in s.items()} for s in prepare_shapes],
                              device_map))


def triton_repo(program: "str | os.PathLike", out_dir: "str | os.PathLike", *,
                name: str = "", max_batch: int = 0, preferred_batch_sizes: Sequence[int] = (),
                queue_delay_us: int = 100, instances: int = 1, gpus: Sequence[int] = (),
                python_path: "Sequence[str] | None" = None, threads: int = 0,
                overwrite: bool = False) -> dict:
    """Writes a Triton Inference Server model repository serving ``program`` under ``out_dir``
    (``baton triton-repo``; docs/serving.md): ``config.pbtxt`` (the program's inputs and outputs,
    its dynamic batch dimension as Triton's batch, dynamic batching, one instance group on
    ``gpus`` or the CPU), the program, and a Python-backend ``model.py`` that loads it once per
    instance on that instance's GPU. ``python_path``: the directories ``model.py`` puts on
    ``sys.path`` (Triton's stub ignores PYTHONPATH); by default the ones this interpreter imports
    ``baton`` and NumPy from. Returns ``{"model_dir", "max_batch_size", "batch_symbol",
    "files"}``; raises BatonError naming what stands in the way."""
    if python_path is None:
        import numpy
        python_path = []
        for module in (__file__, numpy.__file__):
            site = os.path.dirname(os.path.dirname(os.path.abspath(module)))
            if site not in python_path:
                python_path.append(site)
    return _baton.triton_repo(os.fspath(program), os.fspath(out_dir), name, int(max_batch),
                              [int(b) for b in preferred_batch_sizes], int(queue_delay_us),
                              int(instances), [int(g) for g in gpus],
                              [os.fspath(p) for p in python_path], int(threads), bool(overwrite))


def inspect(program: "str | os.PathLike") -> dict:
    """The program's description: the same structure as ``baton inspect --json`` prints."""
    return _baton.inspect(os.fspath(program))


from . import cuda  # noqa: E402  (needs _baton)
