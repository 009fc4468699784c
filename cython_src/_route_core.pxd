# Header-only routing helpers: UTF-8 text <-> base symbol ids (cdef inline, noexcept nogil).
#
# Other kernels (training, encoding) cimport these:
#
#     from _route_core cimport route_utf8, route_count, symbols_to_utf8
#
# Substrates (codes from _types.pxd):
#   SUBSTRATE_UBE   a char of 1-2 UTF-8 bytes -> its UTF-8 bytes, ids 0..255;
#                   a char of 3-4 UTF-8 bytes -> its UTF-16LE bytes (2, or 4 for a
#                   surrogate pair), ids 256 + byte.  Base size 512.
#   SUBSTRATE_UTF8  every char -> its UTF-8 bytes, ids 0..255.
#   SUBSTRATE_UTF16 every char -> its UTF-16LE bytes, ids 0..255.
#
# Worked example (ube): "GPU性能" -> 47 50 55 | 127 160 1FD 180 (hex ids):
# G P U are ASCII; 性 U+6027 and 能 U+80FD are 3 UTF-8 bytes each, so they are
# written as UTF-16LE bytes 27 60 FD 80 shifted by 256.
#
# Output capacities (callers allocate):
#   route_utf8:      n symbols for ube and utf8, 2*n for utf16 (2*n always suffices).
#   symbols_to_utf8: n + n // 2 bytes (a UTF-16 unit of 2 ids gives at most 3 UTF-8
#                    bytes, a surrogate pair of 4 ids gives 4, a UTF-8 id gives 1),
#                    so 2*n always suffices.
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy

from _types cimport SUBSTRATE_UBE, SUBSTRATE_UTF8, SUBSTRATE_UTF16
from _utf8 cimport utf8_decode, utf8_encode


cdef inline bint _ascii8(const uint8_t* data, Py_ssize_t i) noexcept nogil:
    """True when the 8 bytes at data[i] are all ASCII (caller checks i + 8 <= n)."""
    cdef uint64_t word
    memcpy(&word, data + i, 8)
    return (word & 0x8080808080808080ULL) == 0


cdef inline Py_ssize_t _put_utf16(uint32_t cp, uint16_t base, uint16_t* out, Py_ssize_t j) noexcept nogil:
    """Write the UTF-16LE bytes of ``cp`` as ids ``base + byte`` at out[j]; return the new j."""
    cdef uint32_t high, low
    if cp < 0x10000:
        out[j] = base + (cp & 0xFF)
        out[j + 1] = base + (cp >> 8)
        return j + 2
    cp -= 0x10000
    high = 0xD800 | (cp >> 10)
    low = 0xDC00 | (cp & 0x3FF)
    out[j] = base + (high & 0xFF)
    out[j + 1] = base + (high >> 8)
    out[j + 2] = base + (low & 0xFF)
    out[j + 3] = base + (low >> 8)
    return j + 4


cdef inline Py_ssize_t route_utf8(const uint8_t* data, Py_ssize_t n, int substrate,
                                  uint16_t* out) noexcept nogil:
    """Route UTF-8 bytes ``data[0:n]`` to base symbol ids in ``out``.

    Returns the number of symbols written, or ``-(pos + 1)`` when the bytes at
    ``pos`` are not well-formed UTF-8 (``out`` then holds a partial result).
    ``out`` needs ``n`` entries for ube and utf8, ``2 * n`` for utf16.
    """
    cdef Py_ssize_t i = 0, j = 0, k
    cdef int length
    cdef uint32_t cp = 0
    cdef uint8_t b
    cdef uint16_t base = 256 if substrate == SUBSTRATE_UBE else 0
    while i < n:
        # ASCII fast path, 8 bytes at a time: every substrate keeps ASCII as one
        # byte value (utf16 adds a zero high byte)
        while i + 8 <= n and _ascii8(data, i):
            if substrate == SUBSTRATE_UTF16:
                for k in range(8):
                    out[j + 2 * k] = data[i + k]
                    out[j + 2 * k + 1] = 0
                j += 16
            else:
                for k in range(8):
                    out[j + k] = data[i + k]
                j += 8
            i += 8
        if i >= n:
            break
        b = data[i]
        if b < 0x80:
            out[j] = b
            j += 1
            if substrate == SUBSTRATE_UTF16:
                out[j] = 0
                j += 1
            i += 1
            continue
        length = utf8_decode(data, n, i, &cp)
        if length == 0:
            return -(i + 1)
        if substrate == SUBSTRATE_UTF8 or (substrate == SUBSTRATE_UBE and length == 2):
            for k in range(length):
                out[j + k] = data[i + k]
            j += length
        else:
            j = _put_utf16(cp, base, out, j)
        i += length
    return j


cdef inline Py_ssize_t route_count(const uint8_t* data, Py_ssize_t n, int substrate) noexcept nogil:
    """Number of base symbols ``route_utf8`` would write (the floor cost); writes nothing.

    Returns ``-(pos + 1)`` for invalid UTF-8 at byte ``pos``, like ``route_utf8``.
    """
    cdef Py_ssize_t i = 0, count = 0
    cdef int length
    cdef uint32_t cp = 0
    while i < n:
        while i + 8 <= n and _ascii8(data, i):
            count += 16 if substrate == SUBSTRATE_UTF16 else 8
            i += 8
        if i >= n:
            break
        if data[i] < 0x80:
            count += 2 if substrate == SUBSTRATE_UTF16 else 1
            i += 1
            continue
        length = utf8_decode(data, n, i, &cp)
        if length == 0:
            return -(i + 1)
        if substrate == SUBSTRATE_UTF8 or (substrate == SUBSTRATE_UBE and length == 2):
            count += length
        else:
            count += 4 if length == 4 else 2
        i += length
    return count


cdef inline int _utf8_decode_ids(const uint16_t* ids, Py_ssize_t n, Py_ssize_t i,
                                 uint32_t* codepoint) noexcept nogil:
    """``utf8_decode`` over ids < 256; an id >= 256 ends the UTF-8 buffer.

    Returns the sequence length (1..4) or 0 when the sequence starting at
    ``ids[i]`` is invalid or cut by the end of the buffer (Python's codec then
    reports the same start).
    """
    cdef uint32_t b0 = ids[i], b1, b2, b3, cp
    if b0 < 0x80:
        codepoint[0] = b0
        return 1
    if b0 < 0xC2 or b0 > 0xF4:
        return 0
    # (id & 0xFFC0) == 0x80 is "a continuation byte of this buffer"
    if i + 1 >= n or (ids[i + 1] & 0xFFC0) != 0x80:
        return 0
    b1 = ids[i + 1]
    if b0 < 0xE0:
        codepoint[0] = ((b0 & 0x1F) << 6) | (b1 & 0x3F)
        return 2
    if i + 2 >= n or (ids[i + 2] & 0xFFC0) != 0x80:
        return 0
    b2 = ids[i + 2]
    if b0 < 0xF0:
        cp = ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F)
        if cp < 0x800 or (cp >= 0xD800 and cp <= 0xDFFF):
            return 0
        codepoint[0] = cp
        return 3
    if i + 3 >= n or (ids[i + 3] & 0xFFC0) != 0x80:
        return 0
    b3 = ids[i + 3]
    cp = ((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
    if cp < 0x10000 or cp > 0x10FFFF:
        return 0
    codepoint[0] = cp
    return 4


cdef inline int _utf16_decode_ids(const uint16_t* ids, Py_ssize_t n, Py_ssize_t i, uint16_t base,
                                  uint32_t* codepoint) noexcept nogil:
    """Decode one UTF-16LE char from ids ``base + byte`` at ``ids[i]``.

    The buffer ends at ``n`` or at the first id outside ``base..base+255``.
    Returns the number of ids used (2 or 4) or 0 when the char starting at
    ``ids[i]`` is invalid: a lone byte, a lone low surrogate, a high surrogate
    not followed by a low one in the same buffer.  Python's ``utf-16-le`` codec
    reports every one of these at the same start ``i``.
    """
    cdef uint32_t unit, low
    if i + 1 >= n or <uint16_t>(ids[i + 1] - base) > 0xFF:
        return 0
    unit = (<uint32_t>(ids[i] - base)) | ((<uint32_t>(ids[i + 1] - base)) << 8)
    if unit < 0xD800 or unit > 0xDFFF:
        codepoint[0] = unit
        return 2
    if unit >= 0xDC00:
        return 0
    if (i + 3 >= n or <uint16_t>(ids[i + 2] - base) > 0xFF
            or <uint16_t>(ids[i + 3] - base) > 0xFF):
        return 0
    low = (<uint32_t>(ids[i + 2] - base)) | ((<uint32_t>(ids[i + 3] - base)) << 8)
    if low < 0xDC00 or low > 0xDFFF:
        return 0
    codepoint[0] = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
    return 4


cdef inline Py_ssize_t symbols_to_utf8(const uint16_t* ids, Py_ssize_t n, int substrate,
                                       uint8_t* out, Py_ssize_t* error_at) noexcept nogil:
    """Decode base symbol ids to UTF-8 text bytes in ``out`` (capacity ``n + n // 2``).

    ``ube`` follows the dual-buffer rule: a run of ids < 256 is one UTF-8 buffer,
    a run of ids >= 256 one UTF-16LE buffer (bytes ``id - 256``); switching
    alphabet flushes, and a sequence left incomplete at a flush is an error.
    ``utf8`` / ``utf16`` are one UTF-8 / UTF-16LE buffer of ids 0..255.

    Returns the number of bytes written, or -1 with ``error_at`` set to the
    symbol offset of the first error.  Ids outside the alphabet (>= 512 for ube,
    >= 256 otherwise) are checked first, before any decoding, and the first one
    is the error (the caller tells the two kinds apart by ``ids[error_at]``);
    otherwise ``error_at`` is where the first invalid sequence starts, the
    offset ``_reference.decode_symbols_offset`` reports.
    """
    cdef Py_ssize_t i, j = 0
    cdef int length, k
    cdef uint32_t cp = 0, seen = 0
    cdef uint16_t limit = 512 if substrate == SUBSTRATE_UBE else 256
    cdef uint16_t sym
    # range check: an OR-reduction the compiler vectorises, then the first culprit
    for i in range(n):
        seen |= ids[i]
    if seen >= limit:
        for i in range(n):
            if ids[i] >= limit:
                error_at[0] = i
                return -1
    i = 0
    while i < n:
        sym = ids[i]
        if sym < 0x80 and substrate != SUBSTRATE_UTF16:
            out[j] = <uint8_t>sym
            j += 1
            i += 1
            continue
        if substrate == SUBSTRATE_UTF16 or sym >= 256:
            length = _utf16_decode_ids(ids, n, i, 256 if sym >= 256 else 0, &cp)
            if length == 0:
                error_at[0] = i
                return -1
            j += utf8_encode(cp, out + j)
        else:
            length = _utf8_decode_ids(ids, n, i, &cp)
            if length == 0:
                error_at[0] = i
                return -1
            for k in range(length):
                out[j + k] = <uint8_t>ids[i + k]
            j += length
        i += length
    return j
