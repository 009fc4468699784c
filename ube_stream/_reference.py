"""Slow, obvious pure-Python twins of the Cython kernels.

Nothing here is fast and nothing here is used on a hot path: these functions
exist so that parity tests can compare each kernel with code a reader can
check by eye.  They lean on Python's own codecs and on the ``regex`` module.

Routing (``route_symbols``), worked example::

    >>> route_symbols("GPU性能", "ube")
    [71, 80, 85, 295, 352, 509, 384]

``G P U`` are ASCII (UTF-8, ids = byte values); 性 (U+6027) and 能 (U+80FD)
take 3 bytes in UTF-8, so they are written as UTF-16LE bytes ``27 60 FD 80``
shifted by 256.
"""
from __future__ import annotations

from typing import Iterable, List, Sequence

import regex

SUBSTRATES = ("ube", "utf8", "utf16")
UTF16_BASE = 256  # id of UTF-16LE byte b under "ube" is UTF16_BASE + b

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


# --------------------------------------------------------------------------- routing

def route_symbols(text: str, substrate: str = "ube") -> List[int]:
    """Base symbol ids of ``text``: one id per byte of the routed encoding."""
    if substrate not in SUBSTRATES:
        raise ValueError(f"unknown substrate {substrate!r}; expected one of {SUBSTRATES}")
    ids: List[int] = []
    for char in text:
        utf8 = char.encode("utf-8")  # raises UnicodeEncodeError on a lone surrogate
        if substrate == "utf8":
            ids.extend(utf8)
        elif substrate == "utf16":
            ids.extend(char.encode("utf-16-le"))
        elif len(utf8) <= 2:
            ids.extend(utf8)
        else:
            ids.extend(UTF16_BASE + b for b in char.encode("utf-16-le"))
    return ids


def decode_symbols(ids: Iterable[int], substrate: str = "ube", errors: str = "strict") -> str:
    """Inverse of :func:`route_symbols` with the dual-buffer rule for ``ube``.

    Under ``ube`` consecutive ids of one alphabet fill one buffer; an id of the
    other alphabet flushes it (decoding it with Python's UTF-8 or UTF-16LE
    codec) and starts the other buffer.  ``errors`` is passed to the codec.
    Raises ``UnicodeDecodeError`` whose ``start`` is relative to the buffer;
    :func:`decode_symbols_offset` gives the absolute symbol offset.
    """
    text, _ = _decode(list(ids), substrate, errors)
    return text


def decode_symbols_offset(ids: Sequence[int], substrate: str = "ube") -> int:
    """Offset (in symbols) of the first invalid byte sequence, or -1 if valid."""
    _, offset = _decode(list(ids), substrate, "report")
    return offset


def _decode(ids: List[int], substrate: str, errors: str):
    limit = 512 if substrate == "ube" else 256
    for i, sym in enumerate(ids):
        if not 0 <= sym < limit:
            raise ValueError(f"symbol id {sym} at offset {i} is outside 0..{limit - 1}")
    codec_of = {"utf8": "utf-8", "utf16": "utf-16-le"}
    # split into runs of one alphabet: (start offset, codec, bytes)
    runs = []
    start = 0
    for i in range(1, len(ids) + 1):
        if i == len(ids) or (substrate == "ube" and (ids[i] >= 256) != (ids[start] >= 256)):
            if i > start:
                if substrate == "ube":
                    codec = "utf-16-le" if ids[start] >= 256 else "utf-8"
                else:
                    codec = codec_of[substrate]
                runs.append((start, codec, bytes(s & 0xFF for s in ids[start:i])))
            start = i
    parts = []
    for start, codec, data in runs:
        if errors == "report":
            try:
                data.decode(codec)
            except UnicodeDecodeError as exc:
                return "", start + exc.start
            continue
        parts.append(data.decode(codec, errors))
    return "".join(parts), -1


def symbol_string(ids: Iterable[int]) -> str:
    """Human/export form: GPT-2 ``bytes_to_unicode`` for ids < 256,
    ``chr(0xE100 + b)`` for id ``256 + b``."""
    table = bytes_to_unicode()
    return "".join(table[i] if i < 256 else chr(0xE100 + i - 256) for i in ids)


def bytes_to_unicode() -> dict:
    """GPT-2's reversible map from bytes to printable characters (verbatim algorithm)."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
          + list(range(ord("®"), ord("ÿ") + 1)))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


# --------------------------------------------------------------------- pre-tokenization

OTHER, LETTER, NUMBER, SPACE = 0, 1, 2, 3
_LETTER = regex.compile(r"\p{L}")
_NUMBER = regex.compile(r"\p{N}")
_SPACE = regex.compile(r"\s")
_CONTRACTIONS = ("s", "t", "re", "ve", "m", "ll", "d")


def char_class(char: str) -> int:
    """Class of one character as the ``regex`` module sees the GPT-2 pattern's classes."""
    if _LETTER.match(char):
        return LETTER
    if _NUMBER.match(char):
        return NUMBER
    if _SPACE.match(char):
        return SPACE
    return OTHER


def pretokenize_gpt2(text: str) -> List[str]:
    """The GPT-2 pattern written out as a state machine, one rule per alternative.

    1. ``'s|'t|'re|'ve|'m|'ll|'d`` (ASCII apostrophe, lower case);
    2. `` ?\\p{L}+`` / `` ?\\p{N}+`` / `` ?[^\\s\\p{L}\\p{N}]+``: an optional
       U+0020 then a maximal run of one class;
    3. ``\\s+(?!\\S)``: a whitespace run, less its last character when a
       non-space follows (that character starts the next chunk);
    4. ``\\s+``: a single whitespace character followed by a non-space.
    """
    chunks: List[str] = []
    classes = [char_class(c) for c in text]
    i, n = 0, len(text)
    while i < n:
        if text[i] == "'":
            suffix = next((s for s in _CONTRACTIONS if text.startswith(s, i + 1)), None)
            if suffix is not None:
                chunks.append(text[i:i + 1 + len(suffix)])
                i += 1 + len(suffix)
                continue
        start = i
        if text[i] == " " and i + 1 < n and classes[i + 1] != SPACE:
            i += 1  # the optional leading space of rule 2
        cls = classes[i]
        end = i
        while end < n and classes[end] == cls:
            end += 1
        if cls == SPACE and end < n and end - start >= 2:
            end -= 1  # rule 3: leave the last space for the next chunk
        chunks.append(text[start:end])
        i = end
    return chunks


def pretokenize(text: str, pattern: str = GPT2_PATTERN) -> List[str]:
    """Chunks of ``text`` by ``regex.findall`` (the independent truth)."""
    return regex.findall(pattern, text)
