# tiktoken's cl100k / llama3 / o200k pre-tokenization as hand-written state
# machines (header-only, like _pretok_core.pxd: _pretok.pyx and _encode.pyx
# cimport tiktoken_split; no module pairs with this file).
#
# Each function gives exactly the chunks of ``regex.findall(pattern, text)``:
# leftmost-first alternation, greedy quantifiers and the backtracking of the
# regex engine are worked out per alternative below.  ``classes`` is
# ube_stream.pretokenizer.tiktoken_class_table(): one byte of TT_* bits per
# code point, probed from the installed ``regex`` module (case folding
# included), so the kernels agree with it character for character.
#
# cl100k (tiktoken's cl100k_base) and llama3 (the same pattern as Llama 3 and
# HF conversions write it, tiktoken's cl100k before possessive quantifiers):
#   '(?i:[sdmt]|ll|ve|re)         | (?i:'s|'t|'re|'ve|'m|'ll|'d)
#   [^\r\n\p{L}\p{N}]?+\p{L}++    | [^\r\n\p{L}\p{N}]?\p{L}+
#   \p{N}{1,3}+                   | \p{N}{1,3}
#    ?[^\s\p{L}\p{N}]++[\r\n]*+   |  ?[^\s\p{L}\p{N}]+[\r\n]*
#   \s++$                         |
#   \s*[\r\n]                     | \s*[\r\n]+
#   \s+(?!\S)                     | \s+(?!\S)
#   \s                            | \s+
# The possessive forms never need the backtracking they forbid, so the two
# differ only in ``\s++$``: a whitespace run that reaches the end of the text
# is one cl100k chunk, while llama3 first cuts it after its last \r or \n.
# At a chunk start, in order:
#   1. ' plus a contraction letter (s d m t, or r/v + e, or l + l; case-folded
#      as regex folds them: 'ſ' is an s) is a chunk;
#   2. a letter run, optionally after one character that is none of \r \n
#      letter number (a space, a tab, punctuation, a mark);
#   3. one to three numbers;
#   4. a run of "other" (not whitespace, letter or number), optionally after
#      U+0020, plus the \r \n that follow;
#   5. a whitespace run: [cl100k: whole, when it reaches the end of the text];
#      else up to and including its last \r or \n; else whole at the end of the
#      text; else less its last character (\s+(?!\S)) when it has two or more;
#      else its one character.
#
# o200k (tiktoken's o200k_base), with HEAD = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}],
# TAIL = [\p{Ll}\p{Lm}\p{Lo}\p{M}], X = [^\r\n\p{L}\p{N}] (marks are in X, HEAD
# and TAIL) and C = (?i:'s|'t|'re|'ve|'m|'ll|'d):
#   A1 X?HEAD*TAIL+C? | A2 X?HEAD+TAIL*C? | \p{N}{1,3} |  ?[^\s\p{L}\p{N}]+[\r\n/]*
#   | \s*[\r\n]+ | \s+(?!\S) | \s+
# regex tries A1 with the X taken, A1 without it, A2 with it, A2 without it.
# HEAD*TAIL+ from s: HEAD* takes the HEAD run (to h), then gives characters
# back until TAIL+ can start: at h when the character there is TAIL, else at
# the last character of the run that is also TAIL; TAIL+ then takes its whole
# run.  The optional C is taken whenever it matches at the end.  The rest is
# rules 3-5 above (llama3's whitespace, and [\r\n/]* after an "other" run).
from libc.stdint cimport int64_t, uint8_t, uint32_t

from _utf8 cimport ascii_run, block_split, case_word_end, utf8_decode, word_end


cdef enum:
    # which state machine (ube_stream.pretokenizer.SPLIT_*; SPLIT_GPT2 is _pretok_core.gpt2_split)
    SPLIT_GPT2 = 0
    SPLIT_CL100K = 1
    SPLIT_LLAMA3 = 2
    SPLIT_O200K = 3

cdef enum:
    # bits of tiktoken_class_table() (ube_stream.pretokenizer.TT_*)
    TT_LETTER = 0x01            # \p{L}
    TT_NUMBER = 0x02            # \p{N}
    TT_SPACE = 0x04             # \s
    TT_HEAD = 0x08              # [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
    TT_TAIL = 0x10              # [\p{Ll}\p{Lm}\p{Lo}\p{M}]
    TT_CONTRACTION_SHIFT = 5    # bits 5-7: the contraction letter it folds to
    TT_C_SDMT = 1               # (?i:[sdmt])
    TT_C_RV = 2                 # (?i:[rv])
    TT_C_L = 3                  # (?i:l)
    TT_C_E = 4                  # (?i:e)
    # added by the kernel (not in the table)
    TT_CRLF = 0x100             # \r or \n
    TT_NONE = 0x200             # the end of the data or invalid UTF-8: in no class at all


cdef extern from *:
    """
    #ifndef UBE_TT_CLASS_DEFINED
    #define UBE_TT_CLASS_DEFINED
    /* _tt_class below, in C so that it is always inlined into the per-byte loops.
       0x100 is TT_CRLF, 0x200 TT_NONE.  ASCII is one table load, \r/\n added
       without a branch. */
    static UBE_ALWAYS_INLINE uint32_t ube_tt_class(const uint8_t* data, Py_ssize_t n, Py_ssize_t i,
                                                   const uint8_t* classes, int* length) {
        uint32_t b, cp;
        int len;
        if (i >= n) { *length = 0; return 0x200; }
        b = data[i];
        if (UBE_LIKELY(b < 0x80)) {
            *length = 1;
            return classes[b] | ((uint32_t)((b == 10) | (b == 13)) << 8);
        }
        len = ube_utf8_decode(data, n, i, &cp);
        *length = len;
        return len ? (uint32_t)classes[cp] : 0x200u;
    }
    #endif
    """
    uint32_t _tt_class "ube_tt_class"(const uint8_t* data, Py_ssize_t n, Py_ssize_t i,
                                      const uint8_t* classes, int* length) noexcept nogil
    # TT_* bits of the character at ``data[i]`` and its length; TT_NONE and 0 at the
    # end or on invalid UTF-8 (the caller reports that when a chunk starts there).


cdef inline Py_ssize_t _tt_run(const uint8_t* data, Py_ssize_t n, Py_ssize_t i,
                               const uint8_t* classes, uint32_t mask) noexcept nogil:
    """End of the run of characters with a bit of ``mask``, from ``i``.  Letter runs
    take their ASCII prefix 8 bytes at a time (ASCII \p{L} is [A-Za-z], TAIL's ASCII
    is [a-z], HEAD's [A-Z]: test_pretok_tiktoken checks every pair of classes)."""
    cdef int length
    if mask == TT_LETTER:
        i = ascii_run(data, n, i, 0x20, 0x61, 0x7A)
    elif mask == TT_TAIL:
        i = ascii_run(data, n, i, 0, 0x61, 0x7A)
    elif mask == TT_HEAD:
        i = ascii_run(data, n, i, 0, 0x41, 0x5A)
    while _tt_class(data, n, i, classes, &length) & mask:
        i += length
    return i


cdef inline Py_ssize_t _tt_other_run(const uint8_t* data, Py_ssize_t n, Py_ssize_t i,
                                     const uint8_t* classes) noexcept nogil:
    """End of the run of [^\\s\\p{L}\\p{N}] from ``i``."""
    cdef int length
    while not (_tt_class(data, n, i, classes, &length)
               & (TT_LETTER | TT_NUMBER | TT_SPACE | TT_NONE)):
        i += length
    return i


cdef inline Py_ssize_t _tt_numbers(const uint8_t* data, Py_ssize_t n, Py_ssize_t i,
                                   const uint8_t* classes) noexcept nogil:
    """End of \\p{N}{1,3} after its first character (which ends at ``i``)."""
    cdef int length, k
    for k in range(2):
        if not (_tt_class(data, n, i, classes, &length) & TT_NUMBER):
            break
        i += length
    return i


cdef inline Py_ssize_t _tt_contraction(const uint8_t* data, Py_ssize_t n, Py_ssize_t i,
                                       const uint8_t* classes) noexcept nogil:
    """End of (?i:'s|'t|'re|'ve|'m|'ll|'d) at ``i``, or ``i`` when it does not match."""
    cdef int l1, l2
    cdef uint32_t first, second
    if i + 1 >= n or data[i] != 39:
        return i
    first = (_tt_class(data, n, i + 1, classes, &l1) >> TT_CONTRACTION_SHIFT) & 7
    if first == TT_C_SDMT:
        return i + 1 + l1
    if first == TT_C_RV or first == TT_C_L:
        second = (_tt_class(data, n, i + 1 + l1, classes, &l2) >> TT_CONTRACTION_SHIFT) & 7
        if (first == TT_C_RV and second == TT_C_E) or (first == TT_C_L and second == TT_C_L):
            return i + 1 + l1 + l2
    return i


cdef inline Py_ssize_t _tt_space_end(const uint8_t* data, Py_ssize_t n, Py_ssize_t pos,
                                     const uint8_t* classes, bint run_to_end) noexcept nogil:
    """End of the whitespace chunk at ``pos`` (a \\s character); ``run_to_end``: cl100k's \\s++$.
    Runs of U+0020 (indentation) are taken 8 bytes at a time."""
    cdef Py_ssize_t i = pos, j, last_start = pos, newline_end = -1
    cdef uint32_t c
    cdef int length
    while True:
        j = ascii_run(data, n, i, 0, 0x20, 0x20)
        if j > i:
            last_start = j - 1
            i = j
        c = _tt_class(data, n, i, classes, &length)
        if not (c & TT_SPACE):
            break
        last_start = i
        i += length
        if c & TT_CRLF:
            newline_end = i
    if i == n and run_to_end:
        return n                # \s++$
    if newline_end >= 0:
        return newline_end      # \s*[\r\n] / \s*[\r\n]+: up to the last \r or \n of the run
    if i == n:
        return n                # \s+(?!\S) at the end of the text
    if last_start > pos:
        return last_start       # \s+(?!\S) gives its last character back (two or more characters)
    return i                    # \s / \s+: the one character


cdef inline Py_ssize_t cl100k_split(const uint8_t* data, Py_ssize_t n, const uint8_t* classes,
                                    int64_t* ends, bint run_to_end) noexcept nogil:
    """Split UTF-8 ``data[0:n]`` by cl100k (``run_to_end``) or llama3; the contract of
    ``_pretok_core.gpt2_split``: chunk ends written to ``ends`` (``n`` entries
    suffice), returns their number or ``-(pos + 1)`` at the first invalid UTF-8."""
    cdef Py_ssize_t pos = 0, nxt, end, nchunks = 0
    cdef uint32_t c0, c1
    cdef int l0, l1
    while pos < n:
        if pos + 64 <= n and (data[pos] | data[pos + 1]) < 0x80:   # ASCII: 64 bytes at once
            end = block_split(data, pos, SPLIT_CL100K, ends, &nchunks)
            if end > pos:
                pos = end
                continue
        # 1. '(?i:[sdmt]|ll|ve|re)
        if data[pos] == 39:
            end = _tt_contraction(data, n, pos, classes)
            if end > pos:
                ends[nchunks] = end
                nchunks += 1
                pos = end
                continue
        end = word_end(data, n, pos, False)     # 2. from ASCII: [A-Za-z]+, " word", "(word"
        if end >= 0:
            if end < n and data[end] >= 0x80:   # the run goes on past ASCII
                end = _tt_run(data, n, end, classes, TT_LETTER)
            ends[nchunks] = end
            nchunks += 1
            pos = end
            continue
        c0 = _tt_class(data, n, pos, classes, &l0)
        if l0 == 0:
            return -(pos + 1)
        nxt = pos + l0
        if c0 & TT_LETTER:                                  # 2. \p{L}+
            end = _tt_run(data, n, nxt, classes, TT_LETTER)
        elif c0 & TT_NUMBER:                                # 3. \p{N}{1,3}
            end = _tt_numbers(data, n, nxt, classes)
        else:
            c1 = _tt_class(data, n, nxt, classes, &l1)
            if not (c0 & TT_CRLF) and (c1 & TT_LETTER):     # 2. [^\r\n\p{L}\p{N}]\p{L}+
                end = _tt_run(data, n, nxt + l1, classes, TT_LETTER)
            elif not (c0 & TT_SPACE):                       # 4. [^\s\p{L}\p{N}]+[\r\n]*
                end = _tt_run(data, n, _tt_other_run(data, n, nxt, classes), classes, TT_CRLF)
            elif data[pos] == 32 and not (c1 & (TT_LETTER | TT_NUMBER | TT_SPACE | TT_NONE)):
                end = _tt_run(data, n, _tt_other_run(data, n, nxt + l1, classes), classes, TT_CRLF)
            else:                                           # 5. whitespace
                end = _tt_space_end(data, n, pos, classes, run_to_end)
        ends[nchunks] = end
        nchunks += 1
        pos = end
    return nchunks


cdef inline Py_ssize_t _o200k_word(const uint8_t* data, Py_ssize_t n, Py_ssize_t s,
                                   const uint8_t* classes) noexcept nogil:
    """End of HEAD*TAIL+ at ``s`` as regex backtracks it, or -1 when it does not match."""
    cdef Py_ssize_t i = s, last_tail = -1
    cdef uint32_t c
    cdef int length
    while True:
        c = _tt_class(data, n, i, classes, &length)
        if not (c & TT_HEAD):
            break
        if c & TT_TAIL:
            last_tail = i
        i += length
    if not (c & TT_TAIL):
        if last_tail < 0:
            return -1
        i = last_tail           # HEAD* gives back characters up to the last one that is TAIL
    return _tt_run(data, n, i, classes, TT_TAIL)


cdef inline Py_ssize_t _o200k_letters(const uint8_t* data, Py_ssize_t n, Py_ssize_t pos,
                                      uint32_t c0, Py_ssize_t nxt, uint32_t c1,
                                      const uint8_t* classes) noexcept nogil:
    """End of o200k's first two alternatives at ``pos`` (its character has bits ``c0``
    and ends at ``nxt``, where one with bits ``c1`` starts), or -1."""
    cdef Py_ssize_t end = -1, i
    cdef bint prefix = (c0 & (TT_LETTER | TT_NUMBER | TT_CRLF)) == 0 and (c1 & (TT_HEAD | TT_TAIL)) != 0
    if prefix:                                  # A1, X taken
        end = _o200k_word(data, n, nxt, classes)
    if end < 0 and (c0 & (TT_HEAD | TT_TAIL)):  # A1, X not taken
        end = _o200k_word(data, n, pos, classes)
    if end < 0 and prefix:                      # A2, X taken (c1 is HEAD here)
        i = _tt_run(data, n, nxt, classes, TT_HEAD)
        if i > nxt:
            end = _tt_run(data, n, i, classes, TT_TAIL)
    if end < 0 and (c0 & TT_HEAD):              # A2, X not taken
        end = _tt_run(data, n, _tt_run(data, n, nxt, classes, TT_HEAD), classes, TT_TAIL)
    if end < 0:
        return -1
    return _tt_contraction(data, n, end, classes)


cdef inline Py_ssize_t _o200k_ascii_word(const uint8_t* data, Py_ssize_t n, Py_ssize_t pos,
                                         const uint8_t* classes) noexcept nogil:
    """End of o200k's A1/A2 at ``pos`` when its letters start in ASCII, or -1 for the
    general path: case_word_end (_utf8.pxd) gives [a-z]+ or [A-Z]+[a-z]* after an
    optional ASCII X (HEAD*TAIL+ is the [a-z] run, or the [A-Z] run and the [a-z] run
    after it; [A-Z]+ alone is A2), then TAIL+ goes on past ASCII and C? follows."""
    cdef Py_ssize_t end = case_word_end(data, n, pos)
    if end < 0:
        return -1
    if end < n and data[end] >= 0x80:       # TAIL+ goes on past ASCII
        end = _tt_run(data, n, end, classes, TT_TAIL)
    return _tt_contraction(data, n, end, classes)


cdef inline Py_ssize_t o200k_split(const uint8_t* data, Py_ssize_t n, const uint8_t* classes,
                                   int64_t* ends) noexcept nogil:
    """Split UTF-8 ``data[0:n]`` by o200k; the contract of ``cl100k_split``."""
    cdef Py_ssize_t pos = 0, nxt, end, nchunks = 0
    cdef uint32_t c0, c1, c
    cdef int l0, l1, length
    while pos < n:
        if pos + 64 <= n and (data[pos] | data[pos + 1]) < 0x80:   # ASCII: 64 bytes at once
            end = block_split(data, pos, SPLIT_O200K, ends, &nchunks)
            if end > pos:
                pos = end
                continue
        end = _o200k_ascii_word(data, n, pos, classes)
        if end >= 0:
            ends[nchunks] = end
            nchunks += 1
            pos = end
            continue
        c0 = _tt_class(data, n, pos, classes, &l0)
        if l0 == 0:
            return -(pos + 1)
        nxt = pos + l0
        c1 = _tt_class(data, n, nxt, classes, &l1)
        end = -1
        if (c0 & (TT_HEAD | TT_TAIL)) or (not (c0 & (TT_LETTER | TT_NUMBER | TT_CRLF))
                                          and (c1 & (TT_HEAD | TT_TAIL))):
            end = _o200k_letters(data, n, pos, c0, nxt, c1, classes)
        if end >= 0:
            pass
        elif c0 & TT_NUMBER:                                # \p{N}{1,3}
            end = _tt_numbers(data, n, nxt, classes)
        elif not (c0 & (TT_LETTER | TT_SPACE)) or (
                data[pos] == 32 and not (c1 & (TT_LETTER | TT_NUMBER | TT_SPACE | TT_NONE))):
            #  ?[^\s\p{L}\p{N}]+[\r\n/]*
            end = _tt_other_run(data, n, nxt if not (c0 & TT_SPACE) else nxt + l1, classes)
            while True:
                c = _tt_class(data, n, end, classes, &length)
                if not (c & TT_CRLF) and not (length == 1 and data[end] == 47):
                    break
                end += length
        elif c0 & TT_SPACE:                                 # \s*[\r\n]+ | \s+(?!\S) | \s+
            end = _tt_space_end(data, n, pos, classes, False)
        else:
            end = nxt               # a letter no alternative takes (not for any regex seen): alone
        ends[nchunks] = end
        nchunks += 1
        pos = end
    return nchunks


cdef inline Py_ssize_t tiktoken_split(const uint8_t* data, Py_ssize_t n, const uint8_t* classes,
                                      int64_t* ends, int kind) noexcept nogil:
    """``cl100k_split`` / ``o200k_split`` by split code (SPLIT_CL100K, SPLIT_LLAMA3, SPLIT_O200K)."""
    if kind == SPLIT_O200K:
        return o200k_split(data, n, classes, ends)
    return cl100k_split(data, n, classes, ends, kind == SPLIT_CL100K)
