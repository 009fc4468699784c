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
import importlib.util
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import KernelsMissingError

#: the compiled Cython kernels (``cython_src/_name.pyx`` -> ``ube_stream._name``)
KERNEL_MODULES = ("_pretok", "_route", "_merge", "_count", "_encode", "_ranks", "_decode", "_superword")

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
