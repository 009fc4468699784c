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
* :func:`decode_sequence`: the fast path from a list or tuple of Python ints,
  read from the int objects a block at a time into an L1 buffer that the same
  decode loop takes (no ``uint32`` array, one pass); it holds the GIL, which
  reading a list needs.
* :func:`ids_from_sequence`: a list or tuple of Python ints as ``uint32``,
  without numpy's per-item dispatch (the general conversion).

The tables of the fast path are checked and held once in a
:class:`DecodeTables` (a call acquires no table buffers: a few hundred ns, not
several us, for a short list).  Every decode from an array releases the GIL.
Errors follow ``_status.pxd``.
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
    /* Ask for a table entry that a decode run is about to read. */
    static inline void ube_prefetch(const void* p) {
    #if defined(__GNUC__) || defined(__clang__)
        __builtin_prefetch(p);
    #endif
    }
    """
    bint ube_small_int(PyObject* o, uint32_t* value) noexcept nogil
    void ube_prefetch_item(PyObject** items, Py_ssize_t i, Py_ssize_t n) noexcept nogil
    void ube_prefetch(const void* p) noexcept nogil


cdef Py_ssize_t _read_small_ints(PyObject** items, Py_ssize_t n, uint32_t* out,
                                 const uint64_t* entries=NULL, Py_ssize_t n_entries=0) noexcept:
    """out[i] = items[i] while each is an exact int below 2**30 (``ube_small_int``,
    read straight from the object, no Python code run); returns the first ``i``
    that is not.  ``entries``: also ask for the decode entry of each id read."""
    cdef Py_ssize_t i
    for i in range(n):
        ube_prefetch_item(items, i + 16, n)
        if not ube_small_int(items[i], &out[i]):
            return i
        if entries != NULL and out[i] < <uint64_t>n_entries:
            ube_prefetch(entries + out[i])
    return n


def ids_from_sequence(seq, uint32_t[::1] out, int64_t[::1] err=None):
    """Write the ints of a list or tuple ``seq`` to ``out`` (``len(seq)`` entries)
    as ``uint32``.  Returns the status: ``STATUS_BAD_ID`` with ``err`` = (-1,
    position) for the first item that is not an integer in ``0..2**32-1``
    (Cython's int conversion: OverflowError outside 0..2**32-1, TypeError for what
    is not an integer, ``operator.index``; no float is truncated to an id)."""
    check_err(err)
    fast = PySequence_Fast(seq, "ids must be a sequence")
    cdef Py_ssize_t n = PySequence_Fast_GET_SIZE(fast), at
    cdef object item
    if out.shape[0] < n:
        raise ValueError(f"out has {out.shape[0]} entries; it needs {n}")
    if n == 0:
        return STATUS_OK
    at = _read_small_ints(PySequence_Fast_ITEMS(fast), n, &out[0])
    if at == n:
        return STATUS_OK
    # the rest as a tuple of its own: an item's __index__ may change the list, which
    # would pull the item pointers from under a loop over the list's own array
    try:
        for item in tuple(fast[at:]):
            out[at] = item if PyLong_Check(item) else PyNumber_Index(item)
            at += 1
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


cdef struct Decoder:
    # the tables (DecodeTables), read only
    const uint8_t* tp           # token_bytes
    Py_ssize_t limit            # len(token_bytes) - PAD
    const uint64_t* ep          # entries
    Py_ssize_t n_entries
    const int64_t* so           # symbol_offsets
    Py_ssize_t n_sym_tokens
    Py_ssize_t n_symbols
    const int64_t* mp           # id_map (NULL: the same)
    const uint16_t* sp          # symbols
    bint ube
    uint16_t high_base
    # the output and the open UTF-16 sequence, carried from one run of ids to the next
    uint8_t* out
    Py_ssize_t cap
    Py_ssize_t j
    Py_ssize_t dirty_lo
    Py_ssize_t dirty_hi
    int ncarry
    uint8_t carry[4]


cdef class DecodeTables:
    """A tokenizer's decode tables, checked once and held for :func:`decode_tokens`
    and :func:`decode_sequence` (a call then acquires no table buffers).

    ``entries[id]`` packs what decoding id ``id`` needs: the offset of its bytes in
    ``token_bytes`` (bits 0-31), their length (bits 32-55) and its kind (bits
    56-63; KIND_NONE: no such token).  ``token_bytes`` ends with PAD bytes of
    padding.  A ``symbols`` token (and any token while a UTF-16 sequence is open)
    is decoded from the base symbols of its internal id ``t = id_map[id]`` (``t =
    id`` when ``id_map`` is empty): ``symbols[symbol_offsets[t]:symbol_offsets[t + 1]]``.
    """
    cdef const uint8_t[::1] token_bytes
    cdef const uint64_t[::1] entries
    cdef const uint16_t[::1] symbols
    cdef const int64_t[::1] symbol_offsets
    cdef const int64_t[::1] id_map
    cdef Decoder proto

    def __cinit__(self, const uint8_t[::1] token_bytes, const uint64_t[::1] entries,
                  const uint16_t[::1] symbols, const int64_t[::1] symbol_offsets,
                  const int64_t[::1] id_map, int substrate):
        if token_bytes.shape[0] < PAD:
            raise ValueError(f"token_bytes needs {PAD} bytes of padding after the last token")
        if symbol_offsets.shape[0] < 1:
            raise ValueError("symbol_offsets needs n_tokens + 1 entries")
        if substrate != SUBSTRATE_UBE and substrate != SUBSTRATE_UTF8 and substrate != SUBSTRATE_UTF16:
            raise ValueError(f"unknown substrate code {substrate}")
        self.token_bytes, self.entries, self.symbols = token_bytes, entries, symbols
        self.symbol_offsets, self.id_map = symbol_offsets, id_map
        cdef Decoder* d = &self.proto
        d.tp = &token_bytes[0]
        d.limit = token_bytes.shape[0] - PAD
        d.n_entries = entries.shape[0]
        d.ep = &entries[0] if d.n_entries > 0 else NULL
        d.so = &symbol_offsets[0]
        d.n_sym_tokens = symbol_offsets.shape[0] - 1
        d.n_symbols = symbols.shape[0]
        d.mp = &id_map[0] if id_map.shape[0] > 0 else NULL
        d.sp = &symbols[0] if symbols.shape[0] > 0 else NULL
        d.ube = substrate == SUBSTRATE_UBE
        d.high_base = 256 if d.ube else 0
        d.out = NULL
        d.cap = d.j = d.dirty_hi = 0
        d.dirty_lo = -1
        d.ncarry = 0


cdef struct Reader:
    # list items that a decode run reads while it decodes the ids before them
    PyObject** items
    Py_ssize_t n
    uint32_t* out
    Py_ssize_t bad      # the first item that is not an exact int below 2**30 (-1: none)


cdef int _decode_run(Decoder* d, const uint32_t* ids, Py_ssize_t n, Py_ssize_t ahead,
                     Reader* r, Py_ssize_t* bad) noexcept nogil:
    """Append the UTF-8 of ``ids[0:n]`` to ``d.out``, carrying an open UTF-16
    sequence in ``d.carry`` from the run before and to the next: the one decode
    loop of both entries.  ``ahead`` > 0: ask for the entry of the id that many
    places ahead (the entries of a large vocabulary do not stay in L2; 0: the
    caller has asked for them).  ``r`` (or NULL): at step ``i`` also read list
    item ``r.items[i]`` into ``r.out[i]`` (``i < r.n <= n``), asking for its
    entry; ``r.bad`` = the first it cannot read.  Returns the status; ``*bad``
    = the index in ``ids`` of an id without a token (``STATUS_BAD_ID``)."""
    # the state in locals: stores through the uint8_t output may alias the struct
    cdef const uint8_t* tp = d.tp
    cdef const uint64_t* ep = d.ep
    cdef const int64_t* so = d.so
    cdef const int64_t* mp = d.mp
    cdef const uint16_t* sp = d.sp
    cdef Py_ssize_t limit = d.limit, n_entries = d.n_entries, n_sym_tokens = d.n_sym_tokens
    cdef Py_ssize_t n_symbols = d.n_symbols
    cdef uint8_t* out = d.out
    cdef Py_ssize_t cap = d.cap, j = d.j, dirty_lo = d.dirty_lo, dirty_hi = d.dirty_hi, i
    cdef bint ube = d.ube
    cdef uint16_t sym, high_base = d.high_base
    cdef uint8_t carry[4]
    cdef int ncarry = d.ncarry, status = STATUS_OK
    cdef uint32_t tok, unit, low
    cdef uint64_t entry
    cdef int64_t a, b, k, t
    cdef uint8_t kind
    memcpy(carry, d.carry, 4)
    cdef Py_ssize_t rn = r.n if r != NULL else 0
    cdef PyObject** ritems = r.items if r != NULL else NULL
    cdef uint32_t* rout = r.out if r != NULL else NULL
    for i in range(n):
        if ahead and i + ahead < n and ids[i + ahead] < n_entries:
            ube_prefetch(ep + ids[i + ahead])
        if i < rn:
            ube_prefetch_item(ritems, i + 16, rn)
            if ube_small_int(ritems[i], &rout[i]):
                if rout[i] < n_entries:
                    ube_prefetch(ep + rout[i])
            elif r.bad < 0:
                r.bad = i
        tok = ids[i]
        if tok >= n_entries:
            bad[0] = i
            status = STATUS_BAD_ID
            break
        entry = ep[tok]
        kind = <uint8_t>(entry >> 56)
        if ncarry == 0 and kind <= KIND_SPECIAL:
            a = <int64_t>(entry & 0xFFFFFFFFu)
            b = <int64_t>((entry >> 32) & 0xFFFFFF)
            if a + b > limit:  # a table the caller built wrong: never read past it
                bad[0] = i
                status = STATUS_BAD_ID
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
            bad[0] = i
            status = STATUS_BAD_ID
            break
        if kind == KIND_SPECIAL:
            status = STATUS_INVALID_SYMBOLS  # a UTF-16 sequence cut by a special token
            break
        # the symbol path: at most 2 bytes of UTF-8 a base symbol
        t = mp[tok] if mp != NULL else tok
        if t < 0 or t >= n_sym_tokens or so[t + 1] > n_symbols:
            bad[0] = i
            status = STATUS_BAD_ID
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
    d.out, d.cap, d.j, d.dirty_lo, d.dirty_hi, d.ncarry = out, cap, j, dirty_lo, dirty_hi, ncarry
    memcpy(d.carry, carry, 4)
    return status


cdef inline int _decode_begin(DecodeTables tables, Decoder* d, Py_ssize_t n) noexcept:
    """``d`` = the tables' decoder with an output for ``n`` ids: 0, or -1 when
    the allocation fails."""
    d[0] = tables.proto
    d.cap = 4 * n + 64
    d.out = <uint8_t*>malloc(d.cap)
    return 0 if d.out != NULL else -1


cdef object _decode_end(Decoder* d, int status, Py_ssize_t bad, bint as_bytes, int64_t[::1] err):
    """The result of a decode whose runs gave ``status`` (``bad``: the token
    position of STATUS_BAD_ID): ``(status, str or bytes)``, the end checked (no
    open UTF-16 sequence, the dirty span valid UTF-8); frees ``d.out``."""
    cdef Py_ssize_t span = d.dirty_hi - d.dirty_lo
    try:
        if status == STATUS_OK:
            if d.ncarry:
                status = STATUS_INVALID_SYMBOLS  # the ids end inside a UTF-16 sequence
            elif d.dirty_lo >= 0 and as_bytes:
                with nogil:
                    if not utf8_valid(d.out + d.dirty_lo, span):
                        status = STATUS_INVALID_SYMBOLS
        if status == STATUS_BAD_ID:
            return fail(err, STATUS_BAD_ID, -1, bad), None
        if status == STATUS_NO_MEMORY:
            return fail(err, STATUS_NO_MEMORY, d.cap, -1), None
        if status != STATUS_OK:
            return fail(err, status, -1, -1), None
        if as_bytes:
            return STATUS_OK, PyBytes_FromStringAndSize(<char*>d.out, d.j)
        try:
            return STATUS_OK, PyUnicode_DecodeUTF8(<char*>d.out, d.j, NULL)  # validates
        except UnicodeDecodeError:
            return fail(err, STATUS_INVALID_SYMBOLS, -1, -1), None
    finally:
        free(d.out)
        d.out = NULL


def decode_tokens(DecodeTables tables not None, const uint32_t[::1] ids, bint as_bytes, int64_t[::1] err=None):
    """UTF-8 text of token ids: ``(status, str)``, or ``(status, bytes)`` when
    ``as_bytes``; the GIL is released while it decodes.

    ``STATUS_BAD_ID`` with ``err`` = (-1, token position) for an id without a
    token; ``STATUS_INVALID_SYMBOLS`` with ``err`` = (-1, -1) when the ids do not
    decode (:func:`decode_exact` says where).
    """
    check_err(err)
    cdef Decoder d
    cdef Py_ssize_t n = ids.shape[0], bad = -1
    cdef int status = STATUS_OK
    if _decode_begin(tables, &d, n) < 0:
        return fail(err, STATUS_NO_MEMORY, d.cap, -1), None
    if n > 0:
        with nogil:
            status = _decode_run(&d, &ids[0], n, PREFETCH_AHEAD, NULL, &bad)
    return _decode_end(&d, status, bad, as_bytes, err)


cdef enum:
    PREFETCH_AHEAD = 32  # decode_tokens asks for the entry of the id this far ahead (1.26x on cl100k)
    SEQ_BLOCK = 256      # ids decode_sequence reads from a list at a time (1 KiB: stays in L1)


def decode_sequence(DecodeTables tables not None, seq, bint as_bytes, int64_t[::1] err=None):
    """:func:`decode_tokens` of a list or tuple of Python ints, read from the
    items without a ``uint32`` array: SEQ_BLOCK ids at a time go through the
    one decode loop from a buffer that stays in L1, and while a block decodes,
    the loop reads the next block's int objects (``ube_small_int``; the
    objects 16 items ahead and each id's entry prefetched) into the other
    buffer, so that reading the objects overlaps the decode (~8% faster than
    reading a block, then decoding it).  The GIL is held throughout: a list
    can only be read with it, and releasing it for each block's decode
    measured slower (``benchmarks/decode_list_vs_array.py``); nothing in the
    loop runs Python code, so the sequence cannot change under it.

    ``STATUS_BAD_ID`` with ``err`` = (-1, position) for the first item that is
    not an exact int (a bool, an int subclass, a numpy int, a float...), an
    int at or past 2**30, or an id without a token: the caller converts such a
    sequence the general way (``substrate.as_id_array``) and decodes the array,
    which names what is wrong.  Other statuses as :func:`decode_tokens`.
    """
    check_err(err)
    fast = PySequence_Fast(seq, "ids must be a list or tuple")
    cdef Py_ssize_t n = PySequence_Fast_GET_SIZE(fast), lo = 0, nb, i, bad = -1
    cdef PyObject** items = PySequence_Fast_ITEMS(fast)
    cdef uint32_t bufs[2][SEQ_BLOCK]
    cdef uint32_t* buf
    cdef int status = STATUS_OK, run_status, which = 0
    cdef Decoder d
    cdef Reader r
    if _decode_begin(tables, &d, n) < 0:
        return fail(err, STATUS_NO_MEMORY, d.cap, -1), None
    # the first block read alone (its entries asked for), each next one while the one before decodes
    r.items, r.n, r.out = items, min(<Py_ssize_t>SEQ_BLOCK, n), bufs[0]
    i = _read_small_ints(items, r.n, r.out, d.ep, d.n_entries)
    r.bad = i if i < r.n else -1
    while lo < n and status == STATUS_OK:
        buf = r.out
        nb = r.n
        if r.bad >= 0:
            nb = r.bad  # decode the ids before it: an earlier id may be the first bad one
            bad = lo + r.bad
            status = STATUS_BAD_ID
        which ^= 1
        r.items, r.n, r.out, r.bad = items + lo + nb, min(<Py_ssize_t>SEQ_BLOCK, n - lo - nb), bufs[which], -1
        if status != STATUS_OK or r.n > nb:
            r.n = 0  # this block ends the decode (a block shorter than SEQ_BLOCK is the last)
        run_status = _decode_run(&d, buf, nb, 0, &r, &bad)
        if run_status != STATUS_OK:
            status = run_status
            if status == STATUS_BAD_ID:
                bad += lo
        lo += nb
    return _decode_end(&d, status, bad, as_bytes, err)


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
