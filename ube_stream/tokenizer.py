"""The tokenizer object: encode, decode, stream decoding, existing models.

``Tokenizer`` holds a substrate, a pre-tokenization pattern, merges in rank
order and special tokens; its file format, fingerprint and exports live in
``_tokenizer_file`` (a mixin).  Encoding and decoding run in the Cython
kernel ``ube_stream._encode`` with the GIL released; ``_reference`` holds the
slow pure-Python twins used by the parity tests.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from ._tokenizer_file import FORMAT_NAME, FORMAT_VERSION, TokenizerFile  # noqa: F401  (re-exported)
from .errors import InvalidTextError, SymbolDecodeError, TokenizerFormatError

if TYPE_CHECKING:  # pragma: no cover
    from ._stream_decoder import StreamDecoder


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


class Tokenizer(TokenizerFile):
    """A UBE / BBPE / BBPE16 byte-level BPE tokenizer.

    Build one with :func:`ube_stream.train` or :meth:`Tokenizer.load`.
    """

    def __init__(self, *, substrate: str, merges: Iterable[Sequence[int]],
                 special_tokens: Mapping[str, int] | Sequence[str] = ("<|endoftext|>",),
                 pattern: str = "gpt2", normalization: str = "none",
                 training: Optional[dict] = None, id_map: Optional[Sequence[int]] = None):
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
        # internal ids: base symbols, merged tokens, special tokens (the file's numbering)
        self._special_internal: Dict[str, int] = dict(sorted(specials.items(), key=lambda kv: kv[1]))
        self.training = dict(training or {})
        self._set_id_map(id_map)

    def _set_id_map(self, id_map: Optional[Sequence[int]]) -> None:
        """Model ids of the internal ids (existing models number their tokens their own
        way); ``None`` or the identity means model ids are the internal ids."""
        n_internal = len(self._expansions) + len(self._special_internal)
        self._id_map: Optional[np.ndarray] = None
        self._inverse_map: Optional[np.ndarray] = None
        if id_map is not None:
            arr = np.asarray(id_map, dtype=np.int64)
            if arr.shape != (n_internal,):
                raise TokenizerFormatError(
                    f"id_map has {arr.size} entries; it needs one model id per base symbol, merged "
                    f"token and special token ({n_internal})")
            if n_internal and (arr.min() < 0 or arr.max() >= 0xFFFFFFFF):
                raise TokenizerFormatError("id_map holds ids outside 0..2**32-2")
            if np.unique(arr).size != arr.size:
                raise TokenizerFormatError("id_map gives two tokens the same model id")
            if not np.array_equal(arr, np.arange(n_internal)):
                self._id_map = arr.astype(np.uint32)
                inverse = np.full(int(arr.max()) + 1, -1, dtype=np.int64)
                inverse[arr] = np.arange(n_internal)
                self._inverse_map = inverse
        self.special_tokens: Dict[str, int] = {t: self._model_id(i) for t, i in self._special_internal.items()}

    def _model_id(self, internal: int) -> int:
        return internal if self._id_map is None else int(self._id_map[internal])

    def _internal_id(self, token_id: int) -> int:
        """Internal id of a model id, or -1 when the vocabulary has no such id."""
        token_id = int(token_id)
        if self._inverse_map is None:
            return token_id if 0 <= token_id < len(self._expansions) + len(self._special_internal) else -1
        return int(self._inverse_map[token_id]) if 0 <= token_id < self._inverse_map.size else -1

    # ------------------------------------------------------------------ properties
    @property
    def vocab_size(self) -> int:
        """Base symbols + merged tokens + special tokens (for a model with its own
        numbering: its largest id + 1)."""
        if self._inverse_map is not None:
            return int(self._inverse_map.size)
        return len(self._expansions) + len(self._special_internal)

    @property
    def id_map(self) -> Optional[np.ndarray]:
        """``uint32`` model id of each internal id, or ``None`` when they are equal."""
        return None if self._id_map is None else self._id_map.copy()

    @property
    def num_merged_tokens(self) -> int:
        return len(self._expansions) - self.base_size

    def token_expansion(self, token_id: int) -> Tuple[int, ...]:
        """Base symbol ids of a (non-special) token."""
        internal = self._internal_id(token_id)
        if not 0 <= internal < len(self._expansions):
            raise IndexError(f"token id {token_id} is not a base or merged token of this vocabulary "
                             f"(ids 0..{self.vocab_size - 1}, special tokens {list(self.special_tokens.values())})")
        return self._expansions[internal]

    def token_symbols(self, token_id: int) -> str:
        """Symbol-string form of a token (GPT-2 byte characters, U+E1xx for UTF-16 bytes);
        a special token gives its text."""
        from .substrate import symbol_string

        for text, sid in self.special_tokens.items():
            if sid == token_id:
                return text
        return symbol_string(self.token_expansion(token_id), self.substrate)

    def expansion_table(self) -> Tuple[np.ndarray, np.ndarray]:
        """Flat table of base symbols of every non-special token: ``(symbols uint16, offsets int64)``;
        token ``i``'s symbols are ``symbols[offsets[i]:offsets[i+1]]``.

        Indexed by the ids ``encode`` returns.  For a model with its own numbering
        (:meth:`from_hf`, :meth:`from_tiktoken`) the table covers ids
        ``0..vocab_size-1`` and special or unused ids have no symbols.
        """
        symbols, offsets = self._internal_expansion_table()
        if self._id_map is None:
            return symbols.copy(), offsets.copy()
        n_tokens = len(self._expansions)
        lengths = np.zeros(self.vocab_size, dtype=np.int64)
        lengths[self._id_map[:n_tokens]] = np.diff(offsets)
        model_offsets = np.zeros(self.vocab_size + 1, dtype=np.int64)
        np.cumsum(lengths, out=model_offsets[1:])
        order = np.argsort(self._id_map[:n_tokens], kind="stable")  # internal ids by model id
        model_symbols = np.concatenate([symbols[offsets[i]:offsets[i + 1]] for i in order.tolist()]
                                       ) if n_tokens else symbols
        return model_symbols.astype(np.uint16), model_offsets

    def _internal_expansion_table(self) -> Tuple[np.ndarray, np.ndarray]:
        table = self.__dict__.get("_expansion_cache")
        if table is None:
            lengths = np.fromiter((len(e) for e in self._expansions), dtype=np.int64, count=len(self._expansions))
            offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            symbols = np.fromiter((s for e in self._expansions for s in e), dtype=np.uint16,
                                  count=int(offsets[-1]))
            table = self._expansion_cache = (symbols, offsets)
        return table

    # ------------------------------------------------------------------ encoding
    # The Cython encoder (ube_stream._encode) does the work; the pure-Python
    # twins live in _reference.py (encode_reference, decode_reference) and the
    # parity tests compare both.

    #: chunk cache of each encoding thread: entries and key bytes (clear-when-full)
    cache_entries = 1 << 16
    cache_bytes = 4 << 20

    def set_cache(self, *, entries: int = 1 << 16, bytes: int = 4 << 20) -> None:
        """Bound the chunk cache of each encoding thread (results never depend on it)."""
        if entries < 1 or bytes < 1:
            raise ValueError(f"cache entries and bytes must be >= 1, got {entries}, {bytes}")
        self.cache_entries, self.cache_bytes = int(entries), int(bytes)
        self.__dict__.pop("_kernel_state", None)

    def _kernel(self):
        """The Cython encoder and its pool of free cache slots (built on first use)."""
        state = self.__dict__.get("_kernel_state")
        if state is None:
            import queue

            from ._kernels import load
            from ._unicode_classes import gpt2_class_table, tiktoken_class_table
            from .pretokenizer import SPLIT_GPT2, kernel_split
            from .substrate import substrate_code

            num_slots = max(os.cpu_count() or 1, 1) * 2
            split = kernel_split(self.pattern)  # None: chunk ends come from the regex path
            split = SPLIT_GPT2 if split is None else split
            encoder = load("_encode").Encoder(
                np.asarray(self.merges, dtype=np.uint32).reshape(-1, 2),
                np.asarray(self.merge_results, dtype=np.uint32), self.base_size,
                substrate_code(self.substrate), gpt2_class_table() if split == SPLIT_GPT2 else
                tiktoken_class_table(), num_slots=num_slots, cache_entries=self.cache_entries,
                cache_bytes=self.cache_bytes, split=split)
            slots: "queue.SimpleQueue[int]" = queue.SimpleQueue()
            for slot in range(num_slots):
                slots.put(slot)
            state = self._kernel_state = (encoder, slots)
        return state

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_kernel_state", None)  # compiled tables are rebuilt in the receiving process
        return state

    def _encode_range(self, data: np.ndarray, offsets: np.ndarray, first_doc: int = 0):
        """Internal ids of documents ``data[offsets[d]:offsets[d+1]]`` (one thread)."""
        from .pretokenizer import chunk_bounds_batch, kernel_split

        encoder, slots = self._kernel()
        slot = slots.get()
        try:
            if kernel_split(self.pattern) is not None:  # the encoder splits inline (encoder.split)
                ids, token_offsets, bad = encoder.encode_utf8(data, offsets, slot)
            else:
                try:
                    ends, doc_chunks = chunk_bounds_batch(data, offsets, self.pattern)
                except InvalidTextError as exc:
                    if exc.document is not None:
                        exc.document += first_doc
                    raise
                ids, token_offsets, bad = encoder.encode_chunks(data, offsets, ends, doc_chunks, slot)
        finally:
            slots.put(slot)
        if bad >= 0:
            from .pretokenizer import _utf8_error

            document = int(np.searchsorted(offsets, bad, side="right")) - 1
            start = int(offsets[document])
            raise _utf8_error(data[start:int(offsets[document + 1])], bad - start,
                              document=document + first_doc, doc_start=start)
        return ids, token_offsets

    def _encode_docs(self, data: np.ndarray, offsets: np.ndarray, num_threads: Optional[int]):
        """Internal ids of a batch, split across ``num_threads`` threads by bytes."""
        ndocs = offsets.shape[0] - 1
        threads = max(1, min(int(num_threads or 1), ndocs))
        if threads == 1:
            return self._encode_range(data, offsets)
        from concurrent.futures import ThreadPoolExecutor

        # contiguous groups of documents with about equal bytes
        targets = offsets[0] + (offsets[-1] - offsets[0]) * np.arange(1, threads) / threads
        cuts = np.unique(np.concatenate(([0], np.searchsorted(offsets, targets), [ndocs])))
        groups = [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
        with ThreadPoolExecutor(len(groups)) as pool:
            parts = list(pool.map(lambda g: self._encode_range(data, offsets[g[0]:g[1] + 1], g[0]), groups))
        ids = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.uint32)
        token_offsets = np.zeros(ndocs + 1, dtype=np.int64)
        base = 0
        for (a, b), (part_ids, part_offsets) in zip(groups, parts):
            token_offsets[a + 1:b + 1] = part_offsets[1:] + base
            base += part_ids.shape[0]
        return ids, token_offsets

    def _to_model(self, ids: np.ndarray) -> np.ndarray:
        return ids if self._id_map is None else self._id_map[ids]

    def _allowed_specials(self, allowed_special) -> Dict[str, int]:
        """Internal ids of the allowed special tokens."""
        if allowed_special == "all":
            return dict(self._special_internal)
        if isinstance(allowed_special, str):
            raise TypeError(f"allowed_special must be 'all' or a collection of special tokens, got "
                            f"{allowed_special!r} (write ({allowed_special!r},) for one token)")
        allowed = {}
        for tok in allowed_special:
            if tok not in self._special_internal:
                raise ValueError(f"{tok!r} is not a special token of this tokenizer "
                                 f"(it has {list(self._special_internal)})")
            allowed[tok] = self._special_internal[tok]
        return allowed

    def _split_special(self, text: str, allowed_special) -> List[Tuple[str, Optional[int]]]:
        """Pieces of ``text``: ``(text, None)`` for ordinary text, ``(tok, internal id)``
        for an allowed special token occurrence (leftmost, longest first)."""
        allowed = self._allowed_specials(allowed_special)
        if not allowed:
            return [(text, None)]
        key = tuple(sorted(allowed))
        cache = self.__dict__.setdefault("_special_patterns", {})
        pattern = cache.get(key)
        if pattern is None:
            import regex

            pattern = cache[key] = regex.compile(
                "|".join(regex.escape(t) for t in sorted(allowed, key=len, reverse=True)))
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
        Raises :class:`~ube_stream.errors.InvalidTextError` for a lone surrogate.
        """
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}; "
                            "for UTF-8 bytes use encode_utf8_batch")
        if not allowed_special:
            data = _utf8(text)
            ids, _ = self._encode_range(np.frombuffer(data, np.uint8),
                                        np.array([0, len(data)], dtype=np.int64))
            return self._to_model(ids)
        return self.encode_batch([text], allowed_special=allowed_special)[0]

    def encode_batch(self, texts: Sequence[str], *, allowed_special: Iterable[str] | str = (),
                     num_threads: Optional[int] = None) -> List[np.ndarray]:
        """Token ids of each text (one ``uint32`` array per text).

        ``num_threads`` (default 1) splits the documents across threads; the
        kernel releases the GIL, and results are identical for any count.
        """
        if isinstance(texts, str):
            raise TypeError("encode_batch expects a sequence of str, got a single str; use encode(text)")
        texts = list(texts)
        if allowed_special:
            pieces = [self._split_special(t, allowed_special) for t in texts]
            docs = [p for text_pieces in pieces for p, special in text_pieces if special is None]
        else:
            pieces, docs = None, texts
        encoded = []
        for d, text in enumerate(docs):
            if not isinstance(text, str):
                raise TypeError(f"document {d} is a {type(text).__name__}, not a str")
            encoded.append(_utf8(text, document=d))
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        data = np.frombuffer(b"".join(encoded), np.uint8)
        ids, token_offsets = self._encode_docs(data, offsets, num_threads)
        ids = self._to_model(ids)
        bounds = token_offsets.tolist()
        if pieces is None:
            return [ids[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
        out, d = [], 0
        for text_pieces in pieces:
            parts = []
            for _, special in text_pieces:
                if special is None:
                    parts.append(ids[bounds[d]:bounds[d + 1]])
                    d += 1
                else:
                    parts.append(np.array([self._model_id(special)], dtype=np.uint32))
            out.append(np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint32))
        return out

    def encode_utf8_batch(self, data: np.ndarray, offsets: np.ndarray, *,
                          num_threads: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
        """Hot-path entry: documents as one UTF-8 buffer with ``n+1`` byte offsets
        -> ``(ids uint32, token_offsets int64[n+1])``.  No special tokens are
        recognised (documents are plain text).  Raises
        :class:`~ube_stream.errors.InvalidTextError` naming the document and byte
        offset of invalid UTF-8."""
        from .pretokenizer import _as_uint8

        data = _as_uint8(data)
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        if offsets.ndim != 1 or offsets.shape[0] < 1:
            raise ValueError(f"offsets must be 1-D with ndocs + 1 entries, got shape {offsets.shape}")
        ids, token_offsets = self._encode_docs(data, offsets, num_threads)
        return self._to_model(ids), token_offsets

    # ------------------------------------------------------------------ decoding
    def _decode_tables(self):
        tables = self.__dict__.get("_decode_state")
        if tables is None:
            symbols, offsets = self._internal_expansion_table()
            texts = [t.encode("utf-8") for t in self._special_internal]
            special_offsets = np.zeros(len(texts) + 1, dtype=np.int64)
            np.cumsum([len(t) for t in texts], out=special_offsets[1:])
            from .substrate import substrate_code

            byte_table = np.zeros(symbols.size + 16, dtype=np.uint8)  # utf8 fast path, padded
            byte_table[:symbols.size] = symbols & 0xFF
            tables = self._decode_state = (symbols, offsets, np.frombuffer(b"".join(texts), np.uint8),
                                           special_offsets, substrate_code(self.substrate), byte_table)
        return tables

    def _internal_ids(self, ids) -> np.ndarray:
        """``ids`` (model ids) as internal ``uint32`` ids; ValueError names a bad position."""
        arr = np.asarray(ids)
        if arr.size == 0:
            return np.zeros(0, dtype=np.uint32)
        if arr.ndim != 1:
            raise ValueError(f"expected a 1-D sequence of token ids, got shape {arr.shape}")
        if arr.dtype.kind not in "iu":
            raise TypeError(f"token ids must be integers, got dtype {arr.dtype}")
        limit = self.vocab_size
        bad = (arr < 0) | (arr >= limit) if arr.dtype.kind == "i" else arr >= limit
        if self._inverse_map is not None:
            internal = np.full(arr.shape, -1, dtype=np.int64)
            internal[~bad] = self._inverse_map[arr[~bad].astype(np.int64)]
            bad |= internal < 0
            arr = internal
        if bad.any():
            position = int(np.flatnonzero(bad)[0])
            raise ValueError(f"token id {int(np.asarray(ids)[position])} at position {position} is outside the "
                             f"vocabulary (0..{limit - 1})" + ("" if self._inverse_map is None else
                                                                 " or has no token in this model"))
        return np.ascontiguousarray(arr, dtype=np.uint32)

    def decode(self, ids: Iterable[int], *, errors: str = "strict") -> str:
        """Text of token ids: expand to base symbols and run the dual-buffer
        decode; a special token flushes both buffers and is written as its text.

        ``errors="strict"`` raises :class:`~ube_stream.errors.SymbolDecodeError`
        naming the token position (``.position``) and base-symbol offset
        (``.offset``) of the first invalid byte sequence; ``"replace"`` writes
        U+FFFD as Python's codecs do on each buffer.
        """
        if errors not in ("strict", "replace"):
            raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
        if not isinstance(ids, np.ndarray):
            ids = np.fromiter(ids, dtype=np.int64) if not isinstance(ids, (list, tuple)) else np.asarray(ids, dtype=np.int64)
        if ids.dtype == np.uint32 and ids.ndim == 1 and self._inverse_map is None:
            internal = np.ascontiguousarray(ids)  # the kernels check the range
        else:
            internal = self._internal_ids(ids)
        if internal.size == 0:
            return ""
        kernel = _ENCODE_KERNEL or _load_encode_kernel()
        tables = self.__dict__.get("_decode_state") or self._decode_tables()
        if self.substrate == "utf8":
            text = kernel.decode_utf8_bytes(internal, tables[5], *tables[1:4])
            if text is not None:
                return text
        text, position, offset = kernel.decode_utf8(internal, *tables[:5])
        if text is not None:
            return text
        if offset == -2:
            self._internal_ids(ids)  # raises, naming the position of the id outside the vocabulary
        if errors == "replace":
            return self._decode_replace(internal)
        error = SymbolDecodeError(
            f"token ids do not decode to text under {self.substrate}: the base symbols of token "
            f"{int(np.asarray(ids)[position])} at position {position} hold an invalid byte sequence "
            f"(base-symbol offset {offset}). Such ids are not the output of encode(); "
            "pass errors='replace' to get U+FFFD", offset=offset)
        error.position = position
        raise error

    def _decode_replace(self, internal: np.ndarray) -> str:
        """Invalid sequences as U+FFFD: each run between special tokens through the
        codec-exact ``substrate.decode_symbols(..., "replace")``."""
        from .substrate import decode_symbols

        table, offsets = self._internal_expansion_table()
        n_tokens = len(self._expansions)
        special_text = {i: t for t, i in self._special_internal.items()}
        cuts = np.flatnonzero(internal >= n_tokens).tolist()
        parts, start = [], 0
        for stop in cuts + [internal.size]:
            run = internal[start:stop].astype(np.int64)
            if run.size:
                lengths = offsets[run + 1] - offsets[run]
                firsts = np.cumsum(lengths) - lengths
                positions = (np.arange(int(lengths.sum())) - np.repeat(firsts, lengths)
                             + np.repeat(offsets[run], lengths))
                parts.append(decode_symbols(table[positions], self.substrate, "replace"))
            if stop < internal.size:
                parts.append(special_text[int(internal[stop])])
            start = stop + 1
        return "".join(parts)

    def decode_batch(self, batch: Iterable[Iterable[int]], *, errors: str = "strict") -> List[str]:
        return [self.decode(ids, errors=errors) for ids in batch]

    def stream_decoder(self, *, errors: str = "strict") -> "StreamDecoder":
        """A decoder fed one id at a time (``.feed(id) -> str``) that returns only
        complete text; ``"".join(feeds) + .flush() == decode(all ids)``."""
        from ._stream_decoder import StreamDecoder

        return StreamDecoder(self, errors=errors)

    # ------------------------------------------------------------------ existing models
    @classmethod
    def from_hf(cls, path: str | os.PathLike) -> "Tokenizer":
        """Load a HF ``tokenizer.json`` (byte-level BPE) as a ``utf8`` tokenizer whose
        ids are the model's ids."""
        from ._pretrained import tokenizer_from_hf

        return tokenizer_from_hf(cls, path)

    @classmethod
    def from_tiktoken(cls, ranks, pattern: str = "cl100k",
                      special_tokens: Optional[Mapping[str, int]] = None) -> "Tokenizer":
        """A ``utf8`` tokenizer from tiktoken ranks (``{token bytes: rank}`` or a
        ``.tiktoken`` file), ``pattern`` (name or regex) and ``{text: id}`` special tokens."""
        from ._pretrained import tokenizer_from_tiktoken

        return tokenizer_from_tiktoken(cls, ranks, pattern, special_tokens or {})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tokenizer) and self.fingerprint == other.fingerprint

    def __repr__(self) -> str:
        return (f"Tokenizer(substrate={self.substrate!r}, vocab_size={self.vocab_size}, "
                f"merges={len(self.merges)}, special_tokens={list(self.special_tokens)}, pattern={self.pattern_name!r})")

_ENCODE_KERNEL = None


def _load_encode_kernel():
    global _ENCODE_KERNEL
    from ._kernels import load

    _ENCODE_KERNEL = load("_encode")
    return _ENCODE_KERNEL


def _utf8(text: str, *, document: Optional[int] = None) -> bytes:
    """UTF-8 of ``text``; InvalidTextError naming the character offset of a lone surrogate."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        where = f"character offset {exc.start}" + ("" if document is None else f" of document {document}")
        raise InvalidTextError(
            f"text holds a lone surrogate U+{ord(text[exc.start]):04X} at {where}: only Unicode scalar "
            "values can be encoded (fix the source decoding, e.g. errors='replace' instead of "
            "'surrogateescape'/'surrogatepass', or skip such documents with --on-error skip)",
            offset=exc.start, unit="char", document=document) from None
