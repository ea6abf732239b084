"""netsparse.collectives under mpirun: every operation on numpy arrays against numpy's own
reduction of every rank's input, every dtype and op, uneven and zero lengths, in place; the
non-blocking allreduce with several outstanding; refused and mismatched arguments raising on
every rank; torch tensors in place when torch imports.

Run by ctest as `mpirun -np P python3 -m pytest tests/python/test_collectives.py` (P = 1, 2, 3).
Every test is collective. Inputs are small integers (products of mostly 1, some 2 and -1), so
every reduction is exact in every dtype whatever the order: compared with numpy.array_equal.
"""

import os

import numpy as np
import pytest
from mpi4py import MPI

import netsparse
from netsparse.collectives import Collectives

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()
DTYPES = [np.int8, np.int16, np.int32, np.float16, np.float32, np.float64]
OPS = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum}


@pytest.fixture(scope="module")
def coll():
    c = Collectives(comm, timeout_ms=30000, packet_bytes=4096)
    yield c
    c.close()


def inputs(n, dtype, op, seed):
    """Every rank's input (each rank computes all of them, to build the reference)."""
    out = []
    for r in range(nranks):
        rng = np.random.default_rng(seed * 101 + r)
        if op == "prod":
            x = rng.choice(np.array([1, 1, 1, 1, 1, 2, -1]), size=n)
        else:
            x = rng.integers(-9, 10, size=n)
        out.append(x.astype(dtype))
    return out


def reference(xs, op):
    acc = xs[0].copy()
    for x in xs[1:]:
        acc = OPS[op](acc, x)
    return acc


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(OPS))
def test_every_operation_matches_numpy(coll, dtype, op):
    seed = DTYPES.index(dtype) * 10 + list(OPS).index(op)
    for n in (0, 1, 1001):
        xs = inputs(n * nranks, dtype, op, seed)
        whole = reference(xs, op)
        mine = xs[rank]
        # allreduce into recv, then in place
        out = np.full_like(mine, 7)
        assert coll.allreduce(mine, out, op=op) is out
        assert np.array_equal(out, whole)
        x = mine.copy()
        coll.allreduce(x, op=op, reproducible=True)
        assert np.array_equal(x, whole)
        # reduce to the last rank, in place there
        root = nranks - 1
        x = mine.copy()
        got = coll.reduce(x, root=root, op=op)
        if rank == root:
            assert got is x and np.array_equal(x, whole)
        else:
            assert got is None and np.array_equal(x, mine)
        # reduce-scatter: this rank's n elements
        part = coll.reduce_scatter(mine, op=op)
        assert np.array_equal(part, whole[rank * n : (rank + 1) * n])
        # broadcast of rank 0's input
        b = xs[0].copy() if rank == 0 else np.zeros_like(mine)
        coll.bcast(b, root=0)
        assert np.array_equal(b, xs[0])
        # all-gather of the first n elements of every rank's input
        g = coll.allgather(mine[:n].copy())
        assert g.shape == (nranks, n)
        assert np.array_equal(g, np.stack([x[:n] for x in xs]))
    coll.barrier()


def test_nonblocking_several_outstanding_any_order(coll):
    xs = [inputs(500 + 333 * k, np.float64, "sum", 70 + k) for k in range(8)]
    bufs = [x[rank].copy() for x in xs]
    reqs = [coll.allreduce_start(b, reproducible=(k % 2 == 0)) for k, b in enumerate(bufs)]
    for k in reversed(range(8)):
        if k % 2:
            while not reqs[k].test():
                pass
        else:
            assert reqs[k].wait() is bufs[k]
        assert reqs[k].done
        assert np.array_equal(bufs[k], reference(xs[k], "sum"))


def test_bad_arguments_raise_on_every_rank_then_it_works(coll):
    x = np.ones(100, np.float32)
    # Only the last rank passes a bad array: every rank raises ValueError with its reason.
    bad = np.ones(100, np.int64) if rank == nranks - 1 else x.copy()
    with pytest.raises(ValueError, match="dtype int64"):
        coll.allreduce(bad)
    ro = x.copy()
    if rank == 0:
        ro.setflags(write=False)
    with pytest.raises(ValueError, match="read-only"):
        coll.bcast(ro)
    with pytest.raises(ValueError, match="op must be"):
        coll.allreduce(x.copy(), op="avg")
    with pytest.raises(ValueError, match="C-contiguous"):
        coll.allreduce(np.ones((10, 10), np.float32)[:, ::2] if rank == 0 else np.ones(50, np.float32))
    if nranks > 1:
        with pytest.raises(ValueError, match="multiple of"):
            coll.reduce_scatter(np.ones(nranks * 3 + 1, np.float32))
        # Ranks disagreeing on the count or the root: the library refuses on every rank.
        with pytest.raises(netsparse.Error, match="ranks disagree") as e:
            coll.allreduce(np.ones(100 + rank, np.float32))
        assert e.value.status < 0
        with pytest.raises(netsparse.Error, match="ranks disagree"):
            coll.bcast(np.ones(10, np.int32), root=rank % 2)
    with pytest.raises(netsparse.Error, match="root is not a rank"):
        coll.reduce(x.copy(), root=nranks)
    y = x.copy()
    coll.allreduce(y)
    assert np.array_equal(y, np.full(100, nranks, np.float32))


def test_torch_tensors_in_place(coll):
    # ctest sets NETSPARSE_REQUIRE_TORCH=1 where torch imports (no silent skip there).
    if os.environ.get("NETSPARSE_REQUIRE_TORCH") == "1":
        import torch
    else:
        torch = pytest.importorskip("torch")
    t = torch.full((64, 3), float(rank + 1), dtype=torch.float32)
    assert coll.allreduce(t) is t
    assert torch.equal(t, torch.full((64, 3), float(nranks * (nranks + 1) // 2)))
    g = torch.arange(6, dtype=torch.float64) + rank
    parts = coll.allgather(g)
    assert parts.shape == (nranks, 6)
    b = torch.zeros(10, dtype=torch.int32) if rank else torch.arange(10, dtype=torch.int32)
    coll.bcast(b)
    assert torch.equal(b, torch.arange(10, dtype=torch.int32))
    r = coll.allreduce_start(t)
    r.wait()
    assert torch.equal(t, torch.full((64, 3), float(nranks * nranks * (nranks + 1) // 2)))
    with pytest.raises(ValueError, match="contiguous"):
        coll.allreduce(torch.ones(8, 8)[:, ::2] if rank == 0 else torch.ones(8, 4))
