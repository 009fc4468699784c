"""Type stub of the compiled kernel ube_stream._superword (cython_src/_superword.pyx):
SuperBPE stage 2, BPE across the chunks of each span with the stage-2 merges.

Status convention (cython_src/_status.pxd): each entry returns ``(status,
results...)``, ``status`` 0 or a negative ``ube_stream.errors.STATUS_*`` code
(results None), and on a failure writes ``(position, item)`` into ``err``.
"""
from typing import Optional, Tuple

import numpy as np
import numpy.typing as npt

_Err = Optional[npt.ArrayLike]  # None or int64[ERR_SIZE] (ube_stream.errors.err_buffer())
_Result = Tuple[int, Optional[npt.NDArray[np.uint32]], Optional[npt.NDArray[np.int64]]]

class Stage2:
    max_words: int
    def __init__(
        self,
        merges: npt.NDArray[np.uint32],  # (n, 2) the stage-2 merges (merges[k:]) in rank order
        results: npt.NDArray[np.uint32],  # (n,) id each merge gives
        max_words: int,  # the most chunks a token may cover
        n_ids: int,  # input ids lie in 0..n_ids-1 (base symbols and merged tokens)
        id_map: Optional[npt.NDArray[np.uint32]] = None,  # model id of each internal id
    ) -> None: ...
    def merge_span(self, ids: npt.NDArray[np.uint32], chunk_start: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint32]: ...
    def encode_spans(
        self,
        ids: npt.NDArray[np.uint32],  # stage-1 ids of all chunks in order
        chunk_tokens: npt.NDArray[np.int64],  # nchunks + 1: chunk c's ids are ids[chunk_tokens[c]:chunk_tokens[c+1]]
        span_stops: npt.NDArray[np.int64],  # exclusive chunk index where each span ends
        doc_chunk_offsets: npt.NDArray[np.int64],  # ndocs + 1
        err: _Err = None,
    ) -> _Result: ...
    # (status, ids, token_offsets); STATUS_BAD_ID: err = (input position, document)
    def encode_text_spans(
        self,
        data: npt.NDArray[np.uint8],  # documents concatenated, UTF-8
        ends: npt.NDArray[np.int64],  # absolute chunk end offsets (chunk_bounds_batch)
        ids: npt.NDArray[np.uint32],  # stage-1 ids of all chunks in order
        chunk_tokens: npt.NDArray[np.int64],  # nchunks + 1
        doc_chunk_offsets: npt.NDArray[np.int64],  # ndocs + 1
        offsets: npt.NDArray[np.int64],  # ndocs + 1 byte offsets
        classes: npt.NDArray[np.uint8],  # pretokenizer.span_class_table(rule): the tokenizer's span rule
        err: _Err = None,
        bos: int = -1,  # an id before every document (-1: none)
        eos: int = -1,  # an id after every document (-1: none)
    ) -> _Result: ...
    # spans found inline by the rule of _spans.pxd; STATUS_INVALID_UTF8: err = (byte offset, document)
