"""Run directories born locked, and the removal of runs proven dead.  Internal.

A job that keeps work between attempts (training's count tables) keeps it in
a run directory ``<root>/<name>/`` whose lock is ``<root>/<name>/lock``.  The
directory never exists without that lock held by its run:

* **Creation** is one atomic step: the directory is made under a private name
  ``<root>/.new-<random>/``, its ``lock`` file is created inside and locked
  with ``flock``, and only then is the directory renamed to ``<name>``.  A
  second run finding ``<name>`` in place takes its lock instead (a resume).
* **The lock** is an ``flock`` on ``lock``, which the OS releases when its
  holder dies (kill -9 included), so "no holder" is a fact, not a guess from
  a pid.  The file also records ``{"host", "pid", "started"}`` for messages;
  a recorded holder that is still alive on this host counts as live even
  when the ``flock`` is free (a lock written by an earlier version, which
  did not ``flock``).
* **Removal** (of a finished run, or of a dead one by any later run) takes the
  lock first, renames the directory to ``<root>/.trash-<random>/`` while
  holding it, and deletes the trash afterwards.  A run waiting for the lock
  at that moment finds the lock file gone from ``<name>`` and starts over.

So cleanup never removes a live run: it removes a directory only while holding
its lock, and a live run holds its lock from before its directory had its
name.  Leftovers of killed creations (``.new-*`` older than
``STAGING_GRACE_S``) and of killed removals (``.trash-*``) go too.  Needs a
file system with working ``flock`` (any local one; NFS v4 emulates it);
shard output directories on shared or object storage keep their host/pid
locks (:mod:`ube_stream.shards.locks`).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import time
import uuid
from typing import Any, Dict, Optional

from ..errors import LockError
from ..shards.locks import _HOST, _start_time, is_stale

__all__ = ["RunDir", "remove_dead_runs", "make_root", "LOCK_NAME"]

LOCK_NAME = "lock"
NEW_PREFIX = ".new-"
TRASH_PREFIX = ".trash-"
#: a ``.new-*`` directory older than this is a killed creation (a live one is renamed within microseconds)
STAGING_GRACE_S = 600.0
#: how long a run waits for a lock held by another process before calling it busy (a remover holds
#: a dead run's lock only for one rename)
BUSY_WAIT_S = 0.5


def make_root(root: str) -> None:
    """``os.makedirs(root, exist_ok=True)``, safe while a finishing run removes
    the (empty) root: that run's ``rmdir`` between makedirs' mkdir and its
    check would make it raise ``FileExistsError``."""
    while True:
        try:
            os.makedirs(root, exist_ok=True)
            return
        except FileExistsError:
            if os.path.exists(root) and not os.path.isdir(root):
                raise


def _open_lock(path: str) -> Optional[int]:
    """A descriptor of the lock file at ``path``; created there when its
    directory exists without one; None when the directory does not exist."""
    while True:
        try:
            return os.open(path, os.O_RDWR)
        except FileNotFoundError:
            pass
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue        # created by another process meanwhile: open that one
        except (FileNotFoundError, NotADirectoryError):
            return None


def _flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _same_file(fd: int, path: str) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (not moved to the trash meanwhile)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def _read_holder(fd: int) -> Dict[str, Any]:
    try:
        raw = os.pread(fd, 4096, 0)
        holder = json.loads(raw.decode("utf-8")) if raw else {}
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _write_holder(fd: int) -> None:
    holder: Dict[str, Any] = {"host": _HOST, "pid": os.getpid()}
    started = _start_time(os.getpid())
    if started is not None:
        holder["started"] = started
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(holder).encode("utf-8"), 0)


def _trash(root: str, path: str) -> Optional[str]:
    """Rename ``path`` (its lock held by the caller) into the trash; None when already gone."""
    trash = os.path.join(root, f"{TRASH_PREFIX}{uuid.uuid4().hex[:16]}")
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return None
    return trash


class RunDir:
    """``<root>/<name>/``, held by this process between :meth:`claim` and
    :meth:`release` / :meth:`remove`; ``what`` names it in error messages."""

    def __init__(self, root: str, name: str, what: str):
        self.root = root
        self.name = name
        self.path = os.path.join(root, name)
        self.lock_path = os.path.join(self.path, LOCK_NAME)
        self.what = what
        self._fd: Optional[int] = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def claim(self) -> "RunDir":
        """Create the directory with its lock held, or take the lock of the one
        in place; :class:`LockError` naming the holder when a live run has it."""
        make_root(self.root)
        deadline = time.monotonic() + BUSY_WAIT_S
        while True:
            fd = _open_lock(self.lock_path)
            if fd is None:
                if self._create():
                    return self
                continue                     # another run created it meanwhile: take its lock
            if not _flock(fd):
                holder = _read_holder(fd)
                os.close(fd)
                if time.monotonic() < deadline:
                    time.sleep(0.02)
                    continue
                raise self._busy(holder)
            if not _same_file(fd, self.lock_path):   # removed while we waited: start over
                os.close(fd)
                continue
            holder = _read_holder(fd)
            if holder and not is_stale(holder):    # an earlier version's live run (no flock)
                os.close(fd)
                raise self._busy(holder)
            _write_holder(fd)
            self._fd = fd
            return self

    def _create(self) -> bool:
        staging = os.path.join(self.root, f"{NEW_PREFIX}{uuid.uuid4().hex[:16]}")
        while True:
            try:
                os.mkdir(staging)
                break
            except FileNotFoundError:        # the root, left empty, was just removed by a finishing run
                make_root(self.root)
        fd = os.open(os.path.join(staging, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)    # a fresh file nobody else can name yet
        _write_holder(fd)
        try:
            os.rename(staging, self.path)
        except OSError as exc:            # the name exists (not empty): another run's directory
            os.close(fd)
            shutil.rmtree(staging, ignore_errors=True)
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            return False
        self._fd = fd
        return True

    def _busy(self, holder: Dict[str, Any]) -> LockError:
        where = (f"process {holder.get('pid')} on host {holder.get('host')}" if holder.get("pid") is not None
                 else "another process")
        return LockError(f"{self.lock_path}: {self.what} is held by {where}; wait for it to finish or stop it, "
                         f"or give this run a directory of its own")

    def release(self) -> None:
        """Release the lock; the directory stays (for a rerun)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def remove(self) -> None:
        """Remove the directory (lock held until it is in the trash), then release."""
        if self._fd is None:
            return
        try:
            trash = _trash(self.root, self.path)
        finally:
            self.release()
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)

    def remove_if_dead(self) -> bool:
        """Remove the directory when no live run holds it; whether it was removed."""
        fd = _open_lock(self.lock_path)
        if fd is None:
            return False
        try:
            if not _flock(fd) or not _same_file(fd, self.lock_path):
                return False
            holder = _read_holder(fd)
            if holder and not is_stale(holder):
                return False
            trash = _trash(self.root, self.path)
        finally:
            os.close(fd)
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)
        return trash is not None


def remove_dead_runs(root: str, prefix: str, *, keep: Optional[str] = None) -> None:
    """Remove the ``<prefix>*`` run directories under ``root`` that no live run
    holds (``keep``: a path to leave alone), and the leftovers of killed
    creations and removals."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return
    now = time.time()
    for name in sorted(names):
        path = os.path.join(root, name)
        if name.startswith(TRASH_PREFIX):
            shutil.rmtree(path, ignore_errors=True)
        elif name.startswith(NEW_PREFIX):
            with contextlib.suppress(OSError):
                if now - os.stat(path).st_mtime > STAGING_GRACE_S:
                    shutil.rmtree(path, ignore_errors=True)
        elif name.startswith(prefix) and path != keep and os.path.isdir(path):
            RunDir(root, name, "a run directory").remove_if_dead()
