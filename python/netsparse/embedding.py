"""Embedding tables partitioned by rows over the ranks (the C++ EmbeddingTables, docs/embedding.md).

    from mpi4py import MPI
    import numpy as np, netsparse

    tables = netsparse.EmbeddingTables(MPI.COMM_WORLD, dims=[16] * 26, rows=[100000] * 26,
                                       cache_rows=65536)          # collective
    for t in range(tables.count):
        tables.local_rows(t)[:] = ...     # this rank's rows of table t (a view, rows x dim)
    tables.local_rows_changed(); tables.quiesce()
    out = tables.lookup(ids)              # ids: one int array per table -> one (n_t, dim_t)
                                          # float32 array per table, all tables in ONE gather
    tables.push_gradients(ids, deltas)    # rows += deltas at their owners (repeats summed)
    tables.quiesce()                      # every rank's update in before the next lookups

Every table has its own dim and its own row partition: rows=[n_0, n_1, ...] splits table t in
equal blocks (netsparse.equal_blocks), row_offsets=[offsets_0, ...] (nranks + 1 each) gives it
exactly. All tables share one context, one registered region, one cache and one gather per
lookup; a region row is the widest table's row, so narrower tables' rows are padded (on the wire
too). EmbeddingTable is the one-table form (lookup(ids) -> one array).

Ids may be numpy arrays, torch tensors (CPU) or lists of non-negative integers. An id at or
beyond a table's rows raises netsparse.Error naming the table, the id and its position, a
negative one ValueError; in both cases nothing is fetched or written. The constructor is
collective (every rank raises when one refuses its arguments); lookups and pushes are not:
separate phases with quiesce() (an MPI barrier would stop an INLINE engine from serving its
peers), as in C++.
"""

import numpy as _np

from . import _netsparse
from . import equal_blocks as _equal_blocks

__all__ = ["EmbeddingTables", "EmbeddingTable"]


def _ids_array(ids, t):
    """ids as a contiguous 1-D uint64 array; ValueError naming table t for anything else."""
    if hasattr(ids, "detach") and hasattr(ids, "numpy"):  # a torch tensor
        ids = ids.detach().cpu().numpy()
    a = _np.asarray(ids)
    if a.size == 0:
        return _np.zeros(0, dtype=_np.uint64)
    if a.ndim != 1:
        raise ValueError(f"table {t}: ids must be 1-D, got shape {a.shape}")
    if a.dtype.kind == "u":
        return _np.ascontiguousarray(a, dtype=_np.uint64)
    if a.dtype.kind != "i":
        raise ValueError(f"table {t}: ids must be integers, got dtype {a.dtype}")
    if a.min() < 0:
        j = int(_np.argmax(a < 0))
        raise ValueError(f"table {t}: id {int(a[j])} at position {j} is negative")
    return _np.ascontiguousarray(a, dtype=_np.int64).view(_np.uint64)


def _values_array(values, rows, dim, t, what):
    if hasattr(values, "detach") and hasattr(values, "numpy"):
        values = values.detach().cpu().numpy()
    a = _np.ascontiguousarray(values, dtype=_np.float32)
    if a.shape != (rows, dim):
        raise ValueError(f"table {t}: {what} has shape {a.shape}, needs ({rows}, {dim})")
    return a


class EmbeddingTables:
    """N row-partitioned float32 embedding tables sharing one engine (see the module's doc).

    EmbeddingTables(comm, dims, rows=None, row_offsets=None, cache_rows=0, dedup=True,
                    bucket_rows=16, progress="auto")  # collective
    """

    def __init__(self, comm, dims, rows=None, row_offsets=None, cache_rows=0, dedup=True,
                 bucket_rows=16, progress="auto"):
        nranks = comm.Get_size()
        dims = [int(d) for d in dims]
        if row_offsets is None:
            if rows is None:
                raise ValueError("EmbeddingTables: give rows (per table) or row_offsets")
            if len(rows) != len(dims):
                raise ValueError(f"EmbeddingTables: {len(rows)} row counts for {len(dims)} dims")
            row_offsets = [_equal_blocks(n, nranks) for n in rows]
        offsets = [[int(o) for o in _np.asarray(r).ravel()] for r in row_offsets]
        self._set = _netsparse._EmbeddingTables(
            comm, dims, offsets, int(cache_rows), bool(dedup), int(bucket_rows), progress)
        self._comm = comm
        self.dims = dims
        self.row_offsets = [_np.asarray(o, dtype=_np.int64) for o in offsets]

    @property
    def count(self):
        return len(self.dims)

    @property
    def row_stride(self):
        return self._set.row_stride

    def total_rows(self, t):
        return int(self.row_offsets[t][-1])

    def local_rows(self, t):
        """This rank's rows of table t: a writable (rows, dim) view of the registered memory."""
        return self._set.local_rows(t)[:, : self.dims[t]]

    def local_rows_changed(self):
        """After writing local_rows (between quiesce() calls): peers' cached copies are refused."""
        self._set.local_rows_changed()

    def lookup(self, ids, out=None):
        """ids: one id list per table -> one (len(ids[t]), dims[t]) float32 array per table."""
        if len(ids) != self.count:
            raise ValueError(f"lookup: {len(ids)} id lists for {self.count} tables")
        arrays = [_ids_array(i, t) for t, i in enumerate(ids)]
        return self._set.lookup(arrays, out)

    def push_gradients(self, ids, deltas):
        """Row ids[t][j] of table t += deltas[t][j] at its owner, every table in one exchange."""
        if len(ids) != self.count or len(deltas) != self.count:
            raise ValueError(
                f"push_gradients: {len(ids)} id lists and {len(deltas)} delta arrays for "
                f"{self.count} tables")
        arrays = [_ids_array(i, t) for t, i in enumerate(ids)]
        values = [
            _values_array(d, len(arrays[t]), self.dims[t], t, "deltas")
            for t, d in enumerate(deltas)
        ]
        self._set.push_gradients(arrays, values)

    def set_options(self, cache_rows, dedup=True):
        """This rank's lookup policy (the cache is emptied); dedup=False: a plain gather."""
        self._set.set_options(int(cache_rows), bool(dedup))

    def stats(self):
        return self._set.stats()

    def reset_stats(self):
        self._set.reset_stats()

    def quiesce(self):
        """Collective: serve the peers until every rank has called it."""
        self._set.quiesce()

    def close(self):
        """Collective: frees the tables and their context."""
        self._set.close()


class EmbeddingTable(EmbeddingTables):
    """One row-partitioned table: EmbeddingTable(comm, dim, rows=None, row_offsets=None, ...);
    lookup(ids) -> (len(ids), dim) float32, push_gradients(ids, deltas), local_rows()."""

    def __init__(self, comm, dim, rows=None, row_offsets=None, **options):
        super().__init__(comm, [dim], None if rows is None else [rows],
                         None if row_offsets is None else [row_offsets], **options)

    @property
    def dim(self):
        return self.dims[0]

    def local_rows(self, t=0):
        return super().local_rows(t)

    def lookup(self, ids, out=None):
        return super().lookup([ids], None if out is None else [out])[0]

    def push_gradients(self, ids, deltas):
        super().push_gradients([ids], [deltas])
