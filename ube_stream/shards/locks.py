"""Lock files for shard writers: ``locks/<unit_id>.lock`` (a worker encoding a
unit) and ``locks/rank-<R>.lock`` (a run over a rank's units).  Internal.

A lock file holds ``{"host": ..., "pid": ...}`` (plus, on Linux, ``"started"``:
the holder's start time in clock ticks since boot, so a pid reused by another
process after a crash does not look like the holder) and is created with
``O_CREAT | O_EXCL``.  A lock whose process is gone (or a zombie) on this
host is stale and taken over, so a run killed with SIGKILL can simply be run
again; a live holder, or any holder on another host (whose liveness cannot be
checked from here), stops the second writer with :class:`LockError`.
"""
from __future__ import annotations

import json
import os

from ..errors import LockError
from ..storage import hostname

_HOST = hostname()


def _proc_stat(pid: int) -> list[bytes] | None:
    """Fields of /proc/<pid>/stat after the command name (Linux), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2:].split()
    except (OSError, ValueError):
        return None


def _start_time(pid: int) -> int | None:
    """Start time of a process in clock ticks since boot (Linux), or None."""
    fields = _proc_stat(pid)
    try:
        return int(fields[19]) if fields else None
    except (IndexError, ValueError):
        return None


def _pid_alive(pid: int, started: int | None = None) -> bool:
    if pid <= 0:
        return False
    if pid == os.getpid():
        return False   # our own leftover (an earlier call in this process died without releasing)
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
    # the pid was reused by a process that started after the lock was written
    return started is None or _start_time(pid) in (None, started)


def read_holder(path: str) -> dict | None:
    """The ``{"host", "pid"}`` a lock file holds; ``{}`` when unreadable (a
    writer killed between create and write), None when there is no file."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    try:
        holder = json.loads(raw.decode("utf-8"))
        return holder if isinstance(holder, dict) else {}
    except (ValueError, UnicodeDecodeError):
        return {}


def is_stale(holder: dict) -> bool:
    """True when the holder is certainly gone: same host and no live process
    (an empty or unreadable lock file counts as stale too)."""
    if not holder or "pid" not in holder:
        return True
    started = holder.get("started")
    return holder.get("host") == _HOST and not _pid_alive(int(holder["pid"]),
                                                          int(started) if started is not None else None)


class FileLock:
    """An exclusive lock file; ``what`` names it in error messages."""

    def __init__(self, path: str, what: str):
        self.path = path
        self.what = what
        self.held = False

    def acquire(self) -> "FileLock":
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        holder = {"host": _HOST, "pid": os.getpid()}
        started = _start_time(os.getpid())
        if started is not None:
            holder["started"] = started   # tells a reused pid from the holder
        payload = json.dumps(holder).encode("utf-8")
        for _ in range(10):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                self._take_over_or_raise()
                continue
            try:
                os.write(fd, payload)
            finally:
                os.close(fd)
            self.held = True
            return self
        raise LockError(f"{self.path}: could not take the lock of {self.what} (it keeps being re-created by "
                        f"another process); make sure only one writer runs on this directory")

    def _take_over_or_raise(self) -> None:
        holder = read_holder(self.path)
        if holder is None:
            return  # released meanwhile: try again
        if not is_stale(holder):
            where = f"process {holder.get('pid')} on host {holder.get('host')}"
            hint = ("wait for it to finish or stop it" if holder.get("host") == _HOST else
                    f"if that process is gone, delete {self.path}")
            raise LockError(f"{self.path}: {self.what} is being written by {where}; two writers cannot share "
                            f"an output directory: {hint}, or write to another directory")
        # Stale: move it aside under a name only we use, check we moved the stale
        # lock (not a fresh one someone else just created), then drop it.
        aside = f"{self.path}.stale-{_HOST}-{os.getpid()}"
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        moved = read_holder(aside)
        if moved is not None and not is_stale(moved):
            try:
                os.link(aside, self.path)   # put the live lock back (fails if yet another one exists)
            except FileExistsError:
                pass
            os.unlink(aside)
            raise LockError(f"{self.path}: {self.what} was just taken by process {moved.get('pid')} on host "
                            f"{moved.get('host')}; only one writer may run on this directory")
        os.unlink(aside)

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        holder = read_holder(self.path)
        if holder and holder.get("host") == _HOST and holder.get("pid") == os.getpid():
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass

    def __enter__(self) -> "FileLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

