# distutils: language = c++
"""Decoding kernels: token ids -> UTF-8 text (the fast path behind
``Tokenizer.decode`` and ``Tokenizer.decode_bytes``).

* :func:`decode_tokens`, the fast path.  Each token has its text's UTF-8 bytes
  in a flat table (``token_bytes``), made once per tokenizer, and a kind:
  ``RAW`` tokens are copied as they are, whatever precedes them (every
  ``utf8`` token, and every ``ube`` / ``utf16`` token whose UTF-16 runs are
  complete characters); ``SPECIAL`` tokens are copied too and end a UTF-16
  run; ``SYMBOLS`` tokens (a UTF-16 byte, half a surrogate pair) go through
  their base symbols with a carry of at most 3 UTF-16 bytes, and so does any
  token while that carry is not empty.  The UTF-8 runs are copied unchecked
  and the whole output is validated once at the end: under the dual-buffer
  rule a UTF-8 buffer is valid exactly when it is valid where it stands, since
  what surrounds it (the UTF-8 of complete characters, a special token's text)
  starts and ends on character boundaries.  Invalid input gives
  ``STATUS_INVALID_SYMBOLS`` without a position.
* :func:`decode_exact`, the exact one: the base symbols of every token
  through the dual-buffer decode (``_route_core.symbols_to_utf8``), which names
  the token and base-symbol offset of the first invalid sequence (the caller
  runs it when the fast path reports one).
* :func:`ids_from_sequence`: a list or tuple of Python ints as ``uint32``,
  without numpy's per-item dispatch.

Every decode releases the GIL.  Errors follow ``_status.pxd``.
"""
from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.long cimport PyLong_Check
from cpython.number cimport PyNumber_Index
from cpython.object cimport PyObject
from cpython.sequence cimport PySequence_Fast, PySequence_Fast_GET_SIZE, PySequence_Fast_ITEMS
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy

from _route_core cimport symbols_to_utf8
from _status cimport STATUS_BAD_ID, STATUS_INVALID_SYMBOLS, STATUS_NO_MEMORY, STATUS_OK, check_err, fail
from _types cimport SUBSTRATE_UBE, SUBSTRATE_UTF8, SUBSTRATE_UTF16
from _utf8 cimport utf8_decode, utf8_encode


cdef enum:
    # token kinds of decode_tokens (ube_stream.tokenizer.core builds the table)
    KIND_RAW = 0        # copy its bytes: well-formed UTF-8 on their own
    KIND_PARTIAL = 1    # copy its bytes, then check them with their neighbours (part of a character)
    KIND_SPECIAL = 2    # copy its bytes (text); a UTF-16 run must be complete before it
    KIND_SYMBOLS = 3    # through its base symbols
    KIND_NONE = 255     # no token has this id
    PAD = 16            # token_bytes holds PAD bytes after the last token

#: the token kinds (ube_stream.tokenizer.core.decode_kinds)
KINDS = {"raw": KIND_RAW, "partial": KIND_PARTIAL, "special": KIND_SPECIAL, "symbols": KIND_SYMBOLS,
         "none": KIND_NONE}


cdef inline bint utf8_valid(const uint8_t* data, Py_ssize_t n) noexcept nogil:
    """True when ``data[0:n]`` is well-formed UTF-8 (ASCII 8 bytes at a time)."""
    cdef Py_ssize_t i = 0
    cdef uint64_t word
    cdef uint32_t cp
    cdef int length
    while i < n:
        while i + 8 <= n:
            memcpy(&word, data + i, 8)
            if word & 0x8080808080808080ULL:
                break
            i += 8
        if i >= n:
            break
        if data[i] < 0x80:
            i += 1
            continue
        length = utf8_decode(data, n, i, &cp)
        if length == 0:
            return False
        i += length
    return True


cdef extern from *:
    """
    #if PY_VERSION_HEX < 0x030B0000
    #include "longintrepr.h"
    #endif
    /* 1 and *value when o is an exact int held in one digit (0 <= o < 2**30; 3.12+:
       a compact non-negative int below 2**32), read from the object without a call
       or a reference count; 0 otherwise (the caller converts it the general way). */
    static inline int ube_small_int(PyObject* o, uint32_t* value) {
        if (!PyLong_CheckExact(o)) return 0;
    #if PY_VERSION_HEX >= 0x030C0000
        if (!PyUnstable_Long_IsCompact((PyLongObject*)o)) return 0;
        Py_ssize_t v = PyUnstable_Long_CompactValue((PyLongObject*)o);
        if (v < 0 || v > 0xFFFFFFFF) return 0;
        *value = (uint32_t)v;
        return 1;
    #else
        Py_ssize_t size = Py_SIZE(o);
        if (size == 0) { *value = 0; return 1; }
        if (size != 1) return 0;
        *value = (uint32_t)((PyLongObject*)o)->ob_digit[0];
        return 1;
    #endif
    }
    /* Ask for the int object a few items ahead: a list's ints lie wherever they were
       allocated, and reading them one after another waits on memory. */
    static inline void ube_prefetch_item(PyObject** items, Py_ssize_t i, Py_ssize_t n) {
    #if defined(__GNUC__) || defined(__clang__)
        if (i < n) __builtin_prefetch(items[i]);
    #endif
    }
    """
    bint ube_small_int(PyObject* o, uint32_t* value) noexcept
    void ube_prefetch_item(PyObject** items, Py_ssize_t i, Py_ssize_t n) noexcept


cdef Py_ssize_t _read_ints(PyObject** items, Py_ssize_t n, uint32_t* out, Py_ssize_t* at) except -1:
    """out[i] = items[i]: an exact int below 2**30 read straight from the object
    (``ube_small_int``), anything else by Cython's int conversion (OverflowError
    outside 0..2**32-1, TypeError for what is not an integer, ``operator.index``);
    ``at`` is the item read when that raises."""
    cdef Py_ssize_t i
    cdef object item
    for i in range(n):
        ube_prefetch_item(items, i + 16, n)
        if ube_small_int(items[i], &out[i]):
            continue
        at[0] = i
        item = <object>items[i]
        out[i] = item if PyLong_Check(item) else PyNumber_Index(item)  # no float truncated to an id
    return n


def ids_from_sequence(seq, uint32_t[::1] out, int64_t[::1] err=None):
    """Write the ints of a list or tuple ``seq`` to ``out`` (``len(seq)`` entries)
    as ``uint32``.  Returns the status: ``STATUS_BAD_ID`` with ``err`` = (-1,
    position) for the first item that is not an integer in ``0..2**32-1``."""
    check_err(err)
    fast = PySequence_Fast(seq, "ids must be a sequence")
    cdef Py_ssize_t n = PySequence_Fast_GET_SIZE(fast), at = 0
    if out.shape[0] < n:
        raise ValueError(f"out has {out.shape[0]} entries; it needs {n}")
    if n == 0:
        return STATUS_OK
    try:
        _read_ints(PySequence_Fast_ITEMS(fast), n, &out[0], &at)
    except (TypeError, OverflowError):
        return fail(err, STATUS_BAD_ID, -1, at)
    return STATUS_OK


cdef inline int _reserve(uint8_t** out, Py_ssize_t* cap, Py_ssize_t need) noexcept nogil:
    """Make ``*out`` hold at least ``need`` bytes (reallocating, with room to spare):
    0, or -1 when that fails (``*out`` and ``*cap`` then stay as they were)."""
    if need <= cap[0]:
        return 0
    cdef Py_ssize_t size = 2 * cap[0] + need
    cdef uint8_t* grown = <uint8_t*>realloc(out[0], size)
    if grown == NULL:
        return -1
    out[0] = grown
    cap[0] = size
    return 0


def decode_tokens(const uint32_t[::1] ids, const uint8_t[::1] token_bytes, const uint64_t[::1] entries,
                  const uint16_t[::1] symbols, const int64_t[::1] symbol_offsets, const int64_t[::1] id_map,
                  int substrate, bint as_bytes, int64_t[::1] err=None):
    """UTF-8 text of token ids: ``(status, str)``, or ``(status, bytes)`` when ``as_bytes``.

    ``entries[id]`` packs what decoding id ``id`` needs: the offset of its bytes in
    ``token_bytes`` (bits 0-31), their length (bits 32-55) and its kind (bits
    56-63; KIND_NONE: no such token).  ``token_bytes`` ends with PAD bytes of
    padding.  A ``symbols`` token (and any token while a UTF-16 sequence is open)
    is decoded from the base symbols of its internal id ``t = id_map[id]`` (``t =
    id`` when ``id_map`` is empty): ``symbols[symbol_offsets[t]:symbol_offsets[t + 1]]``.
    ``STATUS_BAD_ID`` with ``err`` = (-1, token position) for an id without a
    token; ``STATUS_INVALID_SYMBOLS`` with ``err`` = (-1, -1) when the ids do not
    decode (:func:`decode_exact` says where).
    """
    cdef Py_ssize_t n = ids.shape[0], i, j = 0, cap, bad = -1, dirty_lo = -1, dirty_hi = 0
    cdef Py_ssize_t n_entries = entries.shape[0], n_map = id_map.shape[0]
    cdef Py_ssize_t n_sym_tokens = symbol_offsets.shape[0] - 1
    cdef uint32_t tok, unit, low
    cdef uint64_t entry
    cdef int64_t a, b, k, t
    cdef uint8_t kind
    cdef uint8_t carry[4]
    cdef int ncarry = 0, status = STATUS_OK
    cdef bint ube = substrate == SUBSTRATE_UBE
    cdef uint16_t sym, high_base = 256 if ube else 0
    check_err(err)
    if token_bytes.shape[0] < PAD:
        raise ValueError(f"token_bytes needs {PAD} bytes of padding after the last token")
    if n_sym_tokens < 0:
        raise ValueError("symbol_offsets needs n_tokens + 1 entries")
    if not ube and substrate != SUBSTRATE_UTF8 and substrate != SUBSTRATE_UTF16:
        raise ValueError(f"unknown substrate code {substrate}")
    cdef Py_ssize_t limit = token_bytes.shape[0] - PAD
    cdef const uint8_t* tp = &token_bytes[0]
    cdef const uint64_t* ep = &entries[0] if n_entries > 0 else NULL
    cdef const int64_t* so = &symbol_offsets[0]
    cdef const int64_t* mp = &id_map[0] if n_map > 0 else NULL
    cdef const uint16_t* sp = &symbols[0] if symbols.shape[0] > 0 else NULL
    cap = 4 * n + 64
    cdef uint8_t* out = <uint8_t*>malloc(cap)
    if out == NULL:
        return fail(err, STATUS_NO_MEMORY, cap, -1), None
    try:
        with nogil:
            for i in range(n):
                tok = ids[i]
                if tok >= n_entries:
                    bad = i
                    break
                entry = ep[tok]
                kind = <uint8_t>(entry >> 56)
                if ncarry == 0 and kind <= KIND_SPECIAL:
                    a = <int64_t>(entry & 0xFFFFFFFFu)
                    b = <int64_t>((entry >> 32) & 0xFFFFFF)
                    if a + b > limit:  # a table the caller built wrong: never read past it
                        bad = i
                        break
                    if _reserve(&out, &cap, j + b + PAD) < 0:
                        status = STATUS_NO_MEMORY
                        break
                    if kind == KIND_PARTIAL:
                        if dirty_lo < 0:
                            dirty_lo = j
                        dirty_hi = j + b
                    if b <= PAD:
                        memcpy(out + j, tp + a, PAD)  # fixed size: two moves, no call
                    else:
                        memcpy(out + j, tp + a, b)
                    j += b
                    continue
                if kind == KIND_NONE:
                    bad = i
                    break
                if kind == KIND_SPECIAL:
                    status = STATUS_INVALID_SYMBOLS  # a UTF-16 sequence cut by a special token
                    break
                # the symbol path: at most 2 bytes of UTF-8 a base symbol
                t = mp[tok] if mp != NULL else tok
                if t < 0 or t >= n_sym_tokens or so[t + 1] > symbols.shape[0]:
                    bad = i
                    break
                b = 2 * (so[t + 1] - so[t])
                if _reserve(&out, &cap, j + b + PAD) < 0:
                    status = STATUS_NO_MEMORY
                    break
                if dirty_lo < 0:
                    dirty_lo = j
                for k in range(so[t], so[t + 1]):
                    sym = sp[k]
                    if ube and sym < 256:
                        if ncarry:
                            status = STATUS_INVALID_SYMBOLS  # a UTF-16 sequence cut by UTF-8
                            break
                        out[j] = <uint8_t>sym
                        j += 1
                        continue
                    carry[ncarry] = <uint8_t>(sym - high_base)
                    ncarry += 1
                    if ncarry == 2:
                        unit = carry[0] | (<uint32_t>carry[1] << 8)
                        if unit < 0xD800 or unit > 0xDFFF:
                            j += utf8_encode(unit, out + j)
                            ncarry = 0
                        elif unit >= 0xDC00:
                            status = STATUS_INVALID_SYMBOLS  # a lone low surrogate
                            break
                    elif ncarry == 4:
                        unit = carry[0] | (<uint32_t>carry[1] << 8)
                        low = carry[2] | (<uint32_t>carry[3] << 8)
                        if low < 0xDC00 or low > 0xDFFF:
                            status = STATUS_INVALID_SYMBOLS  # a high surrogate without its low half
                            break
                        j += utf8_encode(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00), out + j)
                        ncarry = 0
                dirty_hi = j
                if status != STATUS_OK:
                    break
            if status == STATUS_OK and bad < 0:
                if ncarry:
                    status = STATUS_INVALID_SYMBOLS  # the ids end inside a UTF-16 sequence
                elif dirty_lo >= 0 and as_bytes and not utf8_valid(out + dirty_lo, dirty_hi - dirty_lo):
                    status = STATUS_INVALID_SYMBOLS
        if bad >= 0:
            return fail(err, STATUS_BAD_ID, -1, bad), None
        if status == STATUS_NO_MEMORY:
            return fail(err, STATUS_NO_MEMORY, cap, -1), None
        if status != STATUS_OK:
            return fail(err, status, -1, -1), None
        if as_bytes:
            return STATUS_OK, PyBytes_FromStringAndSize(<char*>out, j)
        try:
            return STATUS_OK, PyUnicode_DecodeUTF8(<char*>out, j, NULL)  # validates
        except UnicodeDecodeError:
            return fail(err, STATUS_INVALID_SYMBOLS, -1, -1), None
    finally:
        free(out)


def decode_exact(const uint32_t[::1] ids, const uint16_t[::1] table, const int64_t[::1] table_offsets,
                const uint8_t[::1] special_bytes, const int64_t[::1] special_offsets, int substrate,
                int64_t[::1] err=None):
    """Decode internal token ids to text symbol by symbol: ``(status, text)``.

    Token ``i < n_tokens`` (``n_tokens = len(table_offsets) - 1``) expands to
    ``table[table_offsets[i]:table_offsets[i+1]]``; token ``n_tokens + k`` is
    special token ``k`` (UTF-8 ``special_bytes[special_offsets[k]:special_offsets[k+1]]``),
    which flushes the symbol buffers.  An invalid sequence gives
    ``STATUS_INVALID_SYMBOLS`` with ``err`` = (symbol offset, counted in base
    symbols from the start of ``ids``, token position); an id outside the
    vocabulary ``STATUS_BAD_ID`` with ``err`` = (-1, token position).
    """
    cdef Py_ssize_t n = ids.shape[0], i, total = 0, special_total = 0, seg_start_tok, written
    cdef Py_ssize_t n_tokens = table_offsets.shape[0] - 1
    cdef Py_ssize_t n_special = special_offsets.shape[0] - 1 if special_offsets.shape[0] > 0 else 0
    cdef uint32_t tok
    cdef Py_ssize_t bad_tok = -1, bad_sym = -1, seg_sym, sym_done, error_at = 0, j, k, length
    cdef int64_t a, b
    if n_tokens < 0:
        raise ValueError("table_offsets needs n_tokens + 1 entries")
    check_err(err)
    with nogil:
        for i in range(n):
            tok = ids[i]
            if tok < n_tokens:
                total += table_offsets[tok + 1] - table_offsets[tok]
            elif tok < n_tokens + n_special:
                special_total += special_offsets[tok - n_tokens + 1] - special_offsets[tok - n_tokens]
            else:
                bad_tok = i
                break
    if bad_tok >= 0:
        return fail(err, STATUS_BAD_ID, -1, bad_tok), None
    cdef uint16_t* syms = <uint16_t*>malloc((total + 1) * sizeof(uint16_t))
    cdef uint8_t* out = <uint8_t*>malloc(2 * total + special_total + 1)
    if syms == NULL or out == NULL:
        free(syms)
        free(out)
        return fail(err, STATUS_NO_MEMORY, 4 * total + special_total + 3, -1), None
    cdef const uint16_t* tp = &table[0] if table.shape[0] > 0 else NULL
    cdef const uint8_t* sp = &special_bytes[0] if special_bytes.shape[0] > 0 else NULL
    try:
        with nogil:
            seg_sym = 0         # symbols in the current segment
            sym_done = 0        # symbols of the finished segments
            seg_start_tok = 0
            written = 0
            for i in range(n + 1):
                if i < n:
                    tok = ids[i]
                    if tok < n_tokens:
                        a = table_offsets[tok]
                        b = table_offsets[tok + 1]
                        if b - a == 1:
                            syms[sym_done + seg_sym] = tp[a]
                        else:
                            memcpy(syms + sym_done + seg_sym, tp + a, (b - a) * sizeof(uint16_t))
                        seg_sym += b - a
                        continue
                # a special token or the end: flush the segment
                if seg_sym > 0:
                    length = symbols_to_utf8(syms + sym_done, seg_sym, substrate, out + written, &error_at)
                    if length < 0:
                        bad_sym = sym_done + error_at
                        # the token holding symbol error_at of this segment
                        k = 0
                        for j in range(seg_start_tok, i):
                            k += table_offsets[ids[j] + 1] - table_offsets[ids[j]]
                            if k > error_at:
                                bad_tok = j
                                break
                        break
                    written += length
                    sym_done += seg_sym
                    seg_sym = 0
                if i < n:
                    a = special_offsets[tok - n_tokens]
                    b = special_offsets[tok - n_tokens + 1]
                    memcpy(out + written, sp + a, b - a)
                    written += b - a
                    seg_start_tok = i + 1
        if bad_sym >= 0:
            return fail(err, STATUS_INVALID_SYMBOLS, bad_sym, bad_tok), None
        return STATUS_OK, PyUnicode_DecodeUTF8(<char*>out, written, NULL)
    finally:
        free(syms)
        free(out)
