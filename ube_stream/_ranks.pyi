"""Stubs of the compiled rank-file kernel (cython_src/_ranks.pyx).

Status convention (cython_src/_status.pxd): the entry returns ``(status,
result)``, ``status`` 0 or ``ube_stream.errors.STATUS_NOT_BPE`` (result None),
and on a failure writes ``(parts left, token index)`` into ``err``.
"""
from typing import List, Optional, Tuple

import numpy as np
import numpy.typing as npt

def merges_from_ranks(
    data: bytes | memoryview | np.ndarray,  # uint8: the multi-byte tokens, concatenated in rank order
    offsets: np.ndarray,  # int64, n_tokens + 1 bounds into data; each token >= 2 bytes, distinct
    err: Optional[npt.ArrayLike] = None,
) -> Tuple[int, Optional[np.ndarray]]:
    """(status, int32 n x 2 merges): token k (internal id 256 + k) = merges[k] = (left, right)."""

def expand_merges(
    merges: np.ndarray,  # int64 n x 2: (left, right) in rank order
    base_size: int,
    max_symbols: int,  # a token's limit
    max_total: int,  # all tokens' limit
    err: Optional[npt.ArrayLike] = None,
) -> Tuple[int, Optional[np.ndarray], Optional[np.ndarray], Optional[np.ndarray]]:
    """(status, results int64[n], symbols uint16, offsets int64[tokens + 1]); STATUS_NOT_BPE:
    err = (tokens defined at the rank, rank); STATUS_TOO_LARGE: err = (size, rank)."""

def expansion_tuples(symbols: np.ndarray, offsets: np.ndarray) -> List[Tuple[int, ...]]: ...
