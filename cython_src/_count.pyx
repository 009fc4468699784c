# cython: language_level=3
"""Chunk counting: phase 1 of BPE training.

A :class:`ChunkCounter` counts how often each distinct pre-tokenized chunk
(keyed by its UTF-8 bytes) occurs, without a Python object per occurrence::

    >>> import numpy as np
    >>> counter = ChunkCounter()
    >>> data = np.frombuffer(b"the cat the", np.uint8)
    >>> counter.add_chunks(data, np.array([3, 7, 11], np.int64))   # "the", " cat", " the"
    >>> counter.export()
    (array([ 32,  99,  97, 116,  32, 116, 104, 101, 116, 104, 101], dtype=uint8), array([ 0,  4,  8, 11]), array([1, 1, 1]))

Design: an open-addressing hash table with linear probing whose slots hold the
whole entry (64-bit hash, arena offset, key length, int64 count; 32 bytes), so
a probe touches one cache line and compares key bytes only when the full
64-bit hashes agree.  Key bytes live in one growing arena (append-only: keys
are never removed).  A slot is empty when its count is 0 (every stored key has
a count >= 1).  The table doubles when it would pass ``MAX_LOAD_NUM /
MAX_LOAD_DEN`` full; doubling re-slots entries by their stored hash without
touching the arena.  All memory comes from malloc/calloc/realloc so it can grow
inside ``nogil``; a failed allocation leaves the table consistent (holding the
chunks counted so far) and the adding call returns ``STATUS_NO_MEMORY``
(the status convention of ``_status.pxd``; argument errors raise ValueError).

The hash is ``key_hash``: for keys of at most 8 bytes an invertible mix of the
key word and its length (equal hash and length mean equal key, so those probes
compare no bytes), for longer ones ``_hash.hash_bytes`` (xxHash64's short-input
path).  It reads native-endian words; the hash never leaves the table (export
is sorted by key bytes), so results are the same on every platform.

One table must not be used from two threads at once; a call that finds the
table busy raises RuntimeError instead of corrupting it.
"""
cimport cython
from libc.stdint cimport int64_t, uint8_t, uint64_t, INT64_MAX
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy

from _hash cimport P5, hash_bytes, prefetch
from _status cimport STATUS_NO_MEMORY, STATUS_OK, check_err, fail

import numpy as np

cdef extern from *:
    """
    #include <algorithm>
    #include <cstdint>
    #include <cstring>
    /* a word read from memory in little-endian byte order (a no-op on little-endian hosts) */
    static inline uint64_t ube_le64(uint64_t x) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        return __builtin_bswap64(x);
    #else
        return x;
    #endif
    }

    struct ube_count_entry {
        uint64_t hash;
        int64_t offset;   /* into the arena */
        int64_t length;   /* key bytes */
        int64_t count;    /* 0 = empty slot */
    };

    /* Sort entries by their key bytes: lexicographic, a proper prefix first.
       The entries are the caller's copies: their hash field is overwritten with
       the key's first 8 bytes read big-endian (zero-padded), so most comparisons
       are one integer compare; equal prefixes fall back to the key bytes. */
    static void ube_sort_entries(ube_count_entry* first, int64_t n, const unsigned char* arena) {
        for (int64_t i = 0; i < n; i++) {
            const unsigned char* key = arena + first[i].offset;
            int64_t m = first[i].length < 8 ? first[i].length : 8;
            uint64_t prefix = 0;
            for (int64_t k = 0; k < 8; k++)
                prefix = (prefix << 8) | (k < m ? key[k] : 0u);
            first[i].hash = prefix;
        }
        std::sort(first, first + n, [arena](const ube_count_entry& a, const ube_count_entry& b) {
            if (a.hash != b.hash) return a.hash < b.hash;
            int64_t m = a.length < b.length ? a.length : b.length;
            int c = m > 0 ? std::memcmp(arena + a.offset, arena + b.offset, (size_t)m) : 0;
            if (c != 0) return c < 0;
            return a.length < b.length;
        });
    }
    """
    ctypedef struct ube_count_entry:
        uint64_t hash
        int64_t offset
        int64_t length
        int64_t count
    void ube_sort_entries(ube_count_entry* first, int64_t n, const uint8_t* arena) noexcept nogil
    uint64_t ube_le64(uint64_t x) noexcept nogil


# ----------------------------------------------------------------------------- sizes

cdef enum:
    MIN_CAPACITY = 16
    # grow before the table is more than 3/4 full.  Measured (interleaved runs,
    # CPU time, 33 MB of real text and Zipf-distributed synthetic keys up to
    # 1.5 M distinct): as fast as 1/2 and 5/8, within noise, with ~40% less
    # memory; full 64-bit hashes in the slots keep long probe runs cheap.
    MAX_LOAD_NUM = 3
    MAX_LOAD_DEN = 4
    MIN_ARENA = 4096
    # chunks hashed ahead of the one being counted, their home slots fetched
    # early (the table is larger than the caches)
    AHEAD = 16
    RING = 32           # a power of two > AHEAD


cdef inline uint64_t key_hash(const uint8_t* p, int64_t n, int64_t avail) noexcept nogil:
    """The table's hash of the ``n`` key bytes at ``p``.  A key of at most 8 bytes is read as one
    word (zero-padded), offset by its length and mixed by murmur3's finalizer, a bijection of the
    word: two keys of one length <= 8 share a hash only when they are equal, so a probe that finds
    the hash and the length needs no byte compare, and no read of the arena (most chunks are
    short).  Longer keys: ``hash_bytes``.  ``avail``: the bytes readable at ``p`` (>= ``n``)."""
    cdef uint64_t k = 0
    cdef int64_t i
    if n > 8:
        return hash_bytes(p, n)
    if avail >= 8:    # one unaligned load, the bytes past the key masked off (little-endian order below)
        memcpy(&k, p, 8)
        k = ube_le64(k) & (~(<uint64_t>0) >> (64 - 8 * n)) if n > 0 else 0
    elif n > 0:
        for i in range(n):
            k |= <uint64_t>p[i] << (8 * i)
    k += (<uint64_t>n << 56) + P5     # for one length, adding a constant is a bijection too
    k ^= k >> 33
    k *= <uint64_t>0xff51afd7ed558ccdULL
    k ^= k >> 33
    k *= <uint64_t>0xc4ceb9fe1a85ec53ULL
    k ^= k >> 33
    return k


def _hash(const uint8_t[::1] key):
    """The table's hash of ``key`` (for tests and diagnostics)."""
    return key_hash(&key[0] if key.shape[0] else NULL, key.shape[0], key.shape[0])


# ----------------------------------------------------------------------------- table

@cython.final
cdef class ChunkCounter:
    """Counts of byte-string chunks in an open-addressing hash table.

    ``initial_capacity`` is the number of slots to start with (rounded up to a
    power of two, at least 16); the table doubles as needed.
    """
    cdef ube_count_entry* _slots
    cdef int64_t _capacity        # number of slots, a power of two
    cdef int64_t _size            # distinct keys
    cdef int64_t _grow_at         # grow before _size passes this
    cdef int64_t _total           # sum of counts
    cdef uint8_t* _arena
    cdef int64_t _arena_len
    cdef int64_t _arena_cap
    cdef int64_t _initial_capacity
    cdef int64_t _wanted          # bytes of the allocation that failed last
    cdef bint _busy

    def __cinit__(self, int64_t initial_capacity=1024):
        cdef int64_t cap = MIN_CAPACITY
        if initial_capacity < 0:
            raise ValueError(f"initial_capacity must be >= 0, got {initial_capacity}")
        while cap < initial_capacity and cap < (<int64_t>1 << 58):
            cap *= 2   # (a capacity this large fails in calloc: MemoryError)
        self._initial_capacity = cap
        self._slots = NULL
        self._arena = NULL
        self._reset()

    def __dealloc__(self):
        free(self._slots)
        free(self._arena)

    cdef _reset(self):
        free(self._slots)
        free(self._arena)
        self._slots = NULL
        self._arena = NULL
        self._size = 0
        self._total = 0
        self._arena_len = 0
        self._arena_cap = 0
        self._capacity = 0
        self._grow_at = 0
        self._slots = <ube_count_entry*>calloc(self._initial_capacity, sizeof(ube_count_entry))
        if self._slots == NULL:
            raise MemoryError("ChunkCounter: could not allocate the hash table")
        self._capacity = self._initial_capacity
        self._grow_at = self._capacity * MAX_LOAD_NUM // MAX_LOAD_DEN

    # ------------------------------------------------------------------ nogil core

    cdef int _grow(self) noexcept nogil:
        """Double the slot array; 0 on success, -1 when out of memory."""
        cdef int64_t new_capacity = self._capacity * 2
        cdef uint64_t new_mask = <uint64_t>(new_capacity - 1)
        cdef ube_count_entry* old = self._slots
        cdef ube_count_entry* slots = <ube_count_entry*>calloc(new_capacity, sizeof(ube_count_entry))
        cdef int64_t i
        cdef uint64_t j
        if slots == NULL:
            self._wanted = new_capacity * <int64_t>sizeof(ube_count_entry)
            return -1
        for i in range(self._capacity):
            if old[i].count != 0:
                j = old[i].hash & new_mask
                while slots[j].count != 0:
                    j = (j + 1) & new_mask
                slots[j] = old[i]
        free(old)
        self._slots = slots
        self._capacity = new_capacity
        self._grow_at = new_capacity * MAX_LOAD_NUM // MAX_LOAD_DEN
        return 0

    cdef int _reserve_arena(self, int64_t extra) noexcept nogil:
        """Make room for ``extra`` more key bytes; 0 on success, -1 when out of memory."""
        cdef int64_t need = self._arena_len + extra
        cdef int64_t new_cap
        cdef uint8_t* arena
        if need <= self._arena_cap:
            return 0
        new_cap = self._arena_cap * 2
        if new_cap < MIN_ARENA:
            new_cap = MIN_ARENA
        if new_cap < need:
            new_cap = need
        arena = <uint8_t*>realloc(self._arena, new_cap)
        if arena == NULL:
            self._wanted = new_cap
            return -1
        self._arena = arena
        self._arena_cap = new_cap
        return 0

    cdef inline void _prefetch_home(self, uint64_t h) noexcept nogil:
        prefetch(&self._slots[h & <uint64_t>(self._capacity - 1)])

    cdef int _add(self, const uint8_t* key, int64_t length, int64_t count, uint64_t h) noexcept nogil:
        """Add ``count`` (>= 1) to ``key`` whose hash is ``h``; 0 on success, -1
        when out of memory."""
        cdef uint64_t mask = <uint64_t>(self._capacity - 1)
        cdef uint64_t i = h & mask
        cdef ube_count_entry* slots = self._slots
        cdef ube_count_entry* entry
        while True:
            entry = &slots[i]
            if entry.count == 0:
                break
            if entry.hash == h and entry.length == length and (   # <= 8 bytes: the hash is the key
                    length <= 8 or memcmp(self._arena + entry.offset, key, length) == 0):
                entry.count += count
                return 0
            i = (i + 1) & mask
        # a new key: make room first, so a failure leaves the table unchanged
        if self._reserve_arena(length) != 0:
            return -1
        if self._size >= self._grow_at:
            if self._grow() != 0:
                return -1
            mask = <uint64_t>(self._capacity - 1)
            slots = self._slots
            i = h & mask
            while slots[i].count != 0:
                i = (i + 1) & mask
            entry = &slots[i]
        if length > 0:
            memcpy(self._arena + self._arena_len, key, length)
        entry.hash = h
        entry.offset = self._arena_len
        entry.length = length
        entry.count = count
        self._arena_len += length
        self._size += 1
        return 0

    # ------------------------------------------------------------------ Python API

    cdef _enter(self):
        if self._busy:
            raise RuntimeError("ChunkCounter is in use by another thread; use one table per thread "
                               "and merge their exports with add_weighted")
        self._busy = True

    def add_chunks(self, const uint8_t[::1] data, const int64_t[::1] ends, int64_t start=0,
                   int64_t[::1] err=None):
        """Count the chunks ``data[start:ends[0]], data[ends[0]:ends[1]], ...``.

        ``ends`` holds exclusive end byte offsets and must be non-decreasing,
        with ``0 <= start <= ends[0]`` and ``ends[-1] <= len(data)``.  Empty
        chunks (equal consecutive ends, e.g. from an empty document) are
        skipped, not counted.  Raises ValueError naming the first bad index
        before counting anything.  Returns the status: ``STATUS_NO_MEMORY``
        (``err[0]``: the bytes it could not allocate) when the table could not
        grow; it then keeps the chunks counted before the failed allocation.
        """
        cdef int64_t n = ends.shape[0]
        cdef int64_t size = data.shape[0]
        cdef int64_t i, prev, end, bad = -1, added = 0
        cdef int64_t ahead = 0, ahead_start = start     # the next chunk to hash, its start
        cdef uint64_t hashes[RING]
        cdef int status = 0
        cdef const uint8_t* base = &data[0] if size > 0 else NULL
        if start < 0 or start > size:
            raise ValueError(f"start = {start} is outside the buffer of {size} bytes; "
                             f"pass a byte offset in 0..{size}")
        check_err(err)
        self._enter()
        try:
            with nogil:
                prev = start
                for i in range(n):
                    end = ends[i]
                    if end < prev or end > size:
                        bad = i
                        break
                    prev = end
                if bad < 0:
                    prev = start
                    for i in range(n):
                        while ahead < n and ahead <= i + AHEAD:
                            end = ends[ahead]
                            if end > ahead_start:
                                hashes[ahead & (RING - 1)] = key_hash(base + ahead_start, end - ahead_start, size - ahead_start)
                                self._prefetch_home(hashes[ahead & (RING - 1)])
                            ahead_start = end
                            ahead += 1
                        end = ends[i]
                        if end > prev:
                            status = self._add(base + prev, end - prev, 1, hashes[i & (RING - 1)])
                            if status != 0:
                                break
                            added += 1
                        prev = end
                    self._total += added
        finally:
            self._busy = False
        if bad >= 0:
            previous = start if bad == 0 else ends[bad - 1]
            if ends[bad] > size:
                raise ValueError(f"ends[{bad}] = {ends[bad]} is beyond the end of the buffer "
                                 f"({size} bytes); chunk ends must be byte offsets into data")
            what = "start" if bad == 0 else f"ends[{bad - 1}]"
            raise ValueError(f"ends[{bad}] = {ends[bad]} is smaller than {what} = {previous}; "
                             "chunk ends must be non-decreasing byte offsets")
        if status != 0:
            return fail(err, STATUS_NO_MEMORY, self._wanted, -1)
        return STATUS_OK

    def add_weighted(self, const uint8_t[::1] key_data, const int64_t[::1] key_offsets,
                     const int64_t[::1] counts, int64_t[::1] err=None):
        """Add ``counts[i]`` to key ``key_data[key_offsets[i]:key_offsets[i + 1]]``.

        This is the inverse of :meth:`export` (merging partial tables).
        ``key_offsets`` has one more element than ``counts`` and is
        non-decreasing within ``0..len(key_data)``; counts are >= 0 (zero
        counts are skipped).  Repeated keys are summed.  Raises ValueError
        naming the first bad index, or OverflowError when the total would pass
        2**63 - 1, before adding anything.  Returns the status, like
        :meth:`add_chunks`: on ``STATUS_NO_MEMORY`` the table keeps the keys
        added before the failure.
        """
        cdef int64_t n = counts.shape[0]
        cdef int64_t size = key_data.shape[0]
        cdef int64_t i, begin, end, count, added = 0, bad = -1
        cdef int64_t ahead = 0           # the next key to hash
        cdef uint64_t hashes[RING]
        cdef int status = 0, problem = 0   # 1 offset outside, 2 offset decreasing, 3 negative count, 4 overflow
        cdef const uint8_t* base = &key_data[0] if size > 0 else NULL
        if key_offsets.shape[0] != n + 1:
            raise ValueError(f"key_offsets must have len(counts) + 1 = {n + 1} elements, "
                             f"got {key_offsets.shape[0]}; pass the arrays export() returned")
        check_err(err)
        self._enter()
        try:
            with nogil:
                # validate everything first, so a bad table adds nothing; every
                # entry's count is <= total, so a total that does not overflow
                # means no entry overflows either
                added = self._total
                if key_offsets[0] < 0 or key_offsets[0] > size:
                    bad = 0
                    problem = 1
                for i in range(n):
                    if problem != 0:
                        break
                    end = key_offsets[i + 1]
                    count = counts[i]
                    if end > size:
                        bad = i + 1
                        problem = 1
                    elif end < key_offsets[i]:
                        bad = i + 1
                        problem = 2
                    elif count < 0:
                        bad = i
                        problem = 3
                    elif count > INT64_MAX - added:
                        bad = i
                        problem = 4
                    else:
                        added += count
                if problem == 0:
                    for i in range(n):
                        while ahead < n and ahead <= i + AHEAD:
                            begin = key_offsets[ahead]
                            hashes[ahead & (RING - 1)] = key_hash(base + begin, key_offsets[ahead + 1] - begin, size - begin)
                            self._prefetch_home(hashes[ahead & (RING - 1)])
                            ahead += 1
                        count = counts[i]
                        if count > 0:
                            begin = key_offsets[i]
                            status = self._add(base + begin, key_offsets[i + 1] - begin, count,
                                               hashes[i & (RING - 1)])
                            if status != 0:
                                break
                            self._total += count
        finally:
            self._busy = False
        if problem == 1:
            raise ValueError(f"key_offsets[{bad}] = {key_offsets[bad]} is outside key_data "
                             f"(0..{size}); pass the arrays export() returned")
        if problem == 2:
            raise ValueError(f"key_offsets[{bad}] = {key_offsets[bad]} is smaller than "
                             f"key_offsets[{bad - 1}] = {key_offsets[bad - 1]}; offsets must be "
                             "non-decreasing")
        if problem == 3:
            raise ValueError(f"counts[{bad}] = {counts[bad]} is negative; counts must be >= 0")
        if problem == 4:
            raise OverflowError(f"adding counts[{bad}] = {counts[bad]} would take the table's total "
                                "past 2**63 - 1; nothing was added")
        if status != 0:
            return fail(err, STATUS_NO_MEMORY, self._wanted, -1)
        return STATUS_OK

    def export(self, int64_t min_count=1):
        """The table as ``(key_data, key_offsets, counts)`` numpy arrays.

        ``key_data`` (uint8) holds the keys back to back, key ``i`` is
        ``key_data[key_offsets[i]:key_offsets[i + 1]]`` (``key_offsets`` is
        int64 with n + 1 elements) and ``counts`` (int64) their counts.  Keys
        are sorted by their bytes (lexicographic, a proper prefix first), so
        the result does not depend on insertion order or on the hash.  Only
        keys with ``count >= min_count`` are kept.  The arrays are fresh
        copies, ready for ``np.savez``.
        """
        cdef ube_count_entry* kept
        cdef int64_t n = 0, total_bytes = 0, i, pos
        cdef int64_t[::1] offsets_view
        cdef int64_t[::1] counts_view
        cdef uint8_t[::1] data_view
        self._enter()
        try:
            kept = <ube_count_entry*>malloc((self._size if self._size > 0 else 1) * sizeof(ube_count_entry))
            if kept == NULL:
                raise MemoryError(f"ChunkCounter.export: could not allocate {self._size} entries")
            try:
                with nogil:
                    for i in range(self._capacity):
                        if self._slots[i].count != 0 and self._slots[i].count >= min_count:
                            kept[n] = self._slots[i]
                            total_bytes += kept[n].length
                            n += 1
                    ube_sort_entries(kept, n, self._arena)
                key_data = np.empty(total_bytes, dtype=np.uint8)
                key_offsets = np.empty(n + 1, dtype=np.int64)
                counts = np.empty(n, dtype=np.int64)
                data_view = key_data
                offsets_view = key_offsets
                counts_view = counts
                with nogil:
                    pos = 0
                    offsets_view[0] = 0
                    for i in range(n):
                        if kept[i].length > 0:
                            memcpy(&data_view[pos], self._arena + kept[i].offset, kept[i].length)
                        pos += kept[i].length
                        offsets_view[i + 1] = pos
                        counts_view[i] = kept[i].count
            finally:
                free(kept)
        finally:
            self._busy = False
        return key_data, key_offsets, counts

    def clear(self):
        """Forget every key and release the memory (back to the initial capacity)."""
        self._enter()
        try:
            self._reset()
        finally:
            self._busy = False

    def __len__(self):
        """Number of distinct chunks."""
        return self._size

    @property
    def total(self):
        """Sum of all counts (chunk occurrences)."""
        return self._total

    @property
    def capacity(self):
        """Number of hash slots (a power of two; doubles when the table grows)."""
        return self._capacity

    @property
    def memory_bytes(self):
        """Approximate bytes held: the slot array plus the key arena."""
        return self._capacity * <int64_t>sizeof(ube_count_entry) + self._arena_cap

    def __repr__(self):
        return (f"<ChunkCounter: {self._size} distinct chunks, total {self._total}, "
                f"{self.memory_bytes} bytes>")
