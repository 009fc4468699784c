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

import io
import os
import struct
import zipfile
from typing import Dict, Iterable, List, Optional, Tuple, Union

import numpy as np

from .._count import ChunkCounter
from ..errors import InputError, check_status, err_buffer
from ..storage import atomic_open

__all__ = ["ExportedTable", "merge_tables", "table_to_dict", "save_table", "load_table", "TableFile", "table_intact",
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
    """Read a table written by :func:`save_table` into memory, checking format, version and shapes."""
    with TableFile(path) as table:
        return table.range(None, None)


_MEMBERS: Dict[str, np.dtype] = {"key_data": np.dtype("u1"), "key_offsets": np.dtype("<i8"), "counts": np.dtype("<i8")}
_SMALL_MEMBER = 4096       # format and version: a few hundred bytes in a table save_table wrote
_NPY_HEADER_MAX = 65536    # a .npy header of a 1-D array is ~128 bytes


def table_intact(path: Union[str, os.PathLike]) -> bool:
    """Whether the file is a table :class:`TableFile` accepts whose members all match their zip CRC
    (one read of the whole file): what a rerun asks of a table an earlier process wrote before
    reusing it, since :class:`TableFile` checks the structure only."""
    try:
        with TableFile(path), zipfile.ZipFile(os.fspath(path)) as zf:
            return zf.testzip() is None
    except Exception:   # whatever zipfile raises on damaged bytes (BadZipFile, NotImplementedError, ...)
        return False


class TableFile:
    """A table file written by :func:`save_table`, open for reading parts of it: a key, the
    first key at or above a given one (the keys are sorted), a key range, a sample of keys.
    Only the bytes asked for are read, so a reduce task that needs one key range of every
    table reads that range of each, not the tables (the training's range-partitioned reduce,
    ``trainer._reduce_tables``).

    The file is checked before anything is read into memory: a zip whose members are stored
    (``np.savez``), the format and version, each array member's ``.npy`` header (dtype, one
    dimension, its data inside the member and inside the file) and the shapes; every offset
    read is checked against the key bytes before it is used.  The members' CRC is not
    computed (that would read the whole file): :func:`table_intact` does, for a table that an
    earlier process wrote."""

    def __init__(self, path: Union[str, os.PathLike]):
        self.path = os.fspath(path)
        try:
            self._file = open(self.path, "rb", buffering=0)
        except OSError as exc:
            raise self._bad(str(exc)) from exc
        try:
            self._data_at = self._check()
        except InputError:
            self._file.close()
            raise
        except Exception as exc:   # zipfile on damaged bytes: BadZipFile, NotImplementedError, EOFError, ...
            self._file.close()
            raise self._bad(f"{type(exc).__name__}: {exc}") from exc

    def __enter__(self) -> "TableFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()

    def _bad(self, why: str) -> InputError:
        return InputError(f"{self.path}: not a readable chunk-count table ({why}); "
                          "write it with ube_stream.training.chunk_table.save_table", path=self.path)

    def _check(self) -> Dict[str, int]:
        """The byte offset of each array member's data, after checking the file (see the class)."""
        f = self._file
        size = os.fstat(f.fileno()).st_size
        data_at, items = {}, {}
        with zipfile.ZipFile(f) as zf:
            infos = {info.filename: info for info in zf.infolist()}
            small = {}
            for name in ("format", "version"):
                info = infos.get(name + ".npy")
                if info is not None and info.file_size <= _SMALL_MEMBER:
                    small[name] = np.lib.format.read_array(io.BytesIO(zf.read(info)), allow_pickle=False)
            fmt = str(small.get("format", ""))
            version = int(small["version"]) if "version" in small else -1
            if fmt != TABLE_FORMAT or version != TABLE_VERSION:
                raise InputError(f"{self.path}: expected a {TABLE_FORMAT!r} table version {TABLE_VERSION}, "
                                 f"found format {fmt!r} version {version}", path=self.path)
            for name, dtype in _MEMBERS.items():
                info = infos.get(name + ".npy")
                if info is None:
                    raise self._bad(f"no {name} array")
                if info.compress_type != zipfile.ZIP_STORED:
                    raise self._bad(f"its {name} array is compressed")
                local = self._read_bytes(info.header_offset, 30)
                if local[:4] != b"PK\x03\x04":
                    raise self._bad(f"the zip entry of {name} at byte {info.header_offset} is damaged")
                name_len, extra_len = struct.unpack("<HH", local[26:30])
                start = info.header_offset + 30 + name_len + extra_len
                prefix = self._read_bytes(start, 12)   # magic (6), version (2), header length (2 or 4)
                wide = prefix[6:8] != b"\x01\x00"
                header_len = struct.unpack("<I" if wide else "<H", prefix[8:12] if wide else prefix[8:10])[0]
                if header_len > _NPY_HEADER_MAX:
                    raise self._bad(f"the .npy header of {name} claims {header_len} bytes")
                head = (12 if wide else 10) + header_len
                npy = io.BytesIO(self._read_bytes(start, head))
                try:   # numpy parses the header's dict with ast: damage raises SyntaxError, TokenError, ...
                    npy_version = np.lib.format.read_magic(npy)
                    read_header = (np.lib.format.read_array_header_1_0 if npy_version == (1, 0)
                                   else np.lib.format.read_array_header_2_0)
                    shape, _fortran, found = read_header(npy)
                except Exception as exc:
                    raise self._bad(f"the .npy header of its {name} array is unreadable: {exc}") from exc
                if found != dtype or len(shape) != 1:
                    raise self._bad(f"its {name} array is {found} of shape {shape}, expected one dimension of {dtype}")
                stop = start + head + shape[0] * dtype.itemsize
                if stop > start + info.file_size or stop > size:
                    raise self._bad(f"its {name} array of {shape[0]} items runs past its entry (byte {stop} of {size})")
                data_at[name], items[name] = start + head, shape[0]
        self.n_keys, self.n_bytes = items["counts"], items["key_data"]
        if items["key_offsets"] != self.n_keys + 1:
            raise self._bad(f"{items['key_offsets']} key offsets for {self.n_keys} counts, expected "
                            f"{self.n_keys + 1}")
        return data_at

    def _read_bytes(self, offset: int, n: int) -> bytes:
        data = os.pread(self._file.fileno(), n, offset)
        if len(data) != n:
            raise self._bad(f"it ends at byte {offset + len(data)}, inside a {n}-byte read at {offset}")
        return data

    def _read(self, name: str, start: int, stop: int) -> np.ndarray:
        """Items ``start:stop`` of an array member, read into a fresh array."""
        dtype = _MEMBERS[name]
        out = np.empty(stop - start, dtype)
        view = memoryview(out.view(np.uint8))   # type: ignore[arg-type]  # an ndarray is a buffer
        offset, done = self._data_at[name] + start * dtype.itemsize, 0
        while done < len(view):
            got = os.preadv(self._file.fileno(), [view[done:]], offset + done)
            if got <= 0:
                raise self._bad(f"it ends inside its {name} array, at byte {offset + done}")
            done += got
        return out

    def _offsets(self, start: int, stop: int) -> np.ndarray:
        """Key offsets ``start:stop``, checked: non-decreasing, inside the key bytes."""
        offsets = self._read("key_offsets", start, stop)
        if len(offsets) and (offsets[0] < 0 or offsets[-1] > self.n_bytes or np.any(np.diff(offsets) < 0)):
            raise InputError(f"{self.path}: corrupt chunk-count table (key offsets {start}..{stop - 1} are "
                             f"not increasing within its {self.n_bytes} key bytes)", path=self.path)
        return offsets

    def key(self, i: int) -> bytes:
        """Key ``i`` (two small reads: its offsets, then its bytes; the binary searches and the
        sample read thousands of keys, so no arrays are made here)."""
        if not 0 <= i < self.n_keys:
            raise IndexError(f"key {i} of a table of {self.n_keys} keys")
        begin, end = struct.unpack("<qq", self._read_bytes(self._data_at["key_offsets"] + 8 * i, 16))
        if not 0 <= begin <= end <= self.n_bytes:
            raise InputError(f"{self.path}: corrupt chunk-count table (key {i} spans bytes {begin}..{end} of its "
                             f"{self.n_bytes} key bytes)", path=self.path)
        return self._read_bytes(self._data_at["key_data"] + begin, end - begin) if end > begin else b""

    def lower_bound(self, key: bytes) -> int:
        """The index of the first key >= ``key`` (bytes order, as ``ChunkCounter.export`` sorts)."""
        lo, hi = 0, self.n_keys
        while lo < hi:
            mid = (lo + hi) // 2
            if self.key(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def range(self, lo: Optional[bytes], hi: Optional[bytes]) -> ExportedTable:
        """The keys ``lo <= key < hi`` (``None``: unbounded) as a table of their own (offsets from 0)."""
        i = 0 if lo is None else self.lower_bound(lo)
        j = max(i, self.n_keys if hi is None else self.lower_bound(hi))
        offsets = self._offsets(i, j + 1)
        begin = int(offsets[0])
        if lo is None and hi is None and (begin != 0 or int(offsets[-1]) != self.n_bytes):
            raise InputError(f"{self.path}: corrupt chunk-count table (key_offsets must run from 0 to "
                             f"len(key_data) = {self.n_bytes}, got {begin}..{int(offsets[-1])})", path=self.path)
        offsets -= begin
        return self._read("key_data", begin, begin + int(offsets[-1])), offsets, self._read("counts", i, j)

    def sample(self, n: int) -> List[bytes]:
        """``n`` keys at evenly spaced positions (all of them when there are fewer)."""
        if self.n_keys <= n:
            return [self.key(i) for i in range(self.n_keys)]
        return [self.key((k * self.n_keys) // n) for k in range(n)]


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
