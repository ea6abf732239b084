"""PyTorch autograd over NetSparse's distributed SpMM.

    from netsparse.torch import DistSpmm
    op = DistSpmm(a, k=16, mode="netsparse", dtype=torch.float32)   # collective
    y = op(x)          # x: this rank's column block (a.col_offsets) x k, a CPU tensor
    y.sum().backward() # x.grad = A^T @ dy (collective, the library's TransposedSpmm)

Forward is a DistKernel SpMM (Y = A X), backward the transposed product the library already
has (dX = A^T dY: TransposedSpmm, by transposing the pattern or by pushing partial rows). Both
are collective: every rank must run the same forward and backward calls in the same order
(which the same training script on every rank does). With a pattern that changes every step
(GNN neighbour sampling), call op.set_pattern(rows) on every rank before the step: the netsparse
forward then computes on the new rows directly (dynamic_pattern), the backward transposes them.

Tensors are handed to the library as numpy views (no copy) when they are CPU, contiguous and of
the operator's dtype; anything else is made so first (.contiguous(), the dtype is checked).
"""

import time as _time

import numpy as _np
import torch
from torch.autograd.function import once_differentiable as _once_differentiable

from . import DistKernel, Engine, Pattern, TransposedSpmm

__all__ = ["DistSpmm", "SpmmFunction"]

_DTYPES = {torch.float32: _np.float32, torch.float64: _np.float64}


def _as_numpy(t, dtype, what):
    if t.dtype != dtype:
        raise ValueError(f"{what} must have dtype {dtype}, got {t.dtype}")
    if t.device.type != "cpu":
        raise ValueError(f"{what} must be a CPU tensor, got device {t.device}")
    return t.detach().contiguous().numpy()


class SpmmFunction(torch.autograd.Function):
    """Y = A X with dX = A^T dY, A a DistSpmm's matrix (its current pattern)."""

    @staticmethod
    def forward(ctx, x, op):
        ctx.op = op
        t0 = _time.perf_counter()
        y = torch.empty((op.rows_local, op.k), dtype=op.dtype)
        op.forward_kernel.spmm(_as_numpy(x, op.dtype, "X"), y.numpy())
        op.seconds["forward"] += _time.perf_counter() - t0
        return y

    @staticmethod
    @_once_differentiable  # dX = A^T dY is computed outside autograd: no double backward
    def backward(ctx, dy):
        op = ctx.op
        t0 = _time.perf_counter()
        dx = torch.empty((op.cols_local, op.k), dtype=op.dtype)
        op.backward_kernel.spmm(_as_numpy(dy, op.dtype, "dY"), dx.numpy())
        op.seconds["backward"] += _time.perf_counter() - t0
        return dx, None


class DistSpmm:
    """Y = A @ X for a netsparse.DistMatrix A, differentiable in X.

    DistSpmm(a, k, mode="netsparse", dtype=torch.float32, backward="transpose"|"push",
             dynamic_pattern=None, engine=None)
    Collective. dynamic_pattern (default: True in the netsparse mode) makes set_pattern cheap
    for patterns that change every step. One RIG engine is shared by the forward and backward
    kernels (pass engine= to share it further)."""

    def __init__(
        self,
        a,
        k,
        mode="netsparse",
        dtype=torch.float32,
        backward="transpose",
        dynamic_pattern=None,
        engine=None,
    ):
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
        if dynamic_pattern is None:
            dynamic_pattern = mode == "netsparse"
        self.a, self.k, self.dtype = a, int(k), dtype
        np_dtype = _DTYPES[dtype]
        if engine is None and mode in ("netsparse", "sa-vanilla"):
            engine = Engine(a.comm)
        self.engine = engine
        self.forward_kernel = DistKernel(
            a, "spmm", self.k, mode=mode, dtype=np_dtype, dynamic_pattern=dynamic_pattern,
            engine=engine,
        )
        self.backward_kernel = TransposedSpmm(
            a, self.k, mode=mode, dtype=np_dtype, method=backward,
            dynamic_pattern=dynamic_pattern, engine=engine,
        )
        r, c = a.row_offsets, a.col_offsets
        self.rows_local = int(r[a.rank + 1] - r[a.rank])
        self.cols_local = int(c[a.rank + 1] - c[a.rank])
        # Seconds this rank spent in the products and their setups (for tables; reset freely).
        self.seconds = {"forward": 0.0, "backward": 0.0, "set_pattern": 0.0}

    def set_pattern(self, a_local):
        """Collective: this rank's rows of A get a new pattern (scipy.sparse or Pattern)."""
        t0 = _time.perf_counter()
        pattern = a_local if isinstance(a_local, Pattern) else Pattern(self.a, a_local)
        self.forward_kernel.set_pattern(pattern)  # checked once, used by both
        self.backward_kernel.set_pattern(pattern)
        self.seconds["set_pattern"] += _time.perf_counter() - t0

    def __call__(self, x):
        return SpmmFunction.apply(x, self)
