"""The tokenizer object: encode, decode, stream decoding, existing models.

``Tokenizer`` holds a substrate, a pre-tokenization pattern, merges in rank
order and special tokens; its file format and fingerprint are the plain
functions of ``tokenizer.file_format``, its exports those of ``tokenizer.export``.  Encoding and decoding run in the Cython
kernel ``ube_stream._encode`` with the GIL released; ``_reference`` holds the
slow pure-Python twins used by the parity tests.
"""
from __future__ import annotations

import codecs
import contextlib
import gc
import itertools
import json
import os
import threading
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .. import _decode, _encode, _ranks, storage
from ..errors import (
    STATUS_BAD_ID,
    STATUS_INVALID_SYMBOLS,
    STATUS_OK,
    InvalidTextError,
    SpecialTokenError,
    TokenizerFormatError,
    TokenizerOptionError,
    check_status,
    err_buffer,
)
from ..storage import atomic_write_text
from ..substrate import as_id_array, as_uint8, utf8_of
from . import export, file_format
from .normalization import check_normalization, normalize_text, normalize_texts, normalize_utf8

if TYPE_CHECKING:  # pragma: no cover
    from .stream_decoder import StreamDecoder


#: the longest token, in base symbols, a tokenizer may hold (2**16: 64 KiB of UTF-8 for ube/utf8)
MAX_TOKEN_SYMBOLS = 1 << 16
#: the most base symbols all token expansions together may hold (bounds loading memory)
MAX_TOTAL_SYMBOLS = 1 << 26


def derive_tokens(merges: Sequence[Tuple[int, int]], base_size: int) -> Tuple[List[int], List[Tuple[int, ...]]]:
    """Result id of every merge and the base-symbol expansion of every token.

    Returns ``(results, expansions)``: ``results[k]`` is the id merge ``k``
    produces, ``expansions[i]`` the base ids of token ``i`` (merged tokens only
    after the ``base_size`` base symbols).  The kernel is ``_ranks.expand_merges``
    (twin ``_reference.derive_tokens_reference``); see :func:`expand_merges`.
    """
    results, symbols, offsets = expand_merges(merges, base_size)
    return results.tolist(), _ranks.expansion_tuples(symbols, offsets)


def expand_merges(merges: Sequence[Tuple[int, int]], base_size: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(results int64, symbols uint16, offsets int64)``: the result id of every
    merge and every token's base symbols as one flat table.  A merge makes a new
    token unless an earlier one has its expansion.  A corrupt or hostile merge list
    (an id not defined at its rank; a token over ``MAX_TOKEN_SYMBOLS`` symbols, or
    all of them over ``MAX_TOTAL_SYMBOLS``: checked before anything is built) is a
    :class:`TokenizerFormatError` naming the merge."""
    pairs = np.asarray(merges, dtype=np.int64).reshape(-1, 2) if len(merges) else np.zeros((0, 2), np.int64)
    err = err_buffer()
    status, results, symbols, offsets = _ranks.expand_merges(pairs, base_size, MAX_TOKEN_SYMBOLS,
                                                              MAX_TOTAL_SYMBOLS, err)
    check_status(status, err, what="expanding merges", ids=pairs, limit=MAX_TOKEN_SYMBOLS)
    assert results is not None and symbols is not None and offsets is not None   # STATUS_OK carries them
    return results, symbols, offsets


def _utf8_keeps_characters(token: bytes, rule: str = "pieces") -> bool:
    """``token`` (UTF-8 bytes) is whole characters or a strict part of one: it
    decodes, or it is continuation bytes only (at most 3; not under the
    ``"prefix"`` rule, whose tokens inside a character start it), or a lead byte
    and fewer continuation bytes than its character needs.  In valid UTF-8 such a
    token can only sit where it keeps characters whole (and, for ``"prefix"``,
    where every merge making it had a left token starting a character)."""
    try:
        token.decode("utf-8")
        return True
    except UnicodeDecodeError:
        pass
    lead = token[0]
    continuations = all(0x80 <= b <= 0xBF for b in token[1:])
    if 0x80 <= lead <= 0xBF:
        return rule == "pieces" and continuations and len(token) <= 3
    need = 2 if 0xC0 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF else 4 if 0xF0 <= lead <= 0xF7 else 0
    return continuations and len(token) < need


#: held while a tokenizer builds its encoder (:meth:`Tokenizer._kernel`), so that the threads of a
#: first multi-thread call build one, not one each (all but the last then thrown away)
_KERNEL_LOCK = threading.RLock()


class _SlotPool:
    """The free chunk-cache slots of one encoder: :meth:`get` hands out the warmest free
    slot (the one whose cache holds the most chunks), waiting while none is free.

    Each encoding thread needs a slot of its own (a cache is not shared); picking
    the warmest means a single-threaded caller keeps finding the cache it filled,
    whatever number of threads the calls in between used (with last-in-first-out,
    a call after a 2-thread call got whichever slot came back last, warmed on half
    of the documents only)."""

    def __init__(self, encoder: "_encode.Encoder") -> None:
        self._encoder = encoder
        self._free = list(range(encoder.num_slots))
        self._ready = threading.Condition()

    def get(self) -> int:
        with self._ready:
            while not self._free:
                self._ready.wait()
            free = self._free
            best = max(range(len(free)), key=lambda i: self._encoder.cache_stats(free[i])["entries"])
            return free.pop(best)

    def put(self, slot: int) -> None:
        with self._ready:
            self._free.append(slot)
            self._ready.notify()


#: character-integrity rules: any two pieces of one character may merge, or (SCRIPT's
#: rule) only a character's prefix and its next piece
CHAR_RULES = ("pieces", "prefix")


def char_rule_of(char_integrity: Any) -> Optional[str]:
    """The rule a ``char_integrity`` argument names: None (False, None, ``"none"``),
    ``"pieces"`` (True, ``"pieces"``) or ``"prefix"``; ValueError otherwise."""
    if char_integrity is None or char_integrity is False or char_integrity == "none":
        return None
    if char_integrity is True or char_integrity == "pieces":
        return "pieces"
    if char_integrity == "prefix":
        return "prefix"
    raise ValueError(f"char_integrity must be False/'none', True/'pieces' (any two pieces of one character "
                     f"may merge) or 'prefix' (SCRIPT's rule: a character's prefix and its next piece), "
                     f"got {char_integrity!r}")


def check_cache_bound(bytes: Any, entries: Optional[int] = None, *, name: str = "bytes") -> None:
    """The one check of a chunk-cache bound (:meth:`Tokenizer.set_cache`, ``encode_corpus(cache_bytes=)``,
    whose argument ``name`` the message uses): ``bytes`` an integer in ``0..MAX_CACHE_BYTES``, ``entries``
    None or >= 0."""
    if isinstance(bytes, bool) or not isinstance(bytes, (int, np.integer)) or not 0 <= bytes <= _encode.MAX_CACHE_BYTES \
            or (entries is not None and entries < 0):
        raise ValueError(f"the chunk cache takes bytes in 0..{_encode.MAX_CACHE_BYTES} (16 GiB) and "
                         f"entries >= 0 or None, got {name}={bytes!r}, entries={entries!r}")


def check_superbpe_options(substrate: str, superbpe: bool, char_integrity: bool) -> None:
    """The one check of the SuperBPE x character-integrity combination (trainer and
    constructor): ValueError for ``ube``/``utf16``, whose stage-2 encoder does not check
    characters yet."""
    if superbpe and char_integrity and substrate != "utf8":
        raise ValueError(
            f"SuperBPE with char_integrity is supported for the utf8 substrate only, not {substrate!r}: the "
            "stage-2 (superword) encoder does not check character boundaries yet, and the ube/utf16 byte "
            "alphabets do not resynchronise as UTF-8 does, so a superword could land across a character. "
            "Train SuperBPE or char_integrity, or use substrate='utf8'")


def max_model_id(n_tokens: int) -> int:
    """The largest model id a vocabulary of ``n_tokens`` tokens may use (``id_map``,
    HF vocab and added-token ids, tiktoken ranks): ``2 * n_tokens + 1023``.  Model
    ids may leave gaps, but never so many that a table indexed by id (``np.full(max_id
    + 1)``) is sized by one hostile number rather than by the vocabulary."""
    return 2 * n_tokens + 1023


class Tokenizer:
    """A UBE / BBPE / BBPE16 byte-level BPE tokenizer.

    Build one with :func:`ube_stream.train` or :meth:`Tokenizer.load`.
    ``normalization``: ``"none"`` or ``"nfc"`` (every encode path applies Unicode
    NFC first, as HF's ``NFC`` normalizer; see :meth:`normalize`).  ``special_tokens``
    as ``{text: id}`` may give several texts one id: the first is the token's name
    (:attr:`special_tokens`), the others aliases (:attr:`special_aliases`).
    ``added_tokens``: ``[{"text", "id", "normalized"}]`` (internal ids), HF's added tokens
    that are not special: cut out of every text before pre-tokenization
    (``tokenizer/added_tokens.py``); one whose id follows the merged tokens is also
    listed in ``special_tokens`` (its text is what ``decode`` writes).
    """

    def __init__(self, *, substrate: str, merges: Iterable[Sequence[int]],
                 special_tokens: Mapping[str, int] | Sequence[str] = ("<|endoftext|>",),
                 pattern: str = "gpt2", normalization: str = "none",
                 training: Optional[dict] = None, id_map: Optional[Sequence[int]] = None,
                 char_integrity: bool | str = False, superbpe: Optional[Mapping[str, Any]] = None,
                 added_tokens: Optional[Sequence[Mapping[str, Any]]] = None):
        from ..pretokenizer import resolve_pattern
        from ..substrate import base_size

        self.substrate = substrate
        self.base_size = base_size(substrate)
        self.pattern_name, self.pattern = resolve_pattern(pattern)
        #: ``"none"`` (text as is) or ``"nfc"`` (Unicode NFC before pre-tokenization, as HF's NFC normalizer)
        self.normalization = check_normalization(normalization)
        self.merges: List[Tuple[int, int]] = [(int(a), int(b)) for a, b, *_ in merges]
        results, symbols, offsets = expand_merges(self.merges, self.base_size)
        self.merge_results: List[int] = results.tolist()
        self._expansions = _ranks.expansion_tuples(symbols, offsets)
        symbols.setflags(write=False)
        offsets.setflags(write=False)
        self._expansion_cache = (symbols, offsets)   # _internal_expansion_table
        #: character integrity (no token holds part of one character and anything of another, in
        #: training and encoding) by rule ``"pieces"`` or ``"prefix"``; None: off
        self.char_rule: Optional[str] = char_rule_of(char_integrity)
        #: SuperBPE: ``{"stage1_merges": k, "max_words": w}`` (merges[:k] inside chunks, the rest across
        #: them), with ``"spans": "liu"`` for that span rule (absent: rule "v1"; docs/training.md)
        self.superbpe: Optional[Dict[str, Any]] = None
        check_superbpe_options(substrate, superbpe is not None, self.char_integrity)
        if superbpe is not None:
            from ..pretokenizer import check_span_rule

            k, w = superbpe["stage1_merges"], superbpe["max_words"]
            if not (0 <= int(k) <= len(self.merges)) or int(w) < 1:
                raise ValueError(f"superbpe needs 0 <= stage1_merges <= {len(self.merges)} merges and "
                                 f"max_words >= 1, got {dict(superbpe)}")
            rule = check_span_rule(superbpe.get("spans", "v1"))
            self.superbpe = {"stage1_merges": int(k), "max_words": int(w)}
            if rule != "v1":
                self.superbpe["spans"] = rule
        n_tokens = len(self._expansions)
        aliases: Dict[str, int] = {}
        if isinstance(special_tokens, Mapping):
            # several texts on one id: the first (in the mapping's order) is the token's name, the
            # others are aliases (recognised in text as it is; decode writes the name)
            specials: Dict[str, int] = {}
            named: set = set()
            for text, sid in special_tokens.items():
                (aliases if sid in named else specials)[text] = sid
                named.add(sid)
            expected = list(range(n_tokens, n_tokens + len(specials)))
            if sorted(specials.values()) != expected:
                raise TokenizerFormatError(
                    f"special token ids {sorted(specials.values())} must follow the merged tokens: "
                    f"expected {expected}")
        else:
            if len(set(special_tokens)) != len(special_tokens):
                raise ValueError(f"special tokens repeat: {list(special_tokens)}")
            specials = {text: n_tokens + i for i, text in enumerate(special_tokens)}
        for text in itertools.chain(specials, aliases):
            if not isinstance(text, str) or not text:
                raise ValueError(f"a special token must be a non-empty string, got {text!r}")
        # internal ids: base symbols, merged tokens, special tokens (the file's numbering)
        self._special_internal: Dict[str, int] = dict(sorted(specials.items(), key=lambda kv: kv[1]))
        #: other names of special tokens: alias text -> internal id (tiktoken's o200k_harmony)
        self._special_aliases: Dict[str, int] = dict(sorted(aliases.items(), key=lambda kv: kv[1]))
        #: HF's non-special added tokens: text -> (internal id, normalized)
        self._added_tokens: Dict[str, Tuple[int, bool]] = _check_added(added_tokens or (), n_tokens,
                                                                         self._special_internal)
        self.training = dict(training or {})
        #: run a custom pattern without a time budget (False for patterns read from files)
        self.trust_pattern = True
        self._set_id_map(id_map)

    def _set_id_map(self, id_map: Optional[Sequence[int]]) -> None:
        """Model ids of the internal ids (existing models number their tokens their own
        way); ``None`` or the identity means model ids are the internal ids."""
        n_internal = len(self._expansions) + len(self._special_internal)
        self.__dict__.pop("_kernel_state", None)  # the encoder writes model ids
        self.__dict__.pop("_fingerprint", None)   # the canonical content holds them
        self.__dict__.pop("_stage2_state", None)
        self.__dict__.pop("_added_state", None)   # it holds model ids
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
            bound = max_model_id(n_internal)
            if n_internal and arr.max() > bound:
                at = int(np.argmax(arr))
                raise TokenizerFormatError(
                    f"token {at} has the model id {int(arr[at])} (id_map, or the ids a HF or tiktoken vocabulary "
                    f"gives its tokens), but a vocabulary of {n_internal} tokens "
                    f"may number them only up to {bound} (twice its size plus 1024: the id -> token table is "
                    f"sized by the largest id); the file is corrupt or hostile")
            ordered = np.sort(arr)   # (np.unique imports numpy.ma: 7 ms of every process's start)
            if bool((ordered[1:] == ordered[:-1]).any()):
                raise TokenizerFormatError("id_map gives two tokens the same model id")
            if not np.array_equal(arr, np.arange(n_internal)):
                self._id_map = arr.astype(np.uint32)
                inverse = np.full(int(arr.max()) + 1, -1, dtype=np.int64)
                inverse[arr] = np.arange(n_internal)
                self._inverse_map = inverse
        self.special_tokens: Dict[str, int] = {t: self._model_id(i) for t, i in self._special_internal.items()
                                               if t not in self._added_tokens}

    def _model_id(self, internal: int) -> int:
        return internal if self._id_map is None else int(self._id_map[internal])

    def _internal_id(self, token_id: int) -> int:
        """Internal id of a model id, or -1 when the vocabulary has no such id."""
        token_id = int(token_id)
        if self._inverse_map is None:
            return token_id if 0 <= token_id < len(self._expansions) + len(self._special_internal) else -1
        return int(self._inverse_map[token_id]) if 0 <= token_id < self._inverse_map.size else -1

    # ------------------------------------------------------------------ file
    def _canonical(self) -> dict:
        return file_format.canonical(
            substrate=self.substrate, pattern_name=self.pattern_name, pattern=self.pattern,
            normalization=self.normalization, base_size=self.base_size, merges=self.merges,
            special_tokens={**self._special_internal, **self._special_aliases},
            id_map=None if self._id_map is None else self._id_map.tolist(),
            char_integrity=self.char_rule, superbpe=self.superbpe,
            added_tokens=[{"text": t, "id": i, "normalized": n} for t, (i, n) in self._added_tokens.items()])

    @property
    def fingerprint(self) -> str:
        """``sha256:<hex>`` of the canonical encoding-relevant content (computed once:
        loading checks it and an encode run records it)."""
        found = self.__dict__.get("_fingerprint")
        if found is None:
            found = self._fingerprint = file_format.fingerprint(self._canonical())
        return found

    def to_json(self) -> str:
        """The tokenizer file's text; equal tokenizers give equal bytes."""
        return file_format.dumps(self._canonical(), vocab_size=self.vocab_size, training=self.training,
                                 content_fingerprint=self.fingerprint)

    def save(self, path: str | os.PathLike) -> None:
        """Write the tokenizer file atomically (temporary file, fsync, rename)."""
        atomic_write_text(os.fspath(path), self.to_json())

    @classmethod
    def from_json(cls, text: str, *, source: str = "<string>", trust_pattern: bool = False) -> "Tokenizer":
        """A tokenizer from a file's text, checked (format, version, fields, pattern, fingerprint, size).

        Loading is bounded by the vocabulary: a token may expand to at most
        :data:`MAX_TOKEN_SYMBOLS` base symbols.  A custom pattern runs under a
        time budget per document unless ``trust_pattern=True``."""
        return cls._from_parsed(file_format.parse(text, source=source), source, trust_pattern)

    @classmethod
    def _from_parsed(cls, parsed: Tuple[dict, dict], source: str, trust_pattern: bool = False) -> "Tokenizer":
        """:meth:`from_json` after :func:`file_format.parse` (or ``parse_doc``)."""
        doc, kwargs = parsed
        try:
            tok = cls(**kwargs)
        except TokenizerFormatError as exc:
            raise TokenizerFormatError(f"{source}: {exc}") from None
        except (ValueError, TypeError) as exc:
            raise TokenizerFormatError(f"{source}: {exc}; the file is corrupt or was edited") from None
        file_format.check_recorded(doc, pattern=tok.pattern, fingerprint=tok.fingerprint,
                                   vocab_size=tok.vocab_size, source=source)
        tok.trust_pattern = bool(trust_pattern)
        return tok

    @classmethod
    def load(cls, path: str | os.PathLike, *, trust_pattern: bool = False,
             cache_bytes: Optional[int] = None) -> "Tokenizer":
        """Read and check a tokenizer file (format, version, fields, fingerprint); see
        :meth:`from_json`.  ``cache_bytes``: the memory bound of each encoding thread's
        chunk cache (None: the default, ``Tokenizer.cache_bytes``; see :meth:`set_cache`)."""
        tok = cls.from_json(file_format.read_text(path), source=os.fspath(path), trust_pattern=trust_pattern)
        if cache_bytes is not None:
            tok.set_cache(bytes=cache_bytes)
        return tok

    # ------------------------------------------------------------------ exports
    def vocab(self) -> Dict[str, int]:
        """Symbol string -> id for every token, special tokens as their text."""
        return export.vocab(self)

    def export_vocab_merges(self, directory: str | os.PathLike) -> Tuple[str, str]:
        """Write GPT-2 style ``vocab.json`` and ``merges.txt`` into ``directory``."""
        return export.export_vocab_merges(self, directory)

    def to_hf_dict(self) -> dict:
        """HF ``tokenizers`` JSON (utf8 substrate only)."""
        return export.hf_dict(self)

    def export_hf(self, path: str | os.PathLike, **roles: Optional[str]) -> str:
        """Write a HF tokenizer (utf8 substrate only): ``*.json`` a bare ``tokenizer.json``,
        else a folder ``AutoTokenizer`` loads with eos/bos/pad/unk set (``roles``
        override the defaults); see :func:`ube_stream.tokenizer.export.export_hf`."""
        return export.export_hf(self, path, **roles)

    # ------------------------------------------------------------------ properties
    @property
    def vocab_size(self) -> int:
        """Base symbols + merged tokens + special tokens (for a model with its own
        numbering: its largest id + 1)."""
        if self._inverse_map is not None:
            return int(self._inverse_map.size)
        return len(self._expansions) + len(self._special_internal)

    @property
    def special_aliases(self) -> Dict[str, int]:
        """Other names of special tokens: ``{alias text: model id}`` (``special_tokens``
        holds each id's name, the one ``decode`` writes).  Aliases are recognised in
        text wherever special tokens are (``allowed_special``, ``disallowed_special``)."""
        return {t: self._model_id(i) for t, i in self._special_aliases.items()}

    @property
    def added_tokens(self) -> Dict[str, int]:
        """HF's added tokens that are not special: ``{text: model id}``.  Every encode path cuts
        them out of the text before pre-tokenization, whatever ``allowed_special`` says (as
        HF does); see ``tokenizer/added_tokens.py``."""
        return {t: self._model_id(i) for t, (i, _) in self._added_tokens.items()}

    def _added(self):
        """The :class:`~.added_tokens.AddedTokens` splitter (model ids), built on first use."""
        state = self.__dict__.get("_added_state")
        if state is None:
            from .added_tokens import AddedTokens

            state = self._added_state = AddedTokens(
                {t: (self._model_id(i), n) for t, (i, n) in self._added_tokens.items()})
        return state

    @property
    def id_map(self) -> Optional[np.ndarray]:
        """``uint32`` model id of each internal id, or ``None`` when they are equal."""
        return None if self._id_map is None else self._id_map.copy()

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
        from ..substrate import symbol_string

        internal = self._internal_id(token_id)
        for text, sid in self._special_internal.items():   # special and added tokens: their text
            if sid == internal:
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
        return self._expansion_cache   # expand_merges' flat table, made with the tokenizer

    # ------------------------------------------------------------------ encoding
    # The Cython encoder (ube_stream._encode) does the work; the pure-Python
    # twins live in _reference.py (encode_reference, decode_reference) and the
    # parity tests compare both.

    #: memory bound of the chunk cache of each encoding thread, in bytes (128 MiB: about
    #: a million chunks; 64 threads, 8 GiB); when full it keeps its most-hit chunks (see
    #: :meth:`set_cache`).  ``cache_entries``: an optional cap on its chunks (None: none)
    cache_bytes = _encode.DEFAULT_CACHE_BYTES
    cache_entries: Optional[int] = None
    #: the kernel splits and encodes a document this many bytes (to the next safe cut)
    #: at a time, so a huge document needs memory for one slice of chunk ends, not for
    #: all of them (results never depend on it)
    slice_bytes = 1 << 20

    def set_cache(self, *, bytes: int = _encode.DEFAULT_CACHE_BYTES, entries: Optional[int] = None) -> None:
        """Bound the chunk cache of each encoding thread to ``bytes`` of memory (0: no
        cache) and, optionally, ``entries`` chunks.  When full, the cache keeps the
        chunks hit most (hits are counted once it holds a quarter of its bound; the
        counts are halved at each sweep, so it follows a corpus that drifts) and
        drops the rest.  Ids never depend on it; the caches start empty again."""
        check_cache_bound(bytes, entries)
        self.cache_bytes, self.cache_entries = int(bytes), None if entries is None else int(entries)
        self.__dict__.pop("_kernel_state", None)

    @property
    def superbpe_spans(self) -> Optional[str]:
        """The SuperBPE span rule, ``"v1"`` or ``"liu"`` (docs/training.md); None for a
        plain tokenizer."""
        return None if self.superbpe is None else self.superbpe.get("spans", "v1")

    @property
    def char_integrity(self) -> bool:
        """Whether the tokenizer keeps characters whole (by :attr:`char_rule`)."""
        return self.char_rule is not None

    @property
    def _encoder_char_integrity(self) -> bool:
        """Whether the encoder must test each occurrence for character integrity.

        Under ``utf16`` and ``ube`` the bytes across two characters can spell a
        token learnt inside one, so merges are refused there as in training.
        Under ``utf8`` a token's bytes fix where it can sit in valid UTF-8 (lead
        and continuation bytes differ): when every merged token is whole
        characters or a strict part of one (as a char-integrity trainer makes
        them), every occurrence keeps characters whole and the plain encoder
        gives the same ids; merges from elsewhere take the test."""
        if not self.char_integrity:
            return False
        return self.substrate != "utf8" or not self._utf8_tokens_keep_characters

    @property
    def _utf8_tokens_keep_characters(self) -> bool:
        """Every merged token of UTF-8 symbols only (all of them under ``utf8``) is whole
        characters or a strict part of one: then a chunk of UTF-8 symbols needs no
        check (under ``ube`` the check runs only on chunks holding UTF-16 symbols)."""
        found = self.__dict__.get("_utf8_sound")
        if found is None:
            found = self._utf8_sound = all(_utf8_keeps_characters(bytes(e), self.char_rule or "pieces") for e in self._expansions[self.base_size:]
                                           if max(e) < 256)
        return found

    def _kernel(self):
        """The Cython encoder and its pool of free cache slots (built on first use).  For a
        SuperBPE tokenizer the encoder holds the stage-1 merges only and writes internal
        ids (:meth:`_stage2` maps them)."""
        state = self.__dict__.get("_kernel_state")
        if state is not None:
            return state
        with _KERNEL_LOCK:   # threads of a first batch build one encoder, which they then share
            state = self.__dict__.get("_kernel_state")
            if state is not None:
                return state
            from ..pretokenizer import SPLIT_GPT2, encoder_split, gpt2_class_table, tiktoken_class_table
            from ..substrate import substrate_code

            num_slots = max(os.cpu_count() or 1, 1) * 2
            split = encoder_split(self.pattern)  # None: chunk ends come from chunk_bounds_batch
            split = SPLIT_GPT2 if split is None else split
            k = len(self.merges) if self.superbpe is None else self.superbpe["stage1_merges"]
            # np.fromiter over the flattened pairs: 3-4x faster than np.asarray on a list of tuples
            # (0.1 s instead of 0.35 s for cl100k's 100k merges, paid by every fresh instance)
            merges = np.fromiter(itertools.chain.from_iterable(self.merges[:k]), dtype=np.uint32,
                                 count=2 * k).reshape(-1, 2)
            encoder = _encode.Encoder(
                merges, np.fromiter(self.merge_results[:k], dtype=np.uint32, count=k), self.base_size,
                substrate_code(self.substrate), gpt2_class_table() if split == SPLIT_GPT2 else
                tiktoken_class_table(), num_slots=num_slots,
                cache_entries=-1 if self.cache_entries is None else self.cache_entries,
                cache_bytes=self.cache_bytes, split=split,
                id_map=self._id_map if self.superbpe is None else None, slice_bytes=self.slice_bytes,
                char_integrity=self._encoder_char_integrity,
                check_utf8=self.char_integrity and not self._utf8_tokens_keep_characters,
                char_rule=self.char_rule or "pieces")
            if self.cache_bytes:   # every cache starts with the vocabulary's one-token chunks
                token_bytes, entries = self._decode_tables()[:2]
                encoder.seed_caches(token_bytes, entries)
            state = self._kernel_state = (encoder, _SlotPool(encoder))
            return state

    def _stage2(self):
        """SuperBPE: the stage-2 kernel (``_superword.Stage2``: merges[k:] across the
        chunks of each span, then the model's numbering), built on first use."""
        stage2 = self.__dict__.get("_stage2_state")
        if stage2 is None:
            from .. import _superword

            assert self.superbpe is not None
            k = self.superbpe["stage1_merges"]
            stage2 = self._stage2_state = _superword.Stage2(
                np.asarray(self.merges[k:], dtype=np.uint32).reshape(-1, 2),
                np.asarray(self.merge_results[k:], dtype=np.uint32), self.superbpe["max_words"],
                len(self._expansions), self._id_map)
        return stage2

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_kernel_state", None)  # compiled tables are rebuilt in the receiving process
        state.pop("_stage2_state", None)
        state.pop("_decode_state", None)  # its DecodeTables is a kernel object (no pickling)
        state.pop("_added_state", None)
        return state

    def _chunk_bounds(self, data: np.ndarray, offsets: np.ndarray, first_doc: int):
        """``chunk_bounds_batch`` of the tokenizer's pattern, errors naming the document of the call."""
        from ..pretokenizer import PatternTimeout, chunk_bounds_batch, pattern_spec

        try:
            return chunk_bounds_batch(data, offsets, pattern_spec(self.pattern_name, self.pattern),
                                      time_limit=not self.trust_pattern)
        except InvalidTextError as exc:
            if exc.document is not None:
                exc.document += first_doc
            raise
        except PatternTimeout as exc:
            raise TokenizerFormatError(
                f"the tokenizer's custom pattern {self.pattern!r} ran past its time budget "
                f"({exc.budget:.3g} s) on document {(exc.document or 0) + first_doc} ({exc.chars} "
                f"characters): it backtracks catastrophically. Fix the pattern, or, if you trust the "
                f"file, load it with trust_pattern=True to run it without a limit") from None

    @contextlib.contextmanager
    def _encoder_slot(self):
        """``(encoder, slot)``: the compiled encoder and a chunk-cache slot of its own for
        this thread (the warmest free one), handed back when the block ends."""
        encoder, slots = self._kernel()
        slot = slots.get()
        try:
            yield encoder, slot
        finally:
            slots.put(slot)

    def _encode_range(self, data: np.ndarray, offsets: np.ndarray, first_doc: int = 0, bos: int = -1,
                      eos: int = -1):
        """Model ids of documents ``data[offsets[d]:offsets[d+1]]`` (one thread; the kernel
        maps internal ids to the model's numbering, and writes ``bos``/``eos`` (>= 0)
        around each document)."""
        from ..pretokenizer import encoder_split

        if self.superbpe is not None:
            return self._encode_range_superbpe(data, offsets, first_doc, bos, eos)
        err = err_buffer()
        with self._encoder_slot() as (encoder, slot):
            if encoder_split(self.pattern) is not None:  # the encoder splits inline (encoder.split)
                status, ids, token_offsets = encoder.encode_utf8(data, offsets, slot, err, bos, eos)
            else:
                ends, doc_chunks = self._chunk_bounds(data, offsets, first_doc)
                status, ids, token_offsets = encoder.encode_chunks(data, offsets, ends, doc_chunks, slot, err,
                                                                   None, bos, eos)
        check_status(status, err, what="encoding", data=data, offsets=offsets, first_item=first_doc)
        return ids, token_offsets

    def _encode_texts(self, texts: List[str], first: int, stop: int, bos: int = -1, eos: int = -1):
        """Model ids of ``texts[first:stop]`` read in place by the kernel (one thread;
        only for patterns the encoder splits inline, no SuperBPE)."""
        err = err_buffer()
        with self._encoder_slot() as (encoder, slot):
            status, ids, token_offsets = encoder.encode_texts(texts, first, stop, slot, err, bos, eos)
        check_status(status, err, what="encoding", first_item=first)
        return ids, token_offsets

    def _encode_range_superbpe(self, data: np.ndarray, offsets: np.ndarray, first_doc: int, bos: int,
                               eos: int):
        """SuperBPE: chunk ends; stage 1 (merges[:k]) of each chunk, through the
        encoder's chunk cache, which also writes where each chunk's ids start; then
        stage 2 across the chunks of each span (``_superword``: spans found inline by
        the span rule), all with the GIL released."""
        from ..pretokenizer import span_class_table

        ends, doc_chunks = self._chunk_bounds(data, offsets, first_doc)
        chunk_tokens = np.empty(ends.shape[0] + 1, dtype=np.int64)
        err = err_buffer()
        with self._encoder_slot() as (encoder, slot):
            status, ids1, _ = encoder.encode_chunks(data, offsets, ends, doc_chunks, slot, err, chunk_tokens)
        if status == STATUS_OK:
            status, ids, token_offsets = self._stage2().encode_text_spans(
                data, ends, ids1, chunk_tokens, doc_chunks, offsets,
                span_class_table(self.superbpe_spans or "v1"), err, bos, eos)
        check_status(status, err, what="encoding", data=data, offsets=offsets, first_item=first_doc)
        return ids, token_offsets

    def _encode_docs(self, data: Optional[np.ndarray], offsets: np.ndarray, num_threads: Optional[int],
                     bos: int = -1, eos: int = -1, texts: Optional[List[str]] = None):
        """Model ids of a batch, split across ``num_threads`` threads by bytes: the
        documents ``data[offsets[d]:offsets[d + 1]]``, or ``texts`` read in place
        (``data`` None; ``offsets`` from ``_encode.utf8_offsets(texts)``)."""
        ndocs = offsets.shape[0] - 1

        def run(a: int, b: int):
            if texts is None:
                assert data is not None
                return self._encode_range(data, offsets[a:b + 1], a, bos, eos)
            return self._encode_texts(texts, a, b, bos, eos)

        threads = max(1, min(int(num_threads or 1), ndocs))
        if threads == 1:
            return run(0, ndocs)
        from concurrent.futures import ThreadPoolExecutor

        # contiguous groups of documents with about equal bytes
        targets = offsets[0] + (offsets[-1] - offsets[0]) * np.arange(1, threads) / threads
        cuts = np.unique(np.concatenate(([0], np.searchsorted(offsets, targets), [ndocs])))
        groups = [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
        with ThreadPoolExecutor(len(groups)) as pool:
            parts = list(pool.map(lambda g: run(*g), groups))
        ids = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.uint32)
        token_offsets = np.zeros(ndocs + 1, dtype=np.int64)
        base = 0
        for (a, b), (part_ids, part_offsets) in zip(groups, parts):
            token_offsets[a + 1:b + 1] = part_offsets[1:] + base
            base += part_ids.shape[0]
        return ids, token_offsets

    def _special_names(self) -> Dict[str, int]:
        """Every name of a special token (aliases too; not the added tokens): its internal id."""
        names = {**self._special_internal, **self._special_aliases}
        for text in self._added_tokens:
            names.pop(text, None)
        return names

    def _allowed_specials(self, allowed_special) -> Dict[str, int]:
        """Internal ids of the allowed special tokens."""
        names = self._special_names()
        if allowed_special == "all":
            return names
        if isinstance(allowed_special, str):
            raise TypeError(f"allowed_special must be 'all' or a collection of special tokens, got "
                            f"{allowed_special!r} (write ({allowed_special!r},) for one token)")
        allowed = {}
        for tok in allowed_special:
            if tok not in names:
                raise ValueError(f"{tok!r} is not a special token of this tokenizer "
                                 f"(it has {list(names)})")
            allowed[tok] = names[tok]
        return allowed

    def _split_special(self, text: str, allowed: Mapping[str, int]) -> List[Tuple[str, Optional[int]]]:
        """Pieces of ``text``: ``(text, None)`` for ordinary text, ``(tok, internal id)``
        for an occurrence of a token of ``allowed`` (the allowed special tokens, and the
        added tokens HF finds in the text as written; leftmost, longest first)."""
        if not allowed:
            return [(text, None)]
        pattern = self._special_pattern(list(allowed))
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

    def _disallowed_specials(self, allowed_special, disallowed_special) -> Tuple[str, ...]:
        """The special tokens whose text in the input raises (tiktoken's rule)."""
        if disallowed_special == "all":
            allowed = self._allowed_specials(allowed_special)
            return tuple(t for t in self._special_names() if t not in allowed)
        if isinstance(disallowed_special, str):
            raise TypeError(f"disallowed_special must be 'all' or a collection of special tokens, got "
                            f"{disallowed_special!r} (write ({disallowed_special!r},) for one token)")
        found = tuple(disallowed_special)
        names = self._special_names()
        for tok in found:
            if tok not in names:
                raise ValueError(f"{tok!r} is not a special token of this tokenizer (it has {list(names)})")
        return found

    def _special_pattern(self, tokens: Sequence[str]):
        """Compiled leftmost-longest alternation of ``tokens`` (cached)."""
        key = tuple(sorted(tokens))
        cache = self.__dict__.setdefault("_special_patterns", {})
        pattern = cache.get(key)
        if pattern is None:
            from .added_tokens import literal_pattern

            pattern = cache[key] = literal_pattern(tokens)
        return pattern

    def _check_disallowed(self, texts: Sequence[str], disallowed: Tuple[str, ...]) -> None:
        if not disallowed:
            return
        pattern = self._special_pattern(disallowed)
        for d, text in enumerate(texts):
            if not isinstance(text, str):
                continue  # the encoder names the bad type
            m = pattern.search(text)
            if m is not None:
                where = "" if len(texts) == 1 else f" of document {d}"
                byte_offset = len(text[:m.start()].encode("utf-8", "surrogatepass"))
                raise SpecialTokenError(
                    f"the text holds the special token {m.group()!r} at character offset {m.start()} "
                    f"(UTF-8 byte offset {byte_offset}){where}, and special tokens are disallowed by "
                    f"default: pass allowed_special={{{m.group()!r}}} (or 'all') to encode it as the "
                    "special token, or disallowed_special=() / encode_ordinary() to encode it as plain text",
                    token=m.group(), offset=m.start(), byte_offset=byte_offset,
                    document=None if len(texts) == 1 else d)

    def encode(self, text: str, *, allowed_special: Iterable[str] | str = (),
               disallowed_special: Iterable[str] | str = "all") -> np.ndarray:
        """Token ids (``uint32``) of ``text``, with tiktoken's rules for special tokens.

        A special token's text is encoded as that special token when listed in
        ``allowed_special`` (or ``"all"``).  Listed in ``disallowed_special``
        (default ``"all"``: every special token not allowed) it raises
        :class:`~ube_stream.errors.SpecialTokenError` naming the token and its
        offset, so text from a corpus cannot inject control tokens; pass
        ``disallowed_special=()`` (or use :meth:`encode_ordinary`) to encode it
        as plain text.  Raises :class:`~ube_stream.errors.InvalidTextError` for
        a lone surrogate.
        """
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}; "
                            "for UTF-8 bytes use encode_utf8_batch")
        if self._special_internal:
            self._check_disallowed([text], self._disallowed_specials(allowed_special, disallowed_special))
        if not allowed_special:
            return self.encode_ordinary(text)
        return self.encode_batch([text], allowed_special=allowed_special, disallowed_special=())[0]

    def normalize(self, text: str) -> str:
        """``text`` as the encoder sees it: Unicode NFC for ``normalization="nfc"``, else as
        is (``decode(encode(text)) == normalize(text)``; decoding does not undo it)."""
        return normalize_text(self.normalization, text)

    def encode_ordinary(self, text: str) -> np.ndarray:
        """Token ids of ``text`` as plain text: a special token's text is ordinary text."""
        if not isinstance(text, str):
            raise TypeError(f"encode_ordinary expects a str, got {type(text).__name__}; "
                            "for UTF-8 bytes use encode_utf8_batch")
        if self._added_tokens:   # cut out of the text first (HF's order)
            return self.encode_batch([text], disallowed_special=())[0]
        data = utf8_of(self.normalize(text))
        ids, _ = self._encode_range(np.frombuffer(data, np.uint8), np.array([0, len(data)], dtype=np.int64))
        return ids

    def encode_ordinary_batch(self, texts: Sequence[str], *, num_threads: Optional[int] = None) -> List[np.ndarray]:
        """:meth:`encode_ordinary` of each text (see :meth:`encode_batch` for ``num_threads``)."""
        return self.encode_batch(texts, disallowed_special=(), num_threads=num_threads)

    def encode_batch(self, texts: Sequence[str], *, allowed_special: Iterable[str] | str = (),
                     disallowed_special: Iterable[str] | str = "all",
                     num_threads: Optional[int] = None) -> List[np.ndarray]:
        """Token ids of each text (one ``uint32`` array per text); special tokens as in
        :meth:`encode` (the error names the document).

        ``num_threads`` (default 1) splits the documents across threads; the
        kernel releases the GIL, and results are identical for any count.
        """
        if isinstance(texts, str):
            raise TypeError("encode_batch expects a sequence of str, got a single str; use encode(text)")
        texts = list(texts)
        if self._special_internal:
            self._check_disallowed(texts, self._disallowed_specials(allowed_special, disallowed_special))
        pieces: Optional[List[List[Tuple[str, Optional[int]]]]]
        # HF's first pass: special tokens and the added tokens found in the text as written
        cut = {**(self._allowed_specials(allowed_special) if allowed_special else {}),
               **{t: i for t, (i, normalized) in self._added_tokens.items() if not normalized}}
        if cut:
            pieces = [self._split_special(t, cut) for t in texts]
            docs = [p for text_pieces in pieces for p, special in text_pieces if special is None]
        else:
            pieces, docs = None, texts
        docs = docs if type(docs) is list else list(docs)
        docs = normalize_texts(self.normalization, docs)   # each stretch between special tokens, as HF
        from ..pretokenizer import encoder_split

        # the kernel reads each str's UTF-8 in place when it splits the text itself (no
        # joined copy: a batch's copy faulted in fresh pages on every call); not when the
        # added tokens' second pass cuts the UTF-8
        second_pass = bool(self._added_tokens) and bool(self._added().normalized)
        in_place = self.superbpe is None and encoder_split(self.pattern) is not None and not second_pass
        try:
            if in_place:
                data, offsets = None, _encode.utf8_offsets(docs)
            else:
                data, offsets = _encode.utf8_join(docs)
        except (TypeError, UnicodeEncodeError):  # say which document, and what to do
            for d, text in enumerate(docs):
                if not isinstance(text, str):
                    raise TypeError(f"document {d} is a {type(text).__name__}, not a str") from None
                utf8_of(text, document=d)
            raise
        if second_pass:
            assert data is not None
            ids, token_offsets = self._added().encode(
                data, offsets, lambda d, o: self._encode_docs(d, o, num_threads), normalize=None, raw_pass=False)
        else:
            ids, token_offsets = self._encode_docs(data, offsets, num_threads, texts=docs if in_place else None)
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

    def encode_utf8_batch(self, data: np.ndarray, offsets: np.ndarray, *, num_threads: Optional[int] = None,
                          bos_id: Optional[int] = None,
                          eos_id: Optional[int] = None) -> Tuple[np.ndarray, np.ndarray]:
        """Hot-path entry: documents as one UTF-8 buffer with ``n+1`` byte offsets
        -> ``(ids uint32, token_offsets int64[n+1])``.  No special tokens are
        recognised (documents are plain text).  ``bos_id`` / ``eos_id``: a token id
        the kernel writes before / after every document, inside its token range
        (``ube encode``'s EOS; no copy of the ids).  Under ``normalization="nfc"``
        the documents that are not NFC are normalised first (into a new buffer;
        the token offsets are those of the normalised documents).  Raises
        :class:`~ube_stream.errors.InvalidTextError` naming the document and byte
        offset of invalid UTF-8."""

        data = as_uint8(data)
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        if offsets.ndim != 1 or offsets.shape[0] < 1:
            raise ValueError(f"offsets must be 1-D with ndocs + 1 entries, got shape {offsets.shape}")
        marks = []
        for name, value in (("bos_id", bos_id), ("eos_id", eos_id)):
            if value is None:
                marks.append(-1)
            elif isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= value < self.vocab_size:
                marks.append(int(value))
            else:
                raise ValueError(f"{name} must be a token id in [0, {self.vocab_size}) or None, got {value!r}")
        if self._added_tokens:   # cut out before pre-tokenization, each stretch normalised (HF's order)
            return self._added().encode(
                data, offsets, lambda d, o: self._encode_docs(d, o, num_threads),
                normalize=lambda d, o: normalize_utf8(self.normalization, d, o), bos=marks[0], eos=marks[1])
        data, offsets = normalize_utf8(self.normalization, data, offsets)
        return self._encode_docs(data, offsets, num_threads, bos=marks[0], eos=marks[1])

    # ------------------------------------------------------------------ decoding
    # The Cython decoder (ube_stream._decode) does the work: decode_tokens copies
    # each token's UTF-8 from a table made here once, decode_exact (symbol by
    # symbol) names where invalid ids fail; _reference.decode_reference is the twin.

    def _decode_tables(self) -> tuple:
        """``(token_bytes, entries, symbols, symbol_offsets, id_map, special_bytes,
        special_offsets, substrate code, _decode.DecodeTables)`` of the decode
        kernels, built once.

        ``entries`` is indexed by model id (``_decode.decode_tokens`` packs offset,
        length and kind in one word: one memory access a token); ``id_map`` gives
        the internal id of a model id (empty: the same).  The ``DecodeTables``
        holds the first five, checked once, for the fast kernels."""
        tables = self.__dict__.get("_decode_state")
        if tables is None:
            from ..substrate import substrate_code

            symbols, offsets = self._internal_expansion_table()
            texts = [t.encode("utf-8") for t in self._special_internal]
            special_offsets = np.zeros(len(texts) + 1, dtype=np.int64)
            np.cumsum([len(t) for t in texts], out=special_offsets[1:])
            special_bytes = np.frombuffer(b"".join(texts), np.uint8)
            pieces, kinds = _token_utf8(self._expansions, symbols, offsets, self.substrate, _decode.KINDS)
            pieces.extend(texts)
            kinds = np.concatenate([kinds, np.full(len(texts), _decode.KINDS["special"], np.uint8)])
            lengths = np.fromiter((len(p) for p in pieces), dtype=np.uint64, count=len(pieces))
            starts = np.zeros(len(pieces), dtype=np.uint64)
            np.cumsum(lengths[:-1], out=starts[1:])
            internal_entries = starts | (lengths << np.uint64(32)) | (kinds.astype(np.uint64) << np.uint64(56))
            if self._id_map is None:
                entries, id_map = internal_entries, np.zeros(0, np.int64)
            else:
                entries = np.full(self.vocab_size, _decode.KINDS["none"] << 56, dtype=np.uint64)
                entries[self._id_map] = internal_entries
                id_map = np.ascontiguousarray(self._inverse_map, dtype=np.int64)
            token_bytes = np.frombuffer(b"".join(pieces) + bytes(16), np.uint8)  # 16 bytes of padding
            code = substrate_code(self.substrate)
            fast = _decode.DecodeTables(token_bytes, entries, symbols, offsets, id_map, code)
            tables = self._decode_state = (token_bytes, entries, symbols, offsets, id_map, special_bytes,
                                           special_offsets, code, fast)
        return tables

    def decode(self, ids: Iterable[int], *, errors: str = "strict") -> str:
        """Text of token ids: expand to base symbols and run the dual-buffer
        decode; a special token flushes both buffers and is written as its text.

        ``ids``: a list, tuple, 1-D integer array or any iterable of ids (ints of
        any kind: int subclasses and numpy ints by value, ``True`` / ``False`` as 1 /
        0).  A list or tuple of exact ints is read in one pass, holding the GIL
        (``_decode.decode_sequence``); anything else becomes a ``uint32`` array first
        and decodes with the GIL released.
        ``errors="strict"`` raises :class:`~ube_stream.errors.SymbolDecodeError`
        naming the token position (``.position``) and base-symbol offset
        (``.offset``) of the first invalid byte sequence, or of an id outside the
        vocabulary; ``"replace"`` writes U+FFFD as Python's codecs do on each buffer.
        """
        return self._decode(ids, errors, as_bytes=False)

    def decode_bytes(self, ids: Iterable[int], *, errors: str = "strict") -> bytes:
        """The UTF-8 bytes of :meth:`decode` (``decode(ids).encode("utf-8")``, without
        the ``str``), for every substrate; ``errors`` as :meth:`decode`."""
        return self._decode(ids, errors, as_bytes=True)

    def _decode(self, ids, errors: str, as_bytes: bool):
        if errors != "strict" and errors != "replace":
            raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
        tables = self.__dict__.get("_decode_state") or self._decode_tables()
        err = err_buffer()
        if isinstance(ids, (list, tuple)):
            # read from the items in one pass; any failure (an item that is not an exact
            # int, an id outside the vocabulary, ids that do not decode) goes the array
            # way below, which names it exactly as for an array
            status, out = _decode.decode_sequence(tables[8], ids, as_bytes, err)
            if status == STATUS_OK:
                return out
        arr = as_id_array(ids, self._outside_vocabulary, what="token ids")
        if arr.size == 0:
            return b"" if as_bytes else ""
        status, out = _decode.decode_tokens(tables[8], arr, as_bytes, err)
        if status == STATUS_OK:
            return out
        if status == STATUS_INVALID_SYMBOLS:  # where: the exact decoder, on the internal ids
            if errors == "replace":
                return self._decode_replace(arr, as_bytes)
            internal = arr if self._inverse_map is None else self._inverse_map[arr].astype(np.uint32)
            status, _ = _decode.decode_exact(internal, tables[2], tables[3], tables[5], tables[6], tables[7], err)
        check_status(status, err, what="decoding tokens", ids=arr, substrate=self.substrate,
                     limit=self.vocab_size)
        raise AssertionError(f"decode kernels disagree on {self.substrate} ids")  # pragma: no cover

    def _outside_vocabulary(self, ids, position: int) -> Exception:
        from ..errors import SymbolDecodeError

        return SymbolDecodeError(f"token id {int(ids[position])} at position {position} is outside the "
                                 f"vocabulary (0..{self.vocab_size - 1})", position=position)

    #: token ids the replace decode expands at a time: its memory is the output
    #: and one slice's base symbols (a few MB), whatever the number of ids
    decode_slice_ids = 1 << 16

    def _decode_replace(self, arr: np.ndarray, as_bytes: bool):
        """Invalid sequences as U+FFFD (model ids ``arr`` -> ``str`` or ``bytes``).

        The ids go ``decode_slice_ids`` at a time: each slice's tokens expand to
        base symbols fed to one :class:`~ube_stream.substrate.ReplaceDecoder`,
        which carries an unfinished character across slice ends (the text is the
        one-pass ``decode_symbols(..., "replace")`` of each run between special
        tokens); a special token flushes it and is written as its text.  The text
        gathers as UTF-8 in one ``bytearray``, decoded once at the end."""
        from ..substrate import ReplaceDecoder

        table, offsets = self._internal_expansion_table()
        n_tokens = len(self._expansions)
        n_internal = n_tokens + len(self._special_internal)
        special_text = {i: t.encode("utf-8") for t, i in self._special_internal.items()}
        decoder = ReplaceDecoder(self.substrate)
        out = bytearray()
        step = max(1, int(self.decode_slice_ids))
        for lo in range(0, arr.size, step):
            piece = arr[lo:lo + step]
            if self._inverse_map is None:
                internal = piece.astype(np.int64)
            else:
                internal = np.full(piece.size, -1, np.int64)
                inside = piece < self._inverse_map.size
                internal[inside] = self._inverse_map[piece[inside]]
            bad = np.flatnonzero((internal < 0) | (internal >= n_internal))
            if bad.size:  # the fast path stopped before it: the same error as strict
                self._raise_bad_id(arr, lo + int(bad[0]))
            cuts = np.flatnonzero(internal >= n_tokens).tolist()
            start = 0
            for stop in cuts + [internal.size]:
                run = internal[start:stop]
                if run.size:
                    lengths = offsets[run + 1] - offsets[run]
                    firsts = np.cumsum(lengths) - lengths
                    positions = (np.arange(int(lengths.sum())) - np.repeat(firsts, lengths)
                                 + np.repeat(offsets[run], lengths))
                    out += decoder.feed(table[positions]).encode("utf-8")
                if stop < internal.size:
                    out += decoder.flush().encode("utf-8")
                    out += special_text[int(internal[stop])]
                start = stop + 1
        out += decoder.flush().encode("utf-8")
        if as_bytes:
            return bytes(out)
        return codecs.utf_8_decode(out, "strict", True)[0]

    def _raise_bad_id(self, arr: np.ndarray, position: int):
        err = err_buffer()
        err[0], err[1] = -1, position
        check_status(STATUS_BAD_ID, err, what="decoding tokens", ids=arr, substrate=self.substrate,
                     limit=self.vocab_size)

    def decode_batch(self, batch: Iterable[Iterable[int]], *, errors: str = "strict") -> List[str]:
        return [self.decode(ids, errors=errors) for ids in batch]

    def decode_bytes_batch(self, batch: Iterable[Iterable[int]], *, errors: str = "strict") -> List[bytes]:
        return [self.decode_bytes(ids, errors=errors) for ids in batch]

    def stream_decoder(self, *, errors: str = "strict") -> "StreamDecoder":
        """A decoder fed one id at a time (``.feed(id) -> str``) that returns only
        complete text; ``"".join(feeds) + .flush() == decode(all ids)``."""
        from .stream_decoder import StreamDecoder

        return StreamDecoder(self, errors=errors)

    # ------------------------------------------------------------------ existing models
    @classmethod
    def from_hf(cls, path: str | os.PathLike) -> "Tokenizer":
        """Load a HF ``tokenizer.json`` (byte-level BPE) as a ``utf8`` tokenizer whose
        ids are the model's ids."""
        from .pretrained import tokenizer_from_hf

        return tokenizer_from_hf(cls, path)

    @classmethod
    def from_tiktoken(cls, ranks, pattern: str = "cl100k",
                      special_tokens: Optional[Mapping[str, int]] = None) -> "Tokenizer":
        """A ``utf8`` tokenizer from tiktoken ranks (``{token bytes: rank}`` or a
        ``.tiktoken`` file), ``pattern`` (name or regex) and ``{text: id}`` special tokens."""
        from .pretrained import tokenizer_from_tiktoken

        return tokenizer_from_tiktoken(cls, ranks, pattern, special_tokens or {})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tokenizer) and self.fingerprint == other.fingerprint

    def __repr__(self) -> str:
        return (f"Tokenizer(substrate={self.substrate!r}, vocab_size={self.vocab_size}, "
                f"merges={len(self.merges)}, special_tokens={list(self.special_tokens)}, pattern={self.pattern_name!r})")


def _check_added(added: Iterable[Mapping[str, Any]], n_tokens: int,
                 specials: Mapping[str, int]) -> Dict[str, Tuple[int, bool]]:
    """``added_tokens`` as text -> (internal id, normalized): each a non-empty text, once, whose
    id is a base or merged token, or the id of the special-token entry of that text."""
    out: Dict[str, Tuple[int, bool]] = {}
    for k, entry in enumerate(added):
        text, token_id, normalized = entry.get("text"), entry.get("id"), entry.get("normalized")
        if not isinstance(text, str) or not text or text in out or type(token_id) is not int \
                or not isinstance(normalized, bool):
            raise ValueError(f"added_tokens[{k}] must be {{'text': a new non-empty str, 'id': int, 'normalized': "
                             f"bool}}, got {dict(entry)!r}")
        if not (0 <= token_id < n_tokens or specials.get(text) == token_id):
            raise ValueError(f"added_tokens[{k}] ({text!r}) has id {token_id}: expected a base or merged token "
                             f"(0..{n_tokens - 1}) or the id of the special_tokens entry of the same text")
        out[text] = (token_id, normalized)
    return out


def _is_tiktoken_text(head: bytes) -> bool:
    """Whether the first line looks like ``base64-token rank``."""
    import re

    first = head.split(b"\n", 1)[0].strip()
    return re.fullmatch(rb"[A-Za-z0-9+/]+={0,2} [0-9]+", first) is not None


def as_tokenizer(source: "Tokenizer | str | os.PathLike[str]", *, pattern: Optional[str] = None,
                 special_tokens: Optional[Mapping[str, int] | Sequence[str]] = None) -> Tokenizer:
    """The one way a path, a name or an object becomes a :class:`Tokenizer`.

    A ``Tokenizer`` is returned as is.  A path is read by its content (never its
    name): an ube-stream tokenizer file; a HF ``tokenizer.json`` (byte-level
    BPE), or a folder holding one (or holding ``ube_tokenizer.json``, as
    :class:`ube_stream.hf.UbeTokenizer` saves); a tiktoken rank file
    (``base64-token rank`` lines, plain or gzipped).  A known encoding name
    (``cl100k_base``, ``o200k_base``) finds its rank file in the ``bpe-openai``
    package or tiktoken's cache.

    ``pattern`` and ``special_tokens`` apply to rank files only (a rank file
    records neither): ``pattern`` a name (``gpt2``, ``cl100k``, ``o200k``) or
    a regex, ``special_tokens`` ``{text: id}`` or texts (ids after the largest
    rank).  A file named like a known encoding (``cl100k_base.tiktoken.gz``)
    defaults to that encoding's pattern and special tokens.
    """
    from . import pretrained

    if isinstance(source, Tokenizer):
        if pattern is not None or special_tokens is not None:
            raise TokenizerOptionError("pattern and special_tokens apply to tiktoken rank files, not to a "
                                       "Tokenizer object", option="pattern" if pattern is not None else
                                       "special_tokens")
        return source
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"expected a Tokenizer or the path of a tokenizer file, got {type(source).__name__}")
    path = storage.local_path(source)
    if not storage.exists(path) and pretrained.known_tiktoken_name(path) == path:
        found = pretrained.find_tiktoken_file(path)
        if found is None:
            raise TokenizerFormatError(
                f"{path}: a known tiktoken encoding, but its rank file is not on this machine (neither the "
                f"bpe-openai package nor tiktoken's cache has it); download "
                f"{pretrained._TIKTOKEN_URL.format(name=path)} and pass its path")
        return _from_ranks(found, pretrained.load_tiktoken_ranks(found), path, pattern, special_tokens)
    if storage.isdir(path):
        for name in ("ube_tokenizer.json", "tokenizer.json"):
            if storage.isfile(storage.join(path, name)):
                return as_tokenizer(storage.join(path, name), pattern=pattern, special_tokens=special_tokens)
        raise TokenizerFormatError(f"{path}: a folder without tokenizer.json or ube_tokenizer.json; pass a "
                                   "tokenizer file, or a HF tokenizer folder")
    if not storage.exists(path):
        file_format.read_text(path)  # raises, with the fix
    with _collector_paused():
        return _from_file(path, pattern, special_tokens)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a tokenizer file is read, as it was after.

    Reading one makes ~10^5 containers that all live on (the JSON document, the
    vocabulary, the merges) and no garbage cycles; the collector traversed them again
    at every threshold: ~10% of the CPU of loading a 32k-token HF ``tokenizer.json``,
    which every ``ube encode`` does before its first batch."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _from_file(path: str, pattern: Optional[str],
               special_tokens: Optional[Mapping[str, int] | Sequence[str]]) -> Tokenizer:
    """:func:`as_tokenizer` of an existing file: its kind is told by its content."""
    from . import pretrained

    data = pretrained.read_maybe_gzip(path)
    if data.lstrip()[:1] == b"{":
        if pattern is not None or special_tokens is not None:
            raise TokenizerOptionError(f"{path}: pattern and special_tokens apply to tiktoken rank files; this "
                                       "JSON tokenizer records its own", option="pattern" if pattern is not None
                                       else "special_tokens")
        try:
            text = data.decode("utf-8")
            head = json.loads(text)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TokenizerFormatError(f"{path}: starts like JSON but is not valid JSON ({exc}); expected a "
                                       "tokenizer file") from None
        except RecursionError:
            raise TokenizerFormatError(f"{path}: JSON nested too deeply to be a tokenizer file") from None
        except ValueError as exc:   # e.g. an integer of more than 4300 digits
            raise TokenizerFormatError(f"{path}: not a readable JSON file ({exc}); expected a tokenizer "
                                       "file") from None
        if isinstance(head, dict) and head.get("format") != file_format.FORMAT_NAME and "model" in head:
            return pretrained.tokenizer_from_hf(Tokenizer, path, doc=head)   # parsed once
        return Tokenizer._from_parsed(file_format.parse_doc(head, source=path), path)   # parsed once
    if _is_tiktoken_text(data[:512]):
        return _from_ranks(path, pretrained.parse_tiktoken_ranks(data, path),
                           pretrained.known_tiktoken_name(path), pattern, special_tokens)
    raise TokenizerFormatError(
        f"{path}: not a tokenizer file: expected an ube-stream tokenizer file (JSON), a HF tokenizer.json (or a "
        f"folder holding one), or a tiktoken rank file ('base64-token rank' lines, plain or gzipped); it "
        f"starts with {data[:40]!r}")


def _from_ranks(path: str, ranks: Dict[bytes, int], known: Optional[str], pattern: Optional[str],
                special_tokens: Optional[Mapping[str, int] | Sequence[str]]) -> Tokenizer:
    from . import pretrained

    default_pattern, default_specials = pretrained.KNOWN_TIKTOKEN.get(known or "", (None, {}))
    pattern = pattern if pattern is not None else default_pattern
    if pattern is None:
        raise TokenizerOptionError(
            f"{path}: a tiktoken rank file does not record its pre-tokenization pattern: pass pattern= (a name: "
            f"gpt2, cl100k, o200k, or the regex), or name the file after a known encoding "
            f"({', '.join(pretrained.KNOWN_TIKTOKEN)})", option="pattern")
    if special_tokens is None:
        specials: Dict[str, int] = dict(default_specials)
    elif isinstance(special_tokens, Mapping):
        specials = {str(t): int(i) for t, i in special_tokens.items()}
    else:
        next_id = max(ranks.values(), default=-1) + 1
        specials = {}
        for text in special_tokens:
            specials[str(text)] = next_id
            next_id += 1
    return pretrained.tokenizer_from_tiktoken(Tokenizer, ranks, pattern, specials, source=path)


def _token_utf8(expansions: Sequence[Tuple[int, ...]], symbols: np.ndarray, offsets: np.ndarray,
                substrate: str, codes: Mapping[str, int]) -> Tuple[List[bytes], np.ndarray]:
    """Each token's bytes for ``_decode.decode_tokens`` and its kind.  The bytes may be
    copied whatever precedes them (its symbols as bytes under ``utf8``; under ``ube``
    / ``utf16`` the UTF-8 of its text, when every UTF-16 run in it is whole
    characters): ``raw`` when they are well-formed UTF-8 on their own, ``partial``
    when they hold part of a character (checked with their neighbours); else
    ``symbols`` (no bytes: decoded from its base symbols)."""
    n_tokens = len(expansions)
    low = (symbols & 0xFF).astype(np.uint8).tobytes()
    kinds = np.full(n_tokens, codes["raw"], dtype=np.uint8)
    bounds = offsets.tolist()
    pieces = [low[bounds[t]:bounds[t + 1]] for t in range(n_tokens)]
    if substrate == "utf8":
        return pieces, _mark_partial(pieces, kinds, codes)
    if substrate == "utf16":
        candidates = range(n_tokens)
    else:  # ube: only tokens with a UTF-16 run change
        high = np.zeros(symbols.size + 1, dtype=np.int64)
        np.cumsum(symbols >= 256, out=high[1:])
        candidates = np.flatnonzero(high[offsets[1:]] > high[offsets[:-1]]).tolist()
    for t in candidates:
        expansion = expansions[t]
        runs, start = [], 0
        for k in range(1, len(expansion) + 1):  # maximal runs of one alphabet
            if k == len(expansion) or (substrate == "ube" and (expansion[k] >= 256) != (expansion[start] >= 256)):
                runs.append(expansion[start:k])
                start = k
        try:
            pieces[t] = b"".join(
                bytes(s & 0xFF for s in run).decode("utf-16-le").encode("utf-8")
                if substrate == "utf16" or run[0] >= 256 else bytes(run) for run in runs)
        except UnicodeDecodeError:  # half a character, or a lone surrogate
            pieces[t] = b""
            kinds[t] = codes["symbols"]
    return pieces, _mark_partial(pieces, kinds, codes)


def _mark_partial(pieces: List[bytes], kinds: np.ndarray, codes: Mapping[str, int]) -> np.ndarray:
    """``partial`` for the ``raw`` pieces that are not well-formed UTF-8 on their own."""
    for t, piece in enumerate(pieces):
        if kinds[t] == codes["raw"] and not piece.isascii():
            try:
                piece.decode("utf-8")
            except UnicodeDecodeError:
                kinds[t] = codes["partial"]
    return kinds
