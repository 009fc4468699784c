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
(``.feather``, v2; a Feather v1 file is refused with how to convert it), JSON Lines (``.jsonl``/``.ndjson``/``.json``) and
plain text (``.txt``/``.text``), the last two optionally ``.zst`` or ``.gz``.
A ``.json`` file whose content starts with ``[`` (a JSON array) is refused
with a hint.  When the name does not tell, the content does (see
:mod:`~ube_stream.readers.formats`: gzip/zstd magic, ``PAR1``, ``ARROW1``,
Arrow streams, JSON Lines; plain text is never guessed), and ``format=``
forces one format for every file.  A HF ``datasets`` directory written by
``save_to_disk`` is read through the Arrow stream files its ``state.json``
lists; a ``DatasetDict`` directory (several splits) needs ``split=NAME``:
only that split's folder is read, the others are listed as skipped, and a
missing or unknown split is an error listing the splits, so train and test
are never mixed silently.  Directories are walked recursively in sorted
order; globs (``*``, ``?``, ``[``, ``**``) are expanded.  **Every file a walk
leaves out** (names starting with ``.`` or ``_``, formats not recognised,
unselected splits, datasets metadata) is returned as a :class:`SkippedFile`
with its reason (``skipped_files=``), and the pipeline lists them in its
summary and MANIFEST / training metadata.

**Documents.** One row / one JSON line / one text line is one document.
**One numbering scheme**: rows are numbered from 0 inside each file, for
every format (JSONL and text: row N is line N + 1 in an editor, blank JSONL
lines included), and every message, skip example and provenance record says
``row N`` with that number (plus a byte offset where there is one).  Text
lines are split on ``\\n`` only and one trailing
``\\r`` is removed; U+2028, U+0085 and a lone ``\\r`` are content.  A final
``\\n`` ends the last line, so ``"a\\nb\\n"`` and ``"a\\nb"`` are both two
documents, and ``"a\\n\\nb"`` is three (the empty line is an empty document).
With ``text_mode="file"`` a whole text file is one document (row 0).  An empty
document is always yielded; a null is skipped and counted as ``"null"``; a blank
JSONL line is skipped and counted as ``"blank_line"``.

**Work units.** ``plan_units`` cuts every file into ranges of ``unit_rows``
rows, uncompressed JSONL/text files also at ``unit_bytes`` bytes (never by worker count), ``unit_id = f"{source_id:05d}-{row_start:012d}"``.
Columnar files know their row count from metadata; a Parquet file is cut at
row-group boundaries only and an Arrow IPC file or stream at record batches
(whole groups or batches, up to ``unit_rows`` rows a unit, a bigger one
alone), so no group or batch is decoded twice.  Uncompressed JSONL/text
files are scanned once at plan time (a newline count) and each unit records
the byte offset of its first row, so its worker seeks straight there.
Compressed JSONL/text files cannot be entered in the middle, so each is one
unit (``row_stop=None``), but for multi-frame zstd files, cut at frame
boundaries; a run with more workers than units gives each unit
several encoder threads fed by its one reader (``threads`` of the unit
functions, :class:`~ube_stream.shards.overlap.OrderedMap`).

**Errors.** Bad rows raise :class:`~ube_stream.errors.InputError` naming the
file, the row/line and the byte offset, or with ``on_error="skip"`` are skipped
and counted in a :class:`SkipCounter` by reason: ``invalid_utf8``,
``invalid_text`` (lone surrogate, e.g. from a ``"\\ud800"`` JSON escape),
``invalid_json``, ``not_object``, ``missing_field``, ``not_string``,
``truncated_file`` / ``corrupt_file`` (the rest of the file, counted once),
``document_too_large``.

**Document size.** No document larger than ``max_document_bytes`` (default
:data:`DEFAULT_MAX_DOCUMENT_BYTES`, 1 GiB) is ever held whole, so memory is
bounded for any input (one 4 GB line in a small ``.zst`` included).  Measured
on what the reader sees before it builds the document: a JSON Lines line (the
whole JSON record, without its ``\n``), a text line (without its ``\n``), a
whole file with ``text_mode="file"``, a columnar value's UTF-8 bytes (read
from the offsets before any value is converted).  A line is dropped while it
is still being read, once its bytes pass the limit: an error naming the file,
the row and the option, or with ``on_error="skip"`` a skip counted as
``document_too_large`` (the row keeps its number).
Options that cannot be right for a file (a missing or non-text column, a path
that does not exist, an unknown format) always raise.
"""
from __future__ import annotations

import functools
import glob
import os
import sys
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import numpy as np

from ..errors import InputError
from ..storage import file_size, filesystem, inside, is_url, load_json, local_path, read_bounded
from . import columnar, compression, formats
from .batch import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    SKIP_HINT,
    TEXT_MODES,
    Reporter,
    SkipCounter,
    SkipExample,
    TextBatch,
    check_text_value,
)
from .compression import scan_line_starts
from .jsonl import jsonl_blocks, read_jsonl
from .text import read_text_file, read_text_lines

__all__ = [
    "Source", "WorkUnit", "TextBatch", "SkipCounter", "SkipExample", "SkippedFile",
    "resolve_inputs", "spill_to_arrow", "memory_name", "plan_units", "read_unit", "iter_batches", "iter_texts",
    "DEFAULT_UNIT_ROWS", "DEFAULT_UNIT_BYTES", "DEFAULT_BATCH_ROWS", "DEFAULT_MAX_DOCUMENT_BYTES", "FORMATS", "ARROW_FORMATS", "TEXT_MODES", "MEMORY_PREFIX",
]

DEFAULT_UNIT_ROWS = 100_000
DEFAULT_UNIT_BYTES = 1 << 24     # 16 MiB: uncompressed JSONL/text units end at this size too
DEFAULT_BATCH_ROWS = 1024
FORMATS = formats.FORMATS
ARROW_FORMATS = tuple(f for f in formats.COLUMNAR_FORMATS if f != "parquet")   # units of whole record batches
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
    JSONL/text file (a seek hint set by :func:`plan_units`), else ``None``.
    ``zstd_frames``: for a unit of a multi-frame zstd file, ``(compressed
    start, compressed stop, text offset, starts inside a line)`` of its frames
    (:func:`~.compression.zstd_frame_units`), else ``None``.  ``batch_start``:
    for a unit of whole record batches of an Arrow IPC file or stream, the
    index of its first batch (a seek hint), else ``None``."""

    source: Source
    row_start: int
    row_stop: int | None
    byte_start: int | None = None
    zstd_frames: tuple | None = None
    batch_start: int | None = None

    @property
    def unit_id(self) -> str:
        """Stable name: ``f"{source_id:05d}-{row_start:012d}"``; sorts in plan order."""
        return f"{self.source.source_id:05d}-{self.row_start:012d}"


# --------------------------------------------------------------------------- resolving inputs

def skipped_files_lines(skipped_files: list[dict[str, str]], shown: int = 20) -> list[str]:
    """Summary lines listing the files directory walks left out, with reasons
    (the first ``shown``; MANIFEST / training metadata hold them all)."""
    if not skipped_files:
        return ["skipped files  none"]
    lines = [f"skipped files  {len(skipped_files):,} (not read; reasons below)"]
    lines += [f"  {f['path']}: {f['reason']}" for f in skipped_files[:shown]]
    if len(skipped_files) > shown:
        lines.append(f"  ... and {len(skipped_files) - shown:,} more (all listed in MANIFEST.json / the "
                     f"tokenizer's training metadata)")
    return lines



def is_paths(inputs: Any) -> bool:
    if isinstance(inputs, (str, os.PathLike)):
        return True
    return isinstance(inputs, (list, tuple)) and all(isinstance(i, (str, os.PathLike)) for i in inputs)


HIDDEN_REASON = "hidden name (starts with '.' or '_')"
UNKNOWN_REASON = "format not recognised from the name or the content (choose one with --format / format=)"
METADATA_REASON = "HF datasets metadata, not data (state.json names the data files)"
HIDDEN_PREFIXES = (".", "_")


@dataclass(frozen=True, order=True)
class SkippedFile:
    """A file (or folder, ``path`` ending in ``/``) that a directory walk did not
    read, with the reason, e.g. ``hidden name (starts with '.' or '_')``.
    ``path`` is absolute (or a full URL)."""

    path: str
    reason: str

    def to_dict(self) -> dict:
        return {"path": self.path, "reason": self.reason}


class _Tree:
    """A local directory tree or an fsspec prefix, walked the same way: full
    paths (absolute, or URLs) in, full paths out."""

    def __init__(self, top: str):
        self.remote = is_url(top)
        if self.remote:
            self.fs, self.inner = filesystem(top)
        else:
            self.inner = os.path.abspath(top)

    def walk(self):
        """``(root, dirs, files)`` top-down; ``dirs`` may be pruned in place."""
        return self.fs.walk(self.inner, topdown=True) if self.remote else os.walk(self.inner)

    def join(self, root: str, name: str) -> str:
        return f"{root.rstrip('/')}/{name}" if self.remote else os.path.join(root, name)

    def full(self, path: str) -> str:
        return self.fs.unstrip_protocol(path) if self.remote else path

    def metadata(self, root: str, name: str, kind: str) -> Any:
        """The HF datasets metadata file ``name`` of the folder ``root`` (``kind``:
        ``"state"``, ``"info"``, ``"dict"``), read bounded
        (:func:`~ube_stream.storage.read_bounded`) and checked against its schema
        before any field is used: an :class:`InputError` naming the file and the field."""
        from ..shards.schema import check

        path = self.full(self.join(root, name))
        error = functools.partial(InputError, path=path, reason="bad_metadata")
        data = read_bounded(path, what=f"datasets {name}", error=error, fix=_METADATA_FIX)
        doc = load_json(data, source=path, what=f"datasets {name}", error=error, fix=_METADATA_FIX)
        check(doc, _metadata_schemas()[kind], source=path, error=error, fix=_METADATA_FIX)
        return doc


_METADATA_FIX = ("the datasets folder is damaged or was not written by save_to_disk: save it again with "
                 "Dataset.save_to_disk (or remove its .json files to read the data files as plain files)")


@functools.lru_cache(maxsize=None)
def _metadata_schemas() -> dict:
    """The fields of a ``save_to_disk`` folder's metadata that the reader uses
    (other fields are allowed: newer versions of datasets add some)."""
    from ..shards.schema import Any_, List, Nullable, Obj, RelPath, Str

    return {"state": Obj({"_data_files": List(Obj({"filename": RelPath()}), max_len=1 << 20)},
                         optional={"_split": Nullable(Str()), "_fingerprint": Nullable(Str())}),
            "info": Obj({}, optional={"features": Nullable(Obj({})), "splits": Nullable(Any_())}),
            "dict": Obj({"splits": List(Str(1024), max_len=1 << 16)})}


def _listed_data_files(tree: _Tree, root: str, files: list[str]) -> list[str] | None:
    """The Arrow files a ``save_to_disk`` folder lists in ``state.json`` (None
    when ``root`` is not one).  ``state.json`` and ``dataset_info.json`` are
    checked first (:meth:`_Tree.metadata`); every listed name must be a file of
    the folder itself (no path out, no symbolic link out, no device)."""
    if "state.json" not in files:
        return None
    state = tree.metadata(root, "state.json", "state")
    if "dataset_info.json" in files:
        tree.metadata(root, "dataset_info.json", "info")
    state_path = tree.full(tree.join(root, "state.json"))
    error = functools.partial(InputError, path=state_path, reason="bad_metadata")
    paths = []
    for i, entry in enumerate(state["_data_files"]):
        name, field = entry["filename"], f"_data_files[{i}].filename"
        if "/" in name:
            raise error(f"{state_path}: field {field!r} names {name!r:.80}, not a file of the folder itself; "
                        f"{_METADATA_FIX}")
        if not tree.remote:
            inside(root, name, where=state_path, field=field, error=error, fix=_METADATA_FIX)
        if name not in files:
            missing = tree.full(tree.join(root, name))
            raise InputError(f"{state_path} lists {missing}, which does not exist; the dataset "
                             f"directory is incomplete: save it again with save_to_disk", path=missing,
                             reason="missing_file")
        paths.append(tree.join(root, name))
    return paths


def _dict_splits(tree: _Tree, root: str) -> list[str]:
    return list(tree.metadata(root, "dataset_dict.json", "dict")["splits"])


def _choose_split(tree: _Tree, root: str, dirs: list[str], split: str | None) -> str:
    """The split folder of a ``DatasetDict`` folder to read: ``split``, which
    must be one of its splits (reading them all would mix train and test)."""
    splits = _dict_splits(tree, root)
    where = tree.full(root).rstrip("/")
    available = ", ".join(map(repr, splits)) if splits else "(none listed in dataset_dict.json)"
    if split is None:
        raise InputError(f"{where}: a datasets DatasetDict folder with splits {available}; reading them all "
                         f"would mix them, so choose one with split= (e.g. split={(splits or ['train'])[0]!r}) "
                         f"or name one split's folder, e.g. {where}/{(splits or ['train'])[0]}",
                         path=where, reason="dataset_dict", option="split")
    if split not in splits or split not in dirs:
        raise InputError(f"{where}: the DatasetDict folder has no split {split!r}; its splits are {available}: "
                         f"choose one of them with split=", path=where, reason="dataset_dict", option="split")
    return split


def _walk(top: str, split: str | None, skipped: list[SkippedFile], used_split: list[str]) -> list[str]:
    """Data files under ``top`` (a directory or an fsspec prefix), in sorted
    order; every file (or folder) left out is appended to ``skipped`` with
    its reason.  A ``DatasetDict`` folder is entered through its ``split``
    folder only (its other splits are listed as skipped)."""
    tree = _Tree(top)
    found: list[str] = []
    for root, dirs, names in tree.walk():
        dirs.sort()
        names = sorted(names)
        for d in [d for d in dirs if d.startswith(HIDDEN_PREFIXES)]:
            skipped.append(SkippedFile(tree.full(tree.join(root, d)) + "/", HIDDEN_REASON))
            dirs.remove(d)
        if "dataset_dict.json" in names:
            chosen = _choose_split(tree, root, dirs, split)
            used_split.append(tree.full(root))
            for d in dirs:
                if d != chosen:
                    skipped.append(SkippedFile(tree.full(tree.join(root, d)) + "/",
                                               f"split {d!r} of a DatasetDict, not selected (split={chosen!r})"))
            dirs[:] = [chosen]
            skipped.extend(SkippedFile(tree.full(tree.join(root, name)), METADATA_REASON) for name in names)
            continue
        listed = _listed_data_files(tree, root, names)
        if listed is not None:
            found.extend(listed)
            skipped.extend(SkippedFile(tree.full(tree.join(root, name)), METADATA_REASON)
                           for name in names if tree.join(root, name) not in listed)
            for d in dirs:
                skipped.append(SkippedFile(tree.full(tree.join(root, d)) + "/",
                                           "folder inside a HF datasets folder (not listed in state.json)"))
            dirs[:] = []
            continue
        for name in names:
            path = tree.join(root, name)
            if name.startswith(HIDDEN_PREFIXES):
                skipped.append(SkippedFile(tree.full(path), HIDDEN_REASON))
            elif formats.is_known_suffix(name) or formats.sniff_format(tree.full(path))[0] is not None:
                found.append(path)
            else:
                skipped.append(SkippedFile(tree.full(path), UNKNOWN_REASON))
    if not found:
        shown = "; ".join(f"{s.path} ({s.reason})" for s in skipped[:5])
        raise InputError(f"{top}: no readable files here (looked for "
                         f"{', '.join(sorted(formats.FORMAT_SUFFIXES))}, optionally .zst/.gz for JSONL and text, "
                         f"files whose content is recognisable, and HF save_to_disk folders)"
                         + (f"; skipped {len(skipped)}: {shown}" if skipped else ""), path=top, reason="no_files")
    return [tree.full(path) for path in found]


def _expand(item: str, split: str | None, skipped: list[SkippedFile], used_split: list[str]) -> list[str]:
    item = local_path(item)
    if is_url(item):
        fs, inner = filesystem(item)
        if any(ch in inner for ch in _GLOB_CHARS):
            matches = sorted(fs.glob(inner))
            if not matches:
                raise InputError(f"{item}: no object matches this pattern", path=item, reason="missing_file")
            return [p for match in matches for p in _expand(fs.unstrip_protocol(match), split, skipped, used_split)]
        if fs.isfile(inner):
            return [fs.unstrip_protocol(inner)]
        if not fs.isdir(inner):
            raise InputError(f"{item}: no such object or prefix; check the URL and the store's credentials",
                             path=item, reason="missing_file")
        return _walk(item, split, skipped, used_split)
    if os.path.isdir(item):
        return _walk(item, split, skipped, used_split)
    if os.path.isfile(item):
        return [item]
    if any(ch in item for ch in _GLOB_CHARS):
        matches = sorted(glob.glob(item, recursive=True))
        if not matches:
            raise InputError(f"{item}: no file matches this pattern", path=item, reason="missing_file")
        return [path for match in matches for path in _expand(match, split, skipped, used_split)]
    raise InputError(f"{item}: no such file or directory; check the path (and quote globs so the shell "
                     f"does not expand them).", path=item, reason="missing_file",
                     api_hint="A str is always a path: to read texts held in memory, pass an iterator such as "
                              "iter(texts) to iter_texts")


def resolve_inputs(inputs, *, column: str = "text", text_mode: str = "line", format: str | None = None,
                   on_error: str = "raise", split: str | None = None,
                   skipped_files: list[SkippedFile] | None = None) -> list[Source]:
    """Expand paths, directories and globs into :class:`Source` s, sorted by
    absolute path and de-duplicated.

    Columnar files are opened for their row count and checked for a text
    ``column`` (a missing or non-text column always raises); ``column`` other
    than ``"text"`` on a plain-text file raises (text has no fields).
    ``format`` forces the format of every file.  ``split`` names the split
    of a ``DatasetDict`` folder to read (required for one; an error when no
    input is one).  Every file a directory walk leaves out is appended to
    ``skipped_files`` as a :class:`SkippedFile`.  With ``on_error="skip"`` a
    columnar file whose metadata cannot be read gets ``num_rows=None`` and is
    counted when read; with ``"raise"`` it raises here.
    """
    if text_mode not in TEXT_MODES:
        raise ValueError(f"text_mode must be one of {TEXT_MODES}, got {text_mode!r}")
    formats.check_format(format)
    if not is_paths(inputs):
        raise TypeError(f"resolve_inputs takes a path or a list of paths, got {type(inputs).__name__}; "
                        f"to read texts in memory use iter_texts / iter_batches")
    items = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    if not items:
        raise InputError("no inputs given: pass at least one file, directory or glob", reason="no_files")
    skipped: list[SkippedFile] = []
    used_split: list[str] = []
    paths = sorted({path if is_url(path) else os.path.abspath(path)
                    for item in items for path in _expand(os.fspath(item), split, skipped, used_split)})
    if split is not None and not used_split:
        raise InputError(f"split={split!r} was given, but no input is a datasets DatasetDict folder (one holding "
                         f"dataset_dict.json); drop split=, or point the input at the DatasetDict folder",
                         reason="dataset_dict", option="split")
    if skipped_files is not None:
        skipped_files.extend(sorted(set(skipped)))
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
        elif fmt == "text":
            if column != "text":
                raise InputError(f"{path}: plain text has no columns or fields, but column={column!r} was given; "
                                 f"drop column= for text files (or read JSON Lines / columnar files only)",
                                 path=path, reason="bad_option")
            if text_mode == "file":
                num_rows = 1
        sources.append(Source(source_id, path, fmt, compression, file_size(path), num_rows))
    return sources


# --------------------------------------------------------------------------- planning

def plan_units(sources: Iterable[Source], *, unit_rows: int | None = DEFAULT_UNIT_ROWS,
               unit_bytes: int | None = DEFAULT_UNIT_BYTES, even_bytes: bool = False,
               arrow_batches: bool = True) -> list[WorkUnit]:
    """Cut sources into :class:`WorkUnit` s of ``unit_rows`` rows (``None``:
    one unit per file), in ``(source_id, row_start)`` order.  Every file gives
    at least one unit, and the units of a file cover each of its rows once.
    Uncompressed JSONL/text files are read once here to find their unit
    boundaries, and their units also end at the first line end at or past
    ``unit_bytes`` bytes (``None``: rows only), so a file of few long rows
    still gives several units; compressed ones are one unit each.

    ``even_bytes``: a file's byte budget is ``unit_bytes`` shared out evenly,
    ``ceil(size / ceil(size / unit_bytes))``, so that its units are about the
    same size (a 50 MB file: four units of 12.5 MB, not three of 16 MiB and a
    small fourth, which would leave one of two workers idle for a quarter of
    the run).  The cuts still depend on the file alone.

    Parquet files are cut at row groups and Arrow IPC / Feather files at
    record batches (whole groups or batches, up to ``unit_rows`` rows a unit,
    a bigger one alone), so no group or batch is decoded by two units.
    ``arrow_batches=False`` cuts Arrow files by rows alone, as the plans of
    shard directories written before did (``verify --shards`` of such a
    directory; MANIFEST options without ``"arrow_units": "batches"``)."""
    for name, value in (("unit_rows", unit_rows), ("unit_bytes", unit_bytes)):
        if value is not None and (not isinstance(value, (int, np.integer)) or value <= 0):
            raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
    units: list[WorkUnit] = []
    for source in sorted(sources, key=lambda s: s.source_id):
        if unit_rows is None:
            units.append(WorkUnit(source, 0, source.num_rows))
        elif source.num_rows is not None:
            n = source.num_rows
            groups = None
            if source.format == "parquet":
                groups = columnar.parquet_row_groups(source.path)
            elif source.format in ARROW_FORMATS and arrow_batches:
                groups = columnar.arrow_batch_rows(source.path, source.format)
            if groups and sum(groups) == n:
                seek = source.format != "parquet"   # Arrow units name their first batch
                units.extend(WorkUnit(source, start, stop, batch_start=first if seek else None)
                             for start, stop, first in _whole_groups(groups, int(unit_rows)))
            else:
                units.extend(WorkUnit(source, start, min(start + unit_rows, n))
                             for start in range(0, max(n, 1), unit_rows))
        elif source.format in formats.LINE_FORMATS and source.compression is None:
            budget = None if unit_bytes is None else int(unit_bytes)
            if budget is not None and even_bytes and source.size > budget:
                budget = -(-source.size // -(-source.size // budget))
            n, starts = scan_line_starts(source.path, int(unit_rows), budget)
            stops = [row for row, _ in starts[1:]] + [n]
            units.extend(WorkUnit(source, row, stop, byte) for (row, byte), stop in zip(starts, stops))
        else:
            frames = (compression.zstd_frame_units(source.path, int(unit_rows), unit_bytes)
                      if source.format in formats.LINE_FORMATS and source.compression == "zstd" else None)
            if frames is None:
                units.append(WorkUnit(source, 0, None))
                continue
            frame_stops: list[int | None] = [row for row, _ in frames[1:]]
            units.extend(WorkUnit(source, row, stop, zstd_frames=where)
                         for (row, where), stop in zip(frames, frame_stops + [None]))
    return units


def _whole_groups(groups: list[int], unit_rows: int) -> list[tuple[int, int, int]]:
    """Units made of whole Parquet row groups or Arrow record batches:
    consecutive groups while they total at most ``unit_rows`` rows (a bigger
    group is a unit of its own), so no group is decoded by two units.
    Returns ``(row_start, row_stop, index of the first group)`` per unit.

    >>> _whole_groups([700, 700, 300, 2000, 100], 1000)
    [(0, 700, 0), (700, 1700, 1), (1700, 3700, 3), (3700, 3800, 4)]
    """
    ranges: list[tuple[int, int, int]] = []
    start = rows = first = 0
    for index, size in enumerate(groups):
        if rows and rows + size > unit_rows:
            ranges.append((start, start + rows, first))
            start, rows, first = start + rows, 0, index
        rows += size
    ranges.append((start, start + rows, first))
    return ranges


# --------------------------------------------------------------------------- reading

def read_unit(unit: WorkUnit, *, column: str = "text", text_mode: str = "line", on_error: str = "raise",
              batch_rows: int = DEFAULT_BATCH_ROWS, skips: SkipCounter | None = None,
              max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Iterator[TextBatch]:
    """Stream the documents of one unit as :class:`TextBatch` es of at most
    ``batch_rows`` documents, in row order.  Skipped rows (nulls always; bad
    rows with ``on_error="skip"``) are counted in ``skips``.  A document over
    ``max_document_bytes`` (see the module) is an error, or skipped and
    counted as ``document_too_large``, before it is read whole."""
    reporter = _unit_reporter(unit, text_mode, on_error, batch_rows, skips, max_document_bytes)
    fmt = unit.source.format
    if fmt in formats.COLUMNAR_FORMATS:
        return columnar.read_columnar(unit, column, reporter, batch_rows)
    if fmt == "jsonl":
        return read_jsonl(unit, column, reporter, batch_rows)
    if text_mode == "file":
        return read_text_file(unit, reporter)
    return read_text_lines(unit, reporter, batch_rows)


def read_unit_blocks(unit: WorkUnit, *, column: str = "text", text_mode: str = "line", on_error: str = "raise",
                     batch_rows: int = DEFAULT_BATCH_ROWS, skips: SkipCounter | None = None,
                     max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Iterator[Any]:
    """:func:`read_unit` as parse jobs: objects whose ``parse(skips=None)``
    gives a list of :class:`TextBatch` es; the jobs' batches, in job order,
    are :func:`read_unit`'s.  Iterating reads (decompresses) the unit; a
    JSON Lines unit's jobs then parse a block of lines each
    (:class:`~.jsonl.LinesBlock`), so a pipeline can parse in several threads
    what one thread reads: ``parse(skips)`` counts that job's skipped rows in
    ``skips`` (raising, with ``on_error="raise"``, as :func:`read_unit`
    would), ``parse()`` in the reader's ``skips``.  The other formats' jobs
    hold one batch their reader already made."""
    if unit.source.format != "jsonl":
        return (_Parsed(batch) for batch in read_unit(unit, column=column, text_mode=text_mode, on_error=on_error,
                                                      batch_rows=batch_rows, skips=skips,
                                                      max_document_bytes=max_document_bytes))
    return jsonl_blocks(unit, column, _unit_reporter(unit, text_mode, on_error, batch_rows, skips, max_document_bytes),
                        batch_rows)


def _unit_reporter(unit: WorkUnit, text_mode: str, on_error: str, batch_rows: int, skips: SkipCounter | None,
                   max_document_bytes: int) -> Reporter:
    """The checks a unit's read starts with (ValueError naming a bad option), and its reporter."""
    if text_mode not in TEXT_MODES:
        raise ValueError(f"text_mode must be one of {TEXT_MODES}, got {text_mode!r}")
    if batch_rows <= 0:
        raise ValueError(f"batch_rows must be positive, got {batch_rows!r}")
    return Reporter(unit.source.path, on_error, skips, max_document_bytes)


class _Parsed:
    """A parse job whose batch is already read (formats read batch by batch)."""

    __slots__ = ("batch",)

    def __init__(self, batch: TextBatch):
        self.batch = batch

    def parse(self, skips: SkipCounter | None = None) -> list[TextBatch]:
        return [self.batch]


def iter_batches(inputs, *, column: str = "text", text_mode: str = "line", on_error: str = "raise",
                 batch_rows: int = DEFAULT_BATCH_ROWS, skips: SkipCounter | None = None,
                 format: str | None = None, split: str | None = None,
                 max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Iterator[TextBatch]:
    """Batches from paths (a path, or a list of paths, directories, globs:
    read file by file in source order) or from in-memory data: a
    ``datasets.Dataset`` / ``IterableDataset`` (a ``DatasetDict`` with
    ``split=``), a pyarrow Table / RecordBatch / Array, or any iterable of
    strings (or of dicts holding ``column``).  A list of ``str`` means paths:
    pass ``iter(texts)`` for a list of texts.  In-memory data is read a batch
    at a time, so a streaming ``IterableDataset`` is consumed in bounded memory."""
    if is_paths(inputs):
        sources = resolve_inputs(inputs, column=column, text_mode=text_mode, format=format, on_error=on_error,
                                 split=split)
        for unit in plan_units(sources, unit_rows=None):
            yield from read_unit(unit, column=column, text_mode=text_mode, on_error=on_error,
                                 batch_rows=batch_rows, skips=skips, max_document_bytes=max_document_bytes)
        return
    yield from _memory_batches(inputs, column, on_error, batch_rows, skips, split, max_document_bytes)


def iter_texts(inputs, *, column: str = "text", text_mode: str = "line", on_error: str = "raise",
               skips: SkipCounter | None = None, format: str | None = None,
               split: str | None = None, max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Iterator[str]:
    """Documents as ``str``, from paths or in-memory data (see :func:`iter_batches`)."""
    for batch in iter_batches(inputs, column=column, text_mode=text_mode, on_error=on_error,
                              skips=skips, format=format, split=split, max_document_bytes=max_document_bytes):
        yield from batch.to_pylist()


MEMORY_PREFIX = "<in-memory "


def memory_name(data: Any) -> str:
    """How an in-memory input is named in messages and in MANIFEST / training
    metadata: ``<in-memory datasets.arrow_dataset.Dataset>`` (never a path)."""
    return f"{MEMORY_PREFIX}{type(data).__module__}.{type(data).__name__}>"


def spill_to_arrow(data: Any, path: str, *, column: str = "text", on_error: str = "raise",
                   skips: SkipCounter | None = None, split: str | None = None,
                   unit_rows: int | None = None) -> int:
    """Write the documents of in-memory ``data`` (anything :func:`iter_batches`
    takes that is not a path) to an Arrow IPC stream file at ``path`` (local
    or a URL; written atomically) with one ``large_string`` column ``text``,
    a batch at a time (bounded memory); returns the number of documents.

    This is how worker processes read in-memory inputs: the file is one
    source, cut into work units of ``unit_rows`` rows like any other, so the
    result does not depend on the number of workers.  Its rows number the
    documents written (0-based); items skipped here (nulls, and bad items
    with ``on_error="skip"``) are counted in ``skips`` and not numbered.
    Its record batches (at most ``DEFAULT_BATCH_ROWS`` rows) never cross a
    multiple of ``unit_rows`` (None: ``DEFAULT_UNIT_ROWS``), so the units cut from it at batch boundaries
    are the same rows as a file of the same documents gives."""
    import pyarrow as pa

    from ..storage import atomic_open

    schema = pa.schema([pa.field("text", pa.large_string())])
    written = 0
    with atomic_open(path, "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        pending: list = []
        per_unit = unit_rows or DEFAULT_UNIT_ROWS

        def flush(final: bool) -> None:
            nonlocal written
            while pending:
                room = min(DEFAULT_BATCH_ROWS, per_unit - written % per_unit)
                if len(pending) < room and not final:
                    return
                texts = pending[:room]
                del pending[:room]
                writer.write_batch(pa.record_batch([pa.array(texts, type=pa.large_string())], schema=schema))
                written += len(texts)

        for batch in iter_batches(data, column=column, on_error=on_error, skips=skips, split=split):
            pending.extend(batch.texts if isinstance(batch.texts, list) else batch.texts.to_pylist())
            flush(final=False)
        flush(final=True)
    return written


def _memory_batches(data, column: str, on_error: str, batch_rows: int, skips: SkipCounter | None,
                    split: str | None = None,
                    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Iterator[TextBatch]:
    name = memory_name(data)
    reporter = Reporter(name, on_error, skips, max_document_bytes)
    if "datasets" in sys.modules:
        import datasets

        if isinstance(data, (datasets.DatasetDict, datasets.IterableDatasetDict)):
            if split is None or split not in data:
                problem = "choose one with split=" if split is None else f"it has no split {split!r}"
                raise InputError(f"{name}: a dataset dict holds splits {sorted(data)}; {problem} (e.g. "
                                 f"split={sorted(data)[0]!r}), or pass one, e.g. data[{sorted(data)[0]!r}]",
                                 reason="dataset_dict")
            data, split = data[split], None
    if split is not None:
        raise InputError(f"{name}: split={split!r} was given, but the input is not a dataset dict; drop split=",
                         reason="dataset_dict")
    if "datasets" in sys.modules:
        import datasets

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
                reporter.problem("missing_field", f"{name}: row {row} has no field {column!r}; choose the field "
                                                 f"with column= {SKIP_HINT}", row=row)
                continue
            value = value[column]
        text = check_text_value(value, reporter, row, f"{name}: row {row}")
        if text is not None:
            texts.append(text)
            rows.append(row)
            if len(texts) >= batch_rows:
                yield TextBatch(texts, np.array(rows, dtype=np.int64), 0)
                texts, rows = [], []
    if texts:
        yield TextBatch(texts, np.array(rows, dtype=np.int64), 0)
