"""Progress bars (tqdm on a terminal, silent otherwise or when disabled).

:class:`DocumentProgress` is the one bar of the corpus passes (training
counts, encoding, corpus verification): it counts **documents** and shows the
**UTF-8 MB** read, the same quantities as the run's summary, never compressed
or on-disk bytes.  Its total starts as the rows the plan knows of (``None``
when some file's row count is unknown, e.g. compressed JSON Lines) and drops
by every skipped row as units report them, so a finished bar's total equals
the summary's document count.
"""
from __future__ import annotations

import sys
from typing import Any


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


def progress_bar(*, total: int | None, desc: str, unit: str = "it", unit_scale: bool = False,
                 enabled: bool = True):
    """A tqdm bar on stderr, or a no-op object when disabled."""
    if not enabled:
        return _NullBar()
    from tqdm.auto import tqdm

    class Bar(tqdm):
        # no monitor thread: tqdm's outlives the bar, and a live thread rules out forking
        # the workers of any later run in this process (executors.will_fork)
        monitor_interval = 0

    return Bar(total=total, desc=desc, unit=unit, unit_scale=unit_scale, file=sys.stderr,
               dynamic_ncols=True, mininterval=0.5, leave=False)


class DocumentProgress:
    """Documents and UTF-8 MB of a corpus pass, as units finish.

    ``expected_rows``: rows the plan knows of (``None``: unknown).  Call
    :meth:`add` once per finished unit with its documents, skipped rows and
    UTF-8 bytes (and tokens, when encoding)."""

    def __init__(self, *, desc: str, expected_rows: int | None, enabled: bool = True):
        self.documents = 0
        self.skipped = 0
        self.utf8_bytes = 0
        self.tokens = 0
        self.total = expected_rows
        self.bar = progress_bar(total=expected_rows, desc=desc, unit="doc", unit_scale=True, enabled=enabled)

    def add(self, *, documents: int, skipped: int, utf8_bytes: int, tokens: int | None = None) -> None:
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
        self.bar.set_postfix(postfix, refresh=False)
        self.bar.update(documents)

    def close(self) -> None:
        self.bar.close()


def planned_rows(units) -> int | None:
    """Rows the work units cover, when every unit knows its end (else ``None``)."""
    if any(u.row_stop is None for u in units):
        return None
    return sum(u.row_stop - u.row_start for u in units)
