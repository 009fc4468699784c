"""Incremental decoding: feed token ids one at a time, get back only complete text.

A character may be split across tokens: its UTF-8 bytes (``utf8``, and the
1-2 byte characters of ``ube``) or its UTF-16LE bytes (``utf16``, and the
``ube`` characters of 3-4 UTF-8 bytes), including the two halves of a
surrogate pair.  The decoder holds such an unfinished tail back and returns it
once a later token completes it.  Under ``ube`` a switch of alphabet ends the
buffer (the dual-buffer rule), so the held tail is decoded then; a special
token flushes too.  Invariant, for every way of cutting a sequence of ids::

    "".join(d.feed(i) for i in ids) + d.flush() == tokenizer.decode(ids)

Why a cut is safe: a UTF-8 buffer is cut only before a byte that is not a
continuation byte (Python's decoder never lets such a byte join what precedes
it); a UTF-16LE buffer only at a code-unit boundary that does not follow a
high surrogate.
"""
from __future__ import annotations

from typing import List

from ..errors import SymbolDecodeError


def _utf8_need(lead: int) -> int:
    """Length of the UTF-8 sequence a lead byte starts (1 for a byte that cannot start one)."""
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 1


class StreamDecoder:
    """Made by :meth:`Tokenizer.stream_decoder`; see the module docstring."""

    def __init__(self, tokenizer, *, errors: str = "strict"):
        if errors not in ("strict", "replace"):
            raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
        self._tok = tokenizer
        self._errors = errors
        self._substrate = tokenizer.substrate
        self._special_text = {i: t for t, i in tokenizer._special_internal.items()}
        self._pending: List[int] = []   # base symbols of one alphabet not yet returned
        self._position = 0              # tokens fed so far

    def feed(self, token_id: int) -> str:
        """Text completed by this token (possibly empty)."""
        internal = self._tok._internal_id(token_id)
        position = self._position
        self._position += 1
        if internal < 0:
            raise ValueError(f"token id {token_id} at position {position} is outside the vocabulary "
                             f"(0..{self._tok.vocab_size - 1})")
        if internal in self._special_text:
            return self._decode_pending(len(self._pending), position) + self._special_text[internal]
        out = []
        pending = self._pending
        ube = self._substrate == "ube"
        for symbol in self._tok._expansions[internal]:
            if ube and pending and (symbol >= 256) != (pending[0] >= 256):
                out.append(self._decode_pending(len(pending), position))  # alphabet switch: flush
            pending.append(symbol)
        out.append(self._decode_pending(self._safe_cut(), position))
        return "".join(out)

    def flush(self) -> str:
        """Everything still held (an unfinished tail decodes as an error: U+FFFD or raise)."""
        return self._decode_pending(len(self._pending), self._position)

    # ------------------------------------------------------------------ helpers
    def _safe_cut(self) -> int:
        """Length of the longest prefix of the pending symbols whose text is final."""
        pending = self._pending
        n = len(pending)
        if n == 0:
            return 0
        utf16 = self._substrate == "utf16" or pending[0] >= 256
        if utf16:
            cut = n - (n % 2)
            if cut >= 2 and 0xD8 <= (pending[cut - 1] & 0xFF) <= 0xDB:
                cut -= 2  # a high surrogate waits for its low half
            return cut
        start = n - 1
        while start >= 0 and (pending[start] & 0xC0) == 0x80:
            start -= 1
        if start < 0:
            return n  # only stray continuation bytes: errors whatever follows
        return n if n - start >= _utf8_need(pending[start]) else start

    def _decode_pending(self, count: int, position: int) -> str:
        if count == 0:
            return ""
        from ..substrate import decode_symbols

        symbols = self._pending[:count]
        del self._pending[:count]
        try:
            return decode_symbols(symbols, self._substrate, self._errors)
        except SymbolDecodeError as exc:
            raise SymbolDecodeError(f"stream decode failed at token position {position}: {exc}",
                                    offset=exc.offset, position=position) from None
