"""Shard directories on object storage (``s3://``, ``gs://``, any fsspec URL).  Internal.

**Writing** (:func:`encode_unit_remote`, driven by
:func:`ube_stream.shards.encode_corpus`).  Object stores have no rename and no
locks, so the local protocol (temporary names renamed into place, lock
files with pids) becomes:

* a worker encodes its unit into a private local staging directory with the
  ordinary :func:`~ube_stream.shards.writer.encode_unit`, then uploads the
  unit's shard files, each in one PUT, under their final names
  (``shards/<unit_id>-<k>.tokens`` / ``.idx``: unique to the unit, and their
  bytes are a pure function of the run plan, so two attempts at one unit
  write the very same bytes);
* then it PUTs the unit marker ``units/<unit_id>.json``: **the marker is the
  commit point**.  A unit counts as committed when its marker exists and every
  shard it lists exists with the recorded size; anything else is redone, and
  the redo overwrites the leftovers with identical bytes;
* ``MANIFEST.json`` is PUT last of all, after every unit is committed and
  unlisted objects under ``shards/`` are deleted; then ``units/`` is removed.
  A directory without ``MANIFEST.json`` is unfinished, whatever else it holds.

A crash at any point therefore leaves either a committed unit or an
uncommitted one, and a rerun of the same command resumes.  Two writers on one
URL are not detected (there is no lock): they do the same work twice and
write the same bytes, so the result is still correct; the plan file
(``units/_plan.json``) stops a rerun with *other* settings.

**Reading** (:func:`cached_directory`).  :class:`~ube_stream.shards.TokenShards`
on a URL downloads the directory once into a local cache and memory-maps the
copy: ``$UBE_STREAM_CACHE/shards/<key>/`` (default
``~/.cache/ube-stream/shards/<key>/``), where ``<key>`` hashes the URL and the
bytes of its ``MANIFEST.json``, so a re-encoded directory gets a fresh copy.
Files are downloaded to temporary names and renamed; the cached
``MANIFEST.json`` is written last, so an interrupted download is resumed.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import Any, Dict, Iterable, List, Optional

from .._faults import kill_point
from ..errors import ShardFormatError
from ..storage import atomic_write_bytes, atomic_write_json, cache_root, filesystem, join
from . import index_format as fmt
from .writer import encode_unit

__all__ = ["encode_unit_remote", "remote_committed_records", "remote_entries", "cached_directory"]


def remote_entries(url: str) -> Optional[List[str]]:
    """Names directly under ``url`` (None when nothing is there)."""
    fs, inner = filesystem(url)
    try:
        if fs.isfile(inner):
            raise ShardFormatError(f"{url}: exists and is an object, not a directory prefix; choose another "
                                   f"output")
        names = fs.ls(inner, detail=False, refresh=True)
    except FileNotFoundError:
        return None
    return sorted({str(name).rstrip("/").rsplit("/", 1)[-1] for name in names})


def _sizes(fs: Any, prefix: str) -> Dict[str, int]:
    """``{name: size}`` of the objects directly under ``prefix``."""
    try:
        entries = fs.ls(prefix, detail=True, refresh=True)
    except FileNotFoundError:
        return {}
    return {str(e["name"]).rsplit("/", 1)[-1]: int(e.get("size") or 0) for e in entries
            if e.get("type") != "directory"}


def remote_committed_records(url: str, unit_ids: Iterable[str]) -> Dict[str, Dict[str, Any]]:
    """The committed units among ``unit_ids``: marker present and every shard it
    lists present with the recorded sizes.  One listing of ``units/`` and of
    ``shards/``, one GET per marker."""
    fs, inner = filesystem(url)
    wanted = set(unit_ids)
    markers = {name[:-len(".json")] for name in _sizes(fs, f"{inner}/{fmt.UNITS_DIR}")
               if name.endswith(".json") and name[:-len(".json")] in wanted}
    if not markers:
        return {}
    sizes = _sizes(fs, f"{inner}/{fmt.SHARDS_DIR}")
    paths = [f"{inner}/{fmt.UNITS_DIR}/{unit_id}.json" for unit_id in sorted(markers)]
    contents = fs.cat(paths, on_error="omit")
    out: Dict[str, Dict[str, Any]] = {}
    for unit_id, path in zip(sorted(markers), paths):
        raw = contents.get(path)
        if raw is None:
            continue
        try:
            record = json.loads(bytes(raw).decode("utf-8"))
            good = all(sizes.get(shard["tokens_file"].rsplit("/", 1)[-1]) == fmt.TOKEN_WIDTH * shard["tokens"]
                       and sizes.get(shard["index_file"].rsplit("/", 1)[-1]) == shard["index_bytes"]
                       for shard in record["shards"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            continue
        if good and record.get("unit_id") == unit_id:
            out[unit_id] = record
    return out


def encode_unit_remote(task: Dict[str, Any]) -> Dict[str, Any]:
    """:func:`~ube_stream.shards.writer.encode_unit` for an output URL (see the
    module): encode into a local staging directory, upload the shard files,
    then PUT the marker (the commit point).  Returns the marker record."""
    url = task["out_dir"]
    unit_id = task["unit"].unit_id
    fs, inner = filesystem(url)
    with tempfile.TemporaryDirectory(prefix=f"ube-unit-{unit_id}-") as staging:
        for sub in (fmt.SHARDS_DIR, fmt.UNITS_DIR, fmt.LOCKS_DIR):
            os.makedirs(os.path.join(staging, sub))
        record = encode_unit(**dict(task, out_dir=staging, dispatched=False))
        for shard in record["shards"]:
            for key in ("index_file", "tokens_file"):
                fs.put_file(os.path.join(staging, shard[key]), f"{inner}/{shard[key]}")
        kill_point(url, unit_id)
        atomic_write_json(join(url, fmt.UNITS_DIR, unit_id + ".json"), record)   # the commit point
    return record


def cached_directory(url: str) -> str:
    """A local copy of the finished shard directory at ``url`` (downloaded once
    per MANIFEST; see the module); returns its path."""
    fs, inner = filesystem(url)
    manifest_key = f"{inner}/{fmt.MANIFEST_NAME}"
    try:
        manifest_bytes = bytes(fs.cat_file(manifest_key))
    except FileNotFoundError:
        names = remote_entries(url)
        if names is None:
            raise ShardFormatError(f"{url}: no such shard directory; encode one with `ube encode`") from None
        if fmt.UNITS_DIR in names or fmt.SHARDS_DIR in names:
            raise ShardFormatError(f"{url}/{fmt.MANIFEST_NAME}: missing: the directory is unfinished (an "
                                   f"encoding run was stopped, or not every rank has run). Rerun the same "
                                   f"`ube encode` command to complete it, or run the missing ranks and "
                                   f"finalize (finalize=True)") from None
        raise ShardFormatError(f"{url}/{fmt.MANIFEST_NAME}: missing: {url} is not a shard directory") from None
    key = hashlib.sha256(url.rstrip("/").encode("utf-8") + b"\0" + manifest_bytes).hexdigest()[:24]
    local = os.path.join(cache_root(), "shards", key)
    if os.path.exists(os.path.join(local, fmt.MANIFEST_NAME)):
        return local
    try:
        manifest = json.loads(manifest_bytes.decode("utf-8"))
        names = [manifest["tokenizer"].get("file", fmt.TOKENIZER_NAME)]
        for shard in manifest["shards"]:
            names += [shard["index_file"], shard["tokens_file"]]
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
        raise ShardFormatError(f"{url}/{fmt.MANIFEST_NAME}: not a valid shard manifest ({exc}); the file is "
                               f"corrupt. Re-encode the directory") from None
    for name in names:
        target = os.path.join(local, name)
        if os.path.exists(target):
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = f"{target}{fmt.TMP_SUFFIX}.{os.getpid()}"
        try:
            fs.get_file(f"{inner}/{name}", tmp)
        except FileNotFoundError:
            raise ShardFormatError(f"{url}/{name}: listed in MANIFEST.json but missing from the store; the "
                                   f"directory is damaged. Re-encode it") from None
        os.replace(tmp, target)
    atomic_write_bytes(os.path.join(local, fmt.MANIFEST_NAME), manifest_bytes, unique=True)  # the cache's commit
    return local
