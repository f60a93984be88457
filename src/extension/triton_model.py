# A Baton program served by Triton Inference Server's Python backend. Written by
# `baton triton-repo` (docs/serving.md) next to the program and baton_model.json, which says what
# this model serves; edit that file, not this one.
#
# Each instance loads the program once, on its own GPU (a device map moves the GPU the program was
# built for to the instance's), and runs every batch Triton's dynamic batcher hands it in one call:
# the requests' inputs are joined along the batch axis, the outputs split back into one response
# per request. Requests whose other dimensions differ are run as separate groups. Host outputs are
# NumPy arrays Triton reads in place; device outputs are handed over through DLPack, without a copy.
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(_HERE, "baton_model.json"), encoding="utf-8") as _f:
    _SETTINGS = json.load(_f)
# Triton's Python stub runs the system's interpreter and ignores PYTHONPATH: the directories that
# hold the baton package and NumPy are named in the settings.
for _path in reversed(_SETTINGS.get("python_path", [])):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import numpy as np  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402

import baton  # noqa: E402


class TritonPythonModel:
    def initialize(self, args):
        kind = args.get("model_instance_kind", "CPU")
        device_id = int(args.get("model_instance_device_id", "0"))
        program = os.path.join(_HERE, _SETTINGS["program"])
        built_for = _SETTINGS.get("device", "cpu")
        device_map = None
        if kind == "GPU" and built_for.startswith("cuda"):
            here = f"cuda:{device_id}"
            if here != built_for:
                device_map = {built_for: here}
        elif kind == "GPU":
            raise pb_utils.TritonModelException(
                f"{program} runs on the CPU but this instance is KIND_GPU; write the repository "
                "again without --gpus (baton triton-repo) or compile the model for a GPU")
        self.module = baton.load(program, threads=int(_SETTINGS.get("threads", 0)),
                                 device_map=device_map)
        self.inputs = list(_SETTINGS["inputs"])
        self.outputs = list(_SETTINGS["outputs"])
        self.batching = bool(_SETTINGS.get("batching", False))

    def execute(self, requests):
        responses = [None] * len(requests)
        # Triton has checked every request's names, types and shapes against config.pbtxt.
        feeds = [(i, [np.ascontiguousarray(pb_utils.get_input_tensor_by_name(r, n).as_numpy())
                      for n in self.inputs])
                 for i, r in enumerate(requests)]
        # Requests join a group when everything but the batch axis matches.
        groups = {}
        for i, arrays in feeds:
            key = tuple((a.dtype.str, a.shape[1:] if self.batching else a.shape) for a in arrays)
            if not self.batching:
                key = (key, i)  # no batch axis: each request is a call of its own
            groups.setdefault(key, []).append((i, arrays))
        for members in groups.values():
            try:
                if len(members) == 1:
                    joined = members[0][1]
                else:
                    joined = [np.concatenate([m[1][k] for m in members], axis=0)
                              for k in range(len(self.inputs))]
                outs = self.module.run(*joined)
            except Exception as e:  # a call the program refused: every request of the group
                for i, _ in members:
                    responses[i] = pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e)))
                continue
            start = 0
            for i, arrays in members:
                rows = arrays[0].shape[0] if self.batching else None
                tensors = []
                for name, out in zip(self.outputs, outs):
                    part = out
                    if rows is not None and len(members) > 1:
                        part = out.rows(start, start + rows) if hasattr(out, "rows") else \
                            out[start:start + rows]
                    if isinstance(part, np.ndarray):
                        tensors.append(pb_utils.Tensor(name, part))
                    else:  # a baton.DeviceArray: handed to Triton without a copy
                        tensors.append(pb_utils.Tensor.from_dlpack(name, part))
                responses[i] = pb_utils.InferenceResponse(output_tensors=tensors)
                if rows is not None:
                    start += rows
        return responses

    def finalize(self):
        self.module = None
