"""The Python module's overhead over the C++ call, in one run.

    mpirun -np 2 python3 python/bench/overhead.py [--matrix gen:kron:16] [--k 16] [--rounds 3]

One DistKernel SpMM (netsparse mode, float32 unless --dtype f64); each round times --iters calls
through Python (netsparse.DistKernel.spmm: argument checks, the ranks' agreement on them, the
GIL released around the call) and --iters calls of the same C++ DistKernel::spmm from a C++
loop in the same process (DistKernel._cpp_spmm_seconds), both as barrier + call, the slowest
rank's time. Rounds alternate, so load drifts hit both; the medians and their ratio are printed.
"""

import argparse
import sys
import time

import numpy as np
from mpi4py import MPI

import netsparse


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--matrix", default="gen:kron:16")
    p.add_argument("--k", type=int, default=16)
    p.add_argument("--mode", default="netsparse")
    p.add_argument("--dtype", default="f32", choices=["f32", "f64"])
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    o = p.parse_args(argv)
    comm = MPI.COMM_WORLD
    dtype = np.float32 if o.dtype == "f32" else np.float64
    a = netsparse.DistMatrix.load(comm, o.matrix)
    kernel = netsparse.DistKernel(a, "spmm", o.k, mode=o.mode, dtype=dtype)
    r, c_off = a.row_offsets, a.col_offsets
    rows, cols = int(r[comm.rank + 1] - r[comm.rank]), int(c_off[comm.rank + 1] - c_off[comm.rank])
    b = np.random.default_rng(comm.rank).standard_normal((cols, o.k)).astype(dtype)
    c = np.empty((rows, o.k), dtype)
    kernel.spmm(b, c)  # warm-up (first-run costs: window registration, page faults)
    kernel._cpp_spmm_seconds(b, c, 1)
    py_t, cpp_t = [], []
    for _ in range(o.rounds):
        mine = []
        for _ in range(o.iters):
            comm.Barrier()
            t0 = time.perf_counter()
            kernel.spmm(b, c)
            mine.append(time.perf_counter() - t0)
        for times, local in ((py_t, mine), (cpp_t, kernel._cpp_spmm_seconds(b, c, o.iters))):
            slowest = np.array(local)
            comm.Allreduce(MPI.IN_PLACE, slowest, op=MPI.MAX)
            times += list(slowest)
    py_m, cpp_m = float(np.median(py_t)), float(np.median(cpp_t))
    if comm.rank == 0:
        print(
            f"python overhead: {a.name} SpMM K={o.k} {o.dtype} {o.mode}, {comm.size} ranks, "
            f"{o.rounds} rounds x {o.iters} calls each way"
        )
        print(f"  through Python  {py_m * 1e3:9.3f} ms (median)")
        print(f"  C++ call        {cpp_m * 1e3:9.3f} ms (median)")
        print(f"  Python / C++    {py_m / cpp_m:9.3f}x  ({(py_m - cpp_m) * 1e6:+.1f} us per call)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
