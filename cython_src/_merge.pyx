# distutils: language = c++
"""BPE merge training (phase 2 of training) with incremental pair counts.

``train_merges`` learns merges from unique pre-tokenized chunks ("words", as
base symbol ids, each with an int64 count).  The rules are DESIGN.md's
(Conventions, training semantics); ``ube_stream._reference.train_bpe_reference``
is the readable twin that recounts every pair at every step, and the parity
tests compare the two merge lists exactly.

Algorithm (what keeps it fast):

* ``pair_count[p]``: the weighted count of pair ``p`` over all words, and
  ``pair_words[p]``: the indices of words that (may) contain it.  Word lists
  are append-only between clears and may hold stale or repeated entries; a
  per-word stamp skips repeats, and a stale word simply holds no occurrence.
  A pair whose count drops to zero is forgotten (hash entry erased, word
  list freed, slot recycled for the next new pair).
* After a merge, only the words on the merged pair's list are rewritten (in
  place, left to right, without overlap) and only the pairs that touch a
  merged occurrence change their counts.
* A max-heap of ``(count, ~pair_key)`` with lazy invalidation: an entry that
  is higher than its pair's current count is re-pushed with the current
  count (or dropped below ``min_frequency``); an entry that is lower is
  dropped, because every rise of a count pushes a fresh entry.  So every
  candidate pair always has an entry >= its count, and the first entry that
  matches its pair's count is the true maximum, ties going to the smallest
  ``(left, right)`` (the largest ``~key``).
* Pairs whose merged token would exceed ``max_token_length`` base symbols are
  never tracked at all (token lengths never change).

Memory: 4 bytes per base symbol of the words (int32, since merged ids exceed
65535), 24 bytes per word of two or more symbols (words shorter than that hold
no pair and are dropped up front), and per distinct pair a hash entry, a
count and its word list (4 bytes per (pair, word) occurrence).
"""
from cython.operator cimport dereference as deref
from libc.stdint cimport int32_t, int64_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy
from libcpp.pair cimport pair
from libcpp.queue cimport priority_queue
from libcpp.string cimport string
from libcpp.unordered_map cimport unordered_map
from libcpp.vector cimport vector

import numpy as np

ctypedef pair[int64_t, uint64_t] heap_entry_t   # (count, ~pair_key): max-heap order

# merges between two progress() calls
PROGRESS_EVERY = 2048

cdef inline uint64_t pack_pair(int32_t left, int32_t right) noexcept nogil:
    return (<uint64_t>(<uint32_t>left) << 32) | <uint64_t>(<uint32_t>right)


cdef class _MergeState:
    """All training state; methods run without the GIL."""
    # words (only those with >= 2 symbols), rewritten in place
    cdef vector[int32_t] symbols
    cdef vector[int64_t] word_start
    cdef vector[int32_t] word_len
    cdef vector[int64_t] word_count
    cdef vector[int32_t] word_stamp       # last merge step that rewrote the word
    # pairs: dense index per distinct pair
    cdef unordered_map[uint64_t, int32_t] pair_index
    cdef vector[uint64_t] pair_key
    cdef vector[int64_t] pair_count
    cdef vector[vector[int32_t]] pair_words
    cdef vector[int32_t] pair_stamp       # last merge step whose count rise was recorded
    cdef vector[int32_t] risen            # pairs whose count rose during this step
    cdef vector[int32_t] free_slots       # indices of pairs whose count fell to zero
    cdef priority_queue[heap_entry_t] heap
    # tokens
    cdef vector[int32_t] token_len        # in base symbols
    cdef vector[string] expansion         # base ids as uint16 bytes
    cdef unordered_map[string, int32_t] id_of_expansion
    # result and limits
    cdef vector[int32_t] merges           # (left, right, result) triples
    cdef int64_t n_vocab
    cdef int64_t max_vocab
    cdef int64_t threshold
    cdef int64_t max_len
    cdef int32_t step

    cdef inline bint allowed(self, int32_t left, int32_t right) noexcept nogil:
        return self.max_len < 0 or self.token_len[left] + self.token_len[right] <= self.max_len

    cdef int add(self, int32_t left, int32_t right, int64_t amount, int32_t word) except -1 nogil:
        """Count ``amount`` more of pair (left, right), found in ``word``."""
        cdef uint64_t key
        cdef int32_t index
        cdef unordered_map[uint64_t, int32_t].iterator it
        if not self.allowed(left, right):
            return 0
        key = pack_pair(left, right)
        it = self.pair_index.find(key)
        if it == self.pair_index.end():
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
                self.pair_words.push_back(vector[int32_t]())
                self.pair_stamp.push_back(-1)
            self.pair_index[key] = index
        else:
            index = pair_value(it)
        self.pair_count[index] += amount
        if self.pair_words[index].empty() or self.pair_words[index].back() != word:
            self.pair_words[index].push_back(word)
        if self.pair_stamp[index] != self.step:
            self.pair_stamp[index] = self.step
            self.risen.push_back(index)
        return 0

    cdef int remove(self, int32_t left, int32_t right, int64_t amount) except -1 nogil:
        """Count ``amount`` fewer of pair (left, right) (it must be tracked)."""
        cdef int32_t index
        if not self.allowed(left, right):
            return 0
        cdef uint64_t key = pack_pair(left, right)
        index = pair_value(self.pair_index.find(key))
        self.pair_count[index] -= amount
        if self.pair_count[index] == 0:
            # no word holds the pair any more: forget it (its heap entries are
            # dropped when popped) and recycle its slot
            self.pair_words[index].clear()
            self.pair_words[index].shrink_to_fit()
            self.pair_index.erase(key)
            self.free_slots.push_back(index)
        return 0

    cdef int push_risen(self) except -1 nogil:
        cdef int32_t index
        cdef int64_t count
        for index in self.risen:
            count = self.pair_count[index]
            if count >= self.threshold:
                self.heap.push(heap_entry_t(count, ~self.pair_key[index]))
        self.risen.clear()
        return 0

    cdef int rewrite_word(self, int32_t word, int32_t left, int32_t right,
                          int32_t result) except -1 nogil:
        """Merge every non-overlapping (left, right) of ``word``, left to right,
        and move the counts of the pairs that touch a merged occurrence."""
        cdef int32_t* sym = self.symbols.data() + self.word_start[word]
        cdef int32_t n = self.word_len[word]
        cdef int64_t amount = self.word_count[word]
        cdef int32_t i = 0, j = 0, x
        cdef int32_t last_right = -2    # original index of the last merged occurrence's right
        cdef bint out_merged = False    # the last symbol written is a merge of this step
        # j <= i throughout, and sym[k] for k < j is only overwritten once a merge
        # has happened, so sym[i - 1] (read when j == i) and sym[i + 2] are originals.
        while i < n:
            if i + 1 < n and sym[i] == left and sym[i + 1] == right:
                if i > 0 and last_right != i - 1:
                    self.remove(sym[i - 1], left, amount)
                self.remove(left, right, amount)
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
        self.word_len[word] = j
        return 0

    cdef int merge_next(self) except -1 nogil:
        """Do the next merge; return 1, or 0 when training is over."""
        cdef heap_entry_t top
        cdef uint64_t key
        cdef int32_t index, left, right, result, word
        cdef int64_t count
        cdef string merged
        cdef unordered_map[string, int32_t].iterator found
        cdef unordered_map[uint64_t, int32_t].iterator found_pair
        cdef vector[int32_t] todo
        if self.n_vocab >= self.max_vocab:
            return 0
        while not self.heap.empty():
            top = self.heap.top()
            self.heap.pop()
            key = ~top.second
            found_pair = self.pair_index.find(key)
            if found_pair == self.pair_index.end():
                continue  # the pair died out
            index = pair_value(found_pair)
            count = self.pair_count[index]
            if top.first != count:
                if top.first > count and count >= self.threshold:
                    self.heap.push(heap_entry_t(count, top.second))
                continue
            left = <int32_t>(key >> 32)
            right = <int32_t>(<uint32_t>key)
            merged = self.expansion[left]
            merged.append(self.expansion[right])
            found = self.id_of_expansion.find(merged)
            if found != self.id_of_expansion.end():
                result = expansion_value(found)
            else:
                result = <int32_t>self.n_vocab
                self.n_vocab += 1
                self.expansion.push_back(merged)
                self.id_of_expansion[merged] = result
                self.token_len.push_back(self.token_len[left] + self.token_len[right])
            self.merges.push_back(left)
            self.merges.push_back(right)
            self.merges.push_back(result)
            self.step += 1
            todo.swap(self.pair_words[index])
            for word in todo:
                if self.word_stamp[word] != self.step:
                    self.word_stamp[word] = self.step
                    self.rewrite_word(word, left, right, result)
            self.push_risen()
            return 1
        return 0

    cdef int64_t run(self, int64_t limit) except -1 nogil:
        """Up to ``limit`` merges; returns how many were done."""
        cdef int64_t done = 0
        while done < limit and self.merge_next():
            done += 1
        return done


cdef inline int32_t pair_value(unordered_map[uint64_t, int32_t].iterator it) noexcept nogil:
    return deref(it).second


cdef inline int32_t expansion_value(unordered_map[string, int32_t].iterator it) noexcept nogil:
    return deref(it).second


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
    cdef int64_t start, end, offset
    cdef int32_t s, word
    cdef int64_t done = 0, batch, limit
    cdef _MergeState state
    cdef uint16_t base_id
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
    state.n_vocab = n_base
    state.max_vocab = max_vocab
    state.threshold = min_frequency if min_frequency > 1 else 1
    state.max_len = max_token_length if max_token_length >= 0 else -1
    state.step = 0
    with nogil:
        state.symbols.reserve(<size_t>n_symbols)
        state.token_len.assign(n_base, 1)
        for s in range(n_base):
            base_id = <uint16_t>s
            state.expansion.push_back(string(<char*>&base_id, 2))
        # keep only words that hold a pair
        for k in range(n_words):
            start = word_offsets[k]
            end = word_offsets[k + 1]
            if end - start < 2:
                continue
            state.word_start.push_back(<int64_t>state.symbols.size())
            state.word_len.push_back(<int32_t>(end - start))
            state.word_count.push_back(word_counts[k])
            for offset in range(start, end):
                state.symbols.push_back(symbols[offset])
        state.word_stamp.assign(state.word_len.size(), 0)
        for word in range(<int32_t>state.word_len.size()):
            start = state.word_start[word]
            for offset in range(start, start + state.word_len[word] - 1):
                state.add(state.symbols[offset], state.symbols[offset + 1],
                          state.word_count[word], word)
        state.push_risen()

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
