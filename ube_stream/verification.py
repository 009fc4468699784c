"""Offline verification: exact round trips, checked end to end.

Three checks, each returning a :class:`VerifyReport` (``report.ok``,
``report.format()``; counts per category and the first mismatches, with
source, row, the character offset of the first difference and both texts
around it)::

    verify_unicode()                         # every scalar value, normal forms, emoji, mixed scripts,
    verify_unicode("tok.json")               #   the bundled audit strings; + encode -> decode
    verify_corpus("corpus/", "tok.json")     # decode(encode(doc)) == doc for every document
    verify_shards("shards/")                 # headers, checksums, row accounting; every stored
                                             #   document decodes to its source row and re-encodes
                                             #   to exactly the stored tokens

Work is spread over ``workers`` processes (``spawn``); the reports of the
tasks are merged in task order, so the output does not depend on scheduling.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Iterable, List, Optional, Sequence, Tuple


from ._verify_report import Mismatch, VerifyReport, first_difference

__all__ = ["VerifyReport", "Mismatch", "first_difference", "verify_unicode", "verify_corpus", "verify_shards"]

SUBSTRATE_CHECKERS = ("ube", "utf8", "utf16")


def _load_tokenizer(tokenizer):
    if tokenizer is None:
        return None
    from .tokenizer import Tokenizer

    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    return Tokenizer.load(tokenizer)


def _default_workers(workers: Optional[int], tasks: int) -> int:
    if workers is None:
        workers = os.cpu_count() or 1
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    return max(1, min(workers, tasks))


def run_tasks(function: Callable[..., VerifyReport], tasks: Sequence[Any], args: Tuple = (), *, workers: int,
              desc: str, show_progress: bool, weights: Optional[Sequence[int]] = None,
              unit: str = "task") -> List[VerifyReport]:
    """``function(task, *args)`` for every task, in this process or a ``spawn`` pool;
    results in task order."""
    from .progress import progress_bar

    weights = list(weights) if weights is not None else [1] * len(tasks)
    bar = progress_bar(total=sum(weights), desc=desc, unit=unit, unit_scale=True, enabled=show_progress)
    try:
        if workers <= 1:
            results = []
            for task, weight in zip(tasks, weights):
                results.append(function(task, *args))
                bar.update(weight)
            return results
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = {pool.submit(function, task, *args): i for i, task in enumerate(tasks)}
            results: List[Optional[VerifyReport]] = [None] * len(tasks)
            for future in as_completed(futures):
                i = futures[future]
                results[i] = future.result()
                bar.update(weights[i])
        return results  # type: ignore[return-value]
    finally:
        bar.close()


# --------------------------------------------------------------------------- unicode

def verify_unicode(tokenizer=None, *, substrates: Iterable[str] = SUBSTRATE_CHECKERS,
                   item_sets: Optional[Iterable[str]] = None, workers: Optional[int] = None,
                   show_progress: bool = True, max_examples: int = 10) -> VerifyReport:
    """Round-trip every Unicode scalar value (1,112,064) alone and in runs of
    consecutive code points, their NFC/NFD/NFKC/NFKD forms, every ``emoji``
    package sequence, mixed-script strings and the bundled audit strings,
    through each substrate's symbols (``encode_symbols`` / ``decode_symbols``,
    compared with Python's codecs) and, with a ``tokenizer`` (object or file),
    through ``encode -> decode``.  ``item_sets`` picks a subset of
    ``("scalar", "nfc", "nfd", "nfkc", "nfkd", "emoji", "mixed", "audit")``.
    """
    from . import _verify_unicode as vu
    from .substrate import substrate_code

    substrates = list(substrates)
    for name in substrates:
        substrate_code(name)
    names = list(item_sets) if item_sets is not None else list(vu.ITEM_SETS)
    for name in names:
        if name not in vu.ITEM_SETS:
            raise ValueError(f"unknown item set {name!r}; expected some of {', '.join(vu.ITEM_SETS)}")
    tok = _load_tokenizer(tokenizer)
    checkers = substrates + (["tokenizer"] if tok is not None else [])
    if not checkers:
        raise ValueError("nothing to check: pass at least one substrate or a tokenizer")
    tasks = [(name, checker) for name in names for checker in checkers]
    # the scalar set and the tokenizer checks are the long ones: weigh them for the bar
    weights = [(20 if name == "scalar" else 2) * (3 if checker == "tokenizer" else 1) for name, checker in tasks]
    workers = _default_workers(workers, len(tasks))
    results = run_tasks(vu.run_task, tasks, (tok,), workers=workers, desc="verify unicode",
                        show_progress=show_progress, weights=weights, unit="")
    report = VerifyReport("unicode", max_examples=max_examples)
    for result in results:
        report.merge(result)
    if tok is not None:
        report.note(f"tokenizer {tok.fingerprint} ({tok.substrate}, vocab {tok.vocab_size})")
    return report


# --------------------------------------------------------------------------- corpus

def _corpus_unit(unit, tok, column: str, text_mode: str, on_error: str, max_examples: int) -> VerifyReport:
    """``decode(encode(doc)) == doc`` for every document of one work unit."""
    from .readers import SkipCounter, read_unit

    report = VerifyReport("corpus", max_examples=max_examples)
    skips = SkipCounter()
    path = unit.source.path
    tokens = 0
    for batch in read_unit(unit, column=column, text_mode=text_mode, on_error=on_error, skips=skips):
        data, offsets = batch.utf8()
        ids, token_offsets = tok.encode_utf8_batch(data, offsets)
        tokens += int(ids.shape[0])
        bounds = token_offsets.tolist()
        texts = batch.to_pylist()
        rows = batch.rows.tolist()
        for i, text in enumerate(texts):
            try:
                decoded = tok.decode(ids[bounds[i]:bounds[i + 1]])
            except ValueError as exc:
                decoded = f"<{type(exc).__name__}: {exc}>"
            if decoded != text:
                report.fail(Mismatch.of_texts("documents", path, rows[i], text, decoded,
                                              message="decode(encode(document)) differs"))
        report.count("documents", len(texts))
    report.count("tokens", tokens)
    for reason, n in skips.counts.items():
        report.count(f"skipped: {reason}", n)
    return report


def verify_corpus(inputs, tokenizer, *, column: str = "text", text_mode: str = "line", on_error: str = "raise",
                  unit_rows: Optional[int] = None, workers: Optional[int] = None, show_progress: bool = True,
                  max_examples: int = 10) -> VerifyReport:
    """``decode(encode(doc)) == doc`` for every document of ``inputs`` (paths,
    directories, globs: see :mod:`ube_stream.readers`), one work unit per task
    over ``workers`` processes.  Rows skipped by the readers (nulls, and bad
    rows with ``on_error="skip"``) are counted by reason."""
    from . import readers

    tok = _load_tokenizer(tokenizer)
    if tok is None:
        raise ValueError("verify_corpus needs a tokenizer (a Tokenizer or a tokenizer file)")
    sources = readers.resolve_inputs(inputs, column=column, text_mode=text_mode, on_error=on_error)
    units = readers.plan_units(sources, unit_rows=unit_rows or readers.DEFAULT_UNIT_ROWS)
    from collections import Counter

    per_source = Counter(u.source.source_id for u in units)
    weights = [max(1, u.source.size // per_source[u.source.source_id]) for u in units]
    results = run_tasks(_corpus_unit, units, (tok, column, text_mode, on_error, max_examples),
                        workers=_default_workers(workers, len(units)), desc="verify corpus",
                        show_progress=show_progress, weights=weights, unit="B")
    report = VerifyReport("corpus", max_examples=max_examples)
    report.count("sources", len(sources))
    report.count("units", len(units))
    for result in results:
        report.merge(result)
    report.checked.setdefault("documents", 0)
    report.note(f"tokenizer {tok.fingerprint} ({tok.substrate}, vocab {tok.vocab_size})")
    return report


# --------------------------------------------------------------------------- shards

def verify_shards(directory, *, tokenizer=None, workers: Optional[int] = None, sample: Optional[int] = None,
                  show_progress: bool = True, max_examples: int = 10) -> VerifyReport:
    """Check a finished shard directory against its sources.

    Always: MANIFEST format, every index header (magic, version, width, counts,
    tokenizer fingerprint, token-file sha256 against the bytes on disk and
    MANIFEST), index sizes and offsets, the row accounting (per source: rows
    read = documents + skipped, and what the readers find now), and the
    tokenizer file's fingerprint against MANIFEST.  Then, for every document
    (or a deterministic ``sample`` of about ``sample`` documents): its source row
    (MANIFEST ``sources`` + per-document ``(source_id, row)``, read by work unit
    with the readers) must decode from the stored tokens minus the EOS/BOS the
    encoding added, and re-encoding the row must give exactly the stored tokens.
    ``tokenizer`` overrides ``DIR/tokenizer.json``.
    """
    from . import _verify_shards

    return _verify_shards.verify_shards(os.fspath(directory), tokenizer=_load_tokenizer(tokenizer),
                                        workers=workers, sample=sample, show_progress=show_progress,
                                        max_examples=max_examples)
