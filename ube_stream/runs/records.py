"""The commit protocol of a run's work: one keyed plan, one commit record per
unit, and the cleanup of leftovers, on a local directory or an object store.  Internal.

* **The plan** (:class:`RunPlan`): what a run computes (its options, inputs
  and units), shared by every process of the run (ranks, hosts).  Created
  exclusively (locally a unique temporary file hard-linked to the name, so
  exactly one creator wins even across hosts; on an object store, which has
  no exclusive create, the first plan uploaded stands), then compared by every
  process, the creator included: processes started with other options can
  never both write.  :func:`differences` names what differs.
* **Commit records** (:class:`UnitRecords`): ``<directory>/<unit name><suffix>``,
  written whole after the unit's own files (locally under a temporary name
  renamed into place, on an object store in one PUT): **the record is the
  unit's commit point**.  :meth:`UnitRecords.committed` returns the records
  that exist, parse and pass the caller's check of the unit's files; any other
  unit is redone from scratch.  Training keeps its count tables' records so
  (``tables/<unit>.json``), encoding its unit markers (``units/<unit>.json``),
  verification its unit results (``units/<hash of unit>.pickle``).
* **Cleanup** (:func:`list_names`, :func:`remove_files`, :func:`remove_tree`):
  the same calls on both forms.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
import shutil
import stat
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from ..errors import UbeError
from ..storage import (
    MAX_JSON_BYTES,
    TMP_SUFFIX,
    atomic_write_bytes,
    create_exclusive,
    dumps_json,
    filesystem,
    is_url,
    join,
    object_sizes,
)
from ..storage import exists as storage_exists

__all__ = ["RunPlan", "UnitRecords", "differences", "shown_differences", "list_names", "remove_files",
           "remove_tree"]

#: ``check(unit_id, record, source) -> bool``: whether the unit's files agree with its record
Check = Callable[[str, Any, str], bool]


def differences(recorded: Dict[str, Any], wanted: Dict[str, Any]) -> List[str]:
    """The keys of ``wanted`` (dotted into nested dicts) whose values ``recorded`` does not hold."""
    out = []
    for key in wanted:
        if recorded.get(key) != wanted[key]:
            if isinstance(wanted[key], dict) and isinstance(recorded.get(key), dict):
                out += [f"{key}.{d}" for d in differences(recorded[key], wanted[key])]
            else:
                out.append(key)
    return out


def _lookup(doc: Dict[str, Any], dotted: str) -> Any:
    value: Any = doc
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def shown_differences(recorded: Dict[str, Any], wanted: Dict[str, Any], different: List[str]) -> str:
    """``key: X recorded, Y now`` for each differing key (long values cut)."""
    def shown(value: Any) -> str:
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."

    return "; ".join(f"{key}: {shown(_lookup(recorded, key))} recorded, {shown(_lookup(wanted, key))} now"
                     for key in different[:6])


# --------------------------------------------------------------------------- both forms

def list_names(directory: str) -> Optional[List[str]]:
    """Names directly under ``directory`` (a path or URL), sorted; None when it does not exist."""
    if is_url(directory):
        fs, inner = filesystem(directory)
        try:
            names = fs.ls(inner, detail=False, refresh=True)
        except FileNotFoundError:
            return None
        return sorted({str(name).rstrip("/").rsplit("/", 1)[-1] for name in names})
    try:
        return sorted(os.listdir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return None


def remove_files(paths: List[str]) -> None:
    """Delete ``paths`` (all local, or all URLs of one store); missing ones are fine."""
    if not paths:
        return
    if is_url(paths[0]):
        fs, _ = filesystem(paths[0])
        with contextlib.suppress(FileNotFoundError):
            fs.rm([filesystem(path)[1] for path in paths])
        fs.invalidate_cache()
        return
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def remove_tree(directory: str) -> None:
    """Delete ``directory`` (a path or URL prefix) and all it holds; a missing one is fine."""
    if is_url(directory):
        fs, inner = filesystem(directory)
        with contextlib.suppress(FileNotFoundError):
            fs.rm(inner, recursive=True)
        fs.invalidate_cache(inner.rsplit("/", 1)[0])
        return
    shutil.rmtree(directory, ignore_errors=True)


def _read_local(path: str) -> Optional[bytes]:
    """The bytes of the regular file ``path`` of at most ``MAX_JSON_BYTES``; None otherwise."""
    try:
        with open(path, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NONBLOCK)) as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_JSON_BYTES:
                return None
            return f.read(MAX_JSON_BYTES + 1)
    except OSError:
        return None


# --------------------------------------------------------------------------- the plan

class RunPlan:
    """The plan file at ``path`` (local or URL); ``read(path)`` reads and checks
    one (raising a clear error for a corrupt file)."""

    def __init__(self, path: str, *, read: Callable[[str], Dict[str, Any]]):
        self.path = path
        self.read = read

    def recorded(self) -> Optional[Dict[str, Any]]:
        """The recorded plan, or None when there is none."""
        return self.read(self.path) if storage_exists(self.path) else None

    def create_or_compare(self, plan: Dict[str, Any]) -> Tuple[Dict[str, Any], List[str]]:
        """Create the plan if none exists (see the module), then compare:
        ``(recorded plan, keys of plan that differ from it)``."""
        data = dumps_json(plan).encode("utf-8")
        if not is_url(self.path):
            create_exclusive(self.path, data)
        elif not storage_exists(self.path):
            atomic_write_bytes(self.path, data, unique=True)
        recorded = self.read(self.path)
        return recorded, differences(recorded, plan)


# --------------------------------------------------------------------------- commit records

def _json_record(data: bytes, source: str) -> Any:
    return json.loads(data.decode("utf-8"))


def _json_bytes(record: Any) -> bytes:
    return dumps_json(record).encode("utf-8")


#: what a record that cannot be read raises (the unit then counts as not committed)
_UNREADABLE = (UbeError, pickle.UnpicklingError, ValueError, KeyError, TypeError, EOFError, AttributeError, ImportError, IndexError,
               OSError, RecursionError)


class UnitRecords:
    """The commit records of a run's units under ``directory`` (a path or URL).

    ``suffix``, ``dump(record) -> bytes`` and ``load(bytes, source) -> record``
    choose the file format (default: JSON, ``dumps_json``); ``hashed_names``
    names a unit's file by a hash of its id (ids that are not file names);
    ``ignore``: names in the directory that are not records (a plan)."""

    def __init__(self, directory: str, *, suffix: str = ".json", hashed_names: bool = False,
                 dump: Callable[[Any], bytes] = _json_bytes, load: Callable[[bytes, str], Any] = _json_record,
                 ignore: Tuple[str, ...] = ()):
        self.directory = directory
        self.suffix = suffix
        self.hashed_names = hashed_names
        self.dump = dump
        self.load = load
        self.ignore = ignore

    def path(self, unit_id: str) -> str:
        name = hashlib.sha256(unit_id.encode("utf-8")).hexdigest()[:24] if self.hashed_names else unit_id
        return join(self.directory, name + self.suffix)

    def commit(self, unit_id: str, record: Any, *, unique: bool = False) -> None:
        """Write the unit's record: its commit point (call it after the unit's
        files are in place).  ``unique``: a temporary name of this process's own,
        for attempts of one unit that may overlap (a cluster's retries)."""
        atomic_write_bytes(self.path(unit_id), self.dump(record), unique=unique)

    def committed(self, unit_ids: Iterable[str], check: Optional[Check] = None) -> Dict[str, Any]:
        """``{unit_id: record}`` of the units among ``unit_ids`` that are
        committed: record present, readable and, with ``check``, agreeing with
        the unit's files.  On a store: one listing, then the records fetched together."""
        wanted = {self.path(unit_id): unit_id for unit_id in unit_ids}
        if is_url(self.directory):
            raw = self._fetch_remote(wanted)
        else:
            raw = {path: _read_local(path) for path in wanted}
        out: Dict[str, Any] = {}
        for path, data in raw.items():
            if data is None:
                continue
            unit_id = wanted[path]
            try:
                record = self.load(data, path)
                if check is None or check(unit_id, record, path):
                    out[unit_id] = record
            except _UNREADABLE:     # a UbeError of the caller's parser is one too
                continue
        return out

    def _fetch_remote(self, wanted: Dict[str, str]) -> Dict[str, Optional[bytes]]:
        fs, inner = filesystem(self.directory)
        sizes = object_sizes(fs, inner)
        present = sorted(path for path in wanted
                         if sizes.get(path.rsplit("/", 1)[-1], MAX_JSON_BYTES + 1) <= MAX_JSON_BYTES)
        if not present:
            return {}
        paths = {filesystem(path)[1]: path for path in present}
        contents = fs.cat(list(paths), on_error="omit")
        return {url: (bytes(contents[inner_path]) if inner_path in contents else None)
                for inner_path, url in paths.items()}

    def any_recorded(self) -> bool:
        """Whether any unit has a record file (read or not)."""
        return any(name.endswith(self.suffix) and name not in self.ignore
                   for name in list_names(self.directory) or [])

    def uncommit(self, unit_id: str) -> None:
        """Remove the unit's record and the temporary files of unfinished commits
        (before the unit is redone)."""
        remove_files(self.temporaries(unit_id) + [self.path(unit_id)])

    def temporaries(self, unit_id: str) -> List[str]:
        """Temporary files that unfinished commits of the unit left (``.tmp``,
        or ``.tmp.<host>.<pid>`` of unique ones)."""
        base = os.path.basename(self.path(unit_id))
        return [join(self.directory, n) for n in list_names(self.directory) or [] if n.startswith(base + TMP_SUFFIX)]
