# distutils: language = c++
"""BPE merge training (phase 2 of training) with incremental pair counts.

``train_merges`` learns merges from unique pre-tokenized chunks ("words", as
base symbol ids, each with an int64 count).  The rules are DESIGN.md's
(Conventions, training semantics); ``ube_stream._reference.train_bpe_reference``
is the readable twin that recounts every pair at every step, and the parity
tests compare the two merge lists exactly.

Algorithm (what keeps it fast):

* Every distinct pair has a dense index ``p`` with ``pair_count[p]`` (its
  weighted count over all words) and ``pair_words[p]`` (the indices of words
  that may contain it).  Word lists are append-only between clears and may
  hold stale or repeated entries; a per-word stamp skips repeats, and a stale
  word simply holds no occurrence.  A pair whose count drops to zero is
  forgotten (table entry erased, word list freed, index recycled).
* Pair -> index is an open-addressing table (linear probing, 16-byte slots,
  at most half full, backward-shift deletion: no tombstones), not a
  node-based map: one probe usually touches one cache line.
* The first word lists are built in two passes into one exact-size array
  (CSR); lists that grow later move to power-of-two blocks from a pool with
  one free list per size, so no call to malloc per list.
* After a merge, only the words on the merged pair's list are rewritten (in
  place, left to right, without overlap) and only the pairs that touch a
  merged occurrence change their counts.
* A binary max-heap of ``(count, ~pair_key)`` with lazy invalidation: an
  entry that is higher than its pair's current count is re-pushed with the
  current count (or dropped below ``min_frequency``); an entry that is lower
  is dropped, because every rise of a count pushes a fresh entry.  So every
  candidate pair always has an entry >= its count, and the first entry that
  matches its pair's count is the true maximum, ties going to the smallest
  ``(left, right)`` (the largest ``~key``).  The first heap is built in O(n).
* Pairs whose merged token would exceed ``max_token_length`` base symbols are
  never tracked at all (token lengths never change).
* New tokens' expansions (base ids) live in one arena; a merge appends the
  candidate expansion there and looks it up by a 64-bit hash (checked by
  comparing the ids) to reuse an existing id, without a string per token.

Memory: 4 bytes per base symbol of the words (int32, since merged ids exceed
65535), 24 bytes per word of two or more symbols (words shorter than that hold
no pair and are dropped up front), and per distinct pair 48 bytes (table slots
and arrays) plus its word list (4 bytes per (pair, word) entry).
"""
cimport cython
from libc.stdint cimport int32_t, int64_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy
from libcpp.algorithm cimport make_heap, pop_heap, push_heap
from libcpp.pair cimport pair
from libcpp.vector cimport vector

import numpy as np

ctypedef pair[int64_t, uint64_t] heap_entry_t   # (count, ~pair_key): max-heap order

# merges between two progress() calls
PROGRESS_EVERY = 2048

cdef enum:
    MIN_TABLE_BITS = 10
    # word-list blocks of 2**c int32 come from slabs for c < BIG_CLASS, from malloc above
    BIG_CLASS = 14
    SLAB_BYTES = 1 << 20

cdef uint64_t EMPTY_KEY = 0xFFFFFFFFFFFFFFFFULL     # no pair packs to this (ids are >= 0)
cdef uint64_t GOLDEN = 0x9E3779B97F4A7C15ULL


cdef struct PairSlot:
    uint64_t key        # EMPTY_KEY: empty slot
    int32_t index


cdef struct WordList:
    int32_t* data
    int32_t size
    int32_t cap         # > 0: a pool block of cap (a power of two) entries;
                        # <= 0: a slice of the first-lists array with room for -cap


cdef struct ExpansionSlot:
    uint64_t hash
    int32_t token       # -1: empty slot


cdef inline uint64_t pack_pair(int32_t left, int32_t right) noexcept nogil:
    return (<uint64_t>(<uint32_t>left) << 32) | <uint64_t>(<uint32_t>right)


cdef inline uint64_t slot_of(uint64_t key, int shift) noexcept nogil:
    return (key * GOLDEN) >> shift


cdef inline uint64_t hash_ids(const int32_t* ids, int64_t n) noexcept nogil:
    """64-bit hash of a run of token ids (FNV-1a steps, then a final mix)."""
    cdef uint64_t h = 0xCBF29CE484222325ULL ^ <uint64_t>n
    cdef int64_t k
    for k in range(n):
        h = (h ^ <uint32_t>ids[k]) * 0x100000001B3ULL
    h ^= h >> 32
    h *= GOLDEN
    h ^= h >> 29
    return h


cdef inline int size_class(int64_t n) noexcept nogil:
    """Smallest c >= 1 with 2**c >= n."""
    cdef int c = 1
    while (<int64_t>1 << c) < n:
        c += 1
    return c


cdef int raise_memory_error(size_t nbytes) except -1 with gil:
    raise MemoryError(f"BPE training could not allocate {nbytes} bytes; train on fewer bytes "
                      "(max_bytes) or on a machine with more memory")


@cython.final
cdef class _MergeState:
    """All training state; methods run without the GIL."""
    # words (only those with >= 2 symbols), rewritten in place
    cdef vector[int32_t] symbols
    cdef vector[int64_t] word_start
    cdef vector[int32_t] word_len
    cdef vector[int64_t] word_count
    cdef vector[int32_t] word_stamp       # last merge step that rewrote the word
    # pair -> dense index: open addressing, at most half full
    cdef PairSlot* table
    cdef uint64_t table_mask
    cdef int table_shift
    cdef int64_t table_used
    # pairs by dense index
    cdef vector[uint64_t] pair_key
    cdef vector[int64_t] pair_count
    cdef vector[int32_t] pair_stamp       # last merge step whose count rise was recorded
    cdef vector[WordList] pair_words
    cdef vector[int32_t] risen            # pairs whose count rose during this step
    cdef vector[int32_t] free_slots       # indices of pairs whose count fell to zero
    cdef vector[heap_entry_t] heap
    cdef int32_t merging                  # index of the pair being merged (kept alive until the step ends)
    cdef WordList detached                # its word list, while its words are rewritten
    # word-list storage
    cdef int32_t* first_lists             # the first lists, back to back
    cdef void* free_blocks[32]            # per size class: freed blocks, linked through their first bytes
    cdef char* bump
    cdef char* bump_end
    cdef vector[void*] slabs
    # tokens
    cdef vector[int32_t] token_len        # in base symbols
    cdef vector[int32_t] expansion        # new tokens' base ids, back to back
    cdef vector[int64_t] expansion_start  # per new token (index token - n_base), then the end
    cdef vector[ExpansionSlot] expansion_table
    cdef int64_t expansion_used
    # result and limits
    cdef vector[int32_t] merges           # (left, right, result) triples
    cdef int32_t n_base
    cdef int64_t n_vocab
    cdef int64_t max_vocab
    cdef int64_t threshold
    cdef int64_t max_len
    cdef int32_t step

    def __cinit__(self):
        self.table = NULL
        self.first_lists = NULL
        self.bump = NULL
        self.bump_end = NULL
        self.merging = -1
        self.detached.data = NULL
        self.detached.size = 0
        self.detached.cap = 0
        cdef int c
        for c in range(32):
            self.free_blocks[c] = NULL

    def __dealloc__(self):
        cdef size_t k
        for k in range(self.pair_words.size()):
            self.release(&self.pair_words[k])
        self.release(&self.detached)
        for k in range(self.slabs.size()):
            free(self.slabs[k])
        free(self.first_lists)
        free(self.table)

    # ------------------------------------------------------------- word-list blocks

    cdef int32_t* block_alloc(self, int c) except NULL nogil:
        """A block of 2**c int32 entries."""
        cdef size_t nbytes = sizeof(int32_t) << c
        cdef void* block
        if c >= BIG_CLASS:
            block = malloc(nbytes)
            if block == NULL:
                raise_memory_error(nbytes)
            return <int32_t*>block
        block = self.free_blocks[c]
        if block != NULL:
            self.free_blocks[c] = (<void**>block)[0]
            return <int32_t*>block
        if self.bump == NULL or <size_t>(self.bump_end - self.bump) < nbytes:
            block = malloc(SLAB_BYTES)
            if block == NULL:
                raise_memory_error(SLAB_BYTES)
            self.slabs.push_back(block)
            self.bump = <char*>block
            self.bump_end = self.bump + SLAB_BYTES
        block = self.bump
        self.bump += nbytes
        return <int32_t*>block

    cdef inline void block_free(self, int32_t* block, int c) noexcept nogil:
        if c >= BIG_CLASS:
            free(block)
        else:
            (<void**>block)[0] = self.free_blocks[c]
            self.free_blocks[c] = block

    cdef inline void release(self, WordList* words) noexcept nogil:
        if words.cap > 0:
            self.block_free(words.data, size_class(words.cap))
        words.data = NULL
        words.size = 0
        words.cap = 0

    cdef int grow(self, WordList* words) except -1 nogil:
        cdef int64_t room = words.cap if words.cap > 0 else -words.cap
        cdef int c = size_class(room + 1)
        cdef int32_t* block = self.block_alloc(c)
        if words.size:
            memcpy(block, words.data, words.size * sizeof(int32_t))
        if words.cap > 0:
            self.block_free(words.data, size_class(words.cap))
        words.data = block
        words.cap = <int32_t>1 << c
        return 0

    cdef inline int append_word(self, WordList* words, int32_t word) except -1 nogil:
        if words.size and words.data[words.size - 1] == word:
            return 0
        if words.size == (words.cap if words.cap > 0 else -words.cap):
            self.grow(words)
        words.data[words.size] = word
        words.size += 1
        return 0

    # ------------------------------------------------------------- pair table

    cdef int table_init(self, int64_t expected) except -1 nogil:
        cdef int bits = MIN_TABLE_BITS
        cdef size_t k, n
        while (<int64_t>1 << bits) < 2 * expected:
            bits += 1
        n = <size_t>1 << bits
        self.table = <PairSlot*>malloc(n * sizeof(PairSlot))
        if self.table == NULL:
            raise_memory_error(n * sizeof(PairSlot))
        for k in range(n):
            self.table[k].key = EMPTY_KEY
        self.table_mask = n - 1
        self.table_shift = 64 - bits
        self.table_used = 0
        return 0

    cdef int table_grow(self) except -1 nogil:
        cdef PairSlot* old = self.table
        cdef size_t k, n_old = self.table_mask + 1
        cdef uint64_t i
        self.table = NULL
        self.table_init(<int64_t>n_old)     # twice as many slots
        for k in range(n_old):
            if old[k].key != EMPTY_KEY:
                i = slot_of(old[k].key, self.table_shift)
                while self.table[i].key != EMPTY_KEY:
                    i = (i + 1) & self.table_mask
                self.table[i] = old[k]
                self.table_used += 1
        free(old)
        return 0

    cdef inline int32_t table_find(self, uint64_t key) noexcept nogil:
        """The index of pair ``key``, or -1."""
        cdef uint64_t i = slot_of(key, self.table_shift)
        while True:
            if self.table[i].key == key:
                return self.table[i].index
            if self.table[i].key == EMPTY_KEY:
                return -1
            i = (i + 1) & self.table_mask

    cdef void table_erase(self, uint64_t key) noexcept nogil:
        """Remove ``key`` (present) and shift later entries of its run back."""
        cdef uint64_t mask = self.table_mask
        cdef uint64_t i = slot_of(key, self.table_shift), j, home
        while self.table[i].key != key:
            i = (i + 1) & mask
        j = i
        while True:
            j = (j + 1) & mask
            if self.table[j].key == EMPTY_KEY:
                break
            home = slot_of(self.table[j].key, self.table_shift)
            # the entry at j may move to i when i lies on its probe path home..j
            if ((j - i) & mask) <= ((j - home) & mask):
                self.table[i] = self.table[j]
                i = j
        self.table[i].key = EMPTY_KEY
        self.table_used -= 1

    cdef int32_t find_or_add_pair(self, uint64_t key) except -1 nogil:
        """The index of pair ``key``, tracking it (count 0, no words) if new."""
        cdef uint64_t i
        cdef int32_t index
        if 2 * (self.table_used + 1) > <int64_t>(self.table_mask + 1):
            self.table_grow()
        i = slot_of(key, self.table_shift)
        while True:
            if self.table[i].key == key:
                return self.table[i].index
            if self.table[i].key == EMPTY_KEY:
                break
            i = (i + 1) & self.table_mask
        if not self.free_slots.empty():
            index = self.free_slots.back()
            self.free_slots.pop_back()
            self.pair_key[index] = key
            self.pair_count[index] = 0
            self.pair_stamp[index] = -1
        else:
            index = <int32_t>self.pair_key.size()
            self.pair_key.push_back(key)
            self.pair_count.push_back(0)
            self.pair_stamp.push_back(-1)
            self.pair_words.push_back(WordList(NULL, 0, 0))
        self.table[i].key = key
        self.table[i].index = index
        self.table_used += 1
        return index

    cdef void forget_pair(self, int32_t index) noexcept nogil:
        """The pair's count fell to zero: no word holds it any more (its heap
        entries are dropped when popped)."""
        self.table_erase(self.pair_key[index])
        self.release(&self.pair_words[index])
        self.free_slots.push_back(index)

    # ------------------------------------------------------------- counts

    cdef inline bint allowed(self, int32_t left, int32_t right) noexcept nogil:
        return self.max_len < 0 or self.token_len[left] + self.token_len[right] <= self.max_len

    cdef inline int add(self, int32_t left, int32_t right, int64_t amount, int32_t word) except -1 nogil:
        """Count ``amount`` more of pair (left, right), found in ``word``."""
        cdef int32_t index
        if not self.allowed(left, right):
            return 0
        index = self.find_or_add_pair(pack_pair(left, right))
        self.pair_count[index] += amount
        self.append_word(&self.pair_words[index], word)
        if self.pair_stamp[index] != self.step:
            self.pair_stamp[index] = self.step
            self.risen.push_back(index)
        return 0

    cdef inline int remove(self, int32_t left, int32_t right, int64_t amount) except -1 nogil:
        """Count ``amount`` fewer of pair (left, right) (it must be tracked)."""
        cdef int32_t index
        if not self.allowed(left, right):
            return 0
        index = self.table_find(pack_pair(left, right))
        self.pair_count[index] -= amount
        if self.pair_count[index] == 0 and index != self.merging:
            self.forget_pair(index)
        return 0

    cdef int push_risen(self) except -1 nogil:
        cdef int32_t index
        cdef int64_t count
        for index in self.risen:
            count = self.pair_count[index]
            if count >= self.threshold:
                self.heap.push_back(heap_entry_t(count, ~self.pair_key[index]))
                push_heap(self.heap.begin(), self.heap.end())
        self.risen.clear()
        return 0

    # ------------------------------------------------------------- merging

    cdef int rewrite_word(self, int32_t word, int32_t left, int32_t right,
                          int32_t result) except -1 nogil:
        """Merge every non-overlapping (left, right) of ``word``, left to right,
        and move the counts of the pairs that touch a merged occurrence."""
        cdef int32_t* sym = self.symbols.data() + self.word_start[word]
        cdef int32_t n = self.word_len[word]
        cdef int64_t amount = self.word_count[word]
        cdef int32_t i = 0, j, x
        cdef int32_t last_right = -2    # original index of the last merged occurrence's right
        cdef bint out_merged = False    # the last symbol written is a merge of this step
        cdef int64_t merged = 0         # occurrences merged
        # the first occurrence (none: a stale entry)
        while i + 1 < n and not (sym[i] == left and sym[i + 1] == right):
            i += 1
        if i + 1 >= n:
            return 0
        j = i
        # j <= i throughout, and sym[k] for k < j is only overwritten once a merge
        # has happened, so sym[i - 1] (read when j == i) and sym[i + 2] are originals.
        while i < n:
            if i + 1 < n and sym[i] == left and sym[i + 1] == right:
                if i > 0 and last_right != i - 1:
                    self.remove(sym[i - 1], left, amount)
                merged += 1
                if i + 2 < n:
                    self.remove(right, sym[i + 2], amount)
                if j > 0:
                    self.add(sym[j - 1], result, amount, word)
                sym[j] = result
                last_right = i + 1
                out_merged = True
                i += 2
            else:
                x = sym[i]
                if out_merged:
                    self.add(result, x, amount, word)
                sym[j] = x
                out_merged = False
                i += 1
            j += 1
        self.pair_count[self.merging] -= merged * amount
        self.word_len[word] = j
        return 0

    cdef int32_t token_of(self, int32_t left, int32_t right) except -1 nogil:
        """The id of the token that spells left + right: an existing one, or a new one."""
        cdef int64_t start = <int64_t>self.expansion.size()
        cdef int64_t n_left = self.token_len[left], n_right = self.token_len[right]
        cdef int64_t n = n_left + n_right
        cdef int32_t* ids
        cdef int32_t token
        cdef uint64_t h, i, mask
        cdef size_t k
        cdef vector[ExpansionSlot] bigger
        self.expansion.resize(start + n)
        ids = self.expansion.data()
        if left < self.n_base:
            ids[start] = left
        else:
            memcpy(ids + start, ids + self.expansion_start[left - self.n_base], n_left * sizeof(int32_t))
        if right < self.n_base:
            ids[start + n_left] = right
        else:
            memcpy(ids + start + n_left, ids + self.expansion_start[right - self.n_base],
                   n_right * sizeof(int32_t))
        h = hash_ids(ids + start, n)
        mask = self.expansion_table.size() - 1
        i = h & mask
        while self.expansion_table[i].token >= 0:
            token = self.expansion_table[i].token
            if (self.expansion_table[i].hash == h and self.token_len[token] == n and
                    memcmp(ids + self.expansion_start[token - self.n_base], ids + start,
                           n * sizeof(int32_t)) == 0):
                self.expansion.resize(start)    # spelled before: reuse its id
                return token
            i = (i + 1) & mask
        token = <int32_t>self.n_vocab
        self.n_vocab += 1
        self.expansion_start.push_back(start + n)
        self.token_len.push_back(<int32_t>n)
        self.expansion_table[i].hash = h
        self.expansion_table[i].token = token
        self.expansion_used += 1
        if 2 * self.expansion_used > <int64_t>self.expansion_table.size():
            bigger.resize(2 * self.expansion_table.size(), ExpansionSlot(0, -1))
            mask = bigger.size() - 1
            for k in range(self.expansion_table.size()):
                if self.expansion_table[k].token >= 0:
                    i = self.expansion_table[k].hash & mask
                    while bigger[i].token >= 0:
                        i = (i + 1) & mask
                    bigger[i] = self.expansion_table[k]
            self.expansion_table.swap(bigger)
        return token

    cdef int merge_next(self) except -1 nogil:
        """Do the next merge; return 1, or 0 when training is over."""
        cdef heap_entry_t top
        cdef uint64_t key
        cdef int32_t index, left, right, result, word
        cdef int64_t count
        cdef int32_t k
        if self.n_vocab >= self.max_vocab:
            return 0
        while not self.heap.empty():
            top = self.heap.front()
            pop_heap(self.heap.begin(), self.heap.end())
            self.heap.pop_back()
            key = ~top.second
            index = self.table_find(key)
            if index < 0:
                continue  # the pair died out
            count = self.pair_count[index]
            if top.first != count:
                if top.first > count and count >= self.threshold:
                    self.heap.push_back(heap_entry_t(count, top.second))
                    push_heap(self.heap.begin(), self.heap.end())
                continue
            left = <int32_t>(key >> 32)
            right = <int32_t>(<uint32_t>key)
            result = self.token_of(left, right)
            self.merges.push_back(left)
            self.merges.push_back(right)
            self.merges.push_back(result)
            self.step += 1
            # rewrite the words on the pair's list; the pair keeps its index until
            # the step ends (no new pair can take it meanwhile), and no rewrite adds
            # it back: ``result`` is longer than ``left``, so it is neither side
            self.merging = index
            self.detached = self.pair_words[index]
            self.pair_words[index] = WordList(NULL, 0, 0)
            for k in range(self.detached.size):
                word = self.detached.data[k]
                if self.word_stamp[word] != self.step:
                    self.word_stamp[word] = self.step
                    self.rewrite_word(word, left, right, result)
            self.release(&self.detached)
            self.merging = -1
            # every occurrence is merged (a run of ``left == right`` leaves at most
            # a single ``left`` behind), so the pair's count is now zero
            if self.pair_count[index] == 0:
                self.forget_pair(index)
            self.push_risen()
            return 1
        return 0

    cdef int64_t run(self, int64_t limit) except -1 nogil:
        """Up to ``limit`` merges; returns how many were done."""
        cdef int64_t done = 0
        while done < limit and self.merge_next():
            done += 1
        return done

    # ------------------------------------------------------------- setup

    cdef int build(self, const uint16_t[::1] symbols, const int64_t[::1] word_offsets,
                   const int64_t[::1] word_counts) except -1 nogil:
        """Copy the words that hold a pair, count their pairs, build the first
        word lists (two passes: sizes, then entries) and the first heap."""
        cdef Py_ssize_t k, n_words = word_counts.shape[0]
        cdef int64_t start, end, offset, n_kept = 0
        cdef int32_t word, index, n_pairs
        cdef int32_t* pair_at
        cdef int32_t* sym
        cdef int64_t amount, total = 0
        cdef WordList* words
        for k in range(n_words):
            if word_offsets[k + 1] - word_offsets[k] >= 2:
                n_kept += word_offsets[k + 1] - word_offsets[k]
        self.symbols.reserve(<size_t>n_kept)
        for k in range(n_words):
            start = word_offsets[k]
            end = word_offsets[k + 1]
            if end - start < 2:
                continue
            self.word_start.push_back(<int64_t>self.symbols.size())
            self.word_len.push_back(<int32_t>(end - start))
            self.word_count.push_back(word_counts[k])
            for offset in range(start, end):
                self.symbols.push_back(symbols[offset])
        self.word_stamp.assign(self.word_len.size(), 0)
        self.expansion_table.resize(1024, ExpansionSlot(0, -1))
        self.expansion_start.push_back(0)
        self.table_init(n_kept // 16 + 1)

        # pass 1: pair of each position (-1: too long to track), counts, list sizes
        # (kept in .size for now)
        pair_at = <int32_t*>malloc(max(n_kept, 1) * sizeof(int32_t))
        if pair_at == NULL:
            raise_memory_error(n_kept * sizeof(int32_t))
        sym = self.symbols.data()
        for word in range(<int32_t>self.word_len.size()):
            start = self.word_start[word]
            end = start + self.word_len[word] - 1
            amount = self.word_count[word]
            for offset in range(start, end):
                if not self.allowed(sym[offset], sym[offset + 1]):
                    pair_at[offset] = -1
                    continue
                index = self.find_or_add_pair(pack_pair(sym[offset], sym[offset + 1]))
                pair_at[offset] = index
                self.pair_count[index] += amount
                if self.pair_stamp[index] != word:      # first time in this word
                    self.pair_stamp[index] = word
                    self.pair_words[index].size += 1
        # pass 2: slice one array into the lists, then fill them
        n_pairs = <int32_t>self.pair_key.size()
        for index in range(n_pairs):
            total += self.pair_words[index].size
        self.first_lists = <int32_t*>malloc(max(total, 1) * sizeof(int32_t))
        if self.first_lists == NULL:
            free(pair_at)
            raise_memory_error(total * sizeof(int32_t))
        total = 0
        for index in range(n_pairs):
            words = &self.pair_words[index]
            words.data = self.first_lists + total
            words.cap = -words.size
            total += words.size
            words.size = 0
            self.pair_stamp[index] = -1
        for word in range(<int32_t>self.word_len.size()):
            start = self.word_start[word]
            end = start + self.word_len[word] - 1
            for offset in range(start, end):
                index = pair_at[offset]
                if index >= 0:
                    words = &self.pair_words[index]
                    if words.size == 0 or words.data[words.size - 1] != word:
                        words.data[words.size] = word
                        words.size += 1
        free(pair_at)
        # the first heap, built at once
        self.heap.reserve(<size_t>n_pairs)
        for index in range(n_pairs):
            if self.pair_count[index] >= self.threshold:
                self.heap.push_back(heap_entry_t(self.pair_count[index], ~self.pair_key[index]))
        make_heap(self.heap.begin(), self.heap.end())
        return 0


def train_merges(const uint16_t[::1] symbols, const int64_t[::1] word_offsets,
                 const int64_t[::1] word_counts, int n_base, int64_t max_vocab,
                 int64_t min_frequency, int64_t max_token_length, progress=None):
    """Learn BPE merges from weighted words; returns int32 ``(m, 3)`` rows
    ``(left_id, right_id, result_id)`` in rank order.

    ``symbols`` holds the words' base ids back to back, word ``k`` being
    ``symbols[word_offsets[k]:word_offsets[k + 1]]`` with count
    ``word_counts[k]`` (>= 1).  Base ids are ``0..n_base-1``; new tokens take
    ids from ``n_base`` on.  Stops when ``n_base`` + new tokens reaches
    ``max_vocab`` or when no pair occurs ``max(min_frequency, 1)`` times.
    ``max_token_length`` < 0 means no limit on a token's length in base
    symbols.  ``progress(merges_done)`` is called every ``PROGRESS_EVERY``
    merges and at the end, when given.
    """
    cdef Py_ssize_t n_words = word_counts.shape[0]
    cdef Py_ssize_t k, n_symbols = symbols.shape[0]
    cdef int64_t done = 0, batch, limit
    cdef _MergeState state
    cdef Py_ssize_t bad_symbol = -1

    if word_offsets.shape[0] != n_words + 1:
        raise ValueError(f"word_offsets has {word_offsets.shape[0]} entries for {n_words} words; "
                         "expected len(word_counts) + 1 (start of each word, then the end)")
    if not 1 <= n_base <= 65536:
        raise ValueError(f"n_base is {n_base}; expected 1..65536 base symbols (uint16 ids)")
    if max_vocab > 2147483647:
        raise ValueError(f"max_vocab is {max_vocab}; token ids are int32, so at most 2147483647")
    if n_words > 2147483646:
        raise ValueError(f"{n_words} words; at most 2147483646 unique words per call")
    for k in range(n_words):
        if word_counts[k] < 1:
            raise ValueError(f"word {k} has count {word_counts[k]}; counts must be >= 1 "
                             "(drop the words that do not occur)")
        if not 0 <= word_offsets[k] <= word_offsets[k + 1] <= n_symbols:
            raise ValueError(f"word_offsets[{k}:{k + 2}] = {word_offsets[k]}, {word_offsets[k + 1]} "
                             f"is not a non-decreasing range inside symbols (length {n_symbols})")
    with nogil:
        for k in range(n_symbols):
            if symbols[k] >= n_base:
                bad_symbol = k
                break
    if bad_symbol >= 0:
        raise ValueError(f"symbols[{bad_symbol}] = {symbols[bad_symbol]} is not a base id "
                         f"0..{n_base - 1}; route the text with the substrate that has {n_base} symbols")

    state = _MergeState()
    state.n_base = n_base
    state.n_vocab = n_base
    state.max_vocab = max_vocab
    state.threshold = min_frequency if min_frequency > 1 else 1
    state.max_len = max_token_length if max_token_length >= 0 else -1
    state.step = 0
    with nogil:
        state.token_len.assign(n_base, 1)
        state.build(symbols, word_offsets, word_counts)

    limit = PROGRESS_EVERY if progress is not None else (1 << 62)
    while True:
        with nogil:
            batch = state.run(limit)
        done += batch
        if progress is not None:
            progress(done)
        if batch < limit or state.n_vocab >= state.max_vocab:
            break

    merges = np.empty((state.merges.size() // 3, 3), dtype=np.int32)
    cdef int32_t[:, ::1] merges_view = merges
    if state.merges.size():
        memcpy(&merges_view[0, 0], state.merges.data(), state.merges.size() * sizeof(int32_t))
    return merges
