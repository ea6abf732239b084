"""The 2-layer GCN of examples/gcn_train.cpp, in PyTorch on netsparse.torch.DistSpmm.

    mpirun -np 2 python3 -m mpi4py examples/gcn_train.py [--matrix gen:kron:10] [--epochs 20]

Same model, data and training as the C++ example (so the loss curves agree up to float32
rounding): H1 = relu(Ahat X W1), Z = Ahat H1 W2, softmax cross-entropy over every node, with
Ahat = D^-1/2 (S + I) D^-1/2 and S this epoch's sample of the graph (at most --fanout
neighbours per row, by the library's sample_rows: the same sample on every rank count). The
distributed products (S + I) Y are DistSpmm (forward: DistKernel SpMM, netsparse mode with
dynamic_pattern; backward: the transposed product), everything else is plain torch on this
rank's rows; autograd gives the gradients, summed over the ranks (with the loss) by the library's
allreduce (netsparse.collectives, --grad-allreduce netsparse, the default; the gradient tensors
in place) or by mpi4py's Allreduce (--grad-allreduce mpi). --reproducible asks for the library's
bitwise-reproducible allreduce (a fixed tree over the ranks): at a given rank count the loss
curve is then the same bit for bit in every run. Adam is the C++ example's (moments in double).
Features and labels are the C++ example's hashes, so nothing is read from disk.

    --curve-out FILE            rank 0 writes the loss per epoch, one hexadecimal float a line
    --expect-curve FILE         exit 1 unless the loss per epoch agrees with FILE's (from
                                --curve-out of this or the C++ example) to
    --expect-curve-tolerance X  relative; 0 (default): bit for bit
"""

import argparse
import math
import sys
import time

import numpy as np
import scipy.sparse as sp
import torch
from mpi4py import MPI

import netsparse
from netsparse.collectives import Collectives
from netsparse.torch import DistSpmm

U64 = np.uint64


def mix(z):
    z = (z ^ (z >> U64(30))) * U64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> U64(27))) * U64(0x94D049BB133111EB)
    return z ^ (z >> U64(31))


def draw(seed, a, b):
    """Uniform in [-1, 1) from (seed, a, b): the C++ example's counter-based draw."""
    with np.errstate(over="ignore"):
        a = np.asarray(a, dtype=U64)
        b = np.asarray(b, dtype=U64)
        z = mix(mix(U64(seed) * U64(0x9E3779B97F4A7C15) + a) ^ (b + U64(0x632BE59BD9B4E019)))
    return (z >> U64(11)).astype(np.float64) * 2.0**-52 - 1.0


def with_self_loops(s, row_begin):
    """S + I for this rank's rows, every value 1."""
    n = s.shape[0]
    s = s.copy()
    s.data[:] = 1.0
    eye = sp.csr_matrix((np.ones(n), (np.arange(n), row_begin + np.arange(n))), shape=s.shape)
    m = (s + eye).tocsr()
    m.data[:] = 1.0
    m.sort_indices()
    return m


def inv_sqrt_degree(m):
    return 1.0 / np.sqrt(np.diff(m.indptr).astype(np.float64))


class Gcn:
    def __init__(self, a, o, coll):
        """coll: a netsparse Collectives for the gradient sums, or None for mpi4py's Allreduce."""
        self.a, self.o, self.comm, self.coll = a, o, a.comm, coll
        r = a.row_offsets
        self.rb, self.n = int(r[a.rank]), int(r[a.rank + 1] - r[a.rank])
        f0, h, c = o.features, o.hidden, o.classes
        full = with_self_loops(a.local(), self.rb)
        self.spmm = DistSpmm(a, h, mode=o.mode, backward=o.backward)
        self.spmm.set_pattern(full)
        # Features, and labels from a hidden linear model on Ahat_full X (f64 SpMM, su mode).
        node = self.rb + np.arange(self.n)
        self.x = draw(o.seed, node[:, None], 1000 + np.arange(f0)[None, :]).astype(np.float32)
        d = inv_sqrt_degree(full)
        smooth = netsparse.DistKernel(a, "spmm", f0, mode="su", dtype=np.float64)
        smooth.set_pattern(full)
        ax = smooth.spmm(np.ascontiguousarray(self.x.astype(np.float64) * d[:, None]))
        ax *= d[:, None]
        wtrue = draw(o.seed + 7, np.arange(f0)[:, None], np.arange(c)[None, :])
        score = np.zeros((self.n, c))
        for x in range(f0):  # the C++ loop's summation order: argmax ties break the same way
            score += ax[:, x : x + 1] * wtrue[x][None, :]
        self.labels = torch.from_numpy(np.argmax(score, axis=1))
        # Weights (Glorot-uniform from the hash), Adam moments in double.
        s1, s2 = math.sqrt(6.0 / (f0 + h)), math.sqrt(6.0 / (h + c))
        w1 = (s1 * draw(o.seed + 1, np.arange(f0 * h), 0)).astype(np.float32).reshape(f0, h)
        w2 = (s2 * draw(o.seed + 2, np.arange(h * c), 0)).astype(np.float32).reshape(h, c)
        self.w = [torch.from_numpy(w1).requires_grad_(), torch.from_numpy(w2).requires_grad_()]
        self.m = [np.zeros(w.shape) for w in self.w]
        self.v = [np.zeros(w.shape) for w in self.w]
        self.t = 0
        self.xt = torch.from_numpy(self.x)

    def prepare(self, e):
        """This epoch's sample (S + I) for the forward and backward products."""
        o = self.o
        s = self.a.sample_rows(keep_fraction=1.0, max_per_row=o.fanout, seed=o.seed * 1000003 + e)
        sample = with_self_loops(s, self.rb)
        self.dinv = torch.from_numpy(inv_sqrt_degree(sample).astype(np.float32))[:, None]
        self.spmm.set_pattern(sample)

    def forward_backward(self):
        w1, w2 = self.w
        for w in self.w:
            w.grad = None
        dinv = self.dinv
        z1 = self.spmm((self.xt @ w1) * dinv) * dinv
        q = self.spmm(torch.relu(z1) * dinv) * dinv
        z2 = q @ w2
        ce = torch.nn.functional.cross_entropy(z2, self.labels, reduction="none")
        n_total = self.a.shape[0]
        (ce.sum() / n_total).backward()
        loss = np.array([ce.double().sum().item()])
        if self.coll is not None:
            for w in self.w:  # the gradient tensor itself, in place
                self.coll.allreduce(w.grad, reproducible=self.o.reproducible)
            self.coll.allreduce(loss, reproducible=self.o.reproducible)
        else:
            for w in self.w:
                self.comm.Allreduce(MPI.IN_PLACE, w.grad.numpy(), op=MPI.SUM)
            self.comm.Allreduce(MPI.IN_PLACE, loss, op=MPI.SUM)
        return loss[0] / n_total

    def step(self):
        """Adam as in the C++ example (moments and step in double, applied in float32)."""
        self.t += 1
        b1, b2, eps, lr = 0.9, 0.999, 1e-8, self.o.lr
        c1, c2 = 1 - b1**self.t, 1 - b2**self.t
        with torch.no_grad():
            for w, m, v in zip(self.w, self.m, self.v):
                g = w.grad.numpy().astype(np.float64)
                m *= b1
                m += (1 - b1) * g
                v *= b2
                v += (1 - b2) * g * g
                w -= torch.from_numpy((lr * (m / c1) / (np.sqrt(v / c2) + eps)).astype(np.float32))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--matrix", default="gen:kron:10")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--fanout", type=int, default=10)
    p.add_argument("--features", type=int, default=16)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--mode", default="netsparse")
    p.add_argument("--backward", default="transpose", choices=["transpose", "push"])
    p.add_argument("--grad-allreduce", default="netsparse", choices=["netsparse", "mpi"])
    p.add_argument("--reproducible", action="store_true")
    p.add_argument("--expect-loss-drop", type=float, default=0.0)
    p.add_argument("--curve-out", default="")
    p.add_argument("--expect-curve", default="")
    p.add_argument("--expect-curve-tolerance", type=float, default=0.0)
    o = p.parse_args(argv)
    if o.reproducible and o.grad_allreduce != "netsparse":
        p.error("--reproducible needs --grad-allreduce netsparse")
    o.classes = max(2, o.classes)
    comm = MPI.COMM_WORLD
    torch.set_num_threads(1)  # one rank per core, like the C++ runs under OMP_NUM_THREADS=1
    a = netsparse.DistMatrix.load(comm, o.matrix)
    if a.shape[0] != a.shape[1]:
        raise ValueError(f"the graph must be square, {o.matrix} is {a.shape}")
    if comm.rank == 0:
        print(
            f"gcn_train.py: {o.matrix}, {a.shape[0]} nodes, {a.nnz} edges, {comm.size} ranks; "
            f"2 layers {o.features} -> {o.hidden} -> {o.classes}, fanout {o.fanout}, adam lr "
            f"{o.lr}, {o.epochs} epochs, mode {o.mode}, backward via {o.backward}, gradients "
            f"summed by {'mpi4py' if o.grad_allreduce == 'mpi' else 'netsparse'}"
            f"{' (reproducible)' if o.reproducible else ''}"
        )
    coll = Collectives(comm) if o.grad_allreduce == "netsparse" else None
    g = Gcn(a, o, coll)
    curve, times = [], {k: [] for k in ("epoch", "sample", "setup", "sparse", "rest")}
    for e in range(o.epochs):
        comm.Barrier()
        for key in g.spmm.seconds:
            g.spmm.seconds[key] = 0.0
        t0 = time.perf_counter()
        g.prepare(e)
        t1 = time.perf_counter()
        curve.append(g.forward_backward())
        t2 = time.perf_counter()
        s = g.spmm.seconds
        mine = {
            "epoch": t2 - t0,
            "sample": t1 - t0 - s["set_pattern"],
            "setup": s["set_pattern"],
            "sparse": s["forward"] + s["backward"],
            "rest": t2 - t1 - s["forward"] - s["backward"],
        }
        for key, value in mine.items():
            times[key].append(comm.allreduce(value, op=MPI.MAX))
        g.step()
    later = {k: np.median(v[1:] if len(v) > 1 else v) * 1e3 for k, v in times.items()}
    if comm.rank == 0:
        for e, loss in enumerate(curve):
            print(f"epoch {e} loss {loss:.9f}")
        print(
            "time per epoch (median over the epochs after the first, max over ranks): "
            f"{later['epoch']:.3f} ms (sample {later['sample']:.2f}, setup {later['setup']:.2f}, "
            f"sparse {later['sparse']:.2f}, dense + loss + allreduce {later['rest']:.2f})"
        )
        print(f"loss {curve[0]:.6f} -> {curve[-1]:.6f} (x{curve[-1] / curve[0]:.3f})")
    if coll is not None:
        coll.close()  # collective
    status = 0
    if o.curve_out and comm.rank == 0:
        with open(o.curve_out, "w") as f:
            f.writelines(loss.hex() + "\n" for loss in curve)
    if o.expect_curve:
        agrees = None
        if comm.rank == 0:
            agrees = expect_curve(curve, o.expect_curve, o.expect_curve_tolerance)
        if not comm.bcast(agrees, root=0):
            status = 1
    if o.expect_loss_drop > 0 and not curve[-1] < o.expect_loss_drop * curve[0]:
        if comm.rank == 0:
            print(f"FAILED: final loss {curve[-1]:.6f} is not below {o.expect_loss_drop} x "
                  f"the initial {curve[0]:.6f}")
        status = 1
    return status


def expect_curve(curve, path, tolerance):
    """True if curve agrees with the one in path (--curve-out's format) to relative tolerance
    (0: bit for bit); prints the verdict."""
    try:
        with open(path) as f:
            expected = [float.fromhex(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        print(f"FAILED: cannot read the expected curve {path}: {e}")
        return False
    if len(expected) != len(curve):
        print(f"FAILED: {path} has {len(expected)} epochs, this run {len(curve)}")
        return False
    differing = sum(1 for c, x in zip(curve, expected) if c != x)
    worst = max(abs(c - x) / abs(x) for c, x in zip(curve, expected))
    ok = worst <= tolerance if tolerance > 0 else differing == 0
    limit = f"{tolerance:.1e}" if tolerance > 0 else "0, bit for bit"
    print(f"loss curve against {path}: {differing} of {len(curve)} epochs differ, by at most "
          f"{worst:.2e} (relative; tolerance {limit}) -> {'OK' if ok else 'FAILED'}")
    return ok


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
