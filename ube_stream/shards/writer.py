"""The worker side of :func:`ube_stream.shards.encode_corpus`: one pure unit
function, :func:`encode_unit`, that reads a work unit, encodes it, writes its
shard files and its commit marker, and returns a small record (paths, counts,
checksums).  Internal.

Crash safety: the unit's files are written under ``.tmp`` names and renamed
when complete; the marker ``units/<unit_id>.json`` is committed last (the
run engine's commit record, :class:`~ube_stream.runs.records.UnitRecords`),
so a unit is committed iff its marker exists and its files agree with it.  A
unit without a marker is redone from scratch (its leftovers deleted first)
under its lock (:class:`~ube_stream.runs.lock.FileLock`).

Executors map :func:`encode_unit_star` over task dicts; each worker process
loads the tokenizer once (:func:`~ube_stream.executors.worker_state`, keyed
by the output's ``tokenizer.json`` path and fingerprint).  Units dispatched
to a cluster (``dispatched=True``: Ray) differ in two ways only, both about
attempts of one unit that may overlap on a cluster: a unit lock held on
another host does not stop the unit (the driver holds the run's rank lock,
so it is an attempt the cluster gave up on, e.g. on a lost node) and a live
holder on this host (a worker of a killed driver still winding down) is
waited for; and each attempt writes its own ``.tmp.<host>.<pid>`` files.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import time
from typing import Any, BinaryIO, Dict, Iterator, List, Optional

import numpy as np

from .. import _encode
from .._faults import kill_point
from ..errors import InvalidTextError, LockError
from ..executors import worker_state
from ..progress import UnitProgress
from ..runs.corpus import Corpus
from ..runs.engine import worker_tokenizer
from ..runs.lock import HOST, FileLock, lock_holder
from ..runs.records import UnitRecords
from ..storage import storage_error
from . import index_format as fmt
from .overlap import OrderedMap, ReadAhead, WriteBehind

DISPATCHED_LOCK_WAIT_S = 60.0   # how long a dispatched unit waits for a live holder on its own host
SETTLE_BYTES = 32 << 20         # a token file's written bytes are synced and dropped from the page cache
                                # every this many bytes (where the OS can drop them), not only at its end
_ADVISE = getattr(os, "posix_fadvise", None)
_DATASYNC = getattr(os, "fdatasync", os.fsync)


def _drop_cached_pages(fd: int) -> None:
    """Drop a written and synced token file's pages from the page cache (Linux
    ``POSIX_FADV_DONTNEED``; elsewhere nothing).  A run writes about as many token
    bytes as it reads text, once, and never reads them back: kept, they push the
    inputs and everything else out of the cache, and every next shard is written
    into pages the kernel must first find and clear.  Dropped, it reuses the same
    pages: writing 1.2 GB in 20 MB files took 0.35 system CPU seconds instead of
    1.7-3.2 on this project's 2-core virtual machine (docs/scaling.md)."""
    if _ADVISE is not None:
        try:
            _ADVISE(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:   # advice only: a file system that cannot take it loses nothing
            pass


class _UnitShards:
    """Streams one unit's documents into shards ``<unit_id>-<k:04d>``; a new
    shard starts when the current one holds >= ``shard_tokens`` tokens."""

    def __init__(self, out_dir: str, unit_id: str, shard_tokens: int, fingerprint: str, tmp_suffix: str):
        self.shards_dir = os.path.join(out_dir, fmt.SHARDS_DIR)
        self.tmp_suffix = tmp_suffix
        self.unit_id = unit_id
        self.shard_tokens = shard_tokens
        self.fingerprint = fmt.fingerprint_bytes(fingerprint)
        self.records: List[Dict[str, Any]] = []
        self.file: Optional[BinaryIO] = None

    def _open(self) -> None:
        self.name = f"{self.unit_id}-{len(self.records):04d}"
        self.tokens_path = os.path.join(self.shards_dir, self.name + ".tokens")
        self.file = open(self.tokens_path + self.tmp_suffix, "wb")
        self.digest = hashlib.sha256()
        self.unsettled = 0     # bytes written since the file's pages were last synced and dropped
        self.settles = _ADVISE is not None   # False where pages cannot be dropped or synced early
        self.n_tokens = 0
        self.token_bound = 0
        self.lengths: List[np.ndarray] = []
        self.rows: List[np.ndarray] = []

    def add(self, tokens: np.ndarray, doc_offsets: np.ndarray, rows: np.ndarray, source_id: int) -> None:
        """Documents ``tokens[doc_offsets[d]:doc_offsets[d+1]]`` (offsets from 0)."""
        n = len(doc_offsets) - 1
        self.source_id = source_id
        start = 0
        while start < n:
            if self.file is not None and self.n_tokens >= self.shard_tokens:
                self._close()
            if self.file is None:
                self._open()
            assert self.file is not None  # open (just opened by _open())
            room = self.shard_tokens - self.n_tokens
            # documents whose start lies before the shard is full (at least one)
            take = int(np.searchsorted(doc_offsets[start:n] - doc_offsets[start], room, side="left"))
            stop = start + max(take, 1)
            chunk = np.ascontiguousarray(tokens[doc_offsets[start]:doc_offsets[stop]], dtype="<u4")
            self.file.write(chunk.data)
            self.digest.update(chunk.data)
            self.unsettled += chunk.nbytes
            if self.settles and self.unsettled >= SETTLE_BYTES:
                self._settle()
            if len(chunk):
                self.token_bound = max(self.token_bound, int(chunk.max()) + 1)
            self.n_tokens += len(chunk)
            self.lengths.append(np.diff(doc_offsets[start:stop + 1]))
            self.rows.append(np.asarray(rows[start:stop], dtype=np.uint64))
            start = stop

    def _settle(self) -> None:
        """Sync what the open token file holds so far and drop it from the page cache
        (dirty pages cannot be dropped), so that a large shard (one unit of a single
        compressed stream is one shard of up to 1 GiB) keeps at most ~SETTLE_BYTES of
        it in the cache and writes into pages it just freed.  Written whole first, a
        356 MB shard cost 0.68-0.77 system CPU seconds against 0.28-0.33 for the same
        tokens in several units' files (page cache pages fresh from the VM's host)."""
        assert self.file is not None
        self.file.flush()
        self.unsettled = 0
        try:
            _DATASYNC(self.file.fileno())
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
                self.settles = False   # a file system without it: the final fsync decides
                return
            raise   # EIO, ENOSPC...: what the final fsync would report, reported now
        _drop_cached_pages(self.file.fileno())

    def _close(self) -> None:
        assert self.file is not None  # callers close an open shard only
        self.file.flush()
        os.fsync(self.file.fileno())
        _drop_cached_pages(self.file.fileno())
        self.file.close()
        self.file = None
        lengths = np.concatenate(self.lengths)
        doc_offsets = np.zeros(len(lengths) + 1, dtype=np.uint64)
        np.cumsum(lengths, out=doc_offsets[1:])
        header = fmt.IndexHeader(len(lengths), self.n_tokens, self.digest.digest(), self.fingerprint,
                                 token_bound=self.token_bound)
        index_path = os.path.join(self.shards_dir, self.name + ".idx")
        fmt.write_index(index_path + self.tmp_suffix, header, doc_offsets, np.concatenate(self.rows),
                        np.full(len(lengths), self.source_id, dtype=np.uint32))
        os.replace(self.tokens_path + self.tmp_suffix, self.tokens_path)
        os.replace(index_path + self.tmp_suffix, index_path)
        self.records.append({
            "name": self.name, "unit_id": self.unit_id,
            "tokens_file": f"{fmt.SHARDS_DIR}/{self.name}.tokens", "index_file": f"{fmt.SHARDS_DIR}/{self.name}.idx",
            "documents": len(lengths), "tokens": self.n_tokens, "sha256": self.digest.hexdigest(),
            "index_bytes": fmt.index_size(len(lengths)), "index_sha256": fmt.sha256_file(index_path),
        })

    def finish(self) -> List[Dict[str, Any]]:
        if self.file is not None:
            self._close()
        return self.records

    def abort(self) -> None:
        if self.file is not None:
            try:
                self.file.close()
            except OSError:
                pass
            self.file = None
            try:   # give the space back at once (a full disk); a rerun would remove it anyway
                os.unlink(self.tokens_path + self.tmp_suffix)
            except OSError:
                pass


class SpecialTextCounter:
    """Counts the special tokens' texts found in corpus documents (UTF-8 buffers).

    The documents are encoded as plain text (``encode_utf8_batch``), so such text
    never becomes a special id and never splits a document; this says how often
    it occurred.  One scan of the buffer (``_encode.find_first``: ``memchr`` for
    the texts' first byte) says whether any occurs; only then are the matches
    counted (leftmost, longest token first, as ``Tokenizer.encode`` splits
    them), each lying inside one document."""

    def __init__(self, special_tokens):
        import re

        texts = sorted((t.encode("utf-8") for t in special_tokens), key=len, reverse=True)
        self.texts = np.frombuffer(b"".join(texts), np.uint8)
        self.text_offsets = np.cumsum([0] + [len(t) for t in texts]).astype(np.int64)
        self.pattern = re.compile(b"|".join(re.escape(t) for t in texts)) if texts else None
        self.counts: Dict[str, int] = {}

    def add(self, data: np.ndarray, offsets: np.ndarray) -> None:
        if self.pattern is None:
            return
        start, stop = int(offsets[0]), int(offsets[-1])
        if _encode.find_first(data, start, stop, self.texts, self.text_offsets) < 0:
            return
        buf = np.ascontiguousarray(data[start:stop]).data   # re reads the buffer: no copy
        bounds = np.asarray(offsets, dtype=np.int64) - start
        for m in self.pattern.finditer(buf):
            if np.searchsorted(bounds, m.start(), "right") == np.searchsorted(bounds, m.end() - 1, "right"):
                text = m.group().decode("utf-8")
                self.counts[text] = self.counts.get(text, 0) + 1


def leftovers(out_dir: str, unit_id: str) -> List[str]:
    """Paths of files a previous attempt at this unit may have left."""
    shards_dir = os.path.join(out_dir, fmt.SHARDS_DIR)
    try:
        names = os.listdir(shards_dir)
    except FileNotFoundError:
        names = []
    found = [os.path.join(shards_dir, n) for n in sorted(names) if n.startswith(unit_id + "-")]
    return found + unit_markers(out_dir).temporaries(unit_id)   # the marker's .tmp(.<host>.<pid>) files


def _marker(data: bytes, source: str) -> Dict[str, Any]:
    return fmt.parse_json(data, source, "unit marker")


def unit_markers(out_dir: str) -> UnitRecords:
    """The unit markers ``units/<unit_id>.json`` of the output ``out_dir`` (a path or URL)."""
    return UnitRecords(f"{out_dir.rstrip('/')}/{fmt.UNITS_DIR}", load=_marker, ignore=(fmt.PLAN_NAME,))


def _files_agree(out_dir: str, unit_id: str, record: Dict[str, Any]) -> bool:
    """Whether the unit's files match the marker's sizes and index checksums."""
    for shard in record["shards"]:
        tokens = os.path.join(out_dir, shard["tokens_file"])
        index = os.path.join(out_dir, shard["index_file"])
        if (os.path.getsize(tokens) != fmt.TOKEN_WIDTH * shard["tokens"]
                or os.path.getsize(index) != shard["index_bytes"]
                or fmt.sha256_file(index) != shard["index_sha256"]
                or fmt.read_header(index).tokens_sha256.hex() != shard["sha256"]):   # as the index records
            return False
    return record["unit_id"] == unit_id


def committed_record(out_dir: str, unit_id: str) -> Optional[Dict[str, Any]]:
    """The unit's marker record when the unit is committed and its files match
    the recorded sizes and index checksums; None otherwise."""
    return unit_markers(out_dir).committed(
        [unit_id], check=lambda uid, record, source: _files_agree(out_dir, uid, record)).get(unit_id)


def encode_unit(unit, *, out_dir: str, corpus: Corpus, shard_tokens: int,
                eos_id: Optional[int], bos_id: Optional[int], fingerprint: str,
                tokenizer_path: str, dispatched: bool = False, overlap: bool = True,
                threads: int = 1, cache_bytes: Optional[int] = None) -> Dict[str, Any]:
    """Encode one work unit into ``out_dir/shards`` and commit it with its marker.

    Returns the marker record: unit id, shard entries (names, counts,
    checksums), documents, tokens, rows read, UTF-8 bytes read, skipped rows
    by reason (plus a few example messages).  Token data never leaves this
    process.  Takes ``locks/<unit_id>.lock`` while working.

    ``corpus``: the reading options (:meth:`~ube_stream.runs.Corpus.reading`: column, text mode,
    on-error rule, largest document; the unit names its file).  The tokenizer: ``tokenizer_path`` loaded once per process
    (:func:`~ube_stream.executors.worker_state`) and checked against ``fingerprint``.  ``dispatched``: see the module.
    ``overlap``: read ahead and write behind the encoder in two threads (:mod:`.overlap`); the
    driver turns it off when the workers fill every core.  ``threads``: encoder threads over the unit's
    batches (:class:`~.overlap.OrderedMap`; the shards do not depend on it), for a run with more idle
    cores than units (one large compressed file).  ``cache_bytes``: the chunk-cache bound of each
    encoding thread (set once per process; ``None``: the tokenizer's own).
    """
    from .. import readers
    from ..readers.batch import drop_bad_documents

    unit_id = unit.unit_id
    tokenizer = worker_state(worker_tokenizer, tokenizer_path, fingerprint)
    if cache_bytes is not None and tokenizer.cache_bytes != cache_bytes:
        tokenizer.set_cache(bytes=cache_bytes)   # once per process: a later unit keeps the warm caches
    lock = FileLock(os.path.join(out_dir, fmt.LOCKS_DIR, unit_id + ".lock"), f"unit {unit_id}",
                    fix="two writers cannot share an output directory: write to another directory")
    markers = unit_markers(out_dir)
    tmp_suffix = fmt.TMP_SUFFIX + (f".{HOST}.{os.getpid()}" if dispatched else "")
    with (_dispatched_lock(lock) if dispatched else lock):
        record = committed_record(out_dir, unit_id)
        if record is not None:   # committed by another writer meanwhile
            return record
        for path in leftovers(out_dir, unit_id):
            os.unlink(path)
        markers.uncommit(unit_id)        # a marker whose files do not agree with it
        skips = readers.SkipCounter()
        special_text = SpecialTextCounter(tokenizer.special_tokens)
        shards = _UnitShards(out_dir, unit_id, shard_tokens, fingerprint, tmp_suffix)
        documents = tokens = nbytes = 0
        path = unit.source.path

        invalid = readers.SkipCounter()   # the encoders' and parsers' skips; the reader's thread counts in `skips`

        def encode(data, offsets):
            return tokenizer.encode_utf8_batch(data, offsets, bos_id=bos_id, eos_id=eos_id)

        def encode_batch(batch, data, offsets):
            dropped = None
            try:   # the kernel writes BOS/EOS around each document: no copy of the ids
                ids, token_offsets = encode(data, offsets)
            except InvalidTextError as exc:
                dropped = readers.SkipCounter()
                data, offsets, (ids, token_offsets) = drop_bad_documents(
                    exc, batch, data, offsets, encode, path, corpus.on_error, dropped)
            return batch, data, offsets, ids, token_offsets, dropped

        # One encoder: the read-ahead thread reads and parses.  Several (one large compressed file): it only
        # reads (decompresses), and the encoder threads parse the blocks too, so the one serial stage is
        # the decompression (docs/DESIGN.md, "Work units").
        parse_ahead = threads == 1

        def parse(block, parsed=None):
            return [(batch, *batch.utf8()) for batch in block.parse(parsed)]

        def encode_block(item):   # in an encoder thread (threads > 1), in any order
            parsed = None if parse_ahead else readers.SkipCounter()
            batches = item if parse_ahead else parse(item, parsed)
            return [encode_batch(*batch) for batch in batches], parsed

        def write(ids, token_offsets, rows, data, offsets):   # in the write-behind thread, in batch order
            special_text.add(data, offsets)
            shards.add(ids, token_offsets, rows, unit.source.source_id)
            kill_point(out_dir, unit_id)

        blocks = corpus.blocks(unit, skips=skips)
        running = UnitProgress(unit_id)   # the progress of a long unit while it runs
        try:   # reading runs a block ahead of the encoder(s) and writing a batch behind them (see .overlap)
            with ReadAhead(blocks, prepare=parse if parse_ahead else None, threaded=overlap) as ahead, \
                    OrderedMap(ahead, encode_block, threads) as encoded, WriteBehind(threaded=overlap) as behind:
                for results, parsed in encoded:
                    if parsed is not None:
                        invalid.merge(parsed)
                    for batch, data, offsets, ids, token_offsets, dropped in results:
                        if dropped is not None:
                            invalid.merge(dropped)
                        if len(token_offsets) <= 1:
                            continue
                        behind.submit(write, ids, token_offsets, batch.rows, data, offsets)
                        documents += len(token_offsets) - 1
                        tokens += int(token_offsets[-1])
                        nbytes += int(offsets[-1] - offsets[0])
                        running.add(len(token_offsets) - 1, int(offsets[-1] - offsets[0]), int(token_offsets[-1]))
                behind.wait()
            shard_records = shards.finish()
        except OSError as exc:   # disk full, quota, read-only output: say where and what to do
            where = getattr(exc, "filename", None)
            if where is not None and not os.path.abspath(where).startswith(os.path.abspath(out_dir)):
                raise                # an input file's error, not the output's
            translated = storage_error(exc, where or os.path.join(out_dir, fmt.SHARDS_DIR))
            if translated is exc:
                raise
            raise translated from None
        finally:
            shards.abort()
        skips.merge(invalid)
        record = {
            "unit_id": unit_id, "source_id": unit.source.source_id, "row_start": unit.row_start,
            "row_stop": unit.row_stop, "documents": documents, "tokens": tokens,
            "rows_read": documents + skips.total, "bytes": nbytes, "skipped": dict(skips.counts),
            "skip_examples": [e.message for e in skips.examples], "shards": shard_records,
            "special_text": dict(sorted(special_text.counts.items())),
        }
        markers.commit(unit_id, record, unique=dispatched)   # the unit's commit point
    return record


@contextlib.contextmanager
def _dispatched_lock(lock: FileLock) -> Iterator[None]:
    """Hold a unit lock for a unit a cluster driver dispatched (see the module):
    a holder on another host is an abandoned attempt, which does not stop this
    one (each writes its own temporary files; the lock is then not held); a
    live holder here is waited for, up to ``DISPATCHED_LOCK_WAIT_S``."""
    deadline = time.monotonic() + DISPATCHED_LOCK_WAIT_S
    while True:
        try:
            lock.acquire()
            break
        except LockError:
            holder = lock_holder(lock.path)
            if holder and holder.get("host") != HOST:
                break
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)
    try:
        yield
    finally:
        lock.release()


def encode_unit_star(task: Dict[str, Any]) -> Dict[str, Any]:
    """The unit function executors map: ``encode_unit(**task)``."""
    return encode_unit(**task)
