"""Overlap a unit's reading and writing with its encoding: one thread runs the
reader ahead of the encoder, one runs the shard writes behind it, and
:class:`OrderedMap` runs the encoder (or the chunk counter) itself on several
threads over the batches of one unit, keeping their order.  Internal.

The encoder releases the GIL for a whole batch, and so do the JSON Lines
kernel, file reads and writes, ``hashlib`` on large buffers and ``fsync``; so
while the main thread encodes batch *k*, :class:`ReadAhead` parses batch
*k+1* and :class:`WriteBehind` hashes, writes and syncs batch *k-1*.  A worker
still does the same work (the same CPU time); its wall time loses the reader's
and the writer's share.

Both keep order (one thread each, a bounded queue of ``depth`` items, so at
most ``depth`` batches wait in memory), hand an exception over to the main
thread as the same object at the next call, and stop and join their thread
in :meth:`close` (also on an error): when a unit ends no thread of it is
left, so a later fork of the process stays safe (``executors.will_fork``).
With ``threaded=False`` both do the same work in the calling thread, in the
same order (for workers that have no idle core to overlap on).

:class:`OrderedMap` is how one large unit (one ``.jsonl.zst`` file: a single
compressed stream can only be decoded from its start) uses more than one core:
one reader (decompression runs at ~1 GB/s) feeds ``threads`` encoders
(~100-200 MB/s each), which all release the GIL in their kernels.  Results
come back in input order, so what is written does not depend on the thread
count; an exception is raised where its item would have come.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterable, Iterator, Optional

from ..executors import usable_cores

_POLL_S = 0.05   # how often a blocked thread looks at its stop flag
_DONE = object()


def _as_is(item):
    return item


class ReadAhead:
    """Iterate ``items`` in a thread, at most ``depth`` items ahead of the
    consumer; ``prepare(item)`` (in that thread; ``None``: the item as it is)
    gives what is yielded.  An
    exception of the iterator (or of ``prepare``) is raised in the consumer
    where its item would have come.  Use as a context manager, or call
    :meth:`close`: it stops the thread, closes the iterator in it and joins."""

    def __init__(self, items: Iterable[Any], prepare: Optional[Callable[[Any], Any]] = None, depth: int = 2,
                 name: str = "ube-read-ahead", threaded: bool = True):
        prepare = prepare or _as_is
        self._queue: queue.Queue = queue.Queue(depth)
        self._stop = threading.Event()
        self._items, self._prepare = iter(items), prepare
        self._thread: Optional[threading.Thread] = None
        if threaded:
            self._thread = threading.Thread(target=self._run, args=(self._items, prepare), name=name, daemon=True)
            self._thread.start()

    def _put(self, entry) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, items: Iterator[Any], prepare) -> None:
        try:
            for item in items:
                if not self._put((prepare(item), None)):
                    return
            self._put((_DONE, None))
        except BaseException as exc:   # handed to the consumer, raised there
            self._put((_DONE, exc))
        finally:
            close = getattr(items, "close", None)   # a generator: its files are closed here, in its thread
            if close is not None:
                try:
                    close()
                except Exception:
                    pass

    def __iter__(self) -> Iterator[Any]:
        if self._thread is None:
            for item in self._items:
                yield self._prepare(item)
            return
        while True:
            item, exc = self._queue.get()
            if item is _DONE:
                self._stop.set()
                if exc is not None:
                    raise exc
                return
            yield item

    def close(self) -> None:
        self._stop.set()
        if self._thread is None:
            close = getattr(self._items, "close", None)
            if close is not None:
                close()
            return
        while self._thread.is_alive():
            try:   # make room, in case the thread waits to put
                self._queue.get(timeout=_POLL_S)
            except queue.Empty:
                pass
        self._thread.join()

    def __enter__(self) -> "ReadAhead":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class WriteBehind:
    """Run ``submit(fn, *args)`` calls in order in one thread, at most
    ``depth`` waiting.  The first exception of a call is raised by the next
    :meth:`submit` or by :meth:`wait` (the calls after it are dropped).
    :meth:`wait` returns once every call submitted has run; :meth:`close`
    drops what has not started, and joins."""

    def __init__(self, depth: int = 2, name: str = "ube-write-behind", threaded: bool = True):
        self._queue: queue.Queue = queue.Queue(depth)
        self._error: Optional[BaseException] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        if threaded:
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            call = self._queue.get()
            try:
                if call is _DONE:
                    return
                if self._error is None and not self._stop.is_set():
                    call[0](*call[1])
            except BaseException as exc:   # raised in the submitting thread
                self._error = exc
            finally:
                self._queue.task_done()

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            self._stop.set()   # nothing after a failed call runs
            raise error

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        self._raise()
        if self._thread is None:
            fn(*args)
        else:
            self._queue.put((fn, args))

    def wait(self) -> None:
        self._queue.join()
        self._raise()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._queue.put(_DONE)
            self._thread.join()

    def __enter__(self) -> "WriteBehind":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def unit_threads(executor: object, workers: int, units: int) -> int:
    """Threads for each unit's :class:`OrderedMap`: the workers the run has beyond
    its units (``workers // units`` when there are fewer units than workers: one
    large file with ``--workers 4`` gets 4 encoder threads in its one worker),
    at most the cores; 1 under a cluster executor (a Ray task holds one CPU).
    Outputs never depend on it."""
    if executor != "local" or units <= 0:
        return 1
    return max(1, min(workers, usable_cores()) // min(workers, units))


class OrderedMap:
    """``fn(item)`` for each of ``items`` on ``threads`` threads, yielded in the
    order of ``items``; at most ``depth`` items (default ``2 * threads``) are
    taken but not yet yielded, which bounds memory.  An exception of ``fn`` or
    of the iterator is raised in the consumer where its item would have come
    (the items after it are dropped).  ``threads=1`` runs ``fn`` in the
    calling thread (no thread is started).  Use as a context manager, or call
    :meth:`close`: it stops and joins the threads (the iterator is closed by
    its owner).  ``items`` is consumed by one thread at a time."""

    def __init__(self, items: Iterable[Any], fn: Callable[[Any], Any], threads: int, depth: Optional[int] = None,
                 name: str = "ube-map"):
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads!r}")
        self._items, self._fn, self._threads = iter(items), fn, threads
        self._depth = depth or 2 * threads
        self._cond = threading.Condition()
        self._results: dict = {}           # seq -> (result, exception)
        self._taken = 0                    # items taken from the iterator
        self._yielded = 0                  # results handed to the consumer
        self._end: Optional[int] = None    # seq at which the iterator ended (or failed)
        self._stop = False
        self._workers: list = []
        self._take_lock = threading.Lock()
        if threads > 1:
            self._workers = [threading.Thread(target=self._run, name=f"{name}-{k}", daemon=True)
                             for k in range(threads)]
            for worker in self._workers:
                worker.start()

    def _take(self):
        """``(seq, item)`` from the iterator; ``(seq, _DONE)`` at its end or its failure."""
        with self._cond:
            while not self._stop and self._end is None and self._taken - self._yielded >= self._depth:
                self._cond.wait(_POLL_S)
            if self._stop or self._end is not None:
                return None, _DONE
        with self._take_lock:
            with self._cond:
                if self._stop or self._end is not None:
                    return None, _DONE
                seq = self._taken
            try:
                item = next(self._items)
            except StopIteration:
                with self._cond:
                    self._end = seq
                    self._cond.notify_all()
                return None, _DONE
            except BaseException as exc:   # the reader's error: raised where its item would have come
                with self._cond:
                    self._results[seq] = (None, exc)
                    self._end = seq + 1
                    self._cond.notify_all()
                return None, _DONE
            with self._cond:
                self._taken = seq + 1
            return seq, item

    def _run(self) -> None:
        while True:
            seq, item = self._take()
            if item is _DONE:
                return
            entry: tuple = (None, None)
            try:
                entry = (self._fn(item), None)
            except BaseException as exc:   # raised in the consumer, in order
                entry = (None, exc)
            with self._cond:
                self._results[seq] = entry
                if entry[1] is not None and (self._end is None or self._end > seq + 1):
                    self._end = seq + 1    # nothing after a failed item is yielded
                self._cond.notify_all()

    def __iter__(self) -> Iterator[Any]:
        if not self._workers:
            for item in self._items:
                yield self._fn(item)
            return
        while True:
            with self._cond:
                while self._yielded not in self._results and (self._end is None or self._yielded < self._end):
                    self._cond.wait(_POLL_S)
                if self._yielded not in self._results:   # the end, in order
                    return
                result, exc = self._results.pop(self._yielded)
                self._yielded += 1
                self._cond.notify_all()
            if exc is not None:
                self.close()
                raise exc
            yield result

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        for worker in self._workers:
            worker.join()
        self._workers = []
        self._results.clear()

    def __enter__(self) -> "OrderedMap":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
