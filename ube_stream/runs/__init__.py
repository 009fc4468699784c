"""The run engine shared by every corpus job (training's counting, encoding,
verifying): one lock, one plan and commit protocol, run directories that are
born locked, and the corpus a job reads.

- :mod:`.lock`: the one lock of every run (``flock``, released by the OS when
  its holder dies; the holder named in ``LockError``);
- :mod:`.records`: the one plan and per-unit commit protocol (``RunPlan``,
  ``UnitRecords``), local and on object stores, and the cleanup calls;
- :mod:`.run_dir`: a run directory created with its lock in one atomic step,
  and the removal of runs proven dead;
- :mod:`.corpus`: :class:`Corpus`, the input options of a job in one value;
- :mod:`.engine`: ``run_units``, a unit function mapped over unit tasks on an
  executor, and the tokenizer each worker loads once (``worker_tokenizer``).
"""
from .corpus import Corpus as Corpus
from .run_dir import RunDir as RunDir
from .run_dir import remove_dead_runs as remove_dead_runs

__all__ = ["Corpus", "RunDir", "remove_dead_runs"]
