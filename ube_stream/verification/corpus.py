"""``verify_corpus``: decode(encode(doc)) == doc for every document of a corpus."""
from __future__ import annotations

import tempfile
from typing import Any, List, Optional, Tuple

from ..executors import worker_state
from ..readers.inputs import skipped_files_lines
from ..runs.corpus import Corpus
from ..runs.engine import seed_tokenizer, tokenizer_file, worker_tokenizer
from .report import Mismatch, VerifyReport, default_workers, run_tasks

__all__ = ["verify_corpus"]

UTF8_BYTES = "UTF-8 bytes"


def _corpus_unit(unit, reading: Corpus, tokenizer: Tuple[str, str], max_examples: int) -> VerifyReport:
    """``decode(encode(doc)) == doc`` for every document of one work unit (the
    tokenizer ``(file, fingerprint)`` loaded once per worker process)."""
    from ..readers.inputs import SkipCounter

    tok = worker_state(worker_tokenizer, *tokenizer)
    report = VerifyReport("corpus", max_examples=max_examples)
    skips = SkipCounter()
    path = unit.source.path
    tokens = 0
    for batch in reading.batches(unit, skips=skips):
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
            expected = tok.normalize(text)   # decode gives the text the encoder saw (NFC for nfc tokenizers)
            if decoded != expected:
                report.fail(Mismatch.of_texts("documents", path, rows[i], expected, decoded,
                                              message="decode(encode(document)) differs from the document"
                                              + (" (NFC-normalised)" if expected is not text else "")))
        report.count("documents", len(texts))
        report.count(UTF8_BYTES, int(offsets[-1] - offsets[0]))
    report.count("tokens", tokens)
    for reason, n in skips.counts.items():
        report.count(f"skipped: {reason}", n)
    return report


def verify_corpus(inputs, tokenizer, *, column: str = "text", text_mode: str = "line", on_error: str = "raise",
                  format: Optional[str] = None, split: Optional[str] = None,
                  unit_rows: Optional[int] = None, workers: Optional[int] = None, show_progress: bool = True,
                  max_examples: int = 10, executor: Any = "local", ray_address: Optional[str] = None,
                  max_document_bytes: Optional[int] = None) -> VerifyReport:
    """``decode(encode(doc)) == doc`` for every document of ``inputs`` (paths,
    directories, globs: see :mod:`ube_stream.readers`), one work unit per task
    on the run engine (``executor``: ``"local"``, a pool of ``workers``
    processes, or ``"ray"`` with ``ray_address``); each worker loads the
    tokenizer once from its file.  Rows skipped by the readers (nulls, and bad
    rows with ``on_error="skip"``) are counted by reason; files a directory
    walk leaves out are listed in the report's notes with their reasons.
    ``format`` and ``split``: as for :func:`~ube_stream.readers.resolve_inputs`; ``max_document_bytes``:
    as for :func:`~ube_stream.readers.read_unit` (``None``: its default)."""
    if tokenizer is None:
        raise ValueError("verify_corpus needs a tokenizer (a Tokenizer or a tokenizer file)")
    corpus = Corpus(inputs, column=column, text_mode=text_mode, format=format, split=split, on_error=on_error,
                    unit_rows=unit_rows, max_document_bytes=max_document_bytes).check()
    skipped_files: list = []
    sources = corpus.sources(skipped_files)
    units = corpus.units(sources)
    with tempfile.TemporaryDirectory(prefix="ube-verify-") as scratch:
        tok, tok_file = tokenizer_file(tokenizer, scratch)
        seed_tokenizer(tok, tok_file)
        results = _run(units, corpus.reading(), (tok_file, tok.fingerprint), max_examples, workers=workers,
                       show_progress=show_progress, executor=executor, ray_address=ray_address)
    report = VerifyReport("corpus", max_examples=max_examples)
    report.count("sources", len(sources))
    report.count("units", len(units))
    for result in results:
        report.merge(result)
    report.checked.setdefault("documents", 0)
    if skipped_files:
        for line in skipped_files_lines([f.to_dict() for f in skipped_files]):
            report.note(line.strip())
    report.note(f"tokenizer {tok.fingerprint} ({tok.substrate}, vocab {tok.vocab_size})")
    return report


def _run(units, reading: Corpus, tokenizer: Tuple[str, str], max_examples: int, *, workers: Optional[int],
         show_progress: bool, executor: Any, ray_address: Optional[str]) -> List[VerifyReport]:
    from ..progress import DocumentProgress, planned_rows

    bar = DocumentProgress(desc="verify corpus", expected_rows=planned_rows(units), enabled=show_progress)

    def progress(unit_report: VerifyReport) -> None:
        counts = unit_report.checked
        bar.add(documents=counts.get("documents", 0), utf8_bytes=counts.get(UTF8_BYTES, 0),
                skipped=sum(n for k, n in counts.items() if k.startswith("skipped: ")))

    try:
        return run_tasks(_corpus_unit, units, (reading, tokenizer, max_examples),
                         workers=default_workers(workers, len(units)), desc="verify corpus",
                         show_progress=show_progress, progress=progress, executor=executor,
                         ray_address=ray_address)
    finally:
        bar.close()
