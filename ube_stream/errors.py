"""One exception hierarchy for ube-stream.

Every error derives from :class:`UbeError` *and* from the built-in exception a
caller would naturally catch (``ValueError``, ``OSError``, ...), so both
``except UbeError`` and ``except ValueError`` work.  Messages say what was
expected, what was found, where (file, row, byte or character offset) and how
to fix it.

The compiled kernels never raise these: they return a status code and write
where into an ``err`` out-parameter (cython_src/_status.pxd), and
:func:`check_status` turns that into the exception, in this one place.
"""
from __future__ import annotations

from array import array
from typing import Optional, Sequence

__all__ = [
    "UbeError",
    "OptionError",
    "InvalidTextError",
    "SymbolDecodeError",
    "SpecialTokenError",
    "KernelsMissingError",
    "InputError",
    "TokenizerFormatError",
    "TokenizerOptionError",
    "ShardFormatError",
    "LockError",
    "StorageError",
]


class UbeError(Exception):
    """Base class of every ube-stream error.

    Structured fields every error may carry, so that each front end words the
    same advice in its own terms (the ``ube`` command line names flags, Python
    callers keywords):

    ``option``
        the keyword argument of the call the error is about (``"format"``,
        ``"split"``, ``"vocab_size"``); the message names it in Python terms
        (``format=``, ``split='train'``, ``vocab_size``) and the command line
        renders it as its flag (``--format``, ``--split train``, ``--vocab-size``).
    ``api_hint``
        advice that only applies to Python callers (e.g. how to pass texts
        held in memory); ``str(error)`` ends with it, the command line leaves
        it out.
    """

    option: Optional[str] = None
    api_hint: Optional[str] = None

    def __init__(self, *args: object, option: Optional[str] = None, api_hint: Optional[str] = None):
        super().__init__(*args)
        if option is not None:
            self.option = option
        if api_hint is not None:
            self.api_hint = api_hint

    @property
    def message(self) -> str:
        """The message without :attr:`api_hint`."""
        return super().__str__()

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text} {self.api_hint}" if self.api_hint else text


class OptionError(UbeError, ValueError):
    """An option of a call with a value it cannot take (``option``: its keyword,
    e.g. ``vocab_size 300 is below the 513 ...`` with ``option="vocab_size"``)."""

    def __init__(self, message: str, *, option: Optional[str] = None, api_hint: Optional[str] = None):
        super().__init__(message, option=option, api_hint=api_hint)


class InvalidTextError(UbeError, ValueError):
    """Text that is not a sequence of Unicode scalar values.

    ``offset`` is the character offset of the first bad character inside the
    text (for a Python ``str``: a lone surrogate), or the byte offset when the
    text came as bytes (invalid UTF-8).  ``unit`` says which: ``"char"`` or
    ``"byte"``.  In a batch, ``item`` is the index of the bad document or item
    (``document`` is the same field under its older name); for documents
    ``offset`` is relative to the document, for routed items (``route_batch``)
    it is the byte offset in the whole buffer.
    """

    def __init__(self, message: str, *, offset: int = -1, unit: str = "char",
                 item: int | None = None, document: int | None = None):
        super().__init__(message)
        self.offset = offset
        self.unit = unit
        self.item = item if item is not None else document

    @property
    def document(self) -> int | None:
        """The index of the bad document in a batch (the same field as ``item``)."""
        return self.item

    @document.setter
    def document(self, value: int | None) -> None:
        self.item = value


class SymbolDecodeError(UbeError, ValueError):
    """A sequence of symbol or token ids that does not decode to text.

    ``offset`` is the index (in base symbols) where the invalid byte sequence
    starts (-1 when not known); when token ids were decoded, ``position`` is
    the index of the token that holds it.  Decode with ``errors="replace"`` to
    get U+FFFD instead.
    """

    def __init__(self, message: str, *, offset: int = -1, position: int | None = None):
        super().__init__(message)
        self.offset = offset
        self.position = position


class SpecialTokenError(UbeError, ValueError):
    """Text that holds a special token's text where special tokens are disallowed
    (tiktoken's safety default: a corpus cannot inject control tokens).

    ``token`` is the special token found, ``offset`` its character offset in the
    text (``byte_offset`` in its UTF-8 bytes), ``document`` the index in a batch.
    """

    def __init__(self, message: str, *, token: str, offset: int, byte_offset: int,
                 document: int | None = None):
        super().__init__(message)
        self.token = token
        self.offset = offset
        self.byte_offset = byte_offset
        self.document = document


class KernelsMissingError(UbeError, ImportError):
    """The compiled Cython kernels could not be imported."""


class InputError(UbeError, ValueError):
    """A bad input file: missing column, wrong type, invalid UTF-8, corrupt
    compression.  ``path`` and ``row`` (or ``offset``) say where."""

    def __init__(self, message: str, *, path: str | None = None, row: int | None = None,
                 offset: int | None = None, reason: str = "bad_input", option: str | None = None,
                 api_hint: str | None = None):
        super().__init__(message, option=option, api_hint=api_hint)
        self.path = path
        self.row = row
        self.offset = offset
        self.reason = reason


class TokenizerFormatError(UbeError, ValueError):
    """A tokenizer file with a wrong format name, version or fingerprint."""


class TokenizerOptionError(TokenizerFormatError):
    """A tokenizer source that needs an option it did not get (``option``: the
    keyword of :func:`as_tokenizer`, e.g. ``"pattern"``), or got one it cannot use."""

    def __init__(self, message: str, *, option: str):
        super().__init__(message)
        self.option = option


class ShardFormatError(UbeError, ValueError):
    """A shard directory whose manifest, index or token file is not as recorded."""


class LockError(UbeError, RuntimeError):
    """Another live process holds the lock of an output unit or rank."""


class StorageError(UbeError, OSError):
    """Writing an output or reading an input or cache failed for a reason of the
    operating system (disk full, quota, read-only file system, no permission, too
    many open files, a missing directory).  The message names the path, (for
    outputs) the free space and what to do; ``errno`` and ``filename`` are the
    original ones.  Nothing committed was changed."""

    def __str__(self) -> str:   # the message alone (it names the path), not "[Errno 13] ...: 'path'"
        return str(self.strerror)


# --------------------------------------------------------------------------- kernel status

# The status codes of cython_src/_status.pxd (the kernels' side of the convention).
STATUS_OK = 0
STATUS_INVALID_UTF8 = -1
STATUS_INVALID_SYMBOLS = -2
STATUS_BAD_ID = -3
STATUS_NO_MEMORY = -4
STATUS_NOT_BPE = -5
STATUS_TOO_LARGE = -6
#: entries of a kernel's ``err`` out-parameter: ``(position, item)``
ERR_SIZE = 2

_ERR_TEMPLATE = array("q", [-1] * ERR_SIZE)
_ROUTING_ADVICE = ("routing needs well-formed UTF-8 (decode the source with errors='replace' "
                   "or skip the row)")


def err_buffer() -> array:
    """A fresh ``err`` out-parameter for kernel calls: ``ERR_SIZE`` int64 (an
    ``array("q")``, cheaper to make than a numpy array), -1 each.

    A kernel writes it only when it fails, so one buffer may serve several calls
    of one thread, but never two threads at once.
    """
    return _ERR_TEMPLATE[:]


def check_status(status: int, err: Optional[Sequence[int]] = None, *, what: str,
                 data=None, offsets=None, first_item: int = 0, ids=None,
                 substrate: str = "", limit: int = 0, detail: str = "", hint: str = "") -> None:
    """Raise the exception a kernel's status stands for; return if it is ``STATUS_OK``.

    The one translator of the kernels' convention (cython_src/_status.pxd):
    ``status`` is what the kernel returned and ``err`` its ``(position, item)``
    out-parameter.  ``what`` names the operation (it is in the messages) and
    picks the context the message uses:

    ``"routing"``
        ``STATUS_INVALID_UTF8`` -> :class:`InvalidTextError` (``unit="byte"``)
        whose ``offset`` is the byte offset in the buffer routed and ``item``
        the item; ``offsets`` (the items' byte bounds) gives the byte within it.
    ``"pre-tokenization"``, ``"encoding"``
        ``STATUS_INVALID_UTF8`` -> :class:`InvalidTextError` showing the bad
        bytes of ``data``; in a batch (``item`` >= 0, ``offsets`` the document
        bounds in ``data``) ``offset`` is relative to the document and
        ``document`` is ``item + first_item``.
    ``"decoding symbols"``
        ``STATUS_BAD_ID`` (an id outside the ``substrate`` alphabet of
        ``limit`` ids) and ``STATUS_INVALID_SYMBOLS`` (``detail``: why) ->
        :class:`SymbolDecodeError` whose ``offset`` indexes the base ids ``ids``.
    ``"decoding tokens"``
        ``STATUS_BAD_ID`` (an id outside the vocabulary of ``limit`` ids) and
        ``STATUS_INVALID_SYMBOLS`` -> :class:`SymbolDecodeError` whose
        ``position`` indexes the token ids ``ids`` and ``offset`` the base symbols.

    ``"converting ranks"``
        ``STATUS_NOT_BPE`` -> :class:`TokenizerFormatError` naming token
        ``data[item]`` and its rank ``ids[item]``.
    ``"expanding merges"``
        ``STATUS_NOT_BPE`` (a merge joins an id not defined at its rank, of
        ``position`` tokens then) and ``STATUS_TOO_LARGE`` (a token of
        ``position`` base symbols over ``limit``, or all of them over
        ``2**26``) -> :class:`TokenizerFormatError` naming merge ``item``, the
        pair ``ids[item]``.

    ``STATUS_NO_MEMORY`` is a ``MemoryError`` "out of memory while {what}" with
    the bytes that could not be allocated and ``hint``, whatever ``what``.
    """
    if status == STATUS_OK:
        return
    position, item = (int(err[0]), int(err[1])) if err is not None else (-1, -1)
    if status == STATUS_NO_MEMORY:
        raise MemoryError(f"out of memory while {what}"
                          + (f": could not allocate {position} bytes" if position >= 0 else "")
                          + (f"; {hint}" if hint else ""))
    if status == STATUS_INVALID_UTF8:
        if what == "routing":
            where = f"byte offset {position}"
            if item >= 0:
                where += f" (item {item}, byte {position - int(offsets[item])} of the item)"
            raise InvalidTextError(f"invalid UTF-8 at {where}: {_ROUTING_ADVICE}", offset=position,
                                   unit="byte", item=item if item >= 0 else None)
        if item < 0:
            raise _invalid_utf8(data, position)
        start, stop = int(offsets[item]), int(offsets[item + 1])
        raise _invalid_utf8(data[start:stop], position - start, document=item + first_item,
                            doc_start=start)
    if status in (STATUS_BAD_ID, STATUS_INVALID_SYMBOLS) and what == "decoding tokens":
        if status == STATUS_BAD_ID:
            raise SymbolDecodeError(f"token id {int(ids[item])} at position {item} is outside the "
                                    f"vocabulary (0..{limit - 1})", position=item)
        raise SymbolDecodeError(
            f"token ids do not decode to text under {substrate}: the base symbols of token "
            f"{int(ids[item])} at position {item} hold an invalid byte sequence "
            f"(base-symbol offset {position}). Such ids are not the output of encode(); "
            "pass errors='replace' to get U+FFFD", offset=position, position=item)
    if status == STATUS_NOT_BPE and what == "converting ranks":
        raise TokenizerFormatError(
            f"token {bytes(data[item])!r} (rank {int(ids[item])}) is not the merge of two lower-ranked "
            f"tokens (BPE with the ranks below it leaves {position} parts): these ranks are not a BPE "
            "vocabulary")
    if status in (STATUS_NOT_BPE, STATUS_TOO_LARGE) and what == "expanding merges":
        left, right = (int(v) for v in ids[item])
        if status == STATUS_NOT_BPE:
            raise TokenizerFormatError(
                f"merge {item} joins ids ({left}, {right}) but only ids 0..{position - 1} exist "
                "at that rank; the merge list is corrupt or out of order")
        if position <= 2 * limit:   # a token's length (two tokens within the limit make at most 2x it)
            raise TokenizerFormatError(
                f"merge {item} ({left}, {right}) makes a token of {position} base symbols; tokens are "
                f"limited to {limit} (MAX_TOKEN_SYMBOLS). The merge list is corrupt or hostile")
        raise TokenizerFormatError(
            f"merges up to {item} expand to more than {1 << 26} base symbols in all "
            f"(MAX_TOTAL_SYMBOLS); the merge list is corrupt or hostile")
    if status == STATUS_BAD_ID:
        raise _out_of_alphabet(ids, position, substrate, limit)
    if status == STATUS_INVALID_SYMBOLS:
        raise SymbolDecodeError(
            f"symbol ids do not decode to text under {substrate}: {detail or 'invalid byte sequence'} "
            f"at symbol offset {position}, ids {ids[position:position + 4].tolist()}; "
            "pass errors='replace' to get U+FFFD", offset=position)
    raise UbeError(f"{what}: a compiled kernel returned the unknown status {status} (err {position}, "
                   f"{item}); the extensions do not match this Python code: rebuild them with "
                   "`pip install -e .`")


def _invalid_utf8(data, position: int, *, document: int | None = None,
                  doc_start: int = 0) -> InvalidTextError:
    """The error for invalid UTF-8 at ``data[position]``, where ``data`` is one
    document starting at byte ``doc_start`` of a batch (``document`` its index)."""
    shown = bytes(data[position:position + 4])
    where = f"byte offset {position}"
    if document is not None:
        where = f"document {document}, {where} (byte {position + doc_start} of the batch)"
    return InvalidTextError(
        f"invalid UTF-8 at {where}: bytes {shown!r} do not start a well-formed "
        "UTF-8 sequence. Decode the source with the right encoding, repair it with "
        "errors='replace', or skip such documents with on_error='skip'.",
        offset=position, unit="byte", document=document)


def _out_of_alphabet(ids, offset: int, substrate: str, limit: int) -> SymbolDecodeError:
    """The error for base id ``ids[offset]`` outside the ``substrate`` alphabet ``0..limit-1``."""
    return SymbolDecodeError(
        f"symbol id {int(ids[offset])} at offset {offset} is outside the {substrate} "
        f"alphabet 0..{limit - 1}: these ids are not base symbols of this substrate "
        "(expand token ids to base ids first, or pass the right substrate)",
        offset=int(offset))
