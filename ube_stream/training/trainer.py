"""Streaming, multi-process BPE training over the UBE / BBPE / BBPE16 substrates.

Phase 1 (counts, one task per work unit, spread over processes): read the
unit's documents, pre-tokenize them into chunks (Cython, GPT-2 pattern) and
count each distinct chunk by its UTF-8 bytes in a Cython hash table (int64
counts, no Python object per occurrence).  Each task writes its table to an
``.npz`` file, then its record beside it (the unit's commit point), and returns
the small record; the driver adds the tables in unit order.  The tables live in
a work directory (:mod:`.work_dir`: ``<output>.ube-work/`` by default) that is
kept when the training fails or is killed, so a rerun counts only the units
that were not finished, and is removed once the tokenizer file is written.

Phase 2 (merges, in the driver): route each distinct chunk to base symbols
(routing is a function of the characters, so it runs once per distinct chunk,
not per occurrence) and run the Cython merge loop: incremental pair counts, a
max-heap with lazy invalidation, ties broken by the smallest
``(left_id, right_id)``.

Determinism: unit ids come from the sorted sources and a fixed ``unit_rows``;
counts are sums (order-free); the merge loop's total order does the rest. The
tokenizer file is byte-identical for any ``workers`` value and input order.
"""
from __future__ import annotations

import dataclasses
import os
import resource
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import _count, _merge, _route
from .._faults import kill_point
from .._version import __version__
from ..errors import InputError, InvalidTextError, OptionError, check_status, err_buffer
from ..executors import get_executor, worker_count
from ..runs.corpus import Corpus
from ..runs.engine import run_units
from ..runs.records import UnitRecords
from ..shards.overlap import unit_threads
from ..tokenizer.core import Tokenizer, char_rule_of, check_superbpe_options
from .work_dir import TrainWork, run_key, work_root

DEFAULT_SPECIAL_TOKENS = ("<|endoftext|>",)
#: SuperBPE's default max_words (the paper's 4 words per superword)
DEFAULT_SUPERBPE_MAX_WORDS = 4
SPAN_TABLE_SUFFIX = ".spans.npz"


@dataclasses.dataclass
class CountRecord:
    """What one phase-1 task returns (small: paths and numbers only)."""

    unit_id: str
    table_path: Optional[str]
    documents: int
    bytes: int
    chunks: int
    skips: Dict[str, int]
    skip_examples: List[str]
    #: SuperBPE: the unit's span table (None: no spans, or SuperBPE off)
    span_table_path: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        doc = dataclasses.asdict(self)
        doc["table"] = doc.pop("table_path") is not None
        span = doc.pop("span_table_path")
        if span is not None:          # plain runs keep their records as they were
            doc["span_table"] = True
        return doc

    @classmethod
    def from_json(cls, doc: Dict[str, Any], table_path: str, span_table_path: str = "") -> "CountRecord":
        return cls(unit_id=doc["unit_id"], table_path=table_path if doc["table"] else None,
                   documents=int(doc["documents"]), bytes=int(doc["bytes"]), chunks=int(doc["chunks"]),
                   skips={str(k): int(v) for k, v in doc["skips"].items()},
                   skip_examples=[str(e) for e in doc["skip_examples"]],
                   span_table_path=span_table_path if doc.get("span_table") else None)


@dataclasses.dataclass
class TrainSummary:
    documents: int = 0
    bytes: int = 0
    chunks: int = 0
    unique_chunks: int = 0
    unique_spans: int = 0          # SuperBPE only
    merges: int = 0
    vocab_size: int = 0
    requested_vocab_size: int = 0
    skipped: Dict[str, int] = dataclasses.field(default_factory=dict)
    skipped_files: List[Dict[str, str]] = dataclasses.field(default_factory=list)   # left out by directory walks
    wall_seconds: float = 0.0
    count_seconds: float = 0.0
    merge_seconds: float = 0.0
    peak_rss_bytes: int = 0
    #: work units, and how many of them a killed or failed earlier run had counted already
    units: int = 0
    units_reused: int = 0
    work_dir: str = ""

    def format(self) -> str:
        lines = [
            f"documents      {self.documents:,}",
            f"units          {self.units:,}" + (f" ({self.units_reused:,} counted by an earlier run, reused from "
                                                 f"{self.work_dir})" if self.units_reused else ""),
            f"bytes          {self.bytes:,}",
            f"chunks         {self.chunks:,} ({self.unique_chunks:,} unique)",
            f"merges         {self.merges:,}",
        ] + ([f"superword spans {self.unique_spans:,} unique (SuperBPE stage 2)"] if self.unique_spans else []) + [
            f"vocab size     {self.vocab_size:,}"
            + ("" if self.vocab_size == self.requested_vocab_size else
               f" (asked {self.requested_vocab_size:,}: no pair left at min_frequency)"),
            f"wall time      {self.wall_seconds:.2f} s (counts {self.count_seconds:.2f} s, merges {self.merge_seconds:.2f} s)",
            f"peak memory    {self.peak_rss_bytes / 2**20:,.0f} MiB (largest process)",
        ]
        if self.skipped:
            lines.append("skipped rows   " + ", ".join(f"{k}: {v:,}" for k, v in sorted(self.skipped.items())))
        from ..readers.inputs import skipped_files_lines

        lines += skipped_files_lines(self.skipped_files)
        return "\n".join(lines)


def _peak_rss_bytes() -> int:
    scale = 1 if sys.platform == "darwin" else 1024
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) * scale


def _unit_budgets(units, max_bytes: Optional[int]) -> List[Optional[int]]:
    """Byte budget of each unit for a ``max_bytes`` sample (None = read all).

    The sample takes from every source in proportion to its size on disk and,
    inside a source, from every unit in proportion to its share of the rows
    (equal shares when the row count is unknown); each unit reads its first
    documents up to its budget.  It depends only on the units, never on the
    worker count.
    """
    if max_bytes is None:
        return [None] * len(units)
    by_source: Dict[int, list] = {}
    for i, unit in enumerate(units):
        by_source.setdefault(unit.source.source_id, []).append(i)
    total_size = sum(max(units[idxs[0]].source.size, 1) for idxs in by_source.values())
    budgets: List[Optional[int]] = [0] * len(units)
    for idxs in by_source.values():
        source_budget = max_bytes * max(units[idxs[0]].source.size, 1) / total_size
        weights = []
        for i in idxs:
            unit = units[i]
            stop = unit.row_stop if unit.row_stop is not None else unit.source.num_rows
            weights.append(max((stop - unit.row_start) if stop is not None else 1, 1))
        total_weight = sum(weights)
        for i, w in zip(idxs, weights):
            budgets[i] = max(1, int(source_budget * w / total_weight))
    return budgets


def count_unit(unit, *, pattern: str, corpus: Corpus, byte_budget: Optional[int], table_dir: str,
               superbpe: bool = False, superbpe_spans: str = "v1", threads: int = 1) -> CountRecord:
    """Phase-1 unit function (``corpus``: the reading options, see
    :meth:`~ube_stream.runs.Corpus.reading`): count the chunks of one work unit into
    ``<table_dir>/<unit_id>.npz`` (with ``superbpe``, also its SuperBPE spans,
    keyed by their chunks joined by 0xFF, into ``<unit_id>.spans.npz``; span rule
    ``superbpe_spans``), then
    write its record beside it as ``<unit_id>.json`` (the commit point a rerun
    looks for).  ``threads``: counting threads over the unit's batches, each
    with its own table, summed at the end (the saved table is sorted by key:
    the same bytes for any thread count; see :class:`~ube_stream.shards.overlap.OrderedMap`).
    The byte budget keeps whole documents in reading order until it is reached."""
    import threading

    from .. import readers
    from ..pretokenizer import chunk_bounds_batch, span_ends, span_keys
    from ..progress import UnitProgress
    from ..readers.batch import drop_bad_documents
    from ..shards.overlap import OrderedMap
    from .chunk_table import merge_tables, save_table

    skips = readers.SkipCounter()
    tables: Dict[int, Any] = {}   # thread id -> (chunk counter, span counter, err buffer) of that thread

    # Several counting threads (one large compressed file) parse the blocks too, so that only the reading
    # (decompression) is serial; a byte budget cuts at a document, so its batches are parsed in order as read.
    parse_in_threads = threads > 1 and byte_budget is None

    def budgeted():   # lists of (batch, data, offsets), or parse jobs (parse_in_threads)
        if parse_in_threads:
            yield from corpus.blocks(unit, skips=skips, batch_rows=256)
            return
        # 256-row batches keep the chunk-ends buffers small: the counting phase sets the peak memory
        read = 0
        for batch in corpus.batches(unit, skips=skips, batch_rows=256):
            data, offsets = batch.utf8()
            if byte_budget is not None:
                remaining = byte_budget - read
                if remaining <= 0:
                    return
                # keep whole documents until the budget is reached (the last one may overshoot)
                keep = int(np.searchsorted(offsets[1:], remaining, side="left")) + 1
                keep = min(keep, len(offsets) - 1)
                offsets = offsets[: keep + 1]
                data = data[: offsets[-1]]
            read += int(offsets[-1] - offsets[0])
            yield [(batch, data, offsets)]

    def count_block(item):   # in a counting thread (threads > 1), in any order
        parsed = readers.SkipCounter() if parse_in_threads else None
        batches = [(batch, *batch.utf8()) for batch in item.parse(parsed)] if parse_in_threads else item
        return [count_batch(batch) for batch in batches], parsed

    def count_batch(item):
        batch, data, offsets = item
        own = tables.get(threading.get_ident())
        if own is None:
            own = tables[threading.get_ident()] = (_count.ChunkCounter(),
                                                    _count.ChunkCounter() if superbpe else None, err_buffer())
        counter, span_counter, err = own
        dropped = None
        try:
            ends, doc_chunks = chunk_bounds_batch(data, offsets, pattern)
        except InvalidTextError as exc:
            # count (or raise on) the invalid document, chunk the batch without it
            dropped = readers.SkipCounter()
            data, offsets, (ends, doc_chunks) = drop_bad_documents(
                exc, batch, data, offsets, lambda d, o: chunk_bounds_batch(d, o, pattern), unit.source.path,
                corpus.on_error, dropped)
        data = np.ascontiguousarray(data)
        check_status(counter.add_chunks(data, ends, int(offsets[0]), err), err,
                     what="counting chunks", hint=f"the table holds the {len(counter)} distinct chunks "
                     "counted before the failure")
        if span_counter is not None and len(ends):
            spans = span_ends(data, ends, int(offsets[0]), doc_chunks, rule=superbpe_spans)
            keys, key_ends = span_keys(data, ends, spans, int(offsets[0]))
            check_status(span_counter.add_chunks(keys, key_ends, 0, err), err, what="counting SuperBPE spans")
        return len(offsets) - 1, int(offsets[-1] - offsets[0]), len(ends), dropped

    documents = nbytes = nchunks = 0
    invalid = readers.SkipCounter()   # the chunker's and parsers' skips; the reader (any thread) counts in `skips`
    running = UnitProgress(unit.unit_id)   # the progress of a long unit while it runs
    with OrderedMap(budgeted(), count_block, threads) as counted:
        for results, parsed in counted:
            if parsed is not None:
                invalid.merge(parsed)
            for docs, size, chunks, dropped in results:
                documents, nbytes, nchunks = documents + docs, nbytes + size, nchunks + chunks
                running.add(docs, size)
                if dropped is not None:
                    invalid.merge(dropped)
    skips.merge(invalid)

    def summed(index: int):   # the unit's table: the one thread's, or the threads' tables summed
        parts = [own[index] for own in tables.values()]
        return parts[0].export() if len(parts) == 1 else merge_tables(parts)

    kill_point(table_dir, unit.unit_id)
    table_path = span_path = None
    table = summed(0) if tables else None
    if table is not None and len(table[2]):
        table_path = os.path.join(table_dir, f"{unit.unit_id}.npz")
        save_table(table_path, table)
    spans_table = summed(1) if tables and superbpe else None
    if spans_table is not None and len(spans_table[2]):
        span_path = os.path.join(table_dir, f"{unit.unit_id}{SPAN_TABLE_SUFFIX}")
        save_table(span_path, spans_table)
    record = CountRecord(unit.unit_id, table_path, documents, nbytes, nchunks,
                         dict(skips.counts), [e.message for e in skips.examples], span_path)
    UnitRecords(table_dir).commit(unit.unit_id, record.to_json(), unique=True)   # the unit's commit point
    return record


def _count_unit_star(kwargs: Dict[str, Any]) -> CountRecord:
    return count_unit(**kwargs)


_LIBC_TRIM: List[Any] = []


def _release_freed_memory() -> None:
    """Give the C heap's free pages back to the OS between phases (glibc's
    ``malloc_trim``; a no-op elsewhere).  Each phase frees its tables before the
    next starts, but glibc keeps freed blocks below its (self-raising) mmap
    threshold mapped, and Python objects come from arenas of their own, so
    without this the merge kernel's freed state stayed resident under the
    tokenizer built after it, and the phases' peaks added up (docs/training.md)."""
    if not _LIBC_TRIM:
        trim = None
        if sys.platform.startswith("linux"):
            import ctypes

            try:
                trim = ctypes.CDLL(None).malloc_trim
                trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
            except (OSError, AttributeError):   # not glibc (musl has no malloc_trim)
                trim = None
        _LIBC_TRIM.append(trim)
    if _LIBC_TRIM[0] is not None:
        _LIBC_TRIM[0](0)


def train(inputs: Any, *, vocab_size: int, substrate: str = "ube", pattern: str = "gpt2",
          special_tokens: Sequence[str] = DEFAULT_SPECIAL_TOKENS, min_frequency: int = 2,
          max_token_length: Optional[int] = None, max_bytes: Optional[int] = None,
          workers: Optional[int] = None, show_progress: bool = True, column: str = "text",
          text_mode: str = "line", unit_rows: Optional[int] = None, on_error: str = "raise",
          format: Optional[str] = None, split: Optional[str] = None, executor: str = "local",
          ray_address: Optional[str] = None, work_dir: Optional[str] = None,
          output: Optional[str] = None, summary: Optional[TrainSummary] = None,
          char_integrity: bool | str = False, superbpe_transition: Optional[int] = None,
          superbpe_max_words: int = DEFAULT_SUPERBPE_MAX_WORDS, superbpe_spans: str = "v1",
          keep_work: bool = False, max_document_bytes: Optional[int] = None) -> Tokenizer:
    """Train a byte-level BPE tokenizer on the ``substrate`` alphabet.

    ``inputs``: paths, directories, globs (Parquet, Arrow IPC/Feather, JSONL,
    text; plain, ``.zst`` or ``.gz``; HF ``save_to_disk`` directories), or an
    in-memory iterable of strings / a ``datasets`` dataset (``format`` and
    ``split``: as for :func:`~ube_stream.readers.resolve_inputs`).  ``vocab_size``
    counts base symbols (512 for ``ube``, 256 otherwise), merged tokens and
    special tokens.  Training stops early, with a smaller vocabulary, when no
    pair reaches ``min_frequency``.  ``max_bytes`` trains on a deterministic
    sample of about that many UTF-8 bytes, independent of ``workers``.
    Pass a :class:`TrainSummary` as ``summary`` to receive the totals.
    ``char_integrity``: no merge creates a token holding part of one character
    and anything of another (every token is a strict part of one character or
    a sequence of whole characters; docs/training.md), by rule ``True`` /
    ``"pieces"`` (any two pieces of one character may merge) or ``"prefix"``
    (SCRIPT's rule: inside a character only its prefix and the next piece merge,
    so every token inside a character is a prefix of it).

    ``superbpe_transition`` T (a vocabulary size, like ``vocab_size``): train
    SuperBPE (docs/training.md, SuperBPE): stage 1 is the training above up to T, i.e.
    ``T - base - specials`` merges inside chunks; stage 2 continues to
    ``vocab_size`` over SuperBPE spans (runs of joinable chunks, counted in
    phase 1 beside the chunks), each span's chunks first encoded with the
    stage-1 merges, a token covering at most ``superbpe_max_words`` chunks.
    ``superbpe_spans``: the span rule, ``"v1"`` (spans end at punctuation, digits,
    symbols and line breaks) or ``"liu"`` (Liu et al.'s: only numbers, line ends
    and ": " end a span); the tokenizer records it and encodes by it.
    ``max_token_length`` still counts base symbols and ``char_integrity`` still
    holds for every token, stage-2 ones included.

    ``output``: write the tokenizer file there (atomically) before the work
    directory is cleaned up.  The finished per-unit count tables live in a
    work directory (``work_dir``, else ``<output>.ube-work/``, else
    ``$TMPDIR/ube-train-<uid>/``; see :mod:`ube_stream.training.work_dir`)
    that is kept when the training fails or is killed: a rerun with the same
    inputs and phase-1 options counts only the unfinished units and writes a
    byte-identical tokenizer.  A successful run removes it (``keep_work``: keeps
    it, so that another training on the same inputs and phase-1 options, say at
    another vocabulary size or substrate, counts nothing again), and any run
    removes the leftovers of dead runs there, kept ones included: give each
    kept key its own ``work_dir``.
    """
    from .. import readers
    from ..pretokenizer import check_span_rule, pattern_spec, resolve_pattern
    from ..substrate import base_size, char_starts, substrate_code

    started = time.perf_counter()
    code = substrate_code(substrate)
    n_base = base_size(substrate)
    special_tokens = list(special_tokens)
    if len(set(special_tokens)) != len(special_tokens):
        raise ValueError(f"special tokens repeat: {special_tokens}")
    if vocab_size < n_base + len(special_tokens):
        raise OptionError(
            f"vocab_size {vocab_size} is below the {n_base} base symbols of {substrate!r} plus "
            f"{len(special_tokens)} special tokens; ask for at least {n_base + len(special_tokens)}",
            option="vocab_size")
    if min_frequency < 1:
        raise ValueError(f"min_frequency must be >= 1, got {min_frequency}")
    if max_token_length is not None and max_token_length < 2:
        raise ValueError(f"max_token_length must be >= 2 base symbols (or None), got {max_token_length}")
    corpus = Corpus(inputs, column=column, text_mode=text_mode, format=format, split=split, on_error=on_error,
                    unit_rows=unit_rows, max_document_bytes=max_document_bytes).check()
    superbpe = superbpe_transition is not None
    if not superbpe and superbpe_max_words != DEFAULT_SUPERBPE_MAX_WORDS:
        raise ValueError(f"superbpe_max_words={superbpe_max_words} needs superbpe_transition (SuperBPE's "
                         "transition vocabulary size); without it the training is plain BPE")
    check_span_rule(superbpe_spans)
    if not superbpe and superbpe_spans != "v1":
        raise ValueError(f"superbpe_spans={superbpe_spans!r} needs superbpe_transition (SuperBPE's "
                         "transition vocabulary size); without it the training is plain BPE")
    if superbpe:
        _check_superbpe(superbpe_transition, superbpe_max_words, vocab_size=vocab_size, n_base=n_base,
                        n_special=len(special_tokens), substrate=substrate)
    char_rule = char_rule_of(char_integrity)
    check_superbpe_options(substrate, superbpe, char_rule is not None)
    pattern = pattern_spec(*resolve_pattern(pattern))   # an unknown name fails here, before any work
    workers = worker_count(workers)
    summary = summary if summary is not None else TrainSummary()
    summary.requested_vocab_size = vocab_size

    root, default_root = work_root(output, work_dir)
    memory_skips = readers.SkipCounter()
    memory_label = readers.memory_name(inputs) if corpus.in_memory else None
    skipped_files: List[Any] = []

    def plan(corpus: Corpus):
        sources = corpus.sources(skipped_files)
        units = corpus.units(sources)
        return sources, units, _unit_budgets(units, max_bytes)

    if memory_label is not None:
        work = TrainWork(root, None, {"inputs": "in memory"}, default_root=default_root)
    else:
        sources, units, budgets = plan(corpus)
        description = _phase1_description(corpus, sources, units, budgets, pattern=pattern, column=column,
                                          text_mode=text_mode, on_error=on_error,
                                          **({"superbpe_spans": superbpe_spans} if superbpe else {}),
                                          # in the key when set, so keys of runs without it stay the same
                                          **({"max_document_bytes": corpus.document_cap} if max_document_bytes else {}))
        work = TrainWork(root, run_key(description), description, default_root=default_root,
                         private_if_busy=output is None and work_dir is None)
    summary.work_dir = work.dir
    summary.skipped_files = [f.to_dict() for f in skipped_files]
    with work:
        if memory_label is not None:
            spill = os.path.join(work.tmp, "in-memory.arrows")
            readers.spill_to_arrow(inputs, spill, column=column, on_error=on_error, skips=memory_skips, split=split,
                                   unit_rows=corpus.unit_rows)
            column = "text"
            corpus = dataclasses.replace(corpus, inputs=[spill], column=column, format=None, split=None)
            sources, units, budgets = plan(corpus)
        done = work.finished(u.unit_id for u in units)
        tasks = [dict(unit=u, pattern=pattern, corpus=corpus.reading(), byte_budget=b, table_dir=work.tables,
                      superbpe=superbpe, superbpe_spans=superbpe_spans,
                      threads=unit_threads(executor, workers, len(units) - len(done)))
                 for u, b in zip(units, budgets) if u.unit_id not in done]
        summary.units, summary.units_reused = len(units), len(done)
        from ..progress import planned_rows

        # a sample reads an unknown share of rows; reused units are not counted again
        expected_rows = None if max_bytes else planned_rows([u for u in units if u.unit_id not in done])
        with get_executor(executor, workers=workers, ray_address=ray_address) as runner:
            counted = {rec.unit_id: rec for rec in
                       _run_count_tasks(tasks, runner=runner, show_progress=show_progress,
                                        expected_rows=expected_rows)}
            records = [counted[u.unit_id] if u.unit_id in counted else
                       CountRecord.from_json(done[u.unit_id], work.table_path(u.unit_id),
                                             work.table_path(u.unit_id, SPAN_TABLE_SUFFIX)) for u in units]
            summary.skipped.update(memory_skips.counts)
            for rec in records:  # in unit order
                summary.documents += rec.documents
                summary.bytes += rec.bytes
                summary.chunks += rec.chunks
                for reason, n in rec.skips.items():
                    summary.skipped[reason] = summary.skipped.get(reason, 0) + n
            _release_freed_memory()     # phase 1's buffers (it runs here with one local worker)
            key_data, key_offsets, counts = _reduce_tables(
                [rec.table_path for rec in records if rec.table_path is not None], runner, work.tmp,
                parts=REDUCE_PARTS_PER_WORKER * workers)
            span_table = None
            if superbpe:
                span_table = _reduce_tables(
                    [rec.span_table_path for rec in records if rec.span_table_path is not None], runner,
                    work.tmp, prefix="reduce-spans", parts=REDUCE_PARTS_PER_WORKER * workers)
        summary.unique_chunks = len(counts)
        summary.count_seconds = time.perf_counter() - started

        merge_started = time.perf_counter()
        err = err_buffer()
        status, symbols, symbol_offsets = _route.route_batch(key_data, key_offsets, code, err)
        check_status(status, err, what="routing", offsets=key_offsets)
        # character starts follow from the routed characters (positional: known here, per word)
        starts = None
        if char_rule is not None:
            assert symbols is not None      # check_status raised otherwise
            starts = char_starts(key_data, substrate, len(symbols))
        del key_data, key_offsets
        _release_freed_memory()     # the reduce's hash table and the chunk keys
        stage1_vocab = superbpe_transition if superbpe_transition is not None else vocab_size
        # handed over in a list that _train_merges empties once the kernel holds its copy
        words = [symbols, symbol_offsets, counts, starts]
        del symbols, symbol_offsets, counts, starts
        merges = _train_merges(words, n_base=n_base,
                               max_vocab=stage1_vocab - len(special_tokens), min_frequency=min_frequency,
                               max_token_length=max_token_length, show_progress=show_progress,
                               char_rule=char_rule or "pieces")
        _release_freed_memory()     # the merge kernel's pair tables, word lists and heap
        superbpe_record = None
        if superbpe:
            assert span_table is not None
            stage2 = _train_stage2(span_table, merges, substrate=substrate, n_base=n_base,
                                   max_vocab=vocab_size - len(special_tokens), min_frequency=min_frequency,
                                   max_token_length=max_token_length, char_rule=char_rule,
                                   max_words=superbpe_max_words, show_progress=show_progress)
            superbpe_record = {"stage1_merges": len(merges), "max_words": int(superbpe_max_words),
                               **({"spans": superbpe_spans} if superbpe_spans != "v1" else {})}
            summary.unique_spans = len(span_table[2])
            merges = np.concatenate([merges, stage2]) if len(stage2) else merges
        summary.merge_seconds = time.perf_counter() - merge_started

        training = {
            "ube_stream_version": __version__,
            "vocab_size": vocab_size,
            "min_frequency": min_frequency,
            "max_token_length": max_token_length,
            "char_integrity": True if char_rule == "pieces" else char_rule or False,
            **({"superbpe_transition": int(superbpe_transition), "superbpe_max_words": int(superbpe_max_words),
                "superbpe_spans": superbpe_spans, "unique_spans": summary.unique_spans}
               if superbpe_transition is not None else {}),
            "max_bytes": max_bytes,
            "column": column,
            "text_mode": text_mode,
            "unit_rows": unit_rows,
            "on_error": on_error,
            "format": format,
            "split": split,
            # full paths (or URLs) of the files read; an in-memory input is named by its type, never by its spill file
            "inputs": [memory_label] if memory_label is not None else sorted(s.path for s in sources),
            "documents": summary.documents,
            "bytes": summary.bytes,
            "chunks": summary.chunks,
            "unique_chunks": summary.unique_chunks,
            "skipped": dict(sorted(summary.skipped.items())),
            "skipped_files": summary.skipped_files,
        }
        # pairs one at a time: a list of [left, right] lists would sit beside the tokenizer's own
        tokenizer = Tokenizer(substrate=substrate, merges=zip(merges[:, 0].tolist(), merges[:, 1].tolist()),
                              special_tokens=special_tokens,
                              pattern=pattern, training=training, char_integrity=char_rule or False,
                              superbpe=superbpe_record)
        if output is not None:
            tokenizer.save(output)        # before anything is cleaned up
        if not keep_work:
            work.finish()
    summary.merges = len(merges)
    summary.vocab_size = tokenizer.vocab_size
    summary.wall_seconds = time.perf_counter() - started
    summary.peak_rss_bytes = _peak_rss_bytes()
    return tokenizer


def _phase1_description(corpus: Corpus, sources, units, budgets, **options: Any) -> Dict[str, Any]:
    """Everything that determines the phase-1 tables (hashed into the work key)."""
    from .chunk_table import TABLE_VERSION

    return {
        "ube_stream_version": __version__,
        "table_version": TABLE_VERSION,
        **options,
        "sources": corpus.fingerprint(sources),
        "units": [[u.unit_id, u.row_start, u.row_stop, b] for u, b in zip(units, budgets)],
    }


def _run_count_tasks(tasks: List[Dict[str, Any]], *, runner, show_progress: bool,
                     expected_rows: Optional[int]) -> List[CountRecord]:
    from ..progress import DocumentProgress

    sampled = any(t["byte_budget"] is not None for t in tasks)   # a sample reads an unknown share of each unit
    progress = DocumentProgress(desc="counting chunks", expected_rows=expected_rows, enabled=show_progress,
                                units=None if sampled else [t["unit"] for t in tasks])

    def on_result(rec: CountRecord) -> None:
        progress.add(documents=rec.documents, skipped=sum(rec.skips.values()), utf8_bytes=rec.bytes,
                     unit_id=rec.unit_id)

    try:
        return run_units(_count_unit_star, tasks, executor=runner, on_result=on_result)
    finally:
        progress.close()


#: keys sampled from the per-unit tables for each reduce part, to place the parts' key ranges
SAMPLE_KEYS_PER_PART = 256
#: table files smaller than this in all are added by the driver (~2^18 entries: about 20 ms of adding
#: on one core)
PARTITION_MIN_BYTES = 6 << 20
#: key ranges per worker in the reduce: smaller ones balance the workers and keep each range's hash
#: table in cache (1 GB corpus, 2 workers: 1.0 s with 8 ranges against 1.3 s with 2 and 1.2 s with 16)
REDUCE_PARTS_PER_WORKER = 4


def _sum_range(paths: List[str], lo: Optional[bytes], hi: Optional[bytes]):
    """The keys ``lo <= key < hi`` (``None``: unbounded) of every table at ``paths``, summed into one
    exported table; only that key range of each table is read (:class:`~.chunk_table.TableFile`)."""
    from .chunk_table import TableFile

    counter = _count.ChunkCounter()
    err = err_buffer()
    for path in paths:
        with TableFile(path) as table:
            part = table.range(lo, hi)
        check_status(counter.add_weighted(*part, err), err, what="adding chunk tables")
    return counter.export()


def _reduce_range_task(task: Tuple[List[str], Optional[bytes], Optional[bytes], str]) -> Tuple[str, int, int]:
    """Reduce task: :func:`_sum_range` written to the table file ``out``; returns ``(out, keys, key bytes)``."""
    from .chunk_table import save_table

    paths, lo, hi, out = task
    reduced = _sum_range(paths, lo, hi)
    save_table(out, reduced)
    return out, len(reduced[2]), len(reduced[0])


def _part_bounds(paths: List[str], parts: int) -> List[bytes]:
    """At most ``parts - 1`` increasing keys that cut the tables' entries into ``parts`` ranges of
    about equal size: quantiles of a sample of about ``SAMPLE_KEYS_PER_PART * parts`` keys, drawn
    from each table in proportion to its file size (its entries, near enough: the sizes are one
    ``stat`` each, and each table is opened once); none below ``PARTITION_MIN_BYTES`` of tables in
    all.  They only share the work out: the reduced table is the same for any cut."""
    from .chunk_table import TableFile

    if parts <= 1:
        return []
    sizes = []
    for path in paths:
        try:
            sizes.append(os.path.getsize(path))
        except OSError as exc:
            raise InputError(f"{path}: the count table of a finished unit is gone ({exc.strerror}); run the "
                             "training again: the unit is counted again", path=path) from None
    total = sum(sizes)
    if total < max(1, PARTITION_MIN_BYTES):
        return []
    budget = SAMPLE_KEYS_PER_PART * parts
    sample: List[bytes] = []
    for path, size in zip(paths, sizes):
        with TableFile(path) as table:
            sample.extend(table.sample(max(1, (budget * size) // total)))
    if not sample:
        return []
    sample.sort()
    return sorted({sample[(len(sample) * k) // parts] for k in range(1, parts)})


def _reduce_tables(paths: List[str], runner, tmp_dir: str, prefix: str = "reduce", parts: int = 1):
    """Sum the per-unit tables into one (sorted by key, as ``ChunkCounter.export`` gives it).

    With ``parts`` > 1 the key space is cut into that many ranges (:func:`_part_bounds`) and a reduce
    task on the executor adds each range of every table (outputs in ``tmp_dir``); the ranges are
    disjoint and in key order, so their tables laid end to end are the sorted sum.  A task holds its
    range of the result, the driver the result: every entry is added once, and the driver adds none
    (a tree of reduce tasks re-added nearly the whole table at each level when the units share most
    chunks, as they do).  With one part the driver adds the tables itself.  The per-unit tables are
    read, never removed."""
    from .chunk_table import load_table

    bounds = _part_bounds(paths, parts)
    if not bounds:
        return _sum_range(paths, None, None)
    edges: List[Optional[bytes]] = [None, *bounds, None]
    tasks = [(paths, edges[k], edges[k + 1], os.path.join(tmp_dir, f"{prefix}-{k:06d}.npz"))
             for k in range(len(edges) - 1)]
    results = runner.map(_reduce_range_task, tasks)
    n_keys = sum(r[1] for r in results)
    key_data = np.empty(sum(r[2] for r in results), dtype=np.uint8)
    key_offsets = np.zeros(n_keys + 1, dtype=np.int64)
    counts = np.empty(n_keys, dtype=np.int64)
    at = byte_at = 0
    for out, keys, nbytes in results:   # in key order: laid end to end
        part = load_table(out)
        if len(part[2]) != keys or len(part[0]) != nbytes:
            raise InputError(f"{out}: the reduce task wrote {keys} keys of {nbytes} bytes, "
                             f"the file holds {len(part[2])} of {len(part[0])}; run the training again", path=out)
        key_data[byte_at:byte_at + nbytes] = part[0]
        key_offsets[at + 1:at + keys + 1] = part[1][1:] + byte_at
        counts[at:at + keys] = part[2]
        at, byte_at = at + keys, byte_at + nbytes
        del part
        os.unlink(out)
    return key_data, key_offsets, counts


def _train_merges(words: List[Any], *, n_base: int, max_vocab: int, min_frequency: int,
                  max_token_length: Optional[int], show_progress: bool, char_rule: str = "pieces",
                  **stage2: Any) -> np.ndarray:
    """Merges of ``words`` = ``[symbols, word_offsets, word_counts, char_starts]``
    (``char_starts`` None: no character integrity; else by ``char_rule``).  The list is emptied once the
    kernel has copied the words into its state, so when it held the last
    references the inputs are freed before the merge loop grows (their memory
    and the loop's never add up).  ``stage2``: the kernel's SuperBPE arguments
    ``n_atoms``, ``expansions``, ``expansion_offsets``, ``chunk_starts``,
    ``max_words``."""
    from ..progress import progress_bar

    target = max(0, max_vocab - n_base)
    bar = progress_bar(total=target, desc="merges", unit="merge", enabled=show_progress)
    done = [0]

    def progress(n: int) -> None:
        bar.update(n - done[0])
        done[0] = n

    err = err_buffer()
    try:
        symbols, word_offsets, word_counts, char_starts = words
        status, state = _merge.prepare_merges(
            symbols, word_offsets, word_counts, n_base, max_vocab, min_frequency,
            max_token_length if max_token_length is not None else -1, err, char_starts=char_starts,
            char_rule=char_rule, **stage2)
        words.clear()
        del symbols, word_offsets, word_counts, char_starts
        _release_freed_memory()
        merges = None
        if state is not None:
            status, merges = _merge.run_merges(state, progress, err)
            del state
    finally:
        bar.close()
    check_status(status, err, what="training BPE merges",
                 hint="train on fewer bytes (max_bytes) or on a machine with more memory")
    return np.asarray(merges, dtype=np.int32).reshape(-1, 3)


def _check_superbpe(transition: Any, max_words: Any, *, vocab_size: int, n_base: int, n_special: int,
                    substrate: str) -> None:
    """ValueError naming the limit a SuperBPE option breaks."""
    from .._merge import MAX_WORDS

    if not isinstance(transition, (int, np.integer)) or isinstance(transition, bool):
        raise ValueError(f"superbpe_transition must be an int vocabulary size, got {transition!r}")
    if transition < n_base + n_special:
        raise OptionError(f"superbpe_transition {transition} is below the {n_base} base symbols of {substrate!r} "
                          f"plus {n_special} special tokens; ask for at least {n_base + n_special}",
                          option="superbpe_transition")
    if transition > vocab_size:
        raise ValueError(f"superbpe_transition {transition} is above vocab_size {vocab_size}; the transition is "
                         "the vocabulary size where stage 2 (superwords) starts, at most vocab_size")
    if not isinstance(max_words, (int, np.integer)) or isinstance(max_words, bool) or not 1 <= max_words <= MAX_WORDS:
        raise ValueError(f"superbpe_max_words must be an int in 1..{MAX_WORDS} (chunks per token), got {max_words!r}")


def superbpe_words(span_table, stage1_merges: np.ndarray, *, substrate: str, n_base: int,
                   char_integrity: bool = False):
    """Stage 2's words: every distinct span of ``span_table`` (keys = chunks
    joined by 0xFF) with its chunks encoded by the stage-1 merges (the
    tokenizer's own encoder, so exactly what encoding gives each chunk).

    Returns ``(symbols uint16, or uint32 past 65536 stage-1 ids, word_offsets, counts, chunk_starts, char_starts
    or None, expansions list)``: the concatenated stage-1 ids of each span,
    1 where a token starts a chunk, 1 where a token starts a character
    (``char_integrity``), and the atoms of every stage-1 id."""
    from .. import _encode
    from ..pretokenizer import SPAN_JOIN, gpt2_class_table
    from ..substrate import char_starts as base_char_starts
    from ..substrate import substrate_code
    from ..tokenizer.core import derive_tokens

    key_data, key_offsets, counts = span_table
    pairs = np.ascontiguousarray(stage1_merges[:, :2], dtype=np.uint32).reshape(-1, 2)
    results, expansions = derive_tokens([(int(a), int(b)) for a, b in pairs], n_base)
    # strip the joins: chunk ends at each join and at each key's end, in the stripped bytes
    join = key_data == SPAN_JOIN
    seen = np.cumsum(join)
    data = np.ascontiguousarray(key_data[~join])
    join_at = np.flatnonzero(join)
    key_ends = key_offsets[1:]
    chunk_ends = np.sort(np.concatenate([join_at - (seen[join_at] - 1),
                                         key_ends - (seen[key_ends - 1] if len(key_ends) else 0)]))
    span_chunks = np.concatenate([[0], np.searchsorted(chunk_ends, key_ends - seen[key_ends - 1], "right")])
    n_chunks = len(chunk_ends)
    chunk_offsets = np.concatenate([[0], chunk_ends]).astype(np.int64)
    encoder = _encode.Encoder(pairs, np.asarray(results, dtype=np.uint32), n_base, substrate_code(substrate),
                              gpt2_class_table(), num_slots=1)
    err = err_buffer()
    # each chunk as a document of one chunk: the token offsets give the chunk starts
    status, ids, token_offsets = encoder.encode_chunks(data, chunk_offsets, chunk_ends.astype(np.int64),
                                                       np.arange(n_chunks + 1, dtype=np.int64), 0, err)
    check_status(status, err, what="stage-1 encoding of SuperBPE spans")
    assert ids is not None and token_offsets is not None
    symbols = ids.astype(np.uint16 if len(expansions) <= 65536 else np.uint32)
    word_offsets = np.ascontiguousarray(token_offsets[span_chunks], dtype=np.int64)
    chunk_starts = np.zeros(len(symbols), dtype=np.uint8)
    chunk_starts[token_offsets[:-1]] = 1
    starts = None
    if char_integrity:
        lengths = np.fromiter((len(e) for e in expansions), dtype=np.int64, count=len(expansions))[ids]
        flags = base_char_starts(data, substrate, int(lengths.sum()))
        starts = np.ascontiguousarray(flags[np.cumsum(lengths) - lengths])
    return symbols, word_offsets, np.ascontiguousarray(counts, dtype=np.int64), chunk_starts, starts, expansions


def _train_stage2(span_table, stage1_merges: np.ndarray, *, substrate: str, n_base: int, max_vocab: int,
                  min_frequency: int, max_token_length: Optional[int], char_rule: Optional[str], max_words: int,
                  show_progress: bool) -> np.ndarray:
    """SuperBPE stage 2: the merge kernel over :func:`superbpe_words`, every
    stage-1 id an alphabet symbol (its atoms known, so lengths and reused ids
    are the tokenizer's), continuing from the stage-1 vocabulary."""
    if len(span_table[2]) == 0:
        return np.zeros((0, 3), dtype=np.int32)
    symbols, word_offsets, counts, chunk_starts, starts, expansions = superbpe_words(
        span_table, stage1_merges, substrate=substrate, n_base=n_base, char_integrity=char_rule is not None)
    made = expansions[n_base:]
    lengths = np.fromiter((len(e) for e in made), dtype=np.int64, count=len(made))
    atoms = np.fromiter((s for e in made for s in e), dtype=np.int32, count=int(lengths.sum()))
    words = [symbols, word_offsets, counts, starts]
    del symbols, word_offsets, counts, starts
    return _train_merges(words, n_base=len(expansions), max_vocab=max_vocab,
                         min_frequency=min_frequency, max_token_length=max_token_length,
                         show_progress=show_progress, char_rule=char_rule or "pieces", n_atoms=n_base,
                         expansions=atoms, expansion_offsets=np.concatenate([[0], np.cumsum(lengths)]),
                         chunk_starts=chunk_starts, max_words=int(max_words))
