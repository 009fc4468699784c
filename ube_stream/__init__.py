"""ube-stream: Universal Byte-Level Encoding (UBE) for multilingual LLM corpora.

UBE writes each Unicode scalar value with its UTF-8 bytes when those are at
most two, and with its UTF-16LE bytes otherwise, over two disjoint 256-symbol
alphabets (512 base symbols).  ``GPU性能`` costs 7 base symbols under UBE, 9
under UTF-8 byte-level BPE and 10 under UTF-16.

The public API is re-exported here lazily, so ``import ube_stream`` stays
cheap and never imports optional dependencies (torch, ray, matplotlib)::

    >>> import ube_stream
    >>> ube_stream.floor_cost("GPU性能", "ube")
    7
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import KernelsMissingError

#: the compiled Cython kernels (``cython_src/_name.pyx`` -> ``ube_stream._name``)
KERNEL_MODULES = ("_pretok", "_route", "_merge", "_count", "_encode", "_ranks", "_decode", "_superword",
                  "_jsonl")

# public name -> module that defines it
_EXPORTS = {
    "pretokenize": "pretokenizer",
    "GPT2_PATTERN": "pretokenizer",
    "Tokenizer": "tokenizer",
    "train": "training",
    "TokenDataset": "loader",
    "torch_dataset": "loader",
    "export_megatron": "loader",
    "encode_corpus": "shards",
    "TokenShards": "shards",
    "verify_unicode": "verification",
    "verify_corpus": "verification",
    "verify_shards": "verification",
    "evaluate": "evaluation",
    "token_premiums": "evaluation",
    "gini": "evaluation",
    "language_key": "evaluation",
    "sample_paths": "sample",
    "encode_symbols": "substrate",
    "decode_symbols": "substrate",
    "symbol_string": "substrate",
    "parse_symbol_string": "substrate",
    "floor_cost": "substrate",
    "SUBSTRATES": "substrate",
    "UbeError": "errors",
    "InvalidTextError": "errors",
    "SymbolDecodeError": "errors",
    "InputError": "errors",
    "TokenizerFormatError": "errors",
    "ShardFormatError": "errors",
    "LockError": "errors",
}

__all__ = ["__version__", *_EXPORTS]


def _check_kernels() -> None:
    """One clear error, at import, when the extension modules were never built."""
    missing = [name for name in KERNEL_MODULES if importlib.util.find_spec(f"{__name__}.{name}") is None]
    if missing:
        raise KernelsMissingError(
            f"the compiled kernels {', '.join(f'ube_stream.{m}' for m in missing)} are missing. "
            "ube-stream's hot paths are Cython extensions built at install time: run `pip install -e .` "
            "(or `pip install .`) from the repository root on a machine with a C++ compiler and the Python "
            "headers. If you installed the package without -e and run Python from the repository root, the "
            "uncompiled source tree shadows the installed package: use an editable install.")


_check_kernels()


class _RegisterWithTransformers(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Registers :class:`ube_stream.hf.UbeTokenizer` with ``AutoTokenizer`` as soon as
    transformers' ``tokenization_auto`` module has run (at once if it already has), so
    ``AutoTokenizer.from_pretrained(folder)`` loads a UBE folder without remote code.
    Until then it only answers "not mine" to the import system: transformers is never
    imported on its account."""

    TARGET = "transformers.models.auto.tokenization_auto"

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.TARGET:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            self._loader = spec.loader
            spec.loader = self
        return spec

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        self.register()

    @staticmethod
    def register() -> None:
        try:
            importlib.import_module(".hf", __name__)   # registers at import
        except Exception as exc:  # an unsupported transformers must not break its own import
            import warnings

            warnings.warn(f"ube_stream: UbeTokenizer not registered with AutoTokenizer ({exc!r}); "
                          "load UBE folders with ube_stream.hf.UbeTokenizer.from_pretrained")


if _RegisterWithTransformers.TARGET in sys.modules:
    _RegisterWithTransformers.register()
elif not any(isinstance(f, _RegisterWithTransformers) for f in sys.meta_path):
    sys.meta_path.insert(0, _RegisterWithTransformers())

if TYPE_CHECKING:  # pragma: no cover
    from .errors import (  # noqa: F401
        InputError,
        InvalidTextError,
        LockError,
        ShardFormatError,
        SymbolDecodeError,
        TokenizerFormatError,
        UbeError,
    )
    from .evaluation import evaluate, gini, language_key, token_premiums  # noqa: F401
    from .loader import TokenDataset, export_megatron, torch_dataset  # noqa: F401
    from .pretokenizer import GPT2_PATTERN, pretokenize  # noqa: F401
    from .sample import sample_paths  # noqa: F401
    from .shards import TokenShards, encode_corpus  # noqa: F401
    from .substrate import SUBSTRATES, decode_symbols, encode_symbols, floor_cost, parse_symbol_string, symbol_string  # noqa: F401
    from .tokenizer import Tokenizer  # noqa: F401
    from .training import train  # noqa: F401
    from .verification import verify_corpus, verify_shards, verify_unicode  # noqa: F401


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ube_stream' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
