"""Stubs of the compiled routing kernel (cython_src/_route.pyx).

Substrate codes: 0 ube, 1 utf8, 2 utf16 (see ube_stream.substrate.substrate_code).
Input buffers are anything exporting a C-contiguous buffer of the given type
(bytes, bytearray, memoryview, numpy arrays).

Status convention (cython_src/_status.pxd): each entry returns ``(status,
results...)``, ``status`` 0 or a negative ``ube_stream.errors.STATUS_*`` code
(results None), and on a failure writes ``(position, item)`` into ``err``;
``ube_stream.errors.check_status`` raises the matching exception.
"""
from typing import Optional, Tuple

import numpy as np
import numpy.typing as npt

_Bytes = bytes | memoryview | np.ndarray
_Err = Optional[npt.ArrayLike]  # None or int64[ERR_SIZE] (ube_stream.errors.err_buffer())

def route(data: _Bytes, substrate: int, err: _Err = None) -> Tuple[int, Optional[np.ndarray]]:
    """UTF-8 bytes (uint8) -> (status, base symbol ids np.ndarray[uint16]).

    STATUS_INVALID_UTF8: err = (byte offset, -1).
    """

def count(data: _Bytes, substrate: int, err: _Err = None) -> Tuple[int, Optional[int]]:
    """(status, number of base symbols of the UTF-8 bytes) (floor cost); writes nothing."""

def route_batch(
    data: _Bytes,  # uint8
    offsets: np.ndarray,  # int64, len n_items + 1, non-decreasing, inside data (else ValueError)
    substrate: int,
    err: _Err = None,
) -> Tuple[int, Optional[np.ndarray], Optional[np.ndarray]]:
    """Route item k = data[offsets[k]:offsets[k+1]] for every k.

    Returns (status, symbols: uint16, symbol_offsets: int64 with len(offsets)
    entries, starting at 0).  STATUS_INVALID_UTF8: err = (byte offset in data, item).
    """

def decode_bytes(ids: np.ndarray, substrate: int, err: _Err = None) -> Tuple[int, Optional[bytes]]:
    """Strict decode of uint16 base ids to UTF-8: (status, bytes).

    STATUS_BAD_ID: err = (offset of the first id outside the alphabet, -1), checked
    first; STATUS_INVALID_SYMBOLS: err = (offset of the first invalid byte
    sequence, -1) (dual-buffer rule for ube).
    """

def decode_text(ids: np.ndarray, substrate: int, err: _Err = None) -> Tuple[int, Optional[str]]:
    """Strict decode of uint16 base ids to str: (status, text), statuses as decode_bytes."""
