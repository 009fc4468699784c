"""JSON Lines: one object per line, the document under a text field."""
from __future__ import annotations

import json
import json.scanner
import re
import sys
from typing import Iterator

import numpy as np

from ..substrate import find_lone_surrogate
from .batch import SKIP_HINT, Reporter, TextBatch, check_text_value
from .compression import broken_errors, open_at, report_broken, skip_if_broken

_JSON_SPACE = " \t\r\n"
# a lone surrogate in a str parsed from valid UTF-8 can only come from a \uD800-\uDFFF
# escape: lines without one (most lines, even of ensure_ascii files) skip the full check
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
# the C scanner: (value, end index); typeshed types its context argument as make_scanner itself
_scan_json = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def read_jsonl(unit, column: str, reporter: Reporter, batch_rows: int) -> Iterator[TextBatch]:
    """JSON Lines: one object per line, the text under ``column``.  A blank
    line is skipped and counted (``blank_line``); it keeps its row number."""
    source = unit.source
    start, stop = unit.row_start, unit.row_stop
    if skip_if_broken(unit, reporter):
        return
    broken = broken_errors()
    texts: list[str] = []
    rows: list[int] = []
    stream, row, pos = open_at(unit, source.compression)
    with stream:
        lines = iter(stream)
        while stop is None or row < stop:
            try:
                line = next(lines)
            except StopIteration:
                break
            except broken as exc:
                report_broken(reporter, exc, source.compression, row, pos)
                break
            if row >= start:
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
                if type(text) is not str or (_SURROGATE_ESCAPE.search(line) is not None
                                             and find_lone_surrogate(text) >= 0):
                    text = _json_text(line, column, reporter, row, pos)
                if text is not None:
                    texts.append(text)
                    rows.append(row)
                    if len(texts) >= batch_rows:
                        yield TextBatch(texts, np.array(rows, dtype=np.int64), source.source_id)
                        texts, rows = [], []
            row += 1
            pos += len(line)
    if texts:
        yield TextBatch(texts, np.array(rows, dtype=np.int64), source.source_id)


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
