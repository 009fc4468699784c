"""Type stub of the compiled kernel ube_stream._pretok (cython_src/_pretok.pyx)."""
import numpy as np
import numpy.typing as npt

def split_gpt2(
    data: npt.NDArray[np.uint8] | bytes | memoryview,  # uint8, C-contiguous
    classes: npt.NDArray[np.uint8],  # gpt2_class_table(), 0x110000 entries
    ends: npt.NDArray[np.int64],  # out: >= len(data) entries
) -> int: ...  # number of chunks, or -(byte_offset + 1) on invalid UTF-8

def split_gpt2_batch(
    data: npt.NDArray[np.uint8] | bytes | memoryview,  # uint8, documents concatenated
    doc_offsets: npt.NDArray[np.int64],  # ndocs + 1 byte offsets into data
    classes: npt.NDArray[np.uint8],  # gpt2_class_table()
    ends: npt.NDArray[np.int64],  # out: >= doc_offsets[-1] - doc_offsets[0] entries, absolute
    doc_chunk_offsets: npt.NDArray[np.int64],  # out: ndocs + 1 entries
) -> int: ...  # total chunks, or -(absolute_byte_offset + 1) on invalid UTF-8
