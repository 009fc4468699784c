"""One exception hierarchy for ube-stream.

Every error derives from :class:`UbeError` *and* from the built-in exception a
caller would naturally catch (``ValueError``, ``OSError``, ...), so both
``except UbeError`` and ``except ValueError`` work.  Messages say what was
expected, what was found, where (file, row, byte or character offset) and how
to fix it.
"""
from __future__ import annotations

__all__ = [
    "UbeError",
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
    """Base class of every ube-stream error."""


class InvalidTextError(UbeError, ValueError):
    """Text that is not a sequence of Unicode scalar values.

    ``offset`` is the character offset of the first bad character inside the
    text (for a Python ``str``: a lone surrogate), or the byte offset when the
    text came as bytes (invalid UTF-8).  ``unit`` says which: ``"char"`` or
    ``"byte"``.  In a batch, ``document`` is the index of the bad document and
    ``offset`` is relative to it.
    """

    def __init__(self, message: str, *, offset: int = -1, unit: str = "char",
                 document: int | None = None):
        super().__init__(message)
        self.offset = offset
        self.unit = unit
        self.document = document


class SymbolDecodeError(UbeError, ValueError):
    """A sequence of symbol or token ids that does not decode to text.

    ``offset`` is the index (in base symbols) where the invalid byte sequence
    starts.  Decode with ``errors="replace"`` to get U+FFFD instead.
    """

    def __init__(self, message: str, *, offset: int = -1):
        super().__init__(message)
        self.offset = offset


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
                 offset: int | None = None, reason: str = "bad_input"):
        super().__init__(message)
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
    """Writing an output failed (disk full, quota, read-only file system, no
    permission).  The message names the path, the free space and what to do;
    ``errno`` is the original one.  Nothing committed was changed."""
