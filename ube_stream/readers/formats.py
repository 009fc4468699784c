"""Which format a file is: names, suffixes, magic bytes, content.

:func:`detect_format` decides ``(format, compression)``.  The name decides
first (``.parquet``, ``.jsonl.zst``, ...; ``format=`` overrides it); when the
name does not (no suffix, or one this module does not know), the first bytes
do (**content sniffing**): gzip (``1f 8b``) and zstd (``28 b5 2f fd``) magic
set the compression and the decompressed head is sniffed again; Parquet
(``PAR1``), Arrow IPC file (``ARROW1``), Feather v1 (``FEA1``, recognised to
be refused: :func:`refuse_feather_v1`), an Arrow IPC stream (a continuation marker and a schema message pyarrow can read) and JSON
Lines (the first non-blank line is a JSON object) are recognised.  Plain text
is never guessed from content (any bytes may be text): name it ``.txt`` or
pass ``format="text"``.
"""
from __future__ import annotations

import json
import os

from ..errors import InputError
from ..storage import open_input

COMPRESSION_SUFFIXES = {".zst": "zstd", ".zstd": "zstd", ".gz": "gzip"}
FORMAT_SUFFIXES = {
    ".parquet": "parquet", ".pq": "parquet",
    ".arrow": "arrow", ".arrows": "arrow", ".ipc": "arrow",   # file or stream: decided by the magic bytes
    ".feather": "feather",
    ".jsonl": "jsonl", ".ndjson": "jsonl",
    ".json": "jsonl",   # JSON Lines under .json (Megatron's and HF's convention); a JSON array is refused
    ".txt": "text", ".text": "text",
}
FORMATS = ("parquet", "arrow_file", "arrow_stream", "feather", "jsonl", "text")
# what format= / --format accept: the formats, plus "arrow" (file or stream, by the magic bytes)
FORMAT_CHOICES = FORMATS + ("arrow",)
LINE_FORMATS = ("jsonl", "text")
COLUMNAR_FORMATS = ("parquet", "arrow_file", "arrow_stream", "feather")

ARROW_FILE_MAGIC = b"ARROW1"
ARROW_STREAM_CONTINUATION = b"\xff\xff\xff\xff"
FEATHER_V1_MAGIC = b"FEA1"
PARQUET_MAGIC = b"PAR1"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"
SNIFF_BYTES = 1 << 16          # bytes (decompressed) looked at to recognise a JSON Lines file


def magic_bytes(path: str, n: int = 8) -> bytes:
    with open_input(path) as f:
        return f.read(n)


def check_format(format: str | None) -> None:
    """The one validation of ``format=`` (``--format``): ``None`` or one of :data:`FORMAT_CHOICES`."""
    if format is not None and format not in FORMAT_CHOICES:
        raise ValueError(f"format must be one of {', '.join(FORMAT_CHOICES)} (or None: decided by the file "
                         f"name, then its content), got {format!r}")


def _suffixes(path: str) -> tuple[str | None, str | None]:
    """``(format, compression)`` the name says (``None`` where it says nothing)."""
    name = path.lower().rstrip("/").rsplit("/", 1)[-1]
    stem, ext = os.path.splitext(name)
    compression = COMPRESSION_SUFFIXES.get(ext)
    if compression is not None:
        ext = os.path.splitext(stem)[1]
    return FORMAT_SUFFIXES.get(ext), compression


def is_known_suffix(path: str) -> bool:
    """True when the file name alone says the format."""
    return _suffixes(path)[0] is not None


def _decompressed_head(path: str, compression: str, n: int) -> bytes:
    from .compression import open_bytes

    try:
        with open_bytes(path, compression) as stream:
            return stream.read(n)
    except Exception:   # a damaged stream: the reader reports it with its offset
        return b""


def _looks_like_arrow_stream(path: str) -> bool:
    import pyarrow as pa

    try:
        with open_input(path) as f:
            pa.ipc.open_stream(f).schema  # noqa: B018  (reads the schema message only)
        return True
    except Exception:
        return False


def _looks_like_jsonl(head: bytes) -> bool:
    """The first non-blank line of ``head`` is a JSON object (a line longer than
    ``head`` counts when it starts like one: ``{"``)."""
    text = head.lstrip(b" \t\r\n")
    if not text.startswith(b"{"):
        return False
    line, newline, _ = text.partition(b"\n")
    if not newline:
        return line[1:].lstrip(b" \t").startswith((b'"', b"}")) and len(head) >= SNIFF_BYTES
    try:
        return isinstance(json.loads(line.decode("utf-8")), dict)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False


def sniff_format(path: str, compression: str | None = None) -> tuple[str | None, str | None]:
    """``(format, compression)`` from the content (``format`` is ``None`` when
    nothing is recognised; plain text never is)."""
    head = magic_bytes(path, SNIFF_BYTES if compression is None else 8)
    if compression is None:
        if head.startswith(GZIP_MAGIC):
            compression = "gzip"
        elif head.startswith(ZSTD_MAGIC):
            compression = "zstd"
    if compression is not None:
        inner = _decompressed_head(path, compression, SNIFF_BYTES)
        return ("jsonl" if _looks_like_jsonl(inner) else None), compression
    if head.startswith(PARQUET_MAGIC):
        return "parquet", None
    if head.startswith(ARROW_FILE_MAGIC):
        return "arrow_file", None
    if head.startswith(FEATHER_V1_MAGIC):
        return "feather", None
    if head.startswith(ARROW_STREAM_CONTINUATION) and _looks_like_arrow_stream(path):
        return "arrow_stream", None
    if _looks_like_jsonl(head):
        return "jsonl", None
    return None, None


def unknown_format_error(path: str) -> InputError:
    known = ", ".join(sorted(set(FORMAT_SUFFIXES) | {f"{s}{c}" for s in (".jsonl", ".json", ".txt")
                                                     for c in (".zst", ".gz")}))
    head = magic_bytes(path, 4)
    return InputError(f"{path}: cannot recognise the file format from its name or its content (first bytes "
                      f"{head!r}); name it with one of {known}, or pass format= with one of "
                      f"{', '.join(FORMAT_CHOICES)} (plain text is never guessed: format=\"text\")",
                      path=path, reason="unknown_format", option="format")


def refuse_feather_v1(path: str) -> InputError:
    """The error for a Feather v1 file (magic ``FEA1``): never read, because
    pyarrow's v1 reader trusts the file's metadata and a damaged file can take
    the process down (SIGSEGV) before any error could be raised or skipped."""
    return InputError(f"{path}: a Feather v1 file, which ube-stream does not read (a damaged one can crash the "
                      f"reader); convert it once to Feather v2 (Arrow IPC), e.g. python -c \"import pyarrow.feather "
                      f"as f; f.write_feather(f.read_table('{path}'), 'out.feather')\"", path=path,
                      reason="unsupported_format")


def detect_format(path: str, forced: str | None = None) -> tuple[str, str | None]:
    """``(format, compression)`` of ``path``: ``forced`` (``format=``), else the
    name's suffixes, else the content (:func:`sniff_format`); Arrow file vs
    stream by the magic bytes.  A Feather v1 file (``FEA1``) read as any
    columnar format is refused (:func:`refuse_feather_v1`)."""
    check_format(forced)
    fmt, compression = _suffixes(path)
    if forced is not None:
        fmt = forced
    head = magic_bytes(path)
    if compression is None and fmt in LINE_FORMATS:   # a forced line format over compressed bytes
        compression = "gzip" if head.startswith(GZIP_MAGIC) else "zstd" if head.startswith(ZSTD_MAGIC) else None
    if fmt is None:
        fmt, compression = sniff_format(path, compression)
        if fmt is None:
            raise unknown_format_error(path)
    if fmt == "jsonl" and forced is None and compression is None and path.lower().endswith(".json"):
        if head.lstrip()[:1] == b"[":
            raise InputError(f"{path}: a JSON array, not JSON Lines (one object per line); convert it, e.g. "
                             f"with jq -c '.[]', or read it with datasets and pass the Dataset",
                             path=path, reason="unknown_format", option="format")
    if fmt in COLUMNAR_FORMATS + ("arrow",) and head.startswith(FEATHER_V1_MAGIC):
        raise refuse_feather_v1(path)
    if fmt == "arrow":
        fmt = "arrow_file" if head.startswith(ARROW_FILE_MAGIC) else "arrow_stream"
    if compression is not None and fmt not in LINE_FORMATS:
        raise InputError(f"{path}: {compression} compression is only read for JSONL and text files; "
                         f"{fmt} files carry their own compression, so decompress this file first",
                         path=path, reason="unknown_format", option="format")
    return fmt, compression
