"""A DLRM-style model in PyTorch with its embedding tables in netsparse.EmbeddingTables.

    mpirun -np 2 python3 -m mpi4py examples/dlrm_train.py [--iters 40] [--mode all]

Data (synthetic, Criteo-like, generated on the fly on every rank): 13 dense features and 26
categorical ones; table t has min(Criteo's cardinality of feature t, --max-rows) rows and its ids
are drawn from a Zipf law of exponent --alpha over the table (rank k most likely), scattered over
the rows by a fixed permutation so the hot ids fall on every rank. The click label is drawn from
a hidden score (a linear function of the dense features plus a hidden weight per (table, id)),
so the loss can fall below log 2. Every rank draws its own --batch samples per iteration.

Model (DLRM): a bottom MLP 13 -> 64 -> dim, the 26 embedding rows of a sample, their pairwise
dot products with the bottom output (351 of them) and the bottom output into a top MLP
-> 64 -> 1, binary cross-entropy. The MLPs are replicated: their gradients are averaged over the
ranks (mpi4py Allreduce). The embedding tables are partitioned by rows over the ranks: each
iteration looks up the 26 tables' ids in ONE lookup call (one gather for all tables), and pushes
the embedding gradients back to the owners (SGD, push_gradients: one scatter-reduce).

Per iteration (rank 0 prints every --print-every): the loss and the time of each phase --
lookup (the lookup call and the quiesce that ends the phase), mlp (forward and backward),
optim (the MLPs' gradients averaged by Allreduce, the Adam step, the embedding rows' SGD deltas),
push (push_gradients and its quiesce). The
embedding step is lookup + push. Modes, each from the same initial weights and data:
  library   one lookup call for the 26 tables: ids de-duplicated (each distinct row fetched
            once), the gradients of repeated ids summed before the push; the cache of remote
            rows with --cache-rows (off by default: in training every row looked up is written
            by the push that follows, so a cached copy is stale at the next lookup)
  plain     the same calls as the library's plain gather (dedup off: every id of the batch goes
            into the gather, every gradient is sent)
  alltoall  no library verbs: (table, id) pairs to their owners and the rows back by mpi4py
            Alltoallv, the gradients the same way and added by torch's index_add_ (what a
            model-parallel DLRM does over MPI)
  all       (default) the three side by side (one iteration of each in turn, each its own
            tables, context and model); prints the library's speed-up of the median embedding
            step (and of the whole iteration) over each of the others.

    --expect-loss-decrease   exit 1 unless the mean loss of the last quarter of the iterations
                             is below that of the first quarter (in every mode run)
    --expect-modes-agree TOL exit 1 unless every mode's loss per iteration is the first mode's
                             within TOL (relative): the library's exchange against mpi4py's
    --step-bench N           after training, N iterations of the embedding step alone
"""

import argparse
import math
import sys
import time

import numpy as np
import torch
from mpi4py import MPI

import netsparse

# The Criteo Kaggle (DAC) cardinalities of the 26 categorical features.
CRITEO_ROWS = [1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
               27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572]
DENSE = 13


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iters", type=int, default=40)
    p.add_argument("--batch", type=int, default=2048, help="samples per rank per iteration")
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--max-rows", type=int, default=100000)
    p.add_argument("--alpha", type=float, default=1.0, help="Zipf exponent of the ids")
    p.add_argument("--cache-rows", type=int, default=0,
                   help="remote rows the library mode caches (0: none; in training every row "
                   "looked up is updated by the push that follows, so cached rows go stale)")
    p.add_argument("--mode", choices=["library", "plain", "alltoall", "all"], default="all")
    p.add_argument("--lr", type=float, default=0.003, help="Adam step of the MLPs")
    p.add_argument("--emb-lr", type=float, default=0.05,
                   help="SGD step of an embedding row (times its mean gradient)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--print-every", type=int, default=10)
    p.add_argument("--progress", choices=["auto", "thread", "inline"], default="auto")
    p.add_argument("--expect-loss-decrease", action="store_true")
    p.add_argument("--expect-modes-agree", type=float, default=None, metavar="TOL",
                   help="exit 1 unless every mode's loss per iteration agrees with the first "
                   "mode's within TOL (relative): the same training through independent exchanges")
    p.add_argument("--step-bench", type=int, default=0, metavar="N",
                   help="after training: N iterations of the embedding step alone (lookup, "
                   "quiesce, push, quiesce) of every mode, interleaved, on the same batches")
    return p.parse_args()


class Data:
    """The synthetic Criteo-like stream (the same on every rank count for a given rank)."""

    def __init__(self, args):
        self.rows = [min(n, args.max_rows) for n in CRITEO_ROWS]
        rng = np.random.default_rng([args.seed, 7])
        # Per table: the Zipf CDF over ranks 1..n, the permutation rank -> row, hidden weights.
        self.cdf, self.perm, self.hidden = [], [], []
        for n in self.rows:
            p = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** args.alpha
            self.cdf.append(np.cumsum(p) / p.sum())
            self.perm.append(rng.permutation(n))
            self.hidden.append(rng.uniform(-1.0, 1.0, size=n).astype(np.float32))
        self.dense_w = rng.normal(size=DENSE).astype(np.float32)
        self.args = args

    def batch(self, rank, it):
        rng = np.random.default_rng([self.args.seed, rank, it])
        n = self.args.batch
        dense = rng.normal(size=(n, DENSE)).astype(np.float32)
        ids = []
        for t in range(len(self.rows)):
            k = np.searchsorted(self.cdf[t], rng.random(n), side="right")
            ids.append(self.perm[t][np.minimum(k, self.rows[t] - 1)].astype(np.int64))
        score = dense @ self.dense_w * 0.5 + sum(self.hidden[t][ids[t]] for t in range(len(ids)))
        score = score * 3.0 / math.sqrt(len(ids) / 3.0)
        label = (rng.random(n) < 1.0 / (1.0 + np.exp(-score))).astype(np.float32)
        return torch.from_numpy(dense), ids, torch.from_numpy(label)


class AlltoallTables:
    """The baseline without the library's verbs: the rows stay in the same partition (the
    EmbeddingTables' local rows, read and written with numpy), and a lookup is what a
    model-parallel DLRM does over MPI: every (table, id) of the batch, as it comes, goes to its
    owner (one Alltoallv), the owner copies the rows, and they come back (a second Alltoallv);
    a push sends every (table, id) with its gradient and the owner adds them (index_add_)."""

    def __init__(self, comm, tables):
        self.comm, self.tables = comm, tables
        self.rank, self.nranks = comm.Get_rank(), comm.Get_size()
        self.local = [tables.local_rows(t) for t in range(tables.count)]
        self.first = [int(o[self.rank]) for o in tables.row_offsets]

    def _route(self, ids):
        table = np.concatenate([np.full(len(i), t, np.int64) for t, i in enumerate(ids)])
        owner = np.concatenate([np.searchsorted(o, i, side="right") - 1
                                for o, i in zip(self.tables.row_offsets, ids)])
        order = np.argsort(owner, kind="stable")
        send = np.stack([table[order], np.concatenate(ids)[order]], axis=1)
        counts = np.bincount(owner, minlength=self.nranks).astype(np.int64)
        recv_counts = np.empty_like(counts)
        self.comm.Alltoall(counts, recv_counts)
        recv = np.empty((int(recv_counts.sum()), 2), np.int64)
        self.comm.Alltoallv([send, counts * 2], [recv, recv_counts * 2])
        return order, counts, recv, recv_counts

    def lookup(self, ids):
        order, counts, recv, recv_counts = self._route(ids)
        dim = self.tables.dims[0]
        rows = np.empty((len(recv), dim), np.float32)
        for t in range(len(ids)):
            m = recv[:, 0] == t
            rows[m] = self.local[t][recv[m, 1] - self.first[t]]
        back = np.empty((int(counts.sum()), dim), np.float32)
        self.comm.Alltoallv([rows, recv_counts * dim], [back, counts * dim])
        out = np.empty_like(back)
        out[order] = back
        return np.split(out, np.cumsum([len(i) for i in ids])[:-1])

    def push_gradients(self, ids, deltas):
        order, counts, recv, recv_counts = self._route(ids)
        dim = self.tables.dims[0]
        send = np.concatenate(deltas)[order]
        got = np.empty((len(recv), dim), np.float32)
        self.comm.Alltoallv([send, counts * dim], [got, recv_counts * dim])
        got = torch.from_numpy(got)
        for t in range(len(ids)):
            m = recv[:, 0] == t
            # torch's index_add_ into the rows in place (numpy's add.at is ~10x slower)
            torch.from_numpy(self.local[t]).index_add_(
                0, torch.from_numpy(recv[m, 1] - self.first[t]), got[torch.from_numpy(m)])

    def quiesce(self):
        pass  # the Alltoallv calls already wait for every rank


class Mlps(torch.nn.Module):
    def __init__(self, dim, tables):
        super().__init__()
        self.bottom = torch.nn.Sequential(torch.nn.Linear(DENSE, 64), torch.nn.ReLU(),
                                          torch.nn.Linear(64, dim), torch.nn.ReLU())
        features = tables + 1
        pairs = features * (features - 1) // 2
        self.top = torch.nn.Sequential(torch.nn.Linear(pairs + dim, 64), torch.nn.ReLU(),
                                       torch.nn.Linear(64, 1))
        self.features = features

    def forward(self, dense, embedded):
        x = self.bottom(dense)
        t = torch.stack([x] + embedded, dim=1)  # batch x features x dim
        z = torch.bmm(t, t.transpose(1, 2))
        i, j = torch.triu_indices(self.features, self.features, offset=1)
        return self.top(torch.cat([x, z[:, i, j]], dim=1)).squeeze(1)


def train(args, comm, data, mode):
    """Trains in `mode`, one iteration per next(); the generator's return value is
    (losses, median phases, cache hit rate, stats)."""
    rank, nranks = comm.Get_rank(), comm.Get_size()
    library = mode == "library"
    store = netsparse.EmbeddingTables(
        comm, [args.dim] * len(data.rows), rows=data.rows,
        cache_rows=args.cache_rows if library else 0, dedup=library, progress=args.progress)
    for t, n in enumerate(data.rows):  # initial rows: a function of (seed, table, row)
        lo, hi = int(store.row_offsets[t][rank]), int(store.row_offsets[t][rank + 1])
        whole = np.random.default_rng([args.seed, 11, t]).normal(size=(n, args.dim)) * 0.05
        store.local_rows(t)[:] = whole[lo:hi]
    store.quiesce()
    tables = AlltoallTables(comm, store) if mode == "alltoall" else store
    torch.manual_seed(args.seed)  # the same MLPs on every rank and in every mode
    model = Mlps(args.dim, len(data.rows))
    params = list(model.parameters())
    optimizer = torch.optim.Adam(params, lr=args.lr)
    flat = np.zeros(sum(p.numel() for p in params), dtype=np.float32)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    phases = {k: [] for k in ("lookup", "mlp", "allreduce", "push", "iteration", "lookup_call",
                              "push_call")}
    losses = []
    for it in range(args.iters):
        dense, ids, label = data.batch(rank, it)
        t0 = time.perf_counter()
        rows = tables.lookup(ids)
        t0b = time.perf_counter()
        tables.quiesce()  # every rank's lookups served before the MPI collectives below
        t1 = time.perf_counter()
        embedded = [torch.from_numpy(r).requires_grad_() for r in rows]
        loss = loss_fn(model(dense, embedded), label)
        model.zero_grad()
        loss.backward()
        t2 = time.perf_counter()
        at = 0
        for p in params:
            flat[at:at + p.numel()] = p.grad.numpy().ravel()
            at += p.numel()
        total = np.empty_like(flat)
        comm.Allreduce(flat, total)
        losses.append(comm.allreduce(float(loss), op=MPI.SUM) / nranks)
        at = 0
        for p in params:  # the ranks' mean gradient, the same step on every rank
            p.grad.copy_(torch.from_numpy(total[at:at + p.numel()]).view_as(p) / nranks)
            at += p.numel()
        optimizer.step()
        # Row-wise SGD: each row moves by emb_lr times its mean gradient over the batch's
        # samples that use it (a row used by every sample moves no faster than a rare one).
        deltas = []
        for i, e in zip(ids, embedded):
            _, inverse, counts = np.unique(i, return_inverse=True, return_counts=True)
            scale = (-args.emb_lr * args.batch / counts[inverse]).astype(np.float32)
            deltas.append(e.grad.numpy() * scale[:, None])
        t3 = time.perf_counter()
        tables.push_gradients(ids, deltas)
        t3c = time.perf_counter()
        tables.quiesce()  # every rank's update in before the next lookups
        t4 = time.perf_counter()
        for k, v in (("lookup", t1 - t0), ("mlp", t2 - t1), ("allreduce", t3 - t2),
                     ("push", t4 - t3), ("iteration", t4 - t0), ("lookup_call", t0b - t0),
                     ("push_call", t3c - t3)):
            phases[k].append(v)
        if rank == 0 and (it % args.print_every == 0 or it == args.iters - 1):
            print(f"[{mode}] iter {it:4d} loss {losses[-1]:.4f}  lookup {1e3 * (t1 - t0):7.2f} ms"
                  f"  mlp {1e3 * (t2 - t1):7.2f} ms  optim {1e3 * (t3 - t2):6.2f} ms"
                  f"  push {1e3 * (t4 - t3):7.2f} ms (calls: lookup {1e3 * (t0b - t0):.2f} ms,"
                  f" push {1e3 * (t3c - t3):.2f} ms)", flush=True)
        yield
    s = store.stats()
    remote = s["distinct"] - s["local_rows"]
    hit_rate = s["cache_hits"] / remote if remote else 0.0
    store.quiesce()
    store.close()
    # The medians over the second half (the cache warm), the slowest rank's.
    half = {k: float(np.median(v[len(v) // 2:])) for k, v in phases.items()}
    half = {k: comm.allreduce(v, op=MPI.MAX) for k, v in half.items()}
    return losses, half, hit_rate, s


def step_bench(args, comm, data):
    """The embedding step without the MLPs (so no rank waits for another's compute): every
    iteration runs lookup + push of the same batch in every mode, the modes' order rotating, on
    one table set per mode (each its own context). Returns the per-mode median ms (slowest rank)."""
    rank = comm.Get_rank()
    modes = ["alltoall", "plain", "library"]
    stores, runners = {}, {}
    for m in modes:
        library = m == "library"
        stores[m] = netsparse.EmbeddingTables(
            comm, [args.dim] * len(data.rows), rows=data.rows,
            cache_rows=args.cache_rows if library else 0, dedup=library, progress=args.progress)
        stores[m].quiesce()
        runners[m] = AlltoallTables(comm, stores[m]) if m == "alltoall" else stores[m]
    times = {m: [] for m in modes}
    parts = {m: {"lookup": [], "push": []} for m in modes}
    rng = np.random.default_rng([args.seed, 99, rank])
    for it in range(args.step_bench):
        _, ids, _ = data.batch(rank, 100000 + it)
        deltas = [rng.normal(size=(len(i), args.dim)).astype(np.float32) * 1e-3 for i in ids]
        for k in range(len(modes)):
            m = modes[(it + k) % len(modes)]
            r = runners[m]
            t0 = time.perf_counter()
            r.lookup(ids)
            r.quiesce()
            t1 = time.perf_counter()
            r.push_gradients(ids, deltas)
            r.quiesce()
            t2 = time.perf_counter()
            times[m].append(t2 - t0)
            parts[m]["lookup"].append(t1 - t0)
            parts[m]["push"].append(t2 - t1)
    for m in modes:
        stores[m].quiesce()
        stores[m].close()
    med = {m: comm.allreduce(float(np.median(v)), op=MPI.MAX) * 1e3 for m, v in times.items()}
    for m in modes:
        for k, v in parts[m].items():
            med[f"{m}.{k}"] = comm.allreduce(float(np.median(v)), op=MPI.MAX) * 1e3
    return med


def main():
    args = parse()
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    torch.set_num_threads(1)
    data = Data(args)
    if rank == 0:
        print(f"DLRM: {comm.Get_size()} ranks, 26 tables ({sum(data.rows)} rows, dim {args.dim}),"
              f" batch {args.batch} per rank, Zipf alpha {args.alpha}, {args.iters} iterations",
              flush=True)
    modes = ["alltoall", "plain", "library"] if args.mode == "all" else [args.mode]
    # The modes train side by side, one iteration of each in turn (the order rotating), so a
    # change in the machine's load hits every mode alike.
    runs = {m: train(args, comm, data, m) for m in modes}
    finished = {}
    for it in range(args.iters + 1):  # the last round collects the results
        for k in range(len(modes)):
            m = modes[(it + k) % len(modes)]
            try:
                next(runs[m])
            except StopIteration as done:
                finished[m] = done.value
    results = {m: finished[m] for m in modes}
    ok = True
    for mode, (losses, med, hit_rate, s) in results.items():
        q = max(1, len(losses) // 4)
        first, last = float(np.mean(losses[:q])), float(np.mean(losses[-q:]))
        emb = med["lookup"] + med["push"]
        n_it = max(1, len(losses))
        if rank == 0:
            print(f"[{mode}] loss {first:.4f} -> {last:.4f} (mean of the first / last {q});"
                  f" median per iteration (slowest rank, second half): lookup"
                  f" {1e3 * med['lookup']:.2f} ms, mlp {1e3 * med['mlp']:.2f} ms, optim"
                  f" {1e3 * med['allreduce']:.2f} ms, push {1e3 * med['push']:.2f} ms,"
                  f" embedding step {1e3 * emb:.2f} ms (the lookup and push calls alone"
                  f" {1e3 * (med['lookup_call'] + med['push_call']):.2f} ms), iteration"
                  f" {1e3 * med['iteration']:.2f} ms;"
                  f" distinct/lookups {s['distinct'] / max(1, s['lookups']):.3f}, cache hit rate"
                  f" {hit_rate:.3f}; inside the lookups (rank 0, per iteration): dedup"
                  f" {s['dedup_ns'] / n_it / 1e6:.2f} ms, versions {s['version_ns'] / n_it / 1e6:.2f}"
                  f" ms, cache {s['cache_ns'] / n_it / 1e6:.2f} ms, gather"
                  f" {s['gather_ns'] / n_it / 1e6:.2f} ms, output {s['output_ns'] / n_it / 1e6:.2f}"
                  " ms", flush=True)
        if args.expect_loss_decrease and not last < first:
            ok = False
    if args.expect_modes_agree is not None and len(results) > 1:
        first_mode = next(iter(results))
        reference = np.array(results[first_mode][0])
        for mode, (losses, *_rest) in results.items():
            worst = float(np.max(np.abs(np.array(losses) - reference) / np.abs(reference)))
            if rank == 0:
                print(f"[{mode}] loss curve vs {first_mode}: largest relative difference"
                      f" {worst:.2e}", flush=True)
            if not worst <= args.expect_modes_agree:
                ok = False
    if "library" in results and rank == 0:
        lib = results["library"][1]
        for base in [m for m in results if m != "library"]:
            other = results[base][1]
            ratio = (other["lookup"] + other["push"]) / (lib["lookup"] + lib["push"])
            calls = ((other["lookup_call"] + other["push_call"]) /
                     (lib["lookup_call"] + lib["push_call"]))
            print(f"embedding step: library {ratio:.2f}x {base} (the calls alone {calls:.2f}x);"
                  f" whole iteration {other['iteration'] / lib['iteration']:.2f}x", flush=True)
    if args.step_bench > 0:
        med = step_bench(args, comm, data)
        if rank == 0:
            print(f"embedding step alone ({args.step_bench} iterations, modes interleaved, median"
                  f" ms, slowest rank): alltoall {med['alltoall']:.2f}, plain {med['plain']:.2f},"
                  f" library {med['library']:.2f}: library {med['plain'] / med['library']:.2f}x"
                  f" plain, {med['alltoall'] / med['library']:.2f}x alltoall (lookup + push:"
                  + ", ".join(f" {m} {med[m + '.lookup']:.2f} + {med[m + '.push']:.2f}"
                              for m in ("alltoall", "plain", "library")) + ")", flush=True)
    ok = comm.allreduce(ok, op=MPI.LAND)
    if not ok:
        if rank == 0:
            print("FAIL: the loss did not decrease or the modes' losses disagree", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
