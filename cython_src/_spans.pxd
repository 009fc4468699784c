# SuperBPE spans (header-only: _pretok exposes them; the _superword encoder
# cimports the same helpers, so training and encoding share one rule).
#
# Input: a document's stage-1 chunks in order.  A chunk is *joinable* iff it
# holds at least one SPAN_LETTER character and every other character is
# SPAN_GLUE, by the class table of the rule (ube_stream.pretokenizer.
# span_class_table(rule)); that table is all that tells the rules apart:
#
# * rule "v1": SPAN_LETTER = \p{L} or \p{M} (as the installed regex module
#   classifies them), SPAN_GLUE = U+0020 SPACE and the apostrophes U+0027, U+2019.
# * rule "liu" (Liu et al.'s stage-2 pre-tokenization): SPAN_LETTER = every
#   scalar that is not \p{N}, so a chunk is joinable iff it holds no number.
#
# A *span* is a maximal run of consecutive joinable chunks; every other chunk
# is a span of its own.  Two cuts hold under every rule: a span never goes on
# past a chunk that ends with a line feed, nor from a chunk that ends with ':'
# into one that starts with a space (Liu et al. read the training text a line
# at a time and refuse any token holding ": ").  Under "v1" they never fall
# inside a span (a chunk ending with '\n' or ':' is not joinable), so "v1"
# spans are what they were before the cuts.  Spans never cross a document
# (or a special token).
from libc.stdint cimport int64_t, uint8_t, uint32_t

from _utf8 cimport utf8_decode

cdef enum:
    # entries of span_class_table() (ube_stream.pretokenizer.SPAN_*)
    SPAN_OTHER = 0
    SPAN_LETTER = 1     # \p{L} or \p{M}
    SPAN_GLUE = 2       # U+0020, U+0027, U+2019
    SPAN_JOIN_BYTE = 0xFF   # joins a span's chunks in its key (never in UTF-8)


cdef inline int chunk_joinable(const uint8_t* data, Py_ssize_t start, Py_ssize_t stop,
                               const uint8_t* classes) noexcept nogil:
    """1 when the chunk ``data[start:stop]`` is joinable, else 0; ``-(pos + 1)``
    when the bytes at ``pos`` are not well-formed UTF-8 (found before the chunk
    is known not to be joinable: a chunk is read only up to its first character
    that is neither a letter/mark nor glue)."""
    cdef Py_ssize_t i = start
    cdef uint32_t cp = 0
    cdef int length
    cdef uint8_t c
    cdef bint letter = 0
    while i < stop:
        if data[i] < 0x80:
            cp = data[i]
            length = 1
        else:
            length = utf8_decode(data, stop, i, &cp)
            if length == 0:
                return -(i + 1)
        c = classes[cp]
        if c == SPAN_LETTER:
            letter = 1
        elif c != SPAN_GLUE:
            return 0
        i += length
    return letter


cdef inline bint span_cut(const uint8_t* data, int64_t prev_start, int64_t boundary,
                          int64_t next_stop) noexcept nogil:
    """1 when no span crosses from the chunk ``data[prev_start:boundary]`` into the
    chunk ``data[boundary:next_stop]``: the first ends with a line feed, or with
    ':' while the second starts with a space.  0 when either chunk is empty."""
    if prev_start >= boundary or boundary >= next_stop:
        return 0
    cdef uint8_t last = data[boundary - 1]
    return last == 0x0A or (last == 0x3A and data[boundary] == 0x20)


cdef inline Py_ssize_t span_end(const uint8_t* data, const int64_t* ends, Py_ssize_t first,
                                Py_ssize_t stop, int64_t start, const uint8_t* classes) noexcept nogil:
    """The exclusive chunk index where the span that starts at chunk ``first``
    ends (``first < stop``; chunks ``first..stop - 1`` are candidates, chunk
    ``c`` being ``data[ends[c - 1]:ends[c]]``, ``data[start:ends[first]]`` for
    ``c == first``); ``-(pos + 1)`` for invalid UTF-8 at ``pos``."""
    cdef Py_ssize_t c = first
    cdef int64_t lo = start, prev = start
    cdef int joinable
    while c < stop:
        if c > first and span_cut(data, prev, lo, ends[c]):
            return c
        joinable = chunk_joinable(data, lo, ends[c], classes)
        if joinable < 0:
            return joinable
        if joinable == 0:
            return c + 1 if c == first else c
        prev = lo
        lo = ends[c]
        c += 1
    return c
