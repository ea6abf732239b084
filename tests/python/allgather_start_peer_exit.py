"""A rank that exits with non-blocking all-gathers outstanding (netsparse.collectives, np >= 3,
under orte_enable_recovery so mpirun keeps the survivors alive): every survivor's wait() raises
netsparse.Error naming the dead rank -- no hang, no false success, no crash.

Every rank starts four all-gathers of 8 MiB each (a start runs one driver round: the victim's
first blocks leave, not all of them, since the library moves data only inside its calls), all
meet in an MPI barrier (so every start's argument agreement is over), and the last rank leaves
with os._exit. The survivors agree over a communicator without the victim and rank 0 prints the
verdict line ctest matches ("allgather_start_peer_exit: PASS").

    mpirun -np 3 python3 allgather_start_peer_exit.py
"""

import os
import sys
import time

import numpy as np
from mpi4py import MPI

import netsparse
from netsparse.collectives import Collectives

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
if size < 3:
    sys.exit("allgather_start_peer_exit: FAIL (needs np >= 3)")
victim = size - 1
survivors = comm.Split(MPI.UNDEFINED if rank == victim else 0, rank)
coll = Collectives(comm, timeout_ms=2000, packet_bytes=4096)
n = 1 << 21  # 8 MiB of fp32 per rank and all-gather
sends = [np.full(n, rank + k, np.float32) for k in range(4)]
requests = [coll.allgather_start(x) for x in sends]
comm.Barrier()
if rank == victim:
    os._exit(0)  # no wait, no close, no MPI_Finalize: the process vanishes

failures = 0
t0 = time.monotonic()
for k, r in enumerate(requests):
    try:
        r.wait()
        print(f"[rank {rank}] FAIL: all-gather {k} succeeded without rank {victim}'s data")
        failures += 1
    except netsparse.Error as e:
        # "rank 2 failed (reported by the transport)" when a receive found it gone, "sending to
        # rank 2: peer failed" when a send did: either way the dead rank is named.
        if f"rank {victim}" not in str(e):
            print(f"[rank {rank}] FAIL: all-gather {k}'s error does not name rank {victim}: {e}")
            failures += 1
        elif k == 0:
            print(f"[rank {rank}] all-gather 0 failed after {time.monotonic() - t0:.3f} s: {e}")
# (No later call here: every Python call first agrees on its arguments with one MPI_Allreduce
# over the whole communicator, which the dead rank would hang. test_collectives_peer_exit holds
# that the communicator is broken afterwards.)
sys.stdout.flush()
total = survivors.allreduce(failures)
if rank == 0:
    verdict = "PASS" if total == 0 else "FAIL"
    print(f"allgather_start_peer_exit: {verdict} ({size - 1} survivors, {total} failed checks)")
    sys.stdout.flush()
# MPI_Finalize hangs under recovery with a dead rank: the result is reported, leave.
os._exit(0 if failures == 0 else 1)
