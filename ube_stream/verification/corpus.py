"""``verify_corpus``: decode(encode(doc)) == doc for every document of a corpus."""
from __future__ import annotations

from typing import Optional

from ..tokenizer import as_tokenizer
from .report import Mismatch, VerifyReport, default_workers, run_tasks

__all__ = ["verify_corpus"]

UTF8_BYTES = "UTF-8 bytes"


def _corpus_unit(unit, tok, column: str, text_mode: str, on_error: str, max_examples: int,
                 max_document_bytes: int) -> VerifyReport:
    """``decode(encode(doc)) == doc`` for every document of one work unit."""
    from ..readers.inputs import SkipCounter, read_unit

    report = VerifyReport("corpus", max_examples=max_examples)
    skips = SkipCounter()
    path = unit.source.path
    tokens = 0
    for batch in read_unit(unit, column=column, text_mode=text_mode, on_error=on_error, skips=skips,
                           max_document_bytes=max_document_bytes):
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
        report.count(UTF8_BYTES, int(offsets[-1] - offsets[0]))
    report.count("tokens", tokens)
    for reason, n in skips.counts.items():
        report.count(f"skipped: {reason}", n)
    return report


def verify_corpus(inputs, tokenizer, *, column: str = "text", text_mode: str = "line", on_error: str = "raise",
                  format: Optional[str] = None, split: Optional[str] = None,
                  unit_rows: Optional[int] = None, workers: Optional[int] = None, show_progress: bool = True,
                  max_examples: int = 10, max_document_bytes: Optional[int] = None) -> VerifyReport:
    """``decode(encode(doc)) == doc`` for every document of ``inputs`` (paths,
    directories, globs: see :mod:`ube_stream.readers`), one work unit per task
    over ``workers`` processes.  Rows skipped by the readers (nulls, and bad
    rows with ``on_error="skip"``) are counted by reason; files a directory
    walk leaves out are listed in the report's notes with their reasons.
    ``format`` and ``split``: as for :func:`~ube_stream.readers.resolve_inputs`; ``max_document_bytes``:
    as for :func:`~ube_stream.readers.read_unit` (``None``: its default)."""
    from .. import readers

    tok = as_tokenizer(tokenizer)
    if tok is None:
        raise ValueError("verify_corpus needs a tokenizer (a Tokenizer or a tokenizer file)")
    skipped_files: list = []
    sources = readers.resolve_inputs(inputs, column=column, text_mode=text_mode, on_error=on_error, format=format,
                                     split=split, skipped_files=skipped_files)
    units = readers.plan_units(sources, unit_rows=unit_rows or readers.DEFAULT_UNIT_ROWS)

    from ..progress import DocumentProgress, planned_rows

    bar = DocumentProgress(desc="verify corpus", expected_rows=planned_rows(units), enabled=show_progress)

    def progress(unit_report: VerifyReport) -> None:
        counts = unit_report.checked
        bar.add(documents=counts.get("documents", 0), utf8_bytes=counts.get(UTF8_BYTES, 0),
                skipped=sum(n for k, n in counts.items() if k.startswith("skipped: ")))

    try:
        cap = max_document_bytes or readers.DEFAULT_MAX_DOCUMENT_BYTES
        results = run_tasks(_corpus_unit, units, (tok, column, text_mode, on_error, max_examples, cap),
                            workers=default_workers(workers, len(units)), desc="verify corpus",
                            show_progress=show_progress, progress=progress)
    finally:
        bar.close()
    report = VerifyReport("corpus", max_examples=max_examples)
    report.count("sources", len(sources))
    report.count("units", len(units))
    for result in results:
        report.merge(result)
    report.checked.setdefault("documents", 0)
    if skipped_files:
        for line in readers.skipped_files_lines([f.to_dict() for f in skipped_files]):
            report.note(line.strip())
    report.note(f"tokenizer {tok.fingerprint} ({tok.substrate}, vocab {tok.vocab_size})")
    return report


# --------------------------------------------------------------------------- shards
