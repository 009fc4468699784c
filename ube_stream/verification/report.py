"""The result of a verification run: counts per category and the first mismatches.

A :class:`VerifyReport` is small and picklable, so worker processes return one
per task and the parent merges them (in task order, so the examples kept do
not depend on completion order).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from ..executors import usable_cores

__all__ = ["Mismatch", "VerifyReport", "first_difference", "around"]

CONTEXT_CHARS = 24


def first_difference(expected: str, found: str) -> int:
    """Character offset of the first difference (the shorter length when one is
    a prefix of the other); ``-1`` when equal."""
    if expected == found:
        return -1
    n = min(len(expected), len(found))
    lo = 0
    step = 4096
    while lo < n and expected[lo:lo + step] == found[lo:lo + step]:
        lo += step
    for i in range(lo, min(lo + step, n)):
        if expected[i] != found[i]:
            return i
    return n


def around(text: str, offset: int, width: int = CONTEXT_CHARS) -> str:
    """``repr`` of ``text`` around ``offset`` (``…`` marks a cut)."""
    start = max(0, offset - width)
    stop = offset + width
    head = "…" if start > 0 else ""
    tail = "…" if stop < len(text) else ""
    return head + repr(text[start:stop]) + tail


@dataclass
class Mismatch:
    """One failed check.

    ``category`` names the check (``"scalar/alone/ube"``, ``"corpus"``,
    ``"shards/tokens"``, ...); ``source`` the file (or item set) and ``row``
    the row (or item index / key) inside it; ``offset`` the character offset of
    the first difference (``None`` when not a text comparison); ``expected`` and
    ``found`` are ``repr`` excerpts around it; ``shard`` / ``document`` locate a
    stored document.
    """

    category: str
    source: str
    row: Any
    message: str
    offset: Optional[int] = None
    expected: Optional[str] = None
    found: Optional[str] = None
    shard: Optional[str] = None
    document: Optional[int] = None

    @classmethod
    def of_texts(cls, category: str, source: str, row: Any, expected: str, found: str, *,
                 message: str = "text differs", **where: Any) -> "Mismatch":
        """A text comparison: where the first difference is, and the two texts around it."""
        offset = first_difference(expected, found)
        return cls(category, source, row, f"{message} (lengths {len(expected)} expected, {len(found)} found)",
                   offset=offset, expected=around(expected, offset), found=around(found, offset), **where)

    def format(self) -> str:
        where = [f"source {self.source}", f"row {self.row}"]
        if self.shard is not None:
            where.insert(0, f"shard {self.shard} document {self.document}")
        if self.offset is not None:
            where.append(f"character offset {self.offset}")
        lines = [f"[{self.category}] {', '.join(where)}: {self.message}"]
        if self.expected is not None:
            lines.append(f"    expected: {self.expected}")
            lines.append(f"    found:    {self.found}")
        return "\n".join(lines)

    def to_dict(self) -> Dict[str, Any]:
        return {k: getattr(self, k) for k in ("category", "source", "row", "message", "offset", "expected",
                                               "found", "shard", "document")}


@dataclass
class VerifyReport:
    """Counts of what was checked (per category), of what failed, and the first
    ``max_examples`` mismatches.  ``ok`` is true only when nothing failed and
    something was checked."""

    kind: str
    checked: Dict[str, int] = field(default_factory=dict)
    failed: Dict[str, int] = field(default_factory=dict)
    examples: List[Mismatch] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    max_examples: int = 10

    @property
    def ok(self) -> bool:
        return not self.failed and any(self.checked.values())

    @property
    def num_failed(self) -> int:
        return sum(self.failed.values())

    def count(self, category: str, n: int = 1) -> None:
        """Record ``n`` items checked in ``category``."""
        self.checked[category] = self.checked.get(category, 0) + int(n)

    def fail(self, mismatch: Mismatch, n: int = 1) -> None:
        """Record a failure (``n`` items) and keep it as an example while there is room."""
        self.failed[mismatch.category] = self.failed.get(mismatch.category, 0) + n
        if len(self.examples) < self.max_examples:
            self.examples.append(mismatch)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def merge(self, other: "VerifyReport") -> "VerifyReport":
        for category, n in other.checked.items():
            self.count(category, n)
        for category, n in other.failed.items():
            self.failed[category] = self.failed.get(category, 0) + n
        room = self.max_examples - len(self.examples)
        if room > 0:
            self.examples.extend(other.examples[:room])
        for text in other.notes:
            self.note(text)
        return self

    def format(self) -> str:
        """A human summary: one line per category, then the first mismatches."""
        width = max([len(c) for c in self.checked] + [8])
        lines = [f"ube verify --{self.kind}: " + ("OK" if self.ok else
                 ("FAILED" if self.failed else "NOTHING CHECKED"))]
        for category, n in self.checked.items():
            bad = self.failed.get(category, 0)
            lines.append(f"  {category:<{width}}  {n:>12,} checked" + (f"  {bad:,} MISMATCHED" if bad else ""))
        for category, bad in self.failed.items():
            if category not in self.checked:
                lines.append(f"  {category:<{width}}  {'':>12} {bad:,} MISMATCHED")
        for text in self.notes:
            lines.append(f"  note: {text}")
        if self.examples:
            shown = len(self.examples)
            lines.append(f"first {shown} of {self.num_failed:,} mismatches:")
            lines.extend(m.format() for m in self.examples)
        return "\n".join(lines) + "\n"

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": self.kind, "ok": self.ok, "checked": dict(self.checked), "failed": dict(self.failed),
                "examples": [m.to_dict() for m in self.examples], "notes": list(self.notes)}

    def __str__(self) -> str:
        return self.format()


# --------------------------------------------------------------------------- running checks

T = TypeVar("T")

def default_workers(workers: Optional[int], tasks: int) -> int:
    if workers is None:
        workers = usable_cores()
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    return max(1, min(workers, tasks))


def run_tasks(function: Callable[..., T], tasks: Sequence[Any], args: Tuple = (), *, workers: int,
              desc: str, show_progress: bool, weights: Optional[Sequence[int]] = None,
              unit: str = "task", progress: Optional[Any] = None, executor: Any = "local",
              ray_address: Optional[str] = None, on_result: Optional[Callable[[int, T], None]] = None) -> List[T]:
    """``function(task, *args)`` for every task on the run engine
    (:func:`ube_stream.runs.engine.run_units`: the local pool of ``workers``, or
    ``executor="ray"``); results in task order.  ``args`` travel with every
    task: keep them small (a tokenizer goes by file, see
    :func:`~ube_stream.runs.engine.worker_tokenizer`).  Progress: a bar advanced
    by each task's weight, or ``progress(result)`` called as each task finishes
    (e.g. a :class:`~ube_stream.progress.DocumentProgress` fed by the caller).
    ``on_result(index, result)`` is called in this process as each task finishes
    (in any order), before the progress is advanced: where a caller commits a
    finished task's result (see :func:`ube_stream.verification.shards.verify_shards`)."""
    from ..progress import progress_bar
    from ..runs.engine import run_units

    weights = list(weights) if weights is not None else [1] * len(tasks)
    bar = progress_bar(total=sum(weights), desc=desc, unit=unit, unit_scale=True,
                       enabled=show_progress and progress is None)

    def finished(result: Tuple[int, T]) -> None:
        if on_result is not None:
            on_result(*result)
        if progress is not None:
            progress(result[1])
        bar.update(weights[result[0]])

    try:
        indexed = run_units(functools.partial(_indexed_task, function, args), list(enumerate(tasks)),
                            executor=executor, workers=workers, ray_address=ray_address, on_result=finished)
        return [report for _, report in indexed]
    finally:
        bar.close()


def _indexed_task(function: Callable[..., T], args: Tuple, item: Tuple[int, Any]) -> Tuple[int, T]:
    index, task = item
    return index, function(task, *args)
