"""Byte streams of line files (JSON Lines, text), plain, gzip or zstd.

:func:`open_bytes` opens a file for streaming reads; the zstd decoder notices
a truncated last frame and reads concatenated frames.  :func:`scan_line_starts`
finds the unit boundaries of an uncompressed line file in one pass, and
:func:`open_at` seeks a worker straight to its unit's first row.
"""
from __future__ import annotations

import gzip
import io
import zlib

import numpy as np

from ..storage import is_url, open_input
from .batch import Reporter

BLOCK_BYTES = 1 << 20          # read size for line files: bounds memory per worker
ZSTD_READ_BYTES = 1 << 16      # compressed bytes fed to the zstd decoder at a time


class _ZstdRaw(io.RawIOBase):
    """Streaming zstd decoder over a file that, unlike ``stream_reader``,
    notices a truncated last frame (raises ``EOFError``) and reads
    concatenated frames."""

    def __init__(self, path: str):
        import zstandard

        self._file = open_input(path)
        self._dctx = zstandard.ZstdDecompressor()
        self._dobj = self._dctx.decompressobj()
        self._pending = b""
        self._pending_pos = 0
        self._in_frame = False
        self._eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while self._pending_pos == len(self._pending) and not self._eof:
            self._pending, self._pending_pos = b"", 0
            chunk = self._file.read(ZSTD_READ_BYTES)
            if not chunk:
                self._eof = True
                if self._in_frame:
                    raise EOFError("zstd stream ends inside a frame (the file is truncated)")
                break
            while chunk:
                self._in_frame = True
                self._pending += self._dobj.decompress(chunk)
                chunk = b""
                if self._dobj.eof:
                    chunk = self._dobj.unused_data
                    self._dobj = self._dctx.decompressobj()
                    self._in_frame = False
        n = min(len(buffer), len(self._pending) - self._pending_pos)
        buffer[:n] = memoryview(self._pending)[self._pending_pos:self._pending_pos + n]
        self._pending_pos += n
        return n

    def close(self) -> None:
        self._file.close()
        super().close()


class _RemoteGzip(gzip.GzipFile):
    """A gzip reader over a remote object that closes the object with itself."""

    def __init__(self, path: str):
        self._raw = open_input(path)
        super().__init__(fileobj=self._raw, mode="rb")

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def open_bytes(path: str, compression: str | None):
    """A buffered binary reader of the (decompressed) bytes of ``path``."""
    if compression is None:
        return open_input(path)
    if compression == "gzip":
        return _RemoteGzip(path) if is_url(path) else gzip.open(path, "rb")
    if compression == "zstd":
        return io.BufferedReader(_ZstdRaw(path), buffer_size=BLOCK_BYTES)
    raise ValueError(f"unknown compression {compression!r}")


def broken_errors(compression: str | None) -> tuple:
    """The exceptions a damaged stream of ``compression`` raises while it is read
    (``zstandard``, imported only for a zstd stream, adds its own)."""
    if compression != "zstd":
        return (EOFError, OSError, zlib.error)
    import zstandard
    return (EOFError, OSError, zlib.error, zstandard.ZstdError)


def report_broken(reporter: Reporter, exc: BaseException, compression: str | None, row: int, pos: int) -> None:
    reason = "truncated_file" if isinstance(exc, EOFError) else "corrupt_file"
    what = "is truncated" if reason == "truncated_file" else "is corrupt"
    reporter.problem(reason, f"{reporter.path}: the {compression or 'file'} stream {what} at decompressed byte "
                             f"offset {pos} (row {row}): {exc}. Re-download or re-compress the file, "
                             f"or read with on_error='skip' to skip the whole file and count its rows",
                     row=row, offset=pos)


def skip_if_broken(unit, reporter: Reporter) -> bool:
    """Under ``on_error="skip"``, check a compressed unit's whole stream before
    anything is yielded: gzip (and a zstd frame's optional checksum) is checked
    only at the end of the stream, so rows read before the damage may already
    be garbage.  A broken stream is discarded whole: counted as
    ``corrupt_file``/``truncated_file`` with its row count (the lines decoded
    before the damage, at least 1), and ``True`` is returned.  Costs one more
    decompression of the file, only in skip mode."""
    compression = unit.source.compression
    if compression is None or reporter.raise_errors:
        return False
    rows = pos = 0
    last = b"\n"
    try:
        with open_bytes(unit.source.path, compression) as stream:
            while True:
                block = stream.read1(BLOCK_BYTES)   # read1: what was decoded before an error is counted
                if not block:
                    return False
                rows += block.count(b"\n")
                pos += len(block)
                last = block[-1:]
    except broken_errors(compression) as exc:
        reason = "truncated_file" if isinstance(exc, EOFError) else "corrupt_file"
        what = "is truncated" if reason == "truncated_file" else "is corrupt"
        count = max(1, rows + (last != b"\n"))
        reporter.skips.add(reason, path=reporter.path, row=0, offset=pos, count=count,
                           message=f"{reporter.path}: the {compression} stream {what} at decompressed byte offset "
                                   f"{pos}: {exc}; the whole file ({count} rows decoded before the damage) was "
                                   f"skipped. Re-download or re-compress it")
        return True


def scan_line_starts(path: str, unit_rows: int, unit_bytes: int | None = None) -> tuple[int, list[tuple[int, int]]]:
    """One pass over an uncompressed line file: ``(num_rows, [(row, byte), ...])``
    with the row and byte offset where every unit starts.  A unit ends after
    ``unit_rows`` rows or at the end of the first line that reaches
    ``unit_bytes`` bytes from its start (``None``: rows only), whichever comes
    first; the cuts depend on the file alone."""
    starts = [(0, 0)]
    lines, pos, last = 0, 0, b"\n"
    with open_input(path) as f:
        while True:
            block = f.read(BLOCK_BYTES)
            if not block:
                break
            row0, byte0 = starts[-1]
            newline = np.frombuffer(block, dtype=np.uint8) == 10
            count = int(np.count_nonzero(newline))   # (bytes.count is a byte loop: 4x slower)
            if lines + count < row0 + unit_rows and (unit_bytes is None or pos + len(block) < byte0 + unit_bytes):
                lines, pos, last = lines + count, pos + len(block), block[-1:]   # no cut in this block
                continue
            ends = np.flatnonzero(newline) + (pos + 1)   # byte after each \n
            while True:
                row0, byte0 = starts[-1]
                cut = row0 + unit_rows - lines - 1          # index in ends of the row cut
                if unit_bytes is not None:
                    cut = min(cut, int(np.searchsorted(ends, byte0 + unit_bytes, side="left")))
                if cut >= len(ends):
                    break
                starts.append((lines + cut + 1, int(ends[cut])))
            lines += len(ends)
            pos += len(block)
            last = block[-1:]
    num_rows = lines + (1 if last != b"\n" else 0)
    return num_rows, [(row, byte) for row, byte in starts if row < num_rows or row == 0]


def open_at(unit, compression):
    """Open a line file at the unit's first row when a byte offset is known:
    returns ``(stream, row, pos)``."""
    stream = open_bytes(unit.source.path, compression)
    if unit.byte_start and compression is None:
        stream.seek(unit.byte_start)
        return stream, unit.row_start, unit.byte_start
    return stream, 0, 0
