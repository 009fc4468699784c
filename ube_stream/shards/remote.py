"""Shard directories on object storage (``s3://``, ``gs://``, any fsspec URL).  Internal.

**Writing** (:func:`encode_unit_remote`, driven by
:func:`ube_stream.shards.encode_corpus`).  Object stores have no rename and no
locks, so the local protocol (temporary names renamed into place, ``flock``
lock files) becomes the object-store form of the run engine's commit protocol
(:mod:`ube_stream.runs.records`):

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
(``units/_plan.json``) stops a rerun with *other* settings.  A worker stages
in ``$TMPDIR/ube-unit-<host>-<pid>-<unit>-*``; a killed worker's staging
directory is removed by the next unit that starts on that host.

**Reading** (:class:`RemoteShards`).  :class:`~ube_stream.shards.TokenShards`
on a URL reads the directory where it lives, fetching files on first use into
a local cache of bounded size, ``$UBE_STREAM_CACHE/shards/<key>/`` (default
``~/.cache/ube-stream/shards/<key>/``; ``<key>`` hashes the URL and the bytes
of its ``MANIFEST.json``, so a re-encoded directory gets fresh files):

1. ``MANIFEST.json`` is read (its size bounded by the listing) and **every
   name in it is checked before anything is downloaded or written**: a
   relative ``/``-separated path inside the directory (no absolute path, no
   ``..``, no empty or ``.`` part, no backslash or NUL; token files end in
   ``.tokens``, index files in ``.idx``), listed by the store
   with exactly the size the manifest implies (``4 * tokens`` for a token
   file, the index size for ``documents``; the tokenizer file at most
   :data:`MAX_TOKENIZER_BYTES`).  Downloads read at most that many bytes.
2. The tokenizer file and every index file (about 20 bytes per document) are
   fetched at open, many GETs at once; then the cached ``MANIFEST.json`` is
   written: the cache's commit point.
3. Token files are fetched when first read: a sample or document is served
   from the 16 MiB blocks (:data:`BLOCK_BYTES`, one ranged GET each) that hold
   it, so the first sample of a directory of 1 GiB shards costs one small
   GET, not a shard; a caller that needs a whole token file as one array
   (``Shard.tokens``: ``iter_docs``, ``verify="full"``, ``export-megatron``)
   fetches the whole file, and its blocks are dropped.
4. The cache holds at most ``cache_limit`` bytes (argument, else
   ``$UBE_STREAM_CACHE_LIMIT``, else :data:`~ube_stream.storage.DEFAULT_CACHE_LIMIT`)
   over every directory in it: before a download, the least recently used
   token files and blocks (any directory's; access time = mtime, touched on
   use) are deleted until the new file fits.  Tokenizer and index files are
   not evicted while their directory is cached (they are counted).  A memory
   map that is open in some process keeps its evicted file's pages until it is
   closed, as POSIX unlink does.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import tempfile
from typing import Any, Dict, Iterable, List, Optional, Tuple

import numpy as np

from .._faults import kill_point
from ..errors import ShardFormatError, StorageError
from ..runs.lock import pid_alive
from ..runs.records import list_names
from ..storage import (
    atomic_open,
    atomic_write_bytes,
    cache_root,
    filesystem,
    hostname,
    load_json,
    object_sizes,
    resolve_cache_limit,
)
from . import index_format as fmt
from .schema import check_shard_file
from .writer import encode_unit, unit_markers

__all__ = ["encode_unit_remote", "remote_committed_records", "remote_entries", "RemoteShards", "cached_directory",
           "BLOCK_BYTES"]


def remote_entries(url: str) -> Optional[List[str]]:
    """Names directly under ``url`` (None when nothing is there)."""
    fs, inner = filesystem(url)
    with contextlib.suppress(FileNotFoundError):
        if fs.isfile(inner):
            raise ShardFormatError(f"{url}: exists and is an object, not a directory prefix; choose another "
                                   f"output")
    return list_names(url)


def remote_committed_records(url: str, unit_ids: Iterable[str]) -> Dict[str, Dict[str, Any]]:
    """The committed units among ``unit_ids``: marker present and every shard it
    lists present with the recorded sizes.  One listing of ``units/`` and of
    ``shards/``, one GET per marker (of at most ``MAX_JSON_BYTES``); a marker is
    checked as the local reader checks it (:func:`~.writer.unit_markers`), and
    one that fails counts as not committed (the unit is encoded again)."""
    fs, inner = filesystem(url)
    listed: List[Dict[str, int]] = []

    def files_agree(unit_id: str, record: Dict[str, Any], source: str) -> bool:
        if not listed:                      # one listing of shards/, on the first marker found
            listed.append(object_sizes(fs, f"{inner}/{fmt.SHARDS_DIR}"))
        sizes = listed[0]
        return record["unit_id"] == unit_id and all(
            sizes.get(shard["tokens_file"].rsplit("/", 1)[-1]) == fmt.TOKEN_WIDTH * shard["tokens"]
            and sizes.get(shard["index_file"].rsplit("/", 1)[-1]) == shard["index_bytes"]
            for shard in record["shards"])

    return unit_markers(url).committed(unit_ids, check=files_agree)


def _staging_prefix() -> str:
    return f"ube-unit-{hostname()}-"


def remove_dead_staging() -> None:
    """Remove the staging directories (``$TMPDIR/ube-unit-<host>-<pid>-<unit>-*``)
    that killed workers of this host left behind (their pid is gone)."""
    root, prefix = tempfile.gettempdir(), _staging_prefix()
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        pid_text = name[len(prefix):].partition("-")[0] if name.startswith(prefix) else ""
        if pid_text.isdigit() and int(pid_text) != os.getpid() and not pid_alive(int(pid_text)):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def encode_unit_remote(task: Dict[str, Any]) -> Dict[str, Any]:
    """:func:`~ube_stream.shards.writer.encode_unit` for an output URL (see the
    module): encode into a local staging directory, upload the shard files,
    then PUT the marker (the commit point).  Returns the marker record."""
    url = task["out_dir"]
    unit_id = task["unit"].unit_id
    fs, inner = filesystem(url)
    remove_dead_staging()
    with tempfile.TemporaryDirectory(prefix=f"{_staging_prefix()}{os.getpid()}-{unit_id}-") as staging:
        for sub in (fmt.SHARDS_DIR, fmt.UNITS_DIR, fmt.LOCKS_DIR):
            os.makedirs(os.path.join(staging, sub))
        record = encode_unit(**dict(task, out_dir=staging, dispatched=False))
        for shard in record["shards"]:
            for key in ("index_file", "tokens_file"):
                fs.put_file(os.path.join(staging, shard[key]), f"{inner}/{shard[key]}")
        kill_point(url, unit_id)
        unit_markers(url).commit(unit_id, record)   # the commit point
    return record


# --------------------------------------------------------------------------- reading

#: bytes of one cached block of a token file (a multiple of the token width)
BLOCK_BYTES = 16 << 20
#: the largest tokenizer file a remote directory may name
MAX_TOKENIZER_BYTES = 512 << 20
#: the largest MANIFEST.json read from a store
MAX_MANIFEST_BYTES = 1 << 30
_COPY_BYTES = 8 << 20
_INDEX_BATCH = 64


def _check_name(url: str, field: str, name: Any) -> str:
    """``name`` if it is a safe relative path inside the directory, else a ShardFormatError."""
    parts = name.split("/") if isinstance(name, str) else []
    if (not parts or name.startswith("/") or "\\" in name or "\0" in name
            or any(part in ("", ".", "..") for part in parts)):
        raise ShardFormatError(f"{url}/{fmt.MANIFEST_NAME}: field {field} is {name!r:.120}; shard directory files "
                               f"must be relative paths inside the directory (no absolute path, no '..'). The "
                               f"manifest is corrupt or hostile: nothing was downloaded. Re-encode the directory")
    return name


def _manifest_files(url: str, manifest_bytes: bytes) -> Tuple[str, Dict[str, int]]:
    """``(tokenizer name, {shard file name: size the manifest implies})``: the
    manifest checked against its schema (:mod:`.schema`, as a local one is), then
    every name (:func:`_check_name`), before anything is downloaded."""
    where = f"{url}/{fmt.MANIFEST_NAME}"
    fix = "the file is corrupt: nothing was downloaded. Re-encode the directory"
    manifest = load_json(manifest_bytes, source=where, what=fmt.MANIFEST_NAME, error=ShardFormatError, fix=fix)
    check_shard_file(manifest, fmt.MANIFEST_NAME, source=where, error=ShardFormatError)
    tokenizer_name = manifest["tokenizer"].get("file", fmt.TOKENIZER_NAME)
    _check_name(url, "tokenizer.file", tokenizer_name)
    sizes: Dict[str, int] = {}
    for i, entry in enumerate(manifest["shards"]):
        for key, size, suffix in (("index_file", fmt.index_size(entry["documents"]), ".idx"),
                                  ("tokens_file", fmt.TOKEN_WIDTH * entry["tokens"], ".tokens")):
            name = _check_name(url, f"'shards[{i}].{key}'", entry.get(key))
            if not name.endswith(suffix):
                raise ShardFormatError(f"{url}/{fmt.MANIFEST_NAME}: field 'shards[{i}].{key}' is {name!r:.120}; "
                                       f"a {key.replace('_', ' ')} name ends with {suffix!r}. The manifest is "
                                       f"corrupt: nothing was downloaded. Re-encode the directory")
            if name in sizes or name == tokenizer_name:
                raise ShardFormatError(f"{url}/{fmt.MANIFEST_NAME}: field 'shards[{i}].{key}' names {name!r} "
                                       f"a second time; the manifest is corrupt. Re-encode")
            sizes[name] = size
    return tokenizer_name, sizes


class RemoteShards:
    """A finished shard directory at ``url``, read lazily through a bounded local
    cache (see the module).  ``local`` is the cache directory that
    :class:`~ube_stream.shards.TokenShards` reads; token files are fetched by
    :meth:`fetch` (whole) or :meth:`read_tokens` (the blocks of a range)."""

    def __init__(self, url: str, *, cache_limit: "int | str | None" = None):
        self.url = url.rstrip("/")
        self.limit = resolve_cache_limit(cache_limit)
        fs, self._inner = filesystem(self.url)
        manifest_key = f"{self._inner}/{fmt.MANIFEST_NAME}"
        try:
            manifest_size = int(fs.size(manifest_key))
            if manifest_size > MAX_MANIFEST_BYTES:
                raise ShardFormatError(f"{self.url}/{fmt.MANIFEST_NAME}: {manifest_size:,} bytes, more than a "
                                       f"manifest can hold ({MAX_MANIFEST_BYTES:,}); the directory is corrupt or "
                                       f"hostile. Re-encode it")
            manifest_bytes = bytes(fs.cat_file(manifest_key, start=0, end=manifest_size))
        except FileNotFoundError:
            raise self._not_a_directory() from None
        self.tokenizer_name, self.sizes = _manifest_files(self.url, manifest_bytes)
        key = hashlib.sha256(self.url.encode("utf-8") + b"\0" + manifest_bytes).hexdigest()[:24]
        self.root = os.path.join(cache_root(), "shards")
        self.local = os.path.join(self.root, key)
        self._fs: Any = fs
        if not os.path.exists(os.path.join(self.local, fmt.MANIFEST_NAME)):
            self._check_listing()
            self._fetch_metadata()
            atomic_write_bytes(os.path.join(self.local, fmt.MANIFEST_NAME), manifest_bytes, unique=True)  # commit

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _fs=None)    # DataLoader workers open their own filesystem

    @property
    def fs(self) -> Any:
        if self._fs is None:
            self._fs = filesystem(self.url)[0]
        return self._fs

    def _not_a_directory(self) -> ShardFormatError:
        names = remote_entries(self.url)
        where = f"{self.url}/{fmt.MANIFEST_NAME}"
        if names is None:
            return ShardFormatError(f"{self.url}: no such shard directory; encode one with `ube encode`")
        if fmt.UNITS_DIR in names or fmt.SHARDS_DIR in names:
            return ShardFormatError(f"{where}: missing: the directory is unfinished (an encoding run was stopped, or "
                                    f"not every rank has run). Rerun the same `ube encode` command to complete "
                                    f"it, or run the missing ranks and finalize (finalize=True)")
        return ShardFormatError(f"{where}: missing: {self.url} is not a shard directory")

    def _check_listing(self) -> None:
        """Every file the manifest names is in the store with the size it implies
        (one listing per folder): checked before anything is downloaded."""
        listed: Dict[str, int] = {}
        for folder in sorted({name.rpartition("/")[0] for name in [*self.sizes, self.tokenizer_name]}):
            prefix = f"{folder}/" if folder else ""
            listed.update({prefix + name: size for name, size in
                           object_sizes(self.fs, f"{self._inner}/{folder}".rstrip("/")).items()})
        for name, size in [*self.sizes.items(), (self.tokenizer_name, None)]:
            found = listed.get(name)
            if found is None:
                raise ShardFormatError(f"{self.url}/{name}: listed in MANIFEST.json but missing from the store; "
                                       f"the directory is damaged. Re-encode it")
            if (size is None and found > MAX_TOKENIZER_BYTES) or (size is not None and found != size):
                expected = f"at most {MAX_TOKENIZER_BYTES:,}" if size is None else f"{size:,}"
                raise ShardFormatError(f"{self.url}/{name}: {found:,} bytes in the store, MANIFEST.json implies "
                                       f"{expected}; the directory is damaged or hostile: nothing was "
                                       f"downloaded. Re-encode it")
        self._tokenizer_size = listed[self.tokenizer_name]

    def _fetch_metadata(self) -> None:
        """The tokenizer file and every index file, in batches of concurrent GETs."""
        wanted = [(self.tokenizer_name, self._tokenizer_size)]
        wanted += [(name, size) for name, size in self.sizes.items() if not name.endswith(".tokens")]
        wanted = [(n, s) for n, s in wanted if not os.path.exists(os.path.join(self.local, n))]
        self._make_room(sum(size for _, size in wanted))
        for at in range(0, len(wanted), _INDEX_BATCH):
            batch = wanted[at:at + _INDEX_BATCH]
            paths = [f"{self._inner}/{name}" for name, _ in batch]
            contents = self.fs.cat(paths, on_error="return") if len(paths) > 1 else {
                paths[0]: self.fs.cat_file(paths[0], start=0, end=batch[0][1])}
            for (name, size), path in zip(batch, paths):
                raw = contents.get(path)
                if isinstance(raw, BaseException) or raw is None:
                    raise ShardFormatError(f"{self.url}/{name}: cannot be read from the store ({raw}); the "
                                           f"directory is damaged. Re-encode it") from None
                self._write(name, bytes(raw), size)

    def _write(self, name: str, data: bytes, size: int) -> str:
        target = os.path.join(self.local, name)
        if len(data) != size:
            raise ShardFormatError(f"{self.url}/{name}: {len(data):,} bytes read, MANIFEST.json implies {size:,}; "
                                   f"the object changed under the reader or the directory is damaged. Re-encode it")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        atomic_write_bytes(target, data, unique=True)
        return target

    # ---------------------------------------------------------------- the cache
    def _make_room(self, nbytes: int) -> None:
        """Delete the least recently used token files and blocks (of any cached
        directory) until ``nbytes`` more fit under the limit."""
        held, evictable = 0, []
        for dirpath, _, files in os.walk(self.root):
            for fname in files:
                path = os.path.join(dirpath, fname)
                try:
                    st = os.stat(path)
                except FileNotFoundError:
                    continue
                held += st.st_size
                if fname.endswith(".tokens") or ".tokens.block" in fname:
                    evictable.append((st.st_mtime, path, st.st_size))
        if held + nbytes <= self.limit:
            return
        for _, path, size in sorted(evictable):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            held -= size
            if held + nbytes <= self.limit:
                return
        raise StorageError(errno.ENOSPC, f"{self.url}: needs {nbytes:,} more bytes in the shard cache "
                                         f"{self.root}, which holds {held:,} bytes it cannot evict, over its "
                                         f"limit of {self.limit:,} bytes; raise the limit "
                                         f"(UBE_STREAM_CACHE_LIMIT or cache_limit=) or clear the cache", self.root)

    def has(self, name: str) -> bool:
        """True when the whole file ``name`` is in the cache."""
        return os.path.exists(os.path.join(self.local, name))

    def fetch(self, name: str) -> str:
        """The local path of the whole file ``name``, downloaded (streamed, at
        most its manifest size) into the cache if it is not there yet."""
        target = os.path.join(self.local, name)
        if _touch(target):
            return target
        size = self.sizes[name]
        self._make_room(size)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        try:
            with atomic_open(target, "wb", unique=True) as out, \
                    self.fs.open(f"{self._inner}/{name}", "rb", block_size=_COPY_BYTES) as src:
                left = size
                while left:
                    chunk = src.read(min(left, _COPY_BYTES))
                    if not chunk:
                        break
                    out.write(chunk)
                    left -= len(chunk)
                if left or src.read(1):
                    raise ShardFormatError(f"{self.url}/{name}: the object is not the {size:,} bytes MANIFEST.json "
                                           f"implies; it changed under the reader or the directory is damaged. "
                                           f"Re-encode it")
        except FileNotFoundError:
            raise ShardFormatError(f"{self.url}/{name}: listed in MANIFEST.json but missing from the store; the "
                                   f"directory is damaged. Re-encode it") from None
        for k in range(_blocks(size)):     # the whole file now serves every range
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{target}.block{k}")
        return target

    def read_tokens(self, name: str, start: int, stop: int) -> np.ndarray:
        """Tokens ``[start, stop)`` of the token file ``name``, from the whole file
        when it is cached, else from the blocks that hold them (fetched on first
        use, one ranged GET each)."""
        whole = _open_cached(os.path.join(self.local, name))
        if whole is not None:
            return whole[start:stop]
        first, last = (fmt.TOKEN_WIDTH * start) // BLOCK_BYTES, (fmt.TOKEN_WIDTH * stop - 1) // BLOCK_BYTES
        parts = [self._block(name, k) for k in range(first, last + 1)]
        per_block = BLOCK_BYTES // fmt.TOKEN_WIDTH
        lo, hi = start - first * per_block, stop - first * per_block
        if len(parts) == 1:
            return parts[0][lo:hi]
        return np.concatenate(parts)[lo:hi]

    def _block(self, name: str, k: int) -> np.ndarray:
        path = f"{os.path.join(self.local, name)}.block{k}"
        cached = _open_cached(path)
        if cached is None:
            size = self.sizes[name]
            lo, hi = k * BLOCK_BYTES, min((k + 1) * BLOCK_BYTES, size)
            self._make_room(hi - lo)
            try:
                data = bytes(self.fs.cat_file(f"{self._inner}/{name}", start=lo, end=hi))
            except FileNotFoundError:
                raise ShardFormatError(f"{self.url}/{name}: listed in MANIFEST.json but missing from the store; "
                                       f"the directory is damaged. Re-encode it") from None
            if len(data) != hi - lo:
                raise ShardFormatError(f"{self.url}/{name}: bytes {lo}..{hi} read back {len(data)} bytes; the object "
                                       f"is shorter than MANIFEST.json implies. Re-encode the directory")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            atomic_write_bytes(path, data, unique=True)
            # served from memory: another process may evict the file at once
            return np.frombuffer(data, dtype="<u4")
        return cached

    def fetch_all(self) -> str:
        """Every token file fetched (for :func:`~ube_stream.verification.verify_shards`,
        which reads the directory as files); returns :attr:`local`."""
        total = sum(self.sizes.values())
        if total > self.limit:
            raise StorageError(errno.ENOSPC, f"{self.url}: a whole local copy needs {total:,} bytes, over the shard "
                                             f"cache limit of {self.limit:,} bytes; raise the limit "
                                             f"(UBE_STREAM_CACHE_LIMIT or cache_limit=)", self.root)
        for name in self.sizes:
            if name.endswith(".tokens"):
                self.fetch(name)
        return self.local


def _blocks(size: int) -> int:
    return -(-size // BLOCK_BYTES)


def _open_cached(path: str) -> Optional[np.ndarray]:
    """A read-only map of the cached token file or block ``path``, marked as just
    used; None when it is not there (never fetched, or evicted)."""
    try:
        os.utime(path)
        if os.path.getsize(path) == 0:
            return np.zeros(0, dtype="<u4")
        return np.memmap(path, dtype="<u4", mode="r")
    except FileNotFoundError:
        return None


def _touch(path: str) -> bool:
    """Mark ``path`` as just used (its mtime orders eviction); False when it is not there."""
    try:
        os.utime(path)
        return True
    except FileNotFoundError:
        return False


def cached_directory(url: str, *, cache_limit: "int | str | None" = None) -> str:
    """A whole local copy of the finished shard directory at ``url`` (in the
    bounded cache; see the module); returns its path."""
    return RemoteShards(url, cache_limit=cache_limit).fetch_all()
