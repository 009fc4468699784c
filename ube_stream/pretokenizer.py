"""Pre-tokenization: cut text into the chunks that BPE merges never cross.

The default pattern is GPT-2's::

    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+

It runs in a Cython state machine (``ube_stream._pretok``) that gives exactly
the chunks of ``regex.findall(GPT2_PATTERN, text)``, with the character classes
read from the installed ``regex`` module, without a regex engine::

    >>> pretokenize("I'm   here!\\n")
    ['I', "'m", '  ', ' here', '!', '\\n']

Any other pattern (``"cl100k"``, ``"o200k"``, or your own regular expression)
runs through the ``regex`` module.  A custom pattern need not match every
character: each character it leaves unmatched becomes a chunk of its own, and
empty matches are dropped, so the chunks always concatenate back to the input
and no text is ever lost.  (For the built-in patterns this never happens: every
character is matched, and the result equals ``regex.findall``.)

The hot-path entries return chunk *end byte offsets* into UTF-8 data
(:func:`chunk_bounds`, :func:`chunk_bounds_batch`); :func:`pretokenize` returns
strings for humans and tests.
"""
from __future__ import annotations

import functools
from typing import List, Sequence, Tuple, Union

import numpy as np
import regex

from . import _pretok
from ._unicode_classes import gpt2_class_table
from .errors import check_status, err_buffer
from .errors import _invalid_utf8 as _utf8_error  # the regex path's error for invalid UTF-8
from .substrate import as_uint8, utf8_of

__all__ = [
    "GPT2_PATTERN",
    "CL100K_PATTERN",
    "O200K_PATTERN",
    "PATTERNS",
    "pretokenize",
    "chunk_bounds",
    "chunk_bounds_batch",
]

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

# tiktoken's cl100k_base and o200k_base patterns (tiktoken_ext/openai_public.py), as text
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
O200K_PATTERN = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

#: pattern names accepted wherever a ``pattern`` argument is
PATTERNS = {"gpt2": GPT2_PATTERN, "cl100k": CL100K_PATTERN, "o200k": O200K_PATTERN}

BytesLike = Union[bytes, bytearray, memoryview, np.ndarray]


# --------------------------------------------------------------------------- public API

def pretokenize(text: str, pattern: str = "gpt2") -> List[str]:
    """Cut ``text`` into pre-tokenization chunks.

    ``pattern`` is ``"gpt2"`` (default; the Cython kernel), ``"cl100k"``,
    ``"o200k"``, or any regular expression for the ``regex`` module (characters
    it does not match become chunks of their own).  ``"".join(result) == text``
    always holds.

    >>> pretokenize("a\\n\\nb  c")
    ['a', '\\n', '\\n', 'b', ' ', ' c']

    Raises :class:`~ube_stream.errors.InvalidTextError` (offset in characters)
    when ``text`` holds a lone surrogate.
    """
    if not isinstance(text, str):
        raise TypeError(f"pretokenize expects a str, got {type(text).__name__}; "
                        "for UTF-8 bytes use chunk_bounds(data)")
    data = utf8_of(text)
    if _is_gpt2(pattern):
        ends = _gpt2_bounds(np.frombuffer(data, np.uint8))
        if len(data) != len(text):  # not ASCII: byte offsets -> character offsets
            lead_bytes = (np.frombuffer(data, np.uint8) & 0xC0) != 0x80
            ends = np.cumsum(lead_bytes, dtype=np.int64)[ends - 1]
        char_ends = ends.tolist()
    else:
        char_ends = _regex_char_ends(text, _compiled(pattern))
    starts = [0] + char_ends[:-1]
    return [text[start:end] for start, end in zip(starts, char_ends)]


def chunk_bounds(data: BytesLike, pattern: str = "gpt2") -> np.ndarray:
    """End byte offsets (``int64``, exclusive, increasing, the last = ``len(data)``)
    of the chunks of UTF-8 ``data``.  Chunk ``i`` is ``data[ends[i-1]:ends[i]]``.

    Raises :class:`~ube_stream.errors.InvalidTextError` (offset in bytes) when
    ``data`` is not well-formed UTF-8.
    """
    array = as_uint8(data)
    if _is_gpt2(pattern):
        return _gpt2_bounds(array)
    return _regex_byte_ends(array, _compiled(pattern), document=None)


#: time budget of an untrusted custom pattern on one document: base seconds + seconds per character
PATTERN_TIME_BASE = 0.1
PATTERN_TIME_PER_CHAR = 1e-6


class PatternTimeout(ValueError):
    """A custom pattern ran past its time budget on one document (internal:
    the tokenizer turns it into a TokenizerFormatError naming the pattern)."""

    def __init__(self, document: int | None, chars: int, budget: float):
        super().__init__(f"document {document}: {chars} characters, budget {budget:.3g} s")
        self.document, self.chars, self.budget = document, chars, budget


def chunk_bounds_batch(data: BytesLike, doc_offsets: Sequence[int] | np.ndarray,
                       pattern: str = "gpt2", *, time_limit: bool = False) -> Tuple[np.ndarray, np.ndarray]:
    """Chunk many documents concatenated in one UTF-8 buffer.

    Document ``d`` is ``data[doc_offsets[d]:doc_offsets[d + 1]]``.  Returns
    ``(ends, doc_chunk_offsets)``: ``ends`` holds absolute end byte offsets into
    ``data``, and the chunks of document ``d`` are
    ``ends[doc_chunk_offsets[d]:doc_chunk_offsets[d + 1]]``.  Chunks never cross
    document boundaries; an empty document has no chunks.

    Raises :class:`~ube_stream.errors.InvalidTextError` naming the document and
    the byte offset (``offset`` is relative to that document; the error also
    carries ``document``).

    ``time_limit``: run a custom pattern under the ``regex`` module's timeout,
    :data:`PATTERN_TIME_BASE` + :data:`PATTERN_TIME_PER_CHAR` per character
    of each document (for patterns read from files, which may backtrack
    catastrophically); :class:`PatternTimeout` when a document runs past it.
    """
    array = as_uint8(data)
    offsets = np.ascontiguousarray(doc_offsets, dtype=np.int64)
    if offsets.ndim != 1 or offsets.shape[0] < 1:
        raise ValueError("doc_offsets must be a 1-D sequence of ndocs + 1 byte offsets "
                         f"(got shape {offsets.shape})")
    ndocs = offsets.shape[0] - 1
    if _is_gpt2(pattern):
        kernel = _pretok
        ends = np.empty(max(int(offsets[-1] - offsets[0]), 0), dtype=np.int64)
        doc_chunk_offsets = np.zeros(ndocs + 1, dtype=np.int64)
        err = err_buffer()
        status, total = kernel.split_gpt2_batch(array, offsets, gpt2_class_table(), ends,
                                                doc_chunk_offsets, err)
        check_status(status, err, what="pre-tokenization", data=array, offsets=offsets)
        return ends[:total].copy(), doc_chunk_offsets
    compiled = _compiled(pattern)
    _check_offsets(offsets, array.shape[0])
    pieces = []
    doc_chunk_offsets = np.zeros(ndocs + 1, dtype=np.int64)
    for d in range(ndocs):
        start, stop = int(offsets[d]), int(offsets[d + 1])
        doc_ends = _regex_byte_ends(array[start:stop], compiled, document=d, doc_start=start,
                                    time_limit=time_limit) + start
        pieces.append(doc_ends)
        doc_chunk_offsets[d + 1] = doc_chunk_offsets[d] + doc_ends.shape[0]
    ends = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
    return ends, doc_chunk_offsets


def resolve_pattern(pattern: str) -> Tuple[str, str]:
    """``(name, regex)`` of a pattern given by name or as a regular expression.

    Known patterns are recognised by name or by their exact text (so a
    tokenizer file records ``"gpt2"`` even when the regex was passed); any
    other string is ``("custom", pattern)`` after checking that it compiles.
    """
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"pattern must be a name in {sorted(PATTERNS)} or a regular expression, got {pattern!r}")
    if pattern in PATTERNS:
        return pattern, PATTERNS[pattern]
    for name, text in PATTERNS.items():
        if pattern == text:
            return name, text
    try:
        _compiled(pattern)
    except regex.error as exc:
        raise ValueError(f"pattern {pattern!r} is neither a known name ({sorted(PATTERNS)}) nor a valid "
                         f"regular expression: {exc}") from None
    return "custom", pattern


# --------------------------------------------------------------------------- helpers

def _is_gpt2(pattern: str) -> bool:
    return pattern == "gpt2" or pattern == GPT2_PATTERN


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> "regex.Pattern":
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str (a name in {sorted(PATTERNS)} or a regular "
                        f"expression), got {type(pattern).__name__}")
    return regex.compile(PATTERNS.get(pattern, pattern))


def _gpt2_bounds(array: np.ndarray) -> np.ndarray:
    kernel = _pretok
    ends = np.empty(array.shape[0], dtype=np.int64)
    err = err_buffer()
    status, count = kernel.split_gpt2(array, gpt2_class_table(), ends, err)
    check_status(status, err, what="pre-tokenization", data=array)
    return ends[:count].copy() if count * 2 < array.shape[0] else ends[:count]


def _regex_char_ends(text: str, compiled: "regex.Pattern", timeout: float | None = None) -> List[int]:
    """End character offsets of the matches of ``compiled``; unmatched characters
    become one-character chunks and empty matches are dropped."""
    ends: List[int] = []
    previous = 0
    for match in compiled.finditer(text, timeout=timeout):
        start, end = match.span()
        if end == start:
            continue
        if start > previous:
            ends.extend(range(previous + 1, start + 1))
        ends.append(end)
        previous = end
    if previous < len(text):
        ends.extend(range(previous + 1, len(text) + 1))
    return ends


def _regex_byte_ends(array: np.ndarray, compiled: "regex.Pattern", *,
                     document: int | None, doc_start: int = 0, time_limit: bool = False) -> np.ndarray:
    """Chunk end byte offsets of ``array`` (one document) by a ``regex`` pattern;
    ``doc_start`` only places the document in a batch for error messages."""
    try:
        text = array.tobytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _utf8_error(array, exc.start, document=document, doc_start=doc_start) from None
    budget = PATTERN_TIME_BASE + PATTERN_TIME_PER_CHAR * len(text) if time_limit else None
    try:
        char_ends = np.asarray(_regex_char_ends(text, compiled, budget), dtype=np.int64)
    except TimeoutError:
        raise PatternTimeout(document, len(text), budget or 0.0) from None
    if char_ends.shape[0] == 0 or array.shape[0] == len(text):
        return char_ends
    codepoints = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
    utf8_lengths = (1 + (codepoints >= 0x80).astype(np.int64) + (codepoints >= 0x800)
                    + (codepoints >= 0x10000))
    return np.cumsum(utf8_lengths)[char_ends - 1]


def _check_offsets(offsets: np.ndarray, size: int) -> None:
    if offsets[0] < 0 or offsets[-1] > size or np.any(np.diff(offsets) < 0):
        raise ValueError(f"doc_offsets must be non-decreasing byte offsets within data "
                         f"(0..{size}), got {offsets[:8].tolist()}...")
