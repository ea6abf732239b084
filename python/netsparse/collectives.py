"""Dense collectives over NetSparse's own transports (lib/collectives), on numpy arrays and
PyTorch CPU tensors.

    from mpi4py import MPI
    from netsparse.collectives import Collectives
    c = Collectives(MPI.COMM_WORLD)            # collective (timeout_ms=, packet_bytes=, max_in_flight=,
                                               #   hierarchy="auto" | "flat" | "hierarchical" | "hosts")
    c.allreduce(x)                             # in place: x = sum over the ranks
    c.allreduce(x, out, op="max")              # into out (same size and dtype)
    c.reduce(x, root=0)                        # the result at root (in place there), None elsewhere
    c.bcast(x, root=0)                         # in place
    y = c.allgather(x)                         # shape (size,) + x.shape, rank order
    z = c.reduce_scatter(x)                    # x.shape[0] divisible by size: this rank's share
    c.barrier()
    r = c.allreduce_start(x); ...; r.wait()    # non-blocking; several outstanding, any order
    r = c.allgather_start(x, y); ...; r.wait() # non-blocking all-gather (prefetch)
    b = GatherBuffers(c, shards)               # parameter buffering: two gather buffers, the
    full = b.gather(i, next=i + 1)             #   next layer's all-gather in flight meanwhile
    b.progress(); b.invalidate()               #   (test it while computing; shards changed)
    idx, v = c.sparse_allreduce(n, idx, v)     # sum of every rank's (indices, values): ascending
                                               # indices, or idx None and v the n dense values
    c.hierarchical, c.inter_host_bytes         # hierarchical allreduce? bytes to other hosts (last call)
    c.through_racks, c.inter_rack_bytes        # through one switch per rack? bytes to other racks
    c.close()                                  # collective (also when garbage-collected)

dtypes: int8, int16, int32, float16, float32, float64; op: "sum", "prod", "min", "max";
reproducible=True gives the same bits whatever the arrival order (the fixed tree). Hierarchy: with
hierarchy="hierarchical" (or "auto" on several hosts of several ranks; None leaves it to
NETSPARSE_COLL_HIERARCHY) allreduce and sparse_allreduce reduce inside each host first, then
between one leader per host, then broadcast inside the host (docs/collectives.md); with several
racks of several hosts (NETSPARSE_HOSTS_PER_RACK) the leaders reduce through one switch per rack
(hierarchy="hosts" keeps the leaders' flat step); every other call stays flat. sparse_allreduce: indices uint64 or int64 (any order, repeats summed, each
below n), values of any dtype above, sum only; output="auto" | "sparse" | "dense", dense_out an
optional array of n values of values' dtype that a dense result is written to. Arrays must be
C-contiguous (no implicit conversion or copy: the result lands in the caller's memory). A torch
tensor (CPU, contiguous) is used in place through its numpy view; torch is not imported here.

Errors. A rank whose arrays or arguments are refused here makes every rank raise ValueError with
that reason (one small MPI_Allreduce per call agrees on it first); what the library itself
refuses -- ranks disagreeing on count, dtype, op or root -- raises netsparse.Error (status
NS_ERR_INVALID) on every rank, and the communicator stays usable. A dead or silent peer raises
netsparse.Error (NS_ERR_TRANSPORT or NS_ERR_TIMEOUT after timeout_ms); the communicator is then
broken. Every rank must call the same collectives in the same order.
"""

import time as _time

import numpy as _np

from . import _netsparse

__all__ = ["Collectives", "CollRequest", "GatherBuffers"]

CollRequest = _netsparse.CollRequest


def _array(x):
    """(x, "") if x is not a torch tensor; else (its numpy view, sharing memory, "") when it is
    on the CPU and contiguous, or (None, why not)."""
    if type(x).__module__.split(".")[0] != "torch":
        return x, ""
    if x.device.type != "cpu":
        return None, f"a torch tensor must be on the CPU, got device {x.device}"
    if not x.is_contiguous():
        return None, "a torch tensor must be contiguous (.contiguous() makes a copy)"
    try:
        return x.detach().numpy(), ""
    except (TypeError, RuntimeError) as e:  # a dtype numpy lacks (bfloat16, ...)
        return None, f"the torch tensor has no numpy view: {e}"


class Collectives:
    """A collectives communicator on an mpi4py communicator (collective to create)."""

    def __init__(self, comm, timeout_ms=0, packet_bytes=0, max_in_flight=0, hierarchy=None):
        self._c = _netsparse.Collectives(comm, timeout_ms, packet_bytes, max_in_flight,
                                         hierarchy if hierarchy is not None else "")

    @property
    def rank(self):
        return self._c.rank

    @property
    def size(self):
        return self._c.size

    @property
    def hierarchical(self):
        """True when allreduce and sparse_allreduce run hierarchically."""
        return self._c.hierarchical

    @property
    def inter_host_bytes(self):
        """Packet bytes this rank sent to ranks of other hosts during the last call (exact)."""
        return self._c.inter_host_bytes

    @property
    def through_racks(self):
        """True when the hierarchy's leaders reduce through one switch per rack."""
        return self._c.through_racks

    @property
    def inter_rack_bytes(self):
        """Packet bytes this rank sent to ranks of other racks during the last call (exact)."""
        return self._c.inter_rack_bytes

    def close(self):
        self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # A torch-specific refusal goes to the compiled side as `problem`, which agrees on it with
    # the other ranks' (so every rank raises); a refused operand is replaced by a placeholder.
    def _wrap(self, fn, *arrays, **kw):
        conv, problem = [], ""
        for a in arrays:
            if a is None:
                conv.append(None)
                continue
            view, why = _array(a)
            problem = problem or why
            conv.append(view if view is not None else _np.zeros(0, _np.float32))
        out = fn(*conv, problem=problem, **kw)
        return out, conv

    def allreduce(self, send, recv=None, op="sum", reproducible=False):
        self._wrap(self._c.allreduce, send, recv, op=op, reproducible=reproducible)
        return send if recv is None else recv

    def reduce(self, send, recv=None, root=0, op="sum", reproducible=False):
        out, _ = self._wrap(self._c.reduce, send, recv, root=root, op=op, reproducible=reproducible)
        if out is None:
            return None
        return send if recv is None else recv

    def bcast(self, buffer, root=0):
        self._wrap(self._c.bcast, buffer, root=root)
        return buffer

    def allgather(self, send, recv=None):
        out, _ = self._wrap(self._c.allgather, send, recv)
        return out if recv is None else recv

    def reduce_scatter(self, send, recv=None, op="sum", reproducible=False):
        out, _ = self._wrap(self._c.reduce_scatter, send, recv, op=op, reproducible=reproducible)
        return out if recv is None else recv

    def sparse_allreduce(self, n, indices, values, output="auto", dense_out=None):
        """(ascending indices, values) of the sum over the ranks when it comes out sparse; (None,
        the n dense values) when dense -- dense_out itself when given (torch tensors too)."""
        (idx, vals), _ = self._wrap(self._c.sparse_allreduce, indices, values, dense_out, n=n,
                                    output=output)
        if idx is None and dense_out is not None:
            return None, dense_out
        return idx, vals

    def barrier(self):
        self._c.barrier()

    def allreduce_start(self, send, recv=None, op="sum", reproducible=False):
        """Starts a non-blocking allreduce; returns a CollRequest (test() / wait()). send and recv
        must stay untouched until it completes (the request keeps them alive)."""
        req, _ = self._wrap(self._c.allreduce_start, send, recv, op=op, reproducible=reproducible)
        return req

    def allgather_start(self, send, recv=None):
        """Starts a non-blocking all-gather (recv: size * send.size elements, made when None);
        returns a CollRequest whose wait() gives recv. send must stay unchanged and recv unread
        until it completes (the request keeps them alive)."""
        req, _ = self._wrap(self._c.allgather_start, send, recv)
        return req


class GatherBuffers:
    """Parameter buffering for sharded data parallelism (the dissertation's prefetch): each
    rank holds a shard of every layer's parameters (shards[i], 1-D, one dtype, numpy arrays or
    CPU torch tensors); gather(i, next=j) returns layer i's full parameters (size * len(shards[i])
    elements: rank r's shard at [r * len, (r + 1) * len)) and, with prefetch, starts layer j's
    all-gather into the other of two buffers, so that it travels while layer i computes.

    The array returned stays valid until the next gather() call (that call may start a
    prefetch into it). A layer still held in a buffer is returned without communication (the
    last layer of the forward pass is the first of the backward); after the shards change
    (the optimizer step) call invalidate(). A shard must not change while its prefetch is in
    flight (invalidate() waits for it). With prefetch=False, `next` is ignored and every
    gather is the blocking all-gather. wait_seconds accumulates the time spent inside gather()
    (waits, blocking gathers and the prefetch's start: the communication not hidden)."""

    def __init__(self, coll, shards, prefetch=True):
        self._coll = coll
        self._shards = list(shards)
        self.prefetch = bool(prefetch)
        if not self._shards:
            raise ValueError("GatherBuffers: shards is empty")
        first = self._shards[0]
        self._torch = type(first).__module__.split(".")[0] == "torch"
        for i, s in enumerate(self._shards):
            if (type(s).__module__.split(".")[0] == "torch") != self._torch:
                raise ValueError(f"GatherBuffers: shards[{i}] mixes numpy and torch")
            if s.dtype != first.dtype:
                raise ValueError(f"GatherBuffers: shards[{i}] has dtype {s.dtype}, "
                                 f"shards[0] {first.dtype}")
            if len(s.shape) != 1:
                raise ValueError(f"GatherBuffers: shards[{i}] must be 1-D, has shape "
                                 f"{tuple(s.shape)}")
        n = max(int(s.shape[0]) for s in self._shards) * coll.size
        if self._torch:
            import torch
            self._buf = [torch.empty(n, dtype=first.dtype) for _ in range(2)]
        else:
            self._buf = [_np.empty(n, dtype=first.dtype) for _ in range(2)]
        self._held = [None, None]  # the layer whose complete parameters each buffer holds
        self._pending = None  # (buffer, layer, request) of the prefetch in flight
        self._last = 1  # the buffer the last gather() returned (in use by the caller)
        self.wait_seconds = 0.0

    def _view(self, b, layer):
        return self._buf[b][: int(self._shards[layer].shape[0]) * self._coll.size]

    def _finish_pending(self):
        if self._pending is not None:
            b, layer, req = self._pending
            self._pending = None
            req.wait()
            self._held[b] = layer

    def progress(self):
        """Tests the prefetch in flight once; True when none is left. The library moves data
        only inside its calls: a compute loop calling this now and then lets the prefetch's
        packets be received while it computes (the time counts in wait_seconds)."""
        if self._pending is None:
            return True
        t0 = _time.perf_counter()
        b, layer, req = self._pending
        finished = req.test()
        if finished:
            self._pending = None
            self._held[b] = layer
        self.wait_seconds += _time.perf_counter() - t0
        return finished

    def _check_layer(self, layer, name):
        if not isinstance(layer, int) or not 0 <= layer < len(self._shards):
            raise ValueError(f"GatherBuffers.gather: {name} must be a layer in "
                             f"[0, {len(self._shards)}), got {layer!r}")

    def gather(self, layer, next=None):
        """Layer `layer`'s full parameters; starts `next`'s all-gather (prefetch) if given."""
        self._check_layer(layer, "layer")
        if next is not None:
            self._check_layer(next, "next")
        t0 = _time.perf_counter()
        if self._pending is not None and self._pending[1] == layer:
            self._finish_pending()
        if layer in self._held:
            b = self._held.index(layer)
        else:
            self._finish_pending()  # a prefetch of another layer: its buffer is needed
            b = 1 - self._last
            self._held[b] = None
            self._coll.allgather(self._shards[layer], self._view(b, layer))
            self._held[b] = layer
        spare = 1 - b
        if self.prefetch and next is not None and next != layer and self._held[spare] != next:
            if self._pending is None or self._pending[1] != next:
                self._finish_pending()  # in flight into the spare buffer: let it land first
                self._held[spare] = None
                req = self._coll.allgather_start(self._shards[next], self._view(spare, next))
                self._pending = (spare, next, req)
        self._last = b
        self.wait_seconds += _time.perf_counter() - t0
        return self._view(b, layer)

    def invalidate(self):
        """Forget the buffers' contents (the shards changed); waits for a prefetch in flight."""
        self._finish_pending()
        self._held = [None, None]
