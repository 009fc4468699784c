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
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcmp
from libcpp.vector cimport vector

import numpy as np

from _hash cimport hash_bytes
from _status cimport STATUS_NOT_BPE, STATUS_OK, check_err, fail


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
