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

__all__ = ["CLASS_OTHER", "CLASS_LETTER", "CLASS_NUMBER", "CLASS_SPACE", "gpt2_class_table"]

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
