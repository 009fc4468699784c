"""Progress bars (tqdm on a terminal, silent otherwise or when disabled)."""
from __future__ import annotations

import sys
from typing import Any


class _NullBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(*, total: int | None, desc: str, unit: str = "it", unit_scale: bool = False,
                 enabled: bool = True):
    """A tqdm bar on stderr, or a no-op object when disabled."""
    if not enabled:
        return _NullBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=unit_scale, file=sys.stderr,
                dynamic_ncols=True, mininterval=0.5, leave=False)
