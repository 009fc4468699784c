"""Exports of a tokenizer for other tools: GPT-2 style ``vocab.json`` / ``merges.txt``,
and for the ``utf8`` substrate a HF ``tokenizers`` ``tokenizer.json``."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Protocol, Sequence, Tuple

from ..storage import atomic_write_text
from ..substrate import symbol_string

__all__ = ["vocab", "export_vocab_merges", "hf_dict", "export_hf"]


class _Exportable(Protocol):
    """What the exports read of a :class:`~ube_stream.tokenizer.Tokenizer`."""

    @property
    def substrate(self) -> str: ...
    @property
    def pattern(self) -> str: ...
    @property
    def merges(self) -> List[Tuple[int, int]]: ...
    @property
    def special_tokens(self) -> Dict[str, int]: ...
    @property
    def _expansions(self) -> Sequence[Tuple[int, ...]]: ...

    def _model_id(self, internal: int) -> int: ...


def vocab(tok: _Exportable) -> Dict[str, int]:
    """Symbol string -> id for every token, special tokens as their text."""
    table = {symbol_string(e, tok.substrate): tok._model_id(i) for i, e in enumerate(tok._expansions)}
    table.update(tok.special_tokens)
    return table


def export_vocab_merges(tok: _Exportable, directory: str | os.PathLike) -> Tuple[str, str]:
    """Write GPT-2 style ``vocab.json`` and ``merges.txt`` into ``directory``."""
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    vocab_path = os.path.join(directory, "vocab.json")
    merges_path = os.path.join(directory, "merges.txt")
    atomic_write_text(vocab_path, json.dumps(vocab(tok), ensure_ascii=False, indent=1) + "\n")
    lines = [f"#version: 0.2 ube-stream substrate={tok.substrate}"]
    for left, right in tok.merges:
        lines.append(f"{symbol_string(tok._expansions[left], tok.substrate)} "
                     f"{symbol_string(tok._expansions[right], tok.substrate)}")
    atomic_write_text(merges_path, "\n".join(lines) + "\n")
    return vocab_path, merges_path


def hf_dict(tok: _Exportable) -> Dict[str, Any]:
    """HF ``tokenizers`` JSON (byte-level BPE, no prefix space, this tokenizer's pattern)."""
    if tok.substrate != "utf8":
        raise ValueError(
            f"export_hf needs the utf8 substrate (HF's byte-level BPE is UTF-8 BBPE); this tokenizer is "
            f"{tok.substrate!r}. Use export_vocab_merges() for a GPT-2 style vocab.json/merges.txt instead")
    table = {symbol_string(e, "utf8"): tok._model_id(i) for i, e in enumerate(tok._expansions)}
    merges = [[symbol_string(tok._expansions[a], "utf8"), symbol_string(tok._expansions[b], "utf8")]
              for a, b in tok.merges]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for t, i in tok.special_tokens.items()
        ],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": tok.pattern}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            ],
        },
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": table, "merges": merges,
        },
    }


def export_hf(tok: _Exportable, path: str | os.PathLike) -> None:
    """Write a HF ``tokenizer.json`` (utf8 substrate only) that HF ``tokenizers`` loads."""
    atomic_write_text(os.fspath(path), json.dumps(hf_dict(tok), ensure_ascii=False, indent=1) + "\n")
