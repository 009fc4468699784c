# cython: language_level=3
"""Routing kernel: UTF-8 text <-> base symbol ids (``ube``, ``utf8``, ``utf16``).

Private: the public face is :mod:`ube_stream.substrate`.  Every entry takes
typed memoryviews, validates in Python-visible code, and releases the GIL
around the loop, so batch calls can run on threads.  The loops themselves are
the header-only helpers of ``_route_core.pxd``, which other kernels cimport.
Invalid data is reported by the status convention of ``_status.pxd``: each
entry returns ``(status, result...)`` and writes where into ``err``.
"""
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int64_t, uint8_t, uint16_t

import numpy as np

from _route_core cimport route_count, route_utf8, symbols_to_utf8
from _status cimport (STATUS_BAD_ID, STATUS_INVALID_SYMBOLS, STATUS_INVALID_UTF8, STATUS_OK,
                      check_err, fail)
from _types cimport SUBSTRATE_UBE, SUBSTRATE_UTF8, SUBSTRATE_UTF16


cdef int _check_substrate(int substrate) except -1:
    if substrate != SUBSTRATE_UBE and substrate != SUBSTRATE_UTF8 and substrate != SUBSTRATE_UTF16:
        raise ValueError(
            f"unknown substrate code {substrate}; expected 0 (ube), 1 (utf8) or 2 (utf16): "
            "use ube_stream.substrate.substrate_code(name)")
    return 0


cdef inline Py_ssize_t _capacity(Py_ssize_t n, int substrate) noexcept nogil:
    return 2 * n if substrate == SUBSTRATE_UTF16 else n


cdef _shrink(arr, Py_ssize_t size):
    """``arr[:size]`` as an array owning exactly its memory (realloc, no copy)."""
    if size != arr.shape[0]:
        arr.resize(size, refcheck=False)
    return arr


def route(const uint8_t[::1] data, int substrate, int64_t[::1] err=None):
    """Base symbol ids of the UTF-8 bytes ``data``: ``(status, uint16 array)``.

    Invalid UTF-8 gives ``(STATUS_INVALID_UTF8, None)`` with ``err[0]`` its byte offset.
    """
    _check_substrate(substrate)
    check_err(err)
    cdef Py_ssize_t n = data.shape[0], written
    out = np.empty(_capacity(n, substrate), dtype=np.uint16)
    cdef uint16_t[::1] out_view = out
    if n == 0:
        return STATUS_OK, out
    with nogil:
        written = route_utf8(&data[0], n, substrate, &out_view[0])
    if written < 0:
        return fail(err, STATUS_INVALID_UTF8, -written - 1, -1), None
    out_view = None  # release the buffer export so the array may shrink in place
    return STATUS_OK, _shrink(out, written)


def count(const uint8_t[::1] data, int substrate, int64_t[::1] err=None):
    """Number of base symbols of the UTF-8 bytes ``data`` (the floor cost):
    ``(status, count)``, like :func:`route` for invalid UTF-8."""
    _check_substrate(substrate)
    check_err(err)
    cdef Py_ssize_t n = data.shape[0], total = 0
    if n == 0:
        return STATUS_OK, 0
    with nogil:
        total = route_count(&data[0], n, substrate)
    if total < 0:
        return fail(err, STATUS_INVALID_UTF8, -total - 1, -1), None
    return STATUS_OK, total


def route_batch(const uint8_t[::1] data, const int64_t[::1] offsets, int substrate,
                int64_t[::1] err=None):
    """Route many UTF-8 strings at once: item ``k`` is ``data[offsets[k]:offsets[k+1]]``.

    Returns ``(status, symbols, symbol_offsets)``: ``uint16`` ids of all items
    back to back and ``int64`` offsets (``len(offsets)`` entries, starting at 0)
    so that item ``k``'s symbols are ``symbols[symbol_offsets[k]:symbol_offsets[k+1]]``.
    ``offsets`` must be non-decreasing and inside ``data`` (``offsets[0]`` may be
    non-zero, as in a sliced Arrow array; ValueError otherwise).  Invalid UTF-8
    gives ``(STATUS_INVALID_UTF8, None, None)`` with ``err`` = (byte offset in
    ``data``, item index).
    """
    _check_substrate(substrate)
    check_err(err)
    cdef Py_ssize_t n_items = offsets.shape[0] - 1, k, bad = -1, written = 0, got = 0
    cdef Py_ssize_t n = data.shape[0]
    if n_items < 0:
        return STATUS_OK, np.empty(0, dtype=np.uint16), np.empty(0, dtype=np.int64)
    with nogil:
        if offsets[0] < 0 or offsets[n_items] > n:
            bad = 0
        else:
            for k in range(n_items):
                if offsets[k + 1] < offsets[k]:
                    bad = k + 1
                    break
    if bad >= 0:
        raise ValueError(
            f"offsets must be non-decreasing and within 0..{n} (len(data)); "
            f"found offsets[0]={offsets[0]}, offsets[-1]={offsets[n_items]}"
            + (f", offsets[{bad}]={offsets[bad]} < offsets[{bad - 1}]={offsets[bad - 1]}" if bad > 0 else ""))
    cdef Py_ssize_t span = offsets[n_items] - offsets[0]
    symbols = np.empty(_capacity(span, substrate), dtype=np.uint16)
    symbol_offsets = np.empty(n_items + 1, dtype=np.int64)
    cdef uint16_t[::1] out_view = symbols
    cdef int64_t[::1] sym_off = symbol_offsets
    cdef const uint8_t* base = &data[0] if n > 0 else NULL
    cdef uint16_t* out = &out_view[0] if span > 0 else NULL
    with nogil:
        sym_off[0] = 0
        for k in range(n_items):
            if offsets[k + 1] > offsets[k]:
                got = route_utf8(base + offsets[k], offsets[k + 1] - offsets[k], substrate, out + written)
                if got < 0:
                    bad = k
                    break
                written += got
            sym_off[k + 1] = written
    if bad >= 0:
        return fail(err, STATUS_INVALID_UTF8, offsets[bad] + (-got - 1), bad), None, None
    out_view = None
    return STATUS_OK, _shrink(symbols, written), symbol_offsets


cdef int _decode_failure(const uint16_t[::1] ids, int substrate, Py_ssize_t error_at,
                         int64_t[::1] err) noexcept:
    """The status of a failed decode: an id outside the alphabet, else invalid symbols."""
    cdef uint16_t limit = 512 if substrate == SUBSTRATE_UBE else 256
    if ids[error_at] >= limit:
        return fail(err, STATUS_BAD_ID, error_at, -1)
    return fail(err, STATUS_INVALID_SYMBOLS, error_at, -1)


cdef tuple _decode(const uint16_t[::1] ids, int substrate, int64_t[::1] err, bint as_text):
    """``decode_bytes`` (``as_text`` False) and ``decode_text``: one buffer, one pass."""
    _check_substrate(substrate)
    check_err(err)
    cdef Py_ssize_t n = ids.shape[0], written, error_at = -1
    if n == 0:
        return STATUS_OK, ("" if as_text else b"")
    out = np.empty(n + n // 2, dtype=np.uint8)
    cdef uint8_t[::1] out_view = out
    with nogil:
        written = symbols_to_utf8(&ids[0], n, substrate, &out_view[0], &error_at)
    if written < 0:
        return _decode_failure(ids, substrate, error_at, err), None
    if as_text:  # the kernel wrote well-formed UTF-8, so this cannot fail
        return STATUS_OK, PyUnicode_DecodeUTF8(<const char*>&out_view[0], written, NULL)
    return STATUS_OK, out[:written].tobytes()


def decode_bytes(const uint16_t[::1] ids, int substrate, int64_t[::1] err=None):
    """Strict decode of base ids to UTF-8 bytes: ``(status, data)``.

    ``STATUS_BAD_ID`` names (``err[0]``) the symbol offset of the first id
    outside the alphabet, checked first; else ``STATUS_INVALID_SYMBOLS`` the
    offset where the first invalid byte sequence starts.
    """
    return _decode(ids, substrate, err, False)


def decode_text(const uint16_t[::1] ids, int substrate, int64_t[::1] err=None):
    """Strict decode of base ids to ``str``: ``(status, text)``, statuses as
    :func:`decode_bytes`."""
    return _decode(ids, substrate, err, True)
