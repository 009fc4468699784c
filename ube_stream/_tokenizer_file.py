"""Tokenizer file format and exports (a mixin of :class:`ube_stream.tokenizer.Tokenizer`).

The trained tokenizer: one versioned JSON file, and the object around it.

File layout (``format`` = ``"ube-stream-tokenizer"``, ``version`` = 1)::

    {
      "format": "ube-stream-tokenizer",
      "version": 1,
      "substrate": "ube",                     # ube | utf8 | utf16
      "pattern": {"name": "gpt2", "regex": "'s|'t|..."},
      "normalization": "none",
      "base_size": 512,                       # ids 0..base_size-1 are base symbols
      "vocab_size": 32000,                    # base + merged tokens + special tokens
      "merges": [[left, right], ...],         # in rank order
      "special_tokens": [{"id": 31999, "text": "<|endoftext|>"}],
      "training": {...},                      # options and corpus totals (provenance only)
      "fingerprint": "sha256:..."             # of the canonical encoding-relevant content
    }

Merged token ids are derived from the merge list: merge ``k`` joins tokens
``left`` and ``right``; if the concatenation of their base-symbol expansions
already has an id (another merge made the same token), the merge reuses it,
otherwise the new token takes the next free id.  Special tokens follow the
merged tokens.  The fingerprint covers substrate, pattern, normalization,
merges and special tokens — not the ``training`` record — so two files that
encode identically have the same fingerprint.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import TYPE_CHECKING, Dict, Tuple

from . import __version__
from .errors import TokenizerFormatError

if TYPE_CHECKING:  # pragma: no cover
    from .tokenizer import Tokenizer

FORMAT_NAME = "ube-stream-tokenizer"
FORMAT_VERSION = 1


class TokenizerFile:
    """Save/load, fingerprint and exports; expects the attributes of ``Tokenizer``."""

    # ------------------------------------------------------------------ file format
    def _canonical(self) -> dict:
        canonical = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "substrate": self.substrate,
            "pattern": {"name": self.pattern_name, "regex": self.pattern},
            "normalization": self.normalization,
            "base_size": self.base_size,
            "merges": [list(m) for m in self.merges],
            "special_tokens": [{"id": i, "text": t} for t, i in self._special_internal.items()],
        }
        if self._id_map is not None:
            canonical["id_map"] = self._id_map.tolist()
        return canonical

    @property
    def fingerprint(self) -> str:
        """``sha256:<hex>`` of the canonical encoding-relevant content."""
        blob = json.dumps(self._canonical(), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def to_json(self) -> str:
        """The file's text: stable key order, one merge per line, so equal tokenizers give equal bytes."""
        doc = self._canonical()
        doc["vocab_size"] = self.vocab_size
        doc["training"] = self.training
        doc["fingerprint"] = self.fingerprint
        merges = doc.pop("merges")
        id_map = doc.pop("id_map", None)
        if id_map is not None:  # one line, like the merges: the file stays readable
            doc["id_map"] = "@ID_MAP@"
        head = json.dumps(doc, ensure_ascii=False, indent=2, sort_keys=False)
        if id_map is not None:
            head = head.replace('"@ID_MAP@"', json.dumps(id_map))
        merge_lines = ",\n".join(f"    [{a}, {b}]" for a, b in merges)
        merges_text = "[\n" + merge_lines + "\n  ]" if merges else "[]"
        # put merges last, before the closing brace
        return head[:-2] + ',\n  "merges": ' + merges_text + "\n}\n"

    def save(self, path: str | os.PathLike) -> None:
        """Write the tokenizer file atomically (temporary file, fsync, rename)."""
        _atomic_write_text(os.fspath(path), self.to_json())

    @classmethod
    def from_json(cls, text: str, *, source: str = "<string>") -> "Tokenizer":
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TokenizerFormatError(f"{source}: not a JSON file ({exc}); expected an ube-stream tokenizer file") from exc
        if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
            found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
            hint = (" It looks like a HF tokenizer.json: load it with Tokenizer.from_hf()."
                    if isinstance(doc, dict) and "model" in doc else "")
            raise TokenizerFormatError(f"{source}: format is {found!r}, expected {FORMAT_NAME!r}.{hint}")
        version = doc.get("version")
        if version != FORMAT_VERSION:
            raise TokenizerFormatError(
                f"{source}: tokenizer format version {version!r} is not supported by ube-stream {__version__} "
                f"(it reads version {FORMAT_VERSION}); upgrade ube-stream or re-train")
        missing = [k for k in ("substrate", "pattern", "merges", "special_tokens", "fingerprint") if k not in doc]
        if missing:
            raise TokenizerFormatError(f"{source}: missing fields {missing}")
        pattern = doc["pattern"]
        tok = cls(substrate=doc["substrate"], merges=doc["merges"],
                  special_tokens={s["text"]: int(s["id"]) for s in doc["special_tokens"]},
                  pattern=pattern["regex"] if pattern.get("name") == "custom" else pattern["name"],
                  normalization=doc.get("normalization", "none"), training=doc.get("training"),
                  id_map=doc.get("id_map"))
        if tok.pattern != pattern.get("regex"):
            raise TokenizerFormatError(
                f"{source}: pattern {pattern.get('name')!r} is recorded with a regex that differs from this "
                "version's; the file was edited or written by an incompatible version")
        if tok.fingerprint != doc["fingerprint"]:
            raise TokenizerFormatError(
                f"{source}: fingerprint mismatch: the file records {doc['fingerprint']} but its content hashes "
                f"to {tok.fingerprint}; the merges, special tokens or pattern were edited after training. "
                "Re-train, or restore the original file")
        if "vocab_size" in doc and doc["vocab_size"] != tok.vocab_size:
            raise TokenizerFormatError(
                f"{source}: records vocab_size {doc['vocab_size']} but its merges and special tokens give {tok.vocab_size}")
        return tok

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Tokenizer":
        """Read and check a tokenizer file (format, version, fingerprint)."""
        path = os.fspath(path)
        try:
            with open(path, "r", encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            raise TokenizerFormatError(f"{path}: no such tokenizer file; train one with `ube train`") from None
        return cls.from_json(text, source=path)

    # ------------------------------------------------------------------ exports
    def vocab(self) -> Dict[str, int]:
        """Symbol string -> id for every token, special tokens as their text."""
        from .substrate import symbol_string

        vocab = {symbol_string(e, self.substrate): self._model_id(i) for i, e in enumerate(self._expansions)}
        vocab.update(self.special_tokens)
        return vocab

    def export_vocab_merges(self, directory: str | os.PathLike) -> Tuple[str, str]:
        """Write GPT-2 style ``vocab.json`` and ``merges.txt`` into ``directory``."""
        from .substrate import symbol_string

        directory = os.fspath(directory)
        os.makedirs(directory, exist_ok=True)
        vocab_path = os.path.join(directory, "vocab.json")
        merges_path = os.path.join(directory, "merges.txt")
        _atomic_write_text(vocab_path, json.dumps(self.vocab(), ensure_ascii=False, indent=1) + "\n")
        lines = [f"#version: 0.2 ube-stream substrate={self.substrate}"]
        for left, right in self.merges:
            lines.append(f"{symbol_string(self._expansions[left], self.substrate)} "
                         f"{symbol_string(self._expansions[right], self.substrate)}")
        _atomic_write_text(merges_path, "\n".join(lines) + "\n")
        return vocab_path, merges_path

    def to_hf_dict(self) -> dict:
        """HF ``tokenizers`` JSON (byte-level BPE, no prefix space, this tokenizer's pattern)."""
        if self.substrate != "utf8":
            raise ValueError(
                f"export_hf needs the utf8 substrate (HF's byte-level BPE is UTF-8 BBPE); this tokenizer is "
                f"{self.substrate!r}. Use export_vocab_merges() for a GPT-2 style vocab.json/merges.txt instead")
        from .substrate import symbol_string

        vocab = {symbol_string(e, "utf8"): self._model_id(i) for i, e in enumerate(self._expansions)}
        merges = [[symbol_string(self._expansions[a], "utf8"), symbol_string(self._expansions[b], "utf8")]
                  for a, b in self.merges]
        return {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [
                {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                 "normalized": False, "special": True}
                for t, i in self.special_tokens.items()
            ],
            "normalizer": None,
            "pre_tokenizer": {
                "type": "Sequence",
                "pretokenizers": [
                    {"type": "Split", "pattern": {"Regex": self.pattern}, "behavior": "Isolated", "invert": False},
                    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
                ],
            },
            "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            "model": {
                "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                "vocab": vocab, "merges": merges,
            },
        }

    def export_hf(self, path: str | os.PathLike) -> None:
        """Write a HF ``tokenizer.json`` (utf8 substrate only) that HF ``tokenizers`` loads."""
        _atomic_write_text(os.fspath(path), json.dumps(self.to_hf_dict(), ensure_ascii=False, indent=1) + "\n")


def _atomic_write_text(path: str, text: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
