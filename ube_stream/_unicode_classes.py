"""Character classes of the GPT-2 pre-tokenization pattern, as ``regex`` sees them.

The GPT-2 pattern only ever asks three questions of a character: is it
``\\p{L}``, ``\\p{N}`` or ``\\s``?  The answers depend on the Unicode version of
the *installed* ``regex`` module, so instead of shipping a table we probe that
module once and cache the result: the kernel then agrees with
``regex.findall(GPT2_PATTERN, text)`` character for character.
"""
from __future__ import annotations

import functools

import numpy as np
import regex

__all__ = ["CLASS_OTHER", "CLASS_LETTER", "CLASS_NUMBER", "CLASS_SPACE", "gpt2_class_table",
           "tiktoken_class_table"]

# the same codes as cython_src/_types.pxd
CLASS_OTHER = 0
CLASS_LETTER = 1
CLASS_NUMBER = 2
CLASS_SPACE = 3

_CODEPOINTS = 0x110000
_PROBES = ((CLASS_LETTER, r"\p{L}+"), (CLASS_NUMBER, r"\p{N}+"), (CLASS_SPACE, r"\s+"))


@functools.lru_cache(maxsize=None)
def gpt2_class_table() -> np.ndarray:
    """``uint8[0x110000]``: the GPT-2 class of every code point (0 other, 1 ``\\p{L}``,
    2 ``\\p{N}``, 3 ``\\s``; surrogates 0).  Built on first use (~40 ms), read-only."""
    codepoints = np.arange(_CODEPOINTS, dtype=np.uint32)
    scalars = codepoints[(codepoints < 0xD800) | (codepoints > 0xDFFF)]
    text = scalars.astype("<u4").tobytes().decode("utf-32-le")
    table = np.zeros(_CODEPOINTS, dtype=np.uint8)
    for code, probe in _PROBES:
        for match in regex.finditer(probe, text):
            span = scalars[match.start():match.end()]
            if table[span].any():
                raise AssertionError(
                    f"regex {regex.__version__}: code points in {probe!r} also belong to another "
                    f"GPT-2 class (first U+{int(span[table[span] != 0][0]):04X}); the pattern's "
                    "classes are expected to be disjoint")
            table[span] = code
    table.setflags(write=False)
    return table


# --------------------------------------------------------------------------- tiktoken's patterns

# bits of tiktoken_class_table(): the same as TT_* in cython_src/_pretok_tiktoken.pxd
TT_LETTER = 0x01               # \p{L}
TT_NUMBER = 0x02               # \p{N}
TT_SPACE = 0x04                # \s
TT_HEAD = 0x08                 # o200k's [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
TT_TAIL = 0x10                 # o200k's [\p{Ll}\p{Lm}\p{Lo}\p{M}]
TT_CONTRACTION_SHIFT = 5       # bits 5-7: the letter of a contraction it matches case-insensitively
TT_C_SDMT, TT_C_RV, TT_C_L, TT_C_E = 1, 2, 3, 4

# o200k's two classes are unions of general categories: probed one category at a
# time (a class of several properties is their union, and is slower to scan)
_TT_PROBES = ((TT_LETTER, r"\p{L}+"), (TT_NUMBER, r"\p{N}+"), (TT_SPACE, r"\s+"),
              (TT_HEAD | TT_TAIL, r"[\p{Lm}\p{Lo}\p{M}]+"), (TT_HEAD, r"[\p{Lu}\p{Lt}]+"), (TT_TAIL, r"\p{Ll}+"))
# the letters after the apostrophe of (?i:'s|'t|'re|'ve|'m|'ll|'d) (and cl100k's
# '(?i:[sdmt]|ll|ve|re)), probed as the patterns write them, since regex's case
# folding decides (U+017F LATIN SMALL LETTER LONG S matches s; U+212A KELVIN SIGN
# is a k, which no contraction has)
_TT_CONTRACTIONS = ((TT_C_SDMT, (r"(?i:[sdmt])+", r"(?i:s|t|m|d)+")), (TT_C_RV, (r"(?i:[rv])+", r"(?i:r|v)+")),
                    (TT_C_L, (r"(?i:l)+",)), (TT_C_E, (r"(?i:e)+",)))


def _scalar_text():
    codepoints = np.arange(_CODEPOINTS, dtype=np.uint32)
    scalars = codepoints[(codepoints < 0xD800) | (codepoints > 0xDFFF)]
    return scalars, scalars.astype("<u4").tobytes().decode("utf-32-le")


def _probe(text: str, scalars: np.ndarray, probe: str) -> np.ndarray:
    """The code points in the runs ``probe`` matches in the text of all scalar values."""
    spans = [scalars[m.start():m.end()] for m in regex.finditer(probe, text)]
    return np.concatenate(spans) if spans else np.zeros(0, np.uint32)


@functools.lru_cache(maxsize=None)
def tiktoken_class_table() -> np.ndarray:
    """``uint8[0x110000]``: the ``TT_*`` bits of every code point for the cl100k, llama3
    and o200k kernels (``\\p{L}``, ``\\p{N}``, ``\\s``, o200k's two letter classes,
    and in bits 5-7 the contraction letter it matches under ``(?i:)``), probed from
    the installed ``regex``; surrogates 0.  Built on first use (~0.3 s), read-only.

    Checks what the kernels take for granted: ``\\p{L}``, ``\\p{N}`` and ``\\s`` are
    disjoint, every letter is in one of o200k's classes, a code point folds to at
    most one contraction letter, only U+0027 matches ``(?i:')``, and no single code
    point matches two letters of a contraction (no full case folding)."""
    scalars, text = _scalar_text()
    table = np.zeros(_CODEPOINTS, dtype=np.uint8)
    for bit, probe in _TT_PROBES:
        members = _probe(text, scalars, probe)
        if bit in (TT_NUMBER, TT_SPACE) and (table[members] & (TT_LETTER | TT_NUMBER)).any():
            raise AssertionError(f"regex {regex.__version__}: {probe!r} overlaps \\p{{L}} or \\p{{N}}; "
                                 "the kernels expect disjoint classes")
        table[members] |= bit
    letters = (table & TT_LETTER) != 0
    if (letters & ((table & (TT_HEAD | TT_TAIL)) == 0)).any():
        raise AssertionError(f"regex {regex.__version__}: a \\p{{L}} code point is in neither "
                             "[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}] nor [\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]")
    for code, probes in _TT_CONTRACTIONS:
        members = _probe(text, scalars, probes[0])
        for other in probes[1:]:
            if not np.array_equal(members, _probe(text, scalars, other)):
                raise AssertionError(f"regex {regex.__version__}: {probes[0]!r} and {other!r} fold differently")
        if (table[members] >> TT_CONTRACTION_SHIFT).any():
            raise AssertionError(f"regex {regex.__version__}: a code point folds to two contraction letters")
        table[members] |= code << TT_CONTRACTION_SHIFT
    if _probe(text, scalars, r"(?i:')+").tolist() != [0x27]:
        raise AssertionError(f"regex {regex.__version__}: (?i:') matches more than the apostrophe")
    separated = np.zeros(2 * scalars.shape[0], dtype="<u4")
    separated[0::2] = scalars
    if regex.search(r"(?i:ll|ve|re|'[sdmt])", separated.tobytes().decode("utf-32-le")):
        raise AssertionError(f"regex {regex.__version__}: one code point matches two letters of a "
                             "contraction (full case folding); the kernels fold one to one")
    table.setflags(write=False)
    return table
