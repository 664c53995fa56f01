"""fp16 autocast as CUDA runs it, emulated on a CPU at fp32 speed.

The published cramming runs optimise [mem] under ``torch.cuda.amp.autocast(dtype=torch.float16)``
without a gradient scaler. CUDA autocast runs matrix products (linear layers, ``matmul``, ``bmm``,
``baddbmm``, ``addmm``, scaled-dot-product attention, ...) in float16: their inputs are cast to
fp16, their outputs are fp16, and the backward pass computes the gradients that flow through them in
fp16 too, so that without a scaler small gradients underflow to 0 and large values overflow to
±inf. Everything else runs in the widest type of its inputs (an fp16 product added to the fp32
residual stream gives fp32) or in fp32 (softmax, norms and losses).

:func:`fp16_autocast` reproduces this in fp32 arithmetic, which a CPU runs several times faster than
its fp16 kernels: inside it, every product of :data:`PRODUCTS` rounds its inputs and its output to
fp16 (``x.half().float()``: overflow to ±inf included), and so do the gradients that flow back
through those roundings (:class:`RoundFp16`). The products accumulate in fp32, as CUDA's fp16 GEMMs
do. Regions where a model turns autocast off (transformers computes rotary embeddings under
``torch.autocast(..., enabled=False)``) are left in fp32, as CUDA leaves them. A test ties the
emulation to torch's own CPU float16 autocast on forward and backward passes of real models.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_map
from torch.utils.weak import WeakIdKeyDictionary

#: The functions CUDA autocast runs in float16 (its "lower precision" list, as transformers' models
#: call them); ``einsum`` decomposes into ``bmm`` below autocast, which casts it.
PRODUCTS = frozenset({
    F.linear, F.scaled_dot_product_attention, F.bilinear, torch.matmul, torch.mm, torch.bmm, torch.mv,
    torch.baddbmm, torch.addmm, torch.addbmm, torch.addmv, torch.einsum,
    torch.Tensor.matmul, torch.Tensor.__matmul__, torch.Tensor.__rmatmul__, torch.Tensor.mm,
    torch.Tensor.bmm, torch.Tensor.mv, torch.Tensor.baddbmm, torch.Tensor.addmm,
})


class RoundFp16(torch.autograd.Function):
    """Round to the nearest fp16 value (±inf beyond 65504) in the forward pass, and round the
    gradient the same way in the backward pass: the value and the gradient of a tensor held in fp16.

    >>> x = torch.tensor([1 + 2.0 ** -12, 7e4], requires_grad=True)
    >>> y = RoundFp16.apply(x); y.backward(torch.tensor([1e-8, 1.0]))
    >>> y.tolist(), x.grad.tolist()
    ([1.0, inf], [0.0, 1.0])
    """

    @staticmethod
    def forward(ctx, x):
        return x.half().to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad.half().to(grad.dtype)


#: fp16-rounded copies of frozen leaf tensors (weights, buffers), with the version they were made
#: from: a frozen model's weights are rounded once, not at every step.
_ROUNDED = WeakIdKeyDictionary()


class _Fp16Products(TorchFunctionMode):
    """Rounds the inputs and outputs of :data:`PRODUCTS` to fp16 while CPU autocast is on."""

    @staticmethod
    def _round(x):
        if not (isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != torch.float16):
            return x
        if x.requires_grad:
            return RoundFp16.apply(x)
        if x.is_leaf:                                         # a frozen weight or buffer: round it once
            version, rounded = _ROUNDED.get(x, (None, None))
            if version != x._version:
                version, rounded = x._version, x.half().to(x.dtype)
                _ROUNDED[x] = (version, rounded)
            return rounded
        return x.half().to(x.dtype)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func not in PRODUCTS or not torch.is_autocast_enabled("cpu"):
            return func(*args, **kwargs)
        args, kwargs = tree_map(self._round, (args, kwargs))
        with torch.autocast("cpu", enabled=False):          # compute in fp32, not with CPU fp16 kernels
            out = func(*args, **kwargs)
        return tree_map(self._round, out)


@contextlib.contextmanager
def fp16_autocast() -> Iterator[None]:
    """CUDA's float16 autocast, emulated on a CPU in fp32 arithmetic (module docstring).

    CPU autocast is switched on (so that a model's own ``torch.autocast(..., enabled=False)``
    regions are seen) and every product is intercepted before it reaches it.

    >>> x, w = torch.tensor([[300.0, 300.0]]), torch.tensor([[200.0, 200.0]])
    >>> with fp16_autocast():
    ...     F.linear(x, w).item(), (x @ w.T / 2).item()
    (inf, inf)
    >>> F.linear(x, w).item()
    120000.0
    """
    with torch.autocast("cpu", dtype=torch.float16), _Fp16Products():
        yield


def autocast(dtype: str, device) -> contextlib.AbstractContextManager:
    """The autocast context of an optimisation in ``dtype`` (``float32``: none; ``bfloat16``;
    ``float16``: CUDA's own autocast on a CUDA device, without a gradient scaler as published, and
    :func:`fp16_autocast` elsewhere)."""
    device = torch.device(device)
    if dtype == "float16":
        return torch.autocast("cuda", dtype=torch.float16) if device.type == "cuda" else fp16_autocast()
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=dtype == "bfloat16")
