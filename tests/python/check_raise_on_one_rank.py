"""Runs raise_on_one_rank.py under `MPIRUN... python3 -m mpi4py` and checks that the job ends
within the time limit with a non-zero status and the exception's text: a rank that raises
does not leave the others hanging in a collective.

    check_raise_on_one_rank.py --mpirun "mpirun --oversubscribe -np 2" --python python3"""

import argparse
import os
import shlex
import subprocess
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--mpirun", required=True)
ap.add_argument("--python", default=sys.executable)
ap.add_argument("--limit", type=float, default=60)
o = ap.parse_args()
script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "raise_on_one_rank.py")
cmd = shlex.split(o.mpirun) + [o.python, "-m", "mpi4py", script]
t0 = time.monotonic()
try:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=o.limit)
except subprocess.TimeoutExpired:
    sys.exit(f"FAILED: the job still ran after {o.limit} s (a rank hangs)")
took = time.monotonic() - t0
out = p.stdout + p.stderr
print(out[-2000:])
print(f"exit status {p.returncode} after {took:.1f} s")
if p.returncode == 0 or "user code failed on the last rank" not in out or "UNREACHABLE" in out:
    sys.exit("FAILED: expected a non-zero exit carrying the exception's text")
print("OK: the raising rank ended the job")
