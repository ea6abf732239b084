"""netsparse.collectives under mpirun: every operation on numpy arrays against numpy's own
reduction of every rank's input, every dtype and op, uneven and zero lengths, in place; the
non-blocking allreduce with several outstanding; the non-blocking all-gather against mpi4py's
Allgather bit for bit and the parameter double buffer (GatherBuffers); the sparse allreduce,
flat and hierarchical (hierarchy="hierarchical": inside the host, between the leaders, down
again), against numpy;
refused and mismatched arguments raising on every rank; torch tensors in place when torch imports.

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


def random_bits(n, dtype, seed):
    """n elements of dtype with random bit patterns (NaNs and infinities included)."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=n * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype)


def test_nonblocking_allgather_matches_mpi_allgather_in_any_order(coll):
    """Several outstanding all-gathers (float32 and float64, per-rank lengths that are not
    multiples of a block, zero), one in place, one with recv made; completed in an order that
    differs by rank; bit for bit mpi4py's Allgather."""
    sizes = [1001, 0, 1, 5003, 2047, 777]
    for round_ in range(2):
        sends, recvs, reqs, want = [], [], [], []
        for k, n in enumerate(sizes):
            dtype = np.float32 if (k + round_) % 2 == 0 else np.float64
            x = random_bits(n, dtype, 1000 * round_ + 10 * k + rank)
            expect = np.empty(n * nranks, dtype)
            comm.Allgather(x, expect)
            if k == 4:  # in place: send is this rank's slot of recv
                out = np.empty(n * nranks, dtype)
                out[rank * n:(rank + 1) * n] = x
                r = coll.allgather_start(out[rank * n:(rank + 1) * n], out)
            elif k == 5:  # recv made: shape (size,) + send.shape
                out = None
                r = coll.allgather_start(x)
            else:
                out = np.full(n * nranks, 7, dtype)
                r = coll.allgather_start(x, out)
            sends.append(x)
            recvs.append(out)
            reqs.append(r)
            want.append(expect)
        k = (rank + round_) % len(sizes)
        for _ in sizes:
            if (k + rank) % 2:
                while not reqs[k].test():
                    pass
                got = reqs[k].result
            else:
                got = reqs[k].wait()
            assert reqs[k].done
            if recvs[k] is not None:
                assert got is recvs[k]
            else:
                assert got.shape == (nranks, sizes[k])
            assert np.array_equal(got.reshape(-1).view(np.uint8), want[k].view(np.uint8)), k
            k = (k + 5) % len(sizes)


def test_nonblocking_allgather_bad_arguments_raise_on_every_rank(coll):
    x = np.arange(10, dtype=np.float64)
    last = nranks - 1
    # recv not size * len(send) on the last rank (a total not divisible by the ranks cannot be
    # gathered: every rank contributes the same count)
    bad_len = 10 * nranks + (1 if rank == last else 0)
    with pytest.raises(ValueError, match=f"recv must hold size\\(\\) \\* 10 = {10 * nranks}"):
        coll.allgather_start(x, np.empty(bad_len, np.float64))
    with pytest.raises(ValueError, match="dtype int64"):
        coll.allgather_start(x.astype(np.int64) if rank == last else x)
    with pytest.raises(ValueError, match="read-only"):
        ro = np.empty(10 * nranks)
        ro.flags.writeable = rank != last
        coll.allgather_start(x, ro)
    if nranks > 1:  # counts differ: the library refuses on every rank (raised by the wait)
        n = 9 if rank == 0 else 10
        r = coll.allgather_start(x[:n], np.empty(n * nranks))
        with pytest.raises(netsparse.Error, match="ranks disagree"):
            r.wait()
    assert np.array_equal(coll.allgather_start(x).wait(), np.tile(x, (nranks, 1)))


@pytest.mark.parametrize("prefetch", [True, False])
def test_gather_buffers_forward_backward_and_invalidate(coll, prefetch):
    """GatherBuffers: every layer's full parameters in forward then backward order (the next
    one prefetched), the layer held across the turn returned without a gather, fresh values
    after invalidate(); bad layers refused."""
    from netsparse.collectives import GatherBuffers
    lengths = [7, 130, 1, 64]
    def shards_of(step):
        return [np.arange(n, dtype=np.float32) + 1000 * i + 100 * rank + step
                for i, n in enumerate(lengths)]
    def full(i, step):
        return np.concatenate([np.arange(lengths[i], dtype=np.float32) + 1000 * i + 100 * r + step
                               for r in range(nranks)])
    shards = shards_of(0)
    b = GatherBuffers(coll, shards, prefetch=prefetch)
    L = len(lengths)
    for step in range(2):
        for i in range(L):
            got = b.gather(i, next=i + 1 if i + 1 < L else None)
            assert np.array_equal(got, full(i, step)), (step, i)
        for i in reversed(range(L)):
            got = b.gather(i, next=i - 1 if i > 0 else None)
            assert np.array_equal(got, full(i, step)), (step, i)
        for s in shards:
            s += 1  # the optimizer step
        b.invalidate()
    with pytest.raises(ValueError, match="layer must be a layer in \\[0, 4\\)"):
        b.gather(4)
    with pytest.raises(ValueError, match="next must be"):
        b.gather(0, next=-1)
    with pytest.raises(ValueError, match="has dtype float64"):
        GatherBuffers(coll, [np.zeros(3, np.float32), np.zeros(3, np.float64)])


def sparse_inputs(n, density, seed):
    """Every rank's (indices, values) (unsorted, with repeats), their dense sum, the touched set."""
    total, touched, out = np.zeros(n, np.float32), np.zeros(n, bool), []
    for r in range(nranks):
        rng = np.random.default_rng(seed * 31 + r)
        idx = rng.integers(0, n, size=int(density * n))
        val = rng.integers(1, 9, size=idx.size).astype(np.float32)
        np.add.at(total, idx, val)
        touched[idx] = True
        out.append((idx.astype(np.uint64 if r % 2 else np.int64), val))
    return out, total, touched


def check_sparse(n, got, total, touched):
    idx, val = got
    if idx is None:
        assert val.shape == (n,) and np.array_equal(val, total)
    else:
        assert np.all(np.diff(idx.astype(np.int64)) > 0)  # ascending, distinct
        assert np.array_equal(idx, np.flatnonzero(touched))
        assert np.array_equal(val, total[touched])


@pytest.mark.parametrize("hierarchy", ["flat", "hierarchical", "hosts"])
def test_sparse_and_dense_allreduce_flat_and_hierarchical(hierarchy):
    with Collectives(comm, timeout_ms=30000, packet_bytes=4096, hierarchy=hierarchy) as c:
        assert c.hierarchical == (hierarchy != "flat")
        assert c.through_racks is False  # one rack: no switch level (tests/collectives has racks)
        n = 4000
        for k, (density, output) in enumerate(
            [(0.01, "auto"), (0.4, "auto"), (0.01, "dense"), (0.6, "sparse"), (0.0, "auto")]
        ):
            xs, total, touched = sparse_inputs(n, density, 40 + k)
            got = c.sparse_allreduce(n, *xs[rank], output=output)
            check_sparse(n, got, total, touched)
            if output != "auto":
                assert (got[0] is None) == (output == "dense")
            assert isinstance(c.inter_host_bytes, int) and c.inter_host_bytes >= 0
            assert isinstance(c.inter_rack_bytes, int) and c.inter_rack_bytes >= 0
        out = np.full(n, 7, np.float32)
        xs, total, touched = sparse_inputs(n, 0.05, 50)
        idx, val = c.sparse_allreduce(n, *xs[rank], output="dense", dense_out=out)
        assert idx is None and val is out and np.array_equal(out, total)
        # the dense allreduce on the same communicator (hierarchical there too)
        xs = inputs(1001, np.float64, "sum", 60)
        x = xs[rank].copy()
        c.allreduce(x)
        assert np.array_equal(x, reference(xs, "sum"))
        # refusals on every rank, then it works
        xs_sparse = sparse_inputs(100, 0.1, 61)[0][rank]
        ix, v = xs_sparse
        with pytest.raises(ValueError, match="indices and values differ"):
            c.sparse_allreduce(100, ix, v[:-1] if rank == nranks - 1 else v)
        with pytest.raises(ValueError, match="uint64 or int64"):
            c.sparse_allreduce(100, ix.astype(np.int32) if rank == 0 else ix, v)
        with pytest.raises(ValueError, match="dense_out must hold n = 100"):
            c.sparse_allreduce(100, ix, v, dense_out=np.zeros(99 if rank == 0 else 100, np.float32))
        with pytest.raises(ValueError, match="n must be >= 0"):
            c.sparse_allreduce(-1 if rank == nranks - 1 else 100, ix, v)
        if nranks > 1:
            with pytest.raises(netsparse.Error, match="ranks disagree"):
                c.sparse_allreduce(100 + rank, ix, v)
        with pytest.raises(netsparse.Error, match="an index is >= n"):
            c.sparse_allreduce(5, ix, v)
        check_sparse(100, c.sparse_allreduce(100, *xs_sparse), *sparse_inputs(100, 0.1, 61)[1:])


def test_hierarchy_must_be_a_known_mode():
    with pytest.raises(ValueError, match="hierarchy must be"):
        Collectives(comm, hierarchy="racks" if rank == 0 else "flat")


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
    # the non-blocking all-gather into a torch tensor, and parameter buffering on torch shards
    whole = torch.zeros(6 * nranks, dtype=torch.float64)
    coll.allgather_start(g, whole).wait()
    assert torch.equal(whole, torch.cat([torch.arange(6, dtype=torch.float64) + q
                                         for q in range(nranks)]))
    from netsparse.collectives import GatherBuffers
    bufs = GatherBuffers(coll, [g, g[:3].clone()])
    assert torch.equal(bufs.gather(0, next=1), whole)
    assert torch.equal(bufs.gather(1), whole.view(nranks, 6)[:, :3].reshape(-1))
    assert torch.equal(t, torch.full((64, 3), float(nranks * nranks * (nranks + 1) // 2)))
    with pytest.raises(ValueError, match="contiguous"):
        coll.allreduce(torch.ones(8, 8)[:, ::2] if rank == 0 else torch.ones(8, 4))
    # sparse: torch indices and values, the dense result in a torch tensor in place
    idx = torch.tensor([rank, 5, 5], dtype=torch.int64)
    val = torch.ones(3, dtype=torch.float32)
    dense = torch.zeros(8, dtype=torch.float32)
    i, v = coll.sparse_allreduce(8, idx, val, output="dense", dense_out=dense)
    assert i is None and v is dense
    want = torch.zeros(8)
    for r in range(nranks):
        want[r] += 1
    want[5] += 2 * nranks
    assert torch.equal(dense, want)
