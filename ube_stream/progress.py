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

**Inside a unit.**  A large unit (one big ``.jsonl.zst`` is one unit) reports
while it runs: its unit function feeds a :class:`UnitProgress` its batches
(documents, UTF-8 bytes, tokens), and the line-file reader records the bytes
on disk it has consumed (:func:`note_input`; compressed bytes for a
compressed file).  At most once a second (or every ``UBE_PROGRESS_SECONDS``,
when shorter) the unit sends its running counts to :func:`deliver`: in the
driver's process directly, from a local pool's worker over the pipe the pool
already has (:mod:`ube_stream.executors` sets :func:`set_sink` in each
worker).  The running :class:`DocumentProgress` shows finished units plus the
running ones' counts, and the percentage and ETA from the bytes consumed when
the rows are unknown; a finished unit's record replaces its running counts,
so the last line is still the summary's numbers.  Under Ray the reports of a
running unit are not sent (its record still counts when it finishes).
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Dict, Optional

__all__ = ["progress_bar", "DocumentProgress", "planned_rows", "planned_input_bytes", "unit_input_bytes",
           "LineProgress", "UnitProgress", "note_input", "set_sink", "deliver"]


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
    """Documents and UTF-8 MB of a corpus pass, as units finish (and while they run).

    ``expected_rows``: rows the plan knows of (``None``: unknown).
    ``expected_input_bytes``: the input's bytes on disk (compressed), for the
    percentage and ETA when the rows are unknown.  Call :meth:`add` once per
    finished unit with its documents, skipped rows and UTF-8 bytes (and tokens,
    when encoding; ``input_bytes``: its bytes on disk, or ``unit_id`` to look
    them up among the ``units`` of the plan, :func:`unit_input_bytes`).
    Running units' reports (:class:`UnitProgress`) reach the one open
    ``DocumentProgress`` of the process through :func:`deliver`.  The bar is
    made at the first report, so none exists while a local pool forks its workers."""

    def __init__(self, *, desc: str, expected_rows: int | None, enabled: bool = True,
                 expected_input_bytes: int | None = None, units=None):
        global _receiver
        self.documents = 0
        self.skipped = 0
        self.utf8_bytes = 0
        self.tokens = 0
        self.input_bytes = 0
        self.counts_tokens = False
        self.total = expected_rows
        self.desc, self.enabled = desc, enabled
        self.unit_bytes = unit_input_bytes(units) if units is not None else {}
        self.expected_input_bytes = expected_input_bytes or sum(self.unit_bytes.values()) or None
        self.running: Dict[str, Dict[str, int]] = {}   # unit id -> its last report while it runs
        self._bar: Any = None
        _receiver = self

    @property
    def bar(self) -> Any:
        if self._bar is None:
            self._bar = progress_bar(total=self.total, desc=self.desc, unit="doc", unit_scale=True,
                                     enabled=self.enabled)
            if self.total is None and self.expected_input_bytes and isinstance(self._bar, LineProgress):
                self._bar.fraction = lambda: self._shown("input_bytes") / self.expected_input_bytes
        return self._bar

    def _shown(self, key: str) -> int:
        return getattr(self, key) + sum(r.get(key, 0) for r in self.running.values())

    def add(self, *, documents: int, skipped: int, utf8_bytes: int, tokens: int | None = None,
            input_bytes: int | None = None, unit_id: str | None = None) -> None:
        if input_bytes is None and unit_id is not None:
            input_bytes = self.unit_bytes.get(unit_id)
        self.running.pop(unit_id or "", None)
        self.documents += documents
        self.skipped += skipped
        self.utf8_bytes += utf8_bytes
        if self.total is not None and skipped:
            self.total = max(self.total - skipped, self.documents)
            self.bar.total = self.total
        if tokens is not None:
            self.tokens += tokens
            self.counts_tokens = True
        if input_bytes is not None:
            self.input_bytes += input_bytes
        self._show()

    def running_unit(self, report: Dict[str, Any]) -> None:
        """A running unit's counts so far (:class:`UnitProgress`); its input
        bytes are capped at its share of the file when the plan's units are
        known (:func:`unit_input_bytes`)."""
        unit_id = report.get("unit_id")
        if not isinstance(unit_id, str):
            return
        counts = {k: int(report.get(k) or 0) for k in ("documents", "utf8_bytes", "tokens", "input_bytes")}
        share = self.unit_bytes.get(unit_id)
        if share is not None:
            counts["input_bytes"] = min(counts["input_bytes"], share)
        self.counts_tokens = self.counts_tokens or report.get("tokens") is not None
        self.running[unit_id] = counts
        self._show()

    def _show(self) -> None:
        bar = self.bar
        postfix = {"MB": f"{self._shown('utf8_bytes') / 1e6:,.1f}"}
        if self.counts_tokens:
            postfix["tokens"] = f"{self._shown('tokens'):,}"
        if self.skipped:
            postfix["skipped"] = f"{self.skipped:,}"
        if self.total is None and self.expected_input_bytes and not isinstance(bar, LineProgress):
            fraction = min(self._shown("input_bytes") / self.expected_input_bytes, 1.0)
            postfix["input"] = f"{100 * fraction:.0f}%"
            elapsed = bar.format_dict.get("elapsed", 0) if hasattr(bar, "format_dict") else 0
            if 0 < fraction < 1 and elapsed:
                postfix["ETA"] = _duration(elapsed * (1 - fraction) / fraction)
        bar.set_postfix(postfix, refresh=False)
        bar.update(self._shown("documents") - bar.n)

    def close(self) -> None:
        global _receiver
        if _receiver is self:
            _receiver = None
        if self._bar is None:
            return
        if self.running:   # a unit that did not finish (an error): the last line holds the finished ones only
            self.running.clear()
            self._show()
        refresh = getattr(self.bar, "refresh", None)   # any bar-like object with update/set_postfix/close
        if refresh is not None:
            refresh()   # the last frame shows the final counts (the summary's)
        self.bar.close()


# --------------------------------------------------------------------------- reports from running units

_receiver: Optional[DocumentProgress] = None   # the open DocumentProgress of this process
_sink: Optional[Callable[[Dict[str, Any]], None]] = None   # set in a pool's worker: the pipe to the driver
_input_read: Dict[str, int] = {}   # unit id -> bytes on disk its reader consumed so far (see note_input)


def deliver(report: Dict[str, Any]) -> None:
    """A running unit's report, to the open :class:`DocumentProgress` of this
    process (the driver); dropped when there is none."""
    if _receiver is not None:
        _receiver.running_unit(report)


def set_sink(sink: Optional[Callable[[Dict[str, Any]], None]]) -> None:
    """Where this process's running units send their reports (``None``: :func:`deliver`)."""
    global _sink
    _sink = sink


def note_input(unit_id: str, consumed: Optional[int]) -> None:
    """The reader of ``unit_id`` consumed ``consumed`` bytes of its file on
    disk so far (``None``: it is done).  Called from the reading thread."""
    if consumed is None:
        _input_read.pop(unit_id, None)
    else:
        _input_read[unit_id] = consumed


class UnitProgress:
    """A unit function's running counts: call :meth:`add` per batch (in the
    unit's own thread); a report goes out at most once a second (or every
    ``UBE_PROGRESS_SECONDS`` when shorter), with the bytes on disk its reader
    has consumed (:func:`note_input`)."""

    def __init__(self, unit_id: str):
        self.unit_id = unit_id
        self.counts = {"documents": 0, "utf8_bytes": 0, "tokens": 0}
        self.tokens = False
        self.every = min(1.0, _interval())
        self.last = time.monotonic()

    def add(self, documents: int, utf8_bytes: int, tokens: Optional[int] = None) -> None:
        self.counts["documents"] += documents
        self.counts["utf8_bytes"] += utf8_bytes
        if tokens is not None:
            self.counts["tokens"] += tokens
            self.tokens = True
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            report: Dict[str, Any] = dict(self.counts, unit_id=self.unit_id,
                                          input_bytes=_input_read.get(self.unit_id, 0))
            if not self.tokens:
                report["tokens"] = None
            (_sink or deliver)(report)


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
