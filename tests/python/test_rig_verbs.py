"""RigContext's gather plans and scatter-reduce against numpy, under mpirun.

Run by ctest as `mpirun -np P python3 -m pytest tests/python/test_rig_verbs.py` (P = 2, 3). Every
test is collective: each rank runs the same tests in the same order. The reference is computed on
every rank from what every rank registered (an allgather of the tables, idxs and values): a plan's
output must equal numpy's fancy indexing of the whole table, and a scatter-reduce must leave each
rank's rows equal to numpy's ufunc.at (add / minimum / maximum) applied to the whole table. Values
are small integers, so float sums are exact in any order and compared element for element.

The verbs are not collective: in INLINE progress a rank serves its peers only inside a netsparse
call, so every phase of verbs ends with ctx.quiesce() before any MPI collective of the test.
"""

import json

import numpy as np
import pytest
from mpi4py import MPI

import netsparse

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()
NS_ERR_INVALID, NS_ERR_TIMEOUT, NS_ERR_NOT_REGISTERED = -1, -5, -8


def local_rows():
    return 11 + 3 * rank  # blocks of different sizes


def int_table(width, dtype, seed):
    """This rank's rows: small integers (exact in every dtype). width None: a 1-D table."""
    rng = np.random.default_rng(1000 * seed + rank)
    shape = (local_rows(),) if width is None else (local_rows(), width)
    return rng.integers(-20, 21, size=shape).astype(dtype)


def whole(table):
    """The whole table as every rank registered it, in rank order."""
    return np.concatenate(comm.allgather(table))


def offsets():
    counts = comm.allgather(local_rows())
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def stat(ctx, name):
    return json.loads(ctx.stats_json())["stats"][name]


@pytest.fixture(scope="module")
def ctx():
    c = netsparse.RigContext(comm)
    yield c
    c.close()


_tables = []


def reg(ctx, table):
    """ctx.register(table), closed after the test even when the test fails (the context holds
    one table at a time: a table left registered would fail every later test)."""
    t = ctx.register(table)
    _tables.append((ctx, t))
    return t


@pytest.fixture(autouse=True)
def close_tables():
    yield
    while _tables:
        c, t = _tables.pop()
        if not t.closed:
            c.quiesce(timeout_ms=30000)
            t.close()


# ---- gather plans ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("width", [None, 1, 5])
def test_plan_equals_numpy_and_replays_see_new_rows(ctx, dtype, width):
    table = int_table(width, dtype, seed=1)
    t = reg(ctx, table)
    total = int(offsets()[-1])
    rng = np.random.default_rng(rank)
    idx = rng.integers(0, total, size=300)  # int64, repeats, every rank's rows
    plan = t.plan(idx)
    assert len(plan) == 300 and plan.runs == 0 and not plan.closed
    assert np.array_equal(plan.idx, idx.astype(np.uint64))
    idx_at_creation = idx.copy()
    idx[:] = 0  # the plan holds its own copy of the list
    replays_before = stat(ctx, "plan_replays")
    for round_ in range(3):
        want = whole(table)[idx_at_creation]
        for _ in range(2):  # the first run of the test records, every later one replays
            out = plan.run()
            assert out is plan.out
            assert out.dtype == dtype and out.shape == want.shape
            assert np.array_equal(out, want)
        ctx.quiesce(timeout_ms=30000)  # nobody reads the rows now: change them in place
        table += np.asarray(round_ + 1, dtype=dtype)
        comm.Barrier()  # every rank's rows are new before anyone runs again
    assert plan.runs == 6
    assert stat(ctx, "plan_replays") - replays_before == 5  # one recording, five replays
    ctx.quiesce(timeout_ms=30000)
    plan.close()
    assert plan.closed
    t.close()


@pytest.mark.parametrize("progress", ["inline", "thread"])
def test_plan_into_callers_out_uint64_idx_and_context_form(progress):
    c = netsparse.RigContext(comm, progress=progress)
    assert c.progress_mode == progress
    table = int_table(3, np.float32, seed=2)
    t = c.register(table)
    total = int(offsets()[-1])
    idx = np.array([total - 1, 0, total - 1, int(offsets()[rank])] * 7, np.uint64)
    want = whole(table)[idx.astype(np.int64)]  # before any verb: no MPI collective after one
    out = np.full((len(idx), 3), -1, np.float32)
    plan = c.plan(idx, out=out)  # the context's registered table
    for _ in range(3):
        assert plan.run() is out
        assert np.array_equal(out, want)
    got = out.copy()
    empty = t.plan(np.zeros(0, np.int64))  # an empty list is a valid plan
    assert empty.run().shape == (0, 3)
    # a plan and a plain gather of the same list agree
    assert np.array_equal(t.gather(idx), got)
    c.quiesce(timeout_ms=30000)
    t.close()
    c.close()


# ---- scatter-reduce ----------------------------------------------------------------------------

UFUNC = {"sum": np.add, "min": np.minimum, "max": np.maximum}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("op", ["sum", "min", "max", netsparse.RisOp.SUM, netsparse.RisOp.MAX])
def test_scatter_reduce_equals_numpy(ctx, dtype, op):
    width = None if dtype == np.int32 else 4  # 1-D and 2-D tables
    table = int_table(width, dtype, seed=3)
    before = whole(table)
    t = reg(ctx, table)
    total = int(offsets()[-1])
    rng = np.random.default_rng(50 + rank)
    n = 400
    idx = rng.integers(0, total, size=n)  # repeats: combined on this rank first
    if rank == 0:
        idx = idx.astype(np.uint64)
    values = rng.integers(-30, 31, size=(n,) if width is None else (n, width)).astype(dtype)
    t.scatter_reduce(idx, values, op)
    ctx.quiesce(timeout_ms=30000)  # every owner has applied every rank's rows
    name = op if isinstance(op, str) else op.name.lower()
    want = before.copy()
    for i, v in zip(comm.allgather(idx), comm.allgather(values)):
        UFUNC[name].at(want, i.astype(np.int64), v)
    lo, hi = offsets()[rank : rank + 2]
    assert np.array_equal(table, want[lo:hi])  # in place, in the array this rank registered
    t.close()


def test_scatter_reduce_through_context_then_plan_reads_it(ctx):
    table = np.zeros((local_rows(), 2), np.int64)
    t = reg(ctx, table)
    total = int(offsets()[-1])
    idx = np.arange(total, dtype=np.int64)  # every row of the table, once, from every rank
    ctx.scatter_reduce(idx, np.ones((total, 2), np.int64) * (rank + 1), op="SUM")
    ctx.quiesce(timeout_ms=30000)
    plan = ctx.plan(idx)
    got = plan.run()
    ctx.quiesce(timeout_ms=30000)
    assert np.all(got == nranks * (nranks + 1) // 2)
    t.scatter_reduce(np.zeros(0, np.int64), np.zeros((0, 2), np.int64))  # empty: nothing to do
    ctx.quiesce(timeout_ms=30000)
    t.close()


# ---- errors: a clear Python exception, no crash, the context still works ------------------------


def test_plan_errors(ctx):
    table = int_table(3, np.float64, seed=4)
    t = reg(ctx, table)
    total = int(offsets()[-1])
    good = np.array([0, total - 1], np.int64)
    with pytest.raises(ValueError, match="idx must have dtype int64 or uint64, got float64"):
        t.plan(good.astype(np.float64))
    with pytest.raises(ValueError, match="idx must have dtype int64 or uint64, got int32"):
        t.plan(good.astype(np.int32))
    with pytest.raises(ValueError, match=r"idx has shape \(1, 2\)"):
        t.plan(good.reshape(1, 2))
    with pytest.raises(ValueError, match="idx must be a numpy.ndarray"):
        t.plan([0, 1])
    with pytest.raises(ValueError, match="idx must be C-contiguous"):
        t.plan(np.arange(4, dtype=np.int64)[::2])
    with pytest.raises(ValueError, match="out must have the table's dtype float64, got float32"):
        t.plan(good, out=np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"out must be a writable C-contiguous array of shape "
                                         r"\(len\(idx\), 3\), got \(2, 4\)"):
        t.plan(good, out=np.zeros((2, 4)))
    read_only = np.zeros((2, 3))
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        t.plan(good, out=read_only)
    with pytest.raises(ValueError, match="writable C-contiguous"):
        t.plan(good, out=np.zeros((3, 2)).T)
    # out of range: refused when run, naming the first such idx; the engine goes on
    beyond = t.plan(np.array([0, 1, total, total + 5], np.uint64))
    negative = t.plan(np.array([-1, 0], np.int64))
    with pytest.raises(netsparse.Error, match=r"idx\[2\] = %d is outside the table's %d rows"
                       % (total, total)) as e:
        beyond.run()
    assert e.value.status == NS_ERR_INVALID
    with pytest.raises(netsparse.Error, match=r"idx\[0\] = -1 is outside"):
        negative.run()
    with pytest.raises(netsparse.Error, match="outside"):  # again: it never recorded
        beyond.run()
    ok = t.plan(good)
    got = ok.run().copy()
    ctx.quiesce(timeout_ms=30000)
    assert np.array_equal(got, whole(table)[good])
    # closed: the plan, then the table
    ok.close()
    ok.close()  # twice is fine
    with pytest.raises(ValueError, match="RigPlan.run: the plan is closed"):
        ok.run()
    live = t.plan(good)
    assert not t.closed
    t.close()
    assert t.closed
    with pytest.raises(ValueError, match="RigPlan.run: the table is closed"):
        live.run()
    with pytest.raises(ValueError, match="RigTable.plan: the table is closed"):
        t.plan(good)
    with pytest.raises(netsparse.Error, match="no table is registered") as e:
        ctx.plan(good)
    assert e.value.status == NS_ERR_NOT_REGISTERED
    live.close()


def test_scatter_reduce_errors(ctx):
    table = int_table(2, np.float32, seed=5)
    t = reg(ctx, table)
    before = whole(table)
    total = int(offsets()[-1])
    idx = np.array([0, total - 1, 1], np.int64)
    vals = np.ones((3, 2), np.float32)
    with pytest.raises(ValueError, match="values must have the table's dtype float32, got float64"):
        t.scatter_reduce(idx, vals.astype(np.float64))
    with pytest.raises(ValueError, match=r"values has shape \(3, 3\), needs \(len\(idx\), 2\)"):
        t.scatter_reduce(idx, np.ones((3, 3), np.float32))
    with pytest.raises(ValueError, match=r"values has shape \(2, 2\)"):
        t.scatter_reduce(idx, np.ones((2, 2), np.float32))
    with pytest.raises(ValueError, match=r"values has shape \(6,\)"):
        t.scatter_reduce(idx, np.ones(6, np.float32))
    with pytest.raises(ValueError, match="values must be C-contiguous"):
        t.scatter_reduce(idx, np.ones((2, 3), np.float32).T)
    with pytest.raises(ValueError, match="values must be a numpy.ndarray, got list"):
        t.scatter_reduce(idx, vals.tolist())
    with pytest.raises(ValueError, match="idx must have dtype int64 or uint64, got float32"):
        t.scatter_reduce(idx.astype(np.float32), vals)
    with pytest.raises(ValueError, match="op must be 'sum', 'min' or 'max'.*got 'mean'"):
        t.scatter_reduce(idx, vals, "mean")
    with pytest.raises(ValueError, match="op must be .*got a int"):
        t.scatter_reduce(idx, vals, 0)
    # out of range (and negative): the whole list is checked before anything is sent or written
    with pytest.raises(netsparse.Error, match=r"idx\[1\] = %d is outside the table's %d rows "
                       r"\(nothing was written\)" % (total, total)) as e:
        t.scatter_reduce(np.array([0, total, 1], np.uint64), vals)
    assert e.value.status == NS_ERR_INVALID
    with pytest.raises(netsparse.Error, match=r"idx\[2\] = -3 is outside"):
        t.scatter_reduce(np.array([0, 1, -3], np.int64), vals)
    ctx.quiesce(timeout_ms=30000)
    assert np.array_equal(whole(table), before)  # nothing anywhere changed
    t.scatter_reduce(idx, vals, "max")  # the context still works
    ctx.quiesce(timeout_ms=30000)
    want = before.copy()
    for i in comm.allgather(idx):
        np.maximum.at(want, i, 1.0)
    lo, hi = offsets()[rank : rank + 2]
    assert np.array_equal(table, want[lo:hi])
    t.close()
    with pytest.raises(ValueError, match="RigTable.scatter_reduce: the table is closed"):
        t.scatter_reduce(idx, vals)
    with pytest.raises(netsparse.Error, match="no table is registered") as e:
        ctx.scatter_reduce(idx, vals)
    assert e.value.status == NS_ERR_NOT_REGISTERED
    # a table whose elements scatter_reduce cannot combine
    t16 = reg(ctx, np.zeros((local_rows(), 2), np.int16))
    with pytest.raises(ValueError, match="float32, float64, int32 or int64.*dtype is int16"):
        t16.scatter_reduce(idx, np.zeros((3, 2), np.int16))
    t16.close()


def test_closed_context_and_timeout():
    c = netsparse.RigContext(comm, progress="inline")
    table = int_table(2, np.int64, seed=6)
    t = c.register(table)
    good = np.array([0, int(offsets()[-1]) - 1], np.int64)
    plan = t.plan(good)
    # rank 0 runs while the others wait in MPI: nobody serves it (INLINE), the wait times out
    # and leaves the start in the engine; the quiesce below lets the peers serve it.
    if rank == 0 and nranks > 1:
        with pytest.raises(netsparse.Error, match="no completion within 300 ms") as e:
            plan.run(timeout_ms=300)
        assert e.value.status == NS_ERR_TIMEOUT
    comm.Barrier()
    c.quiesce(timeout_ms=30000)
    got = plan.run().copy()  # usable again once the abandoned start completed
    c.quiesce(timeout_ms=30000)
    assert np.array_equal(got, whole(table)[good])
    t.close()
    c.close()
    with pytest.raises(ValueError, match="RigContext.plan: the RigContext is closed"):
        c.plan(good)
    with pytest.raises(ValueError, match="RigContext.scatter_reduce: the RigContext is closed"):
        c.scatter_reduce(good, np.zeros((2, 2), np.int64))
    with pytest.raises(ValueError, match="RigPlan.run: the RigContext is closed"):
        plan.run()
    with pytest.raises(ValueError, match="RigTable.scatter_reduce: the RigContext is closed"):
        t.scatter_reduce(good, np.zeros((2, 2), np.int64))
    plan.close()  # after the context: the context took it, nothing to do
