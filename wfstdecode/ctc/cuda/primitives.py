"""Device building blocks of the cuda search's steps (`steps.py`):

- cost keys: a float32 cost as order-preserving bits, and ``(cost, arc)`` packed into one
  uint64 whose integer order is the recombination rule `bundles.improves`, so that one 64-bit
  ``atomicMin`` recombines candidates;
- the recombination hash tables (`buffers.Tables`): open addressing on the token's key
  ``(context state << 32) | state`` (`token_key`; the state itself without boosted phrases);
- block-wide helpers (every thread of the block calls them): prefix sum, minimum, count and the
  exact k-th smallest cost (radix select), on the block's `Scratch` (each call ends with a
  barrier, so the next one can reuse it).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import float32, int32, uint32

from .layout import EMPTY, NO_BEST, NO_KEY, NO_SRC
from .target import bits_float, cuda, float_bits

_LOW32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
_SIGN = np.uint32(0x80000000)
_MAG = np.uint32(0x7FFFFFFF)
_STATE_HASH = np.int64(2654435761)  # Knuth's multiplicative hash


class Scratch(NamedTuple):
    """A block's shared memory. The kernel declares it (Numba cannot link a shared array that a
    device function declares into a kernel through two callers) and the steps share it."""

    scan: object  # int32 [1024]: block_exclusive_scan
    words: object  # uint32 [2]: min_cost_bits, kth_smallest_cost
    hist: object  # int32 [256]: kth_smallest_cost
    counts: object  # int32 [4]: the closure queue's two lengths, the frame's first record
    state: object  # int32 [1024]: relax_queued's queued states, their context states, costs
    ctx: object  # int32 [1024]    and arc offsets
    cost: object  # float32 [1024]
    offset: object  # int32 [1024]


# ---------------------------------------------------------------------------------------------
# cost keys


@cuda.jit(device=True)
def ordered_bits(c):
    """float32 -> uint32 with the same order (for finite costs and +inf)."""
    u = uint32(float_bits(c))
    if u & _SIGN:
        return uint32(~u)
    return uint32(u | _SIGN)


@cuda.jit(device=True)
def ordered_cost(u):
    """Inverse of `ordered_bits`."""
    if u & _SIGN:
        return float32(bits_float(uint32(u & _MAG)))
    return float32(bits_float(uint32(~u)))


@cuda.jit(device=True)
def pack(cost, arc):
    return (np.uint64(ordered_bits(cost)) << _SHIFT32) | np.uint64(arc + 1)


@cuda.jit(device=True)
def key_cost(key):
    return ordered_cost(uint32(key >> _SHIFT32))


@cuda.jit(device=True)
def key_arc(key):
    return int32(np.int64(key & _LOW32)) - 1


# ---------------------------------------------------------------------------------------------
# recombination hash tables


@cuda.jit(device=True)
def token_key(state, ctx):
    """A token's key in the tables: its graph state and context state (`reference.py` step 2)."""
    return (np.int64(ctx) << np.int64(32)) | np.int64(state)


@cuda.jit(device=True)
def key_state(key):
    return int32(key & np.int64(0xFFFFFFFF))


@cuda.jit(device=True)
def key_ctx(key):
    return int32(key >> np.int64(32))


@cuda.jit(device=True)
def _hash(key):
    """Knuth's multiplicative hash of the state xor the context state (31 bits: no overflow)."""
    return ((key ^ (key >> np.int64(32))) & np.int64(0x7FFFFFFF)) * _STATE_HASH


@cuda.jit(device=True)
def find_or_insert(tables, base, key):
    """Slot of token ``key`` in the table at ``base``, inserting it; ``(slot, inserted)``; slot
    -1 when the table is full."""
    mask = tables.size - 1
    h = _hash(key) & mask
    for _ in range(tables.size):
        idx = base + h
        cur = tables.state[idx]
        if cur == key:
            return idx, False
        if cur == EMPTY:
            old = cuda.atomic.cas(tables.state, idx, np.int64(EMPTY), key)
            if old == EMPTY:
                return idx, True
            if old == key:
                return idx, False
        h = (h + 1) & mask
    return -1, False


@cuda.jit(device=True)
def add_candidate(tables, table, key, phrases, overflow, lane):
    """The recombination slot of token ``key`` in table ``table``; a new slot joins the table's
    candidate list, its source context state unset (``NO_SRC``; 0 when the lane has no
    ``phrases``: every token is in context state 0). -1, and the lane's overflow flag, when the
    table is full."""
    base = table * tables.size
    slot, inserted = find_or_insert(tables, base, key)
    if slot < 0:
        overflow[lane] = 1
    elif inserted:
        tables.src[slot] = NO_SRC if phrases else 0
        tables.cand[base + cuda.atomic.add(tables.n_cand, table, 1)] = slot
    return slot


@cuda.jit(device=True)
def lookup(tables, table, key):
    """Slot of token ``key`` in table ``table``, or -1 (not there: a candidate a full table
    dropped; a backpointer's source token is always there)."""
    base = table * tables.size
    mask = tables.size - 1
    h = _hash(key) & mask
    for _ in range(tables.size):
        cur = tables.state[base + h]
        if cur == key:
            return base + h
        if cur == EMPTY:
            return -1
        h = (h + 1) & mask
    return -1


@cuda.jit(device=True)
def clear_table(tables, table):
    """Empty table ``table`` (block-wide): clearing just the listed slots leaves the whole
    open-addressing table empty."""
    base = table * tables.size
    for j in range(cuda.threadIdx.x, tables.n_cand[table], cuda.blockDim.x):
        slot = tables.cand[base + j]
        tables.state[slot] = EMPTY
        tables.key[slot] = NO_KEY
        tables.mark[slot] = 0
    cuda.syncthreads()  # every thread has read the count
    if cuda.threadIdx.x == 0:
        tables.n_cand[table] = 0


@cuda.jit(device=True)
def last_at_most(scan, base, n, i):
    """The largest ``k < n`` with ``scan[base + k] <= i`` (``scan[base] == 0 <= i``)."""
    lo = 0
    hi = n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if scan[base + mid] <= i:
            lo = mid
        else:
            hi = mid
    return lo


# ---------------------------------------------------------------------------------------------
# block-wide helpers (every thread of the block calls them)


@cuda.jit(device=True)
def block_exclusive_scan(value, scratch):
    """(exclusive prefix sum of ``value`` over the block's threads, block total)."""
    tmp = scratch.scan
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    tmp[tid] = value
    cuda.syncthreads()
    offset = 1
    while offset < nt:
        x = tmp[tid - offset] if tid >= offset else 0
        cuda.syncthreads()
        tmp[tid] += x
        cuda.syncthreads()
        offset *= 2
    inclusive = tmp[tid]
    total = tmp[nt - 1]
    cuda.syncthreads()
    return inclusive - value, total


@cuda.jit(device=True)
def min_cost_bits(tables, table, n, scratch):
    """The smallest ordered cost bits over the ``n`` candidates of table ``table``."""
    least = scratch.words
    base = table * tables.size
    best = NO_BEST
    for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        u = uint32(tables.key[tables.cand[base + j]] >> _SHIFT32)
        if u < best:
            best = u
    if cuda.threadIdx.x == 0:
        least[0] = NO_BEST
    cuda.syncthreads()
    cuda.atomic.min(least, 0, best)
    cuda.syncthreads()
    out = least[0]
    cuda.syncthreads()
    return out


@cuda.jit(device=True)
def count_at_most(tables, table, n, cutoff, scratch):
    """How many of the ``n`` candidates of table ``table`` cost at most ``cutoff``."""
    base = table * tables.size
    count = 0
    for j in range(cuda.threadIdx.x, n, cuda.blockDim.x):
        if key_cost(tables.key[tables.cand[base + j]]) <= cutoff:
            count += 1
    _, total = block_exclusive_scan(count, scratch)
    return total


@cuda.jit(device=True)
def kth_smallest_cost(tables, table, n, k, scratch):
    """The ``k``-th smallest (1-based) candidate cost of table ``table``: radix select, 8 bits of
    the ordered cost bits per pass (a 256-bin histogram of the candidates that match the digits
    found so far)."""
    hist = scratch.hist
    found = scratch.words  # the digits so far, the rank left among them
    base = table * tables.size
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    prefix = uint32(0)
    known = uint32(0)
    rank = k
    for p in range(4):
        shift = uint32(24 - 8 * p)
        for i in range(tid, 256, nt):
            hist[i] = 0
        cuda.syncthreads()
        for j in range(tid, n, nt):
            u = uint32(tables.key[tables.cand[base + j]] >> _SHIFT32)
            if (u & known) == prefix:
                cuda.atomic.add(hist, int32((u >> shift) & uint32(255)), 1)
        cuda.syncthreads()
        if tid == 0:
            below = 0
            d = 0
            while below + hist[d] < rank:
                below += hist[d]
                d += 1
            found[0] = uint32(prefix | (uint32(d) << shift))
            found[1] = uint32(rank - below)
        cuda.syncthreads()
        prefix = found[0]
        rank = int32(found[1])
        known = uint32(known | (uint32(255) << shift))
        cuda.syncthreads()
    return ordered_cost(prefix)
