"""Added tokens that are not special: cut out of the text before pre-tokenization, as HF does.

A HF ``tokenizer.json`` may list ``added_tokens`` with ``"special": false`` (GPT-NeoX /
Pythia's runs of 2 to 24 spaces, OLMo's ``|||EMAIL_ADDRESS|||``).  HF ``tokenizers``
finds them in every text, whatever the caller allows, in two passes:

1. the tokens with ``"normalized": false`` are found in the text as written;
2. every stretch between them is normalised (``NFC``), then the tokens with
   ``"normalized": true`` are found in the normalised stretches.

Each pass takes the leftmost match, the longest one at that position (Aho-Corasick,
leftmost-longest); a match becomes its token's id, and each stretch between matches is
pre-tokenized and encoded on its own.  So ``"x" + 5 spaces + "y"`` is ``x``, the
5-space token, ``y`` under Pythia's file, where GPT-2's regex alone gives ``x``, 4
spaces, `` y``.

:class:`AddedTokens` runs both passes over UTF-8 documents (``data`` + ``offsets``): it
cuts each document into *pieces* (stretches of text, and added-token matches), has the
caller encode the pieces as documents, and puts every document back together, with
each match's pieces replaced by its one id.  A batch without a match costs one regex
scan of its bytes.  ``Tokenizer.encode_batch`` runs pass 1 on ``str`` texts (with the
allowed special tokens, as HF matches both at once) and this module's pass 2.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

__all__ = ["AddedTokens", "literal_pattern"]

#: ``(data, offsets) -> (ids, token_offsets)``: encode documents (here: pieces) as plain text
EncodeDocs = Callable[[np.ndarray, np.ndarray], Tuple[np.ndarray, np.ndarray]]
#: ``(data, offsets) -> (data, offsets)``: normalise every document (here: piece)
NormalizeDocs = Callable[[np.ndarray, np.ndarray], Tuple[np.ndarray, np.ndarray]]


def literal_pattern(texts, as_bytes: bool = False) -> "re.Pattern":
    """A regex whose matches are the leftmost-longest occurrences of the literal ``texts``
    (HF's Aho-Corasick rule, and tiktoken's for special tokens), over ``str`` or, with
    ``as_bytes``, UTF-8 ``bytes``.

    It is the texts' trie: at each character one alternative per next character, and an
    optional (greedy) group after every node where a text ends, so the engine follows the
    text as far as a token goes and backs off to the last token end.  An alternation of
    the texts, longest first, matches the same but tries every text at every position
    (GPT-NeoX's 23 runs of spaces: 23 tries at every space of a text)."""
    words = [t.encode("utf-8") for t in texts] if as_bytes else list(texts)
    end = object()
    trie: dict = {}
    for word in words:
        node = trie
        for i in range(len(word)):
            node = node.setdefault(word[i:i + 1], {})
        node[end] = True
    join: Callable[[list], Any] = (lambda parts: b"".join(parts)) if as_bytes else (lambda parts: "".join(parts))
    piece: Callable[[str], Any] = (lambda text: text.encode()) if as_bytes else (lambda text: text)

    def build(node: dict) -> Any:
        alternatives = []
        for char in sorted(k for k in node if k is not end):
            run, child = [char], node[char]
            while end not in child and len(child) == 1:   # a chain without a token end: one literal
                (char, child), = child.items()
                run.append(char)
            alternatives.append(re.escape(join(run)) + build(child))
        if not alternatives:
            return piece("")
        body = alternatives[0] if len(alternatives) == 1 else piece("(?:") + piece("|").join(alternatives) + piece(")")
        return piece("(?:") + body + piece(")?") if end in node else body

    return re.compile(build(trie))


class AddedTokens:
    """The non-special added tokens of a tokenizer: ``{text: (model id, normalized)}``."""

    def __init__(self, tokens: Mapping[str, Tuple[int, bool]]):
        self.raw: Dict[bytes, int] = {t.encode("utf-8"): i for t, (i, n) in tokens.items() if not n}
        self.normalized: Dict[bytes, int] = {t.encode("utf-8"): i for t, (i, n) in tokens.items() if n}
        self._raw_pattern = _grouped([t.decode() for t in self.raw])
        self._normalized_pattern = _grouped([t.decode() for t in self.normalized])

    def encode(self, data: np.ndarray, offsets: np.ndarray, encode: EncodeDocs, *,
               normalize: Optional[NormalizeDocs], raw_pass: bool = True, bos: int = -1,
               eos: int = -1) -> Tuple[np.ndarray, np.ndarray]:
        """``(ids, token_offsets)`` of the documents ``data[offsets[d]:offsets[d + 1]]``:
        pass 1 (when ``raw_pass``), ``normalize`` of every stretch (None: already
        normalised), pass 2; the pieces go through ``encode`` as documents; ``bos`` /
        ``eos`` (>= 0) around every document."""
        ndocs = offsets.shape[0] - 1
        doc = np.arange(ndocs, dtype=np.int64)
        kind = np.full(ndocs, -1, dtype=np.int64)   # -1: a stretch of text; else the added token's id
        if raw_pass and self._raw_pattern is not None:
            offsets, doc, kind = _cut(data, offsets, doc, kind, self._raw_pattern, self.raw)
        if normalize is not None:
            data, offsets = normalize(data, offsets)  # piece by piece: a match's bytes are not read again
        if self._normalized_pattern is not None:
            offsets, doc, kind = _cut(data, offsets, doc, kind, self._normalized_pattern, self.normalized)
        if offsets.shape[0] > 1:
            ids, piece_tokens = encode(data, offsets)
        else:
            ids, piece_tokens = np.zeros(0, np.uint32), np.zeros(1, np.int64)
        return _assemble(ids, piece_tokens, doc, kind, ndocs, bos, eos)


def _grouped(texts: List[str]) -> Optional["re.Pattern"]:
    """:func:`literal_pattern` over UTF-8 as one group (for ``split``), None for no texts."""
    return re.compile(b"(" + literal_pattern(texts, as_bytes=True).pattern + b")") if texts else None


def _matches(data: np.ndarray, lo: int, hi: int, pattern: "re.Pattern",
             table: Mapping[bytes, int]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(starts, ends, ids)`` of the matches in ``data[lo:hi]`` (absolute positions).
    ``pattern`` holds one group (the match): ``split`` gives text, match, text, ... in one
    C-level pass (no Python step per match)."""
    parts = pattern.split(data[lo:hi].data)       # the bytes in place (a memoryview)
    bounds = lo + np.cumsum(np.fromiter(map(len, parts), np.int64, len(parts)))
    ids = np.fromiter(map(table.__getitem__, parts[1::2]), np.int64, len(parts) // 2)
    return bounds[0:-1:2], bounds[1::2], ids


def _cut(data: np.ndarray, offsets: np.ndarray, doc: np.ndarray, kind: np.ndarray, pattern: "re.Pattern",
         table: Mapping[bytes, int]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pieces of stretches of text cut at every match of ``pattern`` in that stretch.

    One scan of the whole buffer finds the matches.  A match inside one stretch is the
    match a scan of that stretch alone finds, unless a match crossed into the stretch
    (the scan then entered it late) or crosses out of it (the longest text at a
    position ran past its end): those stretches are scanned again on their own."""
    lo, hi = int(offsets[0]), int(offsets[-1])
    start_arr, end_arr, id_arr = _matches(data, lo, hi, pattern, table)
    if not start_arr.size:
        return offsets, doc, kind
    first = np.searchsorted(offsets, start_arr, side="right") - 1
    last = np.searchsorted(offsets, end_arr - 1, side="right") - 1
    crossing = first != last
    rescan = np.zeros(kind.shape[0], dtype=bool)
    for a, b in zip(first[crossing].tolist(), last[crossing].tolist()):
        rescan[a:b + 1] = True
    keep = ~crossing & (kind[first] < 0) & ~rescan[first]
    start_arr, end_arr, id_arr, piece = start_arr[keep], end_arr[keep], id_arr[keep], first[keep]
    again = np.flatnonzero(rescan & (kind < 0)).tolist()
    if again:
        extra = [(_matches(data, int(offsets[p]), int(offsets[p + 1]), pattern, table), p) for p in again]
        start_arr = np.concatenate([start_arr] + [m[0] for m, _ in extra])
        end_arr = np.concatenate([end_arr] + [m[1] for m, _ in extra])
        id_arr = np.concatenate([id_arr] + [m[2] for m, _ in extra])
        piece = np.concatenate([piece] + [np.full(m[0].size, p, np.int64) for m, p in extra])
    if start_arr.size == 0:
        return offsets, doc, kind
    # the new pieces start at every match end (text again), every old piece start (its
    # kind) and every match start (the token); at one position, in that order
    npieces = kind.shape[0]
    position = np.concatenate([offsets[:-1], start_arr, end_arr])
    order_key = np.concatenate([np.ones(npieces, np.int64), np.full(start_arr.size, 2, np.int64),
                                np.zeros(end_arr.size, np.int64)])
    new_kind = np.concatenate([kind, id_arr, np.full(end_arr.size, -1, np.int64)])
    new_doc = np.concatenate([doc, doc[piece], doc[piece]])
    order = np.argsort(position * 3 + order_key, kind="stable")   # by position, then that order
    position, new_kind, new_doc = position[order], new_kind[order], new_doc[order]
    bounds = np.append(position, hi)
    nonempty = np.diff(bounds) > 0            # empty pieces hold no tokens: dropped
    new_offsets = np.append(position[nonempty], hi)
    return new_offsets, new_doc[nonempty], new_kind[nonempty]


def _assemble(ids: np.ndarray, piece_tokens: np.ndarray, doc: np.ndarray, kind: np.ndarray, ndocs: int,
              bos: int, eos: int) -> Tuple[np.ndarray, np.ndarray]:
    """Each document's ids: its pieces' ids in order, a match's ids replaced by its token's id,
    ``bos`` / ``eos`` around it."""
    lengths = np.diff(piece_tokens)
    added = kind >= 0
    out_lengths = np.where(added, 1, lengths)
    body = np.empty(int(out_lengths.sum()), dtype=np.uint32)
    slots = np.zeros(body.shape[0], dtype=bool)
    slots[(np.cumsum(out_lengths) - out_lengths)[added]] = True
    body[slots] = kind[added]
    body[~slots] = ids[np.repeat(~added, lengths)]
    marks = int(bos >= 0) + int(eos >= 0)
    per_doc = np.bincount(doc, weights=out_lengths, minlength=ndocs).astype(np.int64) + marks
    token_offsets = np.zeros(ndocs + 1, dtype=np.int64)
    np.cumsum(per_doc, out=token_offsets[1:])
    if not marks:
        return body, token_offsets
    out = np.empty(int(token_offsets[-1]), dtype=np.uint32)
    is_mark = np.zeros(out.shape[0], dtype=bool)
    if bos >= 0:
        out[token_offsets[:-1]] = bos
        is_mark[token_offsets[:-1]] = True
    if eos >= 0:
        out[token_offsets[1:] - 1] = eos
        is_mark[token_offsets[1:] - 1] = True
    out[~is_mark] = body
    return out, token_offsets
