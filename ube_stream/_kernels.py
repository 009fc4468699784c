"""Import the compiled Cython kernels with a clear message when they are missing."""
from __future__ import annotations

import importlib
from types import ModuleType

from .errors import KernelsMissingError

KERNEL_NAMES = ("_pretok", "_route", "_merge", "_count", "_encode")


def load(name: str) -> ModuleType:
    """Import the compiled kernel ``ube_stream.<name>``.

    Raises :class:`KernelsMissingError` with the fix when the package was
    imported from a source tree whose extensions were never built.
    """
    try:
        return importlib.import_module(f"ube_stream.{name}")
    except ImportError as exc:  # pragma: no cover - exercised only on broken installs
        raise KernelsMissingError(
            f"the compiled kernel ube_stream.{name} could not be imported ({exc}). "
            "ube-stream's hot paths are Cython extensions built at install time: "
            "run `pip install -e .` (or `pip install .`) from the repository root on a "
            "machine with a C++ compiler and the Python headers. If you installed the "
            "package without -e and run Python from the repository root, the uncompiled "
            "source tree shadows the installed package: use an editable install."
        ) from exc
