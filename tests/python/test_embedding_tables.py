"""netsparse.EmbeddingTables / EmbeddingTable against numpy references, under mpirun.

Run by ctest as `mpirun -np P python3 -m pytest tests/python/test_embedding_tables.py` (P = 2, 3).
Every test is collective: each rank runs the same tests in the same order. Every rank holds the
whole of every table as a numpy reference (the initial values are a function of (table, id,
element), the updates every rank's batches, regenerated from their seeds); values are quarters
of small integers, so float sums are exact in any order and compared element for element.
Lookups and pushes are not collective: phases end with quiesce() before any MPI collective.
"""

import os

import numpy as np
import pytest
from mpi4py import MPI

import netsparse

# Imported here, not inside a test: importing torch takes seconds, and a rank doing so between
# lookups would not serve its peers' gathers (INLINE progress) until their watchdog fires.
try:
    import torch
except ImportError:
    if os.environ.get("NETSPARSE_REQUIRE_TORCH") == "1":
        raise
    torch = None

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()
NS_ERR_INVALID = -1
TABLES = 26


def shapes():
    """26 tables: dims 1-16, rows 20-280, four kinds of partition (uneven, rank 0 empty, all on
    the last rank, equal)."""
    dims, offsets = [], []
    for t in range(TABLES):
        dims.append(1 + (t * 7) % 16)
        rows = 20 + (t * 37) % 261
        kind = t % 4
        if kind == 0:
            ends = [rows * (p + 1) * (p + 2) // (nranks * (nranks + 1)) for p in range(nranks)]
        elif kind == 1:
            ends = [0 if p == 0 else rows * p // (nranks - 1) for p in range(nranks)]
        elif kind == 2:
            ends = [rows if p == nranks - 1 else 0 for p in range(nranks)]
        else:
            ends = [rows * (p + 1) // nranks for p in range(nranks)]
        offsets.append(np.array([0] + ends, dtype=np.int64))
    return dims, offsets


def initial(t, rows, dim):
    ids = np.arange(rows)[:, None]
    e = np.arange(dim)[None, :]
    return (((t * 13 + ids * 31 + e * 7) % 64) - 32).astype(np.float32) * 0.25


def batches(r, it, dims, offsets):
    """Per table a batch of ids with heavy repetition (70 % into 5 hot ids), as rank r sends."""
    rng = np.random.default_rng(1000 * r + 17 * it + 1)
    out = []
    for t in range(len(dims)):
        total = int(offsets[t][-1])
        n = 40 + (t * 29) % 120
        hot = rng.integers(0, 5, size=n) * (total // 5)
        cold = rng.integers(0, total, size=n)
        out.append(np.where(rng.random(n) < 0.7, hot, cold).astype(np.int64))
    return out


def deltas(r, it, ids, dims):
    rng = np.random.default_rng(5000 + 1000 * r + it)
    return [(rng.integers(-4, 5, size=(len(i), d)) * 0.25).astype(np.float32)
            for i, d in zip(ids, dims)]


def make(dims, offsets, **options):
    tables = netsparse.EmbeddingTables(comm, dims, row_offsets=offsets, **options)
    for t in range(len(dims)):
        lo, hi = int(offsets[t][rank]), int(offsets[t][rank + 1])
        tables.local_rows(t)[:] = initial(t, int(offsets[t][-1]), dims[t])[lo:hi]
    tables.quiesce()
    return tables


@pytest.mark.parametrize("policy", [
    dict(cache_rows=0, dedup=False), dict(cache_rows=0), dict(cache_rows=16, bucket_rows=4),
    dict(cache_rows=100000, bucket_rows=4)])
def test_many_tables_match_the_reference_through_updates(policy):
    dims, offsets = shapes()
    tables = make(dims, offsets, **policy)
    assert tables.count == TABLES and tables.row_stride == 16
    ref = [initial(t, int(offsets[t][-1]), dims[t]) for t in range(TABLES)]
    for it in range(3):
        ids = batches(rank, it, dims, offsets)
        tables.reset_stats()
        out = tables.lookup(ids)
        for t in range(TABLES):
            np.testing.assert_array_equal(out[t], ref[t][ids[t]], err_msg=f"table {t}")
        # All 26 tables in one gather of rows (and one of versions with the cache).
        assert tables.stats()["gathers"] <= (2 if policy.get("cache_rows") else 1)
        again = tables.lookup(ids)
        for t in range(TABLES):
            np.testing.assert_array_equal(again[t], ref[t][ids[t]], err_msg=f"table {t}")
        tables.quiesce()
        tables.push_gradients(ids, deltas(rank, it, ids, dims))
        tables.quiesce()
        for r in range(nranks):
            their_ids = batches(r, it, dims, offsets)
            for t, (i, d) in enumerate(zip(their_ids, deltas(r, it, their_ids, dims))):
                np.add.at(ref[t], i, d)
    every = [np.arange(int(offsets[t][-1])) for t in range(TABLES)]
    out = tables.lookup(every)
    for t in range(TABLES):
        np.testing.assert_array_equal(out[t], ref[t], err_msg=f"table {t} (every row)")
    tables.quiesce()
    tables.close()


def test_out_of_range_id_of_any_table_is_refused_on_every_rank_and_writes_nothing():
    dims, offsets = shapes()
    tables = make(dims, offsets, cache_rows=64)
    bad_table = rank + 1
    bad_id = int(offsets[bad_table][-1])
    ids = batches(rank, 0, dims, offsets)
    ids[bad_table] = np.insert(ids[bad_table], 3, bad_id)
    outs = [np.full((len(i), d), 99.0, dtype=np.float32) for i, d in zip(ids, dims)]
    with pytest.raises(netsparse.Error) as lookup_error:
        tables.lookup(ids, outs)
    assert lookup_error.value.status == NS_ERR_INVALID
    assert f"table {bad_table}: id {bad_id} at position 3" in str(lookup_error.value)
    for t in range(TABLES):
        assert (outs[t] == 99.0).all(), f"table {t} written"
    with pytest.raises(netsparse.Error, match=f"table {bad_table}: id {bad_id}"):
        tables.push_gradients(ids, [np.ones((len(i), d), np.float32) for i, d in zip(ids, dims)])
    negative = [np.zeros(1, np.int64) for _ in range(TABLES)]
    negative[bad_table] = np.array([0, -5])
    with pytest.raises(ValueError, match=f"table {bad_table}: id -5 at position 1"):
        tables.lookup(negative)
    with pytest.raises(ValueError, match="25 id lists for 26 tables"):
        tables.lookup(ids[:-1])
    # Every rank refused; no row of any table changed anywhere.
    assert all(comm.allgather(True))
    every = [np.arange(int(offsets[t][-1])) for t in range(TABLES)]
    out = tables.lookup(every)
    unchanged = all(np.array_equal(out[t], initial(t, int(offsets[t][-1]), dims[t]))
                    for t in range(TABLES))
    tables.quiesce()
    assert all(comm.allgather(unchanged))
    tables.close()


def test_ranks_that_disagree_on_the_tables_all_raise():
    dims, offsets = shapes()
    mine = list(dims)
    if rank == nranks - 1:
        mine[5] = 4 if mine[5] == 3 else 3
    with pytest.raises(netsparse.Error, match="disagree on the tables"):
        netsparse.EmbeddingTables(comm, mine, row_offsets=offsets)
    with pytest.raises(ValueError):  # agreed: every rank raises (rank 0's argument only)
        netsparse.EmbeddingTables(comm, dims, row_offsets=offsets,
                                  progress="bogus" if rank == 0 else "auto")


def test_one_table_and_torch_ids():
    table = netsparse.EmbeddingTable(comm, 8, rows=100, cache_rows=32)
    lo, hi = int(table.row_offsets[0][rank]), int(table.row_offsets[0][rank + 1])
    whole = initial(0, 100, 8)
    table.local_rows()[:] = whole[lo:hi]
    table.quiesce()
    ids = [0, 99, 50, 50, 1]
    np.testing.assert_array_equal(table.lookup(ids), whole[ids])
    if torch is not None:  # (NETSPARSE_REQUIRE_TORCH=1 in ctest when torch is installed)
        out = table.lookup(torch.tensor(ids, dtype=torch.int64))
        np.testing.assert_array_equal(out, whole[ids])
    table.quiesce()
    table.close()


def test_tables_without_ids_in_a_call():
    """Some tables with no ids (empty arrays, lists) beside others: empty outputs of the right
    shape, the others' rows right; a push with empty tables changes only the others."""
    dims, offsets = shapes()
    tables = make(dims, offsets)
    ids = [np.array([0, int(offsets[t][-1]) - 1]) if t % 3 == 0 else [] for t in range(TABLES)]
    out = tables.lookup(ids)
    for t in range(TABLES):
        want = initial(t, int(offsets[t][-1]), dims[t])[np.asarray(ids[t], dtype=np.int64)]
        assert out[t].shape == (len(ids[t]), dims[t])
        np.testing.assert_array_equal(out[t], want, err_msg=f"table {t}")
    tables.quiesce()
    tables.push_gradients(ids, [np.ones((len(i), d), np.float32) for i, d in zip(ids, dims)])
    tables.quiesce()
    every = [np.arange(int(offsets[t][-1])) for t in range(TABLES)]
    out = tables.lookup(every)
    for t in range(TABLES):
        want = initial(t, int(offsets[t][-1]), dims[t])
        if t % 3 == 0:
            want[[0, int(offsets[t][-1]) - 1]] += nranks  # every rank pushed ones
        np.testing.assert_array_equal(out[t], want, err_msg=f"table {t}")
    tables.quiesce()
    tables.close()
