"""Type stubs of the compiled chunk-counting kernel (cython_src/_count.pyx).

The adding methods return a status (cython_src/_status.pxd): 0, or
``ube_stream.errors.STATUS_NO_MEMORY`` with ``err = (bytes not allocated, -1)``;
``ube_stream.errors.check_status`` raises.  Bad arguments raise ValueError.
"""
from typing import Optional, Tuple

import numpy as np
import numpy.typing as npt

_Bytes = npt.ArrayLike  # uint8, C-contiguous (numpy array, bytes, memoryview)
_Int64 = npt.ArrayLike  # int64, C-contiguous
_Err = Optional[npt.ArrayLike]  # None or int64[ERR_SIZE] (ube_stream.errors.err_buffer())

def _hash(key: _Bytes) -> int: ...

class ChunkCounter:
    def __init__(self, initial_capacity: int = 1024) -> None: ...
    def add_chunks(self, data: _Bytes, ends: _Int64, start: int = 0, err: _Err = None) -> int:
        """Count data[start:ends[0]], data[ends[0]:ends[1]], ...; empty chunks are skipped. Returns the status."""
    def add_weighted(self, key_data: _Bytes, key_offsets: _Int64, counts: _Int64, err: _Err = None) -> int:
        """Add an exported table (key_offsets: n + 1 int64, counts: n int64 >= 0). Returns the status."""
    def export(
        self, min_count: int = 1
    ) -> Tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(key_data uint8, key_offsets int64[n + 1], counts int64[n]), keys sorted by bytes."""
    def clear(self) -> None: ...
    def __len__(self) -> int: ...
    @property
    def total(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def memory_bytes(self) -> int: ...
