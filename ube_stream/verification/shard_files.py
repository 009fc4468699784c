"""Structural checks of one shard directory's files, read from the format spec with numpy.

Index file: 128-byte header (magic ``UBESHRD1``, version 2 (or 1), token width 4,
``n_docs``, ``n_tokens``, sha256 of the token file, tokenizer fingerprint,
uint64 token bound (largest id + 1; version 2, zero in version 1), 24 reserved
zero bytes), then ``uint64 doc_offsets[n_docs + 1]``, ``uint64
rows[n_docs]``, ``uint32 source_ids[n_docs]``.  Every problem is reported (not
raised), so one run lists them all.
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
from typing import Any, Dict, Optional

import numpy as np

from .report import Mismatch, VerifyReport

MAGIC = b"UBESHRD1"
HEADER_BYTES = 128


def _fingerprint_bytes(fingerprint: str) -> bytes:
    hexdigest = fingerprint.split(":", 1)[-1]
    try:
        raw = bytes.fromhex(hexdigest)
    except ValueError:
        raw = b""
    return raw if len(raw) == 32 else b"\xff" * 32


def _hex(digest: str) -> str:
    return str(digest).split(":", 1)[-1].lower()


def _sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def index_size(n_docs: int) -> int:
    return HEADER_BYTES + 8 * (n_docs + 1) + 8 * n_docs + 4 * n_docs


@dataclasses.dataclass
class ShardData:
    name: str
    tokens: np.ndarray
    doc_offsets: np.ndarray
    rows: np.ndarray
    source_ids: np.ndarray
    first_doc: int = 0


def check_shard(directory: str, record: Dict[str, Any], fingerprint: str, n_sources: int,
                vocab_size: Optional[int], report: VerifyReport) -> Optional[ShardData]:
    """Header, sizes, checksum and offsets of one shard; its arrays when they can be trusted."""
    from ..errors import ShardFormatError
    from ..storage import inside

    name = record["name"]
    report.count("shards", 1)
    paths = []
    for field in ("tokens_file", "index_file"):
        try:
            paths.append(inside(directory, record[field], where="MANIFEST.json", field=f"{name}.{field}",
                                error=ShardFormatError, fix="the manifest is corrupt or hostile: re-encode"))
        except ShardFormatError as exc:
            report.fail(Mismatch("files", record[field], "-", str(exc), shard=name, document=None))
            return None
    tokens_path, index_path = paths
    n_docs, n_tokens = int(record["documents"]), int(record["tokens"])

    def fail(category: str, message: str) -> None:
        report.fail(Mismatch(category, index_path if category == "index" else tokens_path, "-", message,
                             shard=name, document=None))

    for path in (tokens_path, index_path):
        if not os.path.isfile(path):
            fail("files", f"{path} is missing (MANIFEST lists it); the directory is damaged: re-encode the unit "
                          f"{record.get('unit_id')}")
            return None
    tokens_bytes = os.path.getsize(tokens_path)
    if tokens_bytes != 4 * n_tokens:
        fail("files", f"token file holds {tokens_bytes} bytes, MANIFEST says {n_tokens} tokens "
                      f"({4 * n_tokens} bytes): truncated or overwritten")
        return None
    size = os.path.getsize(index_path)
    header = np.fromfile(index_path, dtype=np.uint8, count=HEADER_BYTES).tobytes()
    if len(header) < HEADER_BYTES or header[:8] != MAGIC:
        fail("index", f"not a shard index: expected magic {MAGIC!r} and a {HEADER_BYTES}-byte header, found "
                      f"{header[:8]!r} in a {size}-byte file")
        return None
    version, width = np.frombuffer(header[8:16], "<u4").tolist()
    head_docs, head_tokens = np.frombuffer(header[16:32], "<u8").tolist()
    if version not in (1, 2) or width != 4:
        fail("index", f"format version {version}, token width {width}; expected version 1 or 2, width 4")
        return None
    token_bound = int(np.frombuffer(header[96:104], "<u8")[0]) if version == 2 else None
    if (head_docs, head_tokens) != (n_docs, n_tokens):
        fail("index", f"header says {head_docs} documents / {head_tokens} tokens, MANIFEST says "
                      f"{n_docs} / {n_tokens}")
        return None
    if size != index_size(n_docs):
        fail("index", f"index file holds {size} bytes; {n_docs} documents need exactly {index_size(n_docs)} "
                      f"(header + offsets + rows + source ids): truncated or padded")
        return None
    report.count("index headers", 1)
    digest = _sha256_file(tokens_path)
    recorded = {"index header": header[32:64].hex(), "MANIFEST": _hex(record.get("sha256", ""))}
    wrong = [where for where, value in recorded.items() if value != digest]
    if wrong:
        fail("checksums", f"sha256 of the token file is {digest}, but the {' and the '.join(wrong)} "
                          f"record{'s' if len(wrong) == 1 else ''} {recorded[wrong[0]]}: the tokens changed "
                          "after they were written")
    report.count("checksums", 1)
    if record.get("index_sha256") is not None:   # MANIFESTs written before it was recorded: not checked
        index_digest = _sha256_file(index_path)
        if index_digest != record["index_sha256"]:
            fail("checksums", f"sha256 of the index file is {index_digest}, MANIFEST records "
                              f"{record['index_sha256']}: the document offsets, rows or sources changed after "
                              "they were written")
            return None
    if header[64:96] != _fingerprint_bytes(fingerprint):
        fail("fingerprint", f"index header records tokenizer sha256:{header[64:96].hex()}, MANIFEST {fingerprint}")
    if any(header[104:128]) or (version == 1 and any(header[96:104])):
        fail("index", f"reserved header bytes {96 if version == 1 else 104}..127 are not zero")
    doc_offsets = np.fromfile(index_path, dtype="<u8", count=n_docs + 1, offset=HEADER_BYTES).astype(np.int64)
    rows = np.fromfile(index_path, dtype="<u8", count=n_docs, offset=HEADER_BYTES + 8 * (n_docs + 1))
    source_ids = np.fromfile(index_path, dtype="<u4", count=n_docs, offset=HEADER_BYTES + 16 * n_docs + 8)
    if doc_offsets[0] != 0 or doc_offsets[-1] != n_tokens or np.any(np.diff(doc_offsets) < 0):
        fail("index", f"doc_offsets are not a non-decreasing run from 0 to {n_tokens} (first {doc_offsets[0]}, "
                      f"last {doc_offsets[-1]})")
        return None
    if n_docs and int(source_ids.max()) >= n_sources:
        fail("index", f"source id {int(source_ids.max())} is not in MANIFEST sources (0..{n_sources - 1})")
        return None
    tokens = (np.memmap(tokens_path, dtype="<u4", mode="r", shape=(n_tokens,)) if n_tokens
              else np.zeros(0, dtype="<u4"))
    largest = int(tokens.max()) if n_tokens else -1
    if vocab_size is not None and n_tokens and largest >= vocab_size:
        at = int(np.flatnonzero(tokens >= vocab_size)[0])
        fail("tokens", f"token id {int(tokens[at])} at offset {at} is outside the vocabulary (0..{vocab_size - 1})")
    if token_bound is not None and token_bound != largest + 1:
        fail("index", f"header records token bound {token_bound}, the tokens' largest id + 1 is {largest + 1}")
    return ShardData(name, tokens, doc_offsets, rows.astype(np.int64), source_ids.astype(np.int64),
                     int(record.get("_first_doc", 0)))



def read_manifest(directory: str) -> Dict[str, Any]:
    """MANIFEST.json, read bounded and checked against its schema
    (:func:`ube_stream.shards.index_format.read_json`): a malformed one is a
    :class:`~ube_stream.errors.ShardFormatError` naming the field."""
    from ..errors import ShardFormatError
    from ..shards import index_format as fmt
    from ..storage import inside

    path = os.path.join(directory, "MANIFEST.json")
    if not os.path.isfile(path):
        raise ShardFormatError(f"{directory}: no MANIFEST.json, so not a finished shard directory (finish the "
                               "encoding run, or finalize it with finalize=True)")
    manifest = fmt.read_json(path, "MANIFEST.json")
    inside(directory, manifest["tokenizer"].get("file", fmt.TOKENIZER_NAME), where=path, field="tokenizer.file",
           error=ShardFormatError, fix="the manifest is corrupt or hostile: re-encode")
    return manifest
