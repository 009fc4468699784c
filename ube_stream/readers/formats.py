"""Which format a file is: names, suffixes, magic bytes.

:func:`detect_format` decides ``(format, compression)`` from the file name,
refined by the first bytes (Arrow file vs stream; Parquet, Arrow and Feather
files without a known suffix).
"""
from __future__ import annotations

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
LINE_FORMATS = ("jsonl", "text")
COLUMNAR_FORMATS = ("parquet", "arrow_file", "arrow_stream", "feather")

ARROW_FILE_MAGIC = b"ARROW1"
FEATHER_V1_MAGIC = b"FEA1"
PARQUET_MAGIC = b"PAR1"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"


def magic_bytes(path: str, n: int = 8) -> bytes:
    with open_input(path) as f:
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
        if head.startswith(PARQUET_MAGIC):
            fmt = "parquet"
        elif head.startswith(ARROW_FILE_MAGIC):
            fmt = "arrow_file"
        elif head.startswith(FEATHER_V1_MAGIC):
            fmt = "feather"
    if fmt is None:
        known = ", ".join(sorted(set(FORMAT_SUFFIXES) | {f"{s}{c}" for s in (".jsonl", ".json", ".txt") for c in (".zst", ".gz")}))
        raise InputError(f"{path}: cannot recognise the file format from its name or first bytes {head[:4]!r}; "
                         f"name it with one of {known}, or pass format= with one of {', '.join(FORMATS)}",
                         path=path, reason="unknown_format")
    if fmt == "jsonl" and forced is None and ext == ".json" and compression is None:
        first = head.lstrip()[:1]
        if first == b"[":
            raise InputError(f"{path}: a JSON array, not JSON Lines (one object per line); convert it, e.g. "
                             f"with jq -c '.[]', or read it with datasets and pass the Dataset",
                             path=path, reason="unknown_format")
    if fmt == "arrow":
        fmt = "arrow_file" if head.startswith(ARROW_FILE_MAGIC) else "arrow_stream"
    if fmt not in FORMATS:
        raise InputError(f"{path}: unknown format {fmt!r}; use one of {', '.join(FORMATS)}", path=path,
                         reason="unknown_format")
    if compression is not None and fmt not in LINE_FORMATS:
        raise InputError(f"{path}: {compression} compression is only read for JSONL and text files; "
                         f"{fmt} files carry their own compression, so decompress this file first",
                         path=path, reason="unknown_format")
    return fmt, compression
