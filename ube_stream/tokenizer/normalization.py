"""Text normalization of a tokenizer: ``"none"`` (text as is) or ``"nfc"``.

``"nfc"`` is what HF ``tokenizers`` does for a ``normalizer`` of type ``NFC``
(Qwen2/2.5/3, GPT-NeoX/Pythia): Unicode NFC of the whole text (of every
stretch between special tokens) before pre-tokenization.  It is Python's
``unicodedata.normalize("NFC", ...)`` (Unicode ``unicodedata.unidata_version``).
Decoding does not undo it.

Every encode path goes through :func:`normalize_texts` (``str``) or
:func:`normalize_utf8` (a UTF-8 buffer with offsets).  Both cost one check in
the common case: a text below U+0300 is NFC (every character there has
canonical combining class 0 and NFC quick-check Yes), and
``unicodedata.is_normalized`` answers for the others without building a copy.
"""
from __future__ import annotations

import unicodedata
from typing import List, Tuple

import numpy as np

__all__ = ["NORMALIZATIONS", "check_normalization", "normalize_text", "normalize_texts", "normalize_utf8"]

#: the normalizations a tokenizer may have
NORMALIZATIONS = ("none", "nfc")

#: the first UTF-8 lead byte of a character at or above U+0300 (the first one NFC may change)
_FIRST_NFC_LEAD = 0xCC


def check_normalization(normalization: object) -> str:
    """``normalization`` when it is one of :data:`NORMALIZATIONS`, else ValueError with the choices."""
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"normalization {normalization!r} is not supported; expected one of "
                         f"{list(NORMALIZATIONS)} ('none' keeps text as is, 'nfc' is Unicode NFC as HF's "
                         "NFC normalizer)")
    return str(normalization)


def normalize_text(normalization: str, text: str) -> str:
    """``text`` normalised (returned as is when it already is, or when it is not a ``str``:
    the encoder names the bad type)."""
    if normalization == "none" or not isinstance(text, str) or unicodedata.is_normalized("NFC", text):
        return text
    return unicodedata.normalize("NFC", text)


def normalize_texts(normalization: str, texts: List[str]) -> List[str]:
    """:func:`normalize_text` of every text (``texts`` itself when none changes)."""
    if normalization == "none":
        return texts
    out = [normalize_text(normalization, text) for text in texts]
    return texts if all(a is b for a, b in zip(out, texts)) else out


def normalize_utf8(normalization: str, data: np.ndarray, offsets: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Documents ``data[offsets[d]:offsets[d + 1]]`` (UTF-8) normalised: ``(data, offsets)``
    themselves when every document already is (one pass over the bytes when all
    characters lie below U+0300), else a new buffer holding every document, the
    normalised ones changed.  A document that is not valid UTF-8 is left as is
    (the encoder names it)."""
    if normalization == "none" or offsets.shape[0] < 2:
        return data, offsets
    lo, hi = int(offsets[0]), int(offsets[-1])
    if hi <= lo:
        return data, offsets
    text = data[lo:hi]
    if int(text.max()) < _FIRST_NFC_LEAD:
        return data, offsets
    # the documents holding a character at or above U+0300: the largest byte of each (an
    # empty document has none; reduceat over the others' starts spans each one exactly)
    nonempty = np.flatnonzero(np.diff(offsets) > 0)
    largest = np.maximum.reduceat(text, offsets[nonempty] - lo)
    candidates = nonempty[largest >= _FIRST_NFC_LEAD].tolist()
    changed = {}
    for d in candidates:
        raw = data[int(offsets[d]):int(offsets[d + 1])].tobytes()
        try:
            document = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if not unicodedata.is_normalized("NFC", document):
            changed[d] = unicodedata.normalize("NFC", document).encode("utf-8")
    if not changed:
        return data, offsets
    return _rebuild(data, offsets, changed)


def _rebuild(data: np.ndarray, offsets: np.ndarray, changed: dict) -> Tuple[np.ndarray, np.ndarray]:
    """A buffer of every document, ``changed[d]`` in place of document ``d``."""
    bounds = offsets.tolist()
    pieces: List[bytes] = []
    start = bounds[0]
    for d in sorted(changed):   # the untouched runs between changed documents go as one piece each
        pieces.append(data[start:bounds[d]].tobytes())
        pieces.append(changed[d])
        start = bounds[d + 1]
    pieces.append(data[start:bounds[-1]].tobytes())
    lengths = np.diff(offsets)
    for d, text in changed.items():
        lengths[d] = len(text)
    new_offsets = np.zeros(len(bounds), dtype=np.int64)
    np.cumsum(lengths, out=new_offsets[1:])
    return np.frombuffer(b"".join(pieces), np.uint8), new_offsets

