"""Stubs of the compiled routing kernel (cython_src/_route.pyx).

Substrate codes: 0 ube, 1 utf8, 2 utf16 (see ube_stream.substrate.substrate_code).
Input buffers are anything exporting a C-contiguous buffer of the given type
(bytes, bytearray, memoryview, numpy arrays).
"""
from typing import Optional, Tuple

import numpy as np

def route(data: bytes | memoryview | np.ndarray, substrate: int) -> np.ndarray:
    """UTF-8 bytes (uint8) -> base symbol ids, np.ndarray[uint16].

    Raises InvalidTextError(unit="byte") naming the byte offset of invalid UTF-8.
    """

def count(data: bytes | memoryview | np.ndarray, substrate: int) -> int:
    """Number of base symbols of the UTF-8 bytes (floor cost); writes nothing."""

def route_batch(
    data: bytes | memoryview | np.ndarray,  # uint8
    offsets: np.ndarray,  # int64, len n_items + 1, non-decreasing, inside data
    substrate: int,
) -> Tuple[np.ndarray, np.ndarray]:
    """Route item k = data[offsets[k]:offsets[k+1]] for every k.

    Returns (symbols: uint16, symbol_offsets: int64 with len(offsets) entries,
    starting at 0).  Invalid UTF-8 raises InvalidTextError with .offset (byte
    offset in data) and .item.
    """

def decode_bytes(ids: np.ndarray, substrate: int) -> Tuple[Optional[bytes], int]:
    """Strict decode of uint16 base ids to UTF-8: (bytes, -1) or (None, error_at)."""

def decode_text(ids: np.ndarray, substrate: int) -> Tuple[Optional[str], int]:
    """Strict decode of uint16 base ids to str: (text, -1) or (None, error_at).

    error_at is the offset of the first id outside the alphabet if any, else of
    the first invalid byte sequence (dual-buffer rule for ube).
    """
