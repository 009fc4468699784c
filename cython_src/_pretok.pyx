"""Pre-tokenization kernels: Python-visible entries over the compiled splitters,
_pretok_core.gpt2_split (GPT-2), _pretok_tiktoken.tiktoken_split (cl100k,
llama3, o200k) and _pretok_script.script_split (SCRIPT), chosen by split code
``kind`` (``SPLIT_CODES``).

* :func:`split`: the chunk end byte offsets of one UTF-8 buffer;
* :func:`split_batch`: the same for many documents in one buffer;
* :func:`split_text`: the chunks of a ``str`` as a ``list[str]``, built here
  from the code points of the string itself (``PyUnicode_Substring``);
* :func:`span_ends`: SuperBPE's spans (rule v1 or liu, ``_spans.pxd``) over chunks,
  and :func:`span_keys`, each span's chunks joined by byte 0xFF (the key of
  the phase-1 span table).

One dispatch, ``_split``, serves every entry: a new splitter adds its code
there and in ``_check_classes``.  ``split`` and ``split_batch`` release the
GIL for the whole buffer, so a thread pool splits batches in parallel.  Shapes
are checked here (``ValueError``); invalid UTF-8 is not an exception but the
status ``STATUS_INVALID_UTF8`` with its byte offset in ``err`` (_status.pxd),
which ``ube_stream.errors.check_status`` turns into an ``InvalidTextError``.
"""
from cpython.unicode cimport PyUnicode_AsUTF8String, PyUnicode_Substring
from cpython.list cimport PyList_New, PyList_SET_ITEM
from cpython.ref cimport Py_INCREF, PyObject
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint64_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp, memcpy

from _hash cimport hash_bytes

from _pretok_core cimport gpt2_split
from _status cimport STATUS_INVALID_UTF8, STATUS_NO_MEMORY, STATUS_OK, check_err, fail
from _pretok_tiktoken cimport (SPLIT_CL100K, SPLIT_GPT2, SPLIT_LLAMA3, SPLIT_O200K, TT_HEAD, TT_LETTER,
                               tiktoken_split)
from _pretok_script cimport SC_SCRIPT_SHIFT, SPLIT_SCRIPT, script_split
from _spans cimport SPAN_JOIN_BYTE, SPAN_LETTER, SPAN_OTHER, span_end

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object)
    void* PyUnicode_DATA(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)

#: split codes (the same as ube_stream.pretokenizer.SPLIT_*)
SPLIT_CODES = {"gpt2": SPLIT_GPT2, "cl100k": SPLIT_CL100K, "llama3": SPLIT_LLAMA3, "o200k": SPLIT_O200K,
               "script": SPLIT_SCRIPT}


cdef inline Py_ssize_t _split(const uint8_t* data, Py_ssize_t n, const uint8_t* classes,
                              int64_t* ends, int kind) noexcept nogil:
    """The splitter of ``kind`` (checked by _check_classes): its chunk count, or
    ``-(pos + 1)`` for invalid UTF-8 at ``pos``."""
    if kind == SPLIT_GPT2:
        return gpt2_split(data, n, classes, ends)
    if kind == SPLIT_SCRIPT:  # a uint16 table, passed as its bytes
        return script_split(data, n, <const uint16_t*>classes, ends)
    return tiktoken_split(data, n, classes, ends, kind)


cdef inline void _shift(int64_t* ends, Py_ssize_t count, int64_t start) noexcept nogil:
    """Add ``start`` to ``ends[0:count]`` (a plain pointer loop, which the compiler
    vectorizes: the memoryview form was 7% of split_batch on English text)."""
    cdef Py_ssize_t k
    for k in range(count):
        ends[k] += start


cdef _check_classes(const uint8_t[::1] classes, int kind):
    """ValueError unless ``kind`` is a split code and ``classes`` its class table (the
    bytes of script_class_table() for SCRIPT, whose entries are uint16)."""
    cdef const uint16_t* wide
    if kind == SPLIT_SCRIPT:
        # 'a' is script 5 or later (not Unknown, Common, Inherited, Han, Hiragana), a letter (0)
        wide = <const uint16_t*>&classes[0] if classes.shape[0] == 2 * 0x110000 else NULL
        if wide == NULL or (wide[0x61] >> SC_SCRIPT_SHIFT) < 5 or (wide[0x61] & 7) != 0:
            raise ValueError("classes must be the bytes of script_class_table() (0x110000 uint16 entries "
                             "of SC_* bits) for the script splitter")
        return
    if classes.shape[0] != 0x110000:
        raise ValueError(f"classes must be the kind's class table, gpt2_class_table() or "
                         f"tiktoken_class_table() (0x110000 entries), got {classes.shape[0]} entries")
    if kind == SPLIT_GPT2:
        # 'A' is a GPT-2 letter (1); every tiktoken table has more bits on it
        if classes[0x41] != 1:
            raise ValueError("classes must be gpt2_class_table() for the gpt2 splitter")
    elif kind == SPLIT_CL100K or kind == SPLIT_LLAMA3 or kind == SPLIT_O200K:
        # 'A' is a letter of o200k's first class in every table, in no GPT-2 one
        if classes[0x41] != (TT_LETTER | TT_HEAD):
            raise ValueError("classes must be tiktoken_class_table() (TT_* bits) for the cl100k, llama3 "
                             "and o200k splitters")
    else:
        raise ValueError(f"kind must be a split code {SPLIT_CODES}, got {kind}")


cdef _check_batch(const uint8_t[::1] data, const int64_t[::1] doc_offsets, int64_t[::1] ends,
                  int64_t[::1] doc_chunk_offsets):
    """The shapes split_batch needs (caller errors: ValueError before the nogil loop)."""
    cdef Py_ssize_t ndocs = doc_offsets.shape[0] - 1, d
    if ndocs < 0:
        raise ValueError("doc_offsets needs at least one entry (ndocs + 1)")
    if doc_chunk_offsets.shape[0] < ndocs + 1:
        raise ValueError(f"doc_chunk_offsets has {doc_chunk_offsets.shape[0]} entries; "
                         f"it needs ndocs + 1 = {ndocs + 1}")
    if doc_offsets[0] < 0 or doc_offsets[ndocs] > data.shape[0]:
        raise ValueError(f"doc_offsets span [{doc_offsets[0]}, {doc_offsets[ndocs]}] "
                         f"is outside data (0..{data.shape[0]})")
    for d in range(ndocs):
        if doc_offsets[d + 1] < doc_offsets[d]:
            raise ValueError(f"doc_offsets must be non-decreasing; doc_offsets[{d + 1}] = "
                             f"{doc_offsets[d + 1]} < doc_offsets[{d}] = {doc_offsets[d]}")
    if ends.shape[0] < doc_offsets[ndocs] - doc_offsets[0]:
        raise ValueError(f"ends has {ends.shape[0]} entries; it needs "
                         f"{doc_offsets[ndocs] - doc_offsets[0]} (the bytes of all documents)")


def split(const uint8_t[::1] data, const uint8_t[::1] classes, int64_t[::1] ends, int kind,
          int64_t[::1] err=None):
    """Split UTF-8 ``data`` by the pattern of split code ``kind``; write the chunk
    end byte offsets to ``ends``.

    ``classes`` is the kind's class table (``gpt2_class_table()`` for gpt2,
    ``tiktoken_class_table()`` otherwise); ``ends`` needs ``len(data)`` entries.
    Returns ``(status, count)``: the number of chunks, or
    ``(STATUS_INVALID_UTF8, None)`` with ``err[0]`` the first byte offset that is
    not well-formed UTF-8.
    """
    _check_classes(classes, kind)
    check_err(err)
    cdef Py_ssize_t n = data.shape[0], result
    if ends.shape[0] < n:
        raise ValueError(f"ends has {ends.shape[0]} entries; it needs len(data) = {n}")
    if n == 0:
        return STATUS_OK, 0
    with nogil:
        result = _split(&data[0], n, &classes[0], &ends[0], kind)
    if result < 0:
        return fail(err, STATUS_INVALID_UTF8, -result - 1, -1), None
    return STATUS_OK, result


def split_batch(const uint8_t[::1] data, const int64_t[::1] doc_offsets, const uint8_t[::1] classes,
                int64_t[::1] ends, int64_t[::1] doc_chunk_offsets, int kind, int64_t[::1] err=None):
    """Split each document ``data[doc_offsets[d]:doc_offsets[d + 1]]`` separately.

    Chunk ends are absolute byte offsets into ``data``, written to ``ends``
    (needs ``doc_offsets[-1] - doc_offsets[0]`` entries); the chunks of document
    ``d`` are ``ends[doc_chunk_offsets[d]:doc_chunk_offsets[d + 1]]``
    (``doc_chunk_offsets`` needs ``ndocs + 1`` entries).  Chunks never cross
    document boundaries.  Returns ``(status, total)``: the total number of
    chunks, or ``(STATUS_INVALID_UTF8, None)`` with ``err`` = (absolute byte
    offset of the first invalid UTF-8 sequence, its document);
    ``doc_chunk_offsets`` is then filled up to that document.
    """
    _check_classes(classes, kind)
    check_err(err)
    cdef Py_ssize_t ndocs = doc_offsets.shape[0] - 1, d, total = 0, count
    cdef int64_t start, stop, bad = -1, bad_doc = -1
    _check_batch(data, doc_offsets, ends, doc_chunk_offsets)
    doc_chunk_offsets[0] = 0
    with nogil:
        for d in range(ndocs):
            start = doc_offsets[d]
            stop = doc_offsets[d + 1]
            if stop > start:
                count = _split(&data[start], stop - start, &classes[0], &ends[total], kind)
                if count < 0:
                    bad = start + (-count - 1)
                    bad_doc = d
                    break
                _shift(&ends[total], count, start)
                total += count
            doc_chunk_offsets[d + 1] = total
    if bad >= 0:
        return fail(err, STATUS_INVALID_UTF8, bad, bad_doc), None
    return STATUS_OK, total


cdef inline void _char_ends(const uint8_t* data, const int64_t* ends, int64_t* char_ends,
                            Py_ssize_t count) noexcept nogil:
    """The character end offsets of the byte end offsets ``ends`` (a character
    starts at each byte that is not a UTF-8 continuation byte)."""
    cdef Py_ssize_t c, i = 0, chars = 0
    cdef int64_t stop
    for c in range(count):
        stop = ends[c]
        while i < stop:
            chars += (data[i] & 0xC0) != 0x80
            i += 1
        char_ends[c] = chars


cdef enum:
    CACHED_CHUNK = 24   # chunks of at most this many bytes go through split_text's string cache

cdef struct CachedChunk:
    PyObject* piece     # borrowed: the result list holds it
    int64_t start       # its bytes in the call's UTF-8 data
    int64_t length


def split_text(str text, const uint8_t[::1] classes, int kind, int64_t[::1] err=None):
    """The chunks of ``text`` as ``(status, list[str])``.

    The split runs on the string's own bytes when it is ASCII, else on a
    temporary UTF-8 copy; each chunk is a slice of ``text`` itself
    (``PyUnicode_Substring`` at character offsets), so building the list decodes
    nothing.  Short chunks repeat (`` the``, ``,``): a direct-mapped cache keyed
    by their bytes hands out one string object for all equal chunks of the call,
    which saves most allocations (strings are immutable; only ``is`` sees it).
    ``UnicodeEncodeError`` for a lone surrogate (the caller names its offset);
    ``STATUS_NO_MEMORY`` when the buffers cannot be allocated.
    """
    _check_classes(classes, kind)
    check_err(err)
    cdef Py_ssize_t n_chars = PyUnicode_GET_LENGTH(text), n, count, c
    cdef bytes utf8 = None
    cdef const uint8_t* data
    if PyUnicode_IS_ASCII(text):
        data = <const uint8_t*>PyUnicode_DATA(text)
        n = n_chars
    else:
        utf8 = PyUnicode_AsUTF8String(text)
        data = <const uint8_t*><char*>utf8
        n = len(utf8)
    if n == 0:
        return STATUS_OK, []
    cdef bint ascii = n == n_chars
    # byte ends, then (non-ASCII) character ends beside them
    cdef int64_t* ends = <int64_t*>malloc((n if ascii else 2 * n) * sizeof(int64_t))
    cdef Py_ssize_t slots = 1 << 12
    while slots < n // 8 and slots < (1 << 16):
        slots <<= 1
    cdef CachedChunk* cache = <CachedChunk*>calloc(slots, sizeof(CachedChunk))
    if ends == NULL or cache == NULL:
        free(ends)
        free(cache)
        return fail(err, STATUS_NO_MEMORY, 2 * n * sizeof(int64_t), -1), None
    cdef int64_t* char_ends = ends if ascii else ends + n
    cdef list chunks
    cdef object piece
    cdef int64_t start = 0, stop, char_start = 0, length
    cdef CachedChunk* slot
    try:
        with nogil:
            count = _split(data, n, &classes[0], ends, kind)
            if count > 0 and not ascii:
                _char_ends(data, ends, char_ends, count)
        if count < 0:  # cannot happen for the UTF-8 of a str; reported as the kernels do
            return fail(err, STATUS_INVALID_UTF8, -count - 1, -1), None
        chunks = PyList_New(count)
        for c in range(count):
            stop = ends[c]
            length = stop - start
            if length <= CACHED_CHUNK:
                slot = &cache[hash_bytes(data + start, length) & <uint64_t>(slots - 1)]
                if (slot.piece != NULL and slot.length == length
                        and memcmp(data + slot.start, data + start, length) == 0):
                    piece = <object>slot.piece
                else:
                    piece = PyUnicode_Substring(text, char_start, char_ends[c])
                    slot.piece = <PyObject*>piece
                    slot.start = start
                    slot.length = length
            else:
                piece = PyUnicode_Substring(text, char_start, char_ends[c])
            Py_INCREF(piece)
            PyList_SET_ITEM(chunks, c, piece)
            start = stop
            char_start = char_ends[c]
        return STATUS_OK, chunks
    finally:
        free(ends)
        free(cache)


#: the byte that joins a span's chunks in its key (never in UTF-8)
SPAN_JOIN = SPAN_JOIN_BYTE


cdef _check_chunks(const uint8_t[::1] data, const int64_t[::1] chunk_ends, int64_t start):
    """ValueError unless ``chunk_ends`` are non-decreasing byte offsets in ``start..len(data)``."""
    cdef Py_ssize_t c, n = chunk_ends.shape[0]
    cdef int64_t prev = start
    if start < 0 or start > data.shape[0]:
        raise ValueError(f"start = {start} is outside the {data.shape[0]} bytes of data")
    for c in range(n):
        if chunk_ends[c] < prev or chunk_ends[c] > data.shape[0]:
            raise ValueError(f"chunk_ends[{c}] = {chunk_ends[c]} is not in {prev}..{data.shape[0]}; "
                             "chunk ends must be non-decreasing byte offsets into data")
        prev = chunk_ends[c]


def span_ends(const uint8_t[::1] data, const int64_t[::1] chunk_ends, const uint8_t[::1] classes,
              int64_t[::1] out, int64_t start=0, const int64_t[::1] doc_chunk_offsets=None,
              int64_t[::1] err=None):
    """SuperBPE spans (cython_src/_spans.pxd) of the chunks
    ``data[start:chunk_ends[0]], data[chunk_ends[0]:chunk_ends[1]], ...``.

    A chunk is joinable iff it holds a SPAN_LETTER and otherwise only SPAN_GLUE
    characters of ``classes``, ``ube_stream.pretokenizer.span_class_table(rule)``
    (rule v1: a letter or mark and otherwise only U+0020 and apostrophes; rule
    liu: no number); a span is a maximal run of joinable chunks, cut after a
    line feed and between ':' and a space, any other chunk a span of its own.  ``doc_chunk_offsets``
    (as ``split_batch`` writes it; None: one document) marks chunk indices a
    span never crosses.  Writes the exclusive end chunk index of each span to
    ``out`` (needs ``len(chunk_ends)`` entries): span ``s`` is chunks
    ``out[s - 1]..out[s] - 1``.  Returns ``(status, number of spans)``, or
    ``(STATUS_INVALID_UTF8, None)`` with ``err = (byte offset, -1)``.
    """
    check_err(err)
    if classes.shape[0] != 0x110000 or classes[0x61] != SPAN_LETTER or classes[0x20] == SPAN_OTHER:
        raise ValueError("classes must be span_class_table(rule) (0x110000 entries: 1 letter, 2 glue)")
    cdef Py_ssize_t n = chunk_ends.shape[0], nspans = 0, c = 0, stop, e, d = 0, ndocs = 0
    if out.shape[0] < n:
        raise ValueError(f"out has {out.shape[0]} entries; it needs len(chunk_ends) = {n}")
    _check_chunks(data, chunk_ends, start)
    if doc_chunk_offsets is not None:
        ndocs = doc_chunk_offsets.shape[0] - 1
        for d in range(ndocs + 1):
            if doc_chunk_offsets[d] < (doc_chunk_offsets[d - 1] if d else 0) or doc_chunk_offsets[d] > n:
                raise ValueError(f"doc_chunk_offsets[{d}] = {doc_chunk_offsets[d]} is not a non-decreasing "
                                 f"chunk index in 0..{n}")
        d = 0
    if n == 0:
        return STATUS_OK, 0
    cdef const uint8_t* base = &data[0] if data.shape[0] else NULL
    cdef int64_t lo = start
    with nogil:
        while c < n:
            stop = n
            if ndocs:
                while d < ndocs and doc_chunk_offsets[d + 1] <= c:
                    d += 1
                if d < ndocs:
                    stop = doc_chunk_offsets[d + 1]
            e = span_end(base, &chunk_ends[0], c, stop, lo, &classes[0])
            if e < 0:
                break
            out[nspans] = e
            nspans += 1
            lo = chunk_ends[e - 1]
            c = e
    if c < n:
        return fail(err, STATUS_INVALID_UTF8, -e - 1, -1), None
    return STATUS_OK, nspans


def span_keys(const uint8_t[::1] data, const int64_t[::1] chunk_ends, const int64_t[::1] spans,
              uint8_t[::1] keys, int64_t[::1] key_ends, int64_t start=0):
    """The key of each span: its chunks' bytes joined by ``SPAN_JOIN`` (0xFF).

    ``spans`` are exclusive end chunk indices (:func:`span_ends`) of chunks as
    there.  Writes the keys one after another to ``keys`` (needs
    ``chunk_ends[-1] - start + len(chunk_ends)`` bytes) and each key's end
    offset to ``key_ends`` (``len(spans)`` entries); returns the bytes written.
    """
    cdef Py_ssize_t n = chunk_ends.shape[0], nspans = spans.shape[0], s, c = 0, length
    cdef int64_t lo = start, pos = 0
    _check_chunks(data, chunk_ends, start)
    for s in range(nspans):
        if spans[s] <= (spans[s - 1] if s else 0) or spans[s] > n:
            raise ValueError(f"spans[{s}] = {spans[s]} is not an increasing chunk index in 1..{n}")
    if nspans and spans[nspans - 1] != n:
        raise ValueError(f"the last span ends at chunk {spans[nspans - 1]}, not at the last chunk ({n})")
    if key_ends.shape[0] < nspans:
        raise ValueError(f"key_ends has {key_ends.shape[0]} entries; it needs len(spans) = {nspans}")
    if n and keys.shape[0] < chunk_ends[n - 1] - start + n:
        raise ValueError(f"keys has {keys.shape[0]} bytes; it needs {chunk_ends[n - 1] - start + n}")
    if n == 0:
        return 0
    with nogil:
        for s in range(nspans):
            while c < spans[s]:
                if c > (spans[s - 1] if s else 0):
                    keys[pos] = SPAN_JOIN_BYTE
                    pos += 1
                length = chunk_ends[c] - lo
                if length:
                    memcpy(&keys[pos], &data[lo], length)
                pos += length
                lo = chunk_ends[c]
                c += 1
            key_ends[s] = pos
    return pos
