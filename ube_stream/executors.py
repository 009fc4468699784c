"""Executors: map a unit function over work units, results in unit order.

One small interface, two implementations:

- ``local`` (default): a process pool (``spawn``), or the calling process
  itself for one worker or one task;
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

System failures (a worker process killed) are retried a bounded number of
times by Ray; application errors (a corrupt input file) are raised at once,
with their original message, and never retried.
"""
from __future__ import annotations

import abc
import os
from typing import Any, Callable, ClassVar, Dict, List, Optional, Sequence, Tuple, Type

__all__ = ["Executor", "LocalExecutor", "RayExecutor", "EXECUTORS", "executor_class", "get_executor", "worker_state"]

_WORKER_STATE: Dict[Tuple[Any, ...], Any] = {}


def worker_state(setup: Callable[..., Any], *args: Any) -> Any:
    """``setup(*args)``, computed once per process and cached by its arguments."""
    key = (setup.__module__, setup.__qualname__, args)
    if key not in _WORKER_STATE:
        _WORKER_STATE[key] = setup(*args)
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


class LocalExecutor(Executor):
    """A ``spawn`` process pool of ``workers`` processes (in-process for one)."""

    name = "local"

    def __init__(self, workers: Optional[int] = None):
        self.workers = max(1, workers if workers is not None else (os.cpu_count() or 1))

    def map(self, fn: Callable[[Any], Any], tasks: Sequence[Any], *,
            on_result: Optional[Callable[[Any], None]] = None) -> List[Any]:
        tasks = list(tasks)
        results: List[Any] = [None] * len(tasks)
        if self.workers == 1 or len(tasks) <= 1:
            for i, task in enumerate(tasks):
                results[i] = fn(task)
                if on_result is not None:
                    on_result(results[i])
            return results
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(min(self.workers, len(tasks))) as pool:
            try:
                for i, result in pool.imap_unordered(_indexed_call, [(fn, i, t) for i, t in enumerate(tasks)]):
                    results[i] = result
                    if on_result is not None:
                        on_result(result)
            except BaseException:
                pool.terminate()
                raise
        return results


def _indexed_call(item: Tuple[Callable[[Any], Any], int, Any]) -> Tuple[int, Any]:
    fn, index, task = item
    return index, fn(task)


class RayExecutor(Executor):
    """Each task is a Ray task (``num_cpus=1``); ``max_retries`` bounds the
    retries after system failures (a worker process that died)."""

    name = "ray"
    multi_host = True

    def __init__(self, address: Optional[str] = None, *, max_retries: int = 3,
                 num_cpus: Optional[int] = None):
        ray = import_ray()
        if not ray.is_initialized():
            kwargs: Dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False}
            if address:
                kwargs["address"] = address
            elif num_cpus is not None:
                kwargs["num_cpus"] = num_cpus
            ray.init(**kwargs)
        self._ray = ray
        self._remote = ray.remote(num_cpus=1, max_retries=max_retries, retry_exceptions=False)(_ray_call)

    def map(self, fn: Callable[[Any], Any], tasks: Sequence[Any], *,
            on_result: Optional[Callable[[Any], None]] = None) -> List[Any]:
        ray = self._ray
        tasks = list(tasks)
        refs = [self._remote.remote(fn, task) for task in tasks]
        index_of = {ref: i for i, ref in enumerate(refs)}
        results: List[Any] = [None] * len(tasks)
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    try:
                        result = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:
                        # an application error inside the unit function: re-raise it as itself
                        cause = exc.as_instanceof_cause()
                        original = getattr(exc, "cause", None)
                        raise (original if isinstance(original, BaseException) else cause) from None
                    results[index_of[ref]] = result
                    if on_result is not None:
                        on_result(result)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
        return results


def _ray_call(fn: Callable[[Any], Any], task: Any) -> Any:
    return fn(task)


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
