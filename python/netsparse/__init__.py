"""NetSparse for Python: distributed SpMM / SDDMM / SpMV over mpi4py communicators.

    from mpi4py import MPI
    import numpy as np, scipy.sparse as sp, netsparse

    a = netsparse.DistMatrix(MPI.COMM_WORLD, a_local)   # a_local: this rank's rows (scipy)
    k = netsparse.DistKernel(a, "spmm", 16)              # collective setup
    c = k.spmm(b_local)                                  # collective: C = A @ B, this rank's rows

Layout (as in the C++ library, docs/api.md): rank p holds rows a.row_offsets[p]:[p+1] of A and
of the row-indexed operands (C of SpMM, y of SpMV, X of SDDMM), and rows
a.col_offsets[p]:[p+1] of the column-indexed ones (B, x, Y). Dense operands are numpy arrays
used in place (no copy): dtype exactly the kernel's (float32 by default, float64 with
dtype=numpy.float64), C-contiguous, this rank's block shape. Anything else raises ValueError.

The RIG verbs on numpy tables (docs/api.md, "Python"): RigContext(comm) opens an engine,
ctx.register(rows) registers this rank's rows of a distributed table (collective), and then,
not collectively: table.gather(idx) -> rows idx; table.plan(idx) -> a RigPlan whose run()
replays that gather (recorded once); table.scatter_reduce(idx, values, "sum" | "min" | "max" |
RisOp.X) combines values into rows idx at their owners, in place. End each phase of verbs with
ctx.quiesce() on every rank.

Embedding tables (docs/embedding.md): EmbeddingTables(comm, dims, rows=... | row_offsets=...)
holds many row-partitioned float32 tables on one context; lookup(ids) takes one id array per
table and returns one (n, dim) array per table, all tables fetched by one gather;
push_gradients(ids, deltas) adds the deltas at the owners. EmbeddingTable is the one-table form.

Errors. Every collective call first agrees across the ranks on whether each rank's arguments
are acceptable, and the library itself agrees on its own failures (bad matrix, bad file, bad
partition): when any rank refuses, EVERY rank raises (the refusing rank with its own message,
the others with "rank R: <that message>"), so no rank is left waiting in a collective. What
remains is a Python exception raised by your own code on one rank only: the other ranks then
wait in their next collective. Run scripts as `mpirun -np N python3 -m mpi4py script.py`
(mpi4py then calls MPI_Abort on an unhandled exception, ending every rank) or catch and call
MPI.COMM_WORLD.Abort(1) yourself. (The objects still alive on a rank that ends on an uncaught
exception are not torn down: their teardown is collective and would wait for the peers, so
the abort would never come; tests/python/check_raise_on_one_rank.py checks the job ends.) C API failures raise netsparse.Error (a RuntimeError with
.status, the ns_status_t); malformed matrix files raise netsparse.ParseError (a ValueError).
"""

import atexit as _atexit
import sys as _sys

import numpy as _np
import scipy.sparse as _sp
from mpi4py import MPI as _MPI  # initializes MPI (thread level MULTIPLE) before the module loads

try:
    from . import _netsparse
except ImportError as _error:
    from . import _build_info

    _here = "%d.%d" % _sys.version_info[:2]
    if _here != _build_info.python_version:
        raise ImportError(
            "netsparse: its extension module was built for Python %s (%s), but this is Python %s "
            "(%s); build it for this interpreter: cmake -DPython3_EXECUTABLE=%s ..."
            % (_build_info.python_version, _build_info.python_executable, _here,
               _sys.executable, _sys.executable)
        ) from _error
    raise
from ._netsparse import (  # noqa: F401  (re-exported)
    DistKernel,
    DistMatrix,
    DistSpgemm,
    Engine,
    Error,
    ParseError,
    Pattern,
    RigContext,
    RigPlan,
    RigTable,
    RisOp,
    TransposedSpmm,
)

__all__ = [
    "DistMatrix",
    "DistKernel",
    "TransposedSpmm",
    "DistSpgemm",
    "spgemm",
    "Engine",
    "Pattern",
    "RigContext",
    "RigTable",
    "RigPlan",
    "RisOp",
    "Error",
    "ParseError",
    "equal_blocks",
    "balanced_blocks",
    "EmbeddingTables",
    "EmbeddingTable",
]


def _abandon_teardown_after_uncaught_exception():
    """An uncaught exception is ending this rank (Python set sys.last_value before running the
    atexit hooks) while its peers may wait in a collective: the objects still alive are left
    as they are instead of torn down collectively (which would wait for those peers), so that
    mpi4py's MPI_Abort (`python3 -m mpi4py`) runs and ends the job."""
    if getattr(_sys, "last_value", None) is not None:
        _netsparse._abandon_teardown()


_atexit.register(_abandon_teardown_after_uncaught_exception)


def _csr_arrays(a, name="the matrix"):
    """(indptr, indices, data, shape) of a scipy.sparse matrix as CSR, dtypes the module takes.

    COO (and any other format) is converted with .tocsr(), which sums repeated entries and sorts
    each row; a CSR matrix is taken as it is, so unsorted or repeated column indices in it are
    refused (ValueError naming the row) instead of silently repaired."""
    if not _sp.issparse(a):
        raise TypeError(f"{name} must be a scipy.sparse matrix, got {type(a).__name__}")
    if a.format != "csr":
        a = a.tocsr()
        a.sum_duplicates()
    indptr = a.indptr if a.indptr.dtype in (_np.int32, _np.int64) else a.indptr.astype(_np.int64)
    indices = (
        a.indices if a.indices.dtype in (_np.int32, _np.int64) else a.indices.astype(_np.int64)
    )
    data = a.data if a.data.dtype in (_np.float32, _np.float64) else a.data.astype(_np.float64)
    return (
        _np.ascontiguousarray(indptr),
        _np.ascontiguousarray(indices),
        _np.ascontiguousarray(data),
        a.shape,
    )


def _to_scipy(arrays, shape):
    indptr, indices, data = arrays
    return _sp.csr_matrix((data, indices, indptr), shape=shape)


def equal_blocks(n, nranks):
    """Row offsets of n rows in nranks blocks differing by at most one row (the first n % P
    blocks get one more): rank p holds rows offsets[p]:offsets[p + 1]."""
    base, extra = divmod(int(n), int(nranks))
    sizes = [base + (1 if p < extra else 0) for p in range(nranks)]
    return _np.concatenate([[0], _np.cumsum(sizes)]).astype(_np.int64)


def balanced_blocks(indptr, nranks):
    """Row offsets giving each rank about nnz / nranks nonzeros, from a whole matrix's CSR indptr
    (boundary p is the row whose prefix is nearest to p * nnz / nranks)."""
    indptr = _np.asarray(indptr, dtype=_np.int64)
    n, nnz = len(indptr) - 1, int(indptr[-1])
    if nnz == 0:
        return equal_blocks(n, nranks)
    targets = _np.arange(1, nranks) * (nnz / nranks)
    right = _np.searchsorted(indptr, targets).clip(0, n)
    left = (right - 1).clip(0, n)
    pick = _np.where(
        _np.abs(indptr[left] - targets) <= _np.abs(indptr[right] - targets), left, right
    )
    return _np.concatenate([[0], _np.maximum.accumulate(pick), [n]]).astype(_np.int64)


def _from_global(comm, a, root=0, partition="equal_rows", name="python"):
    """Collective: the whole matrix a (scipy.sparse) on root, ignored elsewhere; each rank gets
    its rows (partition "equal_rows" or "balanced_nnz") through mpi4py's scatter."""
    rank, size = comm.Get_rank(), comm.Get_size()
    blocks = offsets = None
    problem = None
    if rank == root:
        try:
            if not _sp.issparse(a):
                raise TypeError(f"a must be a scipy.sparse matrix on the root, got {type(a).__name__}")
            a = a.tocsr()
            if partition == "equal_rows":
                offsets = equal_blocks(a.shape[0], size)
            elif partition == "balanced_nnz":
                offsets = balanced_blocks(a.indptr, size)
            else:
                raise ValueError(f"partition must be 'equal_rows' or 'balanced_nnz', got {partition!r}")
            blocks = [a[int(offsets[p]) : int(offsets[p + 1])] for p in range(size)]
        except Exception as e:  # every rank raises, none waits in the scatter below
            problem = e
    problem, offsets = comm.bcast((problem, offsets), root=root)
    if problem is not None:
        raise problem if rank == root else ValueError(f"rank {root}: {problem}")
    mine = comm.scatter(blocks, root=root)
    return DistMatrix(comm, mine, row_offsets=offsets, name=name)


def _local(self):
    """This rank's rows as a scipy.sparse.csr_matrix (a copy; float64 values)."""
    r = self.row_offsets
    return _to_scipy(self._local_arrays(), (int(r[self.rank + 1] - r[self.rank]), self.shape[1]))


def _sample_rows(self, keep_fraction=1.0, max_per_row=0, seed=1):
    """GNN-style neighbour sampling of this rank's rows (the C++ sample_rows): nonzero (r, c) is
    kept when a hash of (seed, r, c) falls below keep_fraction; with max_per_row > 0 at most
    that many per row (smallest hashes). The same for any partition. Returns scipy CSR."""
    r = self.row_offsets
    return _to_scipy(
        self._sample_rows(float(keep_fraction), int(max_per_row), int(seed)),
        (int(r[self.rank + 1] - r[self.rank]), self.shape[1]),
    )


def _transpose(self):
    """Collective: A^T, split by this matrix's column offsets."""
    return self._transpose()


def spgemm(a, b, mode="netsparse", **options):
    """C = A @ B for two sparse DistMatrix objects (B's rows split as A's columns), as a
    DistMatrix: one DistSpgemm built and multiplied once. Collective. Options as DistSpgemm's."""
    return DistSpgemm(a, b, mode=mode, **options).multiply()


DistMatrix.from_global = staticmethod(_from_global)
_netsparse.DistMatrix.local = _local
_netsparse.DistMatrix.sample_rows = _sample_rows
_netsparse.DistMatrix.transpose = _transpose
_netsparse.DistMatrix.__repr__ = lambda self: (
    f"<netsparse.DistMatrix {self.name!r} {self.shape[0]}x{self.shape[1]}, nnz {self.nnz}, "
    f"rank {self.rank}/{self.nranks}>"
)


from .embedding import EmbeddingTable, EmbeddingTables  # noqa: E402  (needs equal_blocks)
