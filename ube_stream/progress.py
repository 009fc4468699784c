"""Progress on stderr: a tqdm bar on a terminal, periodic single lines in a log,
nothing when disabled.

:class:`DocumentProgress` is the one progress of the corpus passes (training
counts, encoding, corpus and shard verification): it counts **documents** and
shows the **UTF-8 MB** read (and the tokens, when encoding) beside them, the
same quantities as the run's summary, never compressed or on-disk bytes.  Its
total starts as the rows the plan knows of (``None`` when some file's row
count is unknown, e.g. compressed JSON Lines) and drops by every skipped row
as units report them, so a finished bar's total equals the summary's document
count.  When the rows are unknown, the share of the input's bytes on disk that
finished units cover (``expected_input_bytes``, ``add(input_bytes=)``) gives
the percentage and the ETA instead.

When stderr is not a terminal (a log file, a CI job, a pipe) no frames are
written: one line every ``UBE_PROGRESS_SECONDS`` seconds (default 30), and a
last line when the pass ends, which holds the final counts (the numbers of the
summary that follows).
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Dict, Optional

__all__ = ["progress_bar", "DocumentProgress", "planned_rows", "planned_input_bytes", "unit_input_bytes",
           "LineProgress"]


class _NullBar:
    total: int | None = None
    n: int = 0

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        pass

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        pass


def _interval() -> float:
    try:
        return max(0.0, float(os.environ.get("UBE_PROGRESS_SECONDS", "30")))
    except ValueError:
        return 30.0


def _count(n: float, unit_scale: bool) -> str:
    if not unit_scale or abs(n) < 1000:
        return f"{n:,.0f}"
    for scale, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.2f}{suffix}"
    return f"{n:,.0f}"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class LineProgress:
    """A tqdm-like bar for logs: ``update``/``set_postfix``/``close`` as tqdm's,
    written as whole lines (``desc: 1.08M doc of 1.08M (100%), 97.1 MB, 12:03 elapsed``)
    at most every ``interval`` seconds, and once more at :meth:`close` with
    the final state.  ``fraction`` (a callable) overrides ``n / total`` for the
    percentage and ETA (e.g. bytes read of the bytes on disk)."""

    def __init__(self, *, total: Optional[int], desc: str, unit: str = "it", unit_scale: bool = False,
                 file=None, interval: Optional[float] = None):
        self.total = total
        self.n = 0
        self.desc = desc
        self.unit = unit
        self.unit_scale = unit_scale
        self.file = file if file is not None else sys.stderr
        self.interval = _interval() if interval is None else interval
        self.postfix: Dict[str, str] = {}
        self.fraction: Optional[Any] = None
        self.started = time.monotonic()
        self.last_written = self.started
        self.closed = False
        self.lines = 0
        self.written: Optional[tuple] = None

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        text = f"{self.desc}: {_count(self.n, self.unit_scale)}{' ' + self.unit if self.unit else ''}"
        fraction = self.fraction() if self.fraction is not None else (
            self.n / self.total if self.total else None)
        if self.total is not None:
            text += f" of {_count(self.total, self.unit_scale)}"
        if fraction is not None:
            text += f" ({100 * min(fraction, 1.0):.0f}%"
            if 0 < fraction < 1 and not self.closed:
                text += f", ETA {_duration(elapsed * (1 - fraction) / fraction)}"
            text += ")"
        for key, value in self.postfix.items():
            text += f", {value} {key}" if key in ("MB", "tokens", "skipped") else f", {key}={value}"
        return text + f", {_duration(elapsed)} elapsed"

    def _write(self) -> None:
        print(self.line(), file=self.file, flush=True)
        self.last_written = time.monotonic()
        self.lines += 1
        self.written = (self.n, tuple(self.postfix.items()))

    def update(self, n: int = 1) -> None:
        self.n += n
        if time.monotonic() - self.last_written >= self.interval:
            self._write()

    def set_postfix(self, postfix: Optional[Dict[str, Any]] = None, refresh: bool = True, **kwargs: Any) -> None:
        self.postfix = {k: str(v) for k, v in {**(postfix or {}), **kwargs}.items()}

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if (self.n or self.lines) and self.written != (self.n, tuple(self.postfix.items())):
                self._write()


def progress_bar(*, total: int | None, desc: str, unit: str = "it", unit_scale: bool = False,
                 enabled: bool = True):
    """A tqdm bar on stderr when it is a terminal, a :class:`LineProgress` when it
    is not, or a no-op object when disabled."""
    if not enabled:
        return _NullBar()
    if not _is_terminal(sys.stderr):
        return LineProgress(total=total, desc=desc, unit=unit, unit_scale=unit_scale)
    from tqdm.auto import tqdm

    class Bar(tqdm):
        # no monitor thread: tqdm's outlives the bar, and a live thread rules out forking
        # the workers of any later run in this process (executors.will_fork)
        monitor_interval = 0

    return Bar(total=total, desc=desc, unit=unit, unit_scale=unit_scale, file=sys.stderr,
               dynamic_ncols=True, mininterval=0.5, leave=False)


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class DocumentProgress:
    """Documents and UTF-8 MB of a corpus pass, as units finish.

    ``expected_rows``: rows the plan knows of (``None``: unknown).
    ``expected_input_bytes``: the input's bytes on disk (compressed), for the
    percentage and ETA when the rows are unknown.  Call :meth:`add` once per
    finished unit with its documents, skipped rows and UTF-8 bytes (and tokens,
    when encoding; ``input_bytes``: its bytes on disk, or ``unit_id`` to look
    them up among the ``units`` of the plan, :func:`unit_input_bytes`)."""

    def __init__(self, *, desc: str, expected_rows: int | None, enabled: bool = True,
                 expected_input_bytes: int | None = None, units=None):
        self.documents = 0
        self.skipped = 0
        self.utf8_bytes = 0
        self.tokens = 0
        self.input_bytes = 0
        self.total = expected_rows
        self.unit_bytes = unit_input_bytes(units) if units is not None else {}
        self.expected_input_bytes = expected_input_bytes or sum(self.unit_bytes.values()) or None
        self.bar = progress_bar(total=expected_rows, desc=desc, unit="doc", unit_scale=True, enabled=enabled)
        if expected_rows is None and self.expected_input_bytes and isinstance(self.bar, LineProgress):
            self.bar.fraction = lambda: self.input_bytes / self.expected_input_bytes

    def add(self, *, documents: int, skipped: int, utf8_bytes: int, tokens: int | None = None,
            input_bytes: int | None = None, unit_id: str | None = None) -> None:
        if input_bytes is None and unit_id is not None:
            input_bytes = self.unit_bytes.get(unit_id)
        self.documents += documents
        self.skipped += skipped
        self.utf8_bytes += utf8_bytes
        if self.total is not None and skipped:
            self.total = max(self.total - skipped, self.documents)
            self.bar.total = self.total
        postfix = {"MB": f"{self.utf8_bytes / 1e6:,.1f}"}
        if tokens is not None:
            self.tokens += tokens
            postfix["tokens"] = f"{self.tokens:,}"
        if self.skipped:
            postfix["skipped"] = f"{self.skipped:,}"
        if input_bytes is not None:
            self.input_bytes += input_bytes
            if self.total is None and self.expected_input_bytes and not isinstance(self.bar, LineProgress):
                postfix["input"] = f"{100 * min(self.input_bytes / self.expected_input_bytes, 1.0):.0f}%"
        self.bar.set_postfix(postfix, refresh=False)
        self.bar.update(documents)

    def close(self) -> None:
        refresh = getattr(self.bar, "refresh", None)   # any bar-like object with update/set_postfix/close
        if refresh is not None:
            refresh()   # the last frame shows the final counts (the summary's)
        self.bar.close()


def planned_rows(units) -> int | None:
    """Rows the work units cover, when every unit knows its end (else ``None``)."""
    if any(u.row_stop is None for u in units):
        return None
    return sum(u.row_stop - u.row_start for u in units)


def planned_input_bytes(units) -> int:
    """Bytes on disk of the files the work units read (each file counted once):
    the denominator of the progress when the rows are unknown."""
    return sum(unit_input_bytes(units).values())


def unit_input_bytes(units) -> Dict[str, int]:
    """Each work unit's share of its file's bytes on disk (a file's size split
    evenly among its units; a compressed file is one unit), by unit id."""
    by_source: Dict[str, list] = {}
    for u in units:
        by_source.setdefault(u.source.path, []).append(u)
    shares = {}
    for members in by_source.values():
        size, n = members[0].source.size, len(members)
        for index, u in enumerate(sorted(members, key=lambda v: v.row_start)):
            shares[u.unit_id] = size // n + (1 if index < size % n else 0)
    return shares
