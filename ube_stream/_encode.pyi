"""Type stub of the compiled kernel ube_stream._encode (cython_src/_encode.pyx).

Status convention (cython_src/_status.pxd): each entry returns ``(status,
results...)``, ``status`` 0 or a negative ``ube_stream.errors.STATUS_*`` code
(results None), and on a failure writes ``(position, item)`` into ``err``;
``ube_stream.errors.check_status`` raises the matching exception.
"""
from typing import List, Optional, Tuple

import numpy as np
import numpy.typing as npt

_Err = Optional[npt.ArrayLike]  # None or int64[ERR_SIZE] (ube_stream.errors.err_buffer())

DEFAULT_CACHE_BYTES: int  # each slot's chunk cache: 128 MiB (about a million chunks)
MAX_CACHE_BYTES: int  # 16 GiB

class Encoder:
    cache_entries: int
    cache_bytes: int
    def __init__(
        self,
        merges: npt.NDArray[np.uint32],  # (n, 2) left, right in rank order
        results: npt.NDArray[np.uint32],  # (n,) id each merge gives
        base: int,  # number of base symbols (512 ube, 256 utf8/utf16)
        substrate: int,  # 0 ube, 1 utf8, 2 utf16
        classes: npt.NDArray[np.uint8],  # gpt2_class_table(), 0x110000 entries
        *,
        num_slots: int = 1,  # chunk caches, one per concurrent thread
        cache_entries: int = -1,  # a cap on each cache's chunks (-1: only cache_bytes bounds them)
        cache_bytes: int = ...,  # each cache's memory bound (DEFAULT_CACHE_BYTES; 0: no cache)
        split: int = 0,  # SPLIT_* of the inline pre-tokenizer (0 gpt2, 1 cl100k, 2 llama3, 3 o200k)
        slice_bytes: int = 1 << 20,  # inline split: bytes of a document split at a time (to a safe cut)
        id_map: Optional[npt.NDArray[np.uint32]] = None,  # model id of each internal id
        char_integrity: bool = False,  # merge only where the token made keeps characters whole
        check_utf8: bool = True,  # False: chunks of UTF-8 symbols only skip the check (a sound vocabulary)
        char_rule: str = "pieces",  # with char_integrity: "pieces" or "prefix" (a character's prefix + next piece)
    ) -> None: ...
    split: int
    slice_bytes: int
    @property
    def num_slots(self) -> int: ...
    @property
    def char_integrity(self) -> bool: ...
    @property
    def char_rule(self) -> str: ...
    @property
    def check_utf8(self) -> bool: ...
    def cache_stats(self, slot: int = 0) -> dict: ...  # entries, bytes (held now), hits, misses, sweeps, evicted
    def encode_chunk_symbols(self, symbols: npt.NDArray[np.uint16]) -> npt.NDArray[np.uint32]: ...
    def encode_utf8(
        self,
        data: npt.NDArray[np.uint8],  # documents concatenated, UTF-8
        offsets: npt.NDArray[np.int64],  # ndocs + 1 byte offsets
        slot: int = 0,
        err: _Err = None,
        bos: int = -1,  # an id before every document (-1: none)
        eos: int = -1,  # an id after every document (-1: none)
    ) -> Tuple[int, Optional[npt.NDArray[np.uint32]], Optional[npt.NDArray[np.int64]]]: ...
    # (status, ids, token_offsets); STATUS_INVALID_UTF8: err = (absolute byte offset, document);
    # STATUS_NO_MEMORY: err = (-1, -1)
    def encode_texts(
        self,
        texts: List[str],  # read in place (the UTF-8 CPython keeps for each str)
        first: int = 0,
        stop: int = -1,  # texts[first:stop]; -1: to the end
        slot: int = 0,
        err: _Err = None,
        bos: int = -1,
        eos: int = -1,
    ) -> Tuple[int, Optional[npt.NDArray[np.uint32]], Optional[npt.NDArray[np.int64]]]: ...
    # as encode_utf8; raises TypeError / UnicodeEncodeError (a lone surrogate) naming no document
    def encode_chunks(
        self,
        data: npt.NDArray[np.uint8],
        offsets: npt.NDArray[np.int64],
        ends: npt.NDArray[np.int64],  # chunk_bounds_batch ends (absolute)
        doc_chunk_offsets: npt.NDArray[np.int64],  # ndocs + 1
        slot: int = 0,
        err: _Err = None,
        chunk_tokens: Optional[npt.NDArray[np.int64]] = None,  # len(ends) + 1: where each chunk's ids start, total last
        bos: int = -1,  # as encode_utf8 (not with chunk_tokens)
        eos: int = -1,
    ) -> Tuple[int, Optional[npt.NDArray[np.uint32]], Optional[npt.NDArray[np.int64]]]: ...

def find_first(
    data: npt.NDArray[np.uint8], start: int, stop: int, texts: npt.NDArray[np.uint8], text_offsets: npt.NDArray[np.int64]
) -> int: ...  # leftmost offset in data[start:stop] where one of the texts occurs, or -1

def utf8_offsets(texts: List[str]) -> npt.NDArray[np.int64]:
    """n + 1 offsets of the texts' UTF-8 in one buffer (CPython keeps each str's UTF-8);
    raises UnicodeEncodeError (lone surrogate) or TypeError (not a str)."""
    ...
def utf8_join(texts: List[str]) -> Tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """The UTF-8 of every text in one buffer, and ``n + 1`` byte offsets; raises
    UnicodeEncodeError (lone surrogate) or TypeError (not a str)."""
    ...
def chunk_key_hash(chunk: npt.NDArray[np.uint8]) -> int: ...  # the chunk cache hash (tests)
def output_buffers_kept() -> int: ...  # bytes of freed output buffers kept for later calls
def drop_output_buffers() -> None: ...  # free them
