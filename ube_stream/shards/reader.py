"""The memory-mapped reader of a token shard directory (public face:
:class:`ube_stream.shards.TokenShards`).  Internal module.

Files are mapped lazily, shard by shard, so opening a directory of many
thousands of shards costs one header read per shard (``verify="header"``),
not one file descriptor per shard.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from ..errors import ShardFormatError
from ..storage import inside, is_url, local_path
from . import index_format as fmt

VERIFY_LEVELS = ("none", "header", "full")


_PATH_FIX = "The manifest is corrupt or hostile: re-encode"


def _inside(directory: str, entry: Dict[str, Any], field: str, where: str) -> str:
    """``directory/entry[field]``, refused unless it stays inside ``directory`` and
    is a regular file when it exists (:func:`ube_stream.storage.inside`)."""
    return inside(directory, entry[field], where=where, field=field, error=ShardFormatError,
                             fix=_PATH_FIX)


class Shard:
    """One shard: ``tokens`` (uint32 memmap), ``doc_offsets`` (uint64, n+1),
    ``rows`` (uint64), ``source_ids`` (uint32), all mapped on first use."""

    def __init__(self, directory: str, entry: Dict[str, Any], where: str = "MANIFEST.json", remote: Any = None):
        # ``entry`` was checked against schema.SHARD with the whole manifest (fmt.read_json)
        self.name: str = entry["name"]
        self.unit_id: str = entry["unit_id"]
        self.tokens_file: str = entry["tokens_file"]
        self.tokens_path = _inside(directory, entry, "tokens_file", where)
        self._remote = remote       # a RemoteShards: the token file is fetched on first use
        self.index_path = _inside(directory, entry, "index_file", where)
        self.num_docs: int = int(entry["documents"])
        self.num_tokens: int = int(entry["tokens"])
        self.sha256: str = entry["sha256"]
        #: sha256 of the index file (MANIFESTs written before it was recorded: None)
        self.index_sha256: Optional[str] = entry.get("index_sha256")
        self._index: Optional[np.ndarray] = None
        self._tokens: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return self.num_docs

    def __repr__(self) -> str:
        return f"Shard({self.name!r}, documents={self.num_docs}, tokens={self.num_tokens})"

    def __getstate__(self) -> dict:
        # pickled for DataLoader workers: send paths and counts, re-map in the child
        return dict(self.__dict__, _index=None, _tokens=None)

    def _index_map(self) -> np.ndarray:
        if self._index is None:
            try:
                self._index = np.memmap(self.index_path, dtype=np.uint8, mode="r")
            except (OSError, ValueError) as exc:
                raise ShardFormatError(f"{self.index_path}: cannot map the index file ({exc}); the directory is "
                                       f"incomplete or corrupt. Check it with TokenShards(..., verify='full')") from None
            if len(self._index) != fmt.index_size(self.num_docs):
                raise ShardFormatError(f"{self.index_path}: {len(self._index)} bytes, expected "
                                       f"{fmt.index_size(self.num_docs)} for {self.num_docs} documents; the file is "
                                       f"truncated or corrupt. Re-encode the directory")
        return self._index

    @property
    def tokens(self) -> np.ndarray:
        """All token ids of the shard (read-only ``uint32`` memmap)."""
        if self._tokens is None:
            if self.num_tokens == 0:
                self._tokens = np.zeros(0, dtype="<u4")   # mmap cannot map an empty file
            else:
                if self._remote is not None:
                    self._remote.fetch(self.tokens_file)
                try:
                    self._tokens = np.memmap(self.tokens_path, dtype="<u4", mode="r", shape=(self.num_tokens,))
                except (OSError, ValueError) as exc:
                    raise ShardFormatError(f"{self.tokens_path}: cannot map {self.num_tokens} tokens ({exc}); the "
                                           f"file is missing or truncated. Re-encode the directory") from None
        return self._tokens

    @property
    def doc_offsets(self) -> np.ndarray:
        start = fmt.HEADER_SIZE
        return self._index_map()[start:start + 8 * (self.num_docs + 1)].view("<u8")

    @property
    def rows(self) -> np.ndarray:
        start = fmt.HEADER_SIZE + 8 * (self.num_docs + 1)
        return self._index_map()[start:start + 8 * self.num_docs].view("<u8")

    @property
    def source_ids(self) -> np.ndarray:
        start = fmt.HEADER_SIZE + 16 * self.num_docs + 8
        return self._index_map()[start:start + 4 * self.num_docs].view("<u4")

    def read(self, start: int, stop: int) -> np.ndarray:
        """Tokens ``[start, stop)`` of the shard: a slice of :attr:`tokens`, or for
        a shard on a store whose token file is not cached whole, of the cached
        blocks that hold them (only those are fetched)."""
        if self._remote is None or self._tokens is not None:
            return self.tokens[start:stop]
        if start >= stop:
            return np.zeros(0, dtype="<u4")
        return self._remote.read_tokens(self.tokens_file, start, stop)

    def doc(self, i: int) -> np.ndarray:
        offsets = self.doc_offsets
        return self.read(int(offsets[i]), int(offsets[i + 1]))

    def check_index_checksum(self) -> None:
        """The index file's sha256 against the MANIFEST's ``index_sha256`` (a
        MANIFEST written before it was recorded: nothing to check)."""
        if self.index_sha256 is not None:
            digest = fmt.sha256_file(self.index_path)
            if digest != self.index_sha256:
                raise ShardFormatError(f"{self.index_path}: sha256 is {digest}, MANIFEST.json records "
                                       f"{self.index_sha256}; the index (document offsets, rows or sources) changed "
                                       f"after encoding. Re-encode the directory or restore the file")

    def close(self) -> None:
        self._index = self._tokens = None


class TokenShards:
    """A finished token shard directory, memory-mapped.

    ``verify``: ``"header"`` (default) checks MANIFEST.json, tokenizer.json's
    fingerprint and every index header against the manifest and the file
    sizes; ``"full"`` also recomputes the sha256 of every token file;
    ``"none"`` trusts the manifest.  Problems raise
    :class:`~ube_stream.errors.ShardFormatError` naming the file.

    ``len()`` is the number of documents; ``doc(i)`` a zero-copy uint32 view
    (BOS/EOS included as encoded); ``decode_doc(i)`` the text without them;
    ``source(i)`` the ``(path, row)`` it came from; ``shards`` the per-shard
    objects (``tokens``, ``doc_offsets``, ``rows``, ``source_ids``, ``name``).

    ``directory`` may be a URL (``s3://bucket/shards``): the manifest,
    tokenizer and index files are then fetched at open, token files on first
    use, into a local cache of at most ``cache_limit`` bytes (default
    ``$UBE_STREAM_CACHE_LIMIT``, else 100 GiB) that evicts the least recently
    used (:class:`ube_stream.shards.remote.RemoteShards`); ``location`` is what
    was opened (the URL), ``directory`` the local cache folder read.
    """

    def __init__(self, directory: str | os.PathLike, *, verify: str = "header",
                 cache_limit: "int | str | None" = None):
        if verify not in VERIFY_LEVELS:
            raise ValueError(f"verify must be one of {VERIFY_LEVELS}, got {verify!r}")
        location = local_path(directory)
        if is_url(location):
            from .remote import RemoteShards

            self.location = location.rstrip("/")
            self._remote: Any = RemoteShards(self.location, cache_limit=cache_limit)
            self.directory = self._remote.local
        else:
            self.directory = self.location = os.path.abspath(location)
            self._remote = None
        manifest_path = os.path.join(self.directory, fmt.MANIFEST_NAME)
        if not os.path.exists(manifest_path):
            if not os.path.isdir(self.directory):
                raise ShardFormatError(f"{self.directory}: no such shard directory; encode one with `ube encode`")
            if any(os.path.exists(os.path.join(self.directory, d)) for d in (fmt.UNITS_DIR, fmt.SHARDS_DIR)):
                raise ShardFormatError(
                    f"{manifest_path}: missing: the directory is unfinished (an encoding run was stopped, or not "
                    f"every rank has run). Rerun the same `ube encode` command to complete it, or run the "
                    f"missing ranks and finalize (finalize=True)")
            raise ShardFormatError(f"{manifest_path}: missing: {self.directory} is not a shard directory")
        self.manifest: Dict[str, Any] = fmt.read_json(manifest_path, "MANIFEST.json")
        self._check_manifest(manifest_path)
        m = self.manifest
        self.special_ids: Dict[str, Optional[int]] = dict(m["special_ids"])
        self.sources: List[Dict[str, Any]] = list(m["sources"])
        self.shards: List[Shard] = [Shard(self.directory, entry, manifest_path, self._remote) for entry in m["shards"]]
        counts = np.array([s.num_docs for s in self.shards], dtype=np.int64)
        self._doc_starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.num_tokens: int = int(m["totals"]["tokens"])
        self._tokenizer = None
        if verify != "none":
            self._verify(verify)

    # ------------------------------------------------------------------ checks
    def _check_manifest(self, path: str) -> None:
        """What the schema (checked by ``fmt.read_json``) cannot say: the totals add up."""
        m = self.manifest
        docs = sum(s["documents"] for s in m["shards"])
        tokens = sum(s["tokens"] for s in m["shards"])
        if (docs, tokens, len(m["shards"])) != (m["totals"]["documents"], m["totals"]["tokens"], m["totals"]["shards"]):
            raise ShardFormatError(f"{path}: totals ({m['totals']['documents']} documents, {m['totals']['tokens']} "
                                   f"tokens, {m['totals']['shards']} shards) disagree with its shard list ({docs}, "
                                   f"{tokens}, {len(m['shards'])}); the manifest is corrupt. Re-encode")

    def _verify(self, level: str) -> None:
        fingerprint = self.manifest["tokenizer"]["fingerprint"]
        tok = self.tokenizer
        if tok.fingerprint != fingerprint:
            raise ShardFormatError(
                f"{os.path.join(self.directory, fmt.TOKENIZER_NAME)}: tokenizer fingerprint {tok.fingerprint}, but "
                f"MANIFEST.json records {fingerprint}; the tokenizer file was replaced. Restore the tokenizer "
                f"the shards were encoded with, or re-encode")
        n_sources = len(self.sources)
        vocab_size = tok.vocab_size
        fix = "the index is corrupt. Re-encode the directory (or restore the file)"
        for shard in self.shards:
            header = fmt.read_header(shard.index_path)
            fmt.check_index(shard.index_path, shard.tokens_path, header, n_docs=shard.num_docs,
                            n_tokens=shard.num_tokens, tokens_sha256=shard.sha256, fingerprint=fingerprint,
                            tokens_size=None if self._remote is None else self._remote.sizes[shard.tokens_file])
            # cheap, vectorised checks of the whole index: a reader never serves a
            # document outside the token file, a row or source that does not exist,
            # or (version 2 headers) an id outside the vocabulary
            offsets = shard.doc_offsets
            if shard.num_docs and (int(offsets[0]) != 0 or int(offsets[-1]) != shard.num_tokens):
                raise ShardFormatError(f"{shard.index_path}: doc_offsets run {int(offsets[0])}..{int(offsets[-1])}, "
                                       f"expected 0..{shard.num_tokens}; {fix}")
            if shard.num_docs > 1:
                down = np.flatnonzero(offsets[1:] < offsets[:-1])
                if len(down):
                    d = int(down[0])
                    raise ShardFormatError(f"{shard.index_path}: doc_offsets decrease at document {d} "
                                           f"({int(offsets[d])} then {int(offsets[d + 1])}); {fix}")
                rows = shard.rows
                if np.any(rows[1:] <= rows[:-1]):
                    d = int(np.flatnonzero(rows[1:] <= rows[:-1])[0])
                    raise ShardFormatError(f"{shard.index_path}: rows are not increasing at document {d + 1} "
                                           f"(row {int(rows[d])} then {int(rows[d + 1])}); {fix}")
            if shard.num_docs and (int(shard.source_ids.max()) >= n_sources or int(shard.rows.max()) >= 1 << 63):
                raise ShardFormatError(f"{shard.index_path}: source id {int(shard.source_ids.max())} or row "
                                       f"{int(shard.rows.max())} is out of range (MANIFEST lists {n_sources} "
                                       f"sources); {fix}")
            if header.version >= 2 and (header.token_bound > vocab_size
                                        or (shard.num_tokens > 0) != (header.token_bound > 0)):
                raise ShardFormatError(f"{shard.index_path}: header records token ids up to "
                                       f"{header.token_bound - 1}, but the vocabulary has {vocab_size} ids; {fix}")
            if level == "full":
                largest = int(shard.tokens.max()) if shard.num_tokens else -1
                if largest >= vocab_size or (header.version >= 2 and largest + 1 != header.token_bound):
                    raise ShardFormatError(f"{shard.tokens_path}: holds token id {largest} (the index header "
                                           f"records a bound of {header.token_bound}), the vocabulary has "
                                           f"{vocab_size} ids; the token file is corrupt. Re-encode the directory")
                digest = fmt.sha256_file(shard.tokens_path)
                if digest != shard.sha256:
                    raise ShardFormatError(f"{shard.tokens_path}: sha256 is {digest}, MANIFEST.json and the index "
                                           f"record {shard.sha256}; the token file is corrupt (changed after "
                                           f"encoding). Re-encode the directory or restore the file")
                shard.check_index_checksum()
            shard.close()

    # ------------------------------------------------------------------ access
    @property
    def tokenizer(self):
        """The directory's tokenizer (loaded from its tokenizer.json)."""
        if self._tokenizer is None:
            from ..errors import TokenizerFormatError
            from ..tokenizer.core import Tokenizer

            path = inside(self.directory, self.manifest["tokenizer"].get("file", fmt.TOKENIZER_NAME),
                                     where=os.path.join(self.directory, fmt.MANIFEST_NAME), field="tokenizer.file",
                                     error=ShardFormatError, fix=_PATH_FIX)
            try:
                self._tokenizer = Tokenizer.load(path)
            except TokenizerFormatError as exc:
                raise ShardFormatError(f"{path}: cannot load the directory's tokenizer: {exc}") from None
        return self._tokenizer

    def __getstate__(self) -> dict:
        # pickled for DataLoader workers: no memory maps or tokenizer, they are re-created lazily
        return dict(self.__dict__, _tokenizer=None)

    def __len__(self) -> int:
        return int(self._doc_starts[-1])

    def __repr__(self) -> str:
        return f"TokenShards({self.location!r}, documents={len(self)}, tokens={self.num_tokens}, shards={len(self.shards)})"

    def _locate(self, i: int) -> Tuple[Shard, int]:
        n = len(self)
        index = int(i)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"document {i} out of range: the directory holds {n} documents")
        k = int(np.searchsorted(self._doc_starts, index, side="right")) - 1
        return self.shards[k], index - int(self._doc_starts[k])

    def doc(self, i: int) -> np.ndarray:
        """Token ids of document ``i`` as stored (with BOS/EOS): a zero-copy uint32 view."""
        shard, j = self._locate(i)
        return shard.doc(j)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.doc(i)

    def content_ids(self, i: int) -> np.ndarray:
        """Token ids of document ``i`` without the BOS/EOS that encoding added."""
        ids = self.doc(i)
        start = 1 if self.special_ids.get("bos") is not None else 0
        stop = len(ids) - (1 if self.special_ids.get("eos") is not None else 0)
        return ids[start:stop]

    def decode_doc(self, i: int, *, errors: str = "strict") -> str:
        """Text of document ``i`` (without the BOS/EOS that encoding added)."""
        return self.tokenizer.decode(self.content_ids(i), errors=errors)

    def source(self, i: int) -> Tuple[str, int]:
        """``(path, row)`` of the input row document ``i`` came from."""
        shard, j = self._locate(i)
        return self.sources[int(shard.source_ids[j])]["path"], int(shard.rows[j])

    def iter_docs(self) -> Iterator[np.ndarray]:
        """Every document's token ids, in order (zero-copy views)."""
        for shard in self.shards:
            tokens = shard.tokens
            offsets = shard.doc_offsets.tolist()
            for j in range(shard.num_docs):
                yield tokens[offsets[j]:offsets[j + 1]]

    def doc_lengths(self) -> np.ndarray:
        """Tokens per document (int64), in document order."""
        if not self.shards:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([np.diff(s.doc_offsets.astype(np.int64)) for s in self.shards])

    def close(self) -> None:
        for shard in self.shards:
            shard.close()
