"""Type stubs of the compiled kernel ``ube_stream._merge`` (cython_src/_merge.pyx)."""
from typing import Callable, Optional, Tuple

import numpy as np
import numpy.typing as npt

PROGRESS_EVERY: int
MAX_WORDS: int                  # the largest max_words (63)

class _MergeState: ...   # training state between prepare_merges and run_merges (opaque)

def train_merges(
    symbols: np.ndarray,        # uint16 (or uint32, n_base > 65536)[total_symbols], C-contiguous: words back to back
    word_offsets: np.ndarray,   # int64[n_words + 1]: word k = symbols[offsets[k]:offsets[k+1]]
    word_counts: np.ndarray,    # int64[n_words], each >= 1
    n_base: int,                # base ids are 0..n_base-1 (512 for ube, 256 for utf8/utf16)
    max_vocab: int,             # stop when n_base + new tokens reaches this
    min_frequency: int,         # stop when no pair occurs max(min_frequency, 1) times
    max_token_length: int,      # longest token in base symbols; < 0: no limit
    progress: Optional[Callable[[int], object]] = None,  # progress(merges_done)
    err: Optional[npt.ArrayLike] = None,  # None or int64[ERR_SIZE]
    *,
    long_word: int = ...,       # words of this many symbols or more merge as linked lists
                                # of positions (default 64; same merges either way)
    char_starts: Optional[np.ndarray] = None,  # uint8[total_symbols], 1 where a character starts:
                                # train under the character-integrity constraint
    char_rule: str = "pieces",  # with char_starts: "pieces" (any two pieces of one character merge)
                                # or "prefix" (SCRIPT's rule: a character's prefix + its next piece)
    chunk_starts: Optional[np.ndarray] = None,  # SuperBPE stage 2: uint8[total_symbols], 1 where a chunk starts
    max_words: int = -1,        # with chunk_starts: a token covers at most this many chunks (1..MAX_WORDS)
    n_atoms: int = -1,          # ids below it are atoms; n_atoms..n_base-1 are tokens with expansions (default n_base)
    expansions: Optional[np.ndarray] = None,  # int32: atoms of ids n_atoms..n_base-1, back to back
    expansion_offsets: Optional[np.ndarray] = None,  # int64[n_base - n_atoms + 1]
) -> Tuple[int, Optional[np.ndarray]]:
    # (status, int32[m, 3]: (left_id, right_id, result_id) in rank order);
    # STATUS_NO_MEMORY: err = (bytes not allocated or -1, -1)
    ...


def prepare_merges(
    symbols: np.ndarray, word_offsets: np.ndarray, word_counts: np.ndarray, n_base: int, max_vocab: int,
    min_frequency: int, max_token_length: int, err: Optional[npt.ArrayLike] = None, *,
    long_word: int = ..., char_starts: Optional[np.ndarray] = None, char_rule: str = "pieces",
    chunk_starts: Optional[np.ndarray] = None, max_words: int = -1, n_atoms: int = -1, expansions: Optional[np.ndarray] = None,
    expansion_offsets: Optional[np.ndarray] = None,
) -> Tuple[int, Optional[_MergeState]]:
    # train_merges' first half (same arguments but progress): the words copied into a state
    # that holds no reference to them; (status, state), state None unless the status is OK
    ...

def run_merges(
    state: _MergeState, progress: Optional[Callable[[int], object]] = None,
    err: Optional[npt.ArrayLike] = None,
) -> Tuple[int, Optional[np.ndarray]]:
    # train_merges' second half, once per state: (status, merges) as train_merges returns them
    ...
