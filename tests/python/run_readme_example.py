"""Runs the Python example of README.md as written, then checks its result against scipy.

    mpirun -np 2 python3 run_readme_example.py README.md

The example is the one ```python block of the README's "Python" section. It must be at most 10
lines (the goal: a distributed SpMM in <= 10 lines of Python), run without error on every rank,
and leave `c` equal to this rank's rows of scipy's A @ B for the `a_local` / `b` it built."""

import re
import sys

import numpy as np
import scipy.sparse as sp
from mpi4py import MPI


def python_block(readme):
    text = open(readme, encoding="utf-8").read()
    section = re.search(r"^## Python\n(.*?)(?=^## )", text, re.S | re.M)
    if not section:
        sys.exit(f"{readme}: no '## Python' section")
    blocks = re.findall(r"^```python\n(.*?)^```", section.group(1), re.S | re.M)
    if len(blocks) != 1:
        sys.exit(f"{readme}: the Python section has {len(blocks)} ```python blocks, expected one")
    return blocks[0]


def main():
    code = python_block(sys.argv[1])
    lines = [line for line in code.splitlines() if line.strip()]
    if len(lines) > 10:
        sys.exit(f"the README example has {len(lines)} lines, the goal is at most 10")
    env = {"__name__": "__main__"}
    exec(compile(code, "README.md (python)", "exec"), env)
    comm, a, c = MPI.COMM_WORLD, env["a"], env["c"]
    whole = sp.vstack(comm.allgather(env["a_local"])).tocsr()
    b = np.vstack(comm.allgather(env["b"]))
    r = a.row_offsets
    want = (whole @ b)[r[comm.rank] : r[comm.rank + 1]]
    err = float(np.abs(c - want).max() / max(1.0, np.abs(want).max()))
    ok = comm.allreduce(err < 1e-5, op=MPI.LAND)
    if comm.rank == 0:
        print(f"README example: {len(lines)} lines, max relative error {err:.1e} -> "
              f"{'OK' if ok else 'FAILED'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
