"""Type stub of the compiled kernel ube_stream._pretok (cython_src/_pretok.pyx).

Status convention (cython_src/_status.pxd): each entry returns ``(status, result)``,
``status`` 0 or a negative ``ube_stream.errors.STATUS_*`` code, and on a failure
writes ``(position, item)`` into ``err``; ``ube_stream.errors.check_status`` raises.
"""
from typing import List, Optional, Tuple

import numpy as np
import numpy.typing as npt

_Err = Optional[npt.ArrayLike]  # None or int64[ERR_SIZE] (ube_stream.errors.err_buffer())

#: split codes of the pre-tokenizers (ube_stream.pretokenizer.SPLIT_*)
SPLIT_CODES: dict[str, int]

def split(
    data: npt.NDArray[np.uint8] | bytes | memoryview,  # uint8, C-contiguous
    classes: npt.NDArray[np.uint8],  # the kind's table: gpt2_class_table(), tiktoken_class_table(), script_class_table() bytes
    ends: npt.NDArray[np.int64],  # out: >= len(data) entries
    kind: int,  # SPLIT_CODES[...]
    err: _Err = None,
) -> Tuple[int, Optional[int]]: ...  # (status, number of chunks); STATUS_INVALID_UTF8: err = (byte offset, -1)

def split_batch(
    data: npt.NDArray[np.uint8] | bytes | memoryview,  # uint8, documents concatenated
    doc_offsets: npt.NDArray[np.int64],  # ndocs + 1 byte offsets into data
    classes: npt.NDArray[np.uint8],  # the kind's class table
    ends: npt.NDArray[np.int64],  # out: >= doc_offsets[-1] - doc_offsets[0] entries, absolute
    doc_chunk_offsets: npt.NDArray[np.int64],  # out: ndocs + 1 entries
    kind: int,
    err: _Err = None,
) -> Tuple[int, Optional[int]]: ...  # (status, total chunks); STATUS_INVALID_UTF8: err = (absolute byte offset, document)

def split_text(
    text: str,  # UnicodeEncodeError for a lone surrogate
    classes: npt.NDArray[np.uint8],  # the kind's class table
    kind: int,
    err: _Err = None,
) -> Tuple[int, Optional[List[str]]]: ...  # (status, the chunks); STATUS_NO_MEMORY: err = (bytes, -1)

#: the byte joining a span's chunks in its key (0xFF, never in UTF-8)
SPAN_JOIN: int

def span_ends(
    data: npt.NDArray[np.uint8] | bytes | memoryview,  # uint8, the chunks' UTF-8
    chunk_ends: npt.NDArray[np.int64],  # chunk end byte offsets (chunk 0 starts at start)
    classes: npt.NDArray[np.uint8],  # ube_stream.pretokenizer.span_class_table(rule)
    out: npt.NDArray[np.int64],  # out: >= len(chunk_ends) entries, exclusive end chunk index of each span
    start: int = 0,
    doc_chunk_offsets: Optional[npt.NDArray[np.int64]] = None,  # document boundaries (chunk indices) spans never cross
    err: _Err = None,
) -> Tuple[int, Optional[int]]: ...  # (status, number of spans); STATUS_INVALID_UTF8: err = (byte offset, -1)

def span_keys(
    data: npt.NDArray[np.uint8] | bytes | memoryview,
    chunk_ends: npt.NDArray[np.int64],
    spans: npt.NDArray[np.int64],  # span_ends' result
    keys: npt.NDArray[np.uint8],  # out: >= chunk_ends[-1] - start + len(chunk_ends) bytes
    key_ends: npt.NDArray[np.int64],  # out: len(spans) entries
    start: int = 0,
) -> int: ...  # bytes written to keys
