"""Type stub of the compiled kernel ube_stream._decode (cython_src/_decode.pyx).

Status convention (cython_src/_status.pxd): each entry returns ``status`` or
``(status, result)``, ``status`` 0 or a negative ``ube_stream.errors.STATUS_*``
code, and on a failure writes ``(position, item)`` into ``err``;
``ube_stream.errors.check_status`` raises.
"""
from typing import Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

_Err = Optional[npt.ArrayLike]  # None or int64[ERR_SIZE] (ube_stream.errors.err_buffer())

#: token kinds of decode_tokens's entries: raw, partial, special, symbols, none
KINDS: dict[str, int]

def ids_from_sequence(
    seq: Sequence[int],  # a list or tuple of ints
    out: npt.NDArray[np.uint32],  # out: >= len(seq) entries
    err: _Err = None,
) -> int: ...  # status; STATUS_BAD_ID: err = (-1, position of the first item not an int in 0..2**32-1)

class DecodeTables:
    """A tokenizer's decode tables, checked once and held for decode_tokens / decode_sequence."""

    def __init__(
        self,
        token_bytes: npt.NDArray[np.uint8],  # each token's UTF-8 bytes, + 16 bytes of padding
        entries: npt.NDArray[np.uint64],  # by model id: offset | length << 32 | kind << 56
        symbols: npt.NDArray[np.uint16],  # base symbols of every non-special token (internal ids)
        symbol_offsets: npt.NDArray[np.int64],  # n_tokens + 1
        id_map: npt.NDArray[np.int64],  # model id -> internal id (-1: none); empty: the same
        substrate: int,
    ) -> None: ...  # ValueError: no padding, no symbol offsets, an unknown substrate code

def decode_tokens(
    tables: DecodeTables,
    ids: npt.NDArray[np.uint32],  # model ids
    as_bytes: bool,
    err: _Err = None,
) -> Tuple[int, Optional[Union[str, bytes]]]: ...
# (status, text or bytes); STATUS_BAD_ID: err = (-1, token position); STATUS_INVALID_SYMBOLS:
# err = (-1, -1), use decode_exact for the position; STATUS_NO_MEMORY: err = (bytes, -1)

def decode_sequence(
    tables: DecodeTables,
    seq: Sequence[int],  # a list or tuple of ints (TypeError otherwise)
    as_bytes: bool,
    err: _Err = None,
) -> Tuple[int, Optional[Union[str, bytes]]]: ...
# decode_tokens of the items, read straight from the int objects (the GIL held); STATUS_BAD_ID:
# err = (-1, position of the first item that is not an exact int below 2**30 or has no token),
# then convert with substrate.as_id_array and use decode_tokens, which names what is wrong

def decode_exact(
    ids: npt.NDArray[np.uint32],  # internal ids
    table: npt.NDArray[np.uint16],  # base symbols of every non-special token
    table_offsets: npt.NDArray[np.int64],  # n_tokens + 1
    special_bytes: npt.NDArray[np.uint8],  # UTF-8 of the special tokens, concatenated
    special_offsets: npt.NDArray[np.int64],  # n_special + 1
    substrate: int,
    err: _Err = None,
) -> Tuple[int, Optional[str]]: ...
# (status, text); STATUS_INVALID_SYMBOLS: err = (symbol offset, token position);
# STATUS_BAD_ID: err = (-1, token position); STATUS_NO_MEMORY: err = (bytes, -1)
