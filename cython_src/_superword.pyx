# distutils: language = c++
"""SuperBPE stage 2: BPE across the chunks of a span (the encoder's second pass).

Stage 1 (``_encode.Encoder`` with the stage-1 merges ``merges[:k]``) encodes
each chunk on its own; this kernel takes its ids and, for every *span* (a run
of chunks, see ``_spans.pxd``), runs BPE over the span's concatenated stage-1
ids with the stage-2 merges ``merges[k:]``: the adjacent pair of lowest rank
first, all its non-overlapping occurrences left to right, repeated until no
pair has a rank -- the rule of ``_reference.encode_chunk_reference`` -- except
that an occurrence is skipped when the token it would make covers more than
``max_words`` chunks, i.e. when ``max_words`` or more chunk starts would lie
strictly inside it (the per-occurrence rule of SuperBPE training).

Each token carries the number of chunk starts strictly inside it (``inner``)
and whether it begins at a chunk start (``start``): a pair (a, b) may merge iff
``inner[a] + inner[b] + start[b] < max_words``.

* Spans of <= SHORT_SPAN tokens: repeated min-scan over an array of pair ranks,
  compacting in place (as ``_encode.merge_short``); longer spans: a linked list
  and a min-heap of ``rank << 32 | position`` (as ``_encode.merge_long``).
* Pair table: open addressing on the packed key ``left << 32 | right`` (ids are
  any stage-1 or stage-2 token; there is no dense base table).

Every entry releases the GIL for the whole batch and reports data errors by the
status convention of ``_status.pxd``.  Never imports the package.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy
from libcpp.vector cimport vector

from _hash cimport mix64
from _heap cimport heap_pop, heap_push
from _spans cimport span_end
from _status cimport STATUS_BAD_ID, STATUS_INVALID_UTF8, STATUS_OK, check_err, fail

import numpy as np

cdef enum:
    SHORT_SPAN = 64             # tokens; longer spans take the heap path

cdef uint32_t NO_RANK = 0xFFFFFFFFu
cdef uint64_t EMPTY_KEY = 0xFFFFFFFFFFFFFFFFull


cdef struct Tables:
    const uint64_t* keys        # packed pair or EMPTY_KEY
    const uint32_t* ranks       # stage-2 rank (0-based) of keys[i]
    uint64_t mask
    const uint32_t* results     # result id of each stage-2 rank
    uint32_t max_words
    uint32_t n_ids              # input ids must be below this (the merged tokens' bound)
    const uint32_t* model_ids   # the id written for each internal id (NULL: the same)
    const uint8_t* is_left      # is_left[id]: some stage-2 merge has ``id`` on its left (skips the hash)


cdef inline uint32_t rank_of(const Tables* t, uint32_t left, uint32_t right) noexcept nogil:
    cdef uint64_t key = (<uint64_t>left << 32) | right
    cdef uint64_t i = mix64(key) & t.mask, k
    while True:
        k = t.keys[i]
        if k == key:
            return t.ranks[i]
        if k == EMPTY_KEY:
            return NO_RANK
        i = (i + 1) & t.mask


cdef inline uint32_t pair_rank(const Tables* t, const uint32_t* ids, const uint32_t* inner,
                               const uint8_t* start, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    """Rank of merging tokens ``a`` and ``b`` (adjacent), NO_RANK when none or when
    the token would cover more than max_words chunks."""
    if not t.is_left[ids[a]] or inner[a] + inner[b] + start[b] >= t.max_words:
        return NO_RANK
    return rank_of(t, ids[a], ids[b])


cdef Py_ssize_t merge_short(const Tables* t, uint32_t* ids, uint32_t* inner, uint8_t* start,
                            uint32_t* ranks, Py_ssize_t n) noexcept nogil:
    """Stage 2 over ``ids[0:n]`` in place by repeated min-scan; returns the new length."""
    cdef Py_ssize_t i, j
    cdef uint32_t best, result
    cdef bint merged_prev
    for i in range(n - 1):
        ranks[i] = pair_rank(t, ids, inner, start, i, i + 1)
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
                inner[j] = inner[i] + inner[i + 1] + start[i + 1]
                start[j] = start[i]
                ids[j] = result
                if j > 0:
                    ranks[j - 1] = pair_rank(t, ids, inner, start, j - 1, j)
                merged_prev = True
                i += 2
            else:
                ids[j] = ids[i]
                inner[j] = inner[i]
                start[j] = start[i]
                if j > 0:
                    if merged_prev:
                        ranks[j - 1] = pair_rank(t, ids, inner, start, j - 1, j)
                    else:
                        ranks[j - 1] = ranks[i - 1]  # the same two tokens as before
                merged_prev = False
                i += 1
            j += 1
        n = j
    return n


cdef struct Scratch:
    vector[uint32_t] inner
    vector[uint8_t] start
    vector[uint32_t] ranks
    vector[int32_t] nxt
    vector[int32_t] prv
    vector[uint64_t] heap
    vector[uint32_t] batch


cdef Py_ssize_t merge_long(const Tables* t, uint32_t* ids, uint32_t* inner, uint8_t* start,
                           Py_ssize_t n, Scratch* s) noexcept nogil:
    """Stage 2 over ``ids[0:n]`` with a linked list and a min-heap (``ranks`` of
    ``s``: the rank of each node's pair with its right neighbour); returns the new length."""
    cdef Py_ssize_t i, b, count
    cdef int32_t p, q, nq, pp
    cdef uint32_t r, result, nr
    cdef uint64_t top
    s.nxt.resize(n)
    s.prv.resize(n)
    s.heap.clear()
    cdef int32_t* nxt = s.nxt.data()
    cdef int32_t* prv = s.prv.data()
    cdef uint32_t* node_rank = s.ranks.data()
    for i in range(n):
        nxt[i] = <int32_t>(i + 1)
        prv[i] = <int32_t>(i - 1)
    nxt[n - 1] = -1
    node_rank[n - 1] = NO_RANK
    for i in range(n - 1):
        r = pair_rank(t, ids, inner, start, i, i + 1)
        node_rank[i] = r
        if r != NO_RANK:
            heap_push(s.heap, (<uint64_t>r << 32) | <uint64_t>i)
    while s.heap.size() > 0:
        r = <uint32_t>(s.heap[0] >> 32)
        s.batch.clear()
        while s.heap.size() > 0 and <uint32_t>(s.heap[0] >> 32) == r:
            top = heap_pop(s.heap)
            s.batch.push_back(<uint32_t>(top & 0xFFFFFFFFu))
        result = t.results[r]
        for b in range(<Py_ssize_t>s.batch.size()):
            p = <int32_t>s.batch[b]
            if node_rank[p] != r:
                continue  # stale: merged away, its right neighbour changed, or no longer allowed
            q = nxt[p]
            ids[p] = result
            inner[p] = inner[p] + inner[q] + start[q]
            nq = nxt[q]
            nxt[p] = nq
            if nq != -1:
                prv[nq] = p
            node_rank[q] = NO_RANK
            if nq != -1:
                nr = pair_rank(t, ids, inner, start, p, nq)
                node_rank[p] = nr
                if nr != NO_RANK:
                    heap_push(s.heap, (<uint64_t>nr << 32) | <uint64_t>p)
            else:
                node_rank[p] = NO_RANK
            pp = prv[p]
            if pp != -1:
                nr = pair_rank(t, ids, inner, start, pp, p)
                node_rank[pp] = nr
                if nr != NO_RANK:
                    heap_push(s.heap, (<uint64_t>nr << 32) | <uint64_t>pp)
    count = 0
    p = 0
    while p != -1:
        ids[count] = ids[p]
        count += 1
        p = nxt[p]
    return count


cdef int stage2_span(const Tables* t, const uint32_t* ids_in, const int64_t* chunk_tokens,
                     Py_ssize_t c0, Py_ssize_t c1, uint32_t* out, Py_ssize_t* out_size,
                     Scratch* s, Py_ssize_t* bad) noexcept nogil:
    """Append the stage-2 ids of the span of chunks ``c0..c1-1`` (chunk ``c``'s stage-1
    ids are ``ids_in[chunk_tokens[c]:chunk_tokens[c + 1]]``) at ``out + out_size``;
    STATUS_OK or STATUS_BAD_ID (``bad``: the input position)."""
    cdef int64_t first = chunk_tokens[c0], stop = chunk_tokens[c1]
    cdef Py_ssize_t n = stop - first, i, m, c
    cdef uint32_t* ids = out + out_size[0]
    cdef uint32_t* inner
    cdef uint8_t* start
    for i in range(n):
        if ids_in[first + i] >= t.n_ids:
            bad[0] = first + i
            return STATUS_BAD_ID
    memcpy(ids, ids_in + first, n * sizeof(uint32_t))
    if n >= 2:
        s.inner.resize(n)
        s.start.resize(n)
        s.ranks.resize(n)
        inner = s.inner.data()
        start = s.start.data()
        for i in range(n):
            inner[i] = 0
            start[i] = 0
        for c in range(c0, c1):
            if chunk_tokens[c] < chunk_tokens[c + 1]:
                start[chunk_tokens[c] - first] = 1
        if n <= SHORT_SPAN:
            m = merge_short(t, ids, inner, start, s.ranks.data(), n)
        else:
            m = merge_long(t, ids, inner, start, n, s)
    else:
        m = n
    if t.model_ids != NULL:
        for i in range(m):
            ids[i] = t.model_ids[ids[i]]
    out_size[0] += m
    return STATUS_OK


cdef class Stage2:
    """Stage-2 merge table of one SuperBPE tokenizer.

    ``merges``: ``uint32[n, 2]`` the stage-2 merges (``merges[k:]``) in rank order,
    ``results``: ``uint32[n]`` the id each gives; ``max_words``: the most chunks a
    token may cover; ``n_ids``: input ids must lie in ``0..n_ids-1`` (base symbols
    and merged tokens); ``id_map``: the model id of each internal id, applied to
    the output (None: the same).  A pair that repeats keeps its first rank.
    """
    cdef Tables tables
    cdef object _keep
    cdef readonly int max_words

    def __cinit__(self, merges, results, int max_words, int n_ids, id_map=None):
        if max_words < 1:
            raise ValueError(f"max_words must be >= 1, got {max_words}")
        if n_ids < 1:
            raise ValueError(f"n_ids must be >= 1, got {n_ids}")
        merges_arr = np.ascontiguousarray(merges, dtype=np.uint32).reshape(-1, 2)
        results_arr = np.ascontiguousarray(results, dtype=np.uint32)
        if results_arr.shape[0] != merges_arr.shape[0]:
            raise ValueError(f"{merges_arr.shape[0]} merges but {results_arr.shape[0]} results")
        n = merges_arr.shape[0]
        if n and (int(merges_arr.max()) >= n_ids or int(results_arr.max()) >= n_ids):
            raise ValueError(f"merges or results hold ids outside 0..{n_ids - 1}")
        cap = 16
        while cap < 2 * n:
            cap *= 2
        keys = np.full(cap, EMPTY_KEY, dtype=np.uint64)
        ranks = np.zeros(cap, dtype=np.uint32)
        is_left = np.zeros(n_ids, dtype=np.uint8)
        is_left[merges_arr[:, 0]] = 1
        cdef const uint8_t[::1] lv = is_left
        cdef const uint32_t[:, ::1] mv = merges_arr
        cdef uint64_t[::1] kv = keys
        cdef uint32_t[::1] rv = ranks
        cdef uint64_t mask = cap - 1, key, i
        cdef Py_ssize_t r
        for r in range(n):
            key = (<uint64_t>mv[r, 0] << 32) | mv[r, 1]
            i = mix64(key) & mask
            while kv[i] != EMPTY_KEY and kv[i] != key:
                i = (i + 1) & mask
            if kv[i] == EMPTY_KEY:
                kv[i] = key
                rv[i] = <uint32_t>r
        id_map_arr = None if id_map is None else np.ascontiguousarray(id_map, dtype=np.uint32)
        if id_map_arr is not None and id_map_arr.shape[0] < n_ids:
            raise ValueError(f"id_map has {id_map_arr.shape[0]} entries; it needs {n_ids}")
        if n == 0:
            results_arr = np.zeros(1, dtype=np.uint32)
        self._keep = (keys, ranks, results_arr, id_map_arr, is_left)
        self.tables.is_left = &lv[0]
        cdef const uint32_t[::1] resv = results_arr
        cdef const uint32_t[::1] idv = id_map_arr
        self.tables.keys = &kv[0]
        self.tables.ranks = &rv[0]
        self.tables.mask = mask
        self.tables.results = &resv[0]
        self.tables.max_words = <uint32_t>max_words
        self.tables.n_ids = <uint32_t>n_ids
        self.tables.model_ids = &idv[0] if id_map_arr is not None else NULL
        self.max_words = max_words

    def merge_span(self, const uint32_t[::1] ids, const uint8_t[::1] chunk_start):
        """Stage 2 over one span given as stage-1 ids and a flag per id (1: the id
        begins a chunk; the first is treated as a chunk start); for tests and tools.
        Returns the ids (model ids when an id_map was given)."""
        cdef Py_ssize_t n = ids.shape[0], i, nstarts = 0
        if chunk_start.shape[0] != n:
            raise ValueError(f"{n} ids but {chunk_start.shape[0]} chunk_start flags")
        tokens = np.zeros(n + 1, dtype=np.int64)
        cdef int64_t[::1] tv = tokens
        for i in range(n):
            if i == 0 or chunk_start[i]:
                tv[nstarts] = i
                nstarts += 1
        tv[nstarts] = n
        status, out, _ = self.encode_spans(ids, tokens[:nstarts + 1], np.array([nstarts], dtype=np.int64),
                                           np.array([0, nstarts], dtype=np.int64))
        if status == STATUS_BAD_ID:
            raise ValueError(f"an id is outside 0..{self.tables.n_ids - 1}")
        return out

    def encode_spans(self, const uint32_t[::1] ids, const int64_t[::1] chunk_tokens,
                     const int64_t[::1] span_stops, const int64_t[::1] doc_chunk_offsets,
                     int64_t[::1] err=None):
        """Stage 2 of documents whose spans are given.

        ``ids``: the stage-1 ids of all chunks in order; chunk ``c``'s are
        ``ids[chunk_tokens[c]:chunk_tokens[c + 1]]``; ``span_stops``: the exclusive
        chunk index where each span ends, increasing, every document's last chunk
        among them; ``doc_chunk_offsets[ndocs + 1]``: document ``d`` holds chunks
        ``doc_chunk_offsets[d]..doc_chunk_offsets[d + 1] - 1``.

        Returns ``(status, ids uint32, token_offsets int64[ndocs + 1])``;
        STATUS_BAD_ID: ``err`` = (input position, document).
        """
        cdef Py_ssize_t nchunks = chunk_tokens.shape[0] - 1, nd = doc_chunk_offsets.shape[0] - 1
        cdef Py_ssize_t k, d
        check_err(err)
        self._check_chunks(ids, chunk_tokens, doc_chunk_offsets)
        cdef Py_ssize_t nspans = span_stops.shape[0]
        cdef int64_t prev = 0
        for k in range(nspans):
            if span_stops[k] <= prev or span_stops[k] > nchunks:
                raise ValueError(f"span_stops[{k}] = {span_stops[k]} is not increasing within 1..{nchunks}")
            prev = span_stops[k]
        if nchunks > 0 and prev != nchunks:
            raise ValueError(f"the spans end at chunk {prev}, not at the last chunk ({nchunks})")
        k = 0
        for d in range(nd):  # every document end is a span end
            while k < nspans and span_stops[k] < doc_chunk_offsets[d + 1]:
                k += 1
            if doc_chunk_offsets[d + 1] > doc_chunk_offsets[d] and (
                    k == nspans or span_stops[k] != doc_chunk_offsets[d + 1]):
                raise ValueError(f"document {d} ends at chunk {doc_chunk_offsets[d + 1]}, inside a span")
        out = np.empty(max(ids.shape[0], 1), dtype=np.uint32)
        token_offsets = np.zeros(nd + 1, dtype=np.int64)
        cdef uint32_t[::1] ov = out
        cdef int64_t[::1] tv = token_offsets
        cdef Py_ssize_t out_size = 0, bad = -1, bad_doc = -1, c0
        cdef int status = STATUS_OK
        cdef Scratch s
        with nogil:
            k = 0
            c0 = 0
            for d in range(nd):
                while status == STATUS_OK and c0 < doc_chunk_offsets[d + 1]:
                    status = stage2_span(&self.tables, &ids[0], &chunk_tokens[0], c0, span_stops[k],
                                         &ov[0], &out_size, &s, &bad)
                    c0 = span_stops[k]
                    k += 1
                if status != STATUS_OK:
                    bad_doc = d
                    break
                tv[d + 1] = out_size
        if status != STATUS_OK:
            return fail(err, status, bad, bad_doc), None, None
        return STATUS_OK, out[:out_size], token_offsets

    def encode_text_spans(self, const uint8_t[::1] data, const int64_t[::1] ends, const uint32_t[::1] ids,
                          const int64_t[::1] chunk_tokens, const int64_t[::1] doc_chunk_offsets,
                          const int64_t[::1] offsets, const uint8_t[::1] classes, int64_t[::1] err=None,
                          int64_t bos=-1, int64_t eos=-1):
        """Stage 2 of documents ``data[offsets[d]:offsets[d + 1]]`` with their spans found
        inline by the span rule of ``_spans.pxd`` (``classes``: span_class_table(rule), the
        tokenizer's rule "v1" or "liu").

        ``ends``: absolute chunk end offsets (``chunk_bounds_batch``), chunk ``c``
        of document ``d`` (``doc_chunk_offsets``) ending at ``ends[c]``; ``ids`` and
        ``chunk_tokens`` as :meth:`encode_spans`.  Returns ``(status, ids uint32,
        token_offsets int64[ndocs + 1])``; STATUS_INVALID_UTF8: ``err`` = (absolute
        byte offset, document); STATUS_BAD_ID: ``err`` = (input position, document).
        ``bos`` / ``eos`` (>= 0): an id written before / after every document; -1: none.
        """
        cdef Py_ssize_t nchunks = chunk_tokens.shape[0] - 1, nd = doc_chunk_offsets.shape[0] - 1
        cdef Py_ssize_t d, c0, c1
        check_err(err)
        self._check_chunks(ids, chunk_tokens, doc_chunk_offsets)
        if ends.shape[0] != nchunks:
            raise ValueError(f"{ends.shape[0]} chunk ends but {nchunks} chunks in chunk_tokens")
        if offsets.shape[0] != nd + 1:
            raise ValueError(f"offsets has {offsets.shape[0]} entries, doc_chunk_offsets {nd + 1}")
        if classes.shape[0] != 0x110000:
            raise ValueError("classes must be span_class_table(rule) (0x110000 entries)")
        for c0 in range(nchunks):
            if ends[c0] < 0 or ends[c0] > data.shape[0] or (c0 > 0 and ends[c0] < ends[c0 - 1]):
                raise ValueError(f"chunk end {ends[c0]} (index {c0}) is outside data or decreasing")
        for d in range(nd):
            if offsets[d] < 0 or offsets[d] > offsets[d + 1] or offsets[d + 1] > data.shape[0]:
                raise ValueError(f"offsets[{d}:{d + 2}] is not a range of data")
        if bos > 0xFFFFFFFF or eos > 0xFFFFFFFF or bos < -1 or eos < -1:
            raise ValueError(f"bos/eos must be uint32 ids or -1, got {bos}, {eos}")
        out = np.empty(max(ids.shape[0] + nd * ((bos >= 0) + (eos >= 0)), 1), dtype=np.uint32)
        token_offsets = np.zeros(nd + 1, dtype=np.int64)
        cdef uint32_t[::1] ov = out
        cdef int64_t[::1] tv = token_offsets
        cdef Py_ssize_t out_size = 0, bad = -1, bad_doc = -1
        cdef int status = STATUS_OK
        cdef Scratch s
        cdef const uint8_t* p = &data[0] if data.shape[0] > 0 else NULL
        with nogil:
            for d in range(nd):
                if bos >= 0:
                    ov[out_size] = <uint32_t>bos
                    out_size += 1
                c0 = doc_chunk_offsets[d]
                while c0 < doc_chunk_offsets[d + 1]:
                    c1 = span_end(p, &ends[0], c0, doc_chunk_offsets[d + 1],
                                  offsets[d] if c0 == doc_chunk_offsets[d] else ends[c0 - 1], &classes[0])
                    if c1 < 0:
                        status = STATUS_INVALID_UTF8
                        bad = -c1 - 1
                        break
                    status = stage2_span(&self.tables, &ids[0], &chunk_tokens[0], c0, c1, &ov[0],
                                         &out_size, &s, &bad)
                    if status != STATUS_OK:
                        break
                    c0 = c1
                if status != STATUS_OK:
                    bad_doc = d
                    break
                if eos >= 0:
                    ov[out_size] = <uint32_t>eos
                    out_size += 1
                tv[d + 1] = out_size
        if status != STATUS_OK:
            return fail(err, status, bad, bad_doc), None, None
        return STATUS_OK, out[:out_size], token_offsets

    cdef int _check_chunks(self, const uint32_t[::1] ids, const int64_t[::1] chunk_tokens,
                           const int64_t[::1] doc_chunk_offsets) except -1:
        cdef Py_ssize_t nchunks = chunk_tokens.shape[0] - 1, nd = doc_chunk_offsets.shape[0] - 1, c, d
        if nchunks < 0 or nd < 0:
            raise ValueError("chunk_tokens and doc_chunk_offsets need at least one entry")
        if chunk_tokens[0] != 0 or chunk_tokens[nchunks] != ids.shape[0]:
            raise ValueError(f"chunk_tokens must run from 0 to the {ids.shape[0]} ids")
        for c in range(nchunks):
            if chunk_tokens[c + 1] <= chunk_tokens[c]:
                raise ValueError(f"chunk {c} has no ids (chunk_tokens must increase)")
        if doc_chunk_offsets[0] != 0 or doc_chunk_offsets[nd] != nchunks:
            raise ValueError(f"doc_chunk_offsets must run from 0 to the {nchunks} chunks")
        for d in range(nd):
            if doc_chunk_offsets[d + 1] < doc_chunk_offsets[d]:
                raise ValueError(f"doc_chunk_offsets must be non-decreasing (document {d})")
        return 0
