"""File formats behind :mod:`ube_stream.readers`: detection, decompression and
the JSONL and text readers (columnar formats: ``_columnar``).  Internal; the
public face is ``readers``.

Every generator takes a work unit's file, row range and a
:class:`~ube_stream._textbatch.Reporter` (raise or count), and yields
:class:`~ube_stream._textbatch.TextBatch` of at most ``batch_rows`` documents
whose ``rows`` are row numbers inside the file.  pyarrow is imported inside
the functions that need it.
"""
from __future__ import annotations

import codecs
import gzip
import io
import json
import json.scanner
import os
import re
import zlib
from typing import Iterator

import numpy as np

from .errors import InputError
from ._textbatch import Reporter, TextBatch

BLOCK_BYTES = 1 << 20          # read size for line files: bounds memory per worker
ZSTD_READ_BYTES = 1 << 16      # compressed bytes fed to the zstd decoder at a time

COMPRESSION_SUFFIXES = {".zst": "zstd", ".zstd": "zstd", ".gz": "gzip"}
FORMAT_SUFFIXES = {
    ".parquet": "parquet", ".pq": "parquet",
    ".arrow": "arrow", ".arrows": "arrow", ".ipc": "arrow",   # file or stream: decided by the magic bytes
    ".feather": "feather",
    ".jsonl": "jsonl", ".ndjson": "jsonl",
    ".txt": "text", ".text": "text",
}
FORMATS = ("parquet", "arrow_file", "arrow_stream", "feather", "jsonl", "text")
LINE_FORMATS = ("jsonl", "text")
COLUMNAR_FORMATS = ("parquet", "arrow_file", "arrow_stream", "feather")

_ARROW_FILE_MAGIC = b"ARROW1"
FEATHER_V1_MAGIC = b"FEA1"
_PARQUET_MAGIC = b"PAR1"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_GZIP_MAGIC = b"\x1f\x8b"
_SURROGATE = re.compile("[\ud800-\udfff]")
_JSON_SPACE = " \t\r\n"
_scan_json = json.scanner.make_scanner(json.JSONDecoder())   # the C scanner: (value, end index)
SKIP_HINT = "or read with on_error='skip' (--on-error skip) to skip and count it"


# --------------------------------------------------------------------------- detection

def magic_bytes(path: str, n: int = 8) -> bytes:
    with open(path, "rb") as f:
        return f.read(n)


def is_known_suffix(path: str) -> bool:
    """True when the file name ends in a suffix :func:`detect_format` knows."""
    stem, ext = os.path.splitext(path.lower())
    if ext in COMPRESSION_SUFFIXES:
        ext = os.path.splitext(stem)[1]
    return ext in FORMAT_SUFFIXES


def detect_format(path: str, forced: str | None = None) -> tuple[str, str | None]:
    """``(format, compression)`` of ``path`` from its suffixes, refined by its
    magic bytes (Arrow file vs stream, Feather v1 vs v2 is decided at read)."""
    stem, ext = os.path.splitext(path.lower())
    compression = COMPRESSION_SUFFIXES.get(ext)
    if compression is not None:
        ext = os.path.splitext(stem)[1]
    fmt = forced if forced is not None else FORMAT_SUFFIXES.get(ext)
    head = magic_bytes(path)
    if fmt is None and compression is None:
        if head.startswith(_PARQUET_MAGIC):
            fmt = "parquet"
        elif head.startswith(_ARROW_FILE_MAGIC):
            fmt = "arrow_file"
        elif head.startswith(FEATHER_V1_MAGIC):
            fmt = "feather"
    if fmt is None:
        known = ", ".join(sorted(set(FORMAT_SUFFIXES) | {f"{s}{c}" for s in (".jsonl", ".txt") for c in (".zst", ".gz")}))
        raise InputError(f"{path}: cannot recognise the file format from its name or first bytes {head[:4]!r}; "
                         f"name it with one of {known}, or pass format= (--format) with one of {', '.join(FORMATS)}",
                         path=path, reason="unknown_format")
    if fmt == "arrow":
        fmt = "arrow_file" if head.startswith(_ARROW_FILE_MAGIC) else "arrow_stream"
    if fmt not in FORMATS:
        raise InputError(f"{path}: unknown format {fmt!r}; use one of {', '.join(FORMATS)}", path=path,
                         reason="unknown_format")
    if compression is not None and fmt not in LINE_FORMATS:
        raise InputError(f"{path}: {compression} compression is only read for JSONL and text files; "
                         f"{fmt} files carry their own compression, so decompress this file first",
                         path=path, reason="unknown_format")
    return fmt, compression


# --------------------------------------------------------------------------- decompression

class _ZstdRaw(io.RawIOBase):
    """Streaming zstd decoder over a file that, unlike ``stream_reader``,
    notices a truncated last frame (raises ``EOFError``) and reads
    concatenated frames."""

    def __init__(self, path: str):
        import zstandard

        self._file = open(path, "rb")
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


def open_bytes(path: str, compression: str | None):
    """A buffered binary reader of the (decompressed) bytes of ``path``."""
    if compression is None:
        return open(path, "rb")
    if compression == "gzip":
        return gzip.open(path, "rb")
    if compression == "zstd":
        return io.BufferedReader(_ZstdRaw(path), buffer_size=BLOCK_BYTES)
    raise ValueError(f"unknown compression {compression!r}")


def _broken_errors() -> tuple:
    import zstandard
    return (EOFError, OSError, zlib.error, zstandard.ZstdError)


def _report_broken(reporter: Reporter, exc: BaseException, compression: str | None, row: int, pos: int) -> None:
    reason = "truncated_file" if isinstance(exc, EOFError) else "corrupt_file"
    what = "is truncated" if reason == "truncated_file" else "is corrupt"
    reporter.problem(reason, f"{reporter.path}: the {compression or 'file'} stream {what} at decompressed byte "
                             f"offset {pos} (line {row + 1}): {exc}. Re-download or re-compress the file, "
                             f"or read with on_error='skip' to keep the rows before this point",
                     row=row, offset=pos)


# --------------------------------------------------------------------------- line files

def scan_line_starts(path: str, unit_rows: int) -> tuple[int, list[tuple[int, int]]]:
    """One pass over an uncompressed line file: ``(num_rows, [(row, byte), ...])``
    with the byte offset where every ``unit_rows``-th row starts."""
    starts = [(0, 0)]
    next_row, lines, pos, last = unit_rows, 0, 0, b"\n"
    with open(path, "rb") as f:
        while True:
            block = f.read(BLOCK_BYTES)
            if not block:
                break
            newlines = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)
            while next_row <= lines + len(newlines):
                starts.append((next_row, pos + int(newlines[next_row - lines - 1]) + 1))
                next_row += unit_rows
            lines += len(newlines)
            pos += len(block)
            last = block[-1:]
    num_rows = lines + (1 if last != b"\n" else 0)
    return num_rows, [(row, byte) for row, byte in starts if row < num_rows or row == 0]


def _open_at(unit, compression):
    """Open a line file at the unit's first row when a byte offset is known:
    returns ``(stream, row, pos)``."""
    stream = open_bytes(unit.source.path, compression)
    if unit.byte_start and compression is None:
        stream.seek(unit.byte_start)
        return stream, unit.row_start, unit.byte_start
    return stream, 0, 0


def read_jsonl(unit, column: str, reporter: Reporter, batch_rows: int) -> Iterator[TextBatch]:
    """JSON Lines: one object per line, the text under ``column``.  A blank
    line is skipped and counted (``blank_line``); it keeps its row number."""
    source = unit.source
    start, stop = unit.row_start, unit.row_stop
    broken = _broken_errors()
    texts: list[str] = []
    rows: list[int] = []
    stream, row, pos = _open_at(unit, source.compression)
    with stream:
        lines = iter(stream)
        while stop is None or row < stop:
            try:
                line = next(lines)
            except StopIteration:
                break
            except broken as exc:
                _report_broken(reporter, exc, source.compression, row, pos)
                break
            if row >= start:
                # fast path: a well-formed object with a valid string; anything else is
                # parsed again by _json_text, which says what is wrong
                decoded, record, end = "", None, -1
                try:
                    decoded = line.decode("utf-8").strip(_JSON_SPACE)
                    record, end = _scan_json(decoded, 0)
                except (UnicodeDecodeError, StopIteration, ValueError):
                    pass
                text = record.get(column) if end == len(decoded) and type(record) is dict else None
                # a lone surrogate can only come from a \u escape (invalid UTF-8 fails to decode)
                if type(text) is not str or (b"\\u" in line and _SURROGATE.search(text)):
                    text = _json_text(line, column, reporter, row, pos)
                if text is not None:
                    texts.append(text)
                    rows.append(row)
                    if len(texts) >= batch_rows:
                        yield TextBatch(texts, np.array(rows, dtype=np.int64), source.source_id)
                        texts, rows = [], []
            row += 1
            pos += len(line)
    if texts:
        yield TextBatch(texts, np.array(rows, dtype=np.int64), source.source_id)


def _json_text(line: bytes, column: str, reporter: Reporter, row: int, pos: int) -> str | None:
    where = f"{reporter.path}: line {row + 1} (byte offset {pos})"
    if not line.strip():
        reporter.skips.add("blank_line", path=reporter.path, row=row, offset=pos, message=f"{where} is blank")
        return None
    try:
        decoded = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        reporter.problem("invalid_utf8", f"{reporter.path}: line {row + 1}: invalid UTF-8 at byte offset "
                                         f"{pos + exc.start} ({exc.reason}); re-encode the file as UTF-8 "
                                         f"{SKIP_HINT}", row=row, offset=pos + exc.start)
        return None
    try:
        record = json.loads(decoded)
    except json.JSONDecodeError as exc:
        reporter.problem("invalid_json", f"{where}: invalid JSON at column {exc.colno}: {exc.msg}; "
                                         f"fix the line {SKIP_HINT}", row=row, offset=pos)
        return None
    if not isinstance(record, dict):
        reporter.problem("not_object", f"{where}: expected a JSON object with a {column!r} field, found a "
                                       f"{type(record).__name__}; JSONL input needs one object per line "
                                       f"{SKIP_HINT}", row=row, offset=pos)
        return None
    if column not in record:
        keys = ", ".join(map(repr, list(record)[:20]))
        reporter.problem("missing_field", f"{where}: the object has no field {column!r} (it has {keys}); "
                                          f"choose the field with column= (--column) {SKIP_HINT}",
                         row=row, offset=pos)
        return None
    return check_text_value(record[column], reporter, row, where, offset=pos)


def check_text_value(value, reporter: Reporter, row: int, where: str, offset: int | None = None) -> str | None:
    """A Python value that should be a document: the ``str`` if it is one,
    ``None`` (reported) for a null, a non-string or a lone surrogate."""
    if value is None:
        reporter.null(row, offset=offset)
        return None
    if not isinstance(value, str):
        reporter.problem("not_string", f"{where}: expected a string, found {type(value).__name__}; "
                                       f"point column= at a text field {SKIP_HINT}", row=row, offset=offset)
        return None
    bad = _SURROGATE.search(value)
    if bad is not None:
        reporter.problem("invalid_text", f"{where}: lone surrogate U+{ord(bad.group()):04X} at character "
                                         f"{bad.start()} (not a Unicode scalar value, e.g. from a JSON "
                                         f"'\\u{ord(bad.group()):04x}' escape); fix the text {SKIP_HINT}",
                         row=row, offset=offset)
        return None
    return value


def read_text_lines(unit, reporter: Reporter, batch_rows: int) -> Iterator[TextBatch]:
    """Plain text, one document per line: split on ``\\n`` only, one trailing
    ``\\r`` removed; a final ``\\n`` ends the last line (no empty document after
    it).  Lines are cut and checked a block at a time with numpy, and each
    batch is a zero-copy Arrow large_string array over the block's bytes."""
    source = unit.source
    broken = _broken_errors()
    stop = unit.row_stop
    stream, row, pos = _open_at(unit, source.compression)
    parts: list[bytes] = []
    with stream:
        while stop is None or row < stop:
            try:
                block = stream.read(BLOCK_BYTES)
            except broken as exc:
                _report_broken(reporter, exc, source.compression, row, pos)
                break
            if block:
                cut = block.rfind(b"\n")
                if cut < 0:
                    parts.append(block)
                    continue
                complete = b"".join(parts + [block[:cut + 1]])
                parts = [block[cut + 1:]]
            else:
                complete = b"".join(parts)
                parts = []
                if not complete:
                    break
            n_lines = yield from _block_batches(complete, row, pos, unit, reporter, batch_rows)
            row += n_lines
            pos += len(complete)
            if not block:
                break


def _block_batches(block: bytes, row: int, pos: int, unit, reporter: Reporter, batch_rows: int):
    """Yield the batches of one block of whole lines; return its line count."""
    import pyarrow as pa

    arr = np.frombuffer(block, dtype=np.uint8)
    newlines = np.flatnonzero(arr == 10)
    ends = newlines if block.endswith(b"\n") else np.append(newlines, len(arr))
    n_lines = len(ends)
    starts = np.zeros(n_lines, dtype=np.int64)
    starts[1:] = ends[:-1] + 1
    lo = max(0, unit.row_start - row)
    hi = n_lines if unit.row_stop is None else min(n_lines, unit.row_stop - row)
    if lo >= hi:
        return n_lines
    starts, ends = starts[lo:hi], ends[lo:hi].astype(np.int64)
    rows = np.arange(row + lo, row + hi, dtype=np.int64)
    good = np.ones(len(rows), dtype=bool)
    try:
        codecs.utf_8_decode(memoryview(block)[starts[0]:ends[-1]], "strict", True)
    except UnicodeDecodeError:
        for i in range(len(rows)):
            try:
                codecs.utf_8_decode(memoryview(block)[starts[i]:ends[i]], "strict", True)
            except UnicodeDecodeError as exc:
                good[i] = False
                at = pos + int(starts[i]) + exc.start
                reporter.problem("invalid_utf8", f"{reporter.path}: line {rows[i] + 1}: invalid UTF-8 at byte "
                                                 f"offset {at} ({exc.reason}); re-encode the file as UTF-8 "
                                                 f"{SKIP_HINT}", row=int(rows[i]), offset=at)
        starts, ends, rows = starts[good], ends[good], rows[good]
        if not len(rows):
            return n_lines
    ends = ends - ((ends > starts) & (arr[ends - 1] == 13))
    keep = np.zeros(len(arr) + 1, dtype=np.int8)   # +1 where a kept line starts, -1 where it ends
    keep[starts] += 1                                # (starts are distinct, ends are distinct; an empty
    keep[ends] -= 1                                  #  line's +1 and -1 cancel)
    data = arr[np.cumsum(keep[:-1], dtype=np.int8) > 0]
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(ends - starts, out=offsets[1:])
    texts = pa.LargeStringArray.from_buffers(len(rows), pa.py_buffer(offsets), pa.py_buffer(data))
    for i in range(0, len(rows), batch_rows):
        yield TextBatch(texts.slice(i, batch_rows), rows[i:i + batch_rows], unit.source.source_id)
    return n_lines


def read_text_file(unit, reporter: Reporter) -> Iterator[TextBatch]:
    """text_mode="file": the whole (decompressed) file is document 0."""
    source = unit.source
    if unit.row_start > 0 or unit.row_stop == 0:
        return
    stream = open_bytes(source.path, source.compression)
    with stream:
        try:
            raw = stream.read()
        except _broken_errors() as exc:
            _report_broken(reporter, exc, source.compression, 0, 0)
            return
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        reporter.problem("invalid_utf8", f"{source.path}: invalid UTF-8 at byte offset {exc.start} (line {line}, "
                                         f"{exc.reason}); re-encode the file as UTF-8 {SKIP_HINT}",
                         row=0, offset=exc.start)
        return
    yield TextBatch([text], np.zeros(1, dtype=np.int64), source.source_id)
