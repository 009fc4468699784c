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
``"script"`` is Land & Arnett's SCRIPT split at Unicode script and category
boundaries (``_pretok_script.pxd``; no regex).  Any other regular expression
must be marked ``"regex:EXPR"`` (an unmarked unknown string is an error listing
the names, :func:`resolve_pattern`) and runs through the ``regex`` module.  A custom
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
import hashlib
import importlib.util
import os
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _pretok
from .errors import _invalid_utf8 as _utf8_error  # the regex path's error for invalid UTF-8
from .errors import check_status, err_buffer
from .substrate import as_uint8, utf8_of

if TYPE_CHECKING:
    import regex

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
    "SPAN_RULES",
    "check_span_rule",
    "span_class_table",
    "span_ends",
    "span_keys",
    "superword_spans",
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

#: regex patterns by name (compiled kernels split them: :func:`kernel_split`)
PATTERNS = {"gpt2": GPT2_PATTERN, "cl100k": CL100K_PATTERN, "o200k": O200K_PATTERN}
#: names accepted for a pattern that tokenizer files record as "custom" (its regex), as
#: files written before the name existed (e.g. by ``from_hf`` of Llama 3) do
ALIASES = {"llama3": LLAMA3_PATTERN}
#: rule-based splitters that no regex writes: ``"script"`` (Land & Arnett's SCRIPT
#: pre-tokenization, ``cython_src/_pretok_script.pxd``); ``Tokenizer.pattern`` holds the name
RULE_PATTERNS = ("script",)
#: every name a ``pattern`` argument accepts
PATTERN_NAMES = (*PATTERNS, *ALIASES, *RULE_PATTERNS)
#: the prefix that marks a custom regular expression (``"regex:\\w+|\\s"``)
REGEX_PREFIX = "regex:"

# split codes of the compiled kernels (cython_src/_pretok_tiktoken.pxd SPLIT_*, _pretok_script.pxd)
SPLIT_GPT2, SPLIT_CL100K, SPLIT_LLAMA3, SPLIT_O200K, SPLIT_SCRIPT = 0, 1, 2, 3, 4
_KERNEL_SPLITS = {GPT2_PATTERN: SPLIT_GPT2, CL100K_PATTERN: SPLIT_CL100K, LLAMA3_PATTERN: SPLIT_LLAMA3,
                  O200K_PATTERN: SPLIT_O200K, "script": SPLIT_SCRIPT}
#: the splits the encoder runs inline (``_encode.Encoder(split=...)``); the others hand it chunk ends
ENCODER_SPLITS = (SPLIT_GPT2, SPLIT_CL100K, SPLIT_LLAMA3, SPLIT_O200K)

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
    split = kernel_split(pattern)
    if split is not None:
        err = err_buffer()
        try:
            status, chunks = _pretok.split_text(text, _class_table(split), split, err)
        except UnicodeEncodeError:
            utf8_of(text)  # raises the InvalidTextError naming the lone surrogate
            raise
        check_status(status, err, what="pre-tokenization")
        assert chunks is not None  # STATUS_OK (check_status raised otherwise) carries the result
        return chunks
    utf8_of(text)  # a lone surrogate is an InvalidTextError on every path
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
    split = kernel_split(pattern)
    if split is not None:
        return _kernel_bounds(array, split)
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
    split = kernel_split(pattern)
    if split is not None:
        ends = np.empty(max(int(offsets[-1] - offsets[0]), 0), dtype=np.int64)
        doc_chunk_offsets = np.zeros(ndocs + 1, dtype=np.int64)
        err = err_buffer()
        status, total = _pretok.split_batch(array, offsets, _class_table(split), ends, doc_chunk_offsets,
                                            split, err)
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
    """``(name, text)`` of a pattern: a name, a marked custom regex, or the exact text
    of a known pattern.

    * a name in :data:`PATTERNS` gives ``(name, its regex)``; an alias
      (``"llama3"``) gives ``("custom", its regex)``; ``"script"`` gives
      ``("script", "script")`` (a rule-based split: no regex);
    * ``"regex:EXPR"`` is the custom regular expression ``EXPR``: ``("custom",
      EXPR)`` after checking that it compiles, or the known name when ``EXPR``
      is exactly a known pattern's text (so a tokenizer file records ``"gpt2"``);
    * the unmarked exact text of a known pattern is that pattern (what
      ``Tokenizer.pattern`` holds reads back);
    * anything else is a :class:`ValueError` listing the known names: an
      unmarked string is never taken for a regex (``"script"`` mistyped as
      ``"scirpt"`` must not train the regex ``scirpt``).
    """
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"pattern must be one of the names {list(PATTERN_NAMES)} or a custom regular expression "
                         f"marked {REGEX_PREFIX!r} (e.g. 'regex:\\w+|\\s+'), got {pattern!r}")
    return _resolved(pattern)


@functools.lru_cache(maxsize=256)
def _resolved(pattern: str) -> Tuple[str, str]:
    if pattern in PATTERNS:
        return pattern, PATTERNS[pattern]
    if pattern in ALIASES:
        return "custom", ALIASES[pattern]
    if pattern in RULE_PATTERNS:
        return pattern, pattern
    marked = pattern.startswith(REGEX_PREFIX)
    text = pattern[len(REGEX_PREFIX):] if marked else pattern
    for name, known in PATTERNS.items():
        if text == known:
            return name, known
    if text in ALIASES.values():
        return "custom", text
    if not marked:
        raise ValueError(f"unknown pattern {pattern!r}: expected one of the names {list(PATTERN_NAMES)}, or a "
                         f"custom regular expression marked {REGEX_PREFIX!r} (e.g. {REGEX_PREFIX + pattern!r})")
    if not text:
        raise ValueError(f"pattern {pattern!r}: the custom regular expression after {REGEX_PREFIX!r} is empty")
    import regex

    try:
        regex.compile(text)
    except regex.error as exc:
        raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None
    return "custom", text


def pattern_spec(name: str, text: str) -> str:
    """The ``pattern`` argument that resolves to ``(name, text)`` (the inverse of
    :func:`resolve_pattern`): the name, or ``"regex:" + text`` for a custom regex."""
    return REGEX_PREFIX + text if name == "custom" else name


# --------------------------------------------------------------------------- helpers

def kernel_split(pattern: str) -> Optional[int]:
    """Split code (``SPLIT_*``) of the compiled kernel that splits ``pattern`` (as
    :func:`resolve_pattern` reads it), or ``None``: the pattern runs through
    ``regex``.  A custom regex is recognised by its exact text."""
    if not isinstance(pattern, str) or not pattern:
        return None
    try:
        return _KERNEL_SPLITS.get(_resolved(pattern)[1])
    except ValueError:
        return None


def encoder_split(pattern: str) -> Optional[int]:
    """:func:`kernel_split` when the encoder runs that split inline (:data:`ENCODER_SPLITS`),
    else ``None``: the encoder takes chunk ends from :func:`chunk_bounds_batch`."""
    split = kernel_split(pattern)
    return split if split in ENCODER_SPLITS else None


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> "regex.Pattern":
    import regex

    if not isinstance(pattern, str):
        raise TypeError(f"pattern must be a str (one of the names {list(PATTERN_NAMES)} or a custom regular "
                        f"expression marked {REGEX_PREFIX!r}), got {type(pattern).__name__}")
    name, text = resolve_pattern(pattern)
    if name in RULE_PATTERNS:
        raise ValueError(f"pattern {name!r} is a rule-based split with no regular expression")
    return regex.compile(text)


def _class_table(split: int) -> np.ndarray:
    """The class table the kernel of split code ``split`` reads, as bytes (SCRIPT's
    entries are uint16: its table is passed as their bytes)."""
    if split == SPLIT_GPT2:
        return gpt2_class_table()
    if split == SPLIT_SCRIPT:
        return script_class_table().view(np.uint8)
    return tiktoken_class_table()


def _kernel_bounds(array: np.ndarray, split: int) -> np.ndarray:
    ends = np.empty(array.shape[0], dtype=np.int64)
    err = err_buffer()
    status, count = _pretok.split(array, _class_table(split), ends, split, err)
    check_status(status, err, what="pre-tokenization", data=array)
    assert count is not None  # STATUS_OK (check_status raised otherwise) carries the result
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


# --------------------------------------------------------------------------- character classes
# The kernels' class tables, probed from the *installed* regex module (its Unicode version),
# so the compiled splitters agree with regex.findall character for character.

# the same codes as cython_src/_types.pxd
CLASS_OTHER = 0
CLASS_LETTER = 1
CLASS_NUMBER = 2
CLASS_SPACE = 3

_CODEPOINTS = 0x110000
_PROBES = ((CLASS_LETTER, r"\p{L}+"), (CLASS_NUMBER, r"\p{N}+"), (CLASS_SPACE, r"\s+"))


# A class table is a pure function of the installed regex module and of this file's
# probes: built once (~40-70 ms of probing, plus ~40 ms to import regex), it is kept in
# ube-stream's cache directory (storage.cache_root()) under a key of both, so a process
# that splits with a compiled pattern loads 1.1 MB and never imports regex.  The file is
# the table followed by the sha256 of the table (_TABLE_DIGEST bytes): a table whose
# bytes do not hash to it (a flipped bit, a torn or foreign file) is never used, it is
# built again and rewritten, so a damaged cache cannot change what encode() returns.
_TABLE_DIGEST = 32


def _table_cache_path(name: str) -> Optional[str]:
    """Where the table ``name`` of this regex module and this file is kept
    (``storage.cache_root()``), or None (no regex module found: then the build
    raises its own error)."""
    from .storage import cache_root

    root = cache_root()
    spec = importlib.util.find_spec("regex")   # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    key = hashlib.sha256(name.encode())
    for path in (os.path.abspath(__file__), *sorted(
            os.path.join(folder, entry) for folder in spec.submodule_search_locations
            for entry in os.listdir(folder) if entry.endswith((".so", ".pyd", ".py")))):
        info = os.stat(path)
        key.update(f"{path}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    return os.path.join(root, f"classes-{name}-{key.hexdigest()[:24]}.u8")


def _read_cached_table(path: str) -> Optional[np.ndarray]:
    """The table kept at ``path`` when the file is whole and its bytes hash to the
    sha256 stored after them; None otherwise (missing, torn, damaged, unreadable)."""
    from .storage import read_bounded

    try:
        data = read_bounded(path, what="class table", error=ValueError, max_bytes=_CODEPOINTS + _TABLE_DIGEST)
    except (OSError, ValueError):
        return None
    if len(data) != _CODEPOINTS + _TABLE_DIGEST:
        return None
    if hashlib.sha256(memoryview(data)[:_CODEPOINTS]).digest() != data[_CODEPOINTS:]:
        return None
    return np.frombuffer(data, dtype=np.uint8, count=_CODEPOINTS)


def _cached_table(name: str, build) -> np.ndarray:
    """``build()`` (a uint8 table of every code point), read from the cache when it
    is there, whole and matches its sha256, else built and written there
    (``storage.atomic_write_bytes``; an unwritable cache is skipped).  Read-only."""
    from .storage import atomic_write_bytes

    try:
        path = _table_cache_path(name)
    except OSError:
        path = None
    if path is not None:
        cached = _read_cached_table(path)
        if cached is not None:
            return cached   # np.frombuffer of bytes: read-only
    table = build()
    if path is not None:
        folder, prefix = os.path.dirname(path), f"classes-{name}-"
        raw = table.tobytes()
        try:   # unique: other processes may build the same table at the same moment
            atomic_write_bytes(path, raw + hashlib.sha256(raw).digest(), unique=True)
            for old in os.listdir(folder):   # tables of an earlier regex or ube-stream
                if old.startswith(prefix) and old.endswith(".u8") and old != os.path.basename(path):
                    os.unlink(os.path.join(folder, old))
        except OSError:   # StorageError included
            pass
    table.setflags(write=False)
    return table


@functools.lru_cache(maxsize=None)
def gpt2_class_table() -> np.ndarray:
    """``uint8[0x110000]``: the GPT-2 class of every code point (0 other, 1 ``\\p{L}``,
    2 ``\\p{N}``, 3 ``\\s``; surrogates 0), probed from the installed ``regex``
    (``_probe_gpt2_classes``) or read from the table cache.  Read-only."""
    return _cached_table("gpt2", _probe_gpt2_classes)


def _probe_gpt2_classes() -> np.ndarray:
    import regex

    scalars, text = _assigned_text()
    table = np.zeros(_CODEPOINTS, dtype=np.uint8)
    for code, probe in _PROBES:
        members = _probe(text, scalars, probe)
        if table[members].any():
            raise AssertionError(
                f"regex {regex.__version__}: code points in {probe!r} also belong to another "
                f"GPT-2 class (first U+{int(members[table[members] != 0][0]):04X}); the pattern's "
                "classes are expected to be disjoint")
        table[members] = code
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


@functools.lru_cache(maxsize=None)
def _scalar_text() -> Tuple[np.ndarray, str]:
    """Every scalar value (``uint32``, ascending) and the text of them all, in that order."""
    scalars = np.concatenate((np.arange(0xD800, dtype=np.uint32), np.arange(0xE000, _CODEPOINTS, dtype=np.uint32)))
    scalars.setflags(write=False)
    return scalars, scalars.astype("<u4", copy=False).tobytes().decode("utf-32-le")


@functools.lru_cache(maxsize=None)
def _assigned_text() -> Tuple[np.ndarray, str]:
    """The scalar values the installed ``regex`` calls neither unassigned (``\\p{Cn}``)
    nor private use (``\\p{Co}``), and their text: ~160k of the 1.1M, all that the
    GPT-2 and tiktoken classes can hold (general categories partition the code space,
    and ``\\s`` (White_Space) and case folding name only assigned characters), so their
    probes scan a seventh of the text (tests compare each table with a probe of every
    scalar value one at a time)."""
    scalars, text = _scalar_text()
    for probe in (r"\P{Cn}+", r"\P{Co}+"):   # the second scans only what the first kept
        spans = _spans(text, probe)
        scalars = np.concatenate([scalars[start:end] for start, end in spans])
        text = "".join([text[start:end] for start, end in spans])
    scalars.setflags(write=False)
    return scalars, text


def _spans(text: str, probe: str) -> List[Tuple[int, int]]:
    """The runs ``probe`` (a pattern ``X+``) finds in ``text``: one ``regex`` pass; they are few
    (~700 for ``\\p{L}+`` over all scalar values)."""
    import regex
    return [m.span() for m in regex.finditer(probe, text)]


def _probe(text: str, scalars: np.ndarray, probe: str) -> np.ndarray:
    """The code points (ascending) in the runs ``probe`` matches in ``text``, the text of ``scalars``."""
    parts = [scalars[start:end] for start, end in _spans(text, probe)]
    return np.concatenate(parts) if parts else np.zeros(0, np.uint32)


@functools.lru_cache(maxsize=None)
def tiktoken_class_table() -> np.ndarray:
    """``uint8[0x110000]``: the ``TT_*`` bits of every code point for the cl100k, llama3
    and o200k kernels (``\\p{L}``, ``\\p{N}``, ``\\s``, o200k's two letter classes,
    and in bits 5-7 the contraction letter it matches under ``(?i:)``), probed from
    the installed ``regex`` (``_probe_tiktoken_classes``, ~70 ms) or read from the
    table cache; surrogates 0.  Read-only.

    Checks what the kernels take for granted: ``\\p{L}``, ``\\p{N}`` and ``\\s`` are
    disjoint, every letter is in one of o200k's classes, a code point folds to at
    most one contraction letter, only U+0027 matches ``(?i:')``, and no single code
    point matches two letters of a contraction (no full case folding)."""
    return _cached_table("tiktoken", _probe_tiktoken_classes)


def _probe_tiktoken_classes() -> np.ndarray:
    import regex

    scalars, text = _assigned_text()
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


# --------------------------------------------------------------------------- SCRIPT
# Land & Arnett, "BPE Stays on SCRIPT" (arXiv 2505.24689), pre-tokenization as their code
# (github.com/sanderland/script_bpe, encoding/encoder.py and pretokenize/scriptencoding.py)
# defines it: every character has a (script, supercategory); chunks are runs of one
# (script, supercategory) that absorb what may follow them.  The rules live in
# cython_src/_pretok_script.pxd; the readable twin is _reference.pretokenize_script.

# bits of script_class_table(): the same as SC_* in cython_src/_pretok_script.pxd
SC_LM, SC_N, SC_PS, SC_Z, SC_C = 0, 1, 2, 3, 4   # supercategory (bits 0-2): L/M, N, P/S, Z, C
SC_SUPER_MASK = 0x7
SC_SPACE_JOINS = 0x8                             # a lone U+0020 before this character joins its chunk
SC_SCRIPT_SHIFT = 4                              # bits 4-15: the script id
# fixed script ids the rules name; the other scripts follow in the regex module's order
SCRIPT_UNKNOWN, SCRIPT_COMMON, SCRIPT_INHERITED, SCRIPT_HAN, SCRIPT_HIRAGANA = 0, 1, 2, 3, 4
_FIXED_SCRIPTS = ("UNKNOWN", "COMMON", "INHERITED", "HAN", "HIRAGANA")

#: scripts whose letters (L/M) take one leading space into their chunk (the paper's
#: SCRIPTS_WHICH_USE_SPACES), as the regex module names them; Common punctuation and
#: symbols (P/S) do too
SCRIPTS_WITH_SPACES = ("LATIN", "ARABIC", "DEVANAGARI", "HANGUL", "ETHIOPIC", "CYRILLIC", "GREEK", "HEBREW",
                       "BENGALI", "SYRIAC", "ORIYA", "TAMIL", "TELUGU", "GURMUKHI", "GUJARATI", "SINHALA",
                       "MALAYALAM", "ARMENIAN", "KANNADA", "GEORGIAN")
#: the paper's per-character overrides of (script, supercategory)
SCRIPT_OVERRIDES = {
    0x0A: ("COMMON", SC_Z),        # \n is whitespace, not a control character
    0x09: ("COMMON", SC_Z),        # \t likewise
    0x30FC: ("INHERITED", SC_LM),  # KATAKANA-HIRAGANA PROLONGED SOUND MARK continues the word before it
    0xFF70: ("INHERITED", SC_LM),  # its halfwidth form
    0x0640: ("ARABIC", SC_LM),     # ARABIC TATWEEL (kashida) is part of Arabic words
}
_SUPER_PROBES = (r"[\p{L}\p{M}]+", r"\p{N}+", r"[\p{P}\p{S}]+", r"\p{Z}+", r"\p{C}+")   # in SC_* order


def script_names() -> Tuple[str, ...]:
    """Script names by script id of :func:`script_class_table` (the ``regex`` module's
    ``Script`` values, upper case: ``"LATIN"``, ``"HAN"``...)."""
    return _script_names()


@functools.lru_cache(maxsize=None)
def _script_names() -> Tuple[str, ...]:
    import regex
    from regex import _regex_core  # the property tables the regex module parses \p{Script=...} with

    try:
        by_name = _regex_core.PROPERTIES["SCRIPT"][1]       # every name and alias -> value
        canonical = _regex_core.PROPERTY_NAMES[_regex_core.PROPERTIES["SCRIPT"][0]][1]   # value -> its name
    except (AttributeError, KeyError) as exc:
        raise RuntimeError(f"regex {regex.__version__}: cannot list the Script property's values ({exc!r}); "
                           "the 'script' pattern needs the regex module's property tables") from None
    missing = [name for name in _FIXED_SCRIPTS + SCRIPTS_WITH_SPACES if name not in by_name]
    if missing:
        raise RuntimeError(f"regex {regex.__version__}: Script values {missing} are missing")
    fixed = [str(canonical[by_name[name]]) for name in _FIXED_SCRIPTS]
    return tuple(fixed) + tuple(str(canonical[v]) for v in sorted(canonical) if canonical[v] not in fixed)


def script_id(name: str) -> int:
    """Script id (in :func:`script_class_table`) of a Script value by any of its names
    (``"Latin"``, ``"Latn"``, ``"Han"``...)."""
    from regex import _regex_core

    key = name.upper().replace("_", "").replace(" ", "")
    value = _regex_core.PROPERTIES["SCRIPT"][1].get(key)
    if value is None:
        raise ValueError(f"unknown script {name!r}")
    return script_names().index(_regex_core.PROPERTY_NAMES[_regex_core.PROPERTIES["SCRIPT"][0]][1][value])


@functools.lru_cache(maxsize=None)
def script_class_table() -> np.ndarray:
    """``uint16[0x110000]``: the SCRIPT class of every code point: its supercategory
    (``SC_*``, bits 0-2), :data:`SC_SPACE_JOINS` (bit 3) and its script id (bits
    4-15, an index into :func:`script_names`), all probed from the installed
    ``regex`` (``\\p{Script=...}``, ``\\p{L}``...), then the paper's
    :data:`SCRIPT_OVERRIDES`; surrogates 0.  Built on first use (~0.2 s), read-only.

    Every scalar value has exactly one script and one supercategory (checked)."""
    import regex
    scalars, text = _scalar_text()
    names = script_names()
    scripts = np.full(_CODEPOINTS, -1, dtype=np.int32)
    probe = regex.compile("|".join(f"(\\p{{Script={name}}}+)" for name in names))
    for match in probe.finditer(text):
        scripts[scalars[match.start():match.end()]] = match.lastindex - 1
    supers = np.full(_CODEPOINTS, -1, dtype=np.int32)
    probe = regex.compile("|".join(f"({p})" for p in _SUPER_PROBES))
    for match in probe.finditer(text):
        supers[scalars[match.start():match.end()]] = match.lastindex - 1
    for what, found in (("script", scripts), ("general category", supers)):
        if (found[scalars] < 0).any():
            first = int(scalars[found[scalars] < 0][0])
            raise AssertionError(f"regex {regex.__version__}: U+{first:04X} has no {what} the probes know")
    for codepoint, (name, supercategory) in SCRIPT_OVERRIDES.items():
        scripts[codepoint], supers[codepoint] = script_id(name), supercategory
    joins = np.zeros(len(names), dtype=bool)
    joins[[script_id(name) for name in SCRIPTS_WITH_SPACES]] = True
    space_joins = (joins[scripts] & (supers == SC_LM)) | ((scripts == SCRIPT_COMMON) & (supers == SC_PS))
    table = ((scripts << SC_SCRIPT_SHIFT) | supers | np.where(space_joins, SC_SPACE_JOINS, 0)).astype(np.uint16)
    table[0xD800:0xE000] = 0
    table.setflags(write=False)
    return table


# --------------------------------------------------------------------------- SuperBPE spans (rules v1, liu)

# entries of span_class_table(): the same as SPAN_* in cython_src/_spans.pxd
SPAN_OTHER, SPAN_LETTER, SPAN_GLUE = 0, 1, 2
#: the byte joining a span's chunks in its key (never in UTF-8)
SPAN_JOIN = _pretok.SPAN_JOIN
_SPAN_GLUE_CHARS = (0x20, 0x27, 0x2019)
#: SuperBPE span rules (docs/training.md, SuperBPE): "v1" ends a span at punctuation,
#: digits, symbols and line breaks; "liu" is Liu et al.'s stage-2 pre-tokenization
SPAN_RULES = ("v1", "liu")


def check_span_rule(rule: object) -> str:
    """``rule`` when it is one of :data:`SPAN_RULES`, else a ValueError naming them."""
    if not isinstance(rule, str) or rule not in SPAN_RULES:
        raise ValueError(f"superbpe_spans must be one of {', '.join(map(repr, SPAN_RULES))} (the SuperBPE span "
                         f"rule, docs/training.md), got {rule!r}")
    return rule


@functools.lru_cache(maxsize=None)
def span_class_table(rule: str = "v1") -> np.ndarray:
    """``uint8[0x110000]``, the character classes of span rule ``rule``.

    ``"v1"``: :data:`SPAN_LETTER` for ``[\\p{L}\\p{M}]`` as the installed ``regex``
    module classifies it, :data:`SPAN_GLUE` for U+0020 and the apostrophes U+0027,
    U+2019, else :data:`SPAN_OTHER` (surrogates too).  ``"liu"``: :data:`SPAN_OTHER`
    for ``\\p{N}`` (HF's ``Digits`` pre-tokenizer: Rust's ``char::is_numeric``,
    categories Nd, Nl, No) and surrogates, :data:`SPAN_LETTER` for every other
    scalar, so a chunk joins iff it holds no number.  Read-only."""
    import regex
    check_span_rule(rule)
    scalars, text = _assigned_text()
    if rule == "liu":
        table = np.full(_CODEPOINTS, SPAN_LETTER, dtype=np.uint8)
        table[_probe(text, scalars, r"\p{N}+")] = SPAN_OTHER
        table[0xD800:0xE000] = SPAN_OTHER
        table.setflags(write=False)
        return table
    table = np.zeros(_CODEPOINTS, dtype=np.uint8)
    table[_probe(text, scalars, r"[\p{L}\p{M}]+")] = SPAN_LETTER
    if table[list(_SPAN_GLUE_CHARS)].any():
        raise AssertionError(f"regex {regex.__version__}: a span glue character is a letter or mark")
    table[list(_SPAN_GLUE_CHARS)] = SPAN_GLUE
    table.setflags(write=False)
    return table


def span_ends(data: BytesLike, chunk_ends: np.ndarray, start: int = 0,
              doc_chunk_offsets: Optional[np.ndarray] = None, rule: str = "v1") -> np.ndarray:
    """SuperBPE spans of the chunks ``data[start:chunk_ends[0]], ...`` by span rule
    ``rule`` (:data:`SPAN_RULES`; docs/training.md, SuperBPE): the exclusive end chunk
    index of each span, so span ``s`` is chunks ``result[s - 1]..result[s] - 1``.  Spans
    never cross the document boundaries of ``doc_chunk_offsets`` (as
    :func:`chunk_bounds_batch` returns it).

    >>> data = b"Hello world, it's me"
    >>> ends = chunk_bounds(data)          # Hello| world|,| it|'s| me
    >>> span_ends(data, ends).tolist()
    [2, 3, 6]
    """
    array = as_uint8(data)
    chunk_ends = np.ascontiguousarray(chunk_ends, dtype=np.int64)
    out = np.empty(chunk_ends.shape[0], dtype=np.int64)
    offsets = None if doc_chunk_offsets is None else np.ascontiguousarray(doc_chunk_offsets, dtype=np.int64)
    err = err_buffer()
    status, count = _pretok.span_ends(array, chunk_ends, span_class_table(rule), out, int(start), offsets, err)
    check_status(status, err, what="SuperBPE spans", data=array)
    assert count is not None
    return out[:count]


def span_keys(data: BytesLike, chunk_ends: np.ndarray, spans: np.ndarray,
              start: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """``(keys, key_ends)``: each span's chunks joined by :data:`SPAN_JOIN`, one key
    after another (the keys of the phase-1 span table)."""
    array = as_uint8(data)
    chunk_ends = np.ascontiguousarray(chunk_ends, dtype=np.int64)
    spans = np.ascontiguousarray(spans, dtype=np.int64)
    need = int(chunk_ends[-1]) - int(start) + chunk_ends.shape[0] if chunk_ends.shape[0] else 0
    keys = np.empty(need, dtype=np.uint8)
    key_ends = np.empty(spans.shape[0], dtype=np.int64)
    written = _pretok.span_keys(array, chunk_ends, spans, keys, key_ends, int(start))
    return keys[:written], key_ends


def superword_spans(text: str, pattern: str = "gpt2", rule: str = "v1") -> List[List[str]]:
    """The SuperBPE spans of ``text`` under ``pattern`` and span rule ``rule``, each as
    its chunks.

    >>> superword_spans("Hello world, it's me\\n")
    [['Hello', ' world'], [','], [' it', "'s", ' me'], ['\\n']]
    >>> superword_spans("Note: it's 42 now.\\nBye", rule="liu")
    [['Note', ':'], [' it', "'s"], [' 42'], [' now', '.', '\\n'], ['Bye']]
    """
    data = text.encode("utf-8", "surrogatepass")
    ends = chunk_bounds(data, pattern)
    spans = span_ends(data, ends, rule=rule)
    result: List[List[str]] = []
    first, lo = 0, 0
    for stop in spans.tolist():
        chunk_list = []
        for c in range(first, stop):
            chunk_list.append(data[lo:int(ends[c])].decode("utf-8"))
            lo = int(ends[c])
        result.append(chunk_list)
        first = stop
    return result
