"""Executors: map a unit function over work units, results in unit order.

One small interface, two implementations:

- ``local`` (default): a process pool (``spawn``; ``fork`` where the caller
  asks for it and it is safe, see :func:`start_method`), or the calling
  process itself for one worker or one task;
- ``ray``: each unit is a Ray task that reads its input and writes its own
  output files directly to the (shared) output path; only the small records
  the unit functions return (counts, paths, checksums) travel through Ray's
  object store.  Ray is an optional extra (``pip install "ube-stream[ray]"``)
  imported only here, only when asked for.

Unit functions are plain module-level functions ``fn(task) -> record`` (Ray
workers import them by name, so they live in the package).  Per-process setup
such as loading a tokenizer goes through :func:`worker_state`: the unit
function calls ``worker_state(setup, *args)``, which runs ``setup`` once per
process and caches it by its arguments, so a worker that runs many tasks
loads it once.

**Storage settings on a cluster.**  A cluster started with ``ray start``
runs its workers with the environment of the machine that started it, not
the driver's: credentials and endpoints the driver has (``AWS_*``,
``FSSPEC_*``, ...) would not reach them.  :class:`RayExecutor` therefore
forwards the driver's storage variables (:data:`STORAGE_ENV_PREFIXES`) and an
explicit ``storage_options`` (``{"s3": {"endpoint_url": ...}}``, passed as
fsspec's ``FSSPEC_<PROTOCOL>`` variables) to its tasks in Ray's
``runtime_env`` ``env_vars``.  A storage error inside a task (no credentials,
access denied, an unreachable endpoint) reaches the driver as one
:class:`~ube_stream.errors.StorageError` line naming the unit, its URLs and
the fix.

System failures (a worker process killed, a node lost) are retried a bounded
number of times by Ray, and a task whose retries are spent is submitted again
by the driver (bounded too); application errors (a corrupt input file) are raised at once,
with their original message, and never retried.
"""
from __future__ import annotations

import abc
import collections
import contextlib
import os
import sys
from typing import Any, Callable, ClassVar, Dict, List, Optional, Sequence, Tuple, Type

from . import progress
from .errors import UbeError

__all__ = ["usable_cores", "worker_count", "Executor", "LocalExecutor", "WorkerDiedError", "RayExecutor", "EXECUTORS", "executor_class", "get_executor", "worker_state",
           "seed_worker_state", "start_method", "will_fork", "storage_env", "STORAGE_ENV_PREFIXES"]

WORKER_STATE_ENTRIES = 4   # setups a process keeps (least recently used dropped): a run uses one or two
_WORKER_STATE: "collections.OrderedDict[Tuple[Any, ...], Any]" = collections.OrderedDict()


def usable_cores() -> int:
    """The cores this process may run on: the size of its CPU affinity mask
    (``taskset``, a container's cpuset, a batch scheduler's allotment), which
    ``os.cpu_count()`` ignores; the machine's cores where the platform has no
    affinity (macOS, Windows).  Every default worker count and thread count
    that follows the cores uses it.  A CPU quota (cgroup ``cpu.max``,
    ``docker --cpus``) is not a mask and is not seen: pass ``--workers``."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:   # no affinity on this platform
        return os.cpu_count() or 1


def worker_count(workers: Optional[int]) -> int:
    """``workers`` (at least 1), or :func:`usable_cores` when None: the one default
    of every local pool, ``train`` and ``encode_corpus``."""
    return max(1, workers if workers is not None else usable_cores())


_START_METHOD = ["spawn"]   # what local pools start workers with (see start_method)


@contextlib.contextmanager
def start_method(method: str):
    """Within the block, local pools start their workers with ``method``:
    ``"spawn"`` (the default) or ``"fork"``.

    ``"fork"`` spares every worker the start-up a spawned one pays (Python and
    numpy imports, loading the tokenizer and building its tables: about 0.5 CPU
    s a process): a forked worker starts with the driver's modules and its
    :func:`worker_state` (the tokenizer the driver seeded).  It is used only
    where it is safe: on Linux, and only while this process runs no other
    Python thread (a lock held by another thread at the fork would stay held
    in the child forever); elsewhere workers are spawned as before.  Threads
    of native libraries are not counted: numpy's OpenBLAS pool is fork-safe
    (it registers ``pthread_atfork`` handlers); our kernels start none.  The
    ``ube`` command line runs under ``start_method("fork")``: its ``__main__``
    is guarded and it starts no threads of its own.  The library's default
    stays ``spawn``, as a caller's threads are not ours to know."""
    if method not in ("spawn", "fork"):
        raise ValueError(f"start method must be 'spawn' or 'fork', got {method!r}")
    before = _START_METHOD[0]
    _START_METHOD[0] = method
    try:
        yield
    finally:
        _START_METHOD[0] = before


def will_fork() -> bool:
    """Whether a local pool started now would fork its workers (see :func:`start_method`)."""
    import threading

    return _START_METHOD[0] == "fork" and sys.platform.startswith("linux") and threading.active_count() == 1


def worker_state(setup: Callable[..., Any], *args: Any) -> Any:
    """``setup(*args)``, computed once per process and cached by its arguments; the
    cache keeps the WORKER_STATE_ENTRIES most recently used results, so a process
    that runs many jobs (a notebook, a reused Ray worker, 300 ``verify_shards`` calls)
    does not keep every job's tokenizer and its chunk caches alive."""
    return _recall((setup.__module__, setup.__qualname__, args), lambda: setup(*args))


def seed_worker_state(value: Any, setup: Callable[..., Any], *args: Any) -> None:
    """Record ``value`` as this process's ``worker_state(setup, *args)``: a driver
    that already holds the result (the tokenizer it was given) spares the units it
    runs in-process a second ``setup``.  Other processes still run ``setup``."""
    _recall((setup.__module__, setup.__qualname__, args), lambda: value)


def _recall(key: Tuple[Any, ...], make: Callable[[], Any]) -> Any:
    """The cached value of ``key`` (now the most recently used), else ``make()``, cached
    with the least recently used entries beyond WORKER_STATE_ENTRIES dropped."""
    if key in _WORKER_STATE:
        _WORKER_STATE.move_to_end(key)
    else:
        _WORKER_STATE[key] = make()
        while len(_WORKER_STATE) > WORKER_STATE_ENTRIES:
            _WORKER_STATE.popitem(last=False)
    return _WORKER_STATE[key]


class Executor(abc.ABC):
    """Map ``fn`` over ``tasks``; return the results in task order.

    ``multi_host``: tasks may run on other machines, so unit functions must
    not rely on this host's process table (locks of dead writers elsewhere are
    taken over by attempt, not by pid).
    """

    name: ClassVar[str]
    multi_host: ClassVar[bool] = False

    @abc.abstractmethod
    def map(self, fn: Callable[[Any], Any], tasks: Sequence[Any], *,
            on_result: Optional[Callable[[Any], None]] = None) -> List[Any]:
        """``[fn(t) for t in tasks]``, calling ``on_result`` as each finishes (any order)."""

    def close(self) -> None:
        pass

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class WorkerDiedError(UbeError, RuntimeError):
    """A local worker process died (a signal such as SIGKILL from the OOM
    killer, or an exit) while it ran a task, twice for the same task; or a Ray
    task was lost more often than its retries and resubmissions allow."""


_GUARD_HINT = ('Under the "spawn" start method every worker imports the main script again, so a script that '
               'calls ube-stream must keep its calls under a guard:\n\n    if __name__ == "__main__":\n'
               '        main()\n\nor pass workers=1 (--workers 1) to run in this process')


class LocalExecutor(Executor):
    """A process pool of ``workers`` processes (in-process for one), spawned, or
    forked under :func:`start_method` ``("fork")`` where that is safe.

    Each worker runs one task at a time; the driver watches every worker's
    process handle, so a worker that dies (killed, out of memory, a crash in a
    kernel) is noticed at once: its task is run again once in a fresh worker
    (like Ray retries), and if it dies again the run stops with a
    :class:`WorkerDiedError` naming the task and the cause (signal or exit
    code).  The driver never waits on a dead worker.  Application errors are
    re-raised as themselves, never retried.

    The workers outlive a :meth:`map`: the next one (training's reduce after its
    counting) reuses them instead of starting a pool again (a spawned worker's
    start-up is ~0.5 CPU s).  :meth:`close` (or the end of a ``with`` block, or the
    executor being garbage-collected) stops them; a failed map stops them at once.
    """

    name = "local"
    #: runs of one task, all told, when its worker dies (1 retry)
    max_attempts = 2

    def __init__(self, workers: int | None = None):
        self.workers = worker_count(workers)
        self._pool: _Pool | None = None       # made by the first map that needs workers
        self._finalizer: Any = None

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()

    def map(self, fn: Callable[[Any], Any], tasks: Sequence[Any], *,
            on_result: Callable[[Any], None] | None = None) -> list[Any]:
        check_main_guarded()
        tasks = list(tasks)
        results: list[Any] = [None] * len(tasks)
        if self.workers == 1 or len(tasks) <= 1:
            for i, task in enumerate(tasks):
                results[i] = fn(task)
                if on_result is not None:
                    on_result(results[i])
            return results
        if self._pool is None:
            import weakref

            self._pool = _Pool(self.max_attempts)
            self._finalizer = weakref.finalize(self, self._pool.stop)
        self._pool.run(fn, tasks, min(self.workers, len(tasks)), results, on_result)
        return results


def check_main_guarded() -> None:
    """Refuse to start workers from a process that is itself a spawn worker
    still importing the main script (a script without the ``__main__`` guard):
    without this every worker would start workers of its own, forever.  (A spawn
    worker runs multiprocessing's bootstrap: a process that never imported
    ``multiprocessing`` is none, and is spared the import.)"""
    multiprocessing = sys.modules.get("multiprocessing")
    if multiprocessing is not None and getattr(multiprocessing.current_process(), "_inheriting", False):
        raise RuntimeError("ube-stream was called while a worker process imported the main script. "
                           + _GUARD_HINT)


def _describe(task: Any) -> str:
    """A task as a person reads it: the unit id and file of a unit task."""
    unit = task.get("unit") if isinstance(task, dict) else None
    if unit is not None and hasattr(unit, "unit_id"):
        stop = "end" if unit.row_stop is None else unit.row_stop
        return f"unit {unit.unit_id} ({unit.source.path} rows {unit.row_start}..{stop})"
    shown = repr(task)
    return "task " + (shown if len(shown) <= 200 else shown[:197] + "...")


def _cause(exitcode: int | None) -> str:
    import signal

    if exitcode is None:
        return "it vanished"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = " (SIGKILL: often the out-of-memory killer; check dmesg)" if name == "SIGKILL" else ""
        return f"it was killed by {name}{hint}"
    return f"it exited with code {exitcode}"


class _Pool:
    """The driver's side of the local pool: one pipe and one process handle per worker.
    Workers stay between runs; a run that fails (an error, a worker dead twice, Ctrl-C)
    stops them all."""

    def __init__(self, max_attempts: int):
        import multiprocessing

        self.multiprocessing = multiprocessing
        self.max_attempts = max_attempts
        self.workers: list[Any] = []   # [process, connection, index of its task or None, ready]

    def _start(self) -> None:
        # decided at each start: a worker started again after a death may find threads the first ones did not
        fork = will_fork()
        ctx: Any = self.multiprocessing.get_context("fork" if fork else "spawn")
        parent, child = ctx.Pipe()
        # a forked worker holds copies of the driver's ends of every pipe: it closes them first, or a
        # worker would keep the others' pipes open and none would see the driver die
        inherited = [parent] + [w[1] for w in self.workers] if fork else []
        process = ctx.Process(target=_worker_main, args=(child, inherited), daemon=True)
        process.start()
        child.close()
        self.workers.append([process, parent, None, False])

    def run(self, fn: Callable[[Any], Any], tasks: list[Any], size: int, results: list[Any],
            on_result: Callable[[Any], None] | None) -> None:
        from multiprocessing.connection import wait

        todo = list(range(len(tasks)))[::-1]       # a stack: pop() gives task order
        attempts = [0] * len(tasks)
        left = len(tasks)
        try:
            while len(self.workers) < size:
                self._start()
            while left:
                for worker in self.workers:
                    if worker[2] is None and worker[3] and todo:
                        index = todo.pop()
                        attempts[index] += 1
                        worker[2] = index
                        worker[1].send((fn, tasks[index]))
                handles = {w[1]: w for w in self.workers}
                handles.update({w[0].sentinel: w for w in self.workers})
                for ready in wait(list(handles)):
                    worker = handles[ready]
                    if worker not in self.workers:
                        continue
                    process, conn, index, _ = worker
                    message = None
                    try:
                        if conn.poll():
                            message = conn.recv()
                    except (EOFError, OSError):
                        message = None
                    if message is None:
                        if process.is_alive() and ready is not process.sentinel:
                            continue
                        process.join(5)
                        self._died(worker, tasks, index, attempts, todo)
                        continue
                    kind, payload = message
                    if kind == "ready":
                        worker[3] = True
                    elif kind == "progress":
                        progress.deliver(payload)
                    elif kind == "ok":
                        worker[2] = None
                        results[index] = payload
                        left -= 1
                        if on_result is not None:
                            on_result(payload)
                    else:
                        raise _remote_error(payload)
        except BaseException:
            self.stop()
            raise

    def _died(self, worker: list[Any], tasks: list[Any], index: int | None, attempts: list[int],
              todo: list[int]) -> None:
        process, conn, _, ready = worker
        conn.close()
        self.workers.remove(worker)
        cause = _cause(process.exitcode)
        if not ready:
            raise WorkerDiedError(f"a worker process died while starting ({cause}). If this was run from a "
                                  f"script: " + _GUARD_HINT)
        if index is None:
            self._start()
            return
        what = _describe(tasks[index])
        if attempts[index] >= self.max_attempts:
            raise WorkerDiedError(
                f"the worker running {what} died ({cause}), {attempts[index]} times; the run is stopped. "
                f"Find the cause (memory: fewer workers or smaller units; a crash: report it with this unit), "
                f"then rerun: committed work is kept")
        import warnings

        warnings.warn(f"the worker running {what} died ({cause}); running it again in a new worker",
                      RuntimeWarning, stacklevel=2)
        todo.append(index)
        self._start()

    def stop(self) -> None:
        for _process, conn, _, _ in self.workers:
            try:
                conn.send(None)
            except (OSError, ValueError):
                pass
        for process, _conn, index, _ in self.workers:
            if index is not None:
                process.terminate()
        for process, conn, _, _ in self.workers:
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join(5)
            conn.close()
        self.workers = []


def _worker_main(conn: Any, inherited: Sequence[Any] = ()) -> None:
    """A worker: say it is ready, then run ``(fn, task)`` messages until ``None``.
    ``inherited``: the driver's pipe ends a forked worker got copies of (closed here)."""
    import signal
    import traceback

    for other in inherited:
        other.close()
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the driver decides; Ctrl-C reaches it
    progress.set_sink(lambda report: conn.send(("progress", report)))   # a running unit's counts, to the driver
    conn.send(("ready", None))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        fn, task = message
        try:
            reply: tuple[str, Any] = ("ok", fn(task))
        except BaseException as exc:  # noqa: BLE001 - sent to the driver, raised there
            reply = ("error", (exc, traceback.format_exc()))
        try:
            conn.send(reply)
        except Exception as exc:  # noqa: BLE001 - an unpicklable result or exception
            conn.send(("error", (RuntimeError(f"{type(exc).__name__}: {exc} (while sending the result of a "
                                              f"task back)"), traceback.format_exc())))


def _remote_error(payload: tuple[BaseException, str]) -> BaseException:
    exc, text = payload
    if hasattr(exc, "add_note"):
        exc.add_note("in the worker process:\n" + text.rstrip())
    return exc


class RayExecutor(Executor):
    """Each task is a Ray task (``num_cpus=1``); ``max_retries`` bounds Ray's
    own retries after system failures (a worker process that died, a lost
    node).  A task whose retries are spent on such failures (or whose result
    was lost with its node) is submitted again by the driver, up to
    ``resubmits`` times, then the run stops with :class:`WorkerDiedError`
    naming the unit and the Ray error.  Unit functions are idempotent (they
    commit by atomic rename and take over dead attempts' locks), so a rerun
    attempt is always safe.

    ``storage_options`` (``{protocol: fsspec options}``) and, unless
    ``forward_storage_env=False``, the driver's storage variables are set in
    every task's environment (see the module)."""

    name = "ray"
    multi_host = True
    #: Ray errors that mean "the attempt was lost", not "the unit failed"
    LOST = ("WorkerCrashedError", "NodeDiedError", "ObjectLostError", "OwnerDiedError", "LocalRayletDiedError")

    def __init__(self, address: Optional[str] = None, *, max_retries: int = 3, resubmits: int = 2,
                 num_cpus: Optional[int] = None, storage_options: Optional[Dict[str, Dict[str, Any]]] = None,
                 forward_storage_env: bool = True):
        ray = import_ray()
        if not ray.is_initialized():
            kwargs: Dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False}
            if address:
                kwargs["address"] = address
            elif num_cpus is not None:
                kwargs["num_cpus"] = num_cpus
            ray.init(**kwargs)
        self._ray = ray
        self.resubmits = resubmits
        self._remote = ray.remote(num_cpus=1, max_retries=max_retries, retry_exceptions=False)(_ray_call)
        self.env_vars = storage_env(storage_options, forward_storage_env)
        if self.env_vars:
            self._remote = self._remote.options(runtime_env={"env_vars": self.env_vars})
        self._lost = tuple(getattr(ray.exceptions, name) for name in self.LOST if hasattr(ray.exceptions, name))

    def map(self, fn: Callable[[Any], Any], tasks: Sequence[Any], *,
            on_result: Optional[Callable[[Any], None]] = None) -> List[Any]:
        ray = self._ray
        tasks = list(tasks)
        refs = [self._remote.remote(fn, task) for task in tasks]
        index_of = {ref: i for i, ref in enumerate(refs)}
        submitted = [1] * len(tasks)
        results: List[Any] = [None] * len(tasks)
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    index = index_of.pop(ref)
                    try:
                        result = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:
                        # an application error inside the unit function: re-raise it as itself
                        cause = exc.as_instanceof_cause()
                        original = getattr(exc, "cause", None)
                        raise (original if isinstance(original, BaseException) else cause) from None
                    except self._lost as exc:
                        if submitted[index] > self.resubmits:
                            raise WorkerDiedError(
                                f"the Ray task running {_describe(tasks[index])} was lost {submitted[index]} "
                                f"times, each after Ray's own retries ({type(exc).__name__}: {exc}); the run is "
                                f"stopped. Check the cluster's nodes (memory, preemption), then rerun: committed "
                                f"work is kept") from None
                        import warnings

                        warnings.warn(f"the Ray task running {_describe(tasks[index])} was lost "
                                      f"({type(exc).__name__}); submitting it again", RuntimeWarning, stacklevel=2)
                        submitted[index] += 1
                        again = self._remote.remote(fn, tasks[index])
                        index_of[again] = index
                        pending.append(again)
                        continue
                    results[index] = result
                    if on_result is not None:
                        on_result(result)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
        return results


#: driver environment variables a worker may need to reach object stores (fsspec, S3, GCS, Azure, the HF Hub)
STORAGE_ENV_PREFIXES = ("AWS_", "BOTO_", "FSSPEC_", "GOOGLE_", "GCS_", "AZURE_", "HF_TOKEN", "HF_ENDPOINT")
#: modules whose exceptions are storage errors (credentials, permissions, endpoints)
_STORAGE_MODULES = ("botocore", "aiobotocore", "s3fs", "gcsfs", "google", "azure", "adlfs", "fsspec", "aiohttp")


def storage_env(storage_options: Optional[Dict[str, Dict[str, Any]]] = None, forward: bool = True) -> Dict[str, str]:
    """The environment a cluster task needs for storage: this process's
    :data:`STORAGE_ENV_PREFIXES` variables (with ``forward``), plus
    ``storage_options`` as fsspec's ``FSSPEC_<PROTOCOL>`` JSON variables.

    >>> storage_env({"s3": {"endpoint_url": "http://127.0.0.1:9000"}}, forward=False)
    {'FSSPEC_S3': '{"endpoint_url": "http://127.0.0.1:9000"}'}
    """
    import json

    env = {k: v for k, v in os.environ.items() if k.startswith(STORAGE_ENV_PREFIXES)} if forward else {}
    for protocol, options in (storage_options or {}).items():
        if not isinstance(options, dict):
            raise ValueError(f"storage_options must map a protocol to its fsspec options, e.g. "
                             f"{{'s3': {{'endpoint_url': ...}}}}; got {protocol!r}: {options!r:.80}")
        env[f"FSSPEC_{protocol.upper()}"] = json.dumps(options)
    return env


def _is_storage_error(exc: BaseException) -> bool:
    module = type(exc).__module__.partition(".")[0]
    return module in _STORAGE_MODULES or isinstance(exc, (PermissionError, ConnectionError, TimeoutError))


def _ray_call(fn: Callable[[Any], Any], task: Any) -> Any:
    try:
        return fn(task)
    except UbeError:
        raise
    except Exception as exc:
        if not _is_storage_error(exc):
            raise
        from .errors import StorageError
        from .storage import is_url

        out = task.get("out_dir") if isinstance(task, dict) else None
        where = f" writing to {out}" if isinstance(out, str) and is_url(out) else ""
        detail = " ".join(str(exc).split()) or "no detail"
        import socket

        raise StorageError(getattr(exc, "errno", None) or 5,
                           f"{_describe(task)}{where}: the Ray worker on {socket.gethostname()} cannot reach the "
                           f"store ({type(exc).__name__}: {detail}). Give the workers the store's credentials and "
                           f"endpoint: set them in the driver's environment (AWS_*, FSSPEC_*, ... are forwarded to "
                           f"the tasks) or pass RayExecutor(storage_options=...), or configure every node; "
                           f"committed units are kept, rerun to resume") from None


def import_ray():
    try:
        import ray
    except ImportError:
        raise ImportError(
            "the ray executor needs Ray, an optional extra: pip install \"ube-stream[ray]\" "
            "(or pip install ray); or use the default local executor") from None
    return ray


EXECUTORS: Dict[str, Type[Executor]] = {"local": LocalExecutor, "ray": RayExecutor}


def executor_class(executor: "str | Executor") -> Type[Executor]:
    """The class of an executor or executor name (without starting it)."""
    if isinstance(executor, Executor):
        return type(executor)
    try:
        return EXECUTORS[executor]
    except KeyError:
        raise ValueError(f"unknown executor {executor!r}; expected one of {', '.join(map(repr, EXECUTORS))}") from None


def get_executor(executor: "str | Executor" = "local", *, workers: Optional[int] = None,
                 ray_address: Optional[str] = None) -> Executor:
    """An :class:`Executor` by name (``"local"`` or ``"ray"``), or ``executor`` itself."""
    if isinstance(executor, Executor):
        return executor
    if executor_class(executor) is RayExecutor:
        return RayExecutor(ray_address, num_cpus=workers)
    return LocalExecutor(workers)
