"""The trained tokenizer: one versioned JSON file, and the object around it.

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
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import __version__
from .errors import TokenizerFormatError

FORMAT_NAME = "ube-stream-tokenizer"
FORMAT_VERSION = 1


def derive_tokens(merges: Sequence[Tuple[int, int]], base_size: int) -> Tuple[List[int], List[Tuple[int, ...]]]:
    """Result id of every merge and the base-symbol expansion of every token.

    Returns ``(results, expansions)``: ``results[k]`` is the id merge ``k``
    produces, ``expansions[i]`` the base ids of token ``i`` (merged tokens only
    after the ``base_size`` base symbols).
    """
    expansions: List[Tuple[int, ...]] = [(i,) for i in range(base_size)]
    id_of: Dict[Tuple[int, ...], int] = {}
    results: List[int] = []
    for rank, (left, right) in enumerate(merges):
        if not (0 <= left < len(expansions) and 0 <= right < len(expansions)):
            raise TokenizerFormatError(
                f"merge {rank} joins ids ({left}, {right}) but only ids 0..{len(expansions) - 1} exist "
                "at that rank; the merge list is corrupt or out of order"
            )
        expansion = expansions[left] + expansions[right]
        token = id_of.get(expansion)
        if token is None:
            token = len(expansions)
            expansions.append(expansion)
            id_of[expansion] = token
        results.append(token)
    return results, expansions


class Tokenizer:
    """A UBE / BBPE / BBPE16 byte-level BPE tokenizer.

    Build one with :func:`ube_stream.train` or :meth:`Tokenizer.load`.
    """

    def __init__(self, *, substrate: str, merges: Iterable[Sequence[int]],
                 special_tokens: Mapping[str, int] | Sequence[str] = ("<|endoftext|>",),
                 pattern: str = "gpt2", normalization: str = "none",
                 training: Optional[dict] = None):
        from .pretokenizer import resolve_pattern
        from .substrate import base_size

        if normalization != "none":
            raise ValueError(f"normalization {normalization!r} is not supported; ube-stream keeps text as is ('none')")
        self.substrate = substrate
        self.base_size = base_size(substrate)
        self.pattern_name, self.pattern = resolve_pattern(pattern)
        self.normalization = normalization
        self.merges: List[Tuple[int, int]] = [(int(a), int(b)) for a, b, *_ in merges]
        self.merge_results, self._expansions = derive_tokens(self.merges, self.base_size)
        n_tokens = len(self._expansions)
        if isinstance(special_tokens, Mapping):
            specials = dict(special_tokens)
            expected = list(range(n_tokens, n_tokens + len(specials)))
            if sorted(specials.values()) != expected:
                raise TokenizerFormatError(
                    f"special token ids {sorted(specials.values())} must follow the merged tokens: "
                    f"expected {expected}")
        else:
            if len(set(special_tokens)) != len(special_tokens):
                raise ValueError(f"special tokens repeat: {list(special_tokens)}")
            specials = {text: n_tokens + i for i, text in enumerate(special_tokens)}
        for text in specials:
            if not isinstance(text, str) or not text:
                raise ValueError(f"a special token must be a non-empty string, got {text!r}")
        self.special_tokens: Dict[str, int] = dict(sorted(specials.items(), key=lambda kv: kv[1]))
        self.training = dict(training or {})

    # ------------------------------------------------------------------ properties
    @property
    def vocab_size(self) -> int:
        """Base symbols + merged tokens + special tokens."""
        return len(self._expansions) + len(self.special_tokens)

    @property
    def num_merged_tokens(self) -> int:
        return len(self._expansions) - self.base_size

    def token_expansion(self, token_id: int) -> Tuple[int, ...]:
        """Base symbol ids of a (non-special) token."""
        if not 0 <= token_id < len(self._expansions):
            raise IndexError(f"token id {token_id} is not a base or merged token (0..{len(self._expansions) - 1})")
        return self._expansions[token_id]

    def token_symbols(self, token_id: int) -> str:
        """Symbol-string form of a token (GPT-2 byte characters, U+E1xx for UTF-16 bytes);
        a special token gives its text."""
        from .substrate import symbol_string

        for text, sid in self.special_tokens.items():
            if sid == token_id:
                return text
        return symbol_string(self.token_expansion(token_id), self.substrate)

    def expansion_table(self) -> Tuple[np.ndarray, np.ndarray]:
        """Flat table of base symbols of every non-special token: ``(symbols uint16, offsets int64)``."""
        lengths = np.fromiter((len(e) for e in self._expansions), dtype=np.int64, count=len(self._expansions))
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        symbols = np.fromiter((s for e in self._expansions for s in e), dtype=np.uint16, count=int(offsets[-1]))
        return symbols, offsets

    # ------------------------------------------------------------------ encoding
    # Pure-Python path (chunk cache + rank-ordered merges); the Cython encoder
    # replaces _encode_chunk / encode_utf8_batch with the same results.

    def _rank_table(self) -> Dict[Tuple[int, int], Tuple[int, int]]:
        table = getattr(self, "_ranks", None)
        if table is None:
            table = {}
            for rank, ((left, right), result) in enumerate(zip(self.merges, self.merge_results)):
                table.setdefault((left, right), (rank, result))
            self._ranks = table
            self._chunk_cache: Dict[bytes, List[int]] = {}
        return table

    def _encode_chunk(self, chunk: bytes) -> List[int]:
        ranks = self._rank_table()
        cached = self._chunk_cache.get(chunk)
        if cached is not None:
            return cached
        from .substrate import route_bytes

        ids = route_bytes(chunk, self.substrate).tolist()
        while len(ids) >= 2:
            best = None
            for pair in zip(ids, ids[1:]):
                hit = ranks.get(pair)
                if hit is not None and (best is None or hit < best):
                    best = hit
            if best is None:
                break
            rank, result = best
            left, right = self.merges[rank]
            merged, i = [], 0
            while i < len(ids):
                if i + 1 < len(ids) and ids[i] == left and ids[i + 1] == right:
                    merged.append(result)
                    i += 2
                else:
                    merged.append(ids[i])
                    i += 1
            ids = merged
        if len(self._chunk_cache) > 200_000:
            self._chunk_cache.clear()
        self._chunk_cache[chunk] = ids
        return ids

    def _split_special(self, text: str, allowed_special) -> List[Tuple[str, Optional[int]]]:
        """Pieces of ``text``: ``(text, None)`` for ordinary text, ``(tok, id)`` for
        an allowed special token occurrence (leftmost, longest first)."""
        if allowed_special == "all":
            allowed = dict(self.special_tokens)
        else:
            allowed = {}
            for tok in allowed_special:
                if tok not in self.special_tokens:
                    raise ValueError(f"{tok!r} is not a special token of this tokenizer "
                                     f"(it has {list(self.special_tokens)})")
                allowed[tok] = self.special_tokens[tok]
        if not allowed:
            return [(text, None)]
        import regex

        pattern = regex.compile("|".join(regex.escape(t) for t in sorted(allowed, key=len, reverse=True)))
        pieces: List[Tuple[str, Optional[int]]] = []
        pos = 0
        for m in pattern.finditer(text):
            if m.start() > pos:
                pieces.append((text[pos:m.start()], None))
            pieces.append((m.group(), allowed[m.group()]))
            pos = m.end()
        if pos < len(text):
            pieces.append((text[pos:], None))
        return pieces

    def encode(self, text: str, *, allowed_special: Iterable[str] | str = ()) -> np.ndarray:
        """Token ids (``uint32``) of ``text``.

        Special tokens are recognised only when listed in ``allowed_special``
        (or ``"all"``); elsewhere their text is encoded as ordinary text.
        """
        from .pretokenizer import chunk_bounds

        out: List[int] = []
        for piece, special in self._split_special(text, allowed_special):
            if special is not None:
                out.append(special)
                continue
            data = piece.encode("utf-8") if _is_valid_text(piece) else _raise_invalid(piece)
            start = 0
            for end in chunk_bounds(data, self.pattern).tolist():
                out.extend(self._encode_chunk(data[start:end]))
                start = end
        return np.array(out, dtype=np.uint32)

    def encode_batch(self, texts: Sequence[str], *, allowed_special: Iterable[str] | str = (),
                     num_threads: Optional[int] = None) -> List[np.ndarray]:
        return [self.encode(t, allowed_special=allowed_special) for t in texts]

    def encode_utf8_batch(self, data: np.ndarray, offsets: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Hot-path entry: documents as one UTF-8 buffer with ``n+1`` byte offsets
        -> ``(ids uint32, token_offsets int64[n+1])``.  No special tokens are
        recognised (documents are plain text)."""
        from .pretokenizer import chunk_bounds_batch

        data = np.asarray(data, dtype=np.uint8)
        offsets = np.asarray(offsets, dtype=np.int64)
        ends, doc_chunks = chunk_bounds_batch(data, offsets, self.pattern)
        raw = data.tobytes()
        ids: List[int] = []
        token_offsets = np.zeros(len(offsets), dtype=np.int64)
        for d in range(len(offsets) - 1):
            start = int(offsets[d])
            for end in ends[doc_chunks[d]:doc_chunks[d + 1]].tolist():
                ids.extend(self._encode_chunk(raw[start:end]))
                start = end
            token_offsets[d + 1] = len(ids)
        return np.array(ids, dtype=np.uint32), token_offsets

    def decode(self, ids: Iterable[int], *, errors: str = "strict") -> str:
        """Text of token ids: expand to base symbols and run the dual-buffer
        decode; a special token flushes both buffers and is written as its text."""
        from .substrate import decode_symbols

        special_text = {i: t for t, i in self.special_tokens.items()}
        parts: List[str] = []
        symbols: List[int] = []
        n_tokens = len(self._expansions)
        for position, token in enumerate(np.asarray(ids, dtype=np.int64).tolist()):
            if token < n_tokens and token >= 0:
                symbols.extend(self._expansions[token])
            elif token in special_text:
                if symbols:
                    parts.append(decode_symbols(symbols, self.substrate, errors))
                    symbols = []
                parts.append(special_text[token])
            else:
                raise ValueError(f"token id {token} at position {position} is outside the vocabulary "
                                 f"(0..{self.vocab_size - 1})")
        if symbols:
            parts.append(decode_symbols(symbols, self.substrate, errors))
        return "".join(parts)

    def decode_batch(self, batch: Iterable[Iterable[int]], *, errors: str = "strict") -> List[str]:
        return [self.decode(ids, errors=errors) for ids in batch]

    # ------------------------------------------------------------------ file format
    def _canonical(self) -> dict:
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "substrate": self.substrate,
            "pattern": {"name": self.pattern_name, "regex": self.pattern},
            "normalization": self.normalization,
            "base_size": self.base_size,
            "merges": [list(m) for m in self.merges],
            "special_tokens": [{"id": i, "text": t} for t, i in self.special_tokens.items()],
        }

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
        head = json.dumps(doc, ensure_ascii=False, indent=2, sort_keys=False)
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
                  normalization=doc.get("normalization", "none"), training=doc.get("training"))
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

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tokenizer) and self.fingerprint == other.fingerprint

    def __repr__(self) -> str:
        return (f"Tokenizer(substrate={self.substrate!r}, vocab_size={self.vocab_size}, "
                f"merges={len(self.merges)}, special_tokens={list(self.special_tokens)}, pattern={self.pattern_name!r})")

    # ------------------------------------------------------------------ exports
    def vocab(self) -> Dict[str, int]:
        """Symbol string -> id for every token, special tokens as their text."""
        from .substrate import symbol_string

        vocab = {symbol_string(e, self.substrate): i for i, e in enumerate(self._expansions)}
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

        vocab = {symbol_string(e, "utf8"): i for i, e in enumerate(self._expansions)}
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


def _is_valid_text(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _raise_invalid(text: str):
    from .substrate import encode_symbols

    encode_symbols(text, "utf8")  # raises InvalidTextError naming the character offset
    raise AssertionError("unreachable")


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
