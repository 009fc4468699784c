"""Where ``train`` keeps its intermediate files, so a crash loses no counting
and leaves nothing behind that a rerun does not find.  Internal.

Layout (``<root>`` is ``work_dir`` when given, else ``<output>.ube-work``
beside a local output file, else ``$TMPDIR/ube-train-<uid>``)::

    <root>/run-<key>/lock             the driver's flock (ube_stream/runs/run_dir.py): born with the directory
    <root>/run-<key>/key.json         what the key hashes (for a person reading the directory)
    <root>/run-<key>/tables/<unit>.npz   a finished unit's chunk-count table (phase 1)
    <root>/run-<key>/tables/<unit>.spans.npz   SuperBPE only: its span-count table (keys: chunks joined by 0xFF)
    <root>/run-<key>/tables/<unit>.json  its record, written after the table: the unit's commit point
    <root>/run-<key>/tmp/             in-memory inputs spilled to a file, the reduce's key-range tables

``<key>`` hashes everything that determines the phase-1 tables: the package
and table-format versions, the pre-tokenization pattern, SuperBPE's span
rule when SuperBPE is on (plain runs keep their keys), the column, text
mode, ``on_error``, the work units (``unit_rows``) with their byte budgets
(``max_bytes``), and every input's path, size and modification time (for a
URL: size, ETag or modification time).  Phase-2 options (``vocab_size``,
substrate, ``min_frequency``, ...) do not change the tables, so a rerun with
other phase-2 options reuses them too; any change to an input or a phase-1
option gives another key, so a stale table is never read.

A run claims ``run-<key>`` (:class:`~ube_stream.runs.RunDir`: the directory
is created with its lock held in one atomic rename, or its lock taken when it
exists; a second live run of the same training stops with
:class:`~ube_stream.errors.LockError`), removes every other ``run-*``
directory under ``<root>`` that no live run holds (a dead run, or a finished
one that could not clean up: the lock is an ``flock`` the OS releases when
its holder dies, so cleanup never removes a live run, however many start at
once), and clears its own ``tmp/`` and unfinished temporary files.  The
tokenizer file is written before anything is removed; on success the run
directory is removed (and ``<root>`` when it is the default and empty).  On
failure ``tables/`` stays for the rerun.  In-memory inputs get a fresh key
per run (their documents are not fingerprinted): their tables are not
reused, but their leftovers are removed like any dead run's.  So does a
training without ``output`` or ``work_dir`` (root in ``$TMPDIR``) whose run
directory a live process holds (the same training started twice at once):
the two work apart instead of failing.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import uuid
import warnings
from typing import Any, Dict, Iterable, Optional

from ..errors import LockError
from ..runs.corpus import source_fingerprint
from ..runs.records import UnitRecords
from ..runs.run_dir import RunDir, make_root, remove_dead_runs
from ..storage import TMP_SUFFIX, atomic_write_json, dumps_json, is_url, local_path

__all__ = ["WORK_SUFFIX", "work_root", "source_fingerprint", "run_key", "TrainWork"]

WORK_SUFFIX = ".ube-work"
RUN_PREFIX = "run-"


def work_root(output: Optional[str], work_dir: Optional[str]) -> tuple[str, bool]:
    """``(root, is_default)``: where the run directories of a training live."""
    if work_dir is not None:
        return local_path(work_dir), False
    if output is not None and not is_url(os.fspath(output)):
        return local_path(output) + WORK_SUFFIX, True
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return os.path.join(tempfile.gettempdir(), f"ube-train-{uid}"), True


def run_key(parts: Dict[str, Any]) -> str:
    """A short hex key of a JSON-able description of the phase-1 work."""
    return hashlib.sha256(dumps_json(parts).encode("utf-8")).hexdigest()[:24]


class TrainWork:
    """One training's run directory (see the module).  Use as a context manager."""

    def __init__(self, root: str, key: Optional[str], description: Dict[str, Any], *, default_root: bool,
                 private_if_busy: bool = False):
        self.root = root
        self.default_root = default_root
        self.private_if_busy = private_if_busy
        self.description = description
        self._place(key)

    def _place(self, key: Optional[str]) -> None:
        self.resumable = key is not None
        self.key = key if key is not None else "private-" + uuid.uuid4().hex[:16]
        self.run = RunDir(self.root, RUN_PREFIX + self.key, "the training work directory")
        self.dir = self.run.path
        self.tables = os.path.join(self.dir, "tables")
        self.tmp = os.path.join(self.dir, "tmp")

    # ------------------------------------------------------------------ lifetime

    def __enter__(self) -> "TrainWork":
        make_root(self.root)
        self.remove_dead_runs()
        try:
            self.run.claim()         # the directory exists with its lock held: no other run removes it
        except LockError:
            if not self.private_if_busy:
                raise
            self._place(None)        # the same training runs elsewhere (shared $TMPDIR): work apart, no resume
            self.run.claim()
        try:
            os.makedirs(self.tables, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(self.tmp)
            for name in os.listdir(self.tables):
                if TMP_SUFFIX in name:             # a table or record a killed worker did not finish
                    os.unlink(os.path.join(self.tables, name))
            os.makedirs(self.tmp)
            atomic_write_json(os.path.join(self.dir, "key.json"), dict(self.description, key=self.key))
        except BaseException:
            self.run.release()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        with contextlib.suppress(OSError):
            shutil.rmtree(self.tmp)
        if not self.resumable:
            self._remove_run_dir()
            return
        self.run.release()

    def finish(self) -> None:
        """The training is done (its tokenizer written): remove the run directory.
        A failure here is a warning, never an error: the result is already safe."""
        self._remove_run_dir()

    def _remove_run_dir(self) -> None:
        try:
            self.run.remove()
            if self.default_root:
                with contextlib.suppress(OSError):
                    os.rmdir(self.root)       # only when empty
        except OSError as exc:
            self.run.release()
            warnings.warn(f"{self.dir}: could not remove the training's work directory ({exc}); the result is "
                          f"complete, delete it by hand (the next training there removes it too)",
                          RuntimeWarning, stacklevel=3)

    def remove_dead_runs(self) -> None:
        """Remove the ``run-*`` directories under the root that no live run holds."""
        remove_dead_runs(self.root, RUN_PREFIX, keep=self.dir)

    # ------------------------------------------------------------------ finished units

    def table_path(self, unit_id: str, suffix: str = ".npz") -> str:
        return os.path.join(self.tables, unit_id + suffix)

    def finished(self, unit_ids: Iterable[str]) -> Dict[str, Dict[str, Any]]:
        """``{unit_id: record}`` of the units a previous run of this key finished
        (:class:`~ube_stream.runs.records.UnitRecords`: record present and
        readable, table present and intact when the record names one: a damaged
        table is counted again)."""
        if not self.resumable:
            return {}
        return UnitRecords(self.tables).committed(unit_ids, check=self._tables_intact)

    def _tables_intact(self, unit_id: str, record: Any, source: str) -> bool:
        from .chunk_table import table_intact

        return (isinstance(record, dict) and record.get("unit_id") == unit_id
                and (not record.get("table") or table_intact(self.table_path(unit_id)))
                and (not record.get("span_table") or table_intact(self.table_path(unit_id, ".spans.npz"))))
