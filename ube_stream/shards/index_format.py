"""The token shard directory format, version 2: index header, index files,
manifest checks and atomic writes.  Internal; the public face is
:mod:`ube_stream.shards`.

Index file (``.idx``), little-endian::

    offset  size  field
    0       8     magic b"UBESHRD1"
    8       4     uint32 format version = 2 (1 is still read)
    12      4     uint32 token width in bytes = 4
    16      8     uint64 n_docs
    24      8     uint64 n_tokens
    32      32    sha256 digest of the .tokens file (raw bytes)
    64      32    tokenizer fingerprint (raw bytes of the hex in "sha256:<hex>")
    96      8     uint64 token bound: the largest token id in the .tokens file + 1 (0: no tokens);
                  version 2 only (zero in version 1, whose readers ignored the field)
    104     24    reserved, zero
    128     8*(n_docs+1)   uint64 doc_offsets (doc_offsets[0] = 0, doc_offsets[n_docs] = n_tokens)
    ...     8*n_docs       uint64 rows (row of the document inside its source file)
    ...     4*n_docs       uint32 source_ids (index into MANIFEST "sources")

The ``.tokens`` file is raw little-endian uint32 ids.
"""
from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass
from typing import Any, Dict

import numpy as np

from ..errors import ShardFormatError
from ..storage import (
    TMP_SUFFIX,  # noqa: F401  (temp names inside shard directories)
    load_json,
    read_bounded,
)
from .schema import check_shard_file

MAGIC = b"UBESHRD1"
FORMAT_VERSION = 2
READ_VERSIONS = (1, 2)             # version 1: the same layout without the token bound
MANIFEST_VERSION = 1               # MANIFEST.json (unchanged by index version 2)
TOKEN_WIDTH = 4
HEADER_SIZE = 128
MANIFEST_NAME = "MANIFEST.json"
MANIFEST_FORMAT = "ube-stream-shards"
TOKENIZER_NAME = "tokenizer.json"
UNITS_DIR = "units"
SHARDS_DIR = "shards"
LOCKS_DIR = "locks"
PLAN_NAME = "_plan.json"          # units/_plan.json: the options of an unfinished run (removed with units/)
_HEADER = struct.Struct("<8sIIQQ32s32sQ24s")
assert _HEADER.size == HEADER_SIZE
_READ_BLOCK = 1 << 22


def index_size(n_docs: int) -> int:
    """Bytes of an index file holding ``n_docs`` documents."""
    return HEADER_SIZE + 8 * (n_docs + 1) + 8 * n_docs + 4 * n_docs


def fingerprint_bytes(fingerprint: str) -> bytes:
    """The 32 raw bytes of a ``"sha256:<hex>"`` tokenizer fingerprint."""
    prefix, _, hexdigest = fingerprint.partition(":")
    raw = bytes.fromhex(hexdigest) if prefix == "sha256" else b""
    if len(raw) != 32:
        raise ValueError(f"tokenizer fingerprint must be 'sha256:<64 hex digits>', got {fingerprint!r}")
    return raw


def fingerprint_text(raw: bytes) -> str:
    return "sha256:" + raw.hex()


@dataclass(frozen=True)
class IndexHeader:
    """The fixed 128-byte header of an index file."""

    n_docs: int
    n_tokens: int
    tokens_sha256: bytes
    fingerprint: bytes
    version: int = FORMAT_VERSION
    width: int = TOKEN_WIDTH
    token_bound: int = 0        # largest id + 1 (version 2); 0 when unknown (version 1) or no tokens

    def pack(self) -> bytes:
        return _HEADER.pack(MAGIC, self.version, self.width, self.n_docs, self.n_tokens,
                            self.tokens_sha256, self.fingerprint, self.token_bound, b"\0" * 24)


def unpack_header(raw: bytes, path: str) -> IndexHeader:
    """Parse and check magic, version and width (counts are checked by :func:`check_index`)."""
    if len(raw) < HEADER_SIZE:
        raise ShardFormatError(f"{path}: index file is {len(raw)} bytes, shorter than its {HEADER_SIZE}-byte "
                               f"header; the file is truncated. Re-encode the directory")
    magic, version, width, n_docs, n_tokens, digest, fingerprint, bound, _ = _HEADER.unpack(raw[:HEADER_SIZE])
    if magic != MAGIC:
        raise ShardFormatError(f"{path}: bad magic {magic!r}, expected {MAGIC!r}; this is not an ube-stream "
                               f"shard index (or it is corrupt). Re-encode the directory")
    if version not in READ_VERSIONS:
        raise ShardFormatError(f"{path}: index format version {version}, this ube-stream reads versions "
                               f"{', '.join(map(str, READ_VERSIONS))}; upgrade ube-stream or re-encode")
    if width != TOKEN_WIDTH:
        raise ShardFormatError(f"{path}: token width {width} bytes, expected {TOKEN_WIDTH} (uint32); "
                               f"the header is corrupt. Re-encode the directory")
    return IndexHeader(n_docs, n_tokens, digest, fingerprint, version, width, bound if version >= 2 else 0)


def read_header(path: str) -> IndexHeader:
    try:
        with open(path, "rb") as f:
            raw = f.read(HEADER_SIZE)
    except FileNotFoundError:
        raise ShardFormatError(f"{path}: index file is missing; the directory is incomplete or was "
                               f"edited. Re-encode it") from None
    return unpack_header(raw, path)


def write_index(path: str, header: IndexHeader, doc_offsets: np.ndarray, rows: np.ndarray,
                source_ids: np.ndarray) -> None:
    """Write an index file (plain write; the caller renames it into place)."""
    n = header.n_docs
    if not (len(doc_offsets) == n + 1 and len(rows) == n and len(source_ids) == n):
        raise AssertionError("index arrays do not match n_docs")
    with open(path, "wb") as f:
        f.write(header.pack())
        f.write(np.ascontiguousarray(doc_offsets, dtype="<u8").tobytes())
        f.write(np.ascontiguousarray(rows, dtype="<u8").tobytes())
        f.write(np.ascontiguousarray(source_ids, dtype="<u4").tobytes())
        f.flush()
        os.fsync(f.fileno())


def check_index(index_path: str, tokens_path: str, header: IndexHeader, *, n_docs: int | None = None,
                n_tokens: int | None = None, tokens_sha256: str | None = None,
                fingerprint: str | None = None, tokens_size: int | None = None) -> None:
    """Check an index header against the file sizes and (when given) the values
    the manifest records.  Raises :class:`ShardFormatError` naming the file.
    ``tokens_size``: the token file's size when it is not on local disk (a
    store's listing)."""
    fix = "Re-encode the directory (or restore the file)"
    size = os.path.getsize(index_path)
    if size != index_size(header.n_docs):
        raise ShardFormatError(f"{index_path}: index file is {size} bytes but its header records {header.n_docs} "
                               f"documents, which need {index_size(header.n_docs)} bytes; the file is truncated "
                               f"or corrupt. {fix}")
    try:
        if tokens_size is None:
            tokens_size = os.path.getsize(tokens_path)
    except FileNotFoundError:
        raise ShardFormatError(f"{tokens_path}: token file is missing (its index {index_path} exists). {fix}") from None
    if tokens_size != TOKEN_WIDTH * header.n_tokens:
        raise ShardFormatError(f"{tokens_path}: token file is {tokens_size} bytes but its index header records "
                               f"{header.n_tokens} tokens ({TOKEN_WIDTH * header.n_tokens} bytes); the file is "
                               f"truncated or was replaced. {fix}")
    if n_docs is not None and n_docs != header.n_docs:
        raise ShardFormatError(f"{index_path}: header records {header.n_docs} documents, MANIFEST.json records "
                               f"{n_docs}. {fix}")
    if n_tokens is not None and n_tokens != header.n_tokens:
        raise ShardFormatError(f"{index_path}: header records {header.n_tokens} tokens, MANIFEST.json records "
                               f"{n_tokens}. {fix}")
    if tokens_sha256 is not None and tokens_sha256 != header.tokens_sha256.hex():
        raise ShardFormatError(f"{index_path}: header records token checksum {header.tokens_sha256.hex()}, "
                               f"MANIFEST.json records {tokens_sha256}. {fix}")
    if fingerprint is not None and fingerprint_bytes(fingerprint) != header.fingerprint:
        raise ShardFormatError(f"{index_path}: encoded with tokenizer {fingerprint_text(header.fingerprint)}, but "
                               f"MANIFEST.json records {fingerprint}; shards of another tokenizer were mixed in. {fix}")


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(_READ_BLOCK)
            if not block:
                break
            digest.update(block)
    return digest.hexdigest()


def read_json(path: str, what: str):
    """A MANIFEST (``what="MANIFEST.json"``), unit marker or run plan, read
    (a local file or an object: at most ``storage.MAX_JSON_BYTES``; locally only a regular file)
    and checked against its schema (:mod:`.schema`) before any field is used:
    :class:`ShardFormatError` naming the file and the field."""
    return parse_json(read_bounded(path, what=what, error=ShardFormatError, fix=_CORRUPT), path, what)


_CORRUPT = "the file is corrupt. Re-encode the directory"


def parse_json(data: bytes, source: str, what: str):
    """:func:`read_json` of bytes already read from ``source``."""
    doc = load_json(data, source=source, what=what, error=ShardFormatError, fix=_CORRUPT)
    check_shard_file(doc, what, source=source, error=ShardFormatError)
    if what == "unit marker":
        check_marker_agrees(doc, source)
    return doc


def check_marker_agrees(record: Dict[str, Any], source: str) -> None:
    """A marker's fields agree with each other (a marker has no checksum of its own:
    its shards' names and files follow from its unit id, its counts add up)."""
    fix = "the unit will be encoded again on the next run"
    unit_id = record["unit_id"]
    for k, shard in enumerate(record["shards"]):
        name = f"{unit_id}-{k:04d}"
        expected = {"name": name, "unit_id": unit_id, "tokens_file": f"{SHARDS_DIR}/{name}.tokens",
                    "index_file": f"{SHARDS_DIR}/{name}.idx", "index_bytes": index_size(shard["documents"])}
        for key, value in expected.items():
            if shard[key] != value:
                raise ShardFormatError(f"{source}: field 'shards[{k}].{key}' must be {value!r} (unit {unit_id}, "
                                       f"shard {k}, {shard['documents']} documents), found {shard[key]!r}; {fix}")
    for key in ("documents", "tokens"):
        total = sum(shard[key] for shard in record["shards"])
        if total != record[key]:
            raise ShardFormatError(f"{source}: field {key!r} is {record[key]}, but its shards hold {total}; {fix}")
    if record["rows_read"] != record["documents"] + sum(record["skipped"].values()):
        raise ShardFormatError(f"{source}: field 'rows_read' is {record['rows_read']}, not documents + skipped "
                               f"({record['documents']} + {sum(record['skipped'].values())}); {fix}")
