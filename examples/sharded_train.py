"""Sharded data parallelism (ZeRO-3 / FSDP style) on netsparse.collectives, in PyTorch.

    mpirun -np 2 python3 -m mpi4py examples/sharded_train.py [--iters 30] [--sizes 64,256,256,16]

Model: an MLP (--sizes: input, hidden..., output; ReLU between layers, mean squared error).
Each rank holds 1/P of every layer's parameters: the layer's weight and bias flattened into one
vector, padded to a multiple of P, rank r holding the r-th slice (its shard). Per iteration:

  forward   before layer i, its full parameters are all-gathered (GatherBuffers.gather: with
            --prefetch on, layer i+1's all-gather was started before layer i computes, into the
            other of two buffers: the dissertation's prefetch and parameter buffering)
  backward  written out layer by layer in reverse order (the full parameters gathered again,
            prefetching the layer below; the last layer is still in its buffer); each layer's
            gradient is reduce-scattered at once, so each rank receives the sum of its shard
  update    SGD on the shard only (the gradient summed over the ranks, divided by P)

Data: synthetic, drawn on the fly per (iteration, rank) from --seed: x standard normal, the
target a fixed random teacher MLP (one hidden tanh layer) of x plus a little noise.

The example checks itself (exit 1 and a FAIL line otherwise):
  - the loss falls: the mean of the last quarter of the iterations below --expect-drop times the
    first iteration's (every mode);
  - the sharded run equals plain data-parallel training from the same seed (every rank holds the
    full model, the gradients summed by the library's allreduce): the loss of every iteration
    and the final parameters agree to --tolerance (relative to the largest parameter); prefetch
    on and off give the same bits (the same arithmetic, only the timing moves).

The modes run interleaved (one iteration of each in turn), so their times are side by side.
Printed (rank 0): per iteration the loss and, for prefetch on and off side by side, the time in
the all-gathers (waits, blocking gathers, starts: communication not hidden), the compute and the
reduce-scatters, then the medians and the time per iteration with and without prefetch.
Overlap needs progress: the library's transports move data only inside its calls, so a prefetch
sends its data when started (one driver round) and receives it when waited for; --poll N lets
the compute test the request in flight after each of N slices of a layer's matrix product.
"""

import argparse
import statistics
import sys
import time

import torch
from mpi4py import MPI

from netsparse.collectives import Collectives, GatherBuffers

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="64,256,256,16",
                   help="layer widths: input,hidden...,output (default 64,256,256,16)")
    p.add_argument("--batch", type=int, default=64, help="samples per rank per iteration")
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--mode", choices=["all", "prefetch", "no-prefetch", "dataparallel"],
                   default="all", help="all (default): the three, compared")
    p.add_argument("--expect-drop", type=float, default=0.7,
                   help="the late loss must be below this times the first (default 0.7)")
    p.add_argument("--tolerance", type=float, default=1e-5,
                   help="sharded vs data-parallel, relative (default 1e-5)")
    p.add_argument("--poll", type=int, default=1,
                   help="slices of a layer's product, the prefetch tested after each (default 1)")
    p.add_argument("--quiet", action="store_true", help="no per-iteration lines")
    a = p.parse_args()
    try:
        a.sizes = [int(s) for s in a.sizes.split(",")]
    except ValueError:
        p.error(f"--sizes must be comma-separated integers, got {a.sizes!r}")
    if len(a.sizes) < 2 or min(a.sizes) < 1:
        p.error("--sizes needs at least two widths, each >= 1")
    if a.batch < 1 or a.iters < 4 or a.poll < 1:
        p.error("--batch >= 1, --iters >= 4 and --poll >= 1")
    a.dtype = getattr(torch, a.dtype)
    return a


def initial_parameters(sizes, seed, dtype):
    """Every layer's (weight, bias) flattened into one vector, the same on every rank."""
    g = torch.Generator().manual_seed(seed)
    flat = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        w = torch.randn(fan_out, fan_in, generator=g, dtype=torch.float64) / fan_in ** 0.5
        b = torch.zeros(fan_out, dtype=torch.float64)
        flat.append(torch.cat([w.reshape(-1), b]).to(dtype))
    return flat


def batch(args, it):
    """This rank's samples of iteration `it` (drawn on the fly) and their targets."""
    teacher = torch.Generator().manual_seed(args.seed * 7919)
    d_in, d_out = args.sizes[0], args.sizes[-1]
    t1 = torch.randn(d_in, 32, generator=teacher, dtype=torch.float64) / d_in ** 0.5
    t2 = torch.randn(32, d_out, generator=teacher, dtype=torch.float64) / 32 ** 0.5
    g = torch.Generator().manual_seed(args.seed * 1_000_003 + it * 4099 + rank)
    x = torch.randn(args.batch, d_in, generator=g, dtype=torch.float64)
    y = torch.tanh(x @ t1) @ t2 + 0.01 * torch.randn(args.batch, d_out, generator=g,
                                                      dtype=torch.float64)
    return x.to(args.dtype), y.to(args.dtype)


class Timer:
    def __init__(self):
        self.seconds = 0.0

    def __enter__(self):
        self.t0 = time.perf_counter()

    def __exit__(self, *exc):
        self.seconds += time.perf_counter() - self.t0


def layer_forward(h, full, fan_in, fan_out, poll):
    """h @ W^T + b with W, b viewed in the gathered vector; `poll` tests the prefetch in flight
    between slices of the batch (progress for the communication the compute hides)."""
    w = full[: fan_out * fan_in].view(fan_out, fan_in)
    b = full[fan_out * fan_in: fan_out * fan_in + fan_out]
    if poll is None:
        return h @ w.T + b
    return torch.cat([poll(part @ w.T + b) for part in torch.tensor_split(h, poll.slices)])


def train(args, coll, mode):
    """One training run, a generator stepping one iteration per next(); its return value is
    (losses, final full parameters, per-iteration timings)."""
    sizes, P = args.sizes, coll.size
    L = len(sizes) - 1
    full0 = initial_parameters(sizes, args.seed, args.dtype)
    sharded = mode != "dataparallel"
    if sharded:
        shard_len = [(f.numel() + P - 1) // P for f in full0]
        shards = []
        for f, s in zip(full0, shard_len):
            padded = torch.zeros(s * P, dtype=args.dtype)
            padded[: f.numel()] = f
            shards.append(padded[rank * s:(rank + 1) * s].clone())
        bufs = GatherBuffers(coll, shards, prefetch=mode == "prefetch")
        grad_whole = [torch.zeros(s * P, dtype=args.dtype) for s in shard_len]
        grad_shard = [torch.zeros(s, dtype=args.dtype) for s in shard_len]
    else:
        params = [f.clone() for f in full0]
        grads = [torch.zeros_like(f) for f in full0]

    class Poll:  # tests the prefetch in flight between slices of a product
        slices = args.poll

        def __call__(self, t):
            if sharded:
                bufs.progress()
            return t

    poll = Poll() if args.poll > 1 else None

    def get(i, nxt):
        return bufs.gather(i, next=nxt) if sharded else params[i]

    losses, timings = [], []
    for it in range(args.iters):
        x, y = batch(args, it)
        if sharded:
            bufs.wait_seconds = 0.0
        rs, t_start = Timer(), time.perf_counter()
        # forward: keep each layer's input and pre-activation for the backward
        hs, zs, h = [], [], x
        for i in range(L):
            full = get(i, i + 1 if i + 1 < L else None)
            z = layer_forward(h, full, sizes[i], sizes[i + 1], poll)
            hs.append(h)
            zs.append(z)
            h = torch.relu(z) if i + 1 < L else z
        diff = h - y
        loss = float((diff * diff).mean())
        dz = 2.0 * diff / diff.numel()
        # backward, layer by layer from the top
        for i in reversed(range(L)):
            full = get(i, i - 1 if i > 0 else None)
            fan_in, fan_out = sizes[i], sizes[i + 1]
            g = grad_whole[i] if sharded else grads[i]
            g[: fan_out * fan_in].view(fan_out, fan_in).copy_(dz.T @ hs[i])
            g[fan_out * fan_in: fan_out * fan_in + fan_out].copy_(dz.sum(0))
            if i > 0:
                w = full[: fan_out * fan_in].view(fan_out, fan_in)
                dz = (dz @ w) * (zs[i - 1] > 0).to(dz.dtype)
            if sharded:
                with rs:  # each rank receives the sum of its own shard's gradient
                    coll.reduce_scatter(grad_whole[i], grad_shard[i])
            else:
                with rs:
                    coll.allreduce(grads[i])
        # update: SGD with the gradient averaged over the ranks
        if sharded:
            for s, gs in zip(shards, grad_shard):
                s.sub_(gs, alpha=args.lr / P)
            bufs.invalidate()
        else:
            for p, gr in zip(params, grads):
                p.sub_(gr, alpha=args.lr / P)
        total = time.perf_counter() - t_start
        gather = bufs.wait_seconds if sharded else 0.0
        losses.append(comm.allreduce(loss) / P)
        timings.append((gather, total - gather - rs.seconds, rs.seconds, total))
        yield  # the modes take turns, one iteration each (the same load for all)
    if sharded:
        final = []
        for s, f in zip(shards, full0):
            whole = torch.empty(s.numel() * P, dtype=args.dtype)
            coll.allgather(s, whole)
            final.append(whole[: f.numel()].clone())
    else:
        final = params
    return losses, final, timings


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    coll = Collectives(comm, timeout_ms=60000)
    modes = ["prefetch", "no-prefetch", "dataparallel"] if args.mode == "all" else [args.mode]
    # Interleaved: iteration k of every mode before iteration k + 1 of any, so the machine's
    # load drifts alike under each (every rank steps the modes in the same order).
    steps, runs = {m: train(args, coll, m) for m in modes}, {}
    while steps:
        for m in list(steps):
            try:
                next(steps[m])
            except StopIteration as done:
                runs[m] = done.value
                del steps[m]
    failed = []
    ms = lambda s: f"{1e3 * s:8.3f}"
    if rank == 0 and not args.quiet:
        shown = [m for m in ("prefetch", "no-prefetch") if m in runs]
        head = "iter       loss" + "".join(
            f" | {m + ': gather':>20} {'compute':>8} {'r-scatter':>9} {'total':>8}" for m in shown)
        print(head + "   (ms)")
        for it in range(args.iters):
            first = runs[modes[0]][0][it]
            line = f"{it:4d} {first:10.6f}"
            for m in shown:
                g, c, r, t = runs[m][2][it]
                line += f" | {ms(g):>20} {ms(c)} {ms(r):>9} {ms(t)}"
            print(line)
    for m in modes:
        losses = runs[m][0]
        late = statistics.fmean(losses[-max(1, args.iters // 4):])
        if not late < args.expect_drop * losses[0]:
            failed.append(f"{m}: the loss did not fall enough ({losses[0]:.6f} -> {late:.6f}, "
                          f"want < {args.expect_drop} x)")
        if rank == 0:
            t = runs[m][2][1:]  # the first iteration warms the pools up
            med = lambda k: statistics.median(x[k] for x in t)
            print(f"{m:>12}: loss {losses[0]:.6f} -> {losses[-1]:.6f}; median per iteration "
                  f"{ms(med(3)).strip()} ms (all-gather {ms(med(0)).strip()}, compute "
                  f"{ms(med(1)).strip()}, {'reduce-scatter' if m != 'dataparallel' else 'allreduce'}"
                  f" {ms(med(2)).strip()})")
    if "prefetch" in runs and "no-prefetch" in runs:
        on, off = runs["prefetch"], runs["no-prefetch"]
        if on[0] != off[0] or any(not torch.equal(a, b) for a, b in zip(on[1], off[1])):
            failed.append("prefetch on and off differ (they must give the same bits)")
        if rank == 0:
            t_on = statistics.median(x[3] for x in on[2][1:])
            t_off = statistics.median(x[3] for x in off[2][1:])
            g_on = statistics.median(x[0] for x in on[2][1:])
            g_off = statistics.median(x[0] for x in off[2][1:])
            print(f"prefetch on {1e3 * t_on:.3f} ms vs off {1e3 * t_off:.3f} ms per iteration "
                  f"(off / on x{t_off / t_on:.2f}); all-gather time {1e3 * g_on:.3f} vs "
                  f"{1e3 * g_off:.3f} ms (medians after the first iteration)")
    if "dataparallel" in runs:
        ref = runs["dataparallel"]
        for m in modes:
            if m == "dataparallel":
                continue
            losses, final, _ = runs[m]
            scale = max(float(p.abs().max()) for p in ref[1])
            worst = max(float((a - b).abs().max()) for a, b in zip(final, ref[1])) / scale
            loss_gap = max(abs(a - b) / max(abs(b), 1e-30) for a, b in zip(losses, ref[0]))
            if rank == 0:
                print(f"{m} vs data-parallel: parameters differ by {worst:.3g} (relative), "
                      f"losses by {loss_gap:.3g}")
            if not (worst <= args.tolerance and loss_gap <= args.tolerance):
                failed.append(f"{m} differs from data-parallel training: parameters {worst:.3g}, "
                              f"losses {loss_gap:.3g} (tolerance {args.tolerance})")
    # Every rank's verdict: any rank's failure fails all.
    failed = sorted(set(sum(comm.allgather(failed), [])))
    coll.close()
    for f in failed:
        if rank == 0:
            print("FAIL:", f)
    if failed:
        sys.exit(1)
    if rank == 0:
        print("sharded training OK")


if __name__ == "__main__":
    main()
