"""Corpus readers: input paths -> sources -> work units -> batches of documents.

The pipeline (trainer, encoder) calls::

    sources = resolve_inputs(["corpus/", "extra/*.jsonl.zst"], column="text")
    units = plan_units(sources, unit_rows=100_000)          # deterministic
    for batch in read_unit(units[i], column="text"):       # in a worker
        data, offsets = batch.utf8()                       # for the kernels
        provenance = (batch.source_id, batch.rows)

and the Python API calls ``iter_texts(inputs)`` with paths or in-memory data.

**Formats.** Parquet (``.parquet``/``.pq``), Arrow IPC file and stream
(``.arrow``/``.arrows``/``.ipc``: the magic bytes decide), Feather
(``.feather``, v1 and v2), JSON Lines (``.jsonl``/``.ndjson``) and plain text
(``.txt``/``.text``), the last two optionally ``.zst`` or ``.gz``.  ``.json``
files are read as JSON Lines (Megatron's and HF's convention); one whose
content starts with ``[`` (a JSON array) is refused with a hint.  A HF
``datasets`` directory written by ``save_to_disk`` is read through the Arrow
stream files its ``state.json`` lists; a ``DatasetDict`` directory (several
splits) is refused with the list of its splits: name one split's folder, so
that train and test are never mixed silently.  Directories are walked recursively in sorted order and
keep only files with a known suffix (names starting with ``.`` or ``_`` are
skipped); globs (``*``, ``?``, ``[``, ``**``) are expanded.

**Documents.** One row / one JSON line / one text line is one document; rows
are numbered from 0 inside each file (JSONL and text: the line number, blank
JSONL lines included).  Text lines are split on ``\\n`` only and one trailing
``\\r`` is removed; U+2028, U+0085 and a lone ``\\r`` are content.  A final
``\\n`` ends the last line, so ``"a\\nb\\n"`` and ``"a\\nb"`` are both two
documents, and ``"a\\n\\nb"`` is three (the empty line is an empty document).
With ``text_mode="file"`` a whole text file is one document (row 0).  An empty
document is always yielded; a null is skipped and counted as ``"null"``; a blank
JSONL line is skipped and counted as ``"blank_line"``.

**Work units.** ``plan_units`` cuts every file into ranges of ``unit_rows``
rows (never by worker count), ``unit_id = f"{source_id:05d}-{row_start:012d}"``.
Columnar files know their row count from metadata.  Uncompressed JSONL/text
files are scanned once at plan time (a newline count) and each unit records
the byte offset of its first row, so its worker seeks straight there.
Compressed JSONL/text files cannot be entered in the middle, so each is one
unit (``row_stop=None``); split or convert big compressed files to get more
parallelism.

**Errors.** Bad rows raise :class:`~ube_stream.errors.InputError` naming the
file, the row/line and the byte offset, or with ``on_error="skip"`` are skipped
and counted in a :class:`SkipCounter` by reason: ``invalid_utf8``,
``invalid_text`` (lone surrogate, e.g. from a ``"\\ud800"`` JSON escape),
``invalid_json``, ``not_object``, ``missing_field``, ``not_string``,
``truncated_file`` / ``corrupt_file`` (the rest of the file, counted once).
Options that cannot be right for a file (a missing or non-text column, a path
that does not exist, an unknown format) always raise.
"""
from __future__ import annotations

import glob
import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import numpy as np

from ..errors import InputError
from ..storage import file_size, filesystem, is_url, local_path
from . import columnar, formats
from .batch import Reporter, SkipCounter, SkipExample, TextBatch, check_text_value
from .compression import scan_line_starts
from .jsonl import read_jsonl
from .text import read_text_file, read_text_lines

__all__ = [
    "Source", "WorkUnit", "TextBatch", "SkipCounter", "SkipExample",
    "resolve_inputs", "plan_units", "read_unit", "iter_batches", "iter_texts",
    "DEFAULT_UNIT_ROWS", "DEFAULT_BATCH_ROWS", "FORMATS", "TEXT_MODES",
]

DEFAULT_UNIT_ROWS = 100_000
DEFAULT_BATCH_ROWS = 1024
FORMATS = formats.FORMATS
TEXT_MODES = ("line", "file")
_GLOB_CHARS = ("*", "?", "[")


@dataclass(frozen=True)
class Source:
    """One input file.  ``source_id`` is its index in the sorted,
    de-duplicated list of resolved absolute paths, so it does not depend on
    the order the inputs were given.  ``format`` is one of :data:`FORMATS`;
    ``compression`` is ``"zstd"``, ``"gzip"`` or ``None``; ``size`` is in bytes
    on disk; ``num_rows`` is known for columnar files (and text files read with
    ``text_mode="file"``: 1), else ``None``."""

    source_id: int
    path: str
    format: str
    compression: str | None
    size: int
    num_rows: int | None


@dataclass(frozen=True)
class WorkUnit:
    """Rows ``[row_start, row_stop)`` of one source (``row_stop=None``: to the
    end).  ``byte_start`` is where ``row_start`` begins in an uncompressed
    JSONL/text file (a seek hint set by :func:`plan_units`), else ``None``."""

    source: Source
    row_start: int
    row_stop: int | None
    byte_start: int | None = None

    @property
    def unit_id(self) -> str:
        """Stable name: ``f"{source_id:05d}-{row_start:012d}"``; sorts in plan order."""
        return f"{self.source.source_id:05d}-{self.row_start:012d}"


# --------------------------------------------------------------------------- resolving inputs

def is_paths(inputs: Any) -> bool:
    if isinstance(inputs, (str, os.PathLike)):
        return True
    return isinstance(inputs, (list, tuple)) and all(isinstance(i, (str, os.PathLike)) for i in inputs)


def _dataset_dir_files(directory: str) -> list[str] | None:
    """The Arrow files a ``save_to_disk`` directory lists in ``state.json``."""
    state_path = os.path.join(directory, "state.json")
    if not os.path.isfile(state_path):
        return None
    try:
        with open(state_path, encoding="utf-8") as f:
            state = json.load(f)
        names = [entry["filename"] for entry in state["_data_files"]]
    except (ValueError, KeyError, TypeError):
        return None
    files = [os.path.join(directory, name) for name in names]
    for file in files:
        if not os.path.isfile(file):
            raise InputError(f"{state_path} lists {file}, which does not exist; the dataset directory is "
                             f"incomplete: save it again with save_to_disk", path=file, reason="missing_file")
    return files


def _refuse_dataset_dict(root: str, dict_file: str, raw: bytes | None = None) -> None:
    """A ``DatasetDict`` folder holds several splits (train, test, ...): reading
    them all as one corpus would mix them silently, so one must be named."""
    try:
        if raw is None:
            with open(dict_file, "rb") as f:
                raw = f.read()
        splits = [str(name) for name in json.loads(raw)["splits"]]
    except (OSError, ValueError, KeyError, TypeError):
        splits = []
    example = f"{root.rstrip('/')}/{splits[0]}" if splits else f"{root.rstrip('/')}/train"
    raise InputError(f"{root}: a datasets DatasetDict folder with splits {splits or '(unreadable list)'}; "
                     f"reading them all would mix them, so name one split's folder, e.g. {example}",
                     path=root, reason="dataset_dict")


def _walk(directory: str) -> list[str]:
    found: list[str] = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        if "dataset_dict.json" in files:
            _refuse_dataset_dict(root, os.path.join(root, "dataset_dict.json"))
        listed = _dataset_dir_files(root)
        if listed is not None:
            found.extend(listed)
            dirs[:] = []
            continue
        found.extend(os.path.join(root, name) for name in sorted(files)
                     if not name.startswith((".", "_")) and formats.is_known_suffix(name))
    if not found:
        raise InputError(f"{directory}: no readable files in this directory (looked for "
                         f"{', '.join(sorted(formats.FORMAT_SUFFIXES))}, optionally .zst/.gz for JSONL and text, "
                         f"and HF save_to_disk folders)", path=directory, reason="no_files")
    return found


def _remote_dataset_files(fs, directory: str, names: set[str]) -> list[str] | None:
    if "state.json" not in names:
        return None
    try:
        state = json.loads(fs.cat_file(f"{directory}/state.json"))
        listed = [entry["filename"] for entry in state["_data_files"]]
    except (ValueError, KeyError, TypeError, FileNotFoundError):
        return None
    missing = [name for name in listed if name not in names]
    if missing:
        url = fs.unstrip_protocol(f"{directory}/{missing[0]}")
        raise InputError(f"{fs.unstrip_protocol(directory)}/state.json lists {url}, which does not exist; the "
                         f"dataset directory is incomplete: save it again with save_to_disk", path=url,
                         reason="missing_file")
    return [f"{directory}/{name}" for name in listed]


def _expand_url(item: str) -> list[str]:
    """Objects behind a URL (an object, a prefix walked like a directory, or a
    glob), as full URLs, in sorted order."""
    fs, inner = filesystem(item)
    if any(ch in inner for ch in _GLOB_CHARS):
        matches = sorted(fs.glob(inner))
        if not matches:
            raise InputError(f"{item}: no object matches this pattern", path=item, reason="missing_file")
        return [url for match in matches for url in _expand_url(fs.unstrip_protocol(match))]
    if fs.isfile(inner):
        return [fs.unstrip_protocol(inner)]
    if not fs.isdir(inner):
        raise InputError(f"{item}: no such object or prefix; check the URL and the store's credentials",
                         path=item, reason="missing_file")
    found: list[str] = []
    datasets: list[str] = []
    for root, _dirs, files in sorted(fs.walk(inner)):
        if any(part.startswith((".", "_")) for part in root[len(inner.rstrip("/")):].split("/") if part):
            continue
        if any(root.startswith(d + "/") for d in datasets):
            continue
        if "dataset_dict.json" in files:
            _refuse_dataset_dict(fs.unstrip_protocol(root), "", fs.cat_file(f"{root}/dataset_dict.json"))
        listed = _remote_dataset_files(fs, root, set(files))
        if listed is not None:
            found.extend(listed)
            datasets.append(root)
            continue
        found.extend(f"{root}/{name}" for name in sorted(files)
                     if not name.startswith((".", "_")) and formats.is_known_suffix(name))
    if not found:
        raise InputError(f"{item}: no readable files under this prefix (looked for "
                         f"{', '.join(sorted(formats.FORMAT_SUFFIXES))}, optionally .zst/.gz for JSONL and text, "
                         f"and HF save_to_disk folders)", path=item, reason="no_files")
    return [fs.unstrip_protocol(path) for path in found]


def _expand(item: str) -> list[str]:
    item = local_path(item)
    if is_url(item):
        return _expand_url(item)
    if os.path.isdir(item):
        return _walk(item)
    if os.path.isfile(item):
        return [item]
    if any(ch in item for ch in _GLOB_CHARS):
        matches = sorted(glob.glob(item, recursive=True))
        if not matches:
            raise InputError(f"{item}: no file matches this pattern", path=item, reason="missing_file")
        return [path for match in matches for path in _expand(match)]
    raise InputError(f"{item}: no such file or directory; check the path (and quote globs so the shell "
                     f"does not expand them). A str is always a path: to read texts held in memory, pass "
                     f"an iterator such as iter(texts) to iter_texts", path=item, reason="missing_file")


def resolve_inputs(inputs, *, column: str = "text", text_mode: str = "line", format: str | None = None,
                   on_error: str = "raise") -> list[Source]:
    """Expand paths, directories and globs into :class:`Source` s, sorted by
    absolute path and de-duplicated.

    Columnar files are opened for their row count and checked for a text
    ``column`` (a missing or non-text column always raises).  ``format``
    forces the format of every file.  With ``on_error="skip"`` a columnar file
    whose metadata cannot be read gets ``num_rows=None`` and is counted when
    read; with ``"raise"`` it raises here.
    """
    if text_mode not in TEXT_MODES:
        raise ValueError(f"text_mode must be one of {TEXT_MODES}, got {text_mode!r}")
    if not is_paths(inputs):
        raise TypeError(f"resolve_inputs takes a path or a list of paths, got {type(inputs).__name__}; "
                        f"to read texts in memory use iter_texts / iter_batches")
    items = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    if not items:
        raise InputError("no inputs given: pass at least one file, directory or glob", reason="no_files")
    paths = sorted({path if is_url(path) else os.path.abspath(path)
                    for item in items for path in _expand(os.fspath(item))})
    sources = []
    for source_id, path in enumerate(paths):
        fmt, compression = formats.detect_format(path, format)
        num_rows = None
        if fmt in formats.COLUMNAR_FORMATS:
            try:
                num_rows = columnar.columnar_num_rows(path, fmt, column)
            except InputError as exc:
                if on_error == "raise" or exc.reason != "corrupt_file":
                    raise
        elif fmt == "text" and text_mode == "file":
            num_rows = 1
        sources.append(Source(source_id, path, fmt, compression, file_size(path), num_rows))
    return sources


# --------------------------------------------------------------------------- planning

def plan_units(sources: Iterable[Source], *, unit_rows: int | None = DEFAULT_UNIT_ROWS) -> list[WorkUnit]:
    """Cut sources into :class:`WorkUnit` s of ``unit_rows`` rows (``None``:
    one unit per file), in ``(source_id, row_start)`` order.  Every file gives
    at least one unit, and the units of a file cover each of its rows once.
    Uncompressed JSONL/text files are read once here to find their unit
    boundaries; compressed ones are one unit each."""
    if unit_rows is not None and (not isinstance(unit_rows, (int, np.integer)) or unit_rows <= 0):
        raise ValueError(f"unit_rows must be a positive integer or None, got {unit_rows!r}")
    units: list[WorkUnit] = []
    for source in sorted(sources, key=lambda s: s.source_id):
        if unit_rows is None:
            units.append(WorkUnit(source, 0, source.num_rows))
        elif source.num_rows is not None:
            n = source.num_rows
            units.extend(WorkUnit(source, start, min(start + unit_rows, n)) for start in range(0, max(n, 1), unit_rows))
        elif source.format in formats.LINE_FORMATS and source.compression is None:
            n, starts = scan_line_starts(source.path, int(unit_rows))
            units.extend(WorkUnit(source, row, min(row + unit_rows, n), byte) for row, byte in starts)
        else:
            units.append(WorkUnit(source, 0, None))
    return units


# --------------------------------------------------------------------------- reading

def read_unit(unit: WorkUnit, *, column: str = "text", text_mode: str = "line", on_error: str = "raise",
              batch_rows: int = DEFAULT_BATCH_ROWS, skips: SkipCounter | None = None) -> Iterator[TextBatch]:
    """Stream the documents of one unit as :class:`TextBatch` es of at most
    ``batch_rows`` documents, in row order.  Skipped rows (nulls always; bad
    rows with ``on_error="skip"``) are counted in ``skips``."""
    if text_mode not in TEXT_MODES:
        raise ValueError(f"text_mode must be one of {TEXT_MODES}, got {text_mode!r}")
    if batch_rows <= 0:
        raise ValueError(f"batch_rows must be positive, got {batch_rows!r}")
    reporter = Reporter(unit.source.path, on_error, skips)
    fmt = unit.source.format
    if fmt in formats.COLUMNAR_FORMATS:
        return columnar.read_columnar(unit, column, reporter, batch_rows)
    if fmt == "jsonl":
        return read_jsonl(unit, column, reporter, batch_rows)
    if text_mode == "file":
        return read_text_file(unit, reporter)
    return read_text_lines(unit, reporter, batch_rows)


def iter_batches(inputs, *, column: str = "text", text_mode: str = "line", on_error: str = "raise",
                 batch_rows: int = DEFAULT_BATCH_ROWS, skips: SkipCounter | None = None,
                 format: str | None = None) -> Iterator[TextBatch]:
    """Batches from paths (a path, or a list of paths, directories, globs:
    read file by file in source order) or from in-memory data: a
    ``datasets.Dataset`` / ``IterableDataset``, a pyarrow Table / Array, or
    any iterable of strings (or of dicts holding ``column``).  A list of
    ``str`` means paths: pass ``iter(texts)`` for a list of texts."""
    if is_paths(inputs):
        sources = resolve_inputs(inputs, column=column, text_mode=text_mode, format=format, on_error=on_error)
        for unit in plan_units(sources, unit_rows=None):
            yield from read_unit(unit, column=column, text_mode=text_mode, on_error=on_error,
                                 batch_rows=batch_rows, skips=skips)
        return
    yield from _memory_batches(inputs, column, on_error, batch_rows, skips)


def iter_texts(inputs, *, column: str = "text", text_mode: str = "line", on_error: str = "raise",
               skips: SkipCounter | None = None, format: str | None = None) -> Iterator[str]:
    """Documents as ``str``, from paths or in-memory data (see :func:`iter_batches`)."""
    for batch in iter_batches(inputs, column=column, text_mode=text_mode, on_error=on_error,
                              skips=skips, format=format):
        yield from batch.to_pylist()


def _memory_batches(data, column: str, on_error: str, batch_rows: int,
                    skips: SkipCounter | None) -> Iterator[TextBatch]:
    name = f"<{type(data).__module__}.{type(data).__name__}>"
    reporter = Reporter(name, on_error, skips)
    if "datasets" in sys.modules:
        import datasets

        if isinstance(data, (datasets.DatasetDict, datasets.IterableDatasetDict)):
            raise InputError(f"{name}: a dataset dict holds splits {sorted(data)}; pass one, e.g. data['train']",
                             reason="bad_input")
        if isinstance(data, datasets.Dataset):
            if column not in data.column_names:
                raise InputError(f"{name}: no column {column!r}; the dataset has columns "
                                 f"{', '.join(map(repr, data.column_names))}. Choose it with column=",
                                 reason="missing_column")
            first = 0
            for table in data.select_columns([column]).with_format("arrow").iter(batch_size=batch_rows):
                columnar.text_field_index(table.schema, column, name)
                yield from columnar.arrow_text_batches(table.column(0), first, 0, reporter, batch_rows)
                first += table.num_rows
            return
        if isinstance(data, datasets.IterableDataset):
            data = (example.get(column) if isinstance(example, dict) else example for example in data)
    if "pyarrow" in sys.modules:
        import pyarrow as pa

        if isinstance(data, (pa.Table, pa.RecordBatch)):
            columnar.text_field_index(data.schema, column, name)
            data = data.column(column)
        if isinstance(data, (pa.Array, pa.ChunkedArray)):
            schema = pa.schema([pa.field(column, data.type)])
            columnar.text_field_index(schema, column, name)
            yield from columnar.arrow_text_batches(data, 0, 0, reporter, batch_rows)
            return
    texts: list[str] = []
    rows: list[int] = []
    for row, value in enumerate(data):
        if isinstance(value, dict):
            if column not in value:
                reporter.problem("missing_field", f"{name}: item {row} has no field {column!r}", row=row)
                continue
            value = value[column]
        text = check_text_value(value, reporter, row, f"{name}: item {row}")
        if text is not None:
            texts.append(text)
            rows.append(row)
            if len(texts) >= batch_rows:
                yield TextBatch(texts, np.array(rows, dtype=np.int64), 0)
                texts, rows = [], []
    if texts:
        yield TextBatch(texts, np.array(rows, dtype=np.int64), 0)
