"""Export a shard directory to Megatron-LM's indexed dataset (``PREFIX.bin`` / ``PREFIX.idx``).

The layout is that of ``megatron/core/datasets/indexed_dataset.py``
(``_IndexWriter``, ``IndexedDatasetBuilder``), little-endian::

    PREFIX.idx   b"MMIDIDX\\x00\\x00"        9 bytes
                 uint64 version = 1
                 uint8  dtype code            8 = uint16, 4 = int32 (Megatron's DType enum)
                 uint64 sequence_count        one sequence per document here
                 uint64 document_count        = sequence_count + 1 (document_indices starts with 0)
                 int32  sequence_lengths[sequence_count]   tokens per document
                 int64  sequence_pointers[sequence_count]  byte offsets into PREFIX.bin
                 int64  document_indices[document_count]   0, 1, ..., sequence_count
    PREFIX.bin   the documents' tokens as uint16 or int32, concatenated

The token type follows Megatron's own rule (``DType.optimal_dtype`` in
``indexed_dataset.py``, what ``tools/preprocess_data.py`` writes): ``uint16``
when the vocabulary has fewer than 65,500 ids, else ``int32``
(``dtype="auto"``, the default); ``dtype="int32"`` / ``"uint16"`` force one.

Every document of the directory (manifest order, EOS/BOS included as
encoded, empty documents as zero-length sequences, so document ``i`` keeps its
number) becomes one sequence and one document, as Megatron's
``tools/preprocess_data.py`` writes them.  Memory is bounded: tokens are
copied in chunks and the index is written in three streaming passes over the
shards' index files.  Both files are written under temporary names and
renamed when complete.
"""
from __future__ import annotations

import hashlib
import os
import struct
from typing import Any, Dict, Optional

import numpy as np

from ..errors import ShardFormatError
from ..shards import TokenShards
from ..storage import atomic_open, is_url, local_path
from ..storage import exists as storage_exists

__all__ = ["export_megatron", "megatron_dtype", "MEGATRON_INDEX_HEADER", "MEGATRON_DTYPE_CODES"]

MEGATRON_INDEX_HEADER = b"MMIDIDX\x00\x00"
MEGATRON_DTYPE_CODES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "float64": 6, "float32": 7,
                        "uint16": 8}
_TOKEN_DTYPES = {"int32": ("<i4", 2**31 - 1), "uint16": ("<u2", 2**16 - 1)}
_INT32_MAX = 2**31 - 1
#: Megatron's ``DType.optimal_dtype``: uint16 below this many vocabulary ids, else int32
MEGATRON_UINT16_VOCAB_LIMIT = 65500


def megatron_dtype(vocab_size: int) -> str:
    """The token type Megatron-LM picks for a vocabulary of ``vocab_size`` ids
    (``DType.optimal_dtype``): ``"uint16"`` below 65,500 ids, else ``"int32"``.

    >>> megatron_dtype(32000), megatron_dtype(65500), megatron_dtype(100277)
    ('uint16', 'int32', 'int32')
    """
    return "uint16" if vocab_size < MEGATRON_UINT16_VOCAB_LIMIT else "int32"
_CHUNK_TOKENS = 1 << 22  # 16 MiB of uint32 per copy step


def export_megatron(directory: str, prefix: str, *, dtype: str = "auto",
                    progress: Optional[Any] = None, overwrite: bool = False) -> Dict[str, Any]:
    """Write ``prefix + ".bin"`` and ``prefix + ".idx"`` from the shard directory.

    ``dtype``: ``"auto"`` (default: Megatron's rule, :func:`megatron_dtype`
    of the directory's vocabulary size: ``uint16`` below 65,500 ids, half the
    bytes of ``int32``), ``"int32"`` or ``"uint16"``.
    Returns ``{"bin", "idx", "documents", "tokens", "shards", "dtype"}``
    (``dtype`` is the type written).
    Raises :class:`~ube_stream.errors.ShardFormatError` for a damaged
    directory (checked as it is copied: every token against the vocabulary,
    every token file's and index file's sha256 against the MANIFEST, so a
    corrupt shard is never exported) and ``ValueError`` when a token id does
    not fit the dtype.
    ``progress``, if given, is called with each shard's name after its tokens
    are written.  Existing ``prefix.bin`` / ``prefix.idx`` raise
    ``FileExistsError`` unless ``overwrite=True``.  ``directory`` and
    ``prefix`` may be URLs (``s3://...``): the files are then uploaded, each in
    one PUT once complete.
    """
    if dtype != "auto" and dtype not in _TOKEN_DTYPES:
        raise ValueError(f"dtype must be 'auto' or one of {sorted(_TOKEN_DTYPES)}, got {dtype!r}")
    directory = os.fspath(directory)
    prefix = local_path(prefix)

    reader = TokenShards(directory, verify="header")
    shards, vocab_size = reader.shards, reader.tokenizer.vocab_size
    if dtype == "auto":
        dtype = megatron_dtype(vocab_size)
    token_dtype, max_id = _TOKEN_DTYPES[dtype]
    itemsize = np.dtype(token_dtype).itemsize
    bin_path, idx_path = prefix + ".bin", prefix + ".idx"
    existing = [p for p in (bin_path, idx_path) if storage_exists(p)]
    if existing and not overwrite:
        raise FileExistsError(f"{' and '.join(existing)} already exist; pass overwrite=True to replace them, "
                              f"or choose another prefix")
    if not is_url(prefix):
        os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    n_docs = sum(s.num_docs for s in shards)
    n_tokens = sum(s.num_tokens for s in shards)
    # both files are renamed into place only once both are complete (the index first)
    with atomic_open(bin_path, "wb", unique=True) as out, atomic_open(idx_path, "wb", unique=True) as out_idx:
        for shard in shards:
            tokens = shard.tokens
            shard.check_index_checksum()
            digest = hashlib.sha256()
            for start in range(0, shard.num_tokens, _CHUNK_TOKENS):
                chunk = tokens[start:start + _CHUNK_TOKENS]
                digest.update(chunk.data)
                largest = int(chunk.max()) if chunk.size else -1
                if largest >= vocab_size:
                    bad = start + int(np.argmax(chunk >= vocab_size))
                    raise ShardFormatError(f"{shard.tokens_path}: token {bad} is id {int(tokens[bad])}, outside the "
                                           f"vocabulary of {vocab_size} ids; the token file is corrupt. Nothing was "
                                           f"exported: re-encode the directory")
                if largest > max_id:
                    bad = start + int(np.argmax(chunk > max_id))
                    raise ValueError(f"{shard.tokens_path}: token {bad} is id {int(tokens[bad])}, which does not "
                                     f"fit Megatron {dtype} tokens (ids must be <= {max_id}); "
                                     + ("export with dtype='int32'" if dtype != "int32" else
                                        "Megatron cannot hold ids of 2**31 or more"))
                out.write(chunk.astype(token_dtype).tobytes())
            if digest.hexdigest() != shard.sha256:
                raise ShardFormatError(f"{shard.tokens_path}: sha256 is {digest.hexdigest()}, MANIFEST.json records "
                                       f"{shard.sha256}; the token file changed after encoding. Nothing was "
                                       f"exported: re-encode the directory or restore the file")
            del tokens
            if progress is not None:
                progress(shard.name)
        expected_bin = itemsize * n_tokens
        if out.tell() != expected_bin:  # pragma: no cover - defensive
            raise ShardFormatError(f"{bin_path}: wrote {out.tell()} bytes, expected {expected_bin}")
        out_idx.write(MEGATRON_INDEX_HEADER)
        out_idx.write(struct.pack("<Q", 1))
        out_idx.write(struct.pack("<B", MEGATRON_DTYPE_CODES[dtype]))
        out_idx.write(struct.pack("<Q", n_docs))
        out_idx.write(struct.pack("<Q", n_docs + 1))
        for shard in shards:  # sequence lengths
            lengths = np.diff(shard.doc_offsets.astype(np.int64))
            if lengths.size and int(lengths.max()) > _INT32_MAX:
                raise ValueError(f"{shard.index_path}: a document of {int(lengths.max())} tokens does not fit "
                                 "Megatron's int32 sequence lengths")
            out_idx.write(lengths.astype("<i4").tobytes())
        base = 0
        for shard in shards:  # sequence pointers (bytes)
            offsets = shard.doc_offsets[:-1].astype(np.int64)
            out_idx.write(((offsets + base) * itemsize).astype("<i8").tobytes())
            base += shard.num_tokens
        for start in range(0, n_docs + 1, _CHUNK_TOKENS):  # document indices
            out_idx.write(np.arange(start, min(start + _CHUNK_TOKENS, n_docs + 1), dtype="<i8").tobytes())
    return {"bin": bin_path, "idx": idx_path, "documents": n_docs, "tokens": n_tokens, "shards": len(shards),
            "dtype": dtype}
