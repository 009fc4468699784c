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
  a record written by an earlier version (which did not ``flock``) whose
  process is still alive counts as held (:mod:`.lock`).
* **Removal** (of a finished run, or of a dead one by any later run) takes the
  lock first, renames the directory to ``<root>/.trash-<random>/`` while
  holding it, and deletes the trash afterwards.  A run waiting for the lock
  at that moment finds the lock file gone from ``<name>`` and starts over.

So cleanup never removes a live run: it removes a directory only while holding
its lock, and a live run holds its lock from before its directory had its
name.  Leftovers of killed creations (``.new-*`` older than
``STAGING_GRACE_S``) and of killed removals (``.trash-*``) go too.  The lock
is the one lock of every run (:mod:`.lock`: what it records, the lock files
of earlier versions, the file systems it needs).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import time
import uuid
from typing import Optional

from .lock import acquire_lock, open_lock, same_file, take, write_holder

__all__ = ["RunDir", "remove_dead_runs", "make_root", "LOCK_NAME"]

LOCK_NAME = "lock"
NEW_PREFIX = ".new-"
TRASH_PREFIX = ".trash-"
#: a ``.new-*`` directory older than this is a killed creation (a live one is renamed within microseconds)
STAGING_GRACE_S = 600.0


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
        self._fd = acquire_lock(self.lock_path, self.what, "or give this run a directory of its own",
                                missing=self._create)
        return self

    def _create(self) -> Optional[int]:
        staging = os.path.join(self.root, f"{NEW_PREFIX}{uuid.uuid4().hex[:16]}")
        while True:
            try:
                os.mkdir(staging)
                break
            except FileNotFoundError:        # the root, left empty, was just removed by a finishing run
                make_root(self.root)
        fd = os.open(os.path.join(staging, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)    # a fresh file nobody else can name yet
        write_holder(fd)
        try:
            os.rename(staging, self.path)
        except OSError as exc:            # the name exists (not empty): another run's directory
            os.close(fd)
            shutil.rmtree(staging, ignore_errors=True)
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
            return None                   # take the lock of the one in place
        return fd

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
        fd = open_lock(self.lock_path)
        if fd is None:
            return False
        try:
            if take(fd) is not None or not same_file(fd, self.lock_path):
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
