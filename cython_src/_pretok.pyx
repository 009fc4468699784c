"""Pre-tokenization kernels: Python-visible entries over the compiled splitters,
_pretok_core.gpt2_split (GPT-2), _pretok_tiktoken.tiktoken_split (cl100k,
llama3, o200k) and _pretok_script.script_split (SCRIPT), chosen by split code
``kind`` (``SPLIT_CODES``).

* :func:`split`: the chunk end byte offsets of one UTF-8 buffer;
* :func:`split_batch`: the same for many documents in one buffer;
* :func:`split_text`: the chunks of a ``str`` as a ``list[str]``, built here
  from the code points of the string itself (``PyUnicode_Substring``).

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
from libc.string cimport memcmp

from _hash cimport hash_bytes

from _pretok_core cimport gpt2_split
from _status cimport STATUS_INVALID_UTF8, STATUS_NO_MEMORY, STATUS_OK, check_err, fail
from _pretok_tiktoken cimport (SPLIT_CL100K, SPLIT_GPT2, SPLIT_LLAMA3, SPLIT_O200K, TT_HEAD, TT_LETTER,
                               tiktoken_split)
from _pretok_script cimport SC_SCRIPT_SHIFT, SPLIT_SCRIPT, script_split

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
    cdef Py_ssize_t ndocs = doc_offsets.shape[0] - 1, d, k, total = 0, count
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
                for k in range(total, total + count):
                    ends[k] += start
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
