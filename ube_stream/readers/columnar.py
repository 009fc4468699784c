"""Columnar files behind :mod:`ube_stream.readers`: Parquet (row groups let a
unit read only its rows), Arrow IPC file and stream, Feather v2 (Feather v1 is
refused when the format is detected: :func:`~.formats.refuse_feather_v1`), and
Arrow arrays from memory.  Memory-mapped where possible; only the text column is
read.  Internal; pyarrow is imported inside the functions.

**Damage.**  Every array is validated before a value is read.  A Parquet file
is read row group by row group (each has its own pages, located from the
footer), so damage is reported by row group: the error names the group, its
rows and the row it failed at, and ``on_error="skip"`` drops only that row
group's rows of the unit, counted by rows as ``corrupt_row_group``; the row
groups before and after it are read.  A group's batches are held back until
the group has decoded whole (up to :data:`ROW_GROUP_HOLD_BYTES` of text; the
rest of a bigger group is passed on as it decodes, and damage there drops the
group's remaining rows).  Page checksums are verified when the writer stored them
(``pq.write_table(..., write_page_checksum=True)``); without them, damage
that still decodes cannot be told from data.  A damaged footer, Arrow IPC
or Feather file is one ``corrupt_file`` for the rest of the unit.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ..errors import InputError
from ..storage import is_url, open_input
from .batch import SKIP_HINT, Reporter, SkipCounter, TextBatch


def text_field_index(schema, column: str, path: str) -> int:
    """Index of ``column`` in an Arrow schema; InputError when it is missing
    or not text.  Always raised: it is a wrong option, not a bad row."""
    import pyarrow as pa

    index = schema.get_field_index(column)
    if index < 0:
        names = ", ".join(map(repr, schema.names))
        raise InputError(f"{path}: no column {column!r}; the file has columns {names}. "
                         f"Choose the text column with column=", path=path, reason="missing_column")
    kind = schema.field(index).type
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)
            or pa.types.is_null(kind)):
        raise InputError(f"{path}: column {column!r} has type {schema.field(index).type}, not text "
                         f"(string/large_string); choose a text column with column= or cast it "
                         f"to string first", path=path, reason="not_string")
    return index


def arrow_text_batches(array, first_row: int, source_id: int, reporter: Reporter,
                       batch_rows: int) -> Iterator[TextBatch]:
    """Batches from one Arrow text array whose element 0 is row ``first_row``:
    nulls are skipped and counted, invalid UTF-8 reported per row."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        for chunk in array.chunks:
            yield from arrow_text_batches(chunk, first_row, source_id, reporter, batch_rows)
            first_row += len(chunk)
        return
    if _null_count_disagrees(array, first_row, reporter):
        return
    # Nothing may touch the values of a damaged array (a corrupt IPC/Feather
    # file gives offsets beyond the data buffer: reading them crashes the
    # process), so the structure is validated first; only UTF-8 is left to the
    # per-row check.  ArrowInvalid from here is a corrupt file.
    utf8_ok = _check_structure(array)
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if pa.types.is_null(array.type):
        if len(array):
            reporter.null(first_row, count=len(array))
        return
    if pa.types.is_string_view(array.type):
        array = array.cast(pa.large_string())
    rows = np.arange(first_row, first_row + len(array), dtype=np.int64)
    good = None
    if array.null_count:
        good = array.is_valid().to_numpy(zero_copy_only=False)
        nulls = rows[~good]
        reporter.null(int(nulls[0]), count=len(nulls))
    if array.nbytes > reporter.max_document_bytes:   # a value over the limit may be here
        good = _check_sizes(array, rows, good, reporter)
    if not utf8_ok:
        good = _check_rows_utf8(array, rows, good, reporter)
    if good is not None:
        array = array.filter(pa.array(good))
        rows = rows[good]
    for i in range(0, len(rows), batch_rows):
        yield TextBatch(array.slice(i, batch_rows), rows[i:i + batch_rows], source_id)


def _null_count_disagrees(array, first_row: int, reporter: Reporter) -> bool:
    """True (after raising or counting its rows as ``corrupt_array``) when the
    array's null count is not the number of cleared bits of its validity bitmap
    (damaged IPC/Feather metadata: pyarrow would serve a null as the bytes under
    it, or skip rows the count does not account for).  Costs one pass over the
    bitmap (a bit per row)."""
    import pyarrow as pa

    n = len(array)
    if not n or pa.types.is_null(array.type):
        return False
    claimed = array.null_count
    bitmap = array.buffers()[0]
    if bitmap is None:
        actual: int | str = 0
    elif bitmap.size * 8 < array.offset + n:
        actual = f"a bitmap of {bitmap.size * 8} bits for {array.offset + n} rows"
    else:
        bits = np.unpackbits(np.frombuffer(bitmap, dtype=np.uint8), bitorder="little")[array.offset:array.offset + n]
        actual = n - int(np.count_nonzero(bits))
    if actual == claimed:
        return False
    what = actual if isinstance(actual, str) else f"{actual:,} nulls"
    message = (f"{reporter.path}: rows {first_row}..{first_row + n - 1}: the Arrow array's null count "
               f"({claimed:,}) disagrees with its validity bitmap ({what}): the data is damaged")
    if reporter.raise_errors:
        raise InputError(f"{message}. Re-write it, or read with on_error='skip' to skip and count these {n:,} rows",
                         path=reporter.path, row=first_row, reason="corrupt_array")
    reporter.skips.add("corrupt_array", path=reporter.path, row=first_row, count=n,
                       message=f"{message}; its {n:,} rows were skipped. Re-write the file")
    return True


def _check_structure(array) -> bool:
    """Validate an Arrow text (or dictionary-of-text) array before any value is
    read: raises ``pa.ArrowInvalid`` when its buffers are inconsistent (offsets
    out of order or beyond the data, dictionary indices out of range); returns
    whether the text is also valid UTF-8 (``False``: check it row by row)."""
    import pyarrow as pa

    try:
        array.validate(full=True)
        return True
    except pa.ArrowInvalid:
        pass
    array.validate()   # buffer sizes: raises on a damaged layout
    if pa.types.is_dictionary(array.type):
        array.indices.validate(full=True)
        dictionary = array.dictionary
        if len(array.indices) - array.indices.null_count:
            import pyarrow.compute as pc

            bounds = pc.min_max(array.indices)
            low, high = bounds["min"].as_py(), bounds["max"].as_py()
            if low is not None and (low < 0 or high >= len(dictionary)):
                raise pa.ArrowInvalid(f"dictionary index {high if high >= len(dictionary) else low} is out of "
                                      f"range for a dictionary of {len(dictionary)} values")
        return _check_structure(dictionary)
    if pa.types.is_null(array.type):
        return True
    if pa.types.is_string_view(array.type):
        raise pa.ArrowInvalid("string_view array failed validation")
    # the same buffers seen as binary: full validation checks offsets, not UTF-8
    binary = pa.Array.from_buffers(_binary_of(array.type), len(array), array.buffers(), offset=array.offset)
    binary.validate(full=True)
    return False


def _check_sizes(array, rows, good, reporter: Reporter):
    """Report the values over ``max_document_bytes`` (from the offsets: no
    value is converted) and mark them not good."""
    import pyarrow.compute as pc

    sizes = pc.fill_null(pc.binary_length(array), 0).to_numpy(zero_copy_only=False)
    over = sizes > reporter.max_document_bytes
    if not over.any():
        return good
    good = np.ones(len(rows), dtype=bool) if good is None else good.copy()
    for i in np.flatnonzero(over & good).tolist():
        good[i] = False
        reporter.too_large(int(rows[i]), int(sizes[i]))
    return good


def _check_rows_utf8(array, rows, good, reporter: Reporter):
    good = np.ones(len(rows), dtype=bool) if good is None else good.copy()
    for i, value in enumerate(array.cast(_binary_of(array.type))):
        if not good[i]:
            continue
        try:
            value.as_py().decode("utf-8")
        except UnicodeDecodeError as exc:
            good[i] = False
            reporter.problem("invalid_utf8", f"{reporter.path}: row {rows[i]}: invalid UTF-8 at byte {exc.start} "
                                             f"of the text ({exc.reason}); fix the data {SKIP_HINT}",
                             row=int(rows[i]), offset=exc.start)
    return good


def _binary_of(kind):
    import pyarrow as pa
    return pa.large_binary() if pa.types.is_large_string(kind) else pa.binary()


def _corrupt(path: str, fmt: str, exc: BaseException) -> InputError:
    return InputError(f"{path}: cannot read this {fmt} file ({type(exc).__name__}: {exc}); it is truncated, "
                      f"corrupt or not {fmt}. Re-download or re-write it, or read with on_error='skip' to skip "
                      f"and count it", path=path, reason="corrupt_file")


def _mapped(path: str):
    """A pyarrow input over ``path``: memory-mapped when local, a streamed
    (range-read) object through fsspec when it is a URL."""
    import pyarrow as pa

    if is_url(path):
        return pa.PythonFile(open_input(path), mode="r")
    return pa.memory_map(path)


def _parquet_file(path: str):
    import pyarrow.parquet as pq

    if is_url(path):
        return pq.ParquetFile(open_input(path), page_checksum_verification=True)
    return pq.ParquetFile(path, memory_map=True, page_checksum_verification=True)


def parquet_row_groups(path: str) -> list[int] | None:
    """Rows of each row group of a Parquet file (its footer), ``None`` when
    the footer cannot be read (the reader reports the damage)."""
    import pyarrow as pa

    try:
        meta = _parquet_file(path).metadata
        return [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
    except (pa.ArrowException, OSError, ValueError):
        return None


def arrow_batch_rows(path: str, fmt: str) -> list[int] | None:
    """Rows of each record batch of an Arrow IPC file or stream (Feather v2
    too), memory-mapped: the batches' data are not read where they are
    uncompressed (an IPC-compressed file is decompressed once here).  ``None``
    when the file cannot be read (the reader reports the damage)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    try:
        with _mapped(path) as mapped:
            if fmt in ("arrow_file", "feather"):
                reader = ipc.open_file(mapped, options=ipc.IpcReadOptions(included_fields=[]))
                return [reader.get_batch(i).num_rows for i in range(reader.num_record_batches)]
            return [batch.num_rows for batch in ipc.open_stream(mapped, options=ipc.IpcReadOptions(
                included_fields=[]))]
    except (pa.ArrowException, OSError, ValueError):
        return None


def columnar_num_rows(path: str, fmt: str, column: str) -> int:
    """Row count of a columnar file from its metadata (Arrow streams: one
    memory-mapped pass over the batches of the text column); also checks the
    column.  Raises InputError."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    try:
        if fmt == "parquet":
            meta = _parquet_file(path).metadata
            text_field_index(meta.schema.to_arrow_schema(), column, path)
            return meta.num_rows
        if fmt in ("arrow_file", "feather"):
            with _mapped(path) as source:
                reader = ipc.open_file(source)
                text_field_index(reader.schema, column, path)
                return reader.count_rows()
        with _mapped(path) as source:
            reader = ipc.open_stream(source)
            index = text_field_index(reader.schema, column, path)
        with _mapped(path) as source:
            reader = ipc.open_stream(source, options=ipc.IpcReadOptions(included_fields=[index]))
            return sum(batch.num_rows for batch in reader)
    except InputError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _corrupt(path, fmt, exc) from exc


def read_columnar(unit, column: str, reporter: Reporter, batch_rows: int) -> Iterator[TextBatch]:
    """Parquet (only the row groups the unit overlaps), Arrow IPC file/stream
    and Feather, memory-mapped; only the text column is decoded."""
    import pyarrow as pa

    source = unit.source
    start, stop = unit.row_start, unit.row_stop
    if source.format == "parquet":
        yield from _read_parquet(unit, column, reporter, batch_rows)
        return
    row = start
    try:
        for array, first in _columnar_arrays(source, column, start, stop, unit.batch_start):
            row = first
            lo = max(start, first)
            hi = first + len(array) if stop is None else min(stop, first + len(array))
            if lo >= hi:
                continue
            yield from arrow_text_batches(array.slice(lo - first, hi - lo), lo, source.source_id, reporter,
                                          batch_rows)
            row = hi
    except InputError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        error = _corrupt(source.path, source.format, exc)
        reporter.problem("corrupt_file", f"{error} (at row {row})", row=row)


#: text held back per Parquet row group so a damaged group is dropped whole (see the module)
ROW_GROUP_HOLD_BYTES = 64 << 20


class _Held:
    """Batches of the row group being read, held back until it decoded whole (or
    :data:`ROW_GROUP_HOLD_BYTES` of them are held); their skips (nulls, invalid
    UTF-8) count only when they are passed on."""

    def __init__(self, reporter: Reporter, source, batch_rows: int, passed: int):
        self.reporter, self.source, self.batch_rows = reporter, source, batch_rows
        self.start(passed)

    def start(self, passed: int) -> None:
        self.batches: list = []
        self.bytes = 0
        self.passed = passed          # the first row not yet passed on
        self.skips = SkipCounter(max_examples=self.reporter.skips.max_examples)

    def add(self, array, first_row: int) -> None:
        reporter = self.reporter if self.reporter.raise_errors else Reporter(self.source.path, "skip", self.skips,
                                                                  self.reporter.max_document_bytes)
        self.batches.extend(arrow_text_batches(array, first_row, self.source.source_id, reporter, self.batch_rows))
        self.bytes += array.nbytes

    def release(self, passed: int) -> list:
        """The held batches, to pass on now; the next row to hold is ``passed``."""
        self.reporter.skips.merge(self.skips)
        out = self.batches
        self.start(passed)
        return out


def _read_parquet(unit, column: str, reporter: Reporter, batch_rows: int) -> Iterator[TextBatch]:
    """The unit's rows of a Parquet file, row group by row group (see the module).

    One reader runs over all the unit's row groups (pyarrow decodes ahead);
    when it fails, the group it was in is read again on its own, which tells a
    damaged group from a reader that failed while decoding ahead into the next."""
    import pyarrow as pa

    source = unit.source
    path, start, stop = source.path, unit.row_start, unit.row_stop
    try:
        pf = _parquet_file(path)
        text_field_index(pf.schema_arrow, column, path)
        meta = pf.metadata
        sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
    except InputError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        error = _corrupt(path, source.format, exc)
        reporter.problem("corrupt_file", f"{error} (at row {start})", row=start)
        return
    bounds = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).tolist()
    spans = {g: (max(start, bounds[g]), bounds[g + 1] if stop is None else min(stop, bounds[g + 1]))
             for g in range(len(sizes))}
    groups = [g for g in range(len(sizes)) if spans[g][0] < spans[g][1]]
    k = 0
    while k < len(groups):
        held = _Held(reporter, source, batch_rows, spans[groups[k]][0])
        i = 0
        row = bounds[groups[k]]
        try:
            for batch in pf.iter_batches(batch_size=batch_rows, row_groups=groups[k:], columns=[column]):
                first, row = row, row + batch.num_rows
                pos = first
                while pos < row and k + i < len(groups):      # a batch may span row groups
                    g = groups[k + i]
                    lo, hi = spans[g]
                    end = min(row, bounds[g + 1])
                    a, b = max(lo, pos), min(hi, end)
                    if a < b:
                        held.add(batch.column(0).slice(a - first, b - a), a)
                    pos = end
                    if pos >= hi:                              # group g decoded whole
                        yield from held.release(spans[groups[k + i + 1]][0] if k + i + 1 < len(groups) else hi)
                        i += 1
                    elif held.bytes > ROW_GROUP_HOLD_BYTES:    # a big group: pass on what decoded so far
                        yield from held.release(b)
                if k + i >= len(groups):
                    return
        except InputError:
            raise
        except (pa.ArrowException, OSError, ValueError):
            pass
        # the reader failed (or ended early) in group groups[k + i]: read that group alone
        g = groups[k + i]
        yield from _read_row_group(pf, g, held.passed, spans[g][1], bounds, sizes, column, source, reporter,
                                   batch_rows)
        k += i + 1


def _read_row_group(pf, g: int, lo: int, hi: int, bounds, sizes, column: str, source, reporter: Reporter,
                    batch_rows: int) -> Iterator[TextBatch]:
    """Rows ``[lo, hi)`` of row group ``g`` on their own: passed on whole, or the
    group is reported damaged (its rows from ``lo`` counted as skipped)."""
    import pyarrow as pa

    held = _Held(reporter, source, batch_rows, lo)
    row = bounds[g]
    try:
        for batch in pf.iter_batches(batch_size=batch_rows, row_groups=[g], columns=[column]):
            first, row = row, row + batch.num_rows
            a, b = max(held.passed, first), min(hi, row)
            if a < b:
                held.add(batch.column(0).slice(a - first, b - a), a)
            if held.bytes > ROW_GROUP_HOLD_BYTES:
                yield from held.release(b)
            if row >= hi:
                break
        else:
            if row < hi:   # damaged metadata (a column's value count) makes the group end early
                raise pa.ArrowInvalid(f"the row group decoded {row - bounds[g]} of the {sizes[g]} rows its "
                                      f"metadata lists")
    except InputError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        _damaged_row_group(reporter, source.path, g, bounds[g], bounds[g + 1], row, held.passed, hi, exc)
        return
    yield from held.release(hi)


def _damaged_row_group(reporter: Reporter, path: str, group: int, first: int, end: int, row: int,
                       passed: int, hi: int, exc: BaseException) -> None:
    """Raise, or count the rows ``[passed, hi)`` of a damaged row group as skipped."""
    where = (f"{path}: Parquet row group {group} (rows {first}..{end - 1}) is damaged: reading it failed at "
             f"row {row} ({type(exc).__name__}: {exc})")
    if reporter.raise_errors:
        raise InputError(f"{where}. Re-download or re-write the file, or read with on_error='skip' to skip "
                         f"this row group and count its rows", path=path, row=row, reason="corrupt_row_group")
    count = hi - passed
    reporter.skips.add("corrupt_row_group", path=path, row=passed, count=count,
                       message=f"{where}; its {count} rows from row {passed} were skipped. Re-download or "
                               f"re-write the file")


def _columnar_arrays(source, column: str, start: int, stop: int | None, batch_start: int | None):
    """``(text array, row of its first element)`` for the record batches of an
    Arrow IPC or Feather file that may overlap ``[start, stop)``, in row order.
    ``batch_start``: the index of the batch whose first row is ``start`` (a
    unit cut at record batches, :func:`arrow_batch_rows`): an IPC file goes
    straight to it, a stream reads past the batches before it (memory-mapped:
    zero-copy, but an IPC-compressed stream decompresses their text column);
    ``None``: counted from the first batch."""
    import pyarrow.ipc as ipc

    path, fmt = source.path, source.format
    with _mapped(path) as mapped:
        if fmt in ("arrow_file", "feather"):
            schema = ipc.open_file(mapped).schema
        else:
            schema = ipc.open_stream(mapped).schema
    index = text_field_index(schema, column, path)
    options = ipc.IpcReadOptions(included_fields=[index])
    with _mapped(path) as mapped:
        first, skip = (0, 0) if batch_start is None else (start, batch_start)
        if fmt in ("arrow_file", "feather"):
            reader = ipc.open_file(mapped, options=options)
            batches = (reader.get_batch(i) for i in range(skip, reader.num_record_batches))
        else:
            batches = ipc.open_stream(mapped, options=options)
            for _ in range(skip):
                batches.read_next_batch()
        for batch in batches:
            yield batch.column(0), first
            first += batch.num_rows
            if stop is not None and first >= stop:
                return
