# distutils: language = c++
"""BPE encoding kernels (the fast path behind ``Tokenizer``; decoding is ``_decode``).

Encoding one chunk (base symbol ids) follows the rank-ordered rule of
``_reference.encode_chunk_reference``: take the adjacent pair of lowest merge
rank, replace all its non-overlapping occurrences left to right by the merge's
result, repeat until no adjacent pair has a rank.

* Pair table: pairs of two base symbols in a dense ``base x base`` rank array,
  every other pair in an open-addressing hash table on the packed 64-bit key
  ``left << 32 | right``.  A rank gives its result id through ``results``.
* Short chunks (<= SHORT_CHUNK symbols): repeated min-scan over an array of
  pair ranks, compacting in place and looking up only the pairs a merge made.
  Long chunks (CJK runs, long digit or punctuation runs): a linked list and a
  min-heap of ``rank << 32 | position``, each rank's occurrences taken
  together in position order.
* Chunk cache: chunk bytes -> ids, open addressing over two arenas, bounded by
  entries and bytes, cleared when full.  One cache per *slot*: a caller that
  encodes from several threads uses one slot per thread (a slot in use by
  another thread is refused with RuntimeError rather than corrupted).

Every encode entry releases the GIL for the whole batch.  Invalid data is reported by the status convention of ``_status.pxd``: each
entry returns ``(status, result...)`` and writes where into ``err``.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy, memset
from libcpp.vector cimport vector

from _hash cimport hash_bytes, mix64
from _pretok_core cimport gpt2_split
from _pretok_tiktoken cimport (SPLIT_CL100K, SPLIT_GPT2, SPLIT_LLAMA3, SPLIT_O200K, TT_HEAD, TT_LETTER,
                               tiktoken_split)
from _route_core cimport route_utf8
from _status cimport (STATUS_BAD_ID, STATUS_INVALID_UTF8, STATUS_NO_MEMORY,
                      STATUS_OK, check_err, fail)
from _types cimport SUBSTRATE_UBE, SUBSTRATE_UTF8, SUBSTRATE_UTF16

import numpy as np

ctypedef vector[int32_t] int32_t_vec

cdef enum:
    SHORT_CHUNK = 64            # symbols; longer chunks take the heap path

cdef uint32_t NO_RANK = 0xFFFFFFFFu
cdef uint64_t EMPTY_KEY = 0xFFFFFFFFFFFFFFFFull


# --------------------------------------------------------------------------- pair table

cdef struct Tables:
    uint32_t base                # number of base symbols (dense pair table side)
    const uint32_t* base_ranks   # base * base ranks (NO_RANK: no merge)
    const uint64_t* keys         # open addressing: packed pair or EMPTY_KEY
    const uint32_t* ranks        # rank of keys[i]
    uint64_t mask
    const uint32_t* results      # result id of each rank
    int substrate


cdef inline uint32_t rank_of(const Tables* t, uint32_t left, uint32_t right) noexcept nogil:
    cdef uint64_t key, i, k
    if left < t.base and right < t.base:
        return t.base_ranks[left * t.base + right]
    key = (<uint64_t>left << 32) | right
    i = mix64(key) & t.mask
    while True:
        k = t.keys[i]
        if k == key:
            return t.ranks[i]
        if k == EMPTY_KEY:
            return NO_RANK
        i = (i + 1) & t.mask


# --------------------------------------------------------------------------- merging

cdef Py_ssize_t merge_short(const Tables* t, uint32_t* ids, uint32_t* ranks,
                            Py_ssize_t n) noexcept nogil:
    """Merge ``ids[0:n]`` in place by repeated min-scan; returns the new length."""
    cdef Py_ssize_t i, j
    cdef uint32_t best, result
    cdef bint merged_prev
    for i in range(n - 1):
        ranks[i] = rank_of(t, ids[i], ids[i + 1])
    while n >= 2:
        best = NO_RANK
        for i in range(n - 1):
            if ranks[i] < best:
                best = ranks[i]
        if best == NO_RANK:
            break
        result = t.results[best]
        i = 0
        j = 0
        merged_prev = False
        while i < n:
            if i + 1 < n and ranks[i] == best:
                ids[j] = result
                if j > 0:
                    ranks[j - 1] = rank_of(t, ids[j - 1], result)
                merged_prev = True
                i += 2
            else:
                ids[j] = ids[i]
                if j > 0:
                    if merged_prev:
                        ranks[j - 1] = rank_of(t, ids[j - 1], ids[j])
                    else:
                        ranks[j - 1] = ranks[i - 1]  # the same two tokens as before
                merged_prev = False
                i += 1
            j += 1
        n = j
    return n


cdef inline void _heap_push(vector[uint64_t]& heap, uint64_t item) noexcept nogil:
    cdef Py_ssize_t i = heap.size(), parent
    heap.push_back(item)
    while i > 0:
        parent = (i - 1) >> 1
        if heap[parent] <= item:
            break
        heap[i] = heap[parent]
        i = parent
    heap[i] = item


cdef inline uint64_t _heap_pop(vector[uint64_t]& heap) noexcept nogil:
    cdef uint64_t top = heap[0], item = heap.back()
    cdef Py_ssize_t n, i = 0, child
    heap.pop_back()
    n = heap.size()
    if n == 0:
        return top
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and heap[child + 1] < heap[child]:
            child += 1
        if heap[child] >= item:
            break
        heap[i] = heap[child]
        i = child
    heap[i] = item
    return top


cdef Py_ssize_t merge_long(const Tables* t, uint32_t* ids, Py_ssize_t n, int32_t_vec& nxt,
                           int32_t_vec& prv, vector[uint32_t]& node_rank,
                           vector[uint64_t]& heap, vector[uint32_t]& batch) noexcept nogil:
    """Merge ``ids[0:n]`` with a linked list and a min-heap; returns the new length."""
    cdef Py_ssize_t i, b, count
    cdef int32_t p, q, nq, pp
    cdef uint32_t r, result, nr
    cdef uint64_t top
    nxt.resize(n)
    prv.resize(n)
    node_rank.resize(n)
    heap.clear()
    for i in range(n):
        nxt[i] = <int32_t>(i + 1)
        prv[i] = <int32_t>(i - 1)
    nxt[n - 1] = -1
    node_rank[n - 1] = NO_RANK
    for i in range(n - 1):
        r = rank_of(t, ids[i], ids[i + 1])
        node_rank[i] = r
        if r != NO_RANK:
            _heap_push(heap, (<uint64_t>r << 32) | <uint64_t>i)
    while heap.size() > 0:
        r = <uint32_t>(heap[0] >> 32)
        batch.clear()
        while heap.size() > 0 and <uint32_t>(heap[0] >> 32) == r:
            top = _heap_pop(heap)
            batch.push_back(<uint32_t>(top & 0xFFFFFFFFu))
        result = t.results[r]
        for b in range(<Py_ssize_t>batch.size()):
            p = <int32_t>batch[b]
            if node_rank[p] != r:
                continue  # stale: merged away or its right neighbour changed
            q = nxt[p]
            ids[p] = result
            nq = nxt[q]
            nxt[p] = nq
            if nq != -1:
                prv[nq] = p
            node_rank[q] = NO_RANK
            if nq != -1:
                nr = rank_of(t, result, ids[nq])
                node_rank[p] = nr
                if nr != NO_RANK:
                    _heap_push(heap, (<uint64_t>nr << 32) | <uint64_t>p)
            else:
                node_rank[p] = NO_RANK
            pp = prv[p]
            if pp != -1:
                nr = rank_of(t, ids[pp], result)
                node_rank[pp] = nr
                if nr != NO_RANK:
                    _heap_push(heap, (<uint64_t>nr << 32) | <uint64_t>pp)
    count = 0
    p = 0
    while p != -1:
        ids[count] = ids[p]
        count += 1
        p = nxt[p]
    return count


# --------------------------------------------------------------------------- chunk cache

cdef struct CacheEntry:
    uint64_t hash               # 0: empty slot
    uint32_t key_off
    uint32_t key_len
    uint32_t val_off
    uint32_t val_len


cdef struct ChunkCache:
    CacheEntry* slots
    uint64_t mask
    Py_ssize_t count
    Py_ssize_t max_entries
    uint8_t* keys
    Py_ssize_t keys_used
    Py_ssize_t keys_cap
    uint32_t* vals
    Py_ssize_t vals_used
    Py_ssize_t vals_cap
    int64_t hits
    int64_t misses
    int64_t clears
    bint busy


cdef inline CacheEntry* cache_find(ChunkCache* c, const uint8_t* key, Py_ssize_t n,
                                   uint64_t h) noexcept nogil:
    """The entry of ``key``, or the empty slot where it would go (``hash == 0``)."""
    cdef uint64_t i = h & c.mask
    cdef CacheEntry* e
    while True:
        e = &c.slots[i]
        if e.hash == 0:
            return e
        if e.hash == h and e.key_len == n and memcmp(c.keys + e.key_off, key, n) == 0:
            return e
        i = (i + 1) & c.mask


cdef inline void cache_clear(ChunkCache* c) noexcept nogil:
    memset(c.slots, 0, (c.mask + 1) * sizeof(CacheEntry))
    c.count = 0
    c.keys_used = 0
    c.vals_used = 0
    c.clears += 1


cdef inline void cache_insert(ChunkCache* c, CacheEntry* slot, const uint8_t* key, Py_ssize_t n,
                              uint64_t h, const uint32_t* ids, Py_ssize_t m) noexcept nogil:
    """Store ``key -> ids`` at ``slot`` (from cache_find); clears the cache first when full."""
    if n > c.keys_cap or m > c.vals_cap:
        return  # larger than the whole cache: not cached
    if c.count >= c.max_entries or c.keys_used + n > c.keys_cap or c.vals_used + m > c.vals_cap:
        cache_clear(c)
        slot = cache_find(c, key, n, h)
    slot.hash = h
    slot.key_off = <uint32_t>c.keys_used
    slot.key_len = <uint32_t>n
    slot.val_off = <uint32_t>c.vals_used
    slot.val_len = <uint32_t>m
    memcpy(c.keys + c.keys_used, key, n)
    memcpy(c.vals + c.vals_used, ids, m * sizeof(uint32_t))
    c.keys_used += n
    c.vals_used += m
    c.count += 1


# --------------------------------------------------------------------------- per-call work

cdef struct Work:
    uint16_t* symbols      # routed chunk (capacity 2 * chunk bytes)
    uint32_t* ids          # ids being merged
    uint32_t* ranks        # short path: pair ranks
    Py_ssize_t cap         # capacity of the three buffers (symbols)


cdef int work_reserve(Work* w, Py_ssize_t n) noexcept nogil:
    """Room for a chunk of ``n`` bytes (2 * n symbols); 0 on success, -1 out of memory."""
    cdef Py_ssize_t need = 2 * n + 8
    if need <= w.cap:
        return 0
    need = max(need, 2 * w.cap)
    free(w.symbols)
    free(w.ids)
    free(w.ranks)
    w.symbols = <uint16_t*>malloc(need * sizeof(uint16_t))
    w.ids = <uint32_t*>malloc(need * sizeof(uint32_t))
    w.ranks = <uint32_t*>malloc(need * sizeof(uint32_t))
    if w.symbols == NULL or w.ids == NULL or w.ranks == NULL:
        w.cap = 0
        return -1
    w.cap = need
    return 0


cdef void work_free(Work* w) noexcept nogil:
    free(w.symbols)
    free(w.ids)
    free(w.ranks)
    w.symbols = NULL
    w.ids = NULL
    w.ranks = NULL
    w.cap = 0


cdef inline int encode_chunk(const Tables* t, ChunkCache* cache, Work* w,
                             const uint8_t* chunk, Py_ssize_t n, vector[uint32_t]& out,
                             int32_t_vec& nxt, int32_t_vec& prv, vector[uint32_t]& node_rank,
                             vector[uint64_t]& heap, vector[uint32_t]& batch,
                             Py_ssize_t* bad_byte) noexcept nogil:
    """Append the ids of one chunk to ``out``; returns STATUS_OK, STATUS_NO_MEMORY,
    or STATUS_INVALID_UTF8 with ``bad_byte`` its offset in the chunk."""
    cdef uint64_t h
    cdef CacheEntry* e
    cdef Py_ssize_t nsym, i, m
    if n == 1 and chunk[0] < 0x80 and t.substrate != SUBSTRATE_UTF16:
        out.push_back(chunk[0])  # one ASCII byte: its base symbol, nothing to merge
        return STATUS_OK
    h = hash_bytes(chunk, n) | 1     # never 0, the mark of an empty slot
    e = cache_find(cache, chunk, n, h)
    if e.hash != 0:
        cache.hits += 1
        out.insert(out.end(), cache.vals + e.val_off, cache.vals + e.val_off + e.val_len)
        return STATUS_OK
    cache.misses += 1
    if work_reserve(w, n) < 0:
        return STATUS_NO_MEMORY
    nsym = route_utf8(chunk, n, t.substrate, w.symbols)
    if nsym < 0:
        bad_byte[0] = -nsym - 1
        return STATUS_INVALID_UTF8
    for i in range(nsym):
        w.ids[i] = w.symbols[i]
    if nsym <= SHORT_CHUNK:
        m = merge_short(t, w.ids, w.ranks, nsym)
    else:
        m = merge_long(t, w.ids, nsym, nxt, prv, node_rank, heap, batch)
    out.insert(out.end(), w.ids, w.ids + m)
    cache_insert(cache, e, chunk, n, h, w.ids, m)
    return 0


# --------------------------------------------------------------------------- the encoder

cdef class Encoder:
    """Merge tables of one tokenizer plus ``num_slots`` chunk caches.

    ``merges``: ``uint32[n, 2]`` (left, right) in rank order; ``results``:
    ``uint32[n]`` the id each merge gives; ``base``: number of base symbols;
    ``substrate``: 0 ube, 1 utf8, 2 utf16; ``classes``: gpt2_class_table(), or
    tiktoken_class_table() with ``split``: the pre-tokenizer :meth:`encode_utf8`
    runs (``SPLIT_*`` of _pretok_tiktoken.pxd: 0 gpt2, 1 cl100k, 2 llama3, 3 o200k).
    A pair that repeats keeps its first (lowest) rank.
    """
    cdef Tables tables
    cdef object _keep          # arrays whose memory the tables point into
    cdef const uint8_t* classes
    cdef readonly int split    # the SPLIT_* code of encode_utf8's pre-tokenizer
    cdef ChunkCache* caches
    cdef int _num_slots
    cdef readonly Py_ssize_t cache_entries
    cdef readonly Py_ssize_t cache_bytes

    def __cinit__(self, merges, results, int base, int substrate, classes, *, int num_slots=1,
                  Py_ssize_t cache_entries=1 << 16, Py_ssize_t cache_bytes=4 << 20, int split=SPLIT_GPT2):
        self.caches = NULL
        self._num_slots = 0
        if substrate not in (SUBSTRATE_UBE, SUBSTRATE_UTF8, SUBSTRATE_UTF16):
            raise ValueError(f"substrate code must be 0 (ube), 1 (utf8) or 2 (utf16), got {substrate}")
        if num_slots < 1:
            raise ValueError(f"num_slots must be >= 1, got {num_slots}")
        if cache_entries < 1 or cache_bytes < 1:
            raise ValueError("cache_entries and cache_bytes must be >= 1")
        if cache_bytes >= (1 << 31):
            raise ValueError("cache_bytes must be below 2 GiB")
        merges_arr = np.ascontiguousarray(merges, dtype=np.uint32).reshape(-1, 2)
        results_arr = np.ascontiguousarray(results, dtype=np.uint32)
        classes_arr = np.ascontiguousarray(classes, dtype=np.uint8)
        if classes_arr.shape[0] != 0x110000:
            raise ValueError("classes must be gpt2_class_table() (0x110000 entries)")
        if split not in (SPLIT_GPT2, SPLIT_CL100K, SPLIT_LLAMA3, SPLIT_O200K):
            raise ValueError(f"split must be 0 (gpt2), 1 (cl100k), 2 (llama3) or 3 (o200k), got {split}")
        if (split != SPLIT_GPT2) != (classes_arr[0x41] == (TT_LETTER | TT_HEAD)):
            raise ValueError(f"classes must be {'gpt2' if split == SPLIT_GPT2 else 'tiktoken'}_class_table() "
                             f"for split {split}")
        self.split = split
        if results_arr.shape[0] != merges_arr.shape[0]:
            raise ValueError(f"{merges_arr.shape[0]} merges but {results_arr.shape[0]} results")
        n = merges_arr.shape[0]
        base_ranks = np.full(base * base, NO_RANK, dtype=np.uint32)
        cap = 16
        while cap < 2 * n:
            cap *= 2
        keys = np.full(cap, EMPTY_KEY, dtype=np.uint64)
        ranks = np.zeros(cap, dtype=np.uint32)
        cdef uint32_t[:, ::1] mv = merges_arr
        cdef uint32_t[::1] br = base_ranks
        cdef uint64_t[::1] kv = keys
        cdef uint32_t[::1] rv = ranks
        cdef uint64_t mask = cap - 1, key, i
        cdef Py_ssize_t r
        cdef uint32_t left, right
        for r in range(n):
            left = mv[r, 0]
            right = mv[r, 1]
            if left < <uint32_t>base and right < <uint32_t>base:
                if br[left * base + right] == NO_RANK:
                    br[left * base + right] = <uint32_t>r
                continue
            key = (<uint64_t>left << 32) | right
            i = mix64(key) & mask
            while kv[i] != EMPTY_KEY and kv[i] != key:
                i = (i + 1) & mask
            if kv[i] == EMPTY_KEY:
                kv[i] = key
                rv[i] = <uint32_t>r
        self._keep = (base_ranks, keys, ranks, results_arr, classes_arr)
        cdef const uint32_t[::1] resv = results_arr
        cdef const uint8_t[::1] clv = classes_arr
        self.tables.base = base
        self.tables.base_ranks = &br[0]
        self.tables.keys = &kv[0]
        self.tables.ranks = &rv[0]
        self.tables.mask = mask
        self.tables.results = &resv[0] if n > 0 else NULL
        self.tables.substrate = substrate
        self.classes = &clv[0]
        self.cache_entries = cache_entries
        self.cache_bytes = cache_bytes
        self.caches = <ChunkCache*>calloc(num_slots, sizeof(ChunkCache))
        if self.caches == NULL:
            raise MemoryError()
        self._num_slots = num_slots
        # the caches themselves are allocated on first use of each slot (_enter)

    def __dealloc__(self):
        cdef int s
        if self.caches != NULL:
            for s in range(self._num_slots):
                free(self.caches[s].slots)
                free(self.caches[s].keys)
                free(self.caches[s].vals)
            free(self.caches)
            self.caches = NULL

    @property
    def num_slots(self):
        return self._num_slots

    def cache_stats(self, int slot=0):
        """``{"entries", "bytes", "hits", "misses", "clears"}`` of one slot's cache."""
        self._check_slot(slot)
        cdef ChunkCache* c = &self.caches[slot]
        return {"entries": c.count, "bytes": c.keys_used, "hits": c.hits,
                "misses": c.misses, "clears": c.clears}

    cdef int _check_slot(self, int slot) except -1:
        if not 0 <= slot < self._num_slots:
            raise ValueError(f"slot {slot} is outside 0..{self._num_slots - 1}")
        return 0

    cdef ChunkCache* _enter(self, int slot) except NULL:
        self._check_slot(slot)
        if self.caches[slot].busy:
            raise RuntimeError(f"chunk cache slot {slot} is in use by another thread; give each "
                               "thread its own slot (Encoder(num_slots=N))")
        cdef ChunkCache* c = &self.caches[slot]
        cdef uint64_t slots = 16
        if c.slots == NULL:
            while slots < 2 * <uint64_t>self.cache_entries:
                slots *= 2
            c.slots = <CacheEntry*>calloc(slots, sizeof(CacheEntry))
            c.mask = slots - 1
            c.max_entries = self.cache_entries
            c.keys = <uint8_t*>malloc(self.cache_bytes)
            c.keys_cap = self.cache_bytes
            c.vals_cap = max(self.cache_bytes // 2, 1)
            c.vals = <uint32_t*>malloc(c.vals_cap * sizeof(uint32_t))
            if c.slots == NULL or c.keys == NULL or c.vals == NULL:
                free(c.slots)
                free(c.keys)
                free(c.vals)
                c.slots = NULL
                c.keys = NULL
                c.vals = NULL
                raise MemoryError(f"cannot allocate chunk cache {slot} ({self.cache_entries} entries, "
                                  f"{self.cache_bytes} bytes); pass a smaller cache")
        c.busy = True
        return c

    def encode_chunk_symbols(self, const uint16_t[::1] symbols):
        """Merge one chunk given as base symbol ids (no cache); for tests and tools."""
        cdef Py_ssize_t n = symbols.shape[0], m, i
        cdef vector[int32_t] nxt, prv
        cdef vector[uint32_t] node_rank, batch
        cdef vector[uint64_t] heap
        out = np.empty(max(n, 1) * 2, dtype=np.uint32)
        cdef uint32_t[::1] ov = out
        for i in range(n):
            if symbols[i] >= self.tables.base:
                raise ValueError(f"symbol {symbols[i]} at {i} is not a base symbol (0..{self.tables.base - 1})")
            ov[i] = symbols[i]
        if n == 0:
            return out[:0]
        with nogil:
            if n <= SHORT_CHUNK:
                m = merge_short(&self.tables, &ov[0], &ov[n], n)
            else:
                m = merge_long(&self.tables, &ov[0], n, nxt, prv, node_rank, heap, batch)
        return out[:m].copy()

    def encode_utf8(self, const uint8_t[::1] data, const int64_t[::1] offsets, int slot=0,
                    int64_t[::1] err=None):
        """Encode documents ``data[offsets[d]:offsets[d+1]]`` (split inline by the
        pre-tokenizer given at construction, ``split``).

        Returns ``(status, ids uint32, token_offsets int64[n+1])``; on
        ``STATUS_INVALID_UTF8`` (``err``: absolute byte offset, document index)
        or ``STATUS_NO_MEMORY`` the arrays are None.
        """
        return self._encode(data, offsets, None, None, slot, err)

    def encode_chunks(self, const uint8_t[::1] data, const int64_t[::1] offsets,
                      const int64_t[::1] ends, const int64_t[::1] doc_chunk_offsets, int slot=0,
                      int64_t[::1] err=None):
        """Like :meth:`encode_utf8` with chunk ends computed elsewhere
        (``chunk_bounds_batch``: absolute end offsets, ``doc_chunk_offsets[n+1]``)."""
        if doc_chunk_offsets.shape[0] != offsets.shape[0]:
            raise ValueError(f"doc_chunk_offsets has {doc_chunk_offsets.shape[0]} entries, "
                             f"offsets {offsets.shape[0]}: both need ndocs + 1")
        cdef Py_ssize_t k, d, nd = offsets.shape[0] - 1
        cdef int64_t prev
        for d in range(nd):
            prev = offsets[d]
            if doc_chunk_offsets[d] > doc_chunk_offsets[d + 1] or doc_chunk_offsets[d + 1] > ends.shape[0]:
                raise ValueError(f"doc_chunk_offsets[{d}:{d + 2}] is not a valid range of ends")
            for k in range(doc_chunk_offsets[d], doc_chunk_offsets[d + 1]):
                if ends[k] < prev or ends[k] > offsets[d + 1]:
                    raise ValueError(f"chunk end {ends[k]} (index {k}) is outside document {d} "
                                     f"[{offsets[d]}, {offsets[d + 1]}] or decreasing")
                prev = ends[k]
            if nd and prev != offsets[d + 1] and doc_chunk_offsets[d + 1] > doc_chunk_offsets[d]:
                raise ValueError(f"the chunks of document {d} end at {prev}, not at {offsets[d + 1]}")
        return self._encode(data, offsets, ends, doc_chunk_offsets, slot, err)

    cdef _encode(self, const uint8_t[::1] data, const int64_t[::1] offsets,
                 const int64_t[::1] ends, const int64_t[::1] doc_chunk_offsets, int slot,
                 int64_t[::1] err):
        cdef Py_ssize_t nd = offsets.shape[0] - 1, d, k, nchunks, max_doc = 0
        cdef int64_t start, stop, pos, chunk_start, base_off = 0
        cdef int status = STATUS_OK
        cdef Py_ssize_t bad = -1, bad_doc = -1, bad_byte = 0
        check_err(err)
        if nd < 0:
            raise ValueError("offsets needs ndocs + 1 entries")
        if offsets[0] < 0 or offsets[nd] > data.shape[0]:
            raise ValueError(f"offsets span [{offsets[0]}, {offsets[nd]}] is outside data (0..{data.shape[0]})")
        for d in range(nd):
            if offsets[d + 1] < offsets[d]:
                raise ValueError(f"offsets must be non-decreasing; offsets[{d + 1}] < offsets[{d}]")
            max_doc = max(max_doc, offsets[d + 1] - offsets[d])
        token_offsets = np.zeros(nd + 1, dtype=np.int64)
        cdef int64_t[::1] tv = token_offsets
        cdef bint inline_split = ends is None
        cdef vector[uint32_t] out
        cdef vector[int64_t] split_ends
        cdef vector[int32_t] nxt, prv
        cdef vector[uint32_t] node_rank, batch
        cdef vector[uint64_t] heap
        cdef Work w
        cdef const uint8_t* base_ptr = &data[0] if data.shape[0] > 0 else NULL
        cdef const int64_t* ends_ptr
        cdef ChunkCache* cache = self._enter(slot)
        w.symbols = NULL
        w.ids = NULL
        w.ranks = NULL
        w.cap = 0
        try:
            with nogil:
                out.reserve((offsets[nd] - offsets[0]) // 3 + 16)
                if inline_split:
                    split_ends.resize(max_doc + 1)
                for d in range(nd):
                    start = offsets[d]
                    stop = offsets[d + 1]
                    if stop > start:
                        if inline_split:
                            if self.split == SPLIT_GPT2:
                                nchunks = gpt2_split(base_ptr + start, stop - start, self.classes,
                                                     split_ends.data())
                            else:
                                nchunks = tiktoken_split(base_ptr + start, stop - start, self.classes,
                                                         split_ends.data(), self.split)
                            if nchunks < 0:
                                status = STATUS_INVALID_UTF8
                                bad = start + (-nchunks - 1)
                                bad_doc = d
                                break
                            ends_ptr = split_ends.data()
                            chunk_start = 0
                            base_off = start
                        else:
                            nchunks = doc_chunk_offsets[d + 1] - doc_chunk_offsets[d]
                            ends_ptr = &ends[doc_chunk_offsets[d]] if nchunks > 0 else NULL
                            chunk_start = start
                            base_off = 0
                        for k in range(nchunks):
                            pos = ends_ptr[k]
                            if pos > chunk_start:
                                status = encode_chunk(&self.tables, cache, &w,
                                                      base_ptr + base_off + chunk_start,
                                                      pos - chunk_start, out, nxt, prv, node_rank,
                                                      heap, batch, &bad_byte)
                                if status != STATUS_OK:
                                    break
                            chunk_start = pos
                        if status != STATUS_OK:
                            bad = base_off + chunk_start + bad_byte
                            bad_doc = d
                            break
                    tv[d + 1] = out.size()
        finally:
            work_free(&w)
            cache.busy = False
        if status == STATUS_NO_MEMORY:
            return fail(err, STATUS_NO_MEMORY, -1, -1), None, None
        if status != STATUS_OK:
            return fail(err, status, bad, bad_doc), None, None
        ids = np.empty(out.size(), dtype=np.uint32)
        cdef uint32_t[::1] iv = ids
        if out.size() > 0:
            memcpy(&iv[0], out.data(), out.size() * sizeof(uint32_t))
        return STATUS_OK, ids, token_offsets
