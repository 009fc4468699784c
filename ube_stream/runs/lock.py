"""The one lock of every run: an ``flock`` on a lock file, which the OS
releases when its holder dies (``kill -9`` included).  Internal.

Used by training and verification run directories (:mod:`.run_dir`) and by
shard output directories (``locks/rank-<R>.lock``, ``locks/<unit>.lock``,
``locks/finalize.lock``).  "No holder" is a fact the kernel knows, not a
guess from a pid: a rerun after a crash takes the lock at once.

The file also records its holder, ``{"host", "pid", "started", "lock":
"flock"}`` (``started``: the process start time in clock ticks since boot,
Linux), only for messages: :class:`LockError` names the process and host.
A record without ``"lock": "flock"`` was written by an earlier version,
which created the file exclusively and did not ``flock`` it; such a record
still counts as held when its process is alive on this host (the same pid
with the same start time) or lives on another host (which cannot be checked
from here: the message says to delete the file if that process is gone).  A
dead or unreadable old record is taken over.

Needs a file system with working ``flock``: any local one; NFS v4 (the
client emulates ``flock`` with POSIX byte-range locks that the server keeps,
so it works across hosts, and releases a dead client's locks when its lease
expires, about 90 s); CephFS, Lustre (mounted with ``flock``) and GPFS.  Not
NFS v3 without ``lockd``, nor SMB mounts that ignore locks.  Object stores
have no locks at all (see :mod:`ube_stream.shards.remote`).
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from typing import Any, Callable, Dict, Optional

from ..errors import LockError
from ..storage import hostname

__all__ = ["FileLock", "lock_holder", "pid_alive", "start_time", "HOST", "BUSY_WAIT_S"]

HOST = hostname()
LOCK_KIND = "flock"
#: how long a lock held by another process is waited for before calling it busy (a holder that is
#: releasing, or a remover of a dead run, holds it only for a moment)
BUSY_WAIT_S = 0.5


def _proc_stat(pid: int) -> Optional[list]:
    """Fields of /proc/<pid>/stat after the command name (Linux), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2:].split()
    except (OSError, ValueError):
        return None


def start_time(pid: int) -> Optional[int]:
    """Start time of a process in clock ticks since boot (Linux), or None."""
    fields = _proc_stat(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def pid_alive(pid: int, started: Optional[int] = None) -> bool:
    """Whether process ``pid`` of this host runs (not a zombie; with ``started``,
    the same process, not a later one that reuses its pid).  This process's own
    pid counts as gone: a record of it is a leftover of an earlier call."""
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _proc_stat(pid)
    if fields is None:
        return True
    if fields[:1] == [b"Z"]:
        return False   # a zombie (killed, not yet reaped) holds nothing
    return started is None or start_time(pid) in (None, started)


def _old_holder_alive(holder: Dict[str, Any]) -> bool:
    """Whether a record found under a free ``flock`` may belong to a live
    holder: only a record of an earlier version (see the module)."""
    if not holder or "pid" not in holder or holder.get("lock") == LOCK_KIND:
        return False   # empty (killed before writing), or written under an flock its holder no longer has
    if holder.get("host") != HOST:
        return True
    try:
        started = holder.get("started")
        return pid_alive(int(holder["pid"]), int(started) if started is not None else None)
    except (TypeError, ValueError):
        return False


def open_lock(path: str, *, create: bool = True) -> Optional[int]:
    """A descriptor of the lock file at ``path`` (created when missing and
    ``create``); None when it is missing and not created, or its directory is."""
    while True:
        try:
            return os.open(path, os.O_RDWR)
        except FileNotFoundError:
            if not create:
                return None
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue        # created by another process meanwhile: open that one
        except (FileNotFoundError, NotADirectoryError):
            return None


def try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def same_file(fd: int, path: str) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (not removed or replaced meanwhile)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


def read_holder(fd: int) -> Dict[str, Any]:
    try:
        raw = os.pread(fd, 4096, 0)
        holder = json.loads(raw.decode("utf-8")) if raw else {}
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return holder if isinstance(holder, dict) else {}


def write_holder(fd: int) -> None:
    """Record this process as the holder (the caller has the ``flock``)."""
    holder: Dict[str, Any] = {"host": HOST, "pid": os.getpid()}
    started = start_time(os.getpid())
    if started is not None:
        holder["started"] = started
    holder["lock"] = LOCK_KIND
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(holder).encode("utf-8"), 0)


def take(fd: int) -> Optional[Dict[str, Any]]:
    """``flock`` ``fd`` (without waiting); the holder that stops it (``{}`` when
    unknown) when another process has the lock, None when taken."""
    if not try_flock(fd):
        return read_holder(fd)
    holder = read_holder(fd)
    if _old_holder_alive(holder):
        fcntl.flock(fd, fcntl.LOCK_UN)
        return holder
    return None


def busy_error(path: str, what: str, holder: Dict[str, Any], fix: str) -> LockError:
    """The :class:`LockError` naming the holder of the lock at ``path``."""
    if holder.get("pid") is None:
        return LockError(f"{path}: {what} is held by another process; {fix}")
    where = f"process {holder.get('pid')} on host {holder.get('host')}"
    if holder.get("lock") != LOCK_KIND and holder.get("host") != HOST:
        fix = f"if that process is gone, delete {path} (a lock of an earlier version, on another host); {fix}"
    else:
        fix = f"wait for it to finish or stop it; {fix}"
    return LockError(f"{path}: {what} is held by {where}; {fix}")


def acquire_lock(path: str, what: str, fix: str, *, wait_s: float = BUSY_WAIT_S,
                 missing: Optional[Callable[[], Optional[int]]] = None) -> int:
    """A descriptor holding the lock at ``path``, waiting up to ``wait_s`` for
    another holder, then :class:`LockError` naming it.  When the file's
    directory is missing, ``missing()`` runs: a descriptor it returns (a lock it
    made and holds) is the answer, None means try again."""
    deadline = time.monotonic() + wait_s
    while True:
        fd = open_lock(path)
        if fd is None:
            made = missing() if missing is not None else None
            if made is not None:
                return made
            continue
        holder = take(fd)
        if holder is None and same_file(fd, path):
            write_holder(fd)
            return fd
        os.close(fd)
        if holder is None:         # released and removed while we opened it: take the new file
            continue
        if time.monotonic() >= deadline:
            raise busy_error(path, what, holder, fix)
        time.sleep(0.02)


def lock_holder(path: str) -> Optional[Dict[str, Any]]:
    """The holder of the lock at ``path`` (``{}`` when unknown), or None when nobody holds it."""
    fd = open_lock(path, create=False)
    if fd is None:
        return None
    try:
        holder = take(fd)
    finally:
        os.close(fd)      # releases the flock taken to look
    return holder


class FileLock:
    """The lock file ``path``, held between :meth:`acquire` and :meth:`release`
    (or as a context manager); ``what`` names it in :class:`LockError`, ``fix``
    says what else to do.  ``wait_s``: how long a holder is waited for."""

    def __init__(self, path: str, what: str, *, fix: str = "or write to another directory",
                 wait_s: float = BUSY_WAIT_S):
        self.path = path
        self.what = what
        self.fix = fix
        self.wait_s = wait_s
        self._fd: Optional[int] = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "FileLock":
        def make_directory() -> None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)

        self._fd = acquire_lock(self.path, self.what, self.fix, wait_s=self.wait_s, missing=make_directory)
        return self

    def release(self) -> None:
        """Remove the file (while still holding it), then release the ``flock``."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            if same_file(fd, self.path):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)
        finally:
            os.close(fd)

    def __enter__(self) -> "FileLock":
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()
