"""Training samples over a token shard directory, for PyTorch or anything else.

:class:`TokenDataset` cuts the token stream of a finished shard directory
(every shard's tokens concatenated in MANIFEST order, documents packed across
their boundaries) into fixed windows of ``seq_len + 1`` tokens that start every
``seq_len`` tokens: sample ``i`` is ``stream[i*seq_len : i*seq_len + seq_len + 1]``.
Neighbouring windows share exactly one token, so every token after the first
is a *target* exactly once per epoch; the tail that does not fill a whole
window is dropped (``n_samples = (n_tokens - 1) // seq_len``).

Order, ranks and resuming (Megatron's conventions)::

    global order   = Generator(PCG64(SeedSequence([seed, epoch]))).permutation(n_samples)
                     (identity when shuffle=False)
    rank r, item k = global order[consumed_samples + r + k * world_size]

``consumed_samples`` counts samples consumed by *all* ranks together, so a
job stopped after ``k`` steps of ``world_size`` samples and restarted with
``consumed_samples = k * world_size`` continues the very same sequence, even
with another world size.  With ``drop_last=True`` (default) every rank gets the
same number of samples (``(n_samples - consumed_samples) // world_size``), so
collective operations never wait on a rank that ran out; ``drop_last=False``
hands the last ``< world_size`` samples to the first ranks.

The dataset is *map-style*: ``ds[k]`` is item ``k`` of this rank, already
shuffled and sharded; read it in order (a plain ``DataLoader(ds.as_torch(),
batch_size=...)``, no ``shuffle=True``, no ``DistributedSampler``).  Samples
are numpy ``int64`` arrays of ``seq_len + 1`` tokens (``dtype="uint32"`` gives
read-only views into the memory-mapped shard when the window lies inside one
shard: zero-copy).  :func:`collate` / :func:`inputs_targets` split them into
``(x[:-1], x[1:])``.

``import ube_stream.loader`` never imports torch; :meth:`TokenDataset.as_torch`
and :func:`torch_dataset` build the ``torch.utils.data.Dataset`` subclass on
first use.
"""
from __future__ import annotations

import functools
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["TokenDataset", "collate", "inputs_targets", "torch_dataset"]


class TokenDataset:
    """Fixed-length training samples over a finished shard directory.

    Args:
        directory: the shard directory (holding ``MANIFEST.json``).
        seq_len: tokens per training step; samples hold ``seq_len + 1`` tokens.
        seed, epoch: the shuffle; the same pair always gives the same order.
        rank, world_size: this process's share (data-parallel rank and size).
        consumed_samples: samples already consumed in this epoch by all ranks together.
        shuffle: ``False`` keeps the stream order (sample ``i`` at position ``i``).
        drop_last: equal sample counts on every rank (default) or hand out the remainder.
        dtype: ``"int64"`` (default, what embedding layers take) or ``"uint32"``
            (the on-disk width; zero-copy views where a window lies in one shard).

    ``len(ds)`` is this rank's number of remaining samples; ``ds[k]`` its ``k``-th one.
    """

    def __init__(self, directory: str, seq_len: int, *, seed: int = 0, epoch: int = 0, rank: int = 0,
                 world_size: int = 1, consumed_samples: int = 0, shuffle: bool = True,
                 drop_last: bool = True, dtype: str = "int64"):
        if int(seq_len) < 1:
            raise ValueError(f"seq_len must be >= 1, got {seq_len}")
        if int(world_size) < 1 or not 0 <= int(rank) < int(world_size):
            raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
        if np.dtype(dtype) not in (np.dtype(np.int64), np.dtype(np.uint32)):
            raise ValueError(f"dtype must be 'int64' or 'uint32', got {dtype!r}")
        if int(seed) < 0 or int(epoch) < 0:
            raise ValueError(f"seed and epoch must be >= 0, got seed={seed}, epoch={epoch}")
        self.directory = os.fspath(directory)
        self.seq_len = int(seq_len)
        self.seed = int(seed)
        self.epoch = int(epoch)
        self.rank = int(rank)
        self.world_size = int(world_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.dtype = np.dtype(dtype)
        from ..shards.encode import TokenShards

        directory_reader = TokenShards(self.directory, verify="header")
        self.fingerprint = directory_reader.manifest["tokenizer"]["fingerprint"]
        self._shards = list(directory_reader.shards)
        sizes = np.array([s.num_tokens for s in self._shards], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.n_tokens = int(self._starts[-1])
        self.n_samples = max(self.n_tokens - 1, 0) // self.seq_len
        self._memmaps: Optional[List[np.ndarray]] = None
        self._order: Optional[np.ndarray] = None
        self._iterated = 0
        self.consumed_samples = 0
        self._set_consumed(consumed_samples)

    # -- order -------------------------------------------------------------

    def _set_consumed(self, consumed_samples: int) -> None:
        consumed_samples = int(consumed_samples)
        if not 0 <= consumed_samples <= self.n_samples:
            raise ValueError(f"consumed_samples={consumed_samples} is outside this epoch's "
                             f"0..{self.n_samples} samples; start the next epoch with set_epoch(epoch + 1)")
        self.consumed_samples = consumed_samples
        self._iterated = 0

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch`` from its beginning (``consumed_samples = 0``)."""
        if int(epoch) < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        self.epoch = int(epoch)
        self._order = None
        self._set_consumed(0)

    def global_order(self) -> np.ndarray:
        """The epoch's permutation of all sample indices (before rank split and resume)."""
        if self._order is None:
            dtype = np.uint32 if self.n_samples < 2**32 else np.int64
            order = np.arange(self.n_samples, dtype=dtype)
            if self.shuffle:
                rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.seed, self.epoch])))
                rng.shuffle(order)
            order.flags.writeable = False
            self._order = order
        return self._order

    def __len__(self) -> int:
        remaining = self.n_samples - self.consumed_samples
        if self.drop_last:
            return remaining // self.world_size
        return max(remaining - self.rank + self.world_size - 1, 0) // self.world_size

    def sample_index(self, k: int) -> int:
        """Index in the token stream (window number) of this rank's item ``k``."""
        n = len(self)
        if not -n <= k < n:
            raise IndexError(f"item {k} out of range for rank {self.rank}'s {n} samples")
        if k < 0:
            k += n
        return int(self.global_order()[self.consumed_samples + self.rank + k * self.world_size])

    def sample_indices(self) -> np.ndarray:
        """Window numbers of all this rank's items, in order."""
        start = self.consumed_samples + self.rank
        return self.global_order()[start:start + len(self) * self.world_size:self.world_size]

    # -- reading -----------------------------------------------------------

    def _maps(self) -> List[np.ndarray]:
        if self._memmaps is None:
            self._memmaps = [s.tokens for s in self._shards]
        return self._memmaps

    def read_tokens(self, start: int, stop: int) -> np.ndarray:
        """Tokens ``[start, stop)`` of the concatenated stream (a view when inside one shard)."""
        if not 0 <= start <= stop <= self.n_tokens:
            raise IndexError(f"token range [{start}, {stop}) outside the stream of {self.n_tokens} tokens")
        if start == stop:
            return np.zeros(0, dtype="<u4")
        maps = self._maps()
        first = int(np.searchsorted(self._starts, start, side="right")) - 1
        first = min(first, len(maps) - 1)
        base = int(self._starts[first])
        if stop <= int(self._starts[first + 1]):
            return maps[first][start - base:stop - base]
        out = np.empty(stop - start, dtype="<u4")
        pos, shard = start, first
        while pos < stop:
            end = min(stop, int(self._starts[shard + 1]))
            if end > pos:
                base = int(self._starts[shard])
                out[pos - start:end - start] = maps[shard][pos - base:end - base]
            pos, shard = end, shard + 1
        return out

    def window(self, i: int) -> np.ndarray:
        """Window ``i`` of the stream (unshuffled): tokens ``[i*seq_len, i*seq_len + seq_len + 1)``."""
        if not 0 <= i < self.n_samples:
            raise IndexError(f"window {i} out of range 0..{self.n_samples - 1}")
        start = i * self.seq_len
        tokens = self.read_tokens(start, start + self.seq_len + 1)
        if self.dtype == np.uint32:
            return tokens
        return tokens.astype(self.dtype)

    def __getitem__(self, k: int) -> np.ndarray:
        return self.window(self.sample_index(int(k)))

    def __iter__(self) -> Iterator[np.ndarray]:
        """This rank's samples in order; progress shows in :meth:`state_dict`."""
        for k in range(len(self)):
            sample = self[k]
            self._iterated = k + 1
            yield sample

    # -- state -------------------------------------------------------------

    def state_dict(self, consumed_samples: Optional[int] = None) -> Dict[str, Any]:
        """What a checkpoint needs to continue the same sequence.

        ``consumed_samples`` defaults to the start position plus what
        :meth:`__iter__` yielded on every rank (``world_size`` per step);
        pass your training loop's global count when reading through
        DataLoader worker processes.
        """
        if consumed_samples is None:
            consumed_samples = self.consumed_samples + self._iterated * self.world_size
        return {"format": "ube-stream-loader", "version": 1, "seed": self.seed, "epoch": self.epoch,
                "consumed_samples": int(consumed_samples), "seq_len": self.seq_len, "shuffle": self.shuffle,
                "n_tokens": self.n_tokens, "n_samples": self.n_samples, "fingerprint": self.fingerprint}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from :meth:`state_dict` (rank and world size may differ from the saved run)."""
        for key, mine in (("seq_len", self.seq_len), ("n_tokens", self.n_tokens),
                          ("fingerprint", self.fingerprint), ("shuffle", self.shuffle)):
            if key in state and state[key] != mine:
                raise ValueError(f"state_dict {key}={state[key]!r} but this dataset has {mine!r}: "
                                 "resume on the same shard directory with the same seq_len and shuffle")
        self.seed = int(state["seed"])
        self.epoch = int(state["epoch"])
        self._order = None
        self._set_consumed(state["consumed_samples"])

    # -- pickling (DataLoader workers): reopen the memmaps, recompute the order

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["_memmaps"] = None
        state["_order"] = None
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return (f"TokenDataset({self.directory!r}, seq_len={self.seq_len}, seed={self.seed}, epoch={self.epoch}, "
                f"rank={self.rank}/{self.world_size}, consumed_samples={self.consumed_samples}: "
                f"{len(self)} of {self.n_samples} samples, {self.n_tokens} tokens)")

    def as_torch(self) -> "Any":
        """This dataset as a ``torch.utils.data.Dataset`` returning int64 tensors (imports torch)."""
        return _torch_class()(self)


def torch_dataset(directory: str, seq_len: int, **options: Any) -> "Any":
    """``TokenDataset(directory, seq_len, **options).as_torch()``."""
    return TokenDataset(directory, seq_len, **options).as_torch()


def inputs_targets(sample: Any) -> Tuple[Any, Any]:
    """``(x[..., :-1], x[..., 1:])`` of a sample or a stacked batch (numpy or torch)."""
    return sample[..., :-1], sample[..., 1:]


def collate(samples: Sequence[Any]) -> Tuple[Any, Any]:
    """Stack samples (numpy arrays or torch tensors) and split: ``(inputs, targets)``.

    Use as ``DataLoader(ds.as_torch(), batch_size=B, collate_fn=collate)``.
    """
    if not samples:
        raise ValueError("collate needs at least one sample")
    first = samples[0]
    if type(first).__module__.startswith("torch"):
        import torch

        batch = torch.stack(list(samples))
    else:
        batch = np.stack([np.asarray(s) for s in samples])
    return inputs_targets(batch)


@functools.lru_cache(maxsize=None)
def _torch_class() -> type:
    try:
        import torch
        from torch.utils.data import Dataset
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("TokenDataset.as_torch() needs PyTorch: pip install 'ube-stream[torch]'") from None

    class TorchTokenDataset(Dataset):
        """Map-style ``torch.utils.data.Dataset`` over a :class:`TokenDataset`:
        item ``k`` is this rank's ``k``-th sample as an int64 tensor of ``seq_len + 1``."""

        def __init__(self, base: TokenDataset):
            self.base = base

        def __len__(self) -> int:
            return len(self.base)

        def __getitem__(self, k: int) -> "torch.Tensor":
            sample = self.base[int(k)]
            return torch.from_numpy(np.ascontiguousarray(sample, dtype=np.int64))

        def __getattr__(self, name: str) -> Any:
            if name == "base":
                raise AttributeError(name)
            return getattr(self.base, name)

        def __repr__(self) -> str:
            return f"TorchTokenDataset({self.base!r})"

    # picklable by reference (DataLoader workers): resolved through the module __getattr__ below
    TorchTokenDataset.__module__ = __name__
    TorchTokenDataset.__qualname__ = "TorchTokenDataset"
    return TorchTokenDataset


def __getattr__(name: str) -> Any:
    if name == "TorchTokenDataset":
        return _torch_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
