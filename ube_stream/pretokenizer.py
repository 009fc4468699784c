"""Pre-tokenization: cut text into the chunks that BPE merges never cross.

The default pattern is GPT-2's::

    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+

It runs in a Cython state machine (``ube_stream._pretok``) that gives exactly
the chunks of ``regex.findall(GPT2_PATTERN, text)``, with the character classes
read from the installed ``regex`` module, without a regex engine::

    >>> pretokenize("I'm   here!\\n")
    ['I', "'m", '  ', ' here', '!', '\\n']

tiktoken's ``"cl100k"`` and ``"o200k"`` patterns, and ``"llama3"`` (cl100k as
Llama 3 and HF conversions write it), run in state machines of the same kind
(``_pretok_tiktoken.pxd``): whenever a pattern, given by name or as its exact
text, is one of these four, the compiled kernel splits it (:func:`kernel_split`).
Any other regular expression runs through the ``regex`` module.  A custom
pattern need not match every character: each character it leaves unmatched
becomes a chunk of its own, and empty matches are dropped, so the chunks always
concatenate back to the input and no text is ever lost.  (For the built-in patterns this never happens: every
character is matched, and the result equals ``regex.findall``.)

The hot-path entries return chunk *end byte offsets* into UTF-8 data
(:func:`chunk_bounds`, :func:`chunk_bounds_batch`); :func:`pretokenize` returns
strings for humans and tests.
"""
from __future__ import annotations

import functools
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
import regex

from ._kernels import load
from ._unicode_classes import gpt2_class_table, tiktoken_class_table
from .errors import InvalidTextError

__all__ = [
    "GPT2_PATTERN",
    "CL100K_PATTERN",
    "O200K_PATTERN",
    "LLAMA3_PATTERN",
    "PATTERNS",
    "kernel_split",
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

# cl100k as Llama 3's tokenizer.json (and tiktoken before its possessive quantifiers)
# writes it: the same chunks as CL100K_PATTERN except at the end of the text, where
# a whitespace run holding \r or \n is cut after its last one ("\n  " -> "\n", "  ")
LLAMA3_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

#: pattern names accepted wherever a ``pattern`` argument is
PATTERNS = {"gpt2": GPT2_PATTERN, "cl100k": CL100K_PATTERN, "o200k": O200K_PATTERN}
#: names accepted for a pattern that tokenizer files record as "custom" (its regex), as
#: files written before the name existed (e.g. by ``from_hf`` of Llama 3) do
ALIASES = {"llama3": LLAMA3_PATTERN}

# split codes of the compiled kernels (cython_src/_pretok_tiktoken.pxd SPLIT_*)
SPLIT_GPT2, SPLIT_CL100K, SPLIT_LLAMA3, SPLIT_O200K = 0, 1, 2, 3
_KERNEL_SPLITS = {GPT2_PATTERN: SPLIT_GPT2, CL100K_PATTERN: SPLIT_CL100K, LLAMA3_PATTERN: SPLIT_LLAMA3,
                  O200K_PATTERN: SPLIT_O200K}

BytesLike = Union[bytes, bytearray, memoryview, np.ndarray]


# --------------------------------------------------------------------------- public API

def pretokenize(text: str, pattern: str = "gpt2") -> List[str]:
    """Cut ``text`` into pre-tokenization chunks.

    ``pattern`` is ``"gpt2"`` (default), ``"cl100k"``, ``"o200k"``, ``"llama3"``
    (these four, by name or text, in the Cython kernels), or any regular
    expression for the ``regex`` module (characters it does not match become
    chunks of their own).  ``"".join(result) == text`` always holds.

    >>> pretokenize("a\\n\\nb  c")
    ['a', '\\n', '\\n', 'b', ' ', ' c']

    Raises :class:`~ube_stream.errors.InvalidTextError` (offset in characters)
    when ``text`` holds a lone surrogate.
    """
    if not isinstance(text, str):
        raise TypeError(f"pretokenize expects a str, got {type(text).__name__}; "
                        "for UTF-8 bytes use chunk_bounds(data)")
    data = _encode_checked(text)
    split = kernel_split(pattern)
    if split is not None:
        ends = _kernel_bounds(np.frombuffer(data, np.uint8), split)
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
    array = _as_uint8(data)
    split = kernel_split(pattern)
    if split is not None:
        return _kernel_bounds(array, split)
    return _regex_byte_ends(array, _compiled(pattern), document=None)


def chunk_bounds_batch(data: BytesLike, doc_offsets: Sequence[int] | np.ndarray,
                       pattern: str = "gpt2") -> Tuple[np.ndarray, np.ndarray]:
    """Chunk many documents concatenated in one UTF-8 buffer.

    Document ``d`` is ``data[doc_offsets[d]:doc_offsets[d + 1]]``.  Returns
    ``(ends, doc_chunk_offsets)``: ``ends`` holds absolute end byte offsets into
    ``data``, and the chunks of document ``d`` are
    ``ends[doc_chunk_offsets[d]:doc_chunk_offsets[d + 1]]``.  Chunks never cross
    document boundaries; an empty document has no chunks.

    Raises :class:`~ube_stream.errors.InvalidTextError` naming the document and
    the byte offset (``offset`` is relative to that document; the error also
    carries ``document``).
    """
    array = _as_uint8(data)
    offsets = np.ascontiguousarray(doc_offsets, dtype=np.int64)
    if offsets.ndim != 1 or offsets.shape[0] < 1:
        raise ValueError("doc_offsets must be a 1-D sequence of ndocs + 1 byte offsets "
                         f"(got shape {offsets.shape})")
    ndocs = offsets.shape[0] - 1
    split = kernel_split(pattern)
    if split is not None:
        kernel = load("_pretok")
        ends = np.empty(max(int(offsets[-1] - offsets[0]), 0), dtype=np.int64)
        doc_chunk_offsets = np.zeros(ndocs + 1, dtype=np.int64)
        if split == SPLIT_GPT2:
            total = kernel.split_gpt2_batch(array, offsets, gpt2_class_table(), ends, doc_chunk_offsets)
        else:
            total = kernel.split_tiktoken_batch(array, offsets, tiktoken_class_table(), ends,
                                                doc_chunk_offsets, split)
        if total < 0:
            position = -total - 1
            document = int(np.searchsorted(offsets, position, side="right")) - 1
            doc_start = int(offsets[document])
            raise _utf8_error(array[doc_start:], position - doc_start, document=document,
                              doc_start=doc_start)
        return ends[:total].copy(), doc_chunk_offsets
    compiled = _compiled(pattern)
    _check_offsets(offsets, array.shape[0])
    pieces = []
    doc_chunk_offsets = np.zeros(ndocs + 1, dtype=np.int64)
    for d in range(ndocs):
        start, stop = int(offsets[d]), int(offsets[d + 1])
        doc_ends = _regex_byte_ends(array[start:stop], compiled, document=d, doc_start=start) + start
        pieces.append(doc_ends)
        doc_chunk_offsets[d + 1] = doc_chunk_offsets[d] + doc_ends.shape[0]
    ends = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
    return ends, doc_chunk_offsets


def resolve_pattern(pattern: str) -> Tuple[str, str]:
    """``(name, regex)`` of a pattern given by name or as a regular expression.

    Known patterns are recognised by name or by their exact text (so a
    tokenizer file records ``"gpt2"`` even when the regex was passed); an alias
    (``"llama3"``) gives ``("custom", its regex)``; any other string is
    ``("custom", pattern)`` after checking that it compiles.
    """
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"pattern must be a name in {sorted(PATTERNS)} or a regular expression, got {pattern!r}")
    if pattern in PATTERNS:
        return pattern, PATTERNS[pattern]
    if pattern in ALIASES:
        return "custom", ALIASES[pattern]
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

def kernel_split(pattern: str) -> Optional[int]:
    """Split code (``SPLIT_*``) of the compiled kernel that gives exactly
    ``regex.findall`` of ``pattern`` (a name, an alias or a regex), or ``None``:
    the pattern runs through ``regex``.  A regex is recognised by its exact text."""
    if not isinstance(pattern, str):
        return None
    return _KERNEL_SPLITS.get(PATTERNS.get(pattern) or ALIASES.get(pattern) or pattern)


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> "regex.Pattern":
    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str (a name in {sorted(PATTERNS)} or a regular "
                        f"expression), got {type(pattern).__name__}")
    return regex.compile(PATTERNS.get(pattern) or ALIASES.get(pattern) or pattern)


def _as_uint8(data: BytesLike) -> np.ndarray:
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8 or data.ndim != 1:
            raise TypeError(f"data must be a 1-D uint8 array of UTF-8 bytes, got {data.dtype} "
                            f"with shape {data.shape}; use np.frombuffer(buf, np.uint8)")
        return np.ascontiguousarray(data)
    if isinstance(data, (bytes, bytearray, memoryview)):
        view = memoryview(data)
        if not view.c_contiguous:
            view = memoryview(view.tobytes())
        return np.frombuffer(view.cast("B") if view.format != "B" or view.ndim != 1 else view,
                             dtype=np.uint8)
    if isinstance(data, str):
        raise TypeError("chunk_bounds takes UTF-8 bytes, got a str: pass text.encode('utf-8') "
                        "(byte offsets) or call pretokenize(text) (strings)")
    raise TypeError(f"data must be bytes, bytearray, memoryview or a uint8 numpy array, "
                    f"got {type(data).__name__}")


def _kernel_bounds(array: np.ndarray, split: int) -> np.ndarray:
    kernel = load("_pretok")
    ends = np.empty(array.shape[0], dtype=np.int64)
    if split == SPLIT_GPT2:
        count = kernel.split_gpt2(array, gpt2_class_table(), ends)
    else:
        count = kernel.split_tiktoken(array, tiktoken_class_table(), ends, split)
    if count < 0:
        raise _utf8_error(array, -count - 1)
    return ends[:count].copy() if count * 2 < array.shape[0] else ends[:count]


def _encode_checked(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = text[exc.start]
        raise InvalidTextError(
            f"text is not a sequence of Unicode scalar values: lone surrogate U+{ord(char):04X} "
            f"at character offset {exc.start}. It has no UTF-8 form, so it cannot be "
            "pre-tokenized or encoded. Fix the source decoding (e.g. decode with "
            "errors='replace', or do not use errors='surrogateescape'/'surrogatepass'), "
            "or skip such documents (--on-error skip).",
            offset=exc.start, unit="char") from None


def _utf8_error(array: np.ndarray, position: int, *, document: int | None = None,
                doc_start: int = 0) -> InvalidTextError:
    """The error for invalid UTF-8 at ``array[position]``, where ``array`` is one
    document starting at byte ``doc_start`` of a batch (``document`` its index)."""
    shown = bytes(array[position:position + 4])
    where = f"byte offset {position}"
    if document is not None:
        where = f"document {document}, {where} (byte {position + doc_start} of the batch)"
    return InvalidTextError(
        f"invalid UTF-8 at {where}: bytes {shown!r} do not start a well-formed "
        "UTF-8 sequence. Decode the source with the right encoding, repair it with "
        "errors='replace', or skip such documents (--on-error skip).",
        offset=position, unit="byte", document=document)


def _regex_char_ends(text: str, compiled: "regex.Pattern") -> List[int]:
    """End character offsets of the matches of ``compiled``; unmatched characters
    become one-character chunks and empty matches are dropped."""
    ends: List[int] = []
    previous = 0
    for match in compiled.finditer(text):
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
                     document: int | None, doc_start: int = 0) -> np.ndarray:
    """Chunk end byte offsets of ``array`` (one document) by a ``regex`` pattern;
    ``doc_start`` only places the document in a batch for error messages."""
    try:
        text = array.tobytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _utf8_error(array, exc.start, document=document, doc_start=doc_start) from None
    char_ends = np.asarray(_regex_char_ends(text, compiled), dtype=np.int64)
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
