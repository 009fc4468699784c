"""Plain text: one line per document, or a whole file as one document."""
from __future__ import annotations

import codecs
from typing import Iterator

import numpy as np

from .batch import SKIP_HINT, Reporter, TextBatch
from .compression import broken_errors, line_blocks, open_bytes, report_broken, skip_if_broken


def read_text_lines(unit, reporter: Reporter, batch_rows: int) -> Iterator[TextBatch]:
    """Plain text, one document per line: split on ``\\n`` only, one trailing
    ``\\r`` removed; a final ``\\n`` ends the last line (no empty document after
    it).  Lines are cut and checked a block at a time with numpy, and each
    batch is a zero-copy Arrow large_string array over the block's bytes."""
    if skip_if_broken(unit, reporter):
        return
    for block, cut, row, pos in line_blocks(unit, reporter):
        yield from _block_batches(memoryview(block)[:cut], row, pos, unit, reporter, batch_rows)


def _block_batches(block: memoryview, row: int, pos: int, unit, reporter: Reporter, batch_rows: int):
    """Yield the batches of one block of whole lines (its first is row ``row``)."""
    import pyarrow as pa

    arr = np.frombuffer(block, dtype=np.uint8)
    newlines = np.flatnonzero(arr == 10)
    ends = newlines if len(arr) and arr[-1] == 10 else np.append(newlines, len(arr))
    n_lines = len(ends)
    starts = np.zeros(n_lines, dtype=np.int64)
    starts[1:] = ends[:-1] + 1
    lo = max(0, unit.row_start - row)
    hi = n_lines if unit.row_stop is None else min(n_lines, unit.row_stop - row)
    if lo >= hi:
        return
    starts, ends = starts[lo:hi], ends[lo:hi].astype(np.int64)
    rows = np.arange(row + lo, row + hi, dtype=np.int64)
    good = np.ones(len(rows), dtype=bool)
    if ends[-1] - starts[0] > reporter.max_document_bytes:   # a line over the limit may be here
        for i in np.flatnonzero(ends - starts > reporter.max_document_bytes).tolist():
            good[i] = False
            reporter.too_large(int(rows[i]), int(ends[i] - starts[i]), offset=pos + int(starts[i]), what="line")
        starts, ends, rows = starts[good], ends[good], rows[good]
        good = good[good]
        if not len(rows):
            return
    try:
        codecs.utf_8_decode(memoryview(block)[starts[0]:ends[-1]], "strict", True)
    except UnicodeDecodeError:
        for i in range(len(rows)):
            try:
                codecs.utf_8_decode(memoryview(block)[starts[i]:ends[i]], "strict", True)
            except UnicodeDecodeError as exc:
                good[i] = False
                at = pos + int(starts[i]) + exc.start
                reporter.problem("invalid_utf8", f"{reporter.path}: row {rows[i]}: invalid UTF-8 at byte "
                                                 f"offset {at} ({exc.reason}); re-encode the file as UTF-8 "
                                                 f"{SKIP_HINT}", row=int(rows[i]), offset=at)
        starts, ends, rows = starts[good], ends[good], rows[good]
        if not len(rows):
            return
    ends = ends - ((ends > starts) & (arr[ends - 1] == 13))
    keep = np.zeros(len(arr) + 1, dtype=np.int8)   # +1 where a kept line starts, -1 where it ends
    keep[starts] += 1                                # (starts are distinct, ends are distinct; an empty
    keep[ends] -= 1                                  #  line's +1 and -1 cancel)
    data = arr[np.cumsum(keep[:-1], dtype=np.int8) > 0]
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(ends - starts, out=offsets[1:])
    texts = pa.LargeStringArray.from_buffers(len(rows), pa.py_buffer(offsets), pa.py_buffer(data))
    for i in range(0, len(rows), batch_rows):
        yield TextBatch(texts.slice(i, batch_rows), rows[i:i + batch_rows], unit.source.source_id)


def read_text_file(unit, reporter: Reporter) -> Iterator[TextBatch]:
    """text_mode="file": the whole (decompressed) file is document 0."""
    source = unit.source
    if unit.row_start > 0 or unit.row_stop == 0:
        return
    stream = open_bytes(source.path, source.compression)
    with stream:
        try:   # never more than the limit and one byte is read
            raw = stream.read(reporter.max_document_bytes + 1)
        except broken_errors(source.compression) as exc:
            report_broken(reporter, exc, source.compression, 0, 0)
            return
    if len(raw) > reporter.max_document_bytes:
        reporter.too_large(0, reporter.max_document_bytes, what="file (text_mode='file')", at_least=True)
        return
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        reporter.problem("invalid_utf8", f"{source.path}: row 0 (the whole file): invalid UTF-8 at byte offset "
                                         f"{exc.start} ({exc.reason}); re-encode the file as UTF-8 {SKIP_HINT}",
                         row=0, offset=exc.start)
        return
    yield TextBatch([text], np.zeros(1, dtype=np.int64), source.source_id)
