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
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "pretokenize": "pretokenizer",
    "GPT2_PATTERN": "pretokenizer",
    "Tokenizer": "tokenizer",
    "train": "trainer",
    "TokenDataset": "loader",
    "torch_dataset": "loader",
    "export_megatron": "megatron",
    "encode_corpus": "shards",
    "TokenShards": "shards",
    "verify_unicode": "verification",
    "verify_corpus": "verification",
    "verify_shards": "verification",
    "evaluate": "evaluation",
    "token_premiums": "metrics",
    "gini": "metrics",
    "language_key": "metrics",
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

if TYPE_CHECKING:  # pragma: no cover
    from .errors import (InputError, InvalidTextError, LockError, ShardFormatError,
                         SymbolDecodeError, TokenizerFormatError, UbeError)
    from .pretokenizer import GPT2_PATTERN, pretokenize
    from .tokenizer import Tokenizer
    from .trainer import train
    from .loader import TokenDataset, torch_dataset
    from .megatron import export_megatron
    from .evaluation import evaluate
    from .verification import verify_corpus, verify_shards, verify_unicode
    from .shards import TokenShards, encode_corpus
    from .metrics import gini, language_key, token_premiums
    from .sample import sample_paths
    from .substrate import (SUBSTRATES, decode_symbols, encode_symbols, floor_cost,
                            parse_symbol_string, symbol_string)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ube_stream' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
