"""The substrate: routing text to base symbols and back.

Three substrates share one code path (the ``_route`` kernel):

``ube``
    A Unicode scalar value whose UTF-8 form has at most 2 bytes is written as
    those bytes (ids ``0..255``); any other as its UTF-16LE bytes (2, or 4 for a
    surrogate pair) with ids ``256 + byte``.  512 base symbols.
``utf8``
    Every character as its UTF-8 bytes (byte-level BPE), ids ``0..255``.
``utf16``
    Every character as its UTF-16LE bytes, ids ``0..255``.

Worked example::

    >>> encode_symbols("GPU性能").tolist()
    [71, 80, 85, 295, 352, 509, 384]
    >>> floor_cost("GPU性能", "utf8"), floor_cost("GPU性能", "utf16")
    (9, 10)
    >>> symbol_string(encode_symbols("GPU性能"))[3:] == "\\ue127\\ue160\\ue1fd\\ue180"
    True
    >>> decode_symbols([71, 80, 85, 295, 352, 509, 384])
    'GPU性能'

Decoding ``ube`` keeps two buffers: a run of ids < 256 is UTF-8, a run of ids
>= 256 is UTF-16LE; switching alphabet flushes the buffer, so a byte sequence
cut by a switch is invalid.
"""
from __future__ import annotations

import codecs
import re
from typing import Callable, Optional, Sequence, Union

import numpy as np

from . import _decode, _route
from .errors import STATUS_INVALID_SYMBOLS, STATUS_OK, InvalidTextError, _out_of_alphabet, check_status, err_buffer

__all__ = [
    "SUBSTRATES",
    "char_starts",
    "substrate_code",
    "base_size",
    "encode_symbols",
    "route_bytes",
    "decode_symbols",
    "floor_cost",
    "symbol_string",
    "parse_symbol_string",
    "as_id_array",
]

SUBSTRATES = ("ube", "utf8", "utf16")
_BASE_SIZES = {"ube": 512, "utf8": 256, "utf16": 256}
_UTF16_SYMBOL_BASE = 0xE100  # symbol_string char of id 256 + b is chr(0xE100 + b)

_SURROGATE = re.compile("[\ud800-\udfff]")

IdsLike = Union[Sequence[int], np.ndarray]


def substrate_code(name: str) -> int:
    """Kernel code of a substrate name: ``ube`` 0, ``utf8`` 1, ``utf16`` 2."""
    try:
        return SUBSTRATES.index(name)
    except ValueError:
        raise ValueError(
            f"unknown substrate {name!r}; expected one of {', '.join(map(repr, SUBSTRATES))}"
        ) from None


def base_size(name: str) -> int:
    """Number of base symbols of a substrate: 512 for ``ube``, 256 otherwise."""
    substrate_code(name)
    return _BASE_SIZES[name]


#: base symbols per character, by the character's UTF-8 length (index 1..4)
_SYMBOLS_PER_CHAR = {"ube": (0, 1, 2, 2, 4), "utf8": (0, 1, 2, 3, 4), "utf16": (0, 2, 2, 2, 4)}


def char_starts(data: bytes | np.ndarray, substrate: str, n_symbols: int | None = None) -> np.ndarray:
    """Character-start flags of routed text: uint8, one per base symbol of
    ``data`` (valid UTF-8, any number of words back to back) routed under
    ``substrate``, 1 where a character starts.  Routing maps each character on
    its own, so the flags follow from each character's UTF-8 length (twin:
    ``_reference.char_starts_reference``).  ``n_symbols``: the routed length,
    checked."""
    substrate_code(substrate)
    per_char = np.array(_SYMBOLS_PER_CHAR[substrate], dtype=np.int64)
    data = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data
    leads = data[(data & 0xC0) != 0x80]
    utf8_len = 1 + (leads >= 0xC0) + (leads >= 0xE0) + (leads >= 0xF0)
    sizes = per_char[utf8_len]
    total = int(sizes.sum())
    if n_symbols is not None and total != n_symbols:
        raise ValueError(f"{total} symbols from the characters, {n_symbols} routed; "
                         "the flags must come from the routed data")
    flags = np.zeros(total, dtype=np.uint8)
    flags[np.cumsum(sizes) - sizes] = 1
    return flags


def utf8_of(text: str, *, document: int | None = None) -> bytes:
    """UTF-8 of ``text``, or :class:`~ube_stream.errors.InvalidTextError` naming the
    character offset (and ``document``, in a batch) of a lone surrogate.

    The one check for lone surrogates that raises; readers that count instead
    of raising use :func:`find_lone_surrogate`.
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        where = f"character offset {exc.start}" + ("" if document is None else f" of document {document}")
        raise InvalidTextError(
            f"text holds a lone surrogate U+{ord(text[exc.start]):04X} at {where}: only Unicode scalar "
            "values have a UTF-8 form, so it cannot be pre-tokenized, routed or encoded (fix the source "
            "decoding, e.g. errors='replace' instead of 'surrogateescape'/'surrogatepass', or skip such "
            "documents with on_error='skip')",
            offset=exc.start, unit="char", document=document) from None


def find_lone_surrogate(text: str) -> int:
    """Character offset of the first lone surrogate in ``text``, or -1."""
    found = _SURROGATE.search(text)
    return -1 if found is None else found.start()


def encode_symbols(text: str, substrate: str = "ube") -> np.ndarray:
    """Base symbol ids (``uint16``) of ``text`` under ``substrate``.

    Raises :class:`~ube_stream.errors.InvalidTextError` naming the character
    offset of a lone surrogate.
    """
    if not isinstance(text, str):
        raise TypeError(f"encode_symbols expects str, got {type(text).__name__}; "
                        "use route_bytes for UTF-8 bytes")
    return _routed(utf8_of(text), substrate)


def route_bytes(data, substrate: str = "ube") -> np.ndarray:
    """Base symbol ids (``uint16``) of UTF-8 bytes (``bytes``, ``bytearray``,
    ``memoryview`` or a ``uint8`` array).

    Raises :class:`~ube_stream.errors.InvalidTextError` (``unit="byte"``) naming
    the byte offset of invalid UTF-8.
    """
    return _routed(as_uint8(data), substrate)


def _routed(data, substrate: str) -> np.ndarray:
    err = err_buffer()
    status, symbols = _route.route(data, substrate_code(substrate), err)
    check_status(status, err, what="routing")
    assert symbols is not None  # STATUS_OK (check_status raised otherwise) carries the result
    return symbols


def floor_cost(text: Union[str, bytes], substrate: str = "ube") -> int:
    """Number of base symbols of ``text`` (``str``, or UTF-8 bytes): the token
    count of a tokenizer with no merges, the floor any merge can only lower."""
    data = utf8_of(text) if isinstance(text, str) else as_uint8(text)
    err = err_buffer()
    status, count = _route.count(data, substrate_code(substrate), err)
    check_status(status, err, what="routing")
    assert count is not None  # STATUS_OK (check_status raised otherwise) carries the result
    return count


def as_uint8(data, *, what: str = "data") -> np.ndarray:
    """A contiguous 1-D ``uint8`` array over UTF-8 bytes (``bytes``, ``bytearray``,
    ``memoryview`` or a ``uint8`` array), zero-copy where possible; the one
    place that checks what the kernels' ``const uint8_t[::1]`` inputs receive."""
    if isinstance(data, np.ndarray):
        if data.dtype != np.uint8 or data.ndim != 1:
            raise TypeError(f"{what} must be a 1-D uint8 array of UTF-8 bytes, got {data.dtype} "
                            f"with shape {data.shape}; use np.frombuffer(buf, np.uint8)")
        return np.ascontiguousarray(data)
    if isinstance(data, (bytes, bytearray, memoryview)):
        view = memoryview(data)
        if not view.c_contiguous:
            view = memoryview(view.tobytes())
        return np.frombuffer(view.cast("B") if view.format != "B" or view.ndim != 1 else view,
                             dtype=np.uint8)
    if isinstance(data, str):
        raise TypeError(f"{what} must be UTF-8 bytes, got a str: pass text.encode('utf-8'), or use the "
                        "str entry point (encode_symbols, pretokenize, Tokenizer.encode)")
    raise TypeError(f"{what} must be bytes, bytearray, memoryview or a uint8 numpy array, "
                    f"got {type(data).__name__}")


def as_id_array(ids: IdsLike, on_bad: Callable[[IdsLike, int], Exception], *,
                what: str = "ids") -> np.ndarray:
    """``ids`` (a 1-D integer array, a list or tuple of ints, any iterable of
    ints) as a contiguous 1-D ``uint32`` array: the one check of id sequences,
    for token ids and base symbol ids alike.

    ``TypeError`` for items or a dtype that are not integers; ``on_bad(ids,
    position)`` is raised for the first id outside ``0..2**32-1``.  Callers
    check their own range (the vocabulary, the alphabet); a ``uint32`` array is
    passed through without a copy.  Lists and tuples are read by a kernel
    (``_decode.ids_from_sequence``), without numpy's per-item conversion.
    """
    if isinstance(ids, np.ndarray):
        arr = ids
    elif isinstance(ids, (list, tuple)):
        out = np.empty(len(ids), dtype=np.uint32)
        err = err_buffer()
        if _decode.ids_from_sequence(ids, out, err) != STATUS_OK:
            position = int(err[1])
            item = ids[position]
            if isinstance(item, (int, np.integer)):
                raise on_bad(ids, position)
            raise TypeError(f"{what} must be integers; item {position} is {type(item).__name__} {item!r}")
        return out
    else:
        return as_id_array(list(ids), on_bad, what=what)
    if arr.ndim != 1:
        if arr.size == 0:
            return np.zeros(0, dtype=np.uint32)
        raise ValueError(f"expected a 1-D sequence of {what}, got shape {arr.shape}")
    if arr.dtype == np.uint32:
        return np.ascontiguousarray(arr)
    if arr.dtype.kind not in "iu":
        if arr.size == 0:
            return np.zeros(0, dtype=np.uint32)
        raise TypeError(f"{what} must be integers, got dtype {arr.dtype}")
    if arr.size:
        bad = (arr < 0) | (arr > 0xFFFFFFFF) if arr.dtype.itemsize >= 4 or arr.dtype.kind == "i" else None
        if bad is not None and bad.any():
            raise on_bad(arr, int(np.argmax(bad)))
    return arr.astype(np.uint32)


def _as_ids(ids: IdsLike, substrate: str) -> np.ndarray:
    """``ids`` as a contiguous ``uint16`` array, every id checked against the alphabet."""
    limit = base_size(substrate)
    if isinstance(ids, np.ndarray) and ids.dtype == np.uint16 and ids.ndim == 1:
        return np.ascontiguousarray(ids)  # below 2**16: the decode kernel checks the alphabet

    def outside(arr, offset):
        return _out_of_alphabet(arr, offset, substrate, limit)

    arr = as_id_array(ids, outside, what="symbol ids")
    bad = np.flatnonzero(arr >= limit)
    if bad.size:
        raise outside(arr, int(bad[0]))
    return arr.astype(np.uint16)


def _raise_out_of_range(arr: np.ndarray, offset: int, substrate: str, limit: int):
    raise _out_of_alphabet(arr, offset, substrate, limit)


def decode_symbols(ids: IdsLike, substrate: str = "ube", errors: str = "strict") -> str:
    """Text of base symbol ids; the inverse of :func:`encode_symbols`.

    ``errors="strict"`` raises :class:`~ube_stream.errors.SymbolDecodeError`
    naming the symbol offset where the first invalid byte sequence starts;
    ``errors="replace"`` writes U+FFFD for invalid sequences exactly as Python's
    ``utf-8`` / ``utf-16-le`` codecs do on each buffer.  An id outside the
    alphabet is a SymbolDecodeError in both modes.
    """
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
    code = substrate_code(substrate)
    arr = _as_ids(ids, substrate)
    if arr.size == 0:
        return ""
    err = err_buffer()
    status, text = _route.decode_text(arr, code, err)
    detail = ""
    if status == STATUS_INVALID_SYMBOLS:
        if errors == "replace":
            return _decode_replace(arr, substrate)
        buffer_start, codec, data = _buffer_at(arr, err[0], substrate)
        try:
            data.decode(codec)
            reason = "invalid byte sequence"
        except UnicodeDecodeError as exc:
            reason = exc.reason
        detail = f"{reason} ({codec} buffer starting at symbol {buffer_start})"
    check_status(status, err, what="decoding symbols", ids=arr, substrate=substrate,
                 limit=base_size(substrate), detail=detail)
    assert text is not None  # STATUS_OK (check_status raised otherwise) carries the result
    return text


def _buffers(arr: np.ndarray, substrate: str):
    """Yield ``(start, codec, bytes)`` for each buffer of the dual-buffer rule."""
    if substrate != "ube":
        yield 0, ("utf-8" if substrate == "utf8" else "utf-16-le"), arr.astype(np.uint8).tobytes()
        return
    high = arr >= 256
    bounds = np.concatenate(([0], np.flatnonzero(high[1:] != high[:-1]) + 1, [arr.size]))
    low_bytes = (arr & 0xFF).astype(np.uint8).tobytes()
    for start, end in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        yield start, ("utf-16-le" if high[start] else "utf-8"), low_bytes[start:end]


def _buffer_at(arr: np.ndarray, offset: int, substrate: str):
    found = None
    for start, codec, data in _buffers(arr, substrate):
        if start > offset:
            break
        found = (start, codec, data)
    return found


def _decode_replace(arr: np.ndarray, substrate: str) -> str:
    decoder = ReplaceDecoder(substrate)
    parts = [decoder.feed(arr[i:i + REPLACE_SLICE]) for i in range(0, arr.size, REPLACE_SLICE)]
    parts.append(decoder.flush())
    return "".join(parts)


#: base symbols the replace decoders handle at a time (bounds their memory)
REPLACE_SLICE = 1 << 18


class ReplaceDecoder:
    """Base symbols fed in pieces -> text, ``errors="replace"``: the one replace
    decode, identical to ``decode_symbols(all pieces, substrate, "replace")``
    however the symbols are cut.

    Each buffer of the dual-buffer rule goes through an incremental codec
    (``utf-8`` / ``utf-16-le``, ``"replace"``), which holds back the bytes of
    an unfinished character (or a high surrogate) at the end of a piece and
    writes exactly what the one-shot codec writes; a buffer ends (its codec is
    finished with ``final=True``) where the alphabet switches under ``ube`` and
    at :meth:`flush`.  Ids are not checked against the alphabet (callers pass
    checked symbols or a tokenizer's expansions)."""

    def __init__(self, substrate: str):
        if substrate not in ("ube", "utf8", "utf16"):
            raise ValueError(f"unknown substrate {substrate!r}")
        self._ube = substrate == "ube"
        self._fixed = None if self._ube else ("utf-8" if substrate == "utf8" else "utf-16-le")
        self._codec: Optional[str] = None
        self._decoder: Optional[codecs.IncrementalDecoder] = None

    def feed(self, symbols: np.ndarray) -> str:
        """Text completed by these symbols (a 1-D integer array)."""
        if symbols.size == 0:
            return ""
        low = (symbols & 0xFF).astype(np.uint8)
        if not self._ube:
            return self._decode(self._fixed, low.tobytes())  # type: ignore[arg-type]
        high = symbols >= 256
        bounds = [0] + (np.flatnonzero(high[1:] != high[:-1]) + 1).tolist() + [symbols.size]
        parts = []
        for start, end in zip(bounds[:-1], bounds[1:]):
            parts.append(self._decode("utf-16-le" if high[start] else "utf-8", low[start:end].tobytes()))
        return "".join(parts)

    def flush(self) -> str:
        """Finish the open buffer (an unfinished tail writes U+FFFD)."""
        if self._decoder is None:
            return ""
        text = self._decoder.decode(b"", True)
        self._decoder = self._codec = None
        return text

    def _decode(self, codec: str, data: bytes) -> str:
        head = ""
        if codec != self._codec:
            head = self.flush()
            self._codec = codec
            self._decoder = codecs.getincrementaldecoder(codec)("replace")
        return head + self._decoder.decode(data)  # type: ignore[union-attr]


def gpt2_byte_chars() -> np.ndarray:
    """``uint32[256]``: the code point GPT-2's ``bytes_to_unicode`` gives each byte.

    Printable Latin-1 bytes (``!``..``~``, ``¡``..``¬``, ``®``..``ÿ``) stand for
    themselves; the other 68 bytes take ``U+0100``, ``U+0101``, ... in byte order.
    """
    printable = np.zeros(256, dtype=bool)
    for first, last in ((0x21, 0x7E), (0xA1, 0xAC), (0xAE, 0xFF)):
        printable[first:last + 1] = True
    chars = np.arange(256, dtype=np.uint32)
    others = np.flatnonzero(~printable)
    chars[others] = 256 + np.arange(others.size, dtype=np.uint32)
    return chars


def _symbol_chars() -> np.ndarray:
    """Code point of the symbol-string char of every id 0..511."""
    chars = np.empty(512, dtype=np.uint32)
    chars[:256] = gpt2_byte_chars()
    chars[256:] = np.arange(_UTF16_SYMBOL_BASE, _UTF16_SYMBOL_BASE + 256, dtype=np.uint32)
    return chars


_SYMBOL_CHARS = _symbol_chars()
_SYMBOL_OF_CHAR = np.full(_UTF16_SYMBOL_BASE + 256, 0xFFFF, dtype=np.uint16)
_SYMBOL_OF_CHAR[_SYMBOL_CHARS] = np.arange(512, dtype=np.uint16)


def symbol_string(ids: IdsLike, substrate: str = "ube") -> str:
    """Printable form of base ids: GPT-2 ``bytes_to_unicode`` chars for ids < 256,
    ``chr(0xE100 + b)`` for id ``256 + b`` (used in exports such as ``vocab.json``)."""
    arr = _as_ids(ids, substrate)
    limit = base_size(substrate)
    bad = np.flatnonzero(arr >= limit)
    if bad.size:
        _raise_out_of_range(arr, bad[0], substrate, limit)
    return _SYMBOL_CHARS[arr].astype("<u4").tobytes().decode("utf-32-le")


def parse_symbol_string(s: str, substrate: str = "ube") -> np.ndarray:
    """Base ids (``uint16``) of a symbol string; the inverse of :func:`symbol_string`.

    A character outside the substrate's alphabet raises
    :class:`~ube_stream.errors.InvalidTextError` naming its character offset.
    """
    limit = base_size(substrate)
    try:
        points = np.frombuffer(s.encode("utf-32-le"), dtype="<u4")
    except UnicodeEncodeError as exc:  # a lone surrogate is outside every alphabet
        _raise_not_symbol(s, exc.start, substrate)
    inside = points < _SYMBOL_OF_CHAR.size
    ids = np.full(points.size, 0xFFFF, dtype=np.uint16)
    ids[inside] = _SYMBOL_OF_CHAR[points[inside]]
    bad = np.flatnonzero(ids >= limit)
    if bad.size:
        _raise_not_symbol(s, int(bad[0]), substrate)
    return ids


def _raise_not_symbol(s: str, offset: int, substrate: str):
    raise InvalidTextError(
        f"character {s[offset]!r} (U+{ord(s[offset]):04X}) at offset {offset} is not a "
        f"{substrate} base symbol: a symbol string holds GPT-2 byte characters"
        + (" and U+E100..U+E1FF" if substrate == "ube" else "")
        + " (was this string made by symbol_string with the same substrate?)",
        offset=offset, unit="char")
