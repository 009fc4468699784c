"""Batches of documents and the accounting of skipped rows.

A :class:`TextBatch` holds up to ``batch_rows`` documents of one source file,
as a Python ``list[str]``, as an Arrow ``string``/``large_string`` array when
the reader could build one without copying text, or as one UTF-8 buffer with
offsets (:class:`Utf8Texts`, from the JSON Lines kernel).  ``utf8()`` gives
the texts as one UTF-8 byte buffer plus ``n + 1`` offsets, zero-copy from the
Arrow buffers where possible, which is the shape the Cython kernels take.

A :class:`SkipCounter` counts the rows a reader skipped, by reason, and keeps
the first few examples.  Counters merge, and the result does not depend on the
order of merging (examples are kept by smallest ``(path, row, offset)``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Tuple

import numpy as np

from ..errors import InputError, InvalidTextError
from ..substrate import find_lone_surrogate

__all__ = ["TextBatch", "Utf8Texts", "SkipCounter", "SkipExample", "Reporter", "drop_bad_documents", "check_on_error",
           "DEFAULT_MAX_DOCUMENT_BYTES", "check_max_document_bytes"]

ON_ERROR_CHOICES = ("raise", "skip")
TEXT_MODES = ("line", "file")   # a document is a line (or a row), or a whole text file
SKIP_HINT = "or read with on_error='skip' to skip and count it"


class Utf8Texts:
    """Documents as one UTF-8 buffer: text ``i`` is ``data[offsets[i]:offsets[i+1]]``
    (``uint8`` data, ``n + 1`` int64 offsets from 0), valid UTF-8 without
    surrogates, as a reader's kernel wrote them (the JSON Lines reader)."""

    def __init__(self, data: np.ndarray, offsets: np.ndarray):
        self.data = data
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def to_pylist(self) -> list[str]:
        raw = self.data.tobytes()
        bounds = self.offsets.tolist()
        return [raw[a:b].decode("utf-8") for a, b in zip(bounds, bounds[1:])]


@dataclass
class TextBatch:
    """Up to ``batch_rows`` documents of one source.

    ``texts``: ``list[str]``, an Arrow string / large_string array without
    nulls, or :class:`Utf8Texts`.  ``rows``: int64 row number of each document inside its source file
    (provenance: the Parquet/Arrow row, the JSONL or text line, 0-based).
    ``source_id``: the :class:`~ube_stream.readers.Source` it came from (0 for
    an in-memory iterable).
    """

    texts: Any
    rows: np.ndarray
    source_id: int

    def __len__(self) -> int:
        return len(self.rows)

    def to_pylist(self) -> list[str]:
        """The documents as Python strings."""
        if isinstance(self.texts, list):
            return self.texts
        return self.texts.to_pylist()

    def utf8(self) -> tuple[np.ndarray, np.ndarray]:
        """``(data, offsets)``: all texts concatenated as UTF-8 (``uint8``) and
        ``n + 1`` int64 offsets, text ``i`` being ``data[offsets[i]:offsets[i+1]]``.

        Zero-copy for the text bytes when ``texts`` is an Arrow array (sliced
        arrays and both 32- and 64-bit offsets are handled); the offsets are
        always a fresh int64 array starting at 0.
        """
        if isinstance(self.texts, list):
            return _utf8_of_strings(self.texts)
        if isinstance(self.texts, Utf8Texts):
            return self.texts.data, self.texts.offsets
        return arrow_utf8(self.texts)


def _utf8_of_strings(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    encoded = [text.encode("utf-8") for text in texts]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    if encoded:
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    return data, offsets


def arrow_utf8(array) -> tuple[np.ndarray, np.ndarray]:
    """``(data, offsets)`` of an Arrow string or large_string array (no nulls)."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if pa.types.is_string(array.type):
        offset_dtype = np.int32
    elif pa.types.is_large_string(array.type):
        offset_dtype = np.int64
    else:
        raise TypeError(f"expected an Arrow string or large_string array, got {array.type}")
    n = len(array)
    _, offsets_buf, data_buf = array.buffers()
    if n == 0 or offsets_buf is None:
        return np.zeros(0, dtype=np.uint8), np.zeros(n + 1, dtype=np.int64)
    raw_offsets = np.frombuffer(offsets_buf, dtype=offset_dtype)[array.offset:array.offset + n + 1]
    start, stop = int(raw_offsets[0]), int(raw_offsets[-1])
    if data_buf is None or stop == start:
        data = np.zeros(0, dtype=np.uint8)
    else:
        data = np.frombuffer(data_buf, dtype=np.uint8)[start:stop]
    offsets = raw_offsets.astype(np.int64)
    offsets -= start
    return data, offsets


@dataclass(frozen=True, order=True)
class SkipExample:
    """One skipped row: where it is and why.  ``row``/``offset`` are -1 when
    not known (``offset`` is a byte offset in the decompressed file)."""

    path: str
    row: int
    offset: int
    reason: str
    message: str


@dataclass
class SkipCounter:
    """Rows skipped while reading, by reason, plus the first few examples.

    ``counts`` is kept sorted by reason; ``examples`` holds at most
    ``max_examples`` :class:`SkipExample` with the smallest ``(path, row,
    offset)``, so merging counters in any order gives the same result.
    """

    max_examples: int = 5
    counts: dict[str, int] = field(default_factory=dict)
    examples: list[SkipExample] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def __bool__(self) -> bool:  # a counter with nothing in it is still a counter
        return True

    def add(self, reason: str, *, path: str = "", row: int | None = None, offset: int | None = None,
            message: str = "", count: int = 1) -> None:
        """Count ``count`` rows skipped for ``reason``."""
        self.counts[reason] = self.counts.get(reason, 0) + count
        self.counts = dict(sorted(self.counts.items()))
        example = SkipExample(str(path), -1 if row is None else int(row), -1 if offset is None else int(offset),
                              reason, message)
        self._keep_examples([example])

    def merge(self, other: "SkipCounter") -> "SkipCounter":
        """Add ``other``'s counts and examples into this counter; returns self."""
        for reason, count in other.counts.items():
            self.counts[reason] = self.counts.get(reason, 0) + count
        self.counts = dict(sorted(self.counts.items()))
        self._keep_examples(other.examples)
        return self

    def _keep_examples(self, new: Iterable[SkipExample]) -> None:
        if self.max_examples <= 0:
            return
        merged = sorted(set(self.examples).union(new))
        self.examples = merged[:self.max_examples]

    def to_dict(self) -> dict:
        """JSON-ready form: ``{"counts": {...}, "examples": [{...}, ...]}``."""
        return {
            "counts": dict(self.counts),
            "examples": [
                {"path": e.path, "row": e.row, "offset": e.offset, "reason": e.reason, "message": e.message}
                for e in self.examples
            ],
        }

    @classmethod
    def from_dict(cls, data: dict, *, max_examples: int = 5) -> "SkipCounter":
        counter = cls(max_examples=max_examples)
        counter.counts = dict(sorted((str(k), int(v)) for k, v in data.get("counts", {}).items()))
        counter._keep_examples(SkipExample(e["path"], e["row"], e["offset"], e["reason"], e["message"])
                               for e in data.get("examples", []))
        return counter


def check_on_error(on_error: str) -> None:
    """The one validation of ``on_error``: ``"raise"`` or ``"skip"``."""
    if on_error not in ON_ERROR_CHOICES:
        raise ValueError(f"on_error must be one of {ON_ERROR_CHOICES}, got {on_error!r}")


DEFAULT_MAX_DOCUMENT_BYTES = 1 << 30   # 1 GiB: a larger document is refused (or skipped) before it is read whole


def check_max_document_bytes(value) -> int:
    """The one validation of ``max_document_bytes``: a positive integer."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"max_document_bytes must be a positive integer (bytes), got {value!r}")
    return int(value)


class Reporter:
    """Raises :class:`InputError` for a bad row, or counts it in ``skips``
    when ``on_error == "skip"`` (internal helper shared by the readers).
    ``max_document_bytes`` is the largest document the readers hold
    (:meth:`too_large` reports a larger one)."""

    def __init__(self, path: str, on_error: str, skips: SkipCounter | None,
                 max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES):
        check_on_error(on_error)
        self.path = path
        self.raise_errors = on_error == "raise"
        self.skips = skips if skips is not None else SkipCounter()
        self.max_document_bytes = check_max_document_bytes(max_document_bytes)

    def fork(self, skips: SkipCounter) -> "Reporter":
        """The same rules, counting into ``skips``: for a parse job run in
        another thread (its counts are merged when its results are taken)."""
        return Reporter(self.path, "raise" if self.raise_errors else "skip", skips, self.max_document_bytes)

    def too_large(self, row: int, size: int, *, offset: int | None = None, what: str = "document",
                  at_least: bool = False) -> None:
        """Report row ``row``, a document of ``size`` bytes (``at_least``: the
        bytes read before reading stopped) over ``max_document_bytes``; the
        reader has not materialised it and goes on at the next row."""
        where = f"{self.path}: row {row}" + (f" (byte offset {offset})" if offset is not None else "")
        self.problem("document_too_large",
                     f"{where}: the {what} is {'over ' if at_least else ''}{size:,} bytes, larger than "
                     f"max_document_bytes={self.max_document_bytes:,}; raise the limit with max_document_bytes= "
                     f"{SKIP_HINT}", row=row, offset=offset)

    def problem(self, reason: str, message: str, *, row: int | None = None, offset: int | None = None,
                always_raise: bool = False) -> None:
        """Report one bad row (or a broken rest of file).  ``message`` is the
        full explanation, already naming the file and where."""
        if self.raise_errors or always_raise:
            raise InputError(message, path=self.path, row=row, offset=offset, reason=reason)
        self.skips.add(reason, path=self.path, row=row, offset=offset, message=message)

    def null(self, row: int, count: int = 1, offset: int | None = None) -> None:
        """Nulls are always skipped and counted, never an error."""
        self.skips.add("null", path=self.path, row=row, offset=offset, message=f"{self.path}: row {row} is null",
                       count=count)


# --------------------------------------------------------------------------- documents a kernel rejects
# The readers already reject or skip invalid rows; this is the last line of
# defence when a kernel (pre-tokenizer, encoder) still finds a document that is
# not valid UTF-8: raise an error naming the file and row, or with
# ``on_error="skip"`` count the row and process the batch without it.


def drop_bad_documents(exc: InvalidTextError, batch, data: np.ndarray, offsets: np.ndarray,
                       process: Callable[[np.ndarray, np.ndarray], Any], path: str, on_error: str,
                       skips) -> Tuple[np.ndarray, np.ndarray, Any]:
    """``exc`` came from ``process(data, offsets)`` on ``batch``'s documents.

    With ``on_error="skip"``: count the bad document in ``skips`` as
    ``invalid_utf8``, drop it (``batch.rows`` shrinks to match) and call
    ``process`` again, until it succeeds; returns ``(data, offsets, result)``
    with offsets starting at 0.  Otherwise raise :class:`InputError` naming
    ``path`` and the row.
    """
    while True:
        row = int(batch.rows[exc.document]) if exc.document is not None else -1
        message = f"{path}: row {row}: {exc}"
        if on_error != "skip" or exc.document is None:
            raise InputError(message, path=path, row=row, offset=exc.offset, reason="invalid_utf8") from None
        skips.add("invalid_utf8", path=path, row=row, offset=exc.offset, message=message)
        keep = np.ones(len(offsets) - 1, dtype=bool)
        keep[exc.document] = False
        pieces = [data[offsets[i]:offsets[i + 1]] for i in np.flatnonzero(keep)]
        lengths = np.array([len(p) for p in pieces], dtype=np.int64)
        data = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.uint8)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        batch.rows = np.asarray(batch.rows)[keep]
        try:
            return data, offsets, process(data, offsets)
        except InvalidTextError as again:
            exc = again


def check_text_value(value, reporter: Reporter, row: int, where: str, offset: int | None = None) -> str | None:
    """A Python value that should be a document: the ``str`` if it is one,
    ``None`` (reported) for a null, a non-string, a lone surrogate or a text
    over ``max_document_bytes`` in UTF-8."""
    if value is None:
        reporter.null(row, offset=offset)
        return None
    if not isinstance(value, str):
        reporter.problem("not_string", f"{where}: expected a string, found {type(value).__name__}; "
                                       f"point column= at a text field {SKIP_HINT}", row=row, offset=offset)
        return None
    bad = find_lone_surrogate(value)
    if bad >= 0:
        reporter.problem("invalid_text", f"{where}: lone surrogate U+{ord(value[bad]):04X} at character "
                                         f"{bad} (not a Unicode scalar value, e.g. from a JSON "
                                         f"'\\u{ord(value[bad]):04x}' escape); fix the text {SKIP_HINT}",
                         row=row, offset=offset)
        return None
    if len(value) * 4 > reporter.max_document_bytes:   # UTF-8 takes at most 4 bytes a character
        size = len(value.encode("utf-8"))
        if size > reporter.max_document_bytes:
            reporter.too_large(row, size, offset=offset)
            return None
    return value
