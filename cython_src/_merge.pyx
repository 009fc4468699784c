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
* Pair -> index is an open-addressing table (linear probing, 8-byte slots: a tag and an index,
  at most three quarters full, backward-shift deletion: no tombstones), not a
  node-based map: one probe usually touches one cache line.
* The first word lists are built in two passes into one exact-size array
  (CSR); lists that grow later move to power-of-two blocks from a pool with
  one free list per size, so no call to malloc per list.
* After a merge, only the words on the merged pair's list are rewritten (in
  place, left to right, without overlap) and only the pairs that touch a
  merged occurrence change their counts.
* Long words (``LONG_WORD`` symbols or more: a whole CJK page can be one
  chunk) are not rewritten at all: they live in doubly linked lists of
  positions, and a pair's list holds the position of each occurrence in them
  (as ``~position``, so negative, beside the short words' indices).  A merge
  sorts its pair's positions and merges each one that still holds the pair,
  left to right, relinking two nodes: its work is proportional to the
  occurrences merged, not to the length of the words that hold them, so
  training time is linear in the data whatever the chunk lengths.  Positions
  are never listed twice for one pair (a position's pair only ever grows
  longer in base symbols), and dead or changed positions are skipped when met.
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

Memory: 4 bytes per base symbol of the short words (int32, since merged ids
exceed 65535), 24 bytes per word of two or more symbols (words shorter than
that hold no pair and are dropped up front), and per distinct pair about 70
bytes (its 40-byte record, 11-21 bytes of table slots, a 16-byte heap entry) plus
its word list (4 bytes per (pair, word) entry).  While the first lists are built,
4 more bytes per symbol.  ``prepare_merges`` copies all of this out of its
inputs, so a caller can free them before ``run_merges`` grows the state.
Long words take 12 bytes per symbol (a node: id, next, previous) and 4 bytes per
listed occurrence (at most three per symbol over the whole training).

Choosing the next merge happens in one place, ``pick_pair`` (the heap's
highest count, smallest key); which pairs are tracked at all is ``allowed``.

Character integrity (``char_starts`` given): one flag per base symbol, 1 where
a character starts.  A pair occurrence is counted, listed and merged only when
both tokens are sequences of whole characters or both lie inside one
character (``eligible``), so no token ever holds part of one character and
anything of another.  ``char_rule=CHAR_PREFIX`` (SCRIPT's within-character rule)
also requires the left token to start the character: inside a character only
its prefix grows, one piece at a time, left to right.  A token's start flag is its first base symbol's and it
ends a character when the next token starts one (or the word ends): short words
keep a flag per symbol, rewritten beside the ids; long words read the static
flag of each node's position.  An occurrence's eligibility depends only on the
extents of its two tokens, so it never changes while the pair is there.
Memory: one more byte per base symbol.
"""
cimport cython
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy
from libcpp.algorithm cimport make_heap, pop_heap, push_heap, sort
from libcpp.pair cimport pair
from libcpp.vector cimport vector

from _hash cimport hash_bytes, mix64, prefetch
from _status cimport STATUS_NO_MEMORY, STATUS_OK, check_err, fail

import numpy as np

cdef extern from *:
    """
    #include <stdlib.h>
    #if defined(__linux__)
    #include <sys/mman.h>
    #endif
    /* nbytes for a large array read at random: on Linux aligned to 2 MiB and
       marked for transparent huge pages, so that its reads do not each miss the
       TLB; NULL when out of memory.  Release with free(). */
    static void* ube_alloc_huge(size_t nbytes) {
    #if defined(__linux__) && defined(MADV_HUGEPAGE)
        const size_t huge = (size_t)1 << 21;
        if (nbytes >= huge) {
            void* block = NULL;
            size_t rounded = (nbytes + huge - 1) & ~(huge - 1);
            if (posix_memalign(&block, huge, rounded) != 0) return NULL;
            madvise(block, rounded, MADV_HUGEPAGE);
            return block;
        }
    #endif
        return malloc(nbytes ? nbytes : 1);
    }
    """
    void* alloc_huge "ube_alloc_huge"(size_t nbytes) noexcept nogil


#: the words' symbols: uint16 for base alphabets, uint32 for SuperBPE stage 2 over a stage-1
#: vocabulary of more than 65536 ids (its words are those ids)
ctypedef fused symbol_t:
    uint16_t
    uint32_t

ctypedef pair[int64_t, uint64_t] heap_entry_t   # (count, ~pair_key): max-heap order

# merges between two progress() calls
PROGRESS_EVERY = 2048

cdef enum:
    MIN_TABLE_BITS = 12
    # word-list blocks of 2**c int32 come from slabs for c < BIG_CLASS, from malloc above
    BIG_CLASS = 6
    SLAB_BYTES = 1 << 20
    PAIR_CHUNK_BITS = 15
    # words fetched ahead while rewriting a pair's words
    PREFETCH_AHEAD = 8
    # long-word nodes fetched ahead while merging a pair's positions
    NODE_AHEAD = 32
    # a forgotten pair keeps a word-list block of up to this many entries for the next pair
    KEEP_BLOCK = 32
    # words of at least this many symbols are linked lists of positions, not rewritten
    LONG_WORD = 64
    # positions of long words are int32 (listed as ~position); words past this stay short
    MAX_LONG_SYMBOLS = 0x7FFFFFF0
    # the flags byte of a token (integrity / max_words): bit 0 it starts a character,
    # bit 1 it starts a chunk, bits 2-7 the chunk starts strictly inside it
    FL_CHAR = 1
    FL_CHUNK = 2
    FL_INSIDE_SHIFT = 2
    MAX_WORDS_LIMIT = 63
    # character-integrity rules (``char_rule``): inside a character, any two pieces may
    # merge (CHAR_PIECES), or only the character's prefix with the next piece (CHAR_PREFIX)
    CHAR_PIECES = 1
    CHAR_PREFIX = 2


cdef struct Word:
    int64_t count
    int64_t start       # of its symbols in ``symbols``
    int32_t length      # in symbols (tokens), shrinks as merges apply
    int32_t stamp       # last merge step that rewrote the word


cdef struct Pair:
    uint64_t key        # (left << 32) | right
    int64_t count       # weighted occurrences over all words
    int32_t* words      # entries that may hold it (a block of ``cap``): the index of a
                        # short word, or ~position of an occurrence in a long word
    int32_t n_words
    int32_t cap         # 0: no block yet; a power of two below 2**BIG_CLASS
    int32_t stamp       # last merge step whose count rise was recorded


cdef struct Node:
    int32_t id          # the token at this position of a long word; -1: merged into its left
    int32_t next        # the next live position of the word; -1: the word's last
    int32_t prev        # the previous live position; -1: the word's first


cdef struct PairSlot:
    uint32_t tag        # the pair's hash; its top bits give the home slot
    int32_t index       # into ``pairs``; -1: empty slot


cdef struct ExpansionSlot:
    uint64_t hash
    int32_t token       # -1: empty slot


cdef inline uint64_t pack_pair(int32_t left, int32_t right) noexcept nogil:
    return (<uint64_t>(<uint32_t>left) << 32) | <uint64_t>(<uint32_t>right)


cdef inline uint32_t pair_tag(uint64_t key) noexcept nogil:
    """32-bit hash of a pair key (the high half of ``mix64``)."""
    return <uint32_t>(mix64(key) >> 32)


cdef inline int size_class(int64_t n) noexcept nogil:
    """Smallest c >= 1 with 2**c >= n."""
    cdef int c = 1
    while (<int64_t>1 << c) < n:
        c += 1
    return c


cdef int raise_memory_error(int64_t nbytes) except -1 with gil:
    """Unwind a failed allocation (``nbytes``, -1: unknown) to ``train_merges``,
    which returns it as STATUS_NO_MEMORY."""
    raise MemoryError(nbytes)


cdef int64_t _wanted(exc):
    """The bytes a MemoryError from ``raise_memory_error`` names, else -1 (a
    std::bad_alloc of a vector, turned into MemoryError by Cython)."""
    return exc.args[0] if exc.args and isinstance(exc.args[0], int) else -1


#: the largest max_words (chunks per token) train_merges takes
MAX_WORDS = MAX_WORDS_LIMIT


@cython.final
cdef class _MergeState:
    """All training state; methods run without the GIL."""
    # short words (2 .. LONG_WORD - 1 symbols), rewritten in place
    cdef vector[int32_t] symbols
    cdef vector[Word] words
    # long words: a doubly linked list of positions each (one node, 12 bytes, per position)
    cdef Node* nodes                      # (huge pages: long words are read at random)
    cdef vector[int32_t] long_start       # first position of each long word, then the end
    cdef vector[int64_t] long_count
    cdef vector[int32_t] positions        # the merged pair's positions in long words, sorted
    # pairs by dense index, in chunks that never move (no copy, no hole when they grow),
    # and pair key -> index: open addressing, at most three quarters full (the tags
    # keep probes off the pairs; half full cost a table twice the size for ~1 M pairs)
    cdef vector[Pair*] pair_chunks
    cdef int32_t n_pairs
    cdef PairSlot* table
    cdef uint32_t table_mask
    cdef int table_shift                  # home slot = tag >> table_shift
    cdef int64_t table_used
    cdef vector[int32_t] risen            # pairs whose count rose during this step
    cdef vector[int32_t] free_slots       # indices of pairs whose count fell to zero
    cdef vector[heap_entry_t] heap
    cdef int32_t merging                  # the pair being merged (kept alive until the step ends)
    cdef int32_t* detached                # its word list, while its words are rewritten
    cdef int32_t detached_cap
    # word-list storage: power-of-two blocks, small ones from slabs with a free list per size
    cdef void* free_blocks[32]            # freed blocks, linked through their first bytes
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
    cdef int32_t n_base                   # the alphabet: ids below it are the words' symbols
    cdef int32_t n_atoms                  # ids below it expand to themselves; n_atoms..n_base - 1
                                          # to preloaded expansions (stage 2 of SuperBPE)
    cdef int64_t n_vocab
    cdef int64_t max_vocab
    cdef int64_t threshold
    cdef int64_t max_len
    cdef int64_t long_word                # words of this many symbols or more are linked lists
    cdef int32_t step
    # character integrity: start flags of the short words' tokens (beside ``symbols``)
    # and of the long words' positions (beside ``nodes``)
    cdef int integrity                    # 0, CHAR_PIECES or CHAR_PREFIX
    cdef int64_t max_words                # > 0: a token covers at most this many chunks (SuperBPE)
    cdef bint flagged                     # integrity or max_words: tokens carry FL_* flags
    cdef vector[uint8_t] starts
    cdef uint8_t* node_starts
    cdef bint ran                         # run_merges has taken it

    def __cinit__(self):
        self.table = NULL
        self.nodes = NULL
        self.node_starts = NULL
        self.integrity = 0
        self.ran = False
        self.max_words = 0
        self.flagged = False
        self.bump = NULL
        self.bump_end = NULL
        self.merging = -1
        self.detached = NULL
        self.detached_cap = 0
        self.n_pairs = 0
        cdef int c
        for c in range(32):
            self.free_blocks[c] = NULL

    def __dealloc__(self):
        cdef size_t k
        cdef int32_t index
        for index in range(self.n_pairs):
            self.block_free(self.pair(index).words, self.pair(index).cap)
        for k in range(self.pair_chunks.size()):
            free(self.pair_chunks[k])
        self.block_free(self.detached, self.detached_cap)
        for k in range(self.slabs.size()):
            free(self.slabs[k])
        free(self.table)
        free(self.nodes)
        free(self.node_starts)

    # ------------------------------------------------------------- word-list blocks

    cdef int32_t* block_alloc(self, int64_t cap) except NULL nogil:
        """A block of ``cap`` int32 entries (a power of two below 2**BIG_CLASS)."""
        cdef size_t nbytes = sizeof(int32_t) * <size_t>cap
        cdef int c
        cdef void* block
        if cap >= (1 << BIG_CLASS):
            block = malloc(nbytes)
            if block == NULL:
                raise_memory_error(nbytes)
            return <int32_t*>block
        c = size_class(cap)
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

    cdef inline void block_free(self, int32_t* block, int64_t cap) noexcept nogil:
        cdef int c
        if cap == 0:
            return
        if cap >= (1 << BIG_CLASS):
            free(block)
        else:
            c = size_class(cap)
            (<void**>block)[0] = self.free_blocks[c]
            self.free_blocks[c] = block

    cdef int grow(self, Pair* pair) except -1 nogil:
        """Room for at least one more word in the pair's list."""
        cdef int64_t cap = <int64_t>1 << size_class(pair.cap + 1)
        if cap > 0x40000000:
            raise_memory_error(-1)      # n_words is int32
        cdef int32_t* block = self.block_alloc(cap)
        if pair.n_words:
            memcpy(block, pair.words, pair.n_words * sizeof(int32_t))
        self.block_free(pair.words, pair.cap)
        pair.words = block
        pair.cap = <int32_t>cap
        return 0

    # ------------------------------------------------------------- pair table

    cdef inline Pair* pair(self, int32_t index) noexcept nogil:
        return self.pair_chunks[index >> PAIR_CHUNK_BITS] + (index & ((1 << PAIR_CHUNK_BITS) - 1))

    cdef int32_t new_pair(self) except -1 nogil:
        """The index of a new pair (no words, no block)."""
        cdef void* chunk
        cdef Pair* pair
        if self.n_pairs == 0x7FFFFFFF:
            raise_memory_error(-1)
        if (self.n_pairs & ((1 << PAIR_CHUNK_BITS) - 1)) == 0:
            chunk = malloc(sizeof(Pair) << PAIR_CHUNK_BITS)
            if chunk == NULL:
                raise_memory_error(sizeof(Pair) << PAIR_CHUNK_BITS)
            self.pair_chunks.push_back(<Pair*>chunk)
        pair = self.pair(self.n_pairs)
        pair.words = NULL
        pair.cap = 0
        self.n_pairs += 1
        return self.n_pairs - 1

    cdef int table_alloc(self, int bits) except -1 nogil:
        """Point ``table`` at 2**bits empty slots (the caller keeps the old ones)."""
        cdef size_t k, n = <size_t>1 << bits
        cdef PairSlot* table = <PairSlot*>malloc(n * sizeof(PairSlot))
        if table == NULL:
            raise_memory_error(n * sizeof(PairSlot))
        for k in range(n):
            table[k].index = -1
        self.table = table
        self.table_mask = <uint32_t>(n - 1)
        self.table_shift = 32 - bits
        self.table_used = 0
        return 0

    cdef int table_grow(self) except -1 nogil:
        """Twice as many slots (the tags give each entry's new home)."""
        cdef PairSlot* old = self.table
        cdef size_t k, n_old = <size_t>self.table_mask + 1
        cdef uint32_t i
        if self.table_shift == 0:
            raise_memory_error(n_old * 2 * sizeof(PairSlot))
        self.table_alloc(32 - self.table_shift + 1)    # on failure the old table stays
        for k in range(n_old):
            if old[k].index >= 0:
                i = old[k].tag >> self.table_shift
                while self.table[i].index >= 0:
                    i = (i + 1) & self.table_mask
                self.table[i] = old[k]
                self.table_used += 1
        free(old)
        return 0

    cdef inline int32_t table_find(self, uint64_t key) noexcept nogil:
        """The index of pair ``key``, or -1."""
        cdef uint32_t tag = pair_tag(key)
        cdef uint32_t i = tag >> self.table_shift
        cdef int32_t index
        while True:
            index = self.table[i].index
            if index < 0:
                return -1
            if self.table[i].tag == tag and self.pair(index).key == key:
                return index
            i = (i + 1) & self.table_mask

    cdef void table_erase(self, int32_t index) noexcept nogil:
        """Remove pair ``index`` (present) and shift later entries of its run back."""
        cdef uint32_t mask = self.table_mask
        cdef uint32_t i = pair_tag(self.pair(index).key) >> self.table_shift, j, home
        while self.table[i].index != index:
            i = (i + 1) & mask
        j = i
        while True:
            j = (j + 1) & mask
            if self.table[j].index < 0:
                break
            home = self.table[j].tag >> self.table_shift
            # the entry at j may move to i when i lies on its probe path home..j
            if ((j - i) & mask) <= ((j - home) & mask):
                self.table[i] = self.table[j]
                i = j
        self.table[i].index = -1
        self.table_used -= 1

    cdef int32_t find_or_add_pair(self, uint64_t key) except -1 nogil:
        """The index of pair ``key``, tracking it (count 0, no words) if new."""
        cdef uint32_t tag = pair_tag(key)
        cdef uint32_t i = tag >> self.table_shift
        cdef int32_t index
        cdef Pair* pair
        while True:
            index = self.table[i].index
            if index < 0:
                break
            if self.table[i].tag == tag and self.pair(index).key == key:
                return index
            i = (i + 1) & self.table_mask
        if 4 * (self.table_used + 1) > 3 * (<int64_t>self.table_mask + 1):
            self.table_grow()
            i = tag >> self.table_shift
            while self.table[i].index >= 0:
                i = (i + 1) & self.table_mask
        if not self.free_slots.empty():
            index = self.free_slots.back()
            self.free_slots.pop_back()
        else:
            index = self.new_pair()
        pair = self.pair(index)
        pair.key = key
        pair.count = 0
        pair.n_words = 0
        pair.stamp = -1
        self.table[i].tag = tag
        self.table[i].index = index
        self.table_used += 1
        return index

    cdef void forget_pair(self, int32_t index) noexcept nogil:
        """The pair's count fell to zero: no word holds it any more (its heap
        entries are dropped when popped).  A small block stays for the next
        pair that takes the index."""
        cdef Pair* pair = self.pair(index)
        self.table_erase(index)
        pair.n_words = 0
        if pair.cap > KEEP_BLOCK:
            self.block_free(pair.words, pair.cap)
            pair.words = NULL
            pair.cap = 0
        self.free_slots.push_back(index)

    # ------------------------------------------------------------- counts

    cdef inline bint allowed(self, int32_t left, int32_t right) noexcept nogil:
        return self.max_len < 0 or self.token_len[left] + self.token_len[right] <= self.max_len

    cdef inline bint eligible(self, uint8_t left, uint8_t right, bint right_ends) noexcept nogil:
        """May this occurrence merge?  ``left``, ``right``: the two tokens' FL_*
        flags; ``right_ends``: the right token ends a character.

        Character integrity: yes when both are whole-character sequences, or when
        both lie inside one character (the right does not start one, so neither
        crosses a boundary: every token is whole characters or part of one);
        under CHAR_PREFIX (SCRIPT's rule) the left must also start the character,
        so a character's pieces merge left to right, each token inside it a prefix.
        max_words: the merged token covers fewer than ``max_words`` chunk starts
        strictly inside it (the chunk starts inside each token, plus the right
        token's own start when it starts a chunk)."""
        if self.integrity and (right & FL_CHAR) and not ((left & FL_CHAR) and right_ends):
            return False
        if self.integrity == CHAR_PREFIX and not (left & FL_CHAR):
            return False
        if self.max_words > 0 and (left >> FL_INSIDE_SHIFT) + (right >> FL_INSIDE_SHIFT) + (
                (right >> 1) & 1) >= self.max_words:
            return False
        return True

    cdef inline uint8_t combine(self, uint8_t left, uint8_t right) noexcept nogil:
        """The FL_* flags of the token that merges ``left`` and ``right`` (an
        eligible occurrence: the inside count stays below max_words <= 63)."""
        return (left & (FL_CHAR | FL_CHUNK)) | <uint8_t>(
            ((left >> FL_INSIDE_SHIFT) + (right >> FL_INSIDE_SHIFT) + ((right >> 1) & 1)) << FL_INSIDE_SHIFT)

    cdef inline bint short_ok(self, const uint8_t* st, int32_t i, int32_t n) noexcept nogil:
        """``eligible`` for the tokens at i, i + 1 of a short word of n tokens."""
        if not self.flagged:
            return True
        return self.eligible(st[i], st[i + 1], i + 2 >= n or (st[i + 2] & FL_CHAR))

    cdef inline bint long_ok(self, int32_t p) noexcept nogil:
        """``eligible`` for the token at long-word position p and the next one."""
        cdef int32_t q, r
        if not self.flagged:
            return True
        q = self.nodes[p].next
        r = self.nodes[q].next
        return self.eligible(self.node_starts[p], self.node_starts[q], r < 0 or (self.node_starts[r] & FL_CHAR))

    cdef inline int add(self, int32_t left, int32_t right, int64_t amount, int32_t word) except -1 nogil:
        """Count ``amount`` more of pair (left, right), found in ``word`` (a short
        word's index, or ~position of the occurrence in a long word)."""
        cdef int32_t index
        cdef Pair* pair
        if not self.allowed(left, right):
            return 0
        index = self.find_or_add_pair(pack_pair(left, right))
        pair = self.pair(index)
        pair.count += amount
        if pair.n_words == 0 or pair.words[pair.n_words - 1] != word:
            if pair.n_words == pair.cap:
                self.grow(pair)
            pair.words[pair.n_words] = word
            pair.n_words += 1
        if pair.stamp != self.step:
            pair.stamp = self.step
            self.risen.push_back(index)
        return 0

    cdef inline int remove(self, int32_t left, int32_t right, int64_t amount) except -1 nogil:
        """Count ``amount`` fewer of pair (left, right) (it must be tracked)."""
        cdef int32_t index
        if not self.allowed(left, right):
            return 0
        index = self.table_find(pack_pair(left, right))
        self.pair(index).count -= amount
        if self.pair(index).count == 0 and index != self.merging:
            self.forget_pair(index)
        return 0

    cdef int push_risen(self) except -1 nogil:
        cdef int32_t index
        cdef int64_t count
        for index in self.risen:
            count = self.pair(index).count
            if count >= self.threshold:
                self.heap.push_back(heap_entry_t(count, ~self.pair(index).key))
                push_heap(self.heap.begin(), self.heap.end())
        self.risen.clear()
        return 0

    # ------------------------------------------------------------- merging

    cdef int rewrite_word(self, int32_t word, int32_t left, int32_t right,
                          int32_t result) except -1 nogil:
        """Merge every non-overlapping (left, right) of ``word``, left to right,
        and move the counts of the pairs that touch a merged occurrence."""
        cdef Word* w = &self.words[word]
        cdef int32_t* sym = self.symbols.data() + w.start
        cdef uint8_t* st = self.starts.data() + w.start if self.flagged else NULL
        cdef int32_t n = w.length
        cdef int64_t amount = w.count
        cdef int32_t i = 0, j, x
        cdef int32_t last_right = -2    # original index of the last merged occurrence's right
        cdef bint out_merged = False    # the last symbol written is a merge of this step
        cdef int64_t merged = 0         # occurrences merged
        # the first occurrence (none: a stale entry)
        while i + 1 < n and not (sym[i] == left and sym[i + 1] == right and self.short_ok(st, i, n)):
            i += 1
        if i + 1 >= n:
            return 0
        j = i
        # j <= i throughout, and sym[k] for k < j is only overwritten once a merge
        # has happened, so sym[i - 1] (read when j == i) and sym[i + 2] are originals
        # (and so are the start flags st[i - 1], st[i + 1 ...]; st[k < j] are the new tokens').
        while i < n:
            if i + 1 < n and sym[i] == left and sym[i + 1] == right and self.short_ok(st, i, n):
                if i > 0 and last_right != i - 1 and self.short_ok(st, i - 1, n):
                    self.remove(sym[i - 1], left, amount)
                merged += 1
                if i + 2 < n and self.short_ok(st, i + 1, n):
                    self.remove(right, sym[i + 2], amount)
                if j > 0 and (not self.flagged or
                              self.eligible(st[j - 1], self.combine(st[i], st[i + 1]),
                                            i + 2 >= n or (st[i + 2] & FL_CHAR))):
                    self.add(sym[j - 1], result, amount, word)
                sym[j] = result
                if self.flagged:
                    st[j] = self.combine(st[i], st[i + 1])
                last_right = i + 1
                out_merged = True
                i += 2
            else:
                x = sym[i]
                if out_merged and (not self.flagged or
                                   self.eligible(st[j - 1], st[i], i + 1 >= n or (st[i + 1] & FL_CHAR))):
                    self.add(result, x, amount, word)
                sym[j] = x
                if self.flagged:
                    st[j] = st[i]
                out_merged = False
                i += 1
            j += 1
        self.pair(self.merging).count -= merged * amount
        self.words[word].length = j
        return 0

    cdef int32_t token_of(self, int32_t left, int32_t right) except -1 nogil:
        """The id of the token that spells left + right: an existing one, or a new one."""
        cdef int64_t start = <int64_t>self.expansion.size()
        cdef int64_t n_left = self.token_len[left], n_right = self.token_len[right]
        cdef int64_t n = n_left + n_right
        cdef int32_t* ids
        self.expansion.resize(start + n)
        ids = self.expansion.data()
        if left < self.n_atoms:
            ids[start] = left
        else:
            memcpy(ids + start, ids + self.expansion_start[left - self.n_atoms], n_left * sizeof(int32_t))
        if right < self.n_atoms:
            ids[start + n_left] = right
        else:
            memcpy(ids + start + n_left, ids + self.expansion_start[right - self.n_atoms],
                   n_right * sizeof(int32_t))
        return self.intern(start, n)

    cdef int32_t intern(self, int64_t start, int64_t n) except -1 nogil:
        """The id of the token spelled by the ``n`` atoms at ``expansion[start:]``
        (just appended): an existing one (the appended copy is dropped), or the
        next id."""
        cdef int32_t* ids = self.expansion.data()
        cdef int32_t token
        cdef uint64_t h, i, mask
        cdef size_t k
        cdef vector[ExpansionSlot] bigger
        h = hash_bytes(<const uint8_t*>(ids + start), n * <int64_t>sizeof(int32_t))
        mask = self.expansion_table.size() - 1
        i = h & mask
        while self.expansion_table[i].token >= 0:
            token = self.expansion_table[i].token
            if (self.expansion_table[i].hash == h and self.token_len[token] == n and
                    memcmp(ids + self.expansion_start[token - self.n_atoms], ids + start,
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

    cdef int32_t pick_pair(self) except -2 nogil:
        """The pair to merge next, or -1 when none is left: the highest count (at
        least ``threshold``), ties to the smallest ``(left, right)``.  This is the
        one place that chooses a merge; a rule on which tracked pairs may merge
        belongs here (drop the popped entry when the pair may not)."""
        cdef heap_entry_t top
        cdef int32_t index
        cdef int64_t count
        while not self.heap.empty():
            top = self.heap.front()
            pop_heap(self.heap.begin(), self.heap.end())
            self.heap.pop_back()
            index = self.table_find(~top.second)
            if index < 0:
                continue  # the pair died out
            count = self.pair(index).count
            if top.first != count:
                if top.first > count and count >= self.threshold:
                    self.heap.push_back(heap_entry_t(count, top.second))
                    push_heap(self.heap.begin(), self.heap.end())
                continue
            return index
        return -1

    cdef int merge_next(self) except -1 nogil:
        """Do the next merge; return 1, or 0 when training is over."""
        cdef uint64_t key
        cdef int32_t index, left, right, result, word, n_words, ahead
        cdef int32_t k
        if self.n_vocab >= self.max_vocab:
            return 0
        index = self.pick_pair()
        if index < 0:
            return 0
        key = self.pair(index).key
        left = <int32_t>(key >> 32)
        right = <int32_t>(<uint32_t>key)
        result = self.token_of(left, right)
        self.merges.push_back(left)
        self.merges.push_back(right)
        self.merges.push_back(result)
        self.step += 1
        # rewrite the short words on the pair's list and gather its positions in
        # long words; the pair keeps its index until the step ends (no new pair
        # can take it meanwhile), and no rewrite adds it back: ``result`` is
        # longer than ``left``, so it is neither side
        self.merging = index
        self.detached = self.pair(index).words
        self.detached_cap = self.pair(index).cap
        n_words = self.pair(index).n_words
        self.pair(index).words = NULL
        self.pair(index).cap = 0
        self.pair(index).n_words = 0
        self.positions.clear()
        for k in range(n_words):
            # the words are scattered: fetch ahead, the record first, then its symbols
            if k + 2 * PREFETCH_AHEAD < n_words:
                ahead = self.detached[k + 2 * PREFETCH_AHEAD]
                if ahead >= 0:
                    prefetch(&self.words[ahead])
            if k + PREFETCH_AHEAD < n_words:
                ahead = self.detached[k + PREFETCH_AHEAD]
                if ahead >= 0:
                    prefetch(self.symbols.data() + self.words[ahead].start)
            word = self.detached[k]
            if word < 0:
                self.positions.push_back(~word)
            elif self.words[word].stamp != self.step:
                self.words[word].stamp = self.step
                self.rewrite_word(word, left, right, result)
        self.block_free(self.detached, self.detached_cap)
        self.detached = NULL
        self.detached_cap = 0
        if not self.positions.empty():
            sort(self.positions.begin(), self.positions.end())
            self.merge_positions(left, right, result)
        self.merging = -1
        # every occurrence is merged (a run of ``left == right`` leaves at most
        # a single ``left`` behind), so the pair's count is now zero
        if self.pair(index).count == 0:
            self.forget_pair(index)
        self.push_risen()
        return 1

    cdef int32_t long_word_of(self, int32_t position) noexcept nogil:
        """The long word that holds ``position`` (binary search of the starts)."""
        cdef int32_t lo = 0, hi = <int32_t>self.long_start.size() - 1, mid
        while hi - lo > 1:      # long_start[lo] <= position < long_start[hi]
            mid = lo + (hi - lo) // 2
            if self.long_start[mid] <= position:
                lo = mid
            else:
                hi = mid
        return lo

    cdef int merge_positions(self, int32_t left, int32_t right, int32_t result) except -1 nogil:
        """Merge each of ``positions`` (sorted) that still holds (left, right),
        left to right, relinking the long word's list, and move the counts of
        the pairs that touch the merged occurrence: what ``rewrite_word`` does,
        without touching the rest of the word."""
        cdef Node* nodes = self.nodes
        cdef int32_t p, q, r, before, word
        cdef uint8_t merged_flags
        cdef int32_t last_merged = -1   # the position merged just before (its result sits there)
        cdef int32_t lo = 0, hi = 0     # positions of the long word whose count is ``amount``
        cdef int64_t amount = 0, merged = 0
        cdef size_t k
        for k in range(self.positions.size()):
            if k + NODE_AHEAD < self.positions.size():
                prefetch(nodes + self.positions[k + NODE_AHEAD])
            p = self.positions[k]
            if nodes[p].id != left:
                continue        # merged away, or its token changed
            q = nodes[p].next
            if q < 0 or nodes[q].id != right:
                continue        # its right neighbour changed
            if not self.long_ok(p):
                continue        # never listed (same extents as when listed), kept as a guard
            if not lo <= p < hi:
                word = self.long_word_of(p)
                lo = self.long_start[word]
                hi = self.long_start[word + 1]
                amount = self.long_count[word]
            before = nodes[p].prev
            r = nodes[q].next
            merged_flags = self.combine(self.node_starts[p], self.node_starts[q]) if self.flagged else 0
            if before >= 0:
                # (before, p) was removed already when ``before`` was merged just now
                if before != last_merged and self.long_ok(before):
                    self.remove(nodes[before].id, left, amount)
                if not self.flagged or self.eligible(self.node_starts[before], merged_flags,
                                                     r < 0 or (self.node_starts[r] & FL_CHAR)):
                    self.add(nodes[before].id, result, amount, ~before)
            if r >= 0:
                if self.long_ok(q):
                    self.remove(right, nodes[r].id, amount)
                # when r starts the next occurrence, that merge adds (result, result)
                if not (nodes[r].id == left and nodes[r].next >= 0 and nodes[nodes[r].next].id == right
                        and self.long_ok(r)):
                    if not self.flagged or self.eligible(
                            merged_flags, self.node_starts[r],
                            nodes[r].next < 0 or (self.node_starts[nodes[r].next] & FL_CHAR)):
                        self.add(result, nodes[r].id, amount, ~p)
                nodes[r].prev = p
            if self.flagged:
                self.node_starts[p] = merged_flags
            nodes[p].id = result
            nodes[p].next = r
            nodes[q].id = -1
            merged += amount
            last_merged = p
        self.pair(self.merging).count -= merged
        return 0

    cdef int64_t run(self, int64_t limit) except -1 nogil:
        """Up to ``limit`` merges; returns how many were done."""
        cdef int64_t done = 0
        while done < limit and self.merge_next():
            done += 1
        return done

    # ------------------------------------------------------------- setup

    cdef int preload(self, const int32_t[::1] expansions, const int64_t[::1] offsets) except -1 nogil:
        """The expansion table, holding the tokens ``n_atoms..n_base - 1`` (their
        atoms ``expansions[offsets[t - n_atoms]:offsets[t - n_atoms + 1]]``)."""
        cdef int32_t t
        cdef int64_t start, n
        self.expansion_table.resize(1024, ExpansionSlot(0, -1))
        self.expansion_start.push_back(0)
        for t in range(self.n_atoms, self.n_base):
            start = <int64_t>self.expansion.size()
            n = offsets[t - self.n_atoms + 1] - offsets[t - self.n_atoms]
            self.expansion.resize(start + n)
            memcpy(self.expansion.data() + start, &expansions[offsets[t - self.n_atoms]], n * sizeof(int32_t))
            if self.intern(start, n) != t:
                raise_memory_error(-2)      # two ids spell the same atoms (checked by the caller)
        return 0

    cdef int build(self, const symbol_t[::1] symbols, const int64_t[::1] word_offsets,
                   const int64_t[::1] word_counts, const uint8_t[::1] flags) except -1 nogil:
        """Copy the words that hold a pair (short ones back to back, long ones
        into linked lists), count their pairs, build the first word lists (two
        passes: sizes, then entries) and the first heap."""
        cdef Py_ssize_t k, n_words = word_counts.shape[0]
        cdef int64_t start, end, length, offset, n_kept = 0, n_words_kept = 0, n_long = 0
        cdef int32_t word, index, n_pairs, size, position, entry
        cdef int32_t* pair_at           # short words' positions, then long words'
        cdef int32_t* sym
        cdef Node* nodes
        cdef int64_t amount
        cdef Word* w
        cdef Pair* pair
        cdef size_t n_long_words
        self.long_start.push_back(0)
        for k in range(n_words):
            length = word_offsets[k + 1] - word_offsets[k]
            if length >= self.long_word and n_long + length <= MAX_LONG_SYMBOLS:
                n_long += length
                self.long_start.push_back(<int32_t>n_long)
                self.long_count.push_back(word_counts[k])
            elif length >= 2:
                n_kept += length
                n_words_kept += 1
        n_long_words = self.long_count.size()
        self.symbols.resize(<size_t>n_kept)
        self.words.resize(<size_t>n_words_kept)
        self.nodes = <Node*>alloc_huge(<size_t>n_long * sizeof(Node))
        if self.nodes == NULL:
            raise_memory_error(n_long * sizeof(Node))
        if self.flagged:
            self.starts.resize(<size_t>n_kept)
            self.node_starts = <uint8_t*>malloc(max(n_long, 1))
            if self.node_starts == NULL:
                raise_memory_error(n_long)
        sym = self.symbols.data()
        nodes = self.nodes
        n_kept = 0
        n_long = 0
        word = 0
        for k in range(n_words):
            start = word_offsets[k]
            end = word_offsets[k + 1]
            if end - start >= self.long_word and n_long + end - start <= MAX_LONG_SYMBOLS:
                for offset in range(start, end):
                    if self.flagged:
                        self.node_starts[n_long] = flags[offset]
                    nodes[n_long].id = symbols[offset]
                    nodes[n_long].prev = <int32_t>n_long - 1
                    nodes[n_long].next = <int32_t>n_long + 1
                    n_long += 1
                nodes[n_long - (end - start)].prev = -1
                nodes[n_long - 1].next = -1
                continue
            if end - start < 2:
                continue
            w = &self.words[word]
            w.count = word_counts[k]
            w.start = n_kept
            w.length = <int32_t>(end - start)
            w.stamp = 0
            for offset in range(start, end):
                sym[n_kept] = symbols[offset]
                if self.flagged:
                    self.starts[n_kept] = flags[offset]
                n_kept += 1
            word += 1
        self.table_alloc(MIN_TABLE_BITS)

        # pass 1: the pair of each position (-1: too long to track, or a word's
        # last), counts, and list sizes (kept in .cap for now): one entry per short
        # word that holds the pair, one per occurrence in long words
        pair_at = <int32_t*>malloc(max(n_kept + n_long, 1) * sizeof(int32_t))
        if pair_at == NULL:
            raise_memory_error((n_kept + n_long) * sizeof(int32_t))
        try:
            for word in range(<int32_t>n_words_kept):
                w = &self.words[word]
                amount = w.count
                for offset in range(w.start, w.start + w.length - 1):
                    if not (self.allowed(sym[offset], sym[offset + 1]) and
                            self.short_ok(self.starts.data() + w.start if self.flagged else NULL,
                                          <int32_t>(offset - w.start), w.length)):
                        pair_at[offset] = -1
                        continue
                    index = self.find_or_add_pair(pack_pair(sym[offset], sym[offset + 1]))
                    pair_at[offset] = index
                    pair = self.pair(index)
                    pair.count += amount
                    if pair.stamp != word:      # first time in this word
                        pair.stamp = word
                        pair.cap += 1
            for k in range(<Py_ssize_t>n_long_words):
                amount = self.long_count[k]
                for position in range(self.long_start[k], self.long_start[k + 1]):
                    pair_at[n_kept + position] = -1
                    if nodes[position].next < 0 or not self.allowed(nodes[position].id, nodes[position + 1].id):
                        continue
                    if not self.long_ok(position):
                        continue
                    index = self.find_or_add_pair(pack_pair(nodes[position].id, nodes[position + 1].id))
                    pair_at[n_kept + position] = index
                    pair = self.pair(index)
                    pair.count += amount
                    pair.cap += 1
            # pass 2: a block per list, then the entries
            n_pairs = self.n_pairs
            for index in range(n_pairs):
                pair = self.pair(index)
                size = pair.cap
                pair.cap = 0
                pair.stamp = -1
                if size < (1 << BIG_CLASS):
                    size = <int32_t>1 << size_class(size)
                pair.words = self.block_alloc(size)
                pair.cap = size
            for word in range(<int32_t>n_words_kept):
                w = &self.words[word]
                for offset in range(w.start, w.start + w.length - 1):
                    index = pair_at[offset]
                    if index >= 0:
                        pair = self.pair(index)
                        if pair.n_words == 0 or pair.words[pair.n_words - 1] != word:
                            pair.words[pair.n_words] = word
                            pair.n_words += 1
            for position in range(<int32_t>n_long):
                index = pair_at[n_kept + position]
                if index >= 0:
                    pair = self.pair(index)
                    entry = ~position
                    pair.words[pair.n_words] = entry
                    pair.n_words += 1
        finally:
            free(pair_at)
        # the first heap, built at once
        self.heap.reserve(<size_t>n_pairs)
        for index in range(n_pairs):
            if self.pair(index).count >= self.threshold:
                self.heap.push_back(heap_entry_t(self.pair(index).count, ~self.pair(index).key))
        make_heap(self.heap.begin(), self.heap.end())
        return 0


def train_merges(symbols, word_offsets, word_counts, int n_base, int64_t max_vocab,
                 int64_t min_frequency, int64_t max_token_length, progress=None,
                 int64_t[::1] err=None, *, int64_t long_word=LONG_WORD, char_starts=None,
                 str char_rule="pieces", chunk_starts=None, int64_t max_words=-1, int n_atoms=-1, expansions=None,
                 expansion_offsets=None):
    """Learn BPE merges from weighted words; returns ``(status, merges)``:
    int32 ``(m, 3)`` rows ``(left_id, right_id, result_id)`` in rank order.

    ``symbols`` holds the words' base ids back to back, word ``k`` being
    ``symbols[word_offsets[k]:word_offsets[k + 1]]`` with count
    ``word_counts[k]`` (>= 1).  Base ids are ``0..n_base-1``; new tokens take
    ids from ``n_base`` on.  Stops when ``n_base`` + new tokens reaches
    ``max_vocab`` or when no pair occurs ``max(min_frequency, 1)`` times.
    ``max_token_length`` < 0 means no limit on a token's length in base
    symbols.  ``progress(merges_done)`` is called every ``PROGRESS_EVERY``
    merges and at the end, when given.  Words of ``long_word`` symbols or
    more are merged as linked lists of positions (the result is the same;
    tests move the threshold to run either path on any corpus).
    ``char_starts`` (uint8, one per symbol, 1 where a character starts):
    train under the character-integrity constraint (module docstring); None
    trains without it.  ``char_rule``: ``"pieces"`` (any two pieces of one
    character may merge) or ``"prefix"`` (SCRIPT's rule: only the character's
    prefix and the next piece).

    SuperBPE's stage 2 (README, SuperBPE): ``chunk_starts`` (uint8, one per
    symbol, 1 where a chunk starts) with ``max_words`` W (1..63): a merge
    occurrence may cover fewer than W chunk starts strictly inside it (at most
    W chunks).  ``n_atoms`` (< n_base; default n_base): ids ``0..n_atoms-1``
    are atoms (single base symbols) and ids ``n_atoms..n_base-1`` tokens
    already made, whose atoms are ``expansions[expansion_offsets[t - n_atoms]:
    expansion_offsets[t - n_atoms + 1]]``: their lengths count for
    ``max_token_length``, and a merge that spells one of them reuses its id,
    so the merge list continues the earlier one exactly.  Arguments
    out of range raise
    ValueError; when the training state cannot grow the status is
    ``STATUS_NO_MEMORY`` (``err[0]``: the bytes it could not allocate, or -1).

    It is ``prepare_merges`` then ``run_merges``: a caller that can drop its
    inputs in between (they are copied into the state) calls the two itself.
    """
    status, state = prepare_merges(symbols, word_offsets, word_counts, n_base, max_vocab, min_frequency,
                                   max_token_length, err, long_word=long_word, char_starts=char_starts,
                                   char_rule=char_rule, chunk_starts=chunk_starts, max_words=max_words, n_atoms=n_atoms,
                                   expansions=expansions, expansion_offsets=expansion_offsets)
    if state is None:
        return status, None
    return run_merges(state, progress, err)


def prepare_merges(const symbol_t[::1] symbols, const int64_t[::1] word_offsets,
                   const int64_t[::1] word_counts, int n_base, int64_t max_vocab,
                   int64_t min_frequency, int64_t max_token_length,
                   int64_t[::1] err=None, *, int64_t long_word=LONG_WORD,
                   const uint8_t[::1] char_starts=None, str char_rule="pieces",
                   const uint8_t[::1] chunk_starts=None,
                   int64_t max_words=-1, int n_atoms=-1, const int32_t[::1] expansions=None,
                   const int64_t[::1] expansion_offsets=None):
    """The first half of ``train_merges`` (same arguments, same checks): copy the
    words into a training state, count their pairs and build the first heap.
    Returns ``(status, state)``, ``state`` None unless the status is OK; the
    state keeps no reference to the inputs, so the caller may free them before
    ``run_merges(state, ...)`` (the merge loop's memory then no longer adds to
    theirs)."""
    cdef Py_ssize_t n_words = word_counts.shape[0]
    cdef Py_ssize_t k, n_symbols = symbols.shape[0]
    cdef _MergeState state
    cdef Py_ssize_t bad_symbol = -1

    if word_offsets.shape[0] != n_words + 1:
        raise ValueError(f"word_offsets has {word_offsets.shape[0]} entries for {n_words} words; "
                         "expected len(word_counts) + 1 (start of each word, then the end)")
    cdef int64_t max_base = 2147483647
    if symbol_t is uint16_t:
        max_base = 65536
    if not 1 <= n_base <= max_base:
        raise ValueError(f"n_base is {n_base}; expected 1..65536 base symbols (uint16 ids; uint32 symbols "
                         "take up to 2**31 - 1)")
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
    if char_starts is not None and char_starts.shape[0] != n_symbols:
        raise ValueError(f"char_starts has {char_starts.shape[0]} flags for {n_symbols} symbols; "
                         "expected one per symbol (1 where a character starts)")
    if char_rule not in ("pieces", "prefix"):
        raise ValueError(f"char_rule is {char_rule!r}; expected 'pieces' (any two pieces of one character "
                         "may merge) or 'prefix' (only a character's prefix and its next piece)")
    if (chunk_starts is None) != (max_words < 0):
        raise ValueError("chunk_starts and max_words go together (SuperBPE stage 2): pass both or neither")
    if chunk_starts is not None and chunk_starts.shape[0] != n_symbols:
        raise ValueError(f"chunk_starts has {chunk_starts.shape[0]} flags for {n_symbols} symbols; "
                         "expected one per symbol (1 where a chunk starts)")
    if max_words >= 0 and not 1 <= max_words <= MAX_WORDS_LIMIT:
        raise ValueError(f"max_words is {max_words}; expected 1..{MAX_WORDS_LIMIT} chunks per token")
    if n_atoms < 0:
        n_atoms = n_base
    if not 1 <= n_atoms <= n_base:
        raise ValueError(f"n_atoms is {n_atoms}; expected 1..n_base = {n_base}")
    if n_atoms < n_base and (expansions is None or expansion_offsets is None
                             or expansion_offsets.shape[0] != n_base - n_atoms + 1):
        raise ValueError(f"ids {n_atoms}..{n_base - 1} need their expansions: expansion_offsets with "
                         f"n_base - n_atoms + 1 = {n_base - n_atoms + 1} entries and expansions")
    if n_atoms < n_base:
        if expansion_offsets[0] != 0 or expansion_offsets[n_base - n_atoms] != expansions.shape[0]:
            raise ValueError("expansion_offsets must run from 0 to len(expansions)")
        for k in range(n_base - n_atoms):
            if expansion_offsets[k + 1] - expansion_offsets[k] < 2:
                raise ValueError(f"the expansion of id {n_atoms + k} has fewer than 2 atoms")
        for k in range(expansions.shape[0]):
            if not 0 <= expansions[k] < n_atoms:
                raise ValueError(f"expansions[{k}] = {expansions[k]} is not an atom 0..{n_atoms - 1}")
        spelled = np.asarray(expansions).tobytes()
        seen = {}
        for k in range(n_base - n_atoms):
            key = spelled[4 * expansion_offsets[k]:4 * expansion_offsets[k + 1]]
            if key in seen:
                raise ValueError(f"ids {n_atoms + seen[key]} and {n_atoms + k} have the same expansion")
            seen[key] = k
    flags = None
    if char_starts is not None or chunk_starts is not None:
        flags = np.zeros(n_symbols, dtype=np.uint8)
        if char_starts is not None:
            flags |= (np.asarray(char_starts) != 0).astype(np.uint8) * FL_CHAR
        if chunk_starts is not None:
            flags |= (np.asarray(chunk_starts) != 0).astype(np.uint8) * FL_CHUNK
    cdef const uint8_t[::1] flags_view = flags
    check_err(err)

    state = _MergeState()
    state.integrity = 0 if char_starts is None else CHAR_PREFIX if char_rule == "prefix" else CHAR_PIECES
    state.max_words = max_words if max_words > 0 else 0
    state.flagged = flags is not None
    state.n_base = n_base
    state.n_atoms = n_atoms
    state.n_vocab = n_atoms
    state.max_vocab = max_vocab
    state.threshold = min_frequency if min_frequency > 1 else 1
    state.max_len = max_token_length if max_token_length >= 0 else -1
    state.long_word = long_word if long_word >= 2 else 2
    state.step = 0
    try:
        with nogil:
            state.token_len.assign(n_atoms, 1)
            state.preload(expansions, expansion_offsets)
            state.build(symbols, word_offsets, word_counts, flags_view)
    except MemoryError as exc:
        return fail(err, STATUS_NO_MEMORY, _wanted(exc), -1), None
    return STATUS_OK, state


def run_merges(_MergeState state not None, progress=None, int64_t[::1] err=None):
    """The second half of ``train_merges``: merge until the vocabulary is full or no
    pair is frequent enough; returns ``(status, merges)`` as ``train_merges`` does.
    A state runs once."""
    cdef int64_t done = 0, batch, limit
    if state.ran:
        raise ValueError("this merge state has run already; prepare_merges a new one")
    state.ran = True
    check_err(err)
    limit = PROGRESS_EVERY if progress is not None else (1 << 62)
    while True:
        try:
            with nogil:
                batch = state.run(limit)
        except MemoryError as exc:
            return fail(err, STATUS_NO_MEMORY, _wanted(exc), -1), None
        done += batch
        if progress is not None:
            progress(done)
        if batch < limit or state.n_vocab >= state.max_vocab:
            break

    merges = np.empty((state.merges.size() // 3, 3), dtype=np.int32)
    cdef int32_t[:, ::1] merges_view = merges
    if state.merges.size():
        memcpy(&merges_view[0, 0], state.merges.data(), state.merges.size() * sizeof(int32_t))
    return STATUS_OK, merges
