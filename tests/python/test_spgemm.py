"""DistSpgemm / netsparse.spgemm (C = A @ B, both sparse) against scipy's own product, under
mpirun (issue 38 item 1: SpGEMM in Python as the other kernels).

Run by ctest as `mpirun -np P python3 -m pytest tests/python/test_spgemm.py` (P = 2, 3). Every
test is collective. Values are small integers, so every product is exact whatever the summation
order: compared element for element.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from mpi4py import MPI

import netsparse

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()


def int_matrix(n_rows, n_cols, density, seed):
    rng = np.random.default_rng(seed)
    a = sp.random(n_rows, n_cols, density=density, format="csr", random_state=rng)
    a.data = rng.integers(1, 5, size=a.nnz).astype(np.float64)
    a.sort_indices()
    return a


def block(x, offsets):
    return x[int(offsets[rank]) : int(offsets[rank + 1])]


def gathered(c):
    """C's rows from every rank as one scipy matrix (every rank gets it)."""
    parts = comm.allgather(c.local())
    return sp.vstack(parts).tocsr()


@pytest.fixture(scope="module")
def operands():
    a_whole = int_matrix(83, 71, 0.07, seed=3)  # rectangular, blocks of unequal size
    b_whole = int_matrix(71, 59, 0.09, seed=4)
    a = netsparse.DistMatrix(comm, block(a_whole, netsparse.equal_blocks(83, nranks)),
                             col_offsets=netsparse.equal_blocks(71, nranks), name="A")
    b = netsparse.DistMatrix(comm, block(b_whole, netsparse.equal_blocks(71, nranks)),
                             col_offsets=netsparse.equal_blocks(59, nranks), name="B")
    return a_whole, b_whole, a, b


@pytest.mark.parametrize("mode", ["netsparse", "su", "inspector-executor"])
def test_product_every_element(operands, mode):
    a_whole, b_whole, a, b = operands
    c = netsparse.spgemm(a, b, mode=mode)
    assert c.shape == (83, 59)
    ref = (a_whole @ b_whole).tocsr()
    ref.sort_indices()
    got = gathered(c)
    assert (abs(got - ref)).nnz == 0 or abs(got - ref).max() == 0


@pytest.mark.parametrize("plans", [True, False])
def test_repeated_products_with_new_values(operands, plans):
    a_whole, b_whole, a, b = operands
    product = netsparse.DistSpgemm(a, b, plans=plans)
    first = product.multiply_values()
    assert first.dtype == np.float64 and first.shape == (product.local_nnz,)
    c = product.multiply()
    assert np.array_equal(first, c.local().data)
    # New values, same patterns: A doubled, B plus one on every stored entry.
    a_loc, b_loc = a.local(), b.local()
    product.update_values(2 * a_loc.data, b_loc.data + 1)
    out = np.empty(product.local_nnz)
    assert product.multiply_values(out) is out
    a2 = a_whole.copy()
    a2.data = 2 * a2.data
    b2 = b_whole.copy()
    b2.data = b2.data + 1
    ref = block((a2 @ b2).tocsr(), a.row_offsets)
    ref.sort_indices()
    assert np.array_equal(out, ref.data)
    stats = product.stats()
    assert stats["remote_rows"] >= 0 and stats["setup_seconds"] >= 0
    if nranks > 1:
        assert stats["multiply_bytes_in"] > 0


def test_bad_arguments_raise_on_every_rank(operands):
    _, _, a, b = operands
    with pytest.raises(ValueError, match="spgemm|mode"):
        netsparse.DistSpgemm(a, b, mode="bogus")
    with pytest.raises(ValueError, match="chunk"):
        netsparse.DistSpgemm(a, b, chunk=-1)
    product = netsparse.DistSpgemm(a, b)
    # One rank alone passes values of the wrong length: every rank raises.
    a_vals = a.local().data
    if rank == nranks - 1:
        a_vals = a_vals[:-1] if a_vals.size else np.ones(3)
    with pytest.raises(ValueError, match="a_values"):
        product.update_values(a_vals, b.local().data)
    with pytest.raises(ValueError, match="out"):
        product.multiply_values(np.empty(product.local_nnz + 1))
    # The product still works after the refusals.
    assert product.multiply_values().shape == (product.local_nnz,)
    # B's rows must be split as A's columns.
    with pytest.raises(ValueError):
        netsparse.DistSpgemm(b, b)
