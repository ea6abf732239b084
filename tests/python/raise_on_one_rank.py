"""One rank raises while the others wait in a netsparse collective (run by
check_raise_on_one_rank.py under `mpirun -np 2 python3 -m mpi4py`): mpi4py then calls MPI_Abort
for the uncaught exception and the job ends instead of hanging (README, python/netsparse)."""

import numpy as np
from mpi4py import MPI

import netsparse

comm = MPI.COMM_WORLD
a = netsparse.DistMatrix.load(comm, "gen:kron:8")
kernel = netsparse.DistKernel(a, "spmm", 4)
r = comm.rank
b = np.ones((int(a.col_offsets[r + 1] - a.col_offsets[r]), 4), np.float32)
kernel.spmm(b)
if r == comm.size - 1:
    raise RuntimeError("user code failed on the last rank")
kernel.spmm(b)  # the other ranks wait here for the last rank, which never comes
print("UNREACHABLE: a collective completed without the last rank", flush=True)
