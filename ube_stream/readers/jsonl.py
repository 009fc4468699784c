"""JSON Lines: one object per line, the document under a text field."""
from __future__ import annotations

import json
import json.scanner
import re
import sys
from typing import Iterator

import numpy as np

from .. import _jsonl
from ..substrate import find_lone_surrogate
from .batch import SKIP_HINT, Reporter, SkipCounter, TextBatch, Utf8Texts, check_text_value
from .compression import line_blocks, skip_if_broken

_JSON_SPACE = " \t\r\n"
# a lone surrogate in a str parsed from valid UTF-8 can only come from a \uD800-\uDFFF
# escape: lines without one (most lines, even of ensure_ascii files) skip the full check
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
# the C scanner: (value, end index); typeshed types its context argument as make_scanner itself
_scan_json = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def read_jsonl(unit, column: str, reporter: Reporter, batch_rows: int) -> Iterator[TextBatch]:
    """JSON Lines: one object per line, the text under ``column``.  A blank
    line is skipped and counted (``blank_line``); it keeps its row number.

    The file is read in blocks (:func:`jsonl_blocks`); the ``_jsonl`` kernel
    takes every line it can prove simple (see ``cython_src/_jsonl.pyx``)
    straight into one UTF-8 buffer, and every other line goes through
    :func:`_line_text` (the C scanner, then ``json.loads``), which reads it
    exactly as ``json.loads`` does and names what is wrong with a bad one.  A
    batch holds lines of one block only (at most ``batch_rows``): about
    ``BLOCK_BYTES`` of text, which stays in the CPU caches from this reader
    through the encoder to the shard writer, and no batch is copied together
    from several blocks."""
    for block in jsonl_blocks(unit, column, reporter, batch_rows):
        yield from block.parse()


def jsonl_blocks(unit, column: str, reporter: Reporter, batch_rows: int) -> Iterator["LinesBlock"]:
    """The unit's lines as :class:`LinesBlock` s, read (decompressed) but not
    parsed: the parse of each is a job of its own, which a pipeline may run in
    any thread (one large compressed file: one thread decompresses, several
    parse and encode).  Parsed in order, the blocks give :func:`read_jsonl`'s
    batches; ``reporter`` gets the reading's own reports (a damaged stream, a
    line too long to hold) and those of blocks parsed without ``skips``."""
    if skip_if_broken(unit, reporter):
        return
    try:
        key = np.frombuffer(column.encode("utf-8"), np.uint8)
    except UnicodeEncodeError:   # a lone surrogate: no unescaped key (the kernel's) matches '"'
        key = np.frombuffer(b'"', np.uint8)
    blocks = line_blocks(unit, reporter)
    next_row = None   # sent back: a parsed block found every line, line_blocks need not count them
    while True:
        try:
            block, cut, row, pos = blocks.send(next_row)
        except StopIteration:
            break
        lines = LinesBlock(unit, reporter, key, column, batch_rows, block, cut, row, pos)
        yield lines
        next_row = lines.next_row   # None while the block is not parsed yet (another thread parses it)


class LinesBlock:
    """Whole JSON lines ``block[:cut]`` of a unit, the first row ``row`` at
    decompressed byte offset ``pos``: :meth:`parse` reads them into batches
    (a parse job; see :func:`ube_stream.readers.read_unit_blocks`)."""

    __slots__ = ("unit", "reporter", "key", "column", "batch_rows", "block", "cut", "row", "pos", "next_row")

    def __init__(self, unit, reporter: Reporter, key: np.ndarray, column: str, batch_rows: int, block: bytes,
                 cut: int, row: int, pos: int):
        self.unit, self.reporter, self.key, self.column, self.batch_rows = unit, reporter, key, column, batch_rows
        self.block, self.cut, self.row, self.pos = block, cut, row, pos
        self.next_row: int | None = None   # the row after the block's lines, once parsed

    def parse(self, skips: SkipCounter | None = None) -> list[TextBatch]:
        """The block's documents as batches.  Bad rows are reported to the
        reader's reporter, or, with ``skips``, under the same rules into
        ``skips`` (a parse in another thread than the reader's)."""
        reporter = self.reporter if skips is None else self.reporter.fork(skips)
        batches = _Batches(self.batch_rows, self.unit.source.source_id)
        self.next_row, _ = _read_lines(self.block, self.cut, self.row, self.pos, self.unit.row_start,
                                       self.unit.row_stop, self.key, self.column, reporter, batches)
        return list(batches.rest())


_KERNEL_LINES = 4096   # lines per kernel call


def _read_lines(block: bytes, cut: int, row: int, pos: int, start: int, stop: int | None, key, column: str,
                reporter: Reporter, batches: "_Batches") -> tuple[int, int]:
    """Read the lines of ``block[:cut]`` (row ``row`` starts at file offset
    ``pos``) into ``batches``, up to row ``stop``; returns the next row and offset."""
    at = 0
    while row < start and at < cut:   # rows before the unit (a unit read without a seek)
        end = block.find(b"\n", at, cut)
        end = cut if end < 0 else end + 1
        row, pos, at = row + 1, pos + end - at, end
    data = np.frombuffer(block, np.uint8)
    ends = np.empty(_KERNEL_LINES, np.int64)
    offsets = np.empty(_KERNEL_LINES + 1, np.int64)
    ok = np.empty(_KERNEL_LINES, np.uint8)
    while at < cut and (stop is None or row < stop):
        count = _KERNEL_LINES if stop is None else min(_KERNEL_LINES, stop - row)
        out = np.empty(cut - at, np.uint8)
        n = _jsonl.scan_lines(data, at, cut, key, out, ends[:count], offsets[:count + 1], ok[:count])
        too_long = None
        if int(ends[n - 1]) - at > reporter.max_document_bytes:   # a line over the limit may be here
            starts = np.concatenate([[at], ends[:n - 1]])
            too_long = (ends[:n] - starts - (data[ends[:n] - 1] == 10)) > reporter.max_document_bytes
        bad = np.flatnonzero((ok[:n] == 0) if too_long is None else (ok[:n] == 0) | too_long)
        if len(bad) == 0:
            batches.add(out[:offsets[n]], offsets[:n + 1], np.arange(row, row + n, dtype=np.int64))
        else:
            batches.add(*_with_fallback_lines(block, at, pos, row, n, bad, too_long, out, ends, offsets, ok, column,
                                              reporter))
        row, pos, at = row + n, pos + int(ends[n - 1]) - at, int(ends[n - 1])
    return row, pos


def _with_fallback_lines(block: bytes, at: int, pos: int, row: int, n: int, bad: np.ndarray, too_long,
                         out: np.ndarray, ends: np.ndarray, offsets: np.ndarray, ok: np.ndarray, column: str,
                         reporter: Reporter):
    """``(data, offsets, rows)`` of ``n`` lines from ``block[at:]`` whose lines
    ``bad`` the kernel handed back or are over ``max_document_bytes``
    (``too_long``, a mask or ``None``): the first read by :func:`_line_text`,
    in place, the others reported and dropped."""
    starts = np.empty(n, np.int64)
    starts[0] = at
    starts[1:] = ends[:n - 1]
    keep = ok[:n].astype(bool)
    lengths = np.diff(offsets[:n + 1])
    pieces: list[np.ndarray] = []
    done = 0   # out[:offsets[done]] is in pieces
    for k in bad.tolist():
        if too_long is not None and too_long[k]:
            line = block[starts[k]:ends[k]]
            reporter.too_large(row + k, len(line) - line.endswith(b"\n"), offset=pos + int(starts[k] - at),
                               what="line")
            pieces.append(out[offsets[done]:offsets[k]])   # the kernel may have read it: leave it out
            done = k + 1
            keep[k] = False
            continue
        text = _line_text(block[starts[k]:ends[k]], column, reporter, row + k, pos + int(starts[k] - at))
        if text is None:
            continue
        encoded = text.encode("utf-8")
        pieces += [out[offsets[done]:offsets[k]], np.frombuffer(encoded, np.uint8)]
        done = k
        keep[k] = True
        lengths[k] = len(encoded)
    pieces.append(out[offsets[done]:offsets[n]])
    lengths = lengths[keep]
    doc_offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=doc_offsets[1:])
    return np.concatenate(pieces) if len(pieces) > 1 else pieces[0], doc_offsets, \
        np.arange(row, row + n, dtype=np.int64)[keep]


class _Batches:
    """Documents of one block, handed out as TextBatches of at most ``batch_rows``."""

    def __init__(self, batch_rows: int, source_id: int):
        self.batch_rows = batch_rows
        self.source_id = source_id
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []   # (data, offsets from 0, rows)
        self.count = 0

    def add(self, data: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> None:
        if len(rows):
            self.parts.append((data, offsets - offsets[0], rows))   # a copy: callers reuse offsets
            self.count += len(rows)

    def full(self) -> Iterator[TextBatch]:
        while self.count >= self.batch_rows:
            yield self._take(self.batch_rows)

    def rest(self) -> Iterator[TextBatch]:
        yield from self.full()
        if self.count:
            yield self._take(self.count)

    def _take(self, n: int) -> TextBatch:
        if len(self.parts) > 1 and len(self.parts[0][2]) < n:   # merge the parts into one
            datas, offsets, rows = zip(*self.parts)
            lengths = np.concatenate([np.diff(o) for o in offsets])
            merged = np.zeros(len(lengths) + 1, np.int64)
            np.cumsum(lengths, out=merged[1:])
            self.parts = [(np.concatenate(datas), merged, np.concatenate(rows))]
        data, offsets, rows = self.parts[0]
        if len(rows) > n:
            self.parts[0] = (data[offsets[n]:], offsets[n:] - offsets[n], rows[n:])
            data, offsets, rows = data[:offsets[n]], offsets[:n + 1], rows[:n]
        else:
            self.parts.pop(0)
        self.count -= n
        return TextBatch(Utf8Texts(data, offsets), rows, self.source_id)


def _line_text(line: bytes, column: str, reporter: Reporter, row: int, pos: int) -> str | None:
    """One line's document as ``json.loads`` reads it (None: skipped, reported)."""
    # fast path: a well-formed object with a valid string; anything else is
    # parsed again by _json_text, which says what is wrong
    # (no strip: it would copy the line; the object must start the line and
    # only JSON whitespace may follow it)
    decoded, record, end = "", None, -1
    try:
        decoded = line.decode("utf-8")
        record, end = _scan_json(decoded, 0)
    except (UnicodeDecodeError, StopIteration, ValueError, RecursionError):
        pass
    text = (record.get(column) if type(record) is dict
            and (end == len(decoded) or not decoded[end:].strip(_JSON_SPACE)) else None)
    if type(text) is not str or (_SURROGATE_ESCAPE.search(line) is not None and find_lone_surrogate(text) >= 0):
        text = _json_text(line, column, reporter, row, pos)
    return text


def _json_text(line: bytes, column: str, reporter: Reporter, row: int, pos: int) -> str | None:
    where = f"{reporter.path}: row {row} (byte offset {pos})"
    if not line.strip():
        reporter.skips.add("blank_line", path=reporter.path, row=row, offset=pos, message=f"{where} is blank")
        return None
    try:
        decoded = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        reporter.problem("invalid_utf8", f"{reporter.path}: row {row}: invalid UTF-8 at byte offset "
                                         f"{pos + exc.start} ({exc.reason}); re-encode the file as UTF-8 "
                                         f"{SKIP_HINT}", row=row, offset=pos + exc.start)
        return None
    try:
        record = json.loads(decoded)
    except json.JSONDecodeError as exc:
        reporter.problem("invalid_json", f"{where}: invalid JSON at column {exc.colno}: {exc.msg}; "
                                         f"fix the line {SKIP_HINT}", row=row, offset=pos)
        return None
    except RecursionError:
        # the C scanner bounds nesting by the recursion limit (about 1000 levels)
        reporter.problem("invalid_json", f"{where}: JSON nested deeper than Python's recursion limit "
                                         f"({sys.getrecursionlimit()} levels); flatten the record or fix the "
                                         f"line {SKIP_HINT}", row=row, offset=pos)
        return None
    except ValueError as exc:
        # e.g. an integer longer than sys.get_int_max_str_digits() digits
        reporter.problem("invalid_json", f"{where}: a JSON value cannot be parsed ({exc}); fix the line "
                                         f"{SKIP_HINT}", row=row, offset=pos)
        return None
    if not isinstance(record, dict):
        reporter.problem("not_object", f"{where}: expected a JSON object with a {column!r} field, found a "
                                       f"{type(record).__name__}; JSONL input needs one object per line "
                                       f"{SKIP_HINT}", row=row, offset=pos)
        return None
    if column not in record:
        keys = ", ".join(map(repr, list(record)[:20]))
        reporter.problem("missing_field", f"{where}: the object has no field {column!r} (it has {keys}); "
                                          f"choose the field with column= {SKIP_HINT}",
                         row=row, offset=pos)
        return None
    return check_text_value(record[column], reporter, row, where, offset=pos)
