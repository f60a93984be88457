"""Baton's CUDA side from Python: whether this build has it, and green contexts."""
from __future__ import annotations

from . import _baton


def is_built() -> bool:
    """Whether this baton package was built with the CUDA backend (a GPU may still be absent)."""
    return _baton.has_cuda()


class GreenContext:
    """A CUDA green context holding at least ``sms`` SMs of GPU ``device`` (rounded up to the
    hardware's granularity), and a stream on it. Pass ``stream`` to ``Module.run(stream=...)``:
    every kernel of the program then stays inside those SMs. The context and its stream live as
    long as this object.

        ctx = baton.cuda.GreenContext(sms=16)
        module.run(x, stream=ctx.stream)
    """

    def __init__(self, sms: int, device: int = 0):
        if not _baton.has_cuda():
            raise _baton.BatonError("baton.cuda.GreenContext needs Baton's CUDA backend; this "
                                    "baton package was built without CUDA")
        self._impl = _baton._green_context(sms, device)

    @property
    def stream(self) -> int:
        """The context's stream, as an int (a ``cudaStream_t``)."""
        return self._impl.stream

    @property
    def sms(self) -> int:
        """The SMs it holds (at least the number asked for)."""
        return self._impl.sms
