# GPT-2 pre-tokenization as a hand-written state machine (header-only: other
# kernels cimport gpt2_split; no module pairs with this file).
#
# The pattern  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
# reduces, at each position, to:
#   1. an ASCII apostrophe followed by s t m d / re ve ll (lower case) is a chunk;
#   2. else an optional U+0020 (only when a non-space follows) plus the maximal
#      run of one class (letter, number, other) is a chunk;
#   3. else a whitespace run is a chunk, less its last character when a
#      non-space follows it and the run has at least two characters (\s+(?!\S));
#      a run at the end of the text is one chunk.
# ``classes`` is ube_stream.pretokenizer.gpt2_class_table(): one byte per code
# point, so the kernel agrees with the installed ``regex`` module.
from libc.stdint cimport int64_t, uint8_t, uint32_t

from _types cimport CLASS_LETTER, CLASS_NUMBER, CLASS_OTHER, CLASS_SPACE
from _utf8 cimport ascii_run, block_split, utf8_decode, word_end


cdef inline int _pretok_next(const uint8_t* data, Py_ssize_t n, Py_ssize_t i,
                             uint32_t* codepoint) noexcept nogil:
    """utf8_decode with the ASCII case inlined; 0 on invalid UTF-8."""
    cdef uint8_t b = data[i]
    if b < 0x80:
        codepoint[0] = b
        return 1
    return utf8_decode(data, n, i, codepoint)


cdef inline Py_ssize_t _gpt2_runs(const uint8_t* data, Py_ssize_t n, Py_ssize_t pos,
                                  const uint8_t* classes, uint8_t cls, int64_t* ends,
                                  Py_ssize_t* nchunks) noexcept nogil:
    """From ``pos`` inside a run of class ``cls`` (letter, number or other): the
    end of the last of the runs that follow it with no whitespace and no ASCII
    character of another class between them.

    A non-ASCII character of another class that is not whitespace ends the run
    and starts the next one: no rule of the pattern joins them, and neither
    the optional space nor a contraction can start a chunk there.  The end is
    written without a branch (``ends[k] = pos; k += class changed``), so a
    Devanagari word, which the pattern cuts at every vowel sign, no longer
    takes the chunk-start rules and a mispredicted branch per character.
    ``nchunks`` is advanced by the chunks ended here.  Returns ``-(i + 1)``
    when it meets invalid UTF-8 at ``i``."""
    cdef uint32_t cp = 0
    cdef int length
    cdef uint8_t b, c
    cdef Py_ssize_t k = nchunks[0]
    while pos < n:
        b = data[pos]
        if b < 0x80:
            if classes[b] != cls:
                break
            pos += 1
            continue
        length = utf8_decode(data, n, pos, &cp)
        if length == 0:
            nchunks[0] = k
            return -(pos + 1)
        c = classes[cp]
        if c == CLASS_SPACE:
            break
        ends[k] = pos       # in bounds: every chunk so far ends at or before pos < n
        k += c != cls
        cls = c
        pos += length
    nchunks[0] = k
    return pos


cdef inline Py_ssize_t gpt2_split(const uint8_t* data, Py_ssize_t n, const uint8_t* classes,
                                  int64_t* ends) noexcept nogil:
    """Split UTF-8 ``data[0:n]`` into GPT-2 chunks.

    Writes the exclusive end byte offset of each chunk to ``ends`` (capacity
    ``n`` always suffices: every chunk holds at least one byte) and returns the
    number of chunks, or ``-(pos + 1)`` when the bytes at ``pos`` are not
    well-formed UTF-8 (``pos`` is the first such position in ``data``).
    """
    cdef Py_ssize_t pos = 0, start, last_start, s, nchunks = 0
    cdef Py_ssize_t run_chars
    cdef uint32_t cp = 0
    cdef uint8_t cls, b1, b2
    cdef int length
    while pos < n:
        if pos + 64 <= n and (data[pos] | data[pos + 1]) < 0x80:   # ASCII: 64 bytes at once
            s = block_split(data, pos, 0, ends, &nchunks)
            if s > pos:
                pos = s
                continue
        start = pos
        # rule 1: contractions ('s 't 'm 'd 're 've 'll), ASCII only
        if data[pos] == 39 and pos + 1 < n:
            b1 = data[pos + 1]
            if b1 == 115 or b1 == 116 or b1 == 109 or b1 == 100:      # s t m d
                pos += 2
                ends[nchunks] = pos
                nchunks += 1
                continue
            if pos + 2 < n:
                b2 = data[pos + 2]
                if ((b1 == 114 and b2 == 101) or (b1 == 118 and b2 == 101)  # re ve
                        or (b1 == 108 and b2 == 108)):                     # ll
                    pos += 3
                    ends[nchunks] = pos
                    nchunks += 1
                    continue
        s = word_end(data, n, pos, True)       # rule 2 from ASCII: [A-Za-z]+, " word"
        if s >= 0:
            pos = s
            if pos < n and data[pos] >= 0x80:   # the run goes on past ASCII
                pos = _gpt2_runs(data, n, pos, classes, CLASS_LETTER, ends, &nchunks)
                if pos < 0:
                    return pos
            ends[nchunks] = pos
            nchunks += 1
            continue
        length = _pretok_next(data, n, pos, &cp)
        if length == 0:
            return -(pos + 1)
        cls = classes[cp]
        # rule 2: an optional U+0020 before a letter / number / other run
        if cp == 32 and pos + 1 < n:
            length = _pretok_next(data, n, pos + 1, &cp)
            if length == 0:
                return -(pos + 2)
            if classes[cp] != CLASS_SPACE:
                pos += 1
                cls = classes[cp]
            else:
                length = 1      # the space itself starts a whitespace run
        # the maximal run of class ``cls`` starting at pos (its first char is decoded)
        last_start = pos
        pos += length
        run_chars = 1
        if cls == CLASS_OTHER or cls == CLASS_LETTER or cls == CLASS_NUMBER:
            # the ASCII part of a letter or number run 16 bytes at a time (ASCII \p{L} is
            # [A-Za-z], \p{N} [0-9]); the loop below takes the rest
            if cls == CLASS_LETTER:
                pos = ascii_run(data, n, pos, 0x20, 0x61, 0x7A)
            elif cls == CLASS_NUMBER:
                pos = ascii_run(data, n, pos, 0, 0x30, 0x39)
            pos = _gpt2_runs(data, n, pos, classes, cls, ends, &nchunks)
            if pos < 0:
                return pos
        else:
            while pos < n:
                s = ascii_run(data, n, pos, 0, 0x20, 0x20)     # U+0020 runs 16 bytes at a time
                if s > pos:
                    run_chars += s - pos
                    last_start = s - 1
                    pos = s
                    if pos == n:
                        break
                length = _pretok_next(data, n, pos, &cp)
                if length == 0:
                    return -(pos + 1)
                if classes[cp] != CLASS_SPACE:
                    break
                last_start = pos
                pos += length
                run_chars += 1
            # rule 3: \s+(?!\S) leaves the last whitespace character to the next chunk
            if pos < n and run_chars >= 2:
                pos = last_start
        ends[nchunks] = pos
        nchunks += 1
    return nchunks
