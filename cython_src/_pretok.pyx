"""Pre-tokenization kernels: Python-visible wrappers of _pretok_core.gpt2_split
(GPT-2), _pretok_tiktoken.tiktoken_split (cl100k, llama3, o200k) and
_pretok_script.script_split (SCRIPT).

All entries release the GIL, so a thread pool splits batches in parallel.
Shapes are checked here (``ValueError``); invalid UTF-8 is not an exception
but the status ``STATUS_INVALID_UTF8`` with its byte offset in ``err``
(_status.pxd), which ``ube_stream.errors.check_status`` turns into an
``InvalidTextError``.
"""
from libc.stdint cimport int64_t, uint8_t, uint16_t

from _pretok_core cimport gpt2_split
from _status cimport STATUS_INVALID_UTF8, STATUS_OK, check_err, fail
from _pretok_tiktoken cimport (SPLIT_CL100K, SPLIT_GPT2, SPLIT_LLAMA3, SPLIT_O200K, TT_HEAD, TT_LETTER,
                               tiktoken_split)
from _pretok_script cimport SC_SCRIPT_SHIFT, SPLIT_SCRIPT, script_split

#: split codes (the same as ube_stream.pretokenizer.SPLIT_*)
SPLIT_CODES = {"gpt2": SPLIT_GPT2, "cl100k": SPLIT_CL100K, "llama3": SPLIT_LLAMA3, "o200k": SPLIT_O200K, "script": SPLIT_SCRIPT}


cdef _check_classes(const uint8_t[::1] classes):
    if classes.shape[0] != 0x110000:
        raise ValueError(f"classes must be gpt2_class_table() (0x110000 entries), got {classes.shape[0]}")


cdef _check_batch(const uint8_t[::1] data, const int64_t[::1] doc_offsets, int64_t[::1] ends,
                  int64_t[::1] doc_chunk_offsets):
    """The shapes both batch entries need (caller errors: ValueError before the nogil loop)."""
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


def split_gpt2(const uint8_t[::1] data, const uint8_t[::1] classes, int64_t[::1] ends,
               int64_t[::1] err=None):
    """Split UTF-8 ``data`` into GPT-2 chunks; write their end byte offsets to ``ends``.

    ``ends`` needs ``len(data)`` entries.  Returns ``(status, count)``: the
    number of chunks, or ``(STATUS_INVALID_UTF8, None)`` with ``err[0]`` the
    first byte offset that is not well-formed UTF-8.
    """
    _check_classes(classes)
    check_err(err)
    cdef Py_ssize_t n = data.shape[0], result
    if ends.shape[0] < n:
        raise ValueError(f"ends has {ends.shape[0]} entries; it needs len(data) = {n}")
    if n == 0:
        return STATUS_OK, 0
    with nogil:
        result = gpt2_split(&data[0], n, &classes[0], &ends[0])
    if result < 0:
        return fail(err, STATUS_INVALID_UTF8, -result - 1, -1), None
    return STATUS_OK, result


def split_gpt2_batch(const uint8_t[::1] data, const int64_t[::1] doc_offsets,
                     const uint8_t[::1] classes, int64_t[::1] ends,
                     int64_t[::1] doc_chunk_offsets, int64_t[::1] err=None):
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
    _check_classes(classes)
    check_err(err)
    cdef Py_ssize_t ndocs = doc_offsets.shape[0] - 1, d, k, first, total = 0, count
    cdef int64_t start, stop, bad = -1, bad_doc = -1
    _check_batch(data, doc_offsets, ends, doc_chunk_offsets)
    doc_chunk_offsets[0] = 0
    with nogil:
        for d in range(ndocs):
            start = doc_offsets[d]
            stop = doc_offsets[d + 1]
            if stop > start:
                count = gpt2_split(&data[start], stop - start, &classes[0], &ends[total])
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


# --------------------------------------------------------------------------- cl100k, llama3, o200k

cdef _check_tiktoken(const uint8_t[::1] classes, int kind):
    if kind != SPLIT_CL100K and kind != SPLIT_LLAMA3 and kind != SPLIT_O200K:
        raise ValueError(f"kind must be a split code of cl100k ({SPLIT_CL100K}), llama3 ({SPLIT_LLAMA3}) "
                         f"or o200k ({SPLIT_O200K}), got {kind}")
    # 'A' is a letter of o200k's first class in every table, in no GPT-2 one
    if classes.shape[0] != 0x110000 or classes[0x41] != (TT_LETTER | TT_HEAD):
        raise ValueError("classes must be tiktoken_class_table() (0x110000 entries of TT_* bits)")


def split_tiktoken(const uint8_t[::1] data, const uint8_t[::1] classes, int64_t[::1] ends, int kind,
                   int64_t[::1] err=None):
    """Split UTF-8 ``data`` by tiktoken's pattern ``kind`` (``SPLIT_CODES``); write
    the chunk end byte offsets to ``ends``.

    ``classes`` is ``tiktoken_class_table()``; ``ends`` needs ``len(data)``
    entries.  Returns ``(status, count)`` as :func:`split_gpt2` does.
    """
    _check_tiktoken(classes, kind)
    check_err(err)
    cdef Py_ssize_t n = data.shape[0], result
    if ends.shape[0] < n:
        raise ValueError(f"ends has {ends.shape[0]} entries; it needs len(data) = {n}")
    if n == 0:
        return STATUS_OK, 0
    with nogil:
        result = tiktoken_split(&data[0], n, &classes[0], &ends[0], kind)
    if result < 0:
        return fail(err, STATUS_INVALID_UTF8, -result - 1, -1), None
    return STATUS_OK, result


def split_tiktoken_batch(const uint8_t[::1] data, const int64_t[::1] doc_offsets,
                         const uint8_t[::1] classes, int64_t[::1] ends,
                         int64_t[::1] doc_chunk_offsets, int kind, int64_t[::1] err=None):
    """:func:`split_gpt2_batch` for tiktoken's pattern ``kind``: each document
    ``data[doc_offsets[d]:doc_offsets[d + 1]]`` separately, absolute chunk ends
    in ``ends``, the chunks of document ``d`` at
    ``ends[doc_chunk_offsets[d]:doc_chunk_offsets[d + 1]]``.  Returns
    ``(status, total)`` as :func:`split_gpt2_batch` does.
    """
    _check_tiktoken(classes, kind)
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
                count = tiktoken_split(&data[start], stop - start, &classes[0], &ends[total], kind)
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


# --------------------------------------------------------------------------- SCRIPT

cdef _check_script(const uint16_t[::1] classes):
    # 'a' is script 5 or later (not Unknown, Common, Inherited, Han, Hiragana), a letter (0)
    if classes.shape[0] != 0x110000 or (classes[0x61] >> SC_SCRIPT_SHIFT) < 5 or (classes[0x61] & 7) != 0:
        raise ValueError("classes must be script_class_table() (0x110000 uint16 entries of SC_* bits)")


def split_script(const uint8_t[::1] data, const uint16_t[::1] classes, int64_t[::1] ends,
                 int64_t[::1] err=None):
    """Split UTF-8 ``data`` into SCRIPT chunks (``classes`` = script_class_table());
    returns ``(status, count)`` as :func:`split_gpt2` does."""
    _check_script(classes)
    check_err(err)
    cdef Py_ssize_t n = data.shape[0], result
    if ends.shape[0] < n:
        raise ValueError(f"ends has {ends.shape[0]} entries; it needs len(data) = {n}")
    if n == 0:
        return STATUS_OK, 0
    with nogil:
        result = script_split(&data[0], n, &classes[0], &ends[0])
    if result < 0:
        return fail(err, STATUS_INVALID_UTF8, -result - 1, -1), None
    return STATUS_OK, result


def split_script_batch(const uint8_t[::1] data, const int64_t[::1] doc_offsets,
                       const uint16_t[::1] classes, int64_t[::1] ends,
                       int64_t[::1] doc_chunk_offsets, int64_t[::1] err=None):
    """:func:`split_gpt2_batch` for SCRIPT: returns ``(status, total)`` as it does."""
    _check_script(classes)
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
                count = script_split(&data[start], stop - start, &classes[0], &ends[total])
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
