"""netsparse.torch.DistSpmm under mpirun: forward Y = A X and backward dX = A^T dY, element for
element against scipy (small integers: exact in float32 and float64), through torch autograd."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from mpi4py import MPI

import netsparse
from netsparse.torch import DistSpmm

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()


def block(x, offsets):
    return x[int(offsets[rank]) : int(offsets[rank + 1])]


@pytest.mark.parametrize(
    "dtype,mode,backward",
    [
        (torch.float32, "netsparse", "transpose"),
        (torch.float64, "inspector-executor", "push"),
    ],
)
def test_forward_backward_every_element(dtype, mode, backward):
    rng = np.random.default_rng(3)
    n, k = 61, 4
    whole = sp.random(n, n, density=0.08, format="csr", random_state=rng)
    whole.data = rng.integers(1, 4, size=whole.nnz).astype(np.float64)
    off = netsparse.equal_blocks(n, nranks)
    a = netsparse.DistMatrix(comm, block(whole, off))
    op = DistSpmm(a, k, mode=mode, dtype=dtype, backward=backward)
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    x = rng.integers(-5, 6, size=(n, k)).astype(np_dtype)
    w = rng.integers(-3, 4, size=(n, k)).astype(np_dtype)
    for step in range(2):  # the original pattern, then a sample of it
        m = whole
        if step == 1:
            mine = a.sample_rows(keep_fraction=0.5, max_per_row=4, seed=7)
            op.set_pattern(mine)
            m = sp.vstack(comm.allgather(mine)).tocsr()
        xl = torch.from_numpy(block(x, a.col_offsets).copy()).requires_grad_()
        y = op(xl)
        assert y.dtype == dtype and y.shape == (int(off[rank + 1] - off[rank]), k)
        assert np.array_equal(y.detach().numpy(), block(m @ x, a.row_offsets).astype(np_dtype))
        # d/dX sum(Y * W) = A^T W
        (y * torch.from_numpy(block(w, a.row_offsets))).sum().backward()
        assert np.array_equal(xl.grad.numpy(), block(m.T @ w, a.col_offsets).astype(np_dtype))
    with pytest.raises(ValueError, match="dtype"):
        op(torch.zeros((int(a.col_offsets[rank + 1] - a.col_offsets[rank]), k), dtype=torch.int32))
