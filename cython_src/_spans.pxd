# SuperBPE spans, rule "v1" (header-only: _pretok exposes it; _encode and _count
# kernels cimport the same helpers, so training and encoding share one rule).
#
# Input: a document's stage-1 chunks in order.  A chunk is *joinable* iff it
# holds at least one letter or mark (\p{L} or \p{M}, as the installed regex
# module classifies them: ube_stream.pretokenizer.span_class_table()) and every
# other character is U+0020 SPACE or an apostrophe (U+0027, U+2019).  A *span*
# is a maximal run of consecutive joinable chunks; every other chunk is a span
# of its own.  Spans never cross a document (or a special token).
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


cdef inline Py_ssize_t span_end(const uint8_t* data, const int64_t* ends, Py_ssize_t first,
                                Py_ssize_t stop, int64_t start, const uint8_t* classes) noexcept nogil:
    """The exclusive chunk index where the span that starts at chunk ``first``
    ends (``first < stop``; chunks ``first..stop - 1`` are candidates, chunk
    ``c`` being ``data[ends[c - 1]:ends[c]]``, ``data[start:ends[first]]`` for
    ``c == first``); ``-(pos + 1)`` for invalid UTF-8 at ``pos``."""
    cdef Py_ssize_t c = first
    cdef int64_t lo = start
    cdef int joinable
    while c < stop:
        joinable = chunk_joinable(data, lo, ends[c], classes)
        if joinable < 0:
            return joinable
        if joinable == 0:
            return c + 1 if c == first else c
        lo = ends[c]
        c += 1
    return c
