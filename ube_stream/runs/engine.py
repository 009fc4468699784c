"""Running unit functions: one way for every corpus job.  Internal.

A job (training's counting, encoding, verifying) is a list of unit tasks and
one module-level unit function ``fn(task) -> record``; :func:`run_units` maps
it over the tasks on an executor (:mod:`ube_stream.executors`: the local
process pool or Ray), calls ``on_result(record)`` as units finish (in any
order: what a record means comes from its unit id), and returns the records
in task order.

Per-process state such as the tokenizer never travels in a task: a task
names the tokenizer file and its fingerprint, and the unit function calls
:func:`worker_tokenizer`, which loads it once per worker process
(:func:`~ube_stream.executors.worker_state`) and checks the fingerprint.  The
driver seeds its own copy (:func:`seed_tokenizer`), so units run in the
driver's process (one worker) and forked workers load nothing.  A job given
a :class:`~ube_stream.Tokenizer` object rather than a file writes it once to
its run's scratch space (:func:`tokenizer_file`).
"""
from __future__ import annotations

import os
from typing import Any, Callable, List, Optional, Sequence, Tuple

from ..errors import ShardFormatError
from ..executors import Executor, get_executor, seed_worker_state

__all__ = ["run_units", "worker_tokenizer", "seed_tokenizer", "tokenizer_file"]


def worker_tokenizer(path: str, fingerprint: str):
    """The tokenizer at ``path`` (any file :func:`~ube_stream.tokenizer.as_tokenizer`
    reads), checked against ``fingerprint``; call it through
    ``worker_state(worker_tokenizer, path, fingerprint)`` (loaded once per process)."""
    from ..tokenizer import as_tokenizer

    tok = as_tokenizer(path)
    if tok.fingerprint != fingerprint:
        raise ShardFormatError(f"{path}: tokenizer fingerprint {tok.fingerprint} is not the run's {fingerprint} "
                               f"(the file changed during the run, or this worker sees another copy of the "
                               f"output directory: on a cluster the output directory must be one shared path)")
    return tok


def seed_tokenizer(tok, path: str) -> None:
    """Make ``tok`` this process's ``worker_state(worker_tokenizer, path, tok.fingerprint)``."""
    seed_worker_state(tok, worker_tokenizer, path, tok.fingerprint)


def tokenizer_file(tokenizer, scratch: str) -> Tuple[Any, str]:
    """``(tokenizer, path)``: ``tokenizer`` (a path or a Tokenizer) loaded, and a
    file holding it (its own path, or ``<scratch>/tokenizer.json`` written once)."""
    from ..tokenizer import as_tokenizer

    tok = as_tokenizer(tokenizer)
    if isinstance(tokenizer, (str, os.PathLike)) and os.path.isfile(tokenizer):
        return tok, os.path.abspath(tokenizer)
    path = os.path.join(scratch, "tokenizer.json")
    tok.save(path)
    return tok, path


def run_units(fn: Callable[[Any], Any], tasks: Sequence[Any], *, executor: "str | Executor" = "local",
              workers: Optional[int] = None, ray_address: Optional[str] = None,
              on_result: Optional[Callable[[Any], None]] = None) -> List[Any]:
    """``[fn(t) for t in tasks]`` on ``executor`` (a name, started and closed
    here, or a running :class:`~ube_stream.executors.Executor`), calling
    ``on_result`` as each unit finishes."""
    tasks = list(tasks)
    if not tasks:
        return []
    runner = get_executor(executor, workers=workers, ray_address=ray_address)
    try:
        return runner.map(fn, tasks, on_result=on_result)
    finally:
        if runner is not executor:
            runner.close()
