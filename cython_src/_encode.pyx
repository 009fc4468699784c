# distutils: language = c++
"""BPE encoding kernels (the fast path behind ``Tokenizer``; decoding is ``_decode``).

Encoding one chunk (base symbol ids) follows the rank-ordered rule of
``_reference.encode_chunk_reference``: take the adjacent pair of lowest merge
rank, replace all its non-overlapping occurrences left to right by the merge's
result, repeat until no adjacent pair has a rank.

* Pair table: pairs of two ids below ``dense`` (the base symbols and the first
  merges' results, DENSE_IDS in all when the base is smaller) in a dense
  ``dense x dense`` rank array, every other pair in an open-addressing hash table, behind a one-bit-per-pair
  filter (16 bits per pair, at most 256 KiB) that answers most "no merge" lookups without touching the
  table.  A slot packs ``left << 42 | right << 21 | rank`` into 8 bytes while
  every id and rank fits 21 bits (16-byte slots otherwise).  What the tables
  hold for a merge (its *key*) is its result id when the results rise with
  rank, as in every trained or tiktoken vocabulary: the least key is then the
  least rank and the merge writes the key itself, no ``results`` load (a cold
  line on most merges of a fresh encode).  Otherwise the key is the rank and
  ``results`` gives the id.
* Short chunks (<= SHORT_CHUNK symbols): repeated min-scan over an array of
  pair ranks, compacting in place and looking up only the pairs a merge made.
  Long chunks (CJK runs, long digit or punctuation runs): a linked list and a
  min-heap of ``rank << 32 | position``, each rank's occurrences taken
  together in position order.
* Chunk cache: chunk bytes -> ids, open addressing with slot pairs on one cache
  line; a chunk of up to 15 bytes is its slot's key and up to 4 ids its value,
  so most chunks are found and written without a branch of their own (longer
  keys and values live in two arenas).  Bounded by ``cache_bytes`` (slot table
  half of it, each arena a quarter); the slot table starts at INITIAL_SLOTS, is
  sized once per call for its input and doubles at half load.  Each entry keeps
  a 5-bit hit count (bumped by every hit once the cache holds a quarter of a
  bound, cache_pressed; saturating); when the cache is full a
  *sweep* keeps the most-hit entries (at most half of each bound, their counts
  halved: frequency with ageing) and drops the rest, so the Zipfian few percent
  of chunks that carry most occurrences stay cached on a corpus of any size
  (cache_sweep).  Behind the caches, one read-only table of *seeds*, the
  vocabulary's one-token chunks (Encoder.seed_caches: each one the entry its
  miss would make; a one-bit-per-hash-value filter in front), answers a miss
  before any merge, so a chunk that is one token is never merged.  One cache per *slot*: a caller that encodes from several
  threads uses one slot per thread (a slot in use by another thread is refused
  with RuntimeError rather than corrupted).

Every encode entry releases the GIL for the whole batch.  Invalid data is reported by the status convention of ``_status.pxd``: each
entry returns ``(status, result...)`` and writes where into ``err``.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free, malloc, realloc
from libc.string cimport memcmp, memcpy, memmove, memset
from libcpp.vector cimport vector
from cython.view cimport array as cvarray

from _hash cimport P1, P2, P3, fold_mul, hash_bytes, prefetch
from _heap cimport heap_build, heap_pop, heap_push
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
    SHORT_CHUNK = 32            # symbols; longer chunks take the heap path
    # Tables.char_integrity: the trainer's rules (_merge.pyx CHAR_PIECES / CHAR_PREFIX)
    CHAR_PIECES = 1             # any two pieces of one character may merge
    CHAR_PREFIX = 2             # only a character's prefix and its next piece (SCRIPT's rule)

cdef extern from *:
    """
    /* Constants the C compiler sees as such (a module-level cdef variable is a static
       it must load again after every store through a pointer of its type). */
    #define UBE_NO_RANK 0xFFFFFFFFu
    #define UBE_EMPTY_KEY 0xFFFFFFFFFFFFFFFFull
    #define UBE_PACK_MASK ((1ull << 21) - 1)
    """
    const uint32_t NO_RANK "UBE_NO_RANK"
    const uint64_t EMPTY_KEY "UBE_EMPTY_KEY"
    const uint64_t PACK_MASK "UBE_PACK_MASK"    # (1 << PACK_BITS) - 1


# --------------------------------------------------------------------------- big tables

cdef extern from *:
    """
    #include <stdlib.h>
    #include <string.h>
    #if defined(__linux__)
    #include <sys/mman.h>
    #endif
    /* Advise a 2 MiB aligned table of 2 MiB or more as huge pages (Linux; elsewhere
       nothing): a probe then rarely misses the TLB (with 4 KiB pages nearly every probe
       of a 16 MiB table did, and the prefetch of a slot stalled on it).  Pages already
       touched stay as they are. */
    static void ube_advise_huge(void* table, size_t bytes) {
    #if defined(__linux__) && defined(MADV_HUGEPAGE)
        if (bytes >= ((size_t)2 << 20))
            madvise(table, bytes, MADV_HUGEPAGE);
    #else
        (void)table; (void)bytes;
    #endif
    }
    /* Zeroed memory for a table that is probed at random (chunk cache slots, pair
       table), aligned to a cache line (calloc's 16 bytes left half of the 32-byte
       cache slots across two lines, a probe loading both).  From 2 MiB up it is
       2 MiB aligned and advised as huge pages (ube_advise_huge). */
    static void* ube_big_alloc(size_t bytes) {
        void* p = NULL;
        const size_t huge = (size_t)2 << 20;
        size_t align = bytes < huge ? 64 : huge;
        bytes = bytes ? (bytes + align - 1) & ~(align - 1) : 64;
        if (posix_memalign(&p, align, bytes) != 0)
            return NULL;
        if (align == huge)
            ube_advise_huge(p, bytes);
        return p;
    }
    static void* ube_table_alloc(size_t bytes) {
        void* p = ube_big_alloc(bytes);
        if (p != NULL)
            memset(p, 0, bytes ? bytes : 64);
        return p;
    }
    /* A slot table in an anonymous mapping of its own, grown with mremap (Linux): the
       pages already written move with it (no copy, and no fresh memory for the old
       part), and only the new part is fresh (zero) memory; the mapping is only as large
       as the table (address space reserved for the whole bound would count against
       RLIMIT_AS).  Tables of 2 MiB and more are advised as huge pages
       (ube_advise_huge; mmap and mremap return page-aligned tables, and the kernel
       maps the 2 MiB aligned parts of them with huge pages).  NULL where mremap is missing or fails (the table is then allocated anew
       at each size); -DUBE_NO_TABLE_REMAP builds that way (CI tests it).  Allocated
       anew, each doubling was fresh memory of the whole new size: the kernel zeroes a
       fresh page, and on a VM that returns freed pages to its host that cost ~9-12% of
       a worker's CPU at 50-100 MB. */
    #if defined(__linux__) && defined(MREMAP_MAYMOVE) && !defined(UBE_NO_TABLE_REMAP)
    #define UBE_TABLE_REMAP 1
    #else
    #define UBE_TABLE_REMAP 0
    #endif
    static void* ube_table_map(size_t bytes) {
    #if UBE_TABLE_REMAP
        void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        ube_advise_huge(p, bytes);
        return p;
    #else
        (void)bytes;
        return NULL;
    #endif
    }
    static void* ube_table_remap(void* table, size_t bytes, size_t new_bytes) {
    #if UBE_TABLE_REMAP
        void* p = mremap(table, bytes, new_bytes, MREMAP_MAYMOVE);
        if (p == MAP_FAILED)
            return NULL;
        ube_advise_huge(p, new_bytes);
        return p;
    #else
        (void)table; (void)bytes; (void)new_bytes;
        return NULL;
    #endif
    }
    static void ube_table_unmap(void* table, size_t bytes) {
    #if UBE_TABLE_REMAP
        munmap(table, bytes);
    #else
        (void)table; (void)bytes;
    #endif
    }
    """
    void* table_alloc "ube_table_alloc"(size_t bytes) noexcept nogil
    void* table_map "ube_table_map"(size_t bytes) noexcept nogil
    void* table_remap "ube_table_remap"(void* table, size_t bytes, size_t new_bytes) noexcept nogil
    void table_unmap "ube_table_unmap"(void* table, size_t bytes) noexcept nogil


# --------------------------------------------------------------------------- output buffers

cdef extern from *:
    """
    #include <pthread.h>
    /* A call's output ids go to numpy, which frees them through ube_out_release when
       the arrays die.  Buffers of UBE_OUT_MIN bytes and more are then kept (at most
       UBE_OUT_KEEP of them, UBE_OUT_KEPT_MAX bytes in all, process-wide: any encoder,
       any thread) for the next call's output, so a warm call writes into pages it has
       written before.  From malloc, an output of ~2 MiB was a fresh mapping on most
       calls: the allocator's mmap threshold follows the sizes freed, and a call
       reserves a little more than the last output it freed, so every page was faulted
       and zeroed again (a warm 2 MB English batch ran at ~500 MB/s against ~650 with
       its pages kept; which of the two a process got depended on its heap layout).
       Each buffer has a 64-byte header holding its capacity.  A kept buffer is handed
       out for a request of an eighth of its capacity or more (a call reserves a guess,
       text size / 4 ids, which text can pass fourfold: a byte-level stretch is an id a
       byte, two in utf16, and the buffer grows by halves past it), and take_ids
       shrinks a result's buffer to its ids when it is more than twice their size. */
    #define UBE_OUT_HEADER 64
    #define UBE_OUT_MIN ((size_t)256 << 10)
    #define UBE_OUT_KEEP 4
    #define UBE_OUT_KEPT_MAX ((size_t)64 << 20)
    static pthread_mutex_t ube_out_lock = PTHREAD_MUTEX_INITIALIZER;
    static char* ube_out_kept[UBE_OUT_KEEP];   /* headers; NULL: an empty place */
    static size_t ube_out_kept_bytes = 0;
    static size_t ube_out_cap(const void* data) {
        return *(const size_t*)((const char*)data - UBE_OUT_HEADER);
    }
    static void* ube_out_realloc(void* data, size_t bytes) {
        char* base = data ? (char*)data - UBE_OUT_HEADER : NULL;
        base = (char*)realloc(base, bytes + UBE_OUT_HEADER);
        if (base == NULL)
            return NULL;
        *(size_t*)base = bytes;
        return base + UBE_OUT_HEADER;
    }
    /* Room for ``bytes``: the smallest kept buffer of ``bytes`` to ``8 * bytes``, else
       a new one. */
    static void* ube_out_alloc(size_t bytes) {
        char* found = NULL;
        int i, best = -1;
        if (bytes >= UBE_OUT_MIN) {
            pthread_mutex_lock(&ube_out_lock);
            for (i = 0; i < UBE_OUT_KEEP; i++) {
                size_t cap = ube_out_kept[i] ? *(size_t*)ube_out_kept[i] : 0;
                if (cap >= bytes && cap / 8 <= bytes
                        && (best < 0 || cap < *(size_t*)ube_out_kept[best]))
                    best = i;
            }
            if (best >= 0) {
                found = ube_out_kept[best];
                ube_out_kept[best] = NULL;
                ube_out_kept_bytes -= *(size_t*)found;
            }
            pthread_mutex_unlock(&ube_out_lock);
        }
        return found ? found + UBE_OUT_HEADER : ube_out_realloc(NULL, bytes);
    }
    /* The kept buffer of least capacity (-1: none); the lock is held. */
    static int ube_out_smallest(void) {
        int i, smallest = -1;
        for (i = 0; i < UBE_OUT_KEEP; i++)
            if (ube_out_kept[i] != NULL && (smallest < 0
                    || *(size_t*)ube_out_kept[i] < *(size_t*)ube_out_kept[smallest]))
                smallest = i;
        return smallest;
    }
    /* Free kept buffer ``i``; the lock is held. */
    static void ube_out_forget(int i) {
        ube_out_kept_bytes -= *(size_t*)ube_out_kept[i];
        free(ube_out_kept[i]);
        ube_out_kept[i] = NULL;
    }
    /* Free an output buffer, or keep it: in an empty place, else in place of the
       smallest kept one when that is smaller, the other kept ones freed smallest
       first while the total would pass UBE_OUT_KEPT_MAX. */
    static void ube_out_release(void* data) {
        char* base;
        size_t cap;
        int i, place = -1;
        if (data == NULL)
            return;
        base = (char*)data - UBE_OUT_HEADER;
        cap = *(size_t*)base;
        if (cap < UBE_OUT_MIN || cap > UBE_OUT_KEPT_MAX) {
            free(base);
            return;
        }
        pthread_mutex_lock(&ube_out_lock);
        for (i = 0; i < UBE_OUT_KEEP && place < 0; i++)
            if (ube_out_kept[i] == NULL)
                place = i;
        if (place < 0) {
            i = ube_out_smallest();
            if (*(size_t*)ube_out_kept[i] < cap) {
                ube_out_forget(i);
                place = i;
            }
        }
        if (place >= 0) {
            while (ube_out_kept_bytes + cap > UBE_OUT_KEPT_MAX)   /* ends: cap <= the bound */
                ube_out_forget(ube_out_smallest());
            ube_out_kept[place] = base;
            ube_out_kept_bytes += cap;
            base = NULL;
        }
        pthread_mutex_unlock(&ube_out_lock);
        free(base);
    }
    /* A fork while another thread holds the lock would leave it held in the child:
       the forking thread takes it first and releases it on both sides. */
    static void ube_out_lock_take(void) { pthread_mutex_lock(&ube_out_lock); }
    static void ube_out_lock_give(void) { pthread_mutex_unlock(&ube_out_lock); }
    static int ube_out_init(void) {
        return pthread_atfork(ube_out_lock_take, ube_out_lock_give, ube_out_lock_give);
    }
    static void ube_out_drop_kept(void) {
        int i;
        pthread_mutex_lock(&ube_out_lock);
        for (i = 0; i < UBE_OUT_KEEP; i++)
            if (ube_out_kept[i] != NULL)
                ube_out_forget(i);
        pthread_mutex_unlock(&ube_out_lock);
    }
    static size_t ube_out_kept_total(void) {
        size_t total;
        pthread_mutex_lock(&ube_out_lock);
        total = ube_out_kept_bytes;
        pthread_mutex_unlock(&ube_out_lock);
        return total;
    }
    """
    void* out_alloc "ube_out_alloc"(size_t bytes) noexcept nogil
    void* out_realloc "ube_out_realloc"(void* data, size_t bytes) noexcept nogil
    void out_release "ube_out_release"(void* data) noexcept nogil
    size_t out_cap "ube_out_cap"(const void* data) noexcept nogil
    size_t out_kept_total "ube_out_kept_total"() noexcept nogil
    int out_init "ube_out_init"() noexcept nogil
    void out_drop_kept "ube_out_drop_kept"() noexcept nogil


if out_init() != 0:
    raise MemoryError("pthread_atfork: no room to register the output buffers' fork handlers")


def output_buffers_kept():
    """Bytes of freed output buffers the encoders keep for their next calls."""
    return out_kept_total()


def drop_output_buffers():
    """Free the output buffers kept for later calls (the memory goes back to the
    allocator; the next large output is allocated anew)."""
    out_drop_kept()


# --------------------------------------------------------------------------- pair table

cdef struct PairSlot:
    uint64_t key                 # packed pair ``left << 32 | right``, or EMPTY_KEY
    uint32_t rank
    uint32_t pad


cdef enum:
    BLOOM_MAX_BITS = 21          # the pair filter: 16 bits per pair, a power of two from 2^12 bits
    BLOOM_MIN_BITS = 12          # (512 bytes) to 2^21 (256 KiB); a pair's bit is pair_hash(key) >> bloom_shift
    PACK_BITS = 21               # packed pair slots: left, right and rank of 21 bits each
    DENSE_IDS = 512              # the dense pair table covers ids below this (1 MiB of ranks): pairs of
                                 # the base symbols and the first merges are most lookups of a fresh encode


cdef struct Tables:
    uint32_t base                # number of base symbols
    uint32_t dense               # side of the dense pair table: max(base, DENSE_IDS) (fewer for few merges)
    const uint32_t* base_ranks   # dense * dense keys (NO_RANK: no merge)
    const PairSlot* pairs        # open addressing over the other pairs (key and rank on one line)
    const uint64_t* packed       # the same table packed ``left << 42 | right << 21 | rank`` when every
                                 # id and rank is below 2^21 (pairs is NULL then): 8 bytes a slot
    uint64_t mask
    const uint64_t* bloom        # one bit per hashed pair of ``pairs``: clear means no merge
    int bloom_shift              # a pair's bit: pair_hash(key) >> bloom_shift (the filter has 2^(64 - shift))
    const uint32_t* results      # result id of each table key (the identity when key_is_id)
    bint key_is_id               # the tables hold each merge's result id, not its rank: the results rise
                                 # with rank (every vocabulary whose merges number their tokens in
                                 # order) and stay below 2 (base + n), so the least id is the least rank
                                 # and a merge needs no ``results`` load (a cold line on nearly every
                                 # merge of a fresh encode)
    int substrate
    const uint32_t* model_ids    # the id encode writes for each internal id (NULL: the same)
    int char_integrity           # 0, CHAR_PIECES or CHAR_PREFIX: merge only where characters stay whole
                                 # (merge_short_ci, merge_long with flags)
    bint check_utf8              # char integrity: also check chunks of UTF-8 symbols only
    const void* seeds            # Encoder.seed_caches: a read-only slot table (Slot) of one-token chunks
    uint64_t seed_mask
    Py_ssize_t num_seeds
    const uint64_t* seed_bits    # one bit per SEED_BITS hash value (seed_bit): set for each seed, so most
                                 # chunks that are no seed skip the table (128 KiB, cache resident)


cdef inline uint64_t pair_hash(uint64_t key) noexcept nogil:
    """Hash of a packed pair ``left << 32 | right``: its low bits pick the home slot,
    its top bits the filter bit.  One folded 128-bit multiply."""
    return fold_mul(key ^ P3, P1)


cdef inline uint32_t rank_of(const Tables* t, uint32_t left, uint32_t right) noexcept nogil:
    """Key of the pair's merge (NO_RANK: no merge): its rank, or its result id when
    ``t.key_is_id`` (ordered as the ranks are).  Base pairs: one load from the dense
    table.  Others: most pairs met while merging have no merge, and the filter
    (256 KiB, cache resident, unlike the table) answers most of those without
    touching the table; the rest probe it, key and rank on one cache line."""
    cdef uint64_t key, h, i, bit, v
    cdef const PairSlot* s
    if left < t.dense and right < t.dense:
        return t.base_ranks[left * t.dense + right]
    key = (<uint64_t>left << 32) | right
    h = pair_hash(key)
    bit = h >> t.bloom_shift
    if not (t.bloom[bit >> 6] >> (bit & 63)) & 1:
        return NO_RANK
    i = h & t.mask
    if t.packed != NULL:
        key = (<uint64_t>left << PACK_BITS) | right
        while True:
            v = t.packed[i]
            if (v >> PACK_BITS) == key:
                return <uint32_t>(v & PACK_MASK)
            if v == EMPTY_KEY:  # its key field (2^43 - 1) is no pair's
                return NO_RANK
            i = (i + 1) & t.mask
    while True:
        s = &t.pairs[i]
        if s.key == key:
            return s.rank
        if s.key == EMPTY_KEY:
            return NO_RANK
        i = (i + 1) & t.mask


# --------------------------------------------------------------------------- merging

cdef extern from *:
    """
    /* The least of a[0:n] (0xFFFFFFFF when n is 0), one element at a time: the empty asm
       keeps the compiler from vectorizing the loop, whose 16-byte loads would read
       ranks the merge has just written one at a time (a store-forwarding stall per
       load: the vector scan was 8-20% slower on chunks of up to 16 symbols). */
    static inline uint32_t ube_min_scan(const uint32_t* a, Py_ssize_t n) {
        uint32_t best = 0xFFFFFFFFu;
        for (Py_ssize_t i = 0; i < n; i++) {
            uint32_t v = a[i];
            best = v < best ? v : best;
            __asm__("" : "+r"(best));
        }
        return best;
    }
    """
    uint32_t min_scan "ube_min_scan"(const uint32_t* a, Py_ssize_t n) noexcept nogil


cdef Py_ssize_t merge_short(const Tables* t, uint32_t* ids, uint32_t* ranks,
                            Py_ssize_t n) noexcept nogil:
    """Merge ``ids[0:n]`` in place by repeated min-scan (min_scan); returns the new length."""
    cdef Py_ssize_t i, j
    cdef uint32_t best, result
    cdef bint merged_prev
    for i in range(n - 1):
        ranks[i] = rank_of(t, ids[i], ids[i + 1])
    while n >= 2:
        best = min_scan(ranks, n - 1)
        if best == NO_RANK:
            break
        result = best if t.key_is_id else t.results[best]
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


cdef inline uint32_t ci_rank(const Tables* t, const uint8_t* flags, uint32_t left, uint32_t right,
                             Py_ssize_t left_start, Py_ssize_t right_start,
                             Py_ssize_t right_end) noexcept nogil:
    """Rank of the tokens ``[left_start, right_start)``, ``[right_start, right_end)``
    at this occurrence: NO_RANK unless the merged token keeps characters whole
    (the right one starts inside a character, so both lie in it, or both are
    whole-character sequences), and under CHAR_PREFIX unless the left one starts
    a character (inside one, only its prefix grows)."""
    if flags[right_start] and not (flags[left_start] and flags[right_end]):
        return NO_RANK
    if t.char_integrity == CHAR_PREFIX and not flags[left_start]:
        return NO_RANK
    return rank_of(t, left, right)


cdef inline uint32_t pair_rank(const Tables* t, const uint8_t* flags, uint32_t left, uint32_t right,
                               Py_ssize_t left_start, Py_ssize_t right_start,
                               Py_ssize_t right_end) noexcept nogil:
    """:func:`rank_of`, or :func:`ci_rank` at this occurrence when ``flags`` (character
    starts) is given."""
    if flags == NULL:
        return rank_of(t, left, right)
    return ci_rank(t, flags, left, right, left_start, right_start, right_end)


cdef Py_ssize_t merge_long(const Tables* t, uint32_t* ids, const uint8_t* flags, Py_ssize_t n,
                           int32_t_vec& nxt, int32_t_vec& prv, vector[uint32_t]& node_rank,
                           vector[uint64_t]& heap, vector[uint32_t]& batch) noexcept nogil:
    """Merge ``ids[0:n]`` with a linked list and a min-heap; returns the new length.
    ``flags`` (NULL: none): character starts, for character integrity (a node's index
    is its token's first symbol, the next node's, or ``n``, its end)."""
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
        r = pair_rank(t, flags, ids[i], ids[i + 1], i, i + 1, i + 2)
        node_rank[i] = r
        if r != NO_RANK:
            heap.push_back((<uint64_t>r << 32) | <uint64_t>i)
    heap_build(heap)
    while heap.size() > 0:
        r = <uint32_t>(heap[0] >> 32)
        batch.clear()
        while heap.size() > 0 and <uint32_t>(heap[0] >> 32) == r:
            top = heap_pop(heap)
            batch.push_back(<uint32_t>(top & 0xFFFFFFFFu))
        result = r if t.key_is_id else t.results[r]
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
                nr = pair_rank(t, flags, result, ids[nq], p, nq, n if nxt[nq] == -1 else nxt[nq])
                node_rank[p] = nr
                if nr != NO_RANK:
                    heap_push(heap, (<uint64_t>nr << 32) | <uint64_t>p)
            else:
                node_rank[p] = NO_RANK
            pp = prv[p]
            if pp != -1:
                nr = pair_rank(t, flags, ids[pp], result, pp, p, n if nq == -1 else nq)
                node_rank[pp] = nr
                if nr != NO_RANK:
                    heap_push(heap, (<uint64_t>nr << 32) | <uint64_t>pp)
    count = 0
    p = 0
    while p != -1:
        ids[count] = ids[p]
        count += 1
        p = nxt[p]
    return count


# --------------------------------------------------------------------------- chunk cache

cdef extern from *:
    """
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    #define UBE_LITTLE_ENDIAN 1
    #else
    #define UBE_LITTLE_ENDIAN 0
    #endif
    """
    const bint LITTLE_ENDIAN "UBE_LITTLE_ENDIAN"

cdef extern from *:
    """
    /* The bytes of a chunk of m <= 16 bytes within its two little-endian words
       (a table instead of a branch on the length, which is different every chunk). */
    static const unsigned long long ube_lo_mask[17] = {
        0ULL, 0xFFULL, 0xFFFFULL, 0xFFFFFFULL, 0xFFFFFFFFULL, 0xFFFFFFFFFFULL, 0xFFFFFFFFFFFFULL,
        0xFFFFFFFFFFFFFFULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL};
    static const unsigned long long ube_hi_mask[17] = {
        0ULL, 0ULL, 0ULL, 0ULL, 0ULL, 0ULL, 0ULL, 0ULL, 0ULL, 0xFFULL, 0xFFFFULL, 0xFFFFFFULL,
        0xFFFFFFFFULL, 0xFFFFFFFFFFULL, 0xFFFFFFFFFFFFULL, 0xFFFFFFFFFFFFFFULL, ~0ULL};
    """
    const uint64_t* LO_MASK "ube_lo_mask"
    const uint64_t* HI_MASK "ube_hi_mask"

cdef extern from *:
    """
    #include <stdlib.h>
    #include <stdint.h>
    /* Order slot pointers by their spilled value's arena offset (the top half of the
       slot's first value word, its first 8 bytes after the two key words). */
    static int ube_by_arena_offset(const void* a, const void* b) {
        uint64_t x = (*(const uint64_t* const*)a)[2] >> 32, y = (*(const uint64_t* const*)b)[2] >> 32;
        return (x > y) - (x < y);
    }
    static void ube_sort_by_arena_offset(void** slots, size_t n) {
        qsort(slots, n, sizeof(void*), ube_by_arena_offset);
    }
    """
    void sort_by_arena_offset "ube_sort_by_arena_offset"(void** slots, size_t n) noexcept nogil


cdef inline void copy_ids(uint32_t* dst, const uint32_t* src, Py_ssize_t n) noexcept nogil:
    """Copy ``n`` ids eight at a time (fixed 32-byte moves, inlined, where a memcpy of a
    few ids is a library call): both sides must have room for up to 7 ids past ``n``
    (the output reserves BLOCK more, the value arena and the work buffers 8)."""
    cdef Py_ssize_t i = 0
    while i < n:
        memcpy(dst + i, src + i, 8 * sizeof(uint32_t))
        i += 8


cdef enum:
    INLINE_KEY = 15             # chunks up to this many bytes are the slot's key (its 16th byte: the length)
    INLINE_IDS = 4              # ... and up to this many ids (the first below 2^24) its value
    INITIAL_SLOTS = 1 << 12     # a cache's first slot table (128 KiB); it doubles as it fills
    MIN_SLOTS = 16              # the smallest slot table (512 bytes), whatever cache_bytes says
    PRESIZE_BYTES = 64          # cache_presize: one new chunk per this many bytes of a call (mixed text: ~100)
    BLOCK = 128                 # chunks hashed (and their slots prefetched) ahead of the lookups: the
                                # first lookup of a block comes 128 hashes after its prefetch, time for
                                # a line from memory (32 left the second pass waiting on the table)


cdef extern from *:
    """
    /* The cache's bit layout as constants the C compiler sees as such (see UBE_NO_RANK). */
    #define UBE_PAIR (~1ull)
    #define UBE_LONG_KEY (0xFFull << 56)
    #define UBE_HASH56 ((1ull << 56) - 1)
    #define UBE_ID24 ((1ull << 24) - 1)
    #define UBE_COUNT_MASK 7ull
    #define UBE_FREQ_BITS 0xF8ull
    #define UBE_FREQ_ONE 8ull
    """
    const uint64_t PAIR "UBE_PAIR"            # a chunk's probe starts at the even slot of its hash: the two
                                              # slots of a pair share one cache line (one prefetch, and a hit
                                              # displaced by one collision reads no second line)
    const uint64_t LONG_KEY "UBE_LONG_KEY"    # k1's top byte for a chunk longer than INLINE_KEY
    const uint64_t HASH56 "UBE_HASH56"        # ... whose other 56 bits are its hash's low bits
    const uint64_t ID24 "UBE_ID24"
    const uint64_t COUNT_MASK "UBE_COUNT_MASK"  # v0's low 3 bits: inline id count (0: spilled)
    const uint64_t FREQ_BITS "UBE_FREQ_BITS"    # v0's bits 3..7: the entry's hit count (0..31)
    const uint64_t FREQ_ONE "UBE_FREQ_ONE"
DEFAULT_CACHE_BYTES = 128 << 20                 # each slot's chunk cache: 1M entries (64 cores: 8 GiB)
MAX_CACHE_BYTES = 16 << 30                      # long keys' arena offsets fit 32 bits


cdef struct Slot:
    # 32 bytes, two to a cache line: the key and the ids of a chunk of up to 15 bytes and
    # 4 tokens on one line, read without a branch on either count
    uint64_t k0                 # bytes 0..7 of the chunk, zero padded
    uint64_t k1                 # short: bytes 8..14, zero padded, and the length in the top byte;
                                # long: LONG_KEY | the hash's low 56 bits; 0: an empty slot
    uint64_t v0                 # inline ids: count (1..4) | hits << 3 | id0 << 8 | id1 << 32;
                                # spilled (count 0: long keys, more ids, id0 >= 2^24): offset of
                                # [count, ids...] in ``vals`` << 32 | hits << 3 (hits: 5 bits,
                                # saturating, halved by each sweep)
    uint64_t v1                 # inline: id2 | id3 << 32; a long key: its offset in ``keys`` | length << 32


cdef struct ChunkCache:
    Slot* slots
    uint64_t mask
    uint64_t max_slots          # the table doubles (at half load) up to this many slots
    size_t map_len              # not 0: ``slots`` is a mapping of this many bytes (table_map), grown
                                # with table_remap and in place; 0: a table_alloc, allocated anew
    Py_ssize_t count
    Py_ssize_t max_entries      # 0: nothing is cached
    int64_t evicted             # entries dropped by sweeps
    uint8_t* keys               # keys longer than INLINE_KEY
    Py_ssize_t keys_used
    Py_ssize_t keys_cap
    uint32_t* vals              # spilled values: a count, then the ids
    Py_ssize_t vals_used
    Py_ssize_t vals_cap
    int64_t hits
    int64_t misses
    int64_t sweeps              # times the cache was full and swept
    bint busy
    bint new_chunks             # the last block encode_span looked up cached new chunks (or the cache is
                                # new): its next block prefetches seed slots too (128 bytes in all: two
                                # cache lines, see Encoder.__cinit__)


cdef struct Key:
    uint64_t k0                 # the slot key (Slot.k0, Slot.k1) of the chunk
    uint64_t k1
    uint64_t h                  # its hash (odd)
    Py_ssize_t start
    Py_ssize_t n


cdef inline void key_of(const uint8_t* p, Py_ssize_t n, const uint8_t* limit, Key* k) noexcept nogil:
    """Slot key and hash of chunk ``p[0:n]`` (``limit``: end of readable memory).  The
    words are little-endian on every platform, so the length byte never meets a
    chunk byte.  Worked out in registers, each field of ``k`` written once (built in
    ``k`` itself, the two words went through the stack into a vector register and the
    hash read them back from ``k``: a longer chain for every chunk of encode_span)."""
    cdef Py_ssize_t m = n if n < 16 else 16, i
    cdef uint64_t k0 = 0, k1 = 0, h
    if LITTLE_ENDIAN and p + 16 <= limit:
        memcpy(&k0, p, 8)
        memcpy(&k1, p + 8, 8)
        k0 &= LO_MASK[m]
        k1 &= HI_MASK[m]
    else:
        for i in range(m):
            if i < 8:
                k0 |= <uint64_t>p[i] << (8 * i)
            else:
                k1 |= <uint64_t>p[i] << (8 * (i - 8))
    if n <= INLINE_KEY:
        k1 |= <uint64_t>n << 56
        h = inline_hash(k0, k1)
    else:
        h = hash_bytes(p, n) | 1
        k1 = LONG_KEY | (h & HASH56)
    k.k0 = k0
    k.k1 = k1
    k.h = h
    k.n = n


cdef inline uint64_t inline_hash(uint64_t k0, uint64_t k1) noexcept nogil:
    """Hash of a short chunk's slot key (odd): one folded 128-bit multiply of its two
    words, each xored with a constant first so that neither factor is ever zero
    (P2's top byte 0xC2 is no length byte; k0 would have to be P1's bytes, which
    start with a UTF-8 continuation byte, no chunk's first byte)."""
    return fold_mul(k0 ^ P1, k1 ^ P2) | 1


def chunk_key_hash(const uint8_t[::1] chunk):
    """The chunk cache's hash of ``chunk`` (its home slot pair in a table of ``2^k``
    slots: ``hash & (2^k - 1) & ~1``), for tests that build colliding chunks."""
    cdef Key k
    if chunk.shape[0] == 0:
        return 0
    key_of(&chunk[0], chunk.shape[0], &chunk[0] + chunk.shape[0], &k)
    return k.h


cdef inline Slot* cache_find(ChunkCache* c, const uint8_t* p, const Key* k) noexcept nogil:
    """The slot of chunk ``p[0:k.n]`` (``k.n > 0``), or the empty slot where it would go
    (``k1 == 0``)."""
    cdef uint64_t i = k.h & c.mask & PAIR
    cdef Slot* s
    while True:
        s = &c.slots[i]
        if s.k1 == 0:
            return s
        if s.k1 == k.k1 and s.k0 == k.k0:
            if k.n <= INLINE_KEY:
                return s
            if (s.v1 >> 32) == <uint64_t>k.n and memcmp(c.keys + (s.v1 & 0xFFFFFFFFu), p, k.n) == 0:
                return s
        i = (i + 1) & c.mask


cdef inline void cache_clear(ChunkCache* c) noexcept nogil:
    """Drop every entry (a sweep's fallback when it finds no memory)."""
    memset(c.slots, 0, (c.mask + 1) * sizeof(Slot))
    c.evicted += c.count
    c.count = 0
    c.keys_used = 0
    c.vals_used = 0
    c.sweeps += 1


cdef inline uint64_t slot_hash(const Slot* s) noexcept nogil:
    """The hash (its low bits at least) that placed an occupied slot."""
    if (s.k1 >> 56) != 0xFF:
        return inline_hash(s.k0, s.k1)
    return s.k1 & HASH56   # a long key keeps the low bits of the hash it was placed by


cdef inline uint64_t first_empty_slot(const Slot* t, uint64_t size) noexcept nogil:
    """The first empty slot of a table of ``size`` slots (``size`` when it is full): where
    the in-place walks of cache_sweep and cache_grow_in_place start, since no probe
    chain crosses an empty slot."""
    cdef uint64_t e = 0
    while e < size and t[e].k1 != 0:
        e += 1
    return e


cdef void cache_sweep(ChunkCache* c) noexcept nogil:
    """Make room in a full cache by keeping its most-hit entries: the entries whose hit
    count is at least the lowest threshold (1..31) that keeps at most half of each
    bound (entries, long-key bytes, spilled ids), their counts halved (ageing: an
    entry stays only while it keeps being hit), everything else dropped.  A chunk
    seen once is never kept; one hit since it was cached or last swept is enough
    when the frequent ones fit.  The survivors are re-placed in the same slot table
    (no new memory, whose pages the kernel would zero); their
    spilled ids and long keys slide down in place (taken in arena order: both arenas
    are appended to in insertion order, which sweeps keep), so the arenas' pages stay
    mapped; out of memory, the cache is cleared instead.  Costs one pass over the
    table per sweep, and a sweep frees at least half of the bound."""
    cdef Py_ssize_t cnt[32]
    cdef Py_ssize_t key_b[32]
    cdef Py_ssize_t val_n[32]
    cdef uint64_t i, j, e, size = c.mask + 1
    cdef Slot* old = c.slots
    cdef Slot* s
    cdef Slot* d
    cdef Slot moved
    cdef Slot** spilled
    cdef Py_ssize_t nspilled = 0, k
    cdef int f, t = 32
    cdef Py_ssize_t keep_n = 0, keep_k = 0, keep_v = 0, m, n, keys_used = 0, vals_used = 0
    memset(cnt, 0, sizeof(cnt))
    memset(key_b, 0, sizeof(key_b))
    memset(val_n, 0, sizeof(val_n))
    for i in range(size):
        s = &old[i]
        if s.k1 == 0:
            continue
        f = <int>((s.v0 & FREQ_BITS) >> 3)
        cnt[f] += 1
        if (s.v0 & COUNT_MASK) == 0:
            val_n[f] += c.vals[s.v0 >> 32] + 1
            if (s.k1 >> 56) == 0xFF:
                key_b[f] += <Py_ssize_t>(s.v1 >> 32)
    while t > 1 and (keep_n + cnt[t - 1] <= c.max_entries // 2 and keep_k + key_b[t - 1] <= c.keys_cap // 2
                     and keep_v + val_n[t - 1] <= c.vals_cap // 2):
        t -= 1
        keep_n += cnt[t]
        keep_k += key_b[t]
        keep_v += val_n[t]
    if keep_n == 0:
        cache_clear(c)
        return
    spilled = <Slot**>malloc((keep_n if keep_n > 0 else 1) * sizeof(Slot*))
    if spilled == NULL:
        cache_clear(c)
        return
    # In place: from a slot that was empty before the sweep (the table is at most half
    # full), so no probe chain crosses it, walk the table once; each entry is taken out
    # and, if kept, put back at the first empty slot from its home.  That slot is at or
    # before the one it came from, in its own cluster, and what is put back never moves
    # again, so every entry is found from its home when the walk ends.  (A fresh table
    # per sweep was new memory: the kernel zeroed its pages at every sweep.)
    e = first_empty_slot(old, size)
    if e == size:              # never: inserts keep the table at most half full
        free(spilled)
        cache_clear(c)
        return
    for i in range(1, size + 1):
        s = &old[(e + i) & c.mask]
        if s.k1 == 0:
            continue
        moved = s[0]
        s.k1 = 0
        f = <int>((moved.v0 & FREQ_BITS) >> 3)
        if f < t:
            continue
        j = slot_hash(&moved) & c.mask & PAIR
        while old[j].k1 != 0:
            j = (j + 1) & c.mask
        d = &old[j]
        d[0] = moved
        d.v0 = (moved.v0 & ~FREQ_BITS) | (<uint64_t>(f >> 1) << 3)
        if (moved.v0 & COUNT_MASK) == 0:
            spilled[nspilled] = d
            nspilled += 1
    sort_by_arena_offset(<void**>spilled, nspilled)
    for k in range(nspilled):
        d = spilled[k]
        m = c.vals[d.v0 >> 32] + 1
        memmove(c.vals + vals_used, c.vals + (d.v0 >> 32), m * sizeof(uint32_t))  # down: never past
        d.v0 = (<uint64_t>vals_used << 32) | (d.v0 & FREQ_BITS)                    # what is still to move
        vals_used += m
        if (d.k1 >> 56) == 0xFF:
            n = <Py_ssize_t>(d.v1 >> 32)
            memmove(c.keys + keys_used, c.keys + (d.v1 & 0xFFFFFFFFu), n)
            d.v1 = (<uint64_t>n << 32) | <uint64_t>keys_used
            keys_used += n
    free(spilled)
    c.keys_used = keys_used
    c.vals_used = vals_used
    c.evicted += c.count - keep_n
    c.count = keep_n
    c.sweeps += 1


cdef void cache_free_slots(ChunkCache* c) noexcept nogil:
    """Give back the slot table, however it was allocated."""
    if c.map_len:
        table_unmap(c.slots, c.map_len)
    else:
        free(c.slots)
    c.slots = NULL
    c.map_len = 0


cdef bint cache_grow(ChunkCache* c, uint64_t size) noexcept nogil:
    """Grow the slot table to ``size`` slots (a power of two, larger than now), moving
    every entry (keys and ids stay where they are in their arenas); False when out of
    memory (the table stays as it was).  The table starts small and grows with the
    chunks a corpus actually has, so a small working set stays in a few cache lines
    and pages instead of being spread over the whole bounded table.  In a mapping
    of its own (``map_len``) it is remapped larger and grows in place
    (cache_grow_in_place), else into a new table."""
    cdef uint64_t i, j
    cdef Slot* old = c.slots
    cdef Slot* grown
    cdef Slot* s
    if c.map_len:
        if size * sizeof(Slot) > c.map_len:   # (larger already when an earlier growth found no memory)
            grown = <Slot*>table_remap(<void*>c.slots, c.map_len, size * sizeof(Slot))
            if grown == NULL:
                return False
            c.slots = grown
            c.map_len = size * sizeof(Slot)
        return cache_grow_in_place(c, size)
    grown = <Slot*>table_alloc(size * sizeof(Slot))
    if grown == NULL:
        return False
    for i in range(c.mask + 1):
        s = &old[i]
        if s.k1 == 0:
            continue
        j = slot_hash(s) & (size - 1) & PAIR
        while grown[j].k1 != 0:
            j = (j + 1) & (size - 1)
        grown[j] = s[0]
    free(old)
    c.slots = grown
    c.mask = size - 1
    return True


cdef bint cache_grow_in_place(ChunkCache* c, uint64_t size) noexcept nogil:
    """cache_grow where the table's mapping already holds ``size`` slots and the slots
    after the table are zero (never written): only the new part of the table is fresh
    memory, and the old part is never freed and touched again as new pages.

    An entry's new home is its old home (the "low" entries) or its old home plus a
    multiple of the old size (in the new part).  The table is walked from a slot
    that is empty (at most half load: one exists, and no probe chain crosses it),
    one cluster (run of occupied slots) at a time: the cluster is taken out whole,
    then its entries are put back in their old order at the first empty slot from
    their new home.  A low entry lands within its own cluster's slots (a subset of
    a cluster's entries, put back in order, each lands at or before where it was)
    or, from a cluster that reached the old end, in the new part; an entry of the
    new part stays there.  So every probe chain crosses only slots that hold
    entries already put back, which never move again, and lookups find every entry
    from its home.  A probe that would wrap past the new end (into old slots not
    yet walked) is deferred and finished after the walk, when every slot is final.
    Costs one pass over the old table and two small buffers (untouched pages cost
    nothing: only the longest cluster and the deferred entries are written)."""
    cdef uint64_t old_size = c.mask + 1, new_mask = size - 1, e, i, p, j
    cdef Slot* t = c.slots
    cdef Py_ssize_t cap = c.count + 1, nbuf, ndef = 0, k
    cdef Slot* buf = <Slot*>malloc(cap * sizeof(Slot))
    cdef Slot* deferred = <Slot*>malloc(cap * sizeof(Slot))
    if buf == NULL or deferred == NULL:
        free(buf)
        free(deferred)
        return False
    e = first_empty_slot(t, old_size)
    if e == old_size:          # never: inserts keep the table at most half full
        free(buf)
        free(deferred)
        return False
    i = 1
    while i <= old_size:
        p = (e + i) & c.mask
        if t[p].k1 == 0:
            i += 1
            continue
        nbuf = 0
        while t[p].k1 != 0:    # the cluster ends before e (empty) at the latest
            buf[nbuf] = t[p]
            nbuf += 1
            t[p].k1 = 0
            i += 1
            p = (e + i) & c.mask
        for k in range(nbuf):
            j = slot_hash(&buf[k]) & new_mask & PAIR
            while j < size and t[j].k1 != 0:
                j += 1
            if j == size:
                deferred[ndef] = buf[k]
                ndef += 1
            else:
                t[j] = buf[k]
    for k in range(ndef):
        j = slot_hash(&deferred[k]) & new_mask & PAIR
        while t[j].k1 != 0:
            j = (j + 1) & new_mask
        t[j] = deferred[k]
    free(buf)
    free(deferred)
    c.mask = new_mask
    return True


cdef void cache_presize(ChunkCache* c, Py_ssize_t nbytes) noexcept nogil:
    """Grow the slot table at once to what a call of ``nbytes`` of text is likely to
    fill (one new chunk per PRESIZE_BYTES, at most half load, within max_slots)
    instead of doubling it over and over while the call runs: each doubling moves
    every entry to a random new slot.  Out of memory: the table grows as it fills."""
    cdef uint64_t size = c.mask + 1, want = 2 * <uint64_t>(nbytes // PRESIZE_BYTES)
    while size < want and size < c.max_slots:
        size *= 2
    if size > c.mask + 1:
        cache_grow(c, size)


cdef inline void cache_insert(ChunkCache* c, Slot* s, const uint8_t* p, const Key* k,
                              const uint32_t* ids, Py_ssize_t m) noexcept nogil:
    """Store chunk -> ids ``ids[0:m]`` (``m >= 1``) at ``s`` (from cache_find); sweeps the
    cache first when full (cache_sweep), doubles the slot table at half load."""
    cdef Py_ssize_t n = k.n
    cdef Py_ssize_t long_key = n if n > INLINE_KEY else 0
    cdef bint spill = long_key or m > INLINE_IDS or ids[0] > ID24
    cdef Py_ssize_t vals = m + 1 if spill else 0
    if c.max_entries == 0 or long_key > c.keys_cap or vals > c.vals_cap:
        return  # no cache, or larger than the whole cache: not cached
    if c.count >= c.max_entries or c.keys_used + long_key > c.keys_cap or c.vals_used + vals > c.vals_cap:
        cache_sweep(c)
        if c.keys_used + long_key > c.keys_cap or c.vals_used + vals > c.vals_cap:
            cache_clear(c)  # the survivors leave no room for this large entry
        s = cache_find(c, p, k)
    if 2 * <uint64_t>(c.count + 1) > c.mask + 1 and c.mask + 1 < c.max_slots:
        if not cache_grow(c, 2 * (c.mask + 1)):
            cache_clear(c)  # no memory for a larger table: start this one again
        s = cache_find(c, p, k)
    s.k0 = k.k0
    s.k1 = k.k1
    if spill:
        s.v0 = <uint64_t>c.vals_used << 32
        s.v1 = 0
        c.vals[c.vals_used] = <uint32_t>m
        copy_ids(c.vals + c.vals_used + 1, ids, m)
        c.vals_used += m + 1
        if long_key:
            s.v1 = (<uint64_t>n << 32) | <uint64_t>c.keys_used
            memcpy(c.keys + c.keys_used, p, n)
            c.keys_used += n
    else:
        s.v0 = <uint64_t>m | (<uint64_t>ids[0] << 8) | ((<uint64_t>ids[1] if m > 1 else 0) << 32)
        s.v1 = (<uint64_t>ids[2] if m > 2 else 0) | ((<uint64_t>ids[3] if m > 3 else 0) << 32)
    c.count += 1


# --------------------------------------------------------------------------- per-call work

cdef struct Work:
    uint16_t* symbols      # routed chunk (capacity 2 * chunk bytes)
    uint32_t* ids          # ids being merged
    uint32_t* ranks        # short path: pair ranks
    Py_ssize_t cap         # capacity of the three buffers (symbols)
    uint32_t* out          # the ids of the call (grown by realloc, handed to numpy)
    Py_ssize_t out_size
    Py_ssize_t out_cap
    int64_t* chunk_tokens  # optional: out_size before each chunk (encode_chunks(chunk_tokens=))
    Py_ssize_t chunk_n
    uint8_t* flags         # char integrity: character-start flags (chunk symbols + 1)
    int32_t* starts        # char integrity, short path: start of each token (chunk symbols + 1)
    Py_ssize_t ci_cap      # capacity of flags and starts


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


cdef inline int out_reserve(Work* w, Py_ssize_t extra) noexcept nogil:
    """Room for ``extra`` more output ids (grows by half); 0 on success, -1 out of memory."""
    cdef Py_ssize_t need = w.out_size + extra
    cdef uint32_t* grown
    if need <= w.out_cap:
        return 0
    need = max(need, w.out_cap + w.out_cap // 2 + 1024)
    if w.out == NULL:   # a call's first reservation (its size): a kept buffer if one fits
        grown = <uint32_t*>out_alloc(need * sizeof(uint32_t))
    else:
        grown = <uint32_t*>out_realloc(w.out, need * sizeof(uint32_t))
    if grown == NULL:
        return -1
    w.out = grown
    w.out_cap = <Py_ssize_t>(out_cap(grown) // sizeof(uint32_t))   # a kept buffer may hold more
    return 0


cdef void work_free(Work* w) noexcept nogil:
    free(w.symbols)
    free(w.ids)
    free(w.ranks)
    out_release(w.out)
    free(w.flags)
    free(w.starts)
    memset(w, 0, sizeof(Work))


cdef enum:
    KEEP_SYMBOLS = 1 << 16      # a slot keeps chunk buffers up to this many symbols between calls


cdef struct Scratch:
    # One slot's buffers that never leave the kernel, kept from call to call: a warm
    # call then touches no fresh pages for them (each first touch of a page is a
    # fault, ~20% of a warm encode when every call allocated its own)
    Work work                   # the merge buffers (its ``out`` is the call's own: numpy takes it)
    int64_t* split_ends         # chunk ends of one slice of a document
    Py_ssize_t split_cap


cdef void scratch_end_call(Scratch* s) noexcept nogil:
    """After a call: drop its output (unless numpy took it) and any chunk buffers a
    huge chunk made large, keep the rest for the slot's next call."""
    cdef Work* w = &s.work
    out_release(w.out)
    w.out = NULL
    w.out_size = 0
    w.out_cap = 0
    w.chunk_tokens = NULL
    w.chunk_n = 0
    if w.cap > KEEP_SYMBOLS:
        free(w.symbols)
        free(w.ids)
        free(w.ranks)
        w.symbols = NULL
        w.ids = NULL
        w.ranks = NULL
        w.cap = 0
    if w.ci_cap > KEEP_SYMBOLS:
        free(w.flags)
        free(w.starts)
        w.flags = NULL
        w.starts = NULL
        w.ci_cap = 0


# --------------------------------------------------------------------------- character integrity
#
# Tokenizers trained with char_integrity under utf16 / ube (the trainer's rule,
# _merge.pyx "Character integrity"; twin: _reference.encode_chunk_reference with
# char_starts): a merge applies at an occurrence only when the token it makes
# keeps characters whole, i.e. the two tokens are both sequences of whole
# characters or both lie inside one character (CHAR_PREFIX: and then the left
# one starts it, SCRIPT's left-to-right rule).  merge_short_ci is merge_short,
# and merge_long given the flags, with that test folded into the pair rank (an
# occurrence that may not merge has no rank), so the rank-order rule is
# otherwise unchanged.  utf8 needs none of it (UTF-8 resynchronises: a token's
# bytes fix where it can sit), and plain tokenizers never come here.

cdef bint char_flags(const uint32_t* ids, Py_ssize_t n, int substrate, bint check_utf8,
                     uint8_t* flags) noexcept nogil:
    """``flags[0:n+1]``: 1 where a character starts in the routed chunk ``ids[0:n]``
    (which starts at a character), and ``flags[n] = 1``.  A UTF-16LE symbol (any
    under utf16, ids >= 256 under ube) starts a unit of 2 symbols, 4 when its high
    byte is a high surrogate; a UTF-8 byte a character of the length its lead byte
    says (a stray continuation byte: 1).  Twin: ``substrate.char_starts``.
    Returns whether the chunk needs no check: every symbol starts a character
    (ASCII under ube), or, without ``check_utf8``, it holds UTF-8 symbols only."""
    cdef Py_ssize_t i = 0, j, step
    cdef uint32_t s
    cdef bint all_starts = True, utf16 = substrate == SUBSTRATE_UTF16
    while i < n:
        s = ids[i]
        if substrate == SUBSTRATE_UTF16 or s >= 256:
            step = 4 if i + 1 < n and 0xD8 <= (ids[i + 1] & 0xFF) <= 0xDB else 2
            utf16 = True
        else:
            step = 1 + (s >= 0xC0) + (s >= 0xE0) + (s >= 0xF0)
        flags[i] = 1
        if step > 1:
            all_starts = False
        j = i + 1
        while j < i + step and j < n:
            flags[j] = 0
            j += 1
        i += step
    flags[n] = 1
    return all_starts or not (check_utf8 or utf16)


cdef Py_ssize_t merge_short_ci(const Tables* t, uint32_t* ids, uint32_t* ranks, int32_t* starts,
                               const uint8_t* flags, Py_ssize_t n) noexcept nogil:
    """merge_short under character integrity; ``starts[0:n+1]``: room for each
    token's first symbol (and the end).  Returns the new length."""
    cdef Py_ssize_t i, j, total = n
    cdef uint32_t best, result
    cdef bint merged_prev
    for i in range(n + 1):
        starts[i] = <int32_t>i
    for i in range(n - 1):
        ranks[i] = ci_rank(t, flags, ids[i], ids[i + 1], i, i + 1, i + 2)
    while n >= 2:
        best = min_scan(ranks, n - 1)
        if best == NO_RANK:
            break
        result = t.results[best]
        i = 0
        j = 0
        merged_prev = False
        while i < n:
            # writes go to j <= i, so starts[i + 1], starts[i + 2] are still the old tokens' ends
            if i + 1 < n and ranks[i] == best:
                ids[j] = result
                starts[j] = starts[i]
                if j > 0:
                    ranks[j - 1] = ci_rank(t, flags, ids[j - 1], result, starts[j - 1], starts[j], starts[i + 2])
                merged_prev = True
                i += 2
            else:
                ids[j] = ids[i]
                starts[j] = starts[i]
                if j > 0:
                    if merged_prev:
                        ranks[j - 1] = ci_rank(t, flags, ids[j - 1], ids[j], starts[j - 1], starts[j],
                                               starts[i + 1])
                    else:
                        ranks[j - 1] = ranks[i - 1]  # the same two tokens (and extents) as before
                merged_prev = False
                i += 1
            j += 1
        starts[j] = <int32_t>total
        n = j
    return n


cdef Py_ssize_t merge_ci(const Tables* t, Work* w, Py_ssize_t n, int32_t_vec& nxt, int32_t_vec& prv,
                         vector[uint32_t]& node_rank, vector[uint64_t]& heap,
                         vector[uint32_t]& batch) noexcept nogil:
    """Merge ``w.ids[0:n]`` (a routed chunk) under character integrity; the new
    length, or -1 out of memory."""
    cdef Py_ssize_t need = n + 1
    if need > w.ci_cap:
        need = max(need, 2 * w.ci_cap)
        free(w.flags)
        free(w.starts)
        w.flags = <uint8_t*>malloc(need * sizeof(uint8_t))
        w.starts = <int32_t*>malloc(need * sizeof(int32_t))
        if w.flags == NULL or w.starts == NULL:
            w.ci_cap = 0
            return -1
        w.ci_cap = need
    if n < 2:
        return n
    if char_flags(w.ids, n, t.substrate, t.check_utf8, w.flags):
        # every symbol a whole character (every token is whole characters), or UTF-8 that
        # resynchronises under a vocabulary whose UTF-8 tokens keep characters whole: nothing to refuse
        if n <= SHORT_CHUNK:
            return merge_short(t, w.ids, w.ranks, n)
        return merge_long(t, w.ids, NULL, n, nxt, prv, node_rank, heap, batch)
    if n <= SHORT_CHUNK:
        return merge_short_ci(t, w.ids, w.ranks, w.starts, w.flags, n)
    return merge_long(t, w.ids, w.flags, n, nxt, prv, node_rank, heap, batch)


cdef Py_ssize_t merge_chunk(const Tables* t, Work* w, const uint8_t* chunk, Py_ssize_t n,
                            int32_t_vec& nxt, int32_t_vec& prv, vector[uint32_t]& node_rank,
                            vector[uint64_t]& heap, vector[uint32_t]& batch,
                            Py_ssize_t* bad_byte) noexcept nogil:
    """Route chunk ``chunk[0:n]`` and merge it: its ids (model ids) in ``w.ids``, their
    number returned; -1 out of memory, -2 invalid UTF-8 (``bad_byte``: offset in the
    chunk)."""
    cdef Py_ssize_t nsym, i, m
    if work_reserve(w, n) < 0:
        return -1
    nsym = route_utf8(chunk, n, t.substrate, w.symbols)
    if nsym < 0:
        bad_byte[0] = -nsym - 1
        return -2
    for i in range(nsym):
        w.ids[i] = w.symbols[i]
    if t.char_integrity:
        m = merge_ci(t, w, nsym, nxt, prv, node_rank, heap, batch)
        if m < 0:
            return -1
    elif nsym <= SHORT_CHUNK:
        m = merge_short(t, w.ids, w.ranks, nsym)
    else:
        m = merge_long(t, w.ids, NULL, nsym, nxt, prv, node_rank, heap, batch)
    if t.model_ids != NULL:
        for i in range(m):
            w.ids[i] = t.model_ids[w.ids[i]]
    return m


cdef int encode_miss(const Tables* t, ChunkCache* cache, Work* w, Slot* s, const uint8_t* chunk,
                     const Key* k, int32_t_vec& nxt, int32_t_vec& prv, vector[uint32_t]& node_rank,
                     vector[uint64_t]& heap, vector[uint32_t]& batch,
                     Py_ssize_t* bad_byte) noexcept nogil:
    """Route and merge a chunk the cache does not hold, append its ids, cache them;
    STATUS_OK, STATUS_NO_MEMORY, or STATUS_INVALID_UTF8 (``bad_byte``: offset in the chunk)."""
    cdef Py_ssize_t m = merge_chunk(t, w, chunk, k.n, nxt, prv, node_rank, heap, batch, bad_byte)
    if m == -2:
        return STATUS_INVALID_UTF8
    if m < 0:
        return STATUS_NO_MEMORY
    if out_reserve(w, m + INLINE_IDS * BLOCK) < 0:  # and encode_span's room for the rest of the block
        return STATUS_NO_MEMORY
    copy_ids(w.out + w.out_size, w.ids, m)
    w.out_size += m
    cache.misses += 1
    cache_insert(cache, s, chunk, k, w.ids, m)
    return STATUS_OK


cdef enum:
    SEED_BITS = 20               # the seed filter: 2^20 bits


cdef inline bint seed_maybe(const Tables* t, uint64_t h) noexcept nogil:
    """Whether chunk hash ``h`` may be a seed's (its filter bit, from the hash's top bits)."""
    cdef uint64_t bit = h >> (64 - SEED_BITS)
    return (t.seed_bits[bit >> 6] >> (bit & 63)) & 1


cdef inline const Slot* seed_find(const Tables* t, const Key* k) noexcept nogil:
    """The seed slot of chunk ``k`` (up to INLINE_KEY bytes), or NULL: the seeds are a
    slot table of their own, read-only and shared by every cache slot (thread)."""
    cdef const Slot* table = <const Slot*>t.seeds
    cdef uint64_t i = k.h & t.seed_mask & PAIR
    cdef const Slot* s
    while True:
        s = &table[i]
        if s.k1 == 0:
            return NULL
        if s.k1 == k.k1 and s.k0 == k.k0:
            return s
        i = (i + 1) & t.seed_mask


cdef inline void store_lanes(uint32_t* o, uint64_t v0, uint64_t v1) noexcept nogil:
    """The four id lanes of an inline slot value at ``o`` (whatever its count: the
    output keeps INLINE_IDS ids of room per chunk left in the block).  Little-endian:
    two 8-byte stores, the count and hit bits cleared from the first (the lanes
    assembled one by one in a vector register cost six more instructions a chunk)."""
    cdef uint64_t lanes01
    if LITTLE_ENDIAN:
        lanes01 = ((v0 >> 8) & ID24) | (v0 & 0xFFFFFFFF00000000ull)
        memcpy(o, &lanes01, 8)
        memcpy(o + 2, &v1, 8)
    else:
        o[0] = <uint32_t>((v0 >> 8) & ID24)
        o[1] = <uint32_t>(v0 >> 32)
        o[2] = <uint32_t>v1
        o[3] = <uint32_t>(v1 >> 32)


cdef inline void hash_block(const uint8_t* p, const uint8_t* limit, Py_ssize_t start, const int64_t* ends,
                            Py_ssize_t cnt, const Slot* slots, uint64_t mask, Key* keys,
                            const Tables* seeds) noexcept nogil:
    """Keys of the ``cnt`` chunks ``p[ends[j-1]:ends[j]]`` (``ends[-1]`` is ``start``),
    the cache line of each one's slot pair prefetched.  A function of its own, so
    that its few loop values stay in registers (in encode_span's frame they were
    spilled to the stack)."""
    cdef Py_ssize_t j, end
    for j in range(cnt):
        end = ends[j]
        keys[j].start = start
        key_of(p + start, end - start, limit, &keys[j])
        prefetch(&slots[keys[j].h & mask & PAIR])
        if seeds != NULL and keys[j].n <= INLINE_KEY and seed_maybe(seeds, keys[j].h):
            prefetch(&(<const Slot*>seeds.seeds)[keys[j].h & seeds.seed_mask & PAIR])
        start = end


cdef inline uint64_t bumped(uint64_t v0) noexcept nogil:
    """A slot's ``v0`` with its hit count one more (saturating at 31), no branch."""
    return v0 + ((<uint64_t>((v0 & FREQ_BITS) != FREQ_BITS)) << 3)


cdef inline bint cache_pressed(const ChunkCache* c) noexcept nogil:
    """Whether the cache counts its hits: once it holds a quarter of any of its bounds
    (entries, long-key bytes, spilled ids).  Only a sweep reads the counts, and the
    first sweep comes after at least three quarters of a full cache's chunks have
    been counted in; below that the count's load-dependent store is pure cost (a
    second pass over 2 MB of English text ran 1.2x faster without it)."""
    return (4 * c.count >= c.max_entries or 4 * c.keys_used >= c.keys_cap
            or 4 * c.vals_used >= c.vals_cap)


cdef inline Py_ssize_t hit_block(const Key* keys, Py_ssize_t j, Py_ssize_t cnt, Slot* slots,
                                 uint64_t mask, uint32_t* out, Py_ssize_t* out_size,
                                 int64_t* chunk_tokens, int64_t* hits, bint count_hits) noexcept nogil:
    """The hits of chunks ``keys[j:cnt]`` in their home slot pair with inline ids:
    appends their ids at
    ``out + out_size[0]`` until a chunk it does not take; returns that chunk's index
    (``cnt``: none), and, when ``count_hits`` (cache_pressed), counts each hit in its
    slot (cache_sweep keeps the most-hit entries).  ``chunk_tokens`` (NULL: none)
    gets the output size before each chunk, the returned one's included.  Output
    size and hit count stay in registers and are stored once.  Called with constant
    ``chunk_tokens`` NULL and ``count_hits``, the loop compiles without their code."""
    cdef Py_ssize_t n = out_size[0]
    cdef int64_t found = 0
    cdef Slot* pair
    cdef uint64_t k0, k1, v0, v1, count
    cdef uint64_t saturated_sink = 0
    cdef uint64_t* count_at
    cdef bint hit0, hit1
    while j < cnt:
        if chunk_tokens != NULL:
            chunk_tokens[j] = n
        pair = &slots[keys[j].h & mask & PAIR]
        k0 = keys[j].k0
        k1 = keys[j].k1
        hit0 = (pair[0].k0 == k0) & (pair[0].k1 == k1)
        hit1 = (pair[1].k0 == k0) & (pair[1].k1 == k1)
        v0 = pair[0].v0 if hit0 else pair[1].v0
        v1 = pair[0].v1 if hit0 else pair[1].v1
        count = (v0 & COUNT_MASK) if (hit0 | hit1) else 0   # 0: spilled, long, a miss, or an empty chunk
        if count == 0:
            break
        # the count goes to a local when it is saturated: the hot chunks, most hits, then leave
        # their lines clean (no write-back as they leave the cache).  Compilers make this and the
        # choice of slot branches; selects by masks measured slower (a masked address or value
        # waits for the slot's line, where a predicted branch runs ahead to the next chunks)
        if count_hits:
            count_at = &saturated_sink if (v0 & FREQ_BITS) == FREQ_BITS else &pair[0 if hit0 else 1].v0
            count_at[0] = bumped(v0)
        store_lanes(out + n, v0, v1)
        n += <Py_ssize_t>count
        found += 1
        j += 1
    out_size[0] = n
    hits[0] += found
    return j


cdef int encode_span(const Tables* t, ChunkCache* cache, Work* w, const uint8_t* p,
                     const uint8_t* limit, Py_ssize_t first, const int64_t* ends, Py_ssize_t nchunks,
                     int32_t_vec& nxt, int32_t_vec& prv, vector[uint32_t]& node_rank,
                     vector[uint64_t]& heap, vector[uint32_t]& batch,
                     Py_ssize_t* bad_at) noexcept nogil:
    """Append the ids of chunks ``p[ends[k-1]:ends[k]]`` (``ends[-1]`` is ``first``).

    Chunks go in blocks of BLOCK: first every chunk of the block is hashed and the
    cache line of its slot pair prefetched (hash_block), then the block is looked
    up (hit_block), so the slot loads of a block overlap instead of waiting one
    after another.  While blocks bring new chunks (the block before, in this call
    or the cache's last one, cached one or more: ChunkCache.new_chunks), each
    chunk's seed slot is prefetched too: a new chunk is then looked up among the
    seeds (chunk_slow) without waiting for that line; once every chunk hits (a
    corpus's second pass), no block reads the seed filter.  A chunk found in its slot pair with its ids inline (most
    chunks) takes no slow path: both slots are compared, the four id lanes
    are stored whatever the count and the output advances by the count (the output
    keeps INLINE_IDS ids of room per chunk left in the block).  Everything else (a
    slot further on, spilled ids, long keys, misses, empty chunks) goes to
    ``chunk_slow``.  Returns a status; ``bad_at``: offset from ``p`` of invalid UTF-8."""
    cdef Key keys[BLOCK]
    cdef Py_ssize_t b = 0, j, cnt, start = first, bad_byte = 0
    cdef int64_t hits = 0
    cdef int64_t* ct
    cdef int status = STATUS_OK
    cdef bint seeded = t.num_seeds != 0 and 2 * t.num_seeds <= cache.max_entries
    cdef bint fresh = seeded and cache.new_chunks
    cdef Py_ssize_t count_before
    while b < nchunks:
        cnt = min(<Py_ssize_t>BLOCK, nchunks - b)
        if out_reserve(w, INLINE_IDS * cnt) < 0:
            status = STATUS_NO_MEMORY
            break
        # while blocks bring new chunks (the last one cached some), the seed slots are fetched too
        hash_block(p, limit, start, ends + b, cnt, cache.slots, cache.mask, keys,
                   t if fresh else NULL)
        count_before = cache.count
        start = ends[b + cnt - 1]
        ct = w.chunk_tokens + w.chunk_n if w.chunk_tokens != NULL else NULL
        j = 0
        while True:
            # the table and the output are read again after each slow chunk: a miss may
            # grow or clear the one and move the other
            if ct != NULL:
                j = hit_block(keys, j, cnt, cache.slots, cache.mask, w.out, &w.out_size, ct, &hits,
                              cache_pressed(cache))
            elif cache_pressed(cache):
                j = hit_block(keys, j, cnt, cache.slots, cache.mask, w.out, &w.out_size, NULL, &hits, True)
            else:
                j = hit_block(keys, j, cnt, cache.slots, cache.mask, w.out, &w.out_size, NULL, &hits, False)
            if j == cnt:
                break
            if keys[j].n > 0:
                status = chunk_slow(t, cache, w, p + keys[j].start, &keys[j], cnt - j, nxt, prv,
                                    node_rank, heap, batch, &bad_byte)
                if status != STATUS_OK:
                    bad_at[0] = keys[j].start + bad_byte
                    break
            j += 1
        if status != STATUS_OK:
            break
        if ct != NULL:
            w.chunk_n += cnt
        cache.new_chunks = cache.count != count_before
        fresh = seeded and cache.new_chunks
        b += cnt
    cache.hits += hits
    return status


cdef int chunk_slow(const Tables* t, ChunkCache* cache, Work* w, const uint8_t* chunk, const Key* k,
                    Py_ssize_t left, int32_t_vec& nxt, int32_t_vec& prv, vector[uint32_t]& node_rank,
                    vector[uint64_t]& heap, vector[uint32_t]& batch, Py_ssize_t* bad_byte) noexcept nogil:
    """encode_span's chunks that its branch-free hit does not take (``left``: chunks of
    the block from this one on): a slot past the home pair, ids spilled to ``vals``
    (more than INLINE_IDS, or a long key), or a miss (encode_miss)."""
    cdef Slot* s = cache_find(cache, chunk, k)
    cdef const Slot* seed
    cdef uint32_t id0
    cdef Py_ssize_t m
    if s.k1 == 0:
        if t.num_seeds and k.n <= INLINE_KEY and 2 * t.num_seeds <= cache.max_entries and seed_maybe(t, k.h):
            seed = seed_find(t, k)
            if seed != NULL:   # one token: no merge, and cached for its next occurrences
                cache.hits += 1
                store_lanes(w.out + w.out_size, seed.v0, seed.v1)
                w.out_size += 1
                id0 = <uint32_t>((seed.v0 >> 8) & ID24)
                cache_insert(cache, s, chunk, k, &id0, 1)
                return STATUS_OK
        return encode_miss(t, cache, w, s, chunk, k, nxt, prv, node_rank, heap, batch, bad_byte)
    cache.hits += 1
    if cache_pressed(cache):
        s.v0 = bumped(s.v0)
    if s.v0 & COUNT_MASK:     # inline ids in a slot past the home pair
        store_lanes(w.out + w.out_size, s.v0, s.v1)
        w.out_size += <Py_ssize_t>(s.v0 & COUNT_MASK)
        return STATUS_OK
    m = cache.vals[s.v0 >> 32]
    if out_reserve(w, m + 8 + INLINE_IDS * left) < 0:   # copy_ids writes up to 7 ids past m
        return STATUS_NO_MEMORY
    copy_ids(w.out + w.out_size, cache.vals + (s.v0 >> 32) + 1, m)
    w.out_size += m
    return STATUS_OK


cdef inline bint _word_byte(uint8_t b) noexcept nogil:
    """An ASCII letter or digit."""
    return (0x30 <= b <= 0x39) or (0x61 <= (b | 0x20) <= 0x7A)


cdef inline bint _safe_cut(const uint8_t* p, Py_ssize_t i, Py_ssize_t pos) noexcept nogil:
    """Whether every pre-tokenizer (gpt2, cl100k, llama3, o200k) has a chunk boundary at
    ``p[i]`` whatever follows, and splits the text before it the same when cut there
    (``p[pos:i]`` is what the cut keeps).  Two kinds of cut:

    * a space after an ASCII letter or digit: no chunk runs from a non-space into a
      space, and the chunk before ends at the letter or digit either way;
    * after a ``\n`` that follows visible ASCII (so the whitespace run is that one
      ``\n``: GPT-2's ``\s+(?!\S)`` gives back the last character of a longer run
      only when a non-space follows), before a character that is neither
      whitespace nor ``/`` (nothing runs from ``\n`` into it: o200k takes ``/``
      after punctuation).  Lead bytes C3..DF and E4..F4 start characters that are
      never whitespace (those are U+0085, U+00A0 and U+1680..U+3000).
    """
    cdef uint8_t a = p[i - 1], b = p[i]
    if b == 0x20:
        return _word_byte(a)
    if a == 0x0A and i - 2 >= pos and 0x21 <= p[i - 2] <= 0x7E:
        return _word_byte(b) or (0xC3 <= b <= 0xDF) or (0xE4 <= b <= 0xF4)
    return False


cdef Py_ssize_t window_end(const uint8_t* p, Py_ssize_t pos, Py_ssize_t stop,
                           Py_ssize_t target) noexcept nogil:
    """End of the next slice of a document: ``stop``, or the first safe cut at least
    ``target`` bytes after ``pos`` (``stop`` when there is none)."""
    cdef Py_ssize_t i
    if stop - pos <= target:
        return stop
    i = pos + target
    while i < stop:
        if _safe_cut(p, i, pos):
            return i
        i += 1
    return stop


cdef object take_ids(Work* w):
    """The ids of ``w`` as a numpy uint32 array that owns the buffer (no copy); freed
    through ``out_release``, which may keep it for a later call's output.  A buffer
    more than twice the ids' size is shrunk first."""
    cdef cvarray arr
    cdef uint32_t* shrunk
    if w.out_size == 0:
        return np.zeros(0, dtype=np.uint32)
    if out_cap(w.out) > 2 * <size_t>w.out_size * sizeof(uint32_t):
        shrunk = <uint32_t*>out_realloc(w.out, w.out_size * sizeof(uint32_t))
        if shrunk != NULL:
            w.out = shrunk
    arr = cvarray(shape=(w.out_size,), itemsize=sizeof(uint32_t), format="I", mode="c",
                  allocate_buffer=False)
    arr.data = <char*>w.out
    arr.callback_free_data = out_release
    w.out = NULL
    w.out_size = 0
    w.out_cap = 0
    return np.asarray(arr)


# --------------------------------------------------------------------------- batch input

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object text, Py_ssize_t* size) except NULL


def utf8_offsets(list texts):
    """``int64[n+1]``: where the UTF-8 of each ``str`` of ``texts`` would start and end
    in one buffer (a running sum of their UTF-8 sizes).  Asking CPython for the UTF-8
    makes it keep it for the string's lifetime (an ASCII ``str`` is its own UTF-8), so
    the encoders that read texts in place (:meth:`Encoder.encode_texts`) or
    ``utf8_join`` find it ready.  Raises ``UnicodeEncodeError`` (a lone surrogate) or
    ``TypeError`` (not a ``str``) without naming the document: the caller encodes the
    batch again its own way to say which one."""
    cdef Py_ssize_t n = len(texts), d, size, total = 0
    cdef object text
    offsets = np.empty(n + 1, dtype=np.int64)
    cdef int64_t[::1] ov = offsets
    ov[0] = 0
    for d in range(n):
        text = texts[d]
        if not isinstance(text, str):
            raise TypeError(f"document {d} is a {type(text).__name__}, not a str")
        PyUnicode_AsUTF8AndSize(text, &size)
        total += size
        ov[d + 1] = total
    return offsets


def utf8_join(list texts):
    """``(data uint8, offsets int64[n+1])``: the UTF-8 of every ``str`` of ``texts``,
    one after another, in one buffer, copied once (no ``bytes`` object per document);
    errors as :func:`utf8_offsets`."""
    offsets = utf8_offsets(texts)
    cdef const int64_t[::1] ov = offsets
    cdef Py_ssize_t n = len(texts), d, size
    data = np.empty(ov[n], dtype=np.uint8)
    cdef uint8_t[::1] dv = data
    if ov[n]:
        for d in range(n):
            if ov[d + 1] > ov[d]:   # (an empty last document has no byte to point at)
                memcpy(&dv[ov[d]], PyUnicode_AsUTF8AndSize(texts[d], &size), ov[d + 1] - ov[d])
    return data, offsets


cdef extern from "<string.h>" nogil:
    const void* memchr(const void* s, int c, size_t n)


def find_first(const uint8_t[::1] data, Py_ssize_t start, Py_ssize_t stop, const uint8_t[::1] texts,
               const int64_t[::1] text_offsets):
    """Offset in ``data`` of the leftmost occurrence in ``data[start:stop]`` of any of
    the byte strings ``texts[text_offsets[k]:text_offsets[k + 1]]`` (non-empty), or
    -1: whether a batch holds special-token text at all, at memory speed (``memchr``
    for the first byte when all texts share it, a byte table otherwise; twin:
    ``_reference.find_first_reference``)."""
    cdef Py_ssize_t k, nt = text_offsets.shape[0] - 1, pos, length
    cdef const uint8_t* p
    cdef const uint8_t* hit
    cdef bint starts[256]
    cdef int first = -1, distinct = 0
    cdef Py_ssize_t found = -1
    if start < 0 or stop > data.shape[0] or start > stop:
        raise ValueError(f"[{start}, {stop}) is not a range of the {data.shape[0]} bytes")
    if nt < 0 or text_offsets[0] != 0 or text_offsets[nt] > texts.shape[0]:
        raise ValueError("text_offsets must run from 0 within texts")
    memset(starts, 0, sizeof(starts))
    for k in range(nt):
        if text_offsets[k + 1] <= text_offsets[k]:
            raise ValueError(f"text {k} is empty or text_offsets decrease")
        if not starts[texts[text_offsets[k]]]:
            starts[texts[text_offsets[k]]] = True
            first = texts[text_offsets[k]]
            distinct += 1
    if nt == 0 or stop == start:
        return -1
    p = &data[0]
    pos = start
    with nogil:
        while pos < stop and found < 0:
            if distinct == 1:   # the usual case ("<|...|>" tokens): libc's vectorised scan
                hit = <const uint8_t*>memchr(p + pos, first, stop - pos)
                if hit == NULL:
                    break
                pos = hit - p
            elif not starts[p[pos]]:
                pos += 1
                continue
            for k in range(nt):
                length = text_offsets[k + 1] - text_offsets[k]
                if length <= stop - pos and memcmp(p + pos, &texts[text_offsets[k]], length) == 0:
                    found = pos
                    break
            pos += 1
    return found


# --------------------------------------------------------------------------- the encoder

cdef class Encoder:
    """Merge tables of one tokenizer plus ``num_slots`` chunk caches.

    ``merges``: ``uint32[n, 2]`` (left, right) in rank order; ``results``:
    ``uint32[n]`` the id each merge gives; ``base``: number of base symbols;
    ``substrate``: 0 ube, 1 utf8, 2 utf16; ``classes``: gpt2_class_table(), or
    tiktoken_class_table() with ``split``: the pre-tokenizer :meth:`encode_utf8`
    runs (``SPLIT_*`` of _pretok_tiktoken.pxd: 0 gpt2, 1 cl100k, 2 llama3, 3 o200k).
    A pair that repeats keeps its first (lowest) rank.  ``id_map``: the model id
    of each internal id (a model with its own numbering), written by the encode
    entries and kept in the caches; ``slice_bytes``: with the inline split, a
    document is split and encoded this many bytes (to the next safe cut) at a time,
    so memory stays bounded on huge documents; ``char_integrity``: merge only where
    the token made keeps characters whole (the trainer's ``char_integrity`` rule;
    ``Tokenizer`` asks for it under utf16 and ube, where it changes results), by
    ``char_rule`` ``"pieces"`` (any two pieces of one character) or ``"prefix"``
    (a character's prefix and its next piece only); ``check_utf8=False``: a chunk of UTF-8 symbols only needs no check (true when
    every token of UTF-8 symbols is whole characters or a strict part of one).
    """
    cdef Tables tables
    cdef object _keep          # arrays whose memory the tables point into
    cdef void* _pairs          # tables.pairs or tables.packed (owned)
    cdef const uint8_t* classes
    cdef readonly int split    # the SPLIT_* code of encode_utf8's pre-tokenizer
    cdef ChunkCache* caches
    cdef Scratch* scratch       # one per slot, kept across calls
    cdef int _num_slots
    cdef readonly Py_ssize_t cache_entries
    cdef readonly Py_ssize_t cache_bytes
    cdef readonly Py_ssize_t slice_bytes   # inline split: a document is split this many bytes at a time

    def __cinit__(self, merges, results, int base, int substrate, classes, *, int num_slots=1,
                  Py_ssize_t cache_entries=-1, Py_ssize_t cache_bytes=DEFAULT_CACHE_BYTES, int split=SPLIT_GPT2,
                  Py_ssize_t slice_bytes=1 << 20, id_map=None, bint char_integrity=False,
                  bint check_utf8=True, str char_rule="pieces"):
        self.caches = NULL
        self.scratch = NULL
        self._pairs = NULL
        self._num_slots = 0
        if substrate not in (SUBSTRATE_UBE, SUBSTRATE_UTF8, SUBSTRATE_UTF16):
            raise ValueError(f"substrate code must be 0 (ube), 1 (utf8) or 2 (utf16), got {substrate}")
        if num_slots < 1:
            raise ValueError(f"num_slots must be >= 1, got {num_slots}")
        if cache_entries < -1 or cache_bytes < 0:
            raise ValueError(f"cache_bytes must be >= 0 and cache_entries >= 0 (or -1: no cap of its own), "
                             f"got {cache_bytes}, {cache_entries}")
        if slice_bytes < 1:
            raise ValueError(f"slice_bytes must be >= 1, got {slice_bytes}")
        if cache_bytes > MAX_CACHE_BYTES:
            raise ValueError(f"cache_bytes must be at most {MAX_CACHE_BYTES} (16 GiB), got {cache_bytes}")
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
        # a merge's key in the tables: its result id when those rise with rank and are dense enough
        # for merge_short_ci's identity ``results`` to stay small (below 2 (base + n)); its rank otherwise
        # (indices written out: this function runs with wraparound off, where results_arr[-1] is undefined
        # and Cython 3.3 raises IndexError for it)
        cdef bint key_is_id = n > 0 and int(results_arr[n - 1]) < 2 * (base + n) and bool(
            (results_arr[1:] > results_arr[:n - 1]).all())
        keys_arr = results_arr if key_is_id else np.arange(n, dtype=np.uint32)
        cdef const uint32_t[::1] kv = keys_arr
        cdef uint32_t dense = max(base, min(<Py_ssize_t>DENSE_IDS, base + n))
        base_ranks = np.full(<Py_ssize_t>dense * dense, NO_RANK, dtype=np.uint32)
        cap = 16
        while cap < 2 * n:
            cap *= 2
        # sized to the table, so that a small vocabulary's filter stays in L1 (a 256 KiB one
        # for 8k merges missed L2 on most lookups of a cold encode)
        cdef int bloom_bits = BLOOM_MIN_BITS
        while bloom_bits < BLOOM_MAX_BITS and (1 << bloom_bits) < 16 * n:
            bloom_bits += 1
        cdef int bloom_shift = 64 - bloom_bits
        bloom = np.zeros((1 << bloom_bits) // 64, dtype=np.uint64)
        cdef uint32_t[:, ::1] mv = merges_arr
        cdef uint32_t[::1] br = base_ranks
        cdef uint64_t[::1] bv = bloom
        # every id is below base + n (and every rank below n): pack when those fit 21 bits
        cdef bint pack = <uint64_t>base + <uint64_t>n <= PACK_MASK and (
            n == 0 or <uint64_t>results_arr.max() <= PACK_MASK)
        cdef PairSlot* ps = NULL
        cdef uint64_t* pk = NULL
        if pack:
            pk = <uint64_t*>table_alloc(cap * sizeof(uint64_t))
            self._pairs = pk
        else:
            ps = <PairSlot*>table_alloc(cap * sizeof(PairSlot))
            self._pairs = ps
        if self._pairs == NULL:
            raise MemoryError(f"cannot allocate the pair table ({cap} slots)")
        cdef uint64_t mask = cap - 1, key, i, h
        cdef Py_ssize_t r
        cdef uint32_t left, right
        for i in range(mask + 1):
            if pack:
                pk[i] = EMPTY_KEY
            else:
                ps[i].key = EMPTY_KEY
        for r in range(n):
            left = mv[r, 0]
            right = mv[r, 1]
            if left < dense and right < dense:
                if br[left * dense + right] == NO_RANK:
                    br[left * dense + right] = kv[r]
                continue
            key = (<uint64_t>left << 32) | right
            h = pair_hash(key)
            bv[(h >> bloom_shift) >> 6] |= (<uint64_t>1) << ((h >> bloom_shift) & 63)
            i = h & mask
            if pack:
                if left > PACK_MASK or right > PACK_MASK:
                    continue  # no id met while merging is that large (ids are below 2^21 here)
                key = (<uint64_t>left << PACK_BITS) | right
                while pk[i] != EMPTY_KEY and (pk[i] >> PACK_BITS) != key:
                    i = (i + 1) & mask
                if pk[i] == EMPTY_KEY:
                    pk[i] = (key << PACK_BITS) | <uint64_t>kv[r]
                continue
            while ps[i].key != EMPTY_KEY and ps[i].key != key:
                i = (i + 1) & mask
            if ps[i].key == EMPTY_KEY:
                ps[i].key = key
                ps[i].rank = kv[r]
        id_map_arr = None if id_map is None else np.ascontiguousarray(id_map, dtype=np.uint32)
        if id_map_arr is not None and id_map_arr.shape[0] < max(base, int(results_arr.max()) + 1 if n else 0):
            raise ValueError(f"id_map has {id_map_arr.shape[0]} entries; it needs one per base symbol "
                             "and merged token")
        if key_is_id:  # merge_short_ci still reads ``results``: the identity over the keys
            results_arr = np.arange(int(results_arr[n - 1]) + 1, dtype=np.uint32)
        self._keep = (base_ranks, bloom, results_arr, classes_arr, id_map_arr)
        cdef const uint32_t[::1] idv = id_map_arr
        self.tables.model_ids = &idv[0] if id_map_arr is not None else NULL
        cdef const uint32_t[::1] resv = results_arr
        cdef const uint8_t[::1] clv = classes_arr
        self.tables.base = base
        self.tables.dense = dense
        self.tables.base_ranks = &br[0]
        self.tables.pairs = ps
        self.tables.packed = pk
        self.tables.bloom = &bv[0]
        self.tables.bloom_shift = bloom_shift
        self.tables.mask = mask
        self.tables.results = &resv[0] if n > 0 else NULL
        self.tables.key_is_id = key_is_id
        self.tables.substrate = substrate
        if char_rule not in ("pieces", "prefix"):
            raise ValueError(f"char_rule is {char_rule!r}; expected 'pieces' or 'prefix'")
        self.tables.char_integrity = 0 if not char_integrity else CHAR_PREFIX if char_rule == "prefix" else CHAR_PIECES
        self.tables.check_utf8 = check_utf8
        self.classes = &clv[0]
        self.cache_entries = cache_entries
        self.cache_bytes = cache_bytes
        self.slice_bytes = slice_bytes
        # cache-line aligned (ChunkCache is 128 bytes): the hit counters one thread bumps every
        # chunk never share a line with another thread's slot
        self.caches = <ChunkCache*>table_alloc(num_slots * sizeof(ChunkCache))
        self.scratch = <Scratch*>calloc(num_slots, sizeof(Scratch))
        if self.caches == NULL or self.scratch == NULL:
            raise MemoryError()
        self._num_slots = num_slots
        # the caches themselves are allocated on first use of each slot (_enter)

    def __dealloc__(self):
        cdef int s
        free(self._pairs)
        self._pairs = NULL
        free(<void*>self.tables.seeds)
        free(<void*>self.tables.seed_bits)
        self.tables.seeds = NULL
        self.tables.seed_bits = NULL
        if self.caches != NULL:
            for s in range(self._num_slots):
                cache_free_slots(&self.caches[s])
                free(self.caches[s].keys)
                free(self.caches[s].vals)
            free(self.caches)
            self.caches = NULL
        if self.scratch != NULL:
            for s in range(self._num_slots):
                work_free(&self.scratch[s].work)
                free(self.scratch[s].split_ends)
            free(self.scratch)
            self.scratch = NULL

    @property
    def num_slots(self):
        return self._num_slots

    @property
    def char_integrity(self):
        return bool(self.tables.char_integrity)

    @property
    def char_rule(self):
        return "prefix" if self.tables.char_integrity == CHAR_PREFIX else "pieces"

    @property
    def check_utf8(self):
        return bool(self.tables.check_utf8)

    def cache_stats(self, int slot=0):
        """``{"entries", "bytes", "hits", "misses", "sweeps", "evicted"}`` of one slot's
        cache: ``bytes`` is the memory it holds now (slot table and the arenas' used
        part, at most ``cache_bytes``); ``sweeps``: times it was full and kept only its
        most-hit entries; ``evicted``: entries those sweeps dropped."""
        self._check_slot(slot)
        cdef ChunkCache* c = &self.caches[slot]
        cdef Py_ssize_t held = 0
        if c.slots != NULL:
            held = (c.mask + 1) * sizeof(Slot) + c.keys_used + c.vals_used * sizeof(uint32_t)
        return {"entries": c.count, "bytes": held, "hits": c.hits, "misses": c.misses,
                "sweeps": c.sweeps, "evicted": c.evicted}

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
        cdef uint64_t slots = MIN_SLOTS
        if c.slots == NULL:
            # cache_bytes: half for the slot table (a power of two, at half load at most), a
            # quarter each for long keys and spilled ids; arena pages are touched only when used
            while 2 * slots * sizeof(Slot) <= <uint64_t>self.cache_bytes // 2:
                slots *= 2
            c.max_slots = slots
            c.max_entries = 0 if self.cache_bytes == 0 else <Py_ssize_t>(slots // 2)
            if self.cache_entries >= 0:
                c.max_entries = min(c.max_entries, self.cache_entries)
            slots = min(slots, <uint64_t>INITIAL_SLOTS)
            c.map_len = slots * sizeof(Slot)
            c.slots = <Slot*>table_map(c.map_len)
            if c.slots == NULL:
                c.map_len = 0
                c.slots = <Slot*>table_alloc(slots * sizeof(Slot))
            c.mask = slots - 1
            c.keys_cap = self.cache_bytes // 4
            c.keys = <uint8_t*>malloc(c.keys_cap if c.keys_cap > 0 else 1)
            c.vals_cap = self.cache_bytes // (4 * sizeof(uint32_t))
            c.vals = <uint32_t*>malloc((c.vals_cap + 8) * sizeof(uint32_t))  # + copy_ids' overrun
            if c.slots == NULL or c.keys == NULL or c.vals == NULL:
                cache_free_slots(c)
                free(c.keys)
                free(c.vals)
                c.slots = NULL
                c.keys = NULL
                c.vals = NULL
                raise MemoryError(f"cannot allocate chunk cache {slot} ({self.cache_bytes} bytes); pass a "
                                  "smaller cache (Tokenizer.set_cache(bytes=...))")
        if c.count == 0:
            c.new_chunks = True    # an empty cache: its first block looks at the seeds at once
        c.busy = True
        return c

    def seed_caches(self, const uint8_t[::1] token_bytes, const uint64_t[::1] entries):
        """Give the caches the vocabulary's one-token chunks (gigatoken's seeding): a
        chunk that is a single token is then found on its first occurrence instead of
        being merged.  ``token_bytes``, ``entries``: the decode tables
        (``_decode.DecodeTables``: offset, length << 32 and kind << 56 per id); each
        token whose bytes are well-formed UTF-8 (kind 0) of 1..INLINE_KEY bytes is
        merged as a chunk would be, and kept when that gives one id (below 2^24): the
        entry a miss of that chunk would make, so ids stay the same with or without
        seeds.  The seeds form one read-only slot table (at most half full) that every
        cache slot probes when it misses a chunk (chunk_slow), unless its entry bound
        is under twice their number; a chunk found there is cached as a miss would
        be.  Returns the number of seeds."""
        cdef Py_ssize_t n = entries.shape[0], i, m, kept = 0, length, bad = 0
        cdef uint64_t e, size = MIN_SLOTS, j
        cdef Work w
        cdef vector[int32_t] nxt, prv
        cdef vector[uint32_t] node_rank, batch
        cdef vector[uint64_t] heap
        cdef Key k
        cdef Slot* table
        cdef const uint8_t* data = &token_bytes[0] if token_bytes.shape[0] else NULL
        cdef const uint8_t* limit = data + token_bytes.shape[0]
        for i in range(self._num_slots):
            if self.caches[i].slots != NULL:
                raise RuntimeError("seed_caches must come before the first encode (a cache exists)")
        while size < 2 * <uint64_t>n:
            size *= 2
        cdef uint64_t* bits = <uint64_t*>table_alloc((1 << SEED_BITS) // 8)
        table = <Slot*>table_alloc(size * sizeof(Slot))
        if table == NULL or bits == NULL:
            free(table)
            free(bits)
            raise MemoryError(f"cannot allocate the seed table of {n} tokens ({size * sizeof(Slot)} bytes)")
        memset(&w, 0, sizeof(Work))
        with nogil:
            for i in range(n):
                e = entries[i]
                length = <Py_ssize_t>((e >> 32) & 0xFFFFFF)
                if (e >> 56) != 0 or length == 0 or length > INLINE_KEY or (e & 0xFFFFFFFFu) + length > <uint64_t>(limit - data):
                    continue
                m = merge_chunk(&self.tables, &w, data + (e & 0xFFFFFFFFu), length, nxt, prv, node_rank, heap,
                                batch, &bad)
                if m != 1 or w.ids[0] > ID24:
                    continue
                key_of(data + (e & 0xFFFFFFFFu), length, limit, &k)
                j = k.h & (size - 1) & PAIR
                while table[j].k1 != 0 and not (table[j].k1 == k.k1 and table[j].k0 == k.k0):
                    j = (j + 1) & (size - 1)
                if table[j].k1 == 0:
                    table[j].k0 = k.k0
                    table[j].k1 = k.k1
                    table[j].v0 = 1 | (<uint64_t>w.ids[0] << 8)
                    kept += 1
                    e = k.h >> (64 - SEED_BITS)
                    bits[e >> 6] |= <uint64_t>1 << (e & 63)
        work_free(&w)
        free(<void*>self.tables.seeds)
        free(<void*>self.tables.seed_bits)
        self.tables.seeds = table
        self.tables.seed_bits = bits
        self.tables.seed_mask = size - 1
        self.tables.num_seeds = kept
        return kept

    @property
    def num_seeds(self):
        return self.tables.num_seeds

    def encode_chunk_symbols(self, const uint16_t[::1] symbols):
        """Merge one chunk given as base symbol ids (no cache); for tests and tools."""
        cdef Py_ssize_t n = symbols.shape[0], m, i
        cdef vector[int32_t] nxt, prv
        cdef vector[uint32_t] node_rank, batch
        cdef vector[uint64_t] heap
        cdef Work w
        out = np.empty(max(n, 1) * 2, dtype=np.uint32)
        cdef uint32_t[::1] ov = out
        for i in range(n):
            if symbols[i] >= self.tables.base:
                raise ValueError(f"symbol {symbols[i]} at {i} is not a base symbol (0..{self.tables.base - 1})")
            ov[i] = symbols[i]
        if n == 0:
            return out[:0]
        if self.tables.char_integrity:
            memset(&w, 0, sizeof(Work))
            w.ids = &ov[0]
            w.ranks = &ov[n]
            with nogil:
                m = merge_ci(&self.tables, &w, n, nxt, prv, node_rank, heap, batch)
            free(w.flags)
            free(w.starts)
            if m < 0:
                raise MemoryError(f"cannot allocate the character flags of a chunk of {n} symbols")
            return out[:m].copy()
        with nogil:
            if n <= SHORT_CHUNK:
                m = merge_short(&self.tables, &ov[0], &ov[n], n)
            else:
                m = merge_long(&self.tables, &ov[0], NULL, n, nxt, prv, node_rank, heap, batch)
        return out[:m].copy()

    def encode_utf8(self, const uint8_t[::1] data, const int64_t[::1] offsets, int slot=0,
                    int64_t[::1] err=None, int64_t bos=-1, int64_t eos=-1):
        """Encode documents ``data[offsets[d]:offsets[d+1]]`` (split inline by the
        pre-tokenizer given at construction, ``split``).

        ``bos`` / ``eos`` (>= 0): an id written before / after every document
        (counted in its token range); -1: none.  Returns ``(status, ids uint32,
        token_offsets int64[n+1])``; on ``STATUS_INVALID_UTF8`` (``err``:
        absolute byte offset, document index) or ``STATUS_NO_MEMORY`` the arrays
        are None.
        """
        return self._encode(data, offsets, None, None, slot, err, NULL, bos, eos)

    def encode_chunks(self, const uint8_t[::1] data, const int64_t[::1] offsets,
                      const int64_t[::1] ends, const int64_t[::1] doc_chunk_offsets, int slot=0,
                      int64_t[::1] err=None, int64_t[::1] chunk_tokens=None, int64_t bos=-1,
                      int64_t eos=-1):
        """Like :meth:`encode_utf8` with chunk ends computed elsewhere
        (``chunk_bounds_batch``: absolute end offsets, ``doc_chunk_offsets[n+1]``).
        ``chunk_tokens`` (``len(ends) + 1`` entries, for SuperBPE's stage 2) receives
        where each chunk's ids start in the output, and their total last; it
        takes no ``bos``/``eos`` (stage 2 writes them)."""
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
        if chunk_tokens is not None and chunk_tokens.shape[0] < ends.shape[0] + 1:
            raise ValueError(f"chunk_tokens needs {ends.shape[0] + 1} entries, got {chunk_tokens.shape[0]}")
        if chunk_tokens is not None and (bos >= 0 or eos >= 0):
            raise ValueError("chunk_tokens takes no bos/eos (SuperBPE's stage 2 writes them)")
        return self._encode(data, offsets, ends, doc_chunk_offsets, slot, err,
                            &chunk_tokens[0] if chunk_tokens is not None else NULL, bos, eos)

    def encode_texts(self, list texts, Py_ssize_t first=0, Py_ssize_t stop=-1, int slot=0,
                     int64_t[::1] err=None, int64_t bos=-1, int64_t eos=-1):
        """Like :meth:`encode_utf8` over ``texts[first:stop]`` (``str`` objects, ``stop``
        -1: to the end), each read in place from the UTF-8 CPython keeps for it (no
        joined copy of the batch).  Raises ``TypeError`` (not a ``str``) or
        ``UnicodeEncodeError`` (a lone surrogate) without naming the document: the
        caller says which one."""
        cdef Py_ssize_t n = len(texts), d, size
        if stop < 0 or stop > n:
            stop = n
        if first < 0 or first > stop:
            raise ValueError(f"texts[{first}:{stop}] is not a range of the {n} texts")
        cdef vector[const uint8_t*] ptrs
        cdef vector[int64_t] lens
        ptrs.resize(stop - first)
        lens.resize(stop - first)
        cdef object text
        for d in range(first, stop):
            text = texts[d]
            if not isinstance(text, str):
                raise TypeError(f"document {d} is a {type(text).__name__}, not a str")
            ptrs[d - first] = <const uint8_t*>PyUnicode_AsUTF8AndSize(text, &size)
            lens[d - first] = size
        return self._run(stop - first, ptrs.data(), lens.data(), NULL, NULL, NULL, NULL, slot, err,
                         NULL, bos, eos)

    cdef _encode(self, const uint8_t[::1] data, const int64_t[::1] offsets,
                 const int64_t[::1] ends, const int64_t[::1] doc_chunk_offsets, int slot,
                 int64_t[::1] err, int64_t* chunk_tokens, int64_t bos, int64_t eos):
        cdef Py_ssize_t nd = offsets.shape[0] - 1, d
        if nd < 0:
            raise ValueError("offsets needs ndocs + 1 entries")
        if offsets[0] < 0 or offsets[nd] > data.shape[0]:
            raise ValueError(f"offsets span [{offsets[0]}, {offsets[nd]}] is outside data (0..{data.shape[0]})")
        for d in range(nd):
            if offsets[d + 1] < offsets[d]:
                raise ValueError(f"offsets must be non-decreasing; offsets[{d + 1}] < offsets[{d}]")
        cdef const uint8_t* base_ptr = &data[0] if data.shape[0] > 0 else NULL
        return self._run(nd, NULL, NULL, base_ptr, &offsets[0],
                         &ends[0] if ends is not None and ends.shape[0] > 0 else NULL,
                         &doc_chunk_offsets[0] if doc_chunk_offsets is not None else NULL,
                         slot, err, chunk_tokens, bos, eos, ends is None,
                         base_ptr + data.shape[0] if base_ptr != NULL else NULL)

    cdef _run(self, Py_ssize_t nd, const uint8_t** doc_ptrs, const int64_t* doc_lens,
              const uint8_t* data, const int64_t* offsets, const int64_t* ends,
              const int64_t* doc_chunk_offsets, int slot, int64_t[::1] err, int64_t* chunk_tokens,
              int64_t bos, int64_t eos, bint inline_split=True, const uint8_t* data_end=NULL):
        """The encode loop over ``nd`` documents: ``doc_ptrs[d][0:doc_lens[d]]`` (texts
        read in place), or ``data[offsets[d]:offsets[d + 1]]`` (one buffer, ``data_end``
        its end), split inline or by ``ends`` / ``doc_chunk_offsets``."""
        cdef Py_ssize_t d, nchunks, win, total = 0
        cdef int64_t start, stop, pos, wend
        cdef int status = STATUS_OK
        cdef Py_ssize_t bad = -1, bad_doc = -1, bad_at = 0
        check_err(err)
        if bos > 0xFFFFFFFF or eos > 0xFFFFFFFF or bos < -1 or eos < -1:
            raise ValueError(f"bos/eos must be uint32 ids or -1, got {bos}, {eos}")
        if doc_ptrs != NULL:
            for d in range(nd):
                total += doc_lens[d]
        elif nd > 0:
            total = offsets[nd] - offsets[0]
        token_offsets = np.zeros(nd + 1, dtype=np.int64)
        cdef int64_t[::1] tv = token_offsets
        cdef vector[int32_t] nxt, prv
        cdef vector[uint32_t] node_rank, batch
        cdef vector[uint64_t] heap
        cdef const uint8_t* base_ptr = data
        cdef const uint8_t* limit = data_end
        cdef Py_ssize_t target = self.slice_bytes
        cdef ChunkCache* cache = self._enter(slot)
        cdef Scratch* sc = &self.scratch[slot]
        cdef Work* w = &sc.work
        w.chunk_tokens = chunk_tokens
        try:
            with nogil:
                cache_presize(cache, total)
                if out_reserve(w, total // 4 + 16) < 0:
                    status = STATUS_NO_MEMORY
                for d in range(nd):
                    if status != STATUS_OK:
                        break
                    if bos >= 0:
                        if out_reserve(w, 1) < 0:
                            status = STATUS_NO_MEMORY
                            break
                        w.out[w.out_size] = <uint32_t>bos
                        w.out_size += 1
                    if doc_ptrs != NULL:
                        base_ptr = doc_ptrs[d]
                        start = 0
                        stop = doc_lens[d]
                        limit = base_ptr + stop
                    else:
                        start = offsets[d]
                        stop = offsets[d + 1]
                    if inline_split:
                        # one slice of chunks at a time: memory stays bounded on huge documents
                        pos = start
                        while pos < stop:
                            wend = window_end(base_ptr, pos, stop, target)
                            win = wend - pos
                            if win > sc.split_cap:
                                # the slot keeps it: at most 2 * slice_bytes + 1 ends
                                win = max(win, min(2 * sc.split_cap, 2 * target))
                                free(sc.split_ends)
                                sc.split_ends = <int64_t*>malloc((win + 1) * sizeof(int64_t))
                                if sc.split_ends == NULL:
                                    sc.split_cap = 0
                                    status = STATUS_NO_MEMORY
                                    break
                                sc.split_cap = win
                                win = wend - pos
                            if self.split == SPLIT_GPT2:
                                nchunks = gpt2_split(base_ptr + pos, win, self.classes, sc.split_ends)
                            else:
                                nchunks = tiktoken_split(base_ptr + pos, win, self.classes, sc.split_ends,
                                                         self.split)
                            if nchunks < 0:
                                status = STATUS_INVALID_UTF8
                                bad = pos + (-nchunks - 1)
                                bad_doc = d
                                break
                            status = encode_span(&self.tables, cache, w, base_ptr + pos, limit, 0,
                                                 sc.split_ends, nchunks, nxt, prv, node_rank, heap, batch,
                                                 &bad_at)
                            if status != STATUS_OK:
                                bad = pos + bad_at
                                bad_doc = d
                                break
                            pos = wend
                    else:
                        nchunks = doc_chunk_offsets[d + 1] - doc_chunk_offsets[d]
                        if nchunks > 0:
                            status = encode_span(&self.tables, cache, w, base_ptr, limit, start,
                                                 &ends[doc_chunk_offsets[d]], nchunks, nxt, prv,
                                                 node_rank, heap, batch, &bad_at)
                            if status != STATUS_OK:
                                bad = bad_at
                                bad_doc = d
                    if eos >= 0 and status == STATUS_OK:
                        if out_reserve(w, 1) < 0:
                            status = STATUS_NO_MEMORY
                            break
                        w.out[w.out_size] = <uint32_t>eos
                        w.out_size += 1
                    tv[d + 1] = w.out_size
            if status == STATUS_NO_MEMORY:
                return fail(err, STATUS_NO_MEMORY, -1, -1), None, None
            if status != STATUS_OK:
                return fail(err, status, bad, bad_doc), None, None
            if chunk_tokens != NULL:
                chunk_tokens[w.chunk_n] = w.out_size
            return STATUS_OK, take_ids(w), token_offsets
        finally:
            scratch_end_call(sc)
            cache.busy = False
