"""Exported chunk-count tables: merge, inspect, save and load.

A table is the triple :meth:`ube_stream._count.ChunkCounter.export` returns::

    (key_data: uint8[total_bytes], key_offsets: int64[n + 1], counts: int64[n])

with key ``i`` = ``key_data[key_offsets[i]:key_offsets[i + 1]]``, keys sorted
by their bytes.  Workers each export a partial table; :func:`merge_tables`
sums them into one, the same whatever the order of its inputs::

    >>> import numpy as np
    >>> a = (np.frombuffer(b"ab", np.uint8), np.array([0, 1, 2]), np.array([2, 1]))
    >>> b = (np.frombuffer(b"b", np.uint8), np.array([0, 1]), np.array([5]))
    >>> table_to_dict(merge_tables([a, b]))
    {b'a': 2, b'b': 6}
"""
from __future__ import annotations

import os
from typing import Dict, Iterable, Tuple, Union

import numpy as np

from .._count import ChunkCounter
from ..errors import InputError, check_status, err_buffer
from ..storage import atomic_open

__all__ = ["ExportedTable", "merge_tables", "table_to_dict", "save_table", "load_table",
           "TABLE_FORMAT", "TABLE_VERSION"]

ExportedTable = Tuple[np.ndarray, np.ndarray, np.ndarray]

TABLE_FORMAT = "ube-stream-chunk-counts"
TABLE_VERSION = 1


def merge_tables(tables: Iterable[Union[ExportedTable, object]], *, min_count: int = 1) -> ExportedTable:
    """Sum exported tables (or ``ChunkCounter`` objects) into one exported table.

    The result is sorted by key bytes, so it is identical for any order of
    ``tables``; ``min_count`` filters only the merged counts.
    """
    counter_type = ChunkCounter
    merged = counter_type()
    err = err_buffer()
    for table in tables:
        if isinstance(table, counter_type):
            table = table.export()
        key_data, key_offsets, counts = _as_arrays(table)
        check_status(merged.add_weighted(key_data, key_offsets, counts, err), err,
                     what="adding chunk tables")
    return merged.export(min_count)


def table_to_dict(table: ExportedTable) -> Dict[bytes, int]:
    """``{key bytes: count}`` of an exported table (for tests and small tables)."""
    key_data, key_offsets, counts = _as_arrays(table)
    raw = key_data.tobytes()
    offsets = key_offsets.tolist()
    return {raw[offsets[i]:offsets[i + 1]]: count for i, count in enumerate(counts.tolist())}


def save_table(path: Union[str, os.PathLike], table: ExportedTable) -> None:
    """Write an exported table to ``path`` (npz), atomically.

    The arrays go to a temporary file beside ``path`` that is renamed over it
    once complete, so readers see the old file or the new one, never a torn one.
    """
    key_data, key_offsets, counts = _as_arrays(table)
    with atomic_open(path, "wb", unique=True) as f:  # a file object: np.savez adds no ".npz" suffix
        np.savez(f, format=np.array(TABLE_FORMAT), version=np.array(TABLE_VERSION, np.int64),
                 key_data=key_data, key_offsets=key_offsets, counts=counts)


def load_table(path: Union[str, os.PathLike]) -> ExportedTable:
    """Read a table written by :func:`save_table`, checking format, version and shapes."""
    path = os.fspath(path)
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a readable chunk-count table ({exc}); "
                         "write it with ube_stream._chunk_table.save_table", path=path) from exc
    fmt = str(arrays.get("format", ""))
    version = int(arrays["version"]) if "version" in arrays else -1
    if fmt != TABLE_FORMAT or version != TABLE_VERSION:
        raise InputError(f"{path}: expected a {TABLE_FORMAT!r} table version {TABLE_VERSION}, "
                         f"found format {fmt!r} version {version}", path=path)
    try:
        return _as_arrays((arrays["key_data"], arrays["key_offsets"], arrays["counts"]))
    except (KeyError, ValueError) as exc:
        raise InputError(f"{path}: corrupt chunk-count table ({exc})", path=path) from exc


def _as_arrays(table) -> ExportedTable:
    """Check an exported triple's dtypes and shapes; return contiguous arrays."""
    try:
        key_data, key_offsets, counts = table
    except (TypeError, ValueError):
        raise ValueError("a chunk-count table is the triple (key_data, key_offsets, counts) "
                         "that ChunkCounter.export() returns") from None
    key_data = np.ascontiguousarray(np.asarray(key_data, dtype=np.uint8).reshape(-1))
    key_offsets = np.ascontiguousarray(np.asarray(key_offsets), dtype=np.int64)
    counts = np.ascontiguousarray(np.asarray(counts), dtype=np.int64)
    if key_offsets.ndim != 1 or counts.ndim != 1 or key_offsets.shape[0] != counts.shape[0] + 1:
        raise ValueError(f"key_offsets must be 1-D with len(counts) + 1 = {counts.shape[0] + 1} "
                         f"elements, got shape {key_offsets.shape}")
    if key_offsets[0] != 0 or key_offsets[-1] != key_data.shape[0]:
        raise ValueError(f"key_offsets must run from 0 to len(key_data) = {key_data.shape[0]}, "
                         f"got {int(key_offsets[0])}..{int(key_offsets[-1])}")
    return key_data, key_offsets, counts
