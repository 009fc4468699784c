"""The corpus a job reads, as one value.  Internal.

:class:`Corpus` carries the input options every corpus job takes (inputs,
column, text mode, format, split, on-error rule, unit size, largest document) instead of loose
keywords, and knows its sources, work units, batches and fingerprint through
:mod:`ube_stream.readers` (``resolve_inputs`` / ``plan_units`` /
``read_unit``)::

    corpus = Corpus(["data/"], column="text", unit_rows=10_000)
    sources = corpus.sources()
    for unit in corpus.units(sources):
        for batch in corpus.batches(unit):
            ...

A unit task carries :meth:`Corpus.reading` (the options without the inputs:
a unit names its own file), so task messages stay small.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, Iterator, List, Optional

__all__ = ["Corpus", "source_fingerprint"]


@dataclasses.dataclass(frozen=True)
class Corpus:
    """Inputs and reading options; ``unit_rows`` / ``unit_bytes`` None take the
    readers' defaults, ``even_bytes`` shares each file's bytes evenly over its
    units (the encoder's plan; see :func:`ube_stream.readers.plan_units`)."""

    inputs: Any = ()
    column: str = "text"
    text_mode: str = "line"
    format: Optional[str] = None
    split: Optional[str] = None
    on_error: str = "raise"
    unit_rows: Optional[int] = None
    unit_bytes: Optional[int] = None
    even_bytes: bool = False
    max_document_bytes: Optional[int] = None   # None: the readers' default (1 GiB)

    def check(self) -> "Corpus":
        """ValueError naming a bad option, before any work."""
        from ..readers import TEXT_MODES
        from ..readers.batch import check_max_document_bytes, check_on_error

        check_on_error(self.on_error)
        if self.max_document_bytes is not None:
            check_max_document_bytes(self.max_document_bytes)
        if self.text_mode not in TEXT_MODES:
            raise ValueError(f"text_mode must be one of {TEXT_MODES}, got {self.text_mode!r}")
        return self

    @property
    def in_memory(self) -> bool:
        from ..readers import is_paths

        return not is_paths(self.inputs)

    @property
    def document_cap(self) -> int:
        """The largest document read, in UTF-8 bytes (``max_document_bytes`` or the readers' default)."""
        from ..readers.batch import DEFAULT_MAX_DOCUMENT_BYTES

        return self.max_document_bytes or DEFAULT_MAX_DOCUMENT_BYTES

    def reading(self) -> "Corpus":
        """The reading options alone (no inputs), for unit tasks."""
        return dataclasses.replace(self, inputs=())

    def sources(self, skipped_files: Optional[List[Any]] = None):
        """The input files as ``readers.Source`` s (sorted, numbered)."""
        from ..readers import resolve_inputs

        return resolve_inputs(self.inputs, column=self.column, text_mode=self.text_mode, on_error=self.on_error,
                              format=self.format, split=self.split, skipped_files=skipped_files)

    def units(self, sources) -> List[Any]:
        """The work units of ``sources`` (``readers.WorkUnit``, in unit-id order)."""
        from ..readers import DEFAULT_UNIT_BYTES, DEFAULT_UNIT_ROWS, plan_units

        return plan_units(sources, unit_rows=self.unit_rows or DEFAULT_UNIT_ROWS,
                          unit_bytes=self.unit_bytes or DEFAULT_UNIT_BYTES, even_bytes=self.even_bytes)

    def batches(self, unit, *, skips=None, batch_rows: Optional[int] = None) -> Iterator[Any]:
        """The documents of ``unit`` as ``TextBatch`` es, in row order (skips counted in ``skips``)."""
        from ..readers import read_unit

        extra = {} if batch_rows is None else {"batch_rows": batch_rows}
        return read_unit(unit, column=self.column, text_mode=self.text_mode, on_error=self.on_error,
                         skips=skips, max_document_bytes=self.document_cap, **extra)

    def blocks(self, unit, *, skips=None, batch_rows: Optional[int] = None) -> Iterator[Any]:
        """:meth:`batches` as parse jobs (``readers.read_unit_blocks``): reading in one thread, parsing in any."""
        from ..readers import read_unit_blocks

        extra = {} if batch_rows is None else {"batch_rows": batch_rows}
        return read_unit_blocks(unit, column=self.column, text_mode=self.text_mode, on_error=self.on_error,
                                skips=skips, max_document_bytes=self.document_cap, **extra)

    def fingerprint(self, sources) -> List[Dict[str, Any]]:
        """What identifies the bytes read: every source's path, size and
        modification time (URL: size and ETag), format, compression, rows."""
        return [dict(source_fingerprint(s.path), format=s.format, compression=s.compression, num_rows=s.num_rows)
                for s in sources]


def source_fingerprint(path: str) -> Dict[str, Any]:
    """Size and modification time (URL: size and ETag/mtime) of an input file."""
    from ..storage import is_url

    if is_url(path):
        from ..storage import filesystem

        fs, inner = filesystem(path)
        info = fs.info(inner)
        version = next((str(info[k]) for k in ("ETag", "etag", "mtime", "LastModified", "last_modified")
                        if info.get(k) is not None), None)
        return {"path": path, "size": info.get("size"), "version": version}
    st = os.stat(path)
    return {"path": path, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
