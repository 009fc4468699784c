# SCRIPT pre-tokenization (Land & Arnett, "BPE Stays on SCRIPT", arXiv 2505.24689)
# as a hand-written splitter (header-only, like _pretok_core.pxd: _pretok.pyx
# cimports script_split; no module pairs with this file).
#
# Every character has a class (script, supercategory), read from ``classes`` =
# ube_stream.pretokenizer.script_class_table(): the Unicode Script property and
# the general category folded to L/M, N, P/S, Z, C, probed from the installed
# ``regex`` module, with the paper's overrides (\n and \t are Common Z; U+30FC
# and U+FF70 are Inherited letters; U+0640 is Arabic).  The paper's code groups
# the text into runs of one class and then joins runs; as a scan, a chunk is:
#   1. a first character, of class ``cur``;
#   2. if it is U+0020 and the next character has another class that takes a
#      leading space (SC_SPACE_JOINS: letters of the scripts written with
#      spaces, Common punctuation/symbols), that character too, and
#      ``cur`` becomes its class (" word", " (" but "  word" is "  ", "word");
#   3. then every following character that may join ``cur``: one of script
#      Inherited (combining marks, ZWJ/ZWNJ, and the overrides), or one of the
#      same supercategory and the same script, or Han next to Hiragana.
# ``cur`` stays the class that started the chunk (after rule 2), so Latin,
# a combining mark, Latin is one chunk, and Han, Hiragana, Han is one chunk.
# Digits are Common N: a digit run is a chunk of its own, never joined to a
# space or a word; whitespace runs (Common Z) are chunks of their own.
# Unlike the paper's code, which drops characters outside its table
# (unassigned and private-use code points), every character is kept: they are
# script Unknown and form chunks by the same rules.
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t

from _pretok_core cimport _pretok_next


cdef enum:
    SPLIT_SCRIPT = 4            # split code (ube_stream.pretokenizer.SPLIT_SCRIPT; 0-3 in _pretok_tiktoken.pxd)

cdef enum:
    # bits of script_class_table() (ube_stream.pretokenizer.SC_*)
    SC_SUPER_MASK = 0x7         # bits 0-2: supercategory
    SC_LM = 0                   # letters and marks
    SC_SPACE_JOINS = 0x8        # a lone U+0020 before it joins its chunk
    SC_SCRIPT_SHIFT = 4         # bits 4-15: script id
    SCRIPT_INHERITED = 2
    SCRIPT_HAN = 3
    SCRIPT_HIRAGANA = 4


cdef inline bint script_joins(uint16_t cur, uint16_t nxt) noexcept nogil:
    """May a character of class ``nxt`` continue a chunk of class ``cur`` (rule 3)?"""
    cdef uint16_t script_cur = cur >> SC_SCRIPT_SHIFT, script_nxt = nxt >> SC_SCRIPT_SHIFT
    if script_nxt == SCRIPT_INHERITED:
        return True
    if (cur & SC_SUPER_MASK) != (nxt & SC_SUPER_MASK):
        return False
    return (script_cur == script_nxt
            or (script_cur == SCRIPT_HAN and script_nxt == SCRIPT_HIRAGANA)
            or (script_cur == SCRIPT_HIRAGANA and script_nxt == SCRIPT_HAN))


cdef inline Py_ssize_t script_split(const uint8_t* data, Py_ssize_t n, const uint16_t* classes,
                                    int64_t* ends) noexcept nogil:
    """Split UTF-8 ``data[0:n]`` into SCRIPT chunks.

    Writes the exclusive end byte offset of each chunk to ``ends`` (capacity
    ``n`` always suffices) and returns the number of chunks, or ``-(pos + 1)``
    when the bytes at ``pos`` are not well-formed UTF-8 (the first such
    position in ``data``).
    """
    cdef Py_ssize_t pos = 0, nchunks = 0
    cdef uint32_t cp = 0
    cdef uint16_t cur, nxt
    cdef int length
    while pos < n:
        length = _pretok_next(data, n, pos, &cp)
        if length == 0:
            return -(pos + 1)
        cur = classes[cp]
        pos += length
        # rule 2: one space takes the next run when that run's class takes a space
        if cp == 32 and pos < n:
            length = _pretok_next(data, n, pos, &cp)
            if length == 0:
                return -(pos + 1)
            nxt = classes[cp]
            if nxt != cur and (nxt & SC_SPACE_JOINS):
                cur = nxt
                pos += length
        # rule 3: what may follow
        while pos < n:
            length = _pretok_next(data, n, pos, &cp)
            if length == 0:
                return -(pos + 1)
            nxt = classes[cp]
            if nxt != cur and not script_joins(cur, nxt):
                break
            pos += length
        ends[nchunks] = pos
        nchunks += 1
    return nchunks
