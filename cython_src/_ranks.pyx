# cython: language_level=3
"""Rank-file kernel: a byte-level BPE rank vocabulary (tiktoken's ``.tiktoken``
files) -> its merge list.

Private: the public face is :func:`ube_stream.tokenizer.pretrained.tokenizer_from_tiktoken`.
A rank vocabulary lists tokens (byte strings) by rank; tiktoken encodes by
byte-pair merging with the rank of the *concatenated bytes*.  A token of rank
``r`` is the merge of the two parts that this BPE, restricted to ranks below
``r``, leaves of its bytes; this kernel runs that restricted BPE for every
token in rank order and so recovers the merge list (the readable twin is
``ube_stream._reference.merges_from_ranks``).  Invalid data is reported by the
status convention of ``_status.pxd``.
"""
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint64_t
from libc.string cimport memcmp, memcpy
from libcpp.vector cimport vector

import numpy as np

from _hash cimport hash_bytes
from _status cimport STATUS_NOT_BPE, STATUS_OK, STATUS_TOO_LARGE, check_err, fail


cdef struct Table:
    int64_t* starts      # slot -> byte offset of its key in data (-1: empty)
    int32_t* lengths
    int32_t* ids
    uint64_t mask


cdef inline int32_t table_get(const Table* t, const uint8_t* data, const uint8_t* key, int32_t n) noexcept nogil:
    """Internal id of the byte string ``key[:n]`` (n >= 2), or -1."""
    cdef uint64_t slot = hash_bytes(key, n) & t.mask
    while t.starts[slot] >= 0:
        if t.lengths[slot] == n and memcmp(data + t.starts[slot], key, n) == 0:
            return t.ids[slot]
        slot = (slot + 1) & t.mask
    return -1


cdef inline void table_put(Table* t, const uint8_t* data, int64_t start, int32_t n, int32_t token_id) noexcept nogil:
    cdef uint64_t slot = hash_bytes(data + start, n) & t.mask
    while t.starts[slot] >= 0:
        slot = (slot + 1) & t.mask
    t.starts[slot] = start
    t.lengths[slot] = n
    t.ids[slot] = token_id


def merges_from_ranks(const uint8_t[::1] data, const int64_t[::1] offsets, int64_t[::1] err=None):
    """Merges of the multi-byte tokens ``k = data[offsets[k]:offsets[k+1]]``, given in
    rank order (single bytes are ids 0..255 and are not listed; token ``k`` gets
    internal id ``256 + k``).

    Returns ``(status, merges)``: ``merges[k] = (left, right)`` internal ids, int32
    ``n x 2``.  A token that the BPE of the ranks below it does not reduce to
    exactly two parts gives ``STATUS_NOT_BPE`` with ``err = (parts left, k)``.
    Tokens must be distinct and at least 2 bytes long (else ValueError).
    """
    check_err(err)
    cdef Py_ssize_t n = offsets.shape[0] - 1
    if n < 0:
        raise ValueError("offsets needs at least one entry")
    cdef Py_ssize_t k
    cdef int64_t longest = 0
    for k in range(n):
        if offsets[k + 1] - offsets[k] < 2 or offsets[k + 1] > data.shape[0] or offsets[k] < 0:
            raise ValueError(f"token {k} spans bytes {offsets[k]}..{offsets[k + 1]}: tokens must be "
                             f"at least 2 bytes long and inside data ({data.shape[0]} bytes)")
        longest = max(longest, offsets[k + 1] - offsets[k])
    merges = np.empty((n, 2), dtype=np.int32)
    cdef int32_t[:, ::1] out = merges
    if n == 0:
        return STATUS_OK, merges
    cdef uint64_t capacity = 1
    while capacity < <uint64_t>(2 * n + 16):
        capacity <<= 1
    starts_arr = np.full(capacity, -1, dtype=np.int64)
    lengths_arr = np.zeros(capacity, dtype=np.int32)
    ids_arr = np.zeros(capacity, dtype=np.int32)
    cdef int64_t[::1] starts_v = starts_arr
    cdef int32_t[::1] lengths_v = lengths_arr
    cdef int32_t[::1] ids_v = ids_arr
    cdef Table table
    table.starts = &starts_v[0]
    table.lengths = &lengths_v[0]
    table.ids = &ids_v[0]
    table.mask = capacity - 1
    cdef vector[int64_t] bounds          # part i is token[bounds[i]:bounds[i+1]]
    bounds.reserve(longest + 1)
    cdef const uint8_t* base = &data[0]
    cdef const uint8_t* token
    cdef int64_t start, length, i, where, parts
    cdef int32_t best, found, duplicate = -1, failed = -1, failed_parts = 0
    with nogil:
        for k in range(n):
            start = offsets[k]
            length = offsets[k + 1] - start
            token = base + start
            if table_get(&table, base, token, <int32_t>length) >= 0:
                duplicate = <int32_t>k
                break
            bounds.clear()
            for i in range(length + 1):
                bounds.push_back(i)
            while bounds.size() > 2:
                best, where = -1, -1
                for i in range(<int64_t>bounds.size() - 2):
                    found = table_get(&table, base, token + bounds[i], <int32_t>(bounds[i + 2] - bounds[i]))
                    if found >= 0 and (best < 0 or found < best):
                        best, where = found, i
                if where < 0:
                    break
                bounds.erase(bounds.begin() + where + 1)
            parts = <int64_t>bounds.size() - 1
            if parts != 2:
                failed, failed_parts = <int32_t>k, <int32_t>parts
                break
            out[k, 0] = token[0] if bounds[1] == 1 else table_get(&table, base, token, <int32_t>bounds[1])
            out[k, 1] = (token[length - 1] if length - bounds[1] == 1
                         else table_get(&table, base, token + bounds[1], <int32_t>(length - bounds[1])))
            table_put(&table, base, start, <int32_t>length, <int32_t>(256 + k))
    if duplicate >= 0:
        raise ValueError(f"token {duplicate} repeats the bytes of an earlier token: tokens must be distinct")
    if failed >= 0:
        return fail(err, STATUS_NOT_BPE, failed_parts, failed), None
    return STATUS_OK, merges


# --------------------------------------------------------------------------- merges -> tokens

def expand_merges(const int64_t[:, ::1] merges, int64_t base_size, int64_t max_symbols, int64_t max_total,
                  int64_t[::1] err=None):
    """The result id of every merge and the base-symbol expansion of every token
    (twin: ``_reference.derive_tokens_reference``).

    Merge ``k`` joins the expansions of ``merges[k] = (left, right)``; it makes a new
    token unless an earlier token has the same expansion (then its result is that
    one).  Returns ``(status, results int64[n], symbols uint16, offsets int64[t + 1])``
    with token ``i``'s symbols ``symbols[offsets[i]:offsets[i + 1]]`` (``i <
    base_size``: the one symbol ``i``).  Failures (results None), in rank order:
    ``STATUS_NOT_BPE`` when a merge joins an id not defined yet (``err``: the
    tokens defined at that rank, the rank); ``STATUS_TOO_LARGE`` when a token would
    exceed ``max_symbols`` symbols or all of them ``max_total`` (``err``: that size,
    the rank), checked before anything is built."""
    cdef Py_ssize_t n = merges.shape[0], k, cap = 1, slot
    cdef int64_t left, right, length, total = base_size, ntok = base_size, a, b, found
    cdef int status = STATUS_OK
    cdef int64_t bad_size = -1, bad_rank = -1
    if merges.shape[1] != 2 and n > 0:
        raise ValueError(f"merges must be n x 2, got shape ({merges.shape[0]}, {merges.shape[1]})")
    if not 0 < base_size <= 65536:
        raise ValueError(f"base_size must be in 1..65536, got {base_size}")
    check_err(err)
    cdef vector[uint16_t] symbols
    cdef vector[int64_t] offsets
    cdef vector[int64_t] slots
    cdef vector[int64_t] results
    while cap < 2 * (base_size + n) + 16:
        cap *= 2
    cdef uint64_t mask = cap - 1
    with nogil:
        symbols.reserve(base_size + 8 * n)
        offsets.reserve(base_size + n + 1)
        results.reserve(n)
        slots.assign(cap, -1)
        for k in range(base_size):
            symbols.push_back(<uint16_t>k)
            offsets.push_back(k)
        offsets.push_back(base_size)
        for k in range(n):
            left = merges[k, 0]
            right = merges[k, 1]
            if left < 0 or right < 0 or left >= ntok or right >= ntok:
                status, bad_size, bad_rank = STATUS_NOT_BPE, ntok, k
                break
            length = (offsets[left + 1] - offsets[left]) + (offsets[right + 1] - offsets[right])
            if length > max_symbols:
                status, bad_size, bad_rank = STATUS_TOO_LARGE, length, k
                break
            total += length
            if total > max_total:
                status, bad_size, bad_rank = STATUS_TOO_LARGE, total, k
                break
            a = symbols.size()   # the candidate, appended; dropped again if an earlier token has it
            symbols.resize(a + length)
            b = offsets[left + 1] - offsets[left]
            memcpy(&symbols[a], &symbols[offsets[left]], b * sizeof(uint16_t))
            memcpy(&symbols[a + b], &symbols[offsets[right]], (length - b) * sizeof(uint16_t))
            slot = hash_bytes(<const uint8_t*>&symbols[a], 2 * length) & mask
            found = -1
            while slots[slot] >= 0:
                b = slots[slot]
                if (offsets[b + 1] - offsets[b] == length
                        and memcmp(&symbols[offsets[b]], &symbols[a], 2 * length) == 0):
                    found = b
                    break
                slot = (slot + 1) & mask
            if found >= 0:
                symbols.resize(a)
                results.push_back(found)
            else:
                slots[slot] = ntok
                offsets.push_back(symbols.size())
                results.push_back(ntok)
                ntok += 1
    if status != STATUS_OK:
        return fail(err, status, bad_size, bad_rank), None, None, None
    out_results = np.empty(n, dtype=np.int64)
    out_symbols = np.empty(symbols.size(), dtype=np.uint16)
    out_offsets = np.empty(offsets.size(), dtype=np.int64)
    cdef int64_t[::1] rv = out_results
    cdef uint16_t[::1] sv = out_symbols
    cdef int64_t[::1] ov = out_offsets
    if n:
        memcpy(&rv[0], results.data(), n * sizeof(int64_t))
    memcpy(&sv[0], symbols.data(), symbols.size() * sizeof(uint16_t))
    memcpy(&ov[0], offsets.data(), offsets.size() * sizeof(int64_t))
    return STATUS_OK, out_results, out_symbols, out_offsets


def expansion_tuples(const uint16_t[::1] symbols, const int64_t[::1] offsets):
    """``[tuple(symbols[offsets[i]:offsets[i + 1]]) for i in ...]`` in one pass (the
    int objects of the symbols made once each)."""
    cdef Py_ssize_t n = offsets.shape[0] - 1, i, j
    cdef uint16_t top = 0
    if n < 0 or offsets[0] != 0 or offsets[n] > symbols.shape[0]:
        raise ValueError("offsets must run from 0 within symbols")
    for i in range(n):
        if offsets[i + 1] < offsets[i]:
            raise ValueError(f"offsets decrease at {i}")
    for i in range(offsets[n]):
        top = max(top, symbols[i])
    cdef list ints = list(range(top + 1))   # one int object per symbol value
    out = [None] * n
    cdef tuple t
    for i in range(n):
        t = PyTuple_New(offsets[i + 1] - offsets[i])
        for j in range(offsets[i + 1] - offsets[i]):
            value = ints[symbols[offsets[i] + j]]
            Py_INCREF(value)
            PyTuple_SET_ITEM(t, j, value)
        out[i] = t
    return out
