"""Token shards: corpus -> uint32 token files with a memory-mapped index.

Write with :func:`encode_corpus` (``ube encode``)::

    manifest = encode_corpus(["corpus/"], tokenizer="tok.json", output="shards/", workers=8)

and read with :class:`TokenShards`::

    ds = TokenShards("shards/")
    ds.doc(0)            # zero-copy uint32 view over the memory map (EOS included)
    ds.decode_doc(0)     # the source text, without the EOS/BOS encoding added
    ds.source(0)         # (path, row) the document came from

Directory layout and index format (version 1): see :mod:`ube_stream._shard_format`
and the project's shard format spec.  ``MANIFEST.json`` is written last,
atomically: a directory without it is unfinished.

**Work and determinism.** Units are (input file, row range) cut by a fixed
``unit_rows`` (uncompressed JSONL/text also by ``unit_bytes``, default 16 MiB,
shared out evenly over each file so that its units are about equal);
one pure function (:func:`~ube_stream._shard_writer.encode_unit`)
per unit writes the unit's shards ``<unit_id>-<k:04d>`` and then its marker
``units/<unit_id>.json``, under ``locks/<unit_id>.lock``.  The output is
byte-identical for any ``workers``, any ``rank``/``world_size`` split, and
after any number of kills and reruns: a rerun skips committed units and redoes
the others from scratch.  ``units/_plan.json`` records the options of an
unfinished run so that a rerun with other options or another tokenizer stops
instead of mixing shards, once a unit is committed; a plan under which no unit
was committed (a failed first run) is replaced, saying so on one line.

**Executors.** Units run on an executor (:mod:`ube_stream.executors`):
``executor="local"`` (default) is a process pool of ``workers`` on this
machine; ``executor="ray"`` makes every unit a Ray task (``ray_address``:
an existing cluster, e.g. ``"auto"``; default: connect to the Ray already
initialised in this process, else start a local one).  A Ray task reads its
input and writes its shards and marker straight to ``output``, which must
therefore be one path every node sees (shared storage); each worker loads
``output/tokenizer.json`` once.  Only the small unit records travel through
Ray.  A worker that dies (a killed process, a lost node) has its unit
retried; an error in the data (a corrupt file) stops the run at once with
the same message as locally.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from typing import Any, Dict, List, Optional

import numpy as np

from .._version import __version__
from ..errors import InputError, InvalidTextError, ShardFormatError
from ..executors import Executor, executor_class, import_ray, usable_cores, will_fork, worker_count
from ..readers.batch import SkipCounter
from ..readers.inputs import skipped_files_lines
from ..runs.corpus import Corpus
from ..runs.engine import run_units, seed_tokenizer
from ..runs.lock import FileLock, lock_holder
from ..runs.records import RunPlan, differences, list_names, remove_files, remove_tree, shown_differences
from ..storage import (
    atomic_write_bytes,
    atomic_write_json,
    fsync_dir,
    is_url,
    join,
    local_path,
)
from ..storage import exists as storage_exists
from ..tokenizer import as_tokenizer
from ..tokenizer.core import check_cache_bound
from . import index_format as fmt
from . import remote as remote_store
from .overlap import unit_threads
from .reader import Shard, TokenShards
from .writer import committed_record, encode_unit, encode_unit_star, unit_markers

__all__ = ["encode_corpus", "encode_unit", "TokenShards", "Shard", "EncodeSummary",
           "DEFAULT_SHARD_TOKENS"]

DEFAULT_SHARD_TOKENS = 1 << 28          # 1 GiB of uint32 per shard at most (plus one document)
DEFAULT_EOS_TOKEN = "<|endoftext|>"
MEMORY_SPILL_NAME = "in-memory.arrows"   # in-memory inputs, written under units/ (see encode_corpus)
_KNOWN_ENTRIES = {fmt.MANIFEST_NAME, fmt.TOKENIZER_NAME, fmt.UNITS_DIR, fmt.SHARDS_DIR, fmt.LOCKS_DIR}
_TEMP_PREFIXES = (fmt.MANIFEST_NAME + fmt.TMP_SUFFIX, fmt.TOKENIZER_NAME + fmt.TMP_SUFFIX)
_ONE_WRITER = "two writers cannot share an output directory: write to another directory"


@dataclasses.dataclass
class EncodeSummary:
    """What a call of :func:`encode_corpus` did (pass one as ``summary=``)."""

    units_total: int = 0
    units_done: int = 0            # encoded by this call
    units_skipped: int = 0         # already committed before this call
    documents: int = 0             # in the finished directory (or in this call's units)
    tokens: int = 0
    shards: int = 0
    bytes_read: int = 0            # UTF-8 bytes of the documents this call encoded
    skipped: Dict[str, int] = dataclasses.field(default_factory=dict)
    skip_examples: List[str] = dataclasses.field(default_factory=list)
    skipped_files: List[Dict[str, str]] = dataclasses.field(default_factory=list)   # left out by directory walks
    special_text: Dict[str, int] = dataclasses.field(default_factory=dict)   # special-token text in documents
    wall_seconds: float = 0.0
    finalized: bool = False
    already_complete: bool = False

    def format(self) -> str:
        if self.already_complete:
            return (f"already complete: {self.documents:,} documents, {self.tokens:,} tokens, "
                    f"{self.shards:,} shards; nothing to do")
        rate = self.bytes_read / 1e6 / self.wall_seconds if self.wall_seconds > 0 else 0.0
        lines = [
            f"units          {self.units_done:,} encoded, {self.units_skipped:,} already committed "
            f"(of {self.units_total:,})",
            f"documents      {self.documents:,}",
            f"tokens         {self.tokens:,}",
            f"shards         {self.shards:,}",
            f"throughput     {rate:,.2f} MB/s ({self.bytes_read / 1e6:,.1f} MB in {self.wall_seconds:.2f} s)",
            "skipped rows   " + (", ".join(f"{k}: {v:,}" for k, v in sorted(self.skipped.items())) or "none"),
        ]
        lines += [f"  e.g. {m}" for m in self.skip_examples[:3]]
        lines += skipped_files_lines(self.skipped_files)
        if self.special_text:
            found = ", ".join(f"{t} {n:,}" for t, n in sorted(self.special_text.items()))
            lines.append(f"special text   {sum(self.special_text.values()):,} occurrences of special-token text "
                         f"in documents ({found}), encoded as plain text: no document was split")
        else:
            lines.append("special text   none (no document holds a special token's text)")
        if not self.finalized:
            lines.append("not finalized: MANIFEST.json is written when every rank has run (finalize=True)")
        return "\n".join(lines)


def _special_ids(tok, eos: bool, bos: bool, eos_token: Optional[str], bos_token: Optional[str]):
    def lookup(text: str, flag: str) -> int:
        if text not in tok.special_tokens:
            raise ValueError(f"{flag} {text!r} is not a special token of this tokenizer (it has "
                             f"{list(tok.special_tokens) or 'none'}); name one of those, or train with "
                             f"special_tokens=[{text!r}]")
        return tok.special_tokens[text]

    eos_name = (eos_token or DEFAULT_EOS_TOKEN) if eos else None
    if bos and not bos_token:
        raise ValueError("bos=True needs bos_token naming a special token")
    bos_name = bos_token if bos else None
    eos_id = lookup(eos_name, "eos_token") if eos_name is not None else None
    bos_id = lookup(bos_name, "bos_token") if bos_name is not None else None
    return eos_name, eos_id, bos_name, bos_id


def _replace_unstarted_plan(out: str, plan: Dict[str, Any], show_progress: bool,
                            own_lock: Optional[str] = None) -> None:
    """A plan with other settings that committed no unit is replaced (a failed
    first run, e.g. a wrong ``column``, must not block its folder): its
    leftovers (shard files, the tokenizer file, unit temp files) go, and a
    line says so.  Kept when a unit is committed (the plan check then refuses,
    naming the differences), or, on a local directory, when another writer
    may still run there (a lock held other than ``own_lock``).  An object store
    has no locks: there the committed markers decide."""
    recorded = _run_plan(out).recorded()
    different = differences(recorded, plan) if recorded is not None else []
    if not different or unit_markers(out).any_recorded():
        return
    locks = join(out, fmt.LOCKS_DIR)
    if not is_url(out) and any(lock_holder(join(locks, name)) is not None
                               for name in list_names(locks) or [] if join(locks, name) != own_lock):
        return
    doomed = [join(out, fmt.SHARDS_DIR, n) for n in list_names(join(out, fmt.SHARDS_DIR)) or []]
    doomed += [join(out, fmt.UNITS_DIR, n) for n in list_names(join(out, fmt.UNITS_DIR)) or []
               if n != MEMORY_SPILL_NAME]
    remove_files(doomed + [join(out, fmt.TOKENIZER_NAME)])
    if show_progress:
        print(f"{out}: replacing an unfinished run that committed no unit "
              f"({shown_differences(recorded or {}, plan, different)})", file=sys.stderr)


def _check_entries(out: str, names: Optional[List[str]]) -> None:
    """A shard directory holds only its own entries."""
    foreign = sorted(n for n in set(names or []) - _KNOWN_ENTRIES if not n.startswith(_TEMP_PREFIXES))
    if foreign:
        raise ShardFormatError(f"{out}: not a shard directory (it holds {', '.join(foreign[:5])}"
                               f"{', ...' if len(foreign) > 5 else ''}); choose a new or empty output directory")


def _check_output_dir(out: str) -> None:
    if not os.path.isdir(out):
        if os.path.exists(out):
            raise ShardFormatError(f"{out}: exists and is not a directory; choose another output directory")
        return
    _check_entries(out, os.listdir(out))


def _cleanup_finished(out: str) -> None:
    """Remove what a finished directory must not hold (after MANIFEST.json).

    Every unit is committed by then, so no writer has work left: the lock
    files go too, whichever host left them (a rank process still exiting
    finds its lock gone and carries on)."""
    remove_tree(join(out, fmt.UNITS_DIR))
    remove_tree(join(out, fmt.LOCKS_DIR))
    remove_files([join(out, n) for n in list_names(out) or [] if n.startswith(_TEMP_PREFIXES)])


def encode_corpus(inputs, *, tokenizer, output, workers: Optional[int] = None, eos: bool = True,
                  bos: bool = False, eos_token: Optional[str] = None, bos_token: Optional[str] = None,
                  shard_tokens: int = DEFAULT_SHARD_TOKENS, unit_rows: Optional[int] = None,
                  unit_bytes: Optional[int] = None,
                  column: str = "text", text_mode: str = "line", on_error: str = "raise",
                  format: Optional[str] = None, split: Optional[str] = None, show_progress: bool = True,
                  rank: Optional[int] = None, world_size: Optional[int] = None,
                  finalize: bool = False, summary: Optional[EncodeSummary] = None,
                  executor: str | Executor = "local", ray_address: Optional[str] = None,
                  max_document_bytes: Optional[int] = None, cache_bytes: Optional[int] = None) -> Dict[str, Any]:
    """Encode a corpus into a token shard directory; returns the MANIFEST dict.

    ``inputs``: files, directories or globs (see :mod:`ube_stream.readers`;
    ``format`` forces the format of every file, ``split`` picks the split of a
    ``DatasetDict`` folder), or in-memory data, as :func:`~ube_stream.train`
    takes it: a ``datasets.Dataset`` / streaming ``IterableDataset`` (a
    ``DatasetDict`` with ``split``), a pyarrow Table / Array, or an iterable of
    ``str`` (or of dicts holding ``column``).  In-memory data is first written,
    a batch at a time (bounded memory), to one Arrow stream file
    ``units/in-memory.arrows`` inside ``output`` (removed when the directory
    is finished); that file is then cut into units of ``unit_rows`` rows like
    any source, so the shards are byte-identical for any ``workers``.  Its
    MANIFEST source is named ``<in-memory TYPE>`` and its rows number the
    documents written.  A rerun must pass the same data (a changed size is
    refused); ``rank``/``world_size`` need files.
    ``unit_rows`` / ``unit_bytes``: the unit plan (defaults
    ``readers.DEFAULT_UNIT_ROWS`` / ``DEFAULT_UNIT_BYTES``; bytes cut only
    uncompressed JSONL/text files), recorded in the plan and MANIFEST.
    ``tokenizer``: a tokenizer file path or a :class:`~ube_stream.Tokenizer`.
    Every document gets ``eos_token`` (default ``<|endoftext|>``) appended
    unless ``eos=False``, and ``bos_token`` prepended with ``bos=True``.

    Resumable: rerunning the same call skips committed units; on a finished
    directory it does nothing.  With ``rank``/``world_size`` only the units
    with ``index % world_size == rank`` are encoded, and MANIFEST.json is
    written only with ``finalize=True`` once every unit is committed (else
    the missing units are listed in a :class:`ShardFormatError`); without a
    rank, every unit is encoded and the directory finalized.  Returns the
    manifest, or ``{}`` for a rank that does not finalize.

    ``cache_bytes``: each encoding thread's chunk-cache bound in every worker
    (:meth:`~ube_stream.Tokenizer.set_cache`; default: the tokenizer's,
    128 MiB); the shards do not depend on it.

    ``executor``: ``"local"`` (a pool of ``workers`` processes) or ``"ray"``
    (``ray_address``, e.g. ``"auto"``; ``workers`` then only sizes a Ray
    started here), or an :class:`~ube_stream.executors.Executor`.  The output
    does not depend on it.
    """
    from .. import readers

    started = time.perf_counter()
    summary = summary if summary is not None else EncodeSummary()
    corpus = Corpus(inputs, column=column, text_mode=text_mode, format=format, split=split, on_error=on_error,
                    unit_rows=unit_rows or readers.DEFAULT_UNIT_ROWS,
                    unit_bytes=unit_bytes or readers.DEFAULT_UNIT_BYTES, even_bytes=True,
                    max_document_bytes=max_document_bytes).check()
    if cache_bytes is not None:
        check_cache_bound(cache_bytes, name="cache_bytes")
    if not isinstance(shard_tokens, int) or shard_tokens < 1:
        raise ValueError(f"shard_tokens must be a positive integer, got {shard_tokens!r}")
    if (rank is None) != (world_size is None):
        raise ValueError("rank and world_size go together: give both or neither")
    if world_size is not None and not (isinstance(world_size, int) and world_size >= 1
                                   and rank is not None and 0 <= rank < world_size):
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank!r}, world_size={world_size!r}")
    if not isinstance(executor, Executor) and executor not in ("local", "ray"):
        raise ValueError(f"unknown executor {executor!r}; expected 'local' or 'ray'")
    if executor == "ray":
        import_ray()   # says how to install it, before anything is written
    workers = worker_count(workers)
    out = local_path(output)
    remote = is_url(out)
    if remote:
        out = out.rstrip("/")
    else:
        out = os.path.abspath(out)

    tok = as_tokenizer(tokenizer)
    fingerprint = tok.fingerprint   # computed once: each call hashes the canonical tokenizer
    eos_name, eos_id, bos_name, bos_id = _special_ids(tok, eos, bos, eos_token, bos_token)
    labels: Dict[str, str] = {}
    memory_skips = readers.SkipCounter()
    if corpus.in_memory:
        if world_size is not None:
            raise ValueError("in-memory inputs cannot be shared between ranks (each rank's call holds its own "
                             "data); write them to files (e.g. Dataset.to_parquet) and encode those with "
                             "rank and world_size")
        spill = join(out, fmt.UNITS_DIR, MEMORY_SPILL_NAME)
        if not remote:
            _check_output_dir(out)
            os.makedirs(os.path.join(out, fmt.UNITS_DIR), exist_ok=True)
        labels[spill] = readers.memory_name(inputs)
        readers.spill_to_arrow(inputs, spill, column=column, on_error=on_error, skips=memory_skips, split=split,
                               unit_rows=corpus.unit_rows)
        corpus = dataclasses.replace(corpus, inputs=[spill], column="text", split=None)
    skipped_files: List[Any] = []
    sources = corpus.sources(skipped_files)
    summary.skipped_files = [f.to_dict() for f in skipped_files]
    units = corpus.units(sources)
    plan: Dict[str, Any] = {
        "format": fmt.MANIFEST_FORMAT, "version": fmt.MANIFEST_VERSION,
        "tokenizer": {"file": fmt.TOKENIZER_NAME, "fingerprint": fingerprint, "substrate": tok.substrate,
                      "vocab_size": tok.vocab_size},
        "special_ids": {"eos": eos_id, "bos": bos_id},
        "options": {"eos_token": eos_name, "bos_token": bos_name, "shard_tokens": shard_tokens,
                    "unit_rows": corpus.unit_rows, "unit_bytes": corpus.unit_bytes, "unit_split": "even",
                    "column": corpus.column, "text_mode": corpus.text_mode, "on_error": corpus.on_error,
                    "format": corpus.format, "split": corpus.split,
                    # recorded when set, so plans of runs without it stay the same
                    **({"max_document_bytes": corpus.max_document_bytes} if corpus.max_document_bytes else {}),
                    **({"arrow_units": "batches"} if any(s.format in readers.ARROW_FORMATS for s in sources) else {})},
        "sources": [{"source_id": s.source_id, "path": labels.get(s.path, s.path), "size": s.size,
                     "format": s.format} for s in sources],
        "skipped_files": summary.skipped_files,
    }
    if labels:
        plan["sources"][0]["skipped_in_memory"] = dict(memory_skips.counts)
        summary.skip_examples = [e.message for e in memory_skips.examples]
    summary.units_total = len(units)
    if remote:
        _check_entries(out, remote_store.remote_entries(out))
    else:
        _check_output_dir(out)
    manifest_path = join(out, fmt.MANIFEST_NAME)
    if storage_exists(manifest_path):
        return _already_complete(out, manifest_path, plan, summary, show_progress)

    if not remote:
        for sub in (fmt.SHARDS_DIR, fmt.UNITS_DIR, fmt.LOCKS_DIR):
            os.makedirs(os.path.join(out, sub), exist_ok=True)
    run_lock = None if remote else FileLock(
        os.path.join(out, fmt.LOCKS_DIR, f"rank-{rank or 0}.lock"),
        f"rank {rank or 0}" + (f" of {world_size}" if world_size else " (a whole-corpus run)"), fix=_ONE_WRITER)
    with run_lock or contextlib.nullcontext():   # an object store has no locks (see .remote)
        if storage_exists(manifest_path):   # finished by the run that held this lock while we planned
            return _already_complete(out, manifest_path, plan, summary, show_progress)
        keyed = dict(plan, units=[u.unit_id for u in units])
        _replace_unstarted_plan(out, keyed, show_progress, run_lock.path if run_lock else None)
        _check_or_write_plan(out, keyed, tok)
        mine = [u for i, u in enumerate(units) if world_size is None or i % world_size == rank]
        committed = _committed(out, [u.unit_id for u in mine])
        pending = [u for u in mine if u.unit_id not in committed]
        summary.units_skipped = len(mine) - len(pending)
        tokenizer_path = join(out, fmt.TOKENIZER_NAME)
        # units run in this process (one worker) use the tokenizer in hand, not a second load of its file
        seed_tokenizer(tok, tokenizer_path)
        overlap = _overlap(executor, workers, len(pending))
        options = dict(out_dir=out, corpus=corpus.reading(), shard_tokens=shard_tokens, eos_id=eos_id,
                       bos_id=bos_id, fingerprint=fingerprint, tokenizer_path=tokenizer_path,
                       dispatched=not remote and executor_class(executor).multi_host, overlap=overlap,
                       threads=unit_threads(executor, workers, len(pending)), cache_bytes=cache_bytes)
        _run_units([dict(options, unit=u) for u in pending], tok, executor, workers, ray_address, show_progress,
                   _adder(summary), fn=remote_store.encode_unit_remote if remote else encode_unit_star)
        summary.wall_seconds = time.perf_counter() - started
        if world_size is not None and not finalize:
            return {}
        # finalized under the rank lock: a second run of this rank waits for MANIFEST.json (then finds the
        # directory complete) instead of resuming from the unit records while this run's cleanup removes them
        return _finished(_finalize(out, plan, units, world_size), summary, started)


def _overlap(executor, workers: int, tasks: int) -> bool:
    """Whether units read ahead and write behind in threads (:mod:`.overlap`): only
    where the local workers leave a core idle (a Ray task holds one CPU)."""
    return executor == "local" and min(workers, max(tasks, 1)) < usable_cores()


def _adder(summary: EncodeSummary):
    """The callback that adds a finished unit's record to ``summary``."""
    def add(record: Dict[str, Any]) -> None:
        summary.units_done += 1
        summary.bytes_read += record["bytes"]
        summary.documents += record["documents"]
        summary.tokens += record["tokens"]
        summary.shards += len(record["shards"])
        for reason, n in record["skipped"].items():
            summary.skipped[reason] = summary.skipped.get(reason, 0) + n
        summary.skip_examples = sorted(set(summary.skip_examples) | set(record["skip_examples"]))[:5]
        for text, n in record.get("special_text", {}).items():
            summary.special_text[text] = summary.special_text.get(text, 0) + n
    return add


def _finished(manifest: Dict[str, Any], summary: EncodeSummary, started: float) -> Dict[str, Any]:
    summary.finalized = True
    totals = manifest["totals"]
    summary.documents, summary.tokens, summary.shards = totals["documents"], totals["tokens"], totals["shards"]
    summary.skipped = dict(totals["skipped"])
    summary.special_text = dict(totals.get("special_text", {}))
    summary.wall_seconds = time.perf_counter() - started
    return manifest


def _already_complete(out: str, manifest_path: str, plan: Dict[str, Any], summary: EncodeSummary,
                      show_progress: bool) -> Dict[str, Any]:
    manifest = fmt.read_json(manifest_path, "MANIFEST.json")
    keys = ("source_id", "path", "size", "format")
    recorded = dict(manifest, sources=[{k: s[k] for k in keys + ("skipped_in_memory",) if k in s}
                                       for s in manifest.get("sources", [])])
    different = differences(recorded, {k: v for k, v in plan.items() if k != "format"})
    if different:
        raise ShardFormatError(
            f"{out}: is a finished shard directory made with other settings ({', '.join(different)} differ: "
            f"another tokenizer, other options or other inputs); write to a new output directory, or delete {out} "
            f"to re-encode")
    _cleanup_finished(out)   # a run killed after MANIFEST.json but before the cleanup
    totals = manifest["totals"]
    summary.already_complete = summary.finalized = True
    summary.documents, summary.tokens, summary.shards = totals["documents"], totals["tokens"], totals["shards"]
    summary.special_text = dict(totals.get("special_text", {}))
    if show_progress:
        print(f"{out}: already complete ({totals['documents']:,} documents, {totals['tokens']:,} tokens, "
              f"{totals['shards']:,} shards, same tokenizer and options); nothing to do", file=sys.stderr)
    return manifest


def _run_plan(out: str) -> RunPlan:
    return RunPlan(join(out, fmt.UNITS_DIR, fmt.PLAN_NAME), read=lambda path: fmt.read_json(path, "run plan"))


def _check_or_write_plan(out: str, plan: Dict[str, Any], tok) -> None:
    """One run plan for all ranks (:class:`~ube_stream.runs.records.RunPlan`:
    created exclusively, the first rank's call wins, then compared by every
    rank, including the one that created it), so ranks started together with
    different options can never both write.  ``tok``'s file is serialised only
    when the output lacks it."""
    recorded, different = _run_plan(out).create_or_compare(plan)
    if different:
        raise ShardFormatError(
            f"{out}: holds an unfinished encoding run with other settings ({', '.join(different)} differ: "
            f"{shown_differences(recorded, plan, different)}); rerun it with its own settings (the recorded "
            f"values above), or write to a new output directory (or delete {out})")
    tokenizer_path = join(out, fmt.TOKENIZER_NAME)
    if not storage_exists(tokenizer_path):
        atomic_write_bytes(tokenizer_path, tok.to_json().encode("utf-8"), unique=True)


def _committed(out: str, unit_ids: List[str]) -> Dict[str, Dict[str, Any]]:
    """``{unit_id: marker record}`` of the committed units among ``unit_ids``."""
    if is_url(out):
        return remote_store.remote_committed_records(out, unit_ids)
    return {unit_id: record for unit_id in unit_ids
            if (record := committed_record(out, unit_id)) is not None}


PREWARM_BYTES = 4 << 20   # text the driver encodes before forking its workers (_warm_cache)
PREWARM_UNITS = 8         # ... from the first documents of this many units


def _warm_cache(tok, tasks, budget: int) -> None:
    """Encode the first documents of the first ``PREWARM_UNITS`` units, ``budget``
    bytes of text in all, in this process before its workers are forked: the
    forked workers inherit the encoder's tables and a chunk cache that already
    holds the corpus's most frequent chunks, where each would otherwise warm a
    cold one of its own (ids are a pure function of the chunk: the cache changes
    no output).  The units read these documents again; a unit whose start cannot
    be read is left to report that itself.  Local line files only: reading an
    object store or a Parquet/Arrow file here would start its library's threads
    in the process about to fork."""
    from ..readers.formats import COLUMNAR_FORMATS

    tok.encode_utf8_batch(np.frombuffer(b" ", np.uint8), np.array([0, 1], np.int64))   # the encoder's tables
    sample = [task for task in tasks[:PREWARM_UNITS]
              if not is_url(task["unit"].source.path) and task["unit"].source.format not in COLUMNAR_FORMATS]
    share = budget // max(len(sample), 1)
    for task in sample:
        left = share
        batches = task["corpus"].batches(task["unit"], skips=SkipCounter())
        try:
            for batch in batches:
                data, offsets = batch.utf8()
                # the documents that hold the rest of the share (at least one)
                n = min(max(int(np.searchsorted(offsets, offsets[0] + left, side="left")), 1), len(offsets) - 1)
                tok.encode_utf8_batch(data, offsets[:n + 1])
                left -= int(offsets[n] - offsets[0])
                if left <= 0:
                    break
        except (InputError, InvalidTextError, OSError):
            pass
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()


def _run_units(tasks, tok, executor, workers: int, ray_address: Optional[str], show_progress: bool,
               add, fn=encode_unit_star) -> None:
    """Run the unit tasks on the executor, calling ``add(record)`` as units
    finish (order does not matter: names come from unit ids)."""
    from ..progress import DocumentProgress, planned_rows

    if not tasks:
        return
    # (its bar starts with the first report: none exists while the pool forks)
    bar = DocumentProgress(desc="encoding", expected_rows=planned_rows([t["unit"] for t in tasks]),
                           enabled=show_progress, units=[t["unit"] for t in tasks])

    def on_result(record: Dict[str, Any]) -> None:
        bar.add(documents=record["documents"], skipped=record["rows_read"] - record["documents"],
                    utf8_bytes=record["bytes"], tokens=record["tokens"], unit_id=record.get("unit_id"))
        add(record)

    if executor == "local" and workers > 1 and len(tasks) > 1 and will_fork():
        # forked workers inherit the tokenizer (seeded in worker_state): its tables and a warm cache, made here
        _warm_cache(tok, tasks, PREWARM_BYTES)
    try:
        run_units(fn, tasks, executor=executor, workers=workers, ray_address=ray_address, on_result=on_result)
    finally:
        bar.close()


def _finalize(out: str, plan: Dict[str, Any], units, world_size: Optional[int]) -> Dict[str, Any]:
    """Write MANIFEST.json from the unit markers once every unit is committed:
    unlisted files under ``shards/`` (leftovers of redone attempts) are
    deleted, MANIFEST.json written last (the directory's commit point; locally
    under the finalize lock), then the run's files removed."""
    committed = _committed(out, [u.unit_id for u in units])
    missing = [f"{u.unit_id} ({u.source.path} rows {u.row_start}..." + (f", rank {i % world_size}" if world_size
                                                                          else "") + ")"
               for i, u in enumerate(units) if u.unit_id not in committed]
    if missing:
        shown = "; ".join(missing[:20]) + (f"; and {len(missing) - 20} more" if len(missing) > 20 else "")
        raise ShardFormatError(f"{out}: cannot finalize: {len(missing)} of {len(units)} units are not committed: "
                               f"{shown}. Run the missing ranks (the same call with their rank), then "
                               f"finalize=True again")
    remote = is_url(out)
    manifest_path = join(out, fmt.MANIFEST_NAME)
    with contextlib.nullcontext() if remote else FileLock(join(out, fmt.LOCKS_DIR, "finalize.lock"),
                                                          "finalization", fix=_ONE_WRITER):
        if remote or not os.path.exists(manifest_path):
            manifest = build_manifest(plan, [committed[u.unit_id] for u in units])
            listed = {os.path.basename(s[f]) for s in manifest["shards"] for f in ("tokens_file", "index_file")}
            shards_dir = join(out, fmt.SHARDS_DIR)
            remove_files([join(shards_dir, n) for n in list_names(shards_dir) or [] if n not in listed])
            if not remote:
                fsync_dir(shards_dir)
            atomic_write_json(manifest_path, manifest)
            if not remote:
                fsync_dir(out)
        else:
            manifest = fmt.read_json(manifest_path, "MANIFEST.json")
    _cleanup_finished(out)
    return manifest


def build_manifest(plan: Dict[str, Any], records: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The MANIFEST dict from the run plan and every unit's record (in unit order)."""
    sources = []
    totals: Dict[str, Any]
    totals = {"documents": 0, "tokens": 0, "rows_read": 0, "skipped": {}, "shards": 0, "special_text": {}}
    for s in plan["sources"]:
        before = dict(s.get("skipped_in_memory", {}))   # items of an in-memory input skipped before the spill
        sources.append(dict(s, rows_read=sum(before.values()), documents=0, skipped=before))
        totals["rows_read"] += sum(before.values())
        for reason, n in before.items():
            totals["skipped"][reason] = totals["skipped"].get(reason, 0) + n
    shards = []
    for record in sorted(records, key=lambda r: r["unit_id"]):
        src = sources[record["source_id"]]
        src["rows_read"] += record["rows_read"]
        src["documents"] += record["documents"]
        for reason, n in record["skipped"].items():
            src["skipped"][reason] = src["skipped"].get(reason, 0) + n
            totals["skipped"][reason] = totals["skipped"].get(reason, 0) + n
        totals["documents"] += record["documents"]
        totals["tokens"] += record["tokens"]
        totals["rows_read"] += record["rows_read"]
        for text, n in record.get("special_text", {}).items():
            totals["special_text"][text] = totals["special_text"].get(text, 0) + n
        for shard in record["shards"]:
            shards.append({k: shard[k] for k in ("name", "unit_id", "tokens_file", "index_file", "documents",
                                                 "tokens", "sha256", "index_sha256")})
    for src in sources:
        src["skipped"] = dict(sorted(src["skipped"].items()))
    totals["skipped"] = dict(sorted(totals["skipped"].items()))
    totals["special_text"] = dict(sorted(totals["special_text"].items()))
    totals["shards"] = len(shards)
    return {"format": fmt.MANIFEST_FORMAT, "version": fmt.MANIFEST_VERSION, "ube_stream_version": __version__,
            "dtype": "uint32", "tokenizer": plan["tokenizer"], "special_ids": plan["special_ids"],
            "options": plan["options"], "sources": sources, "skipped_files": plan.get("skipped_files", []),
            "shards": shards, "totals": totals}
