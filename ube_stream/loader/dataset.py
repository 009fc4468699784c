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

**Blending several corpora** (``TokenDataset([dir_a, dir_b], seq_len,
weights=[0.7, 0.3])``, Megatron-style).  Each directory is a *component* with
its own windows, shuffled by its own permutation
(``SeedSequence([seed, epoch, c])`` for component ``c``).  The blend of
``num_samples`` samples (default: the most that repeats no component,
``min_c floor(n_c / w_c)`` with the weights normalised) gives component ``c``
``floor(w_c * num_samples)`` samples plus one for the components with the
largest remainders (ties: lower ``c``), and interleaves them evenly: the
``j``-th sample of component ``c`` is placed at key ``(j + 0.5) / count_c``,
and the blend is all samples sorted by ``(key, c)``.  The blend is a pure
function of the directories, weights, seed and epoch, so ranks, DataLoader
workers and ``consumed_samples`` work on it exactly as on one directory; a
component asked for more samples than it has starts another pass over its
windows with permutation ``SeedSequence([seed, epoch, c, pass])``.
A blend is refused (:class:`~ube_stream.errors.ShardFormatError` naming both
directories and both fingerprints) when the directories were encoded with
different tokenizers: the same id would mean different text in different
samples.  ``mixed_tokenizers=True`` opts in (for a model trained over several
vocabularies on purpose); ``fingerprints`` lists every directory's tokenizer,
and ``fingerprint`` is the shared one, or ``"mixed:"`` followed by every
directory's fingerprint (comma-separated, in directory order) for a mixed blend.

**Validation split** (``split=(0.98, 0.02), subset="valid"``).  Per
component, documents are assigned to train or valid by a fixed permutation of
the document indices (``SeedSequence([split_seed, 0x5EED])``, independent of
``seed`` and ``epoch``): the first ``round(n_docs * valid / (train + valid))``
documents of that permutation are the validation set.  The subset's token
stream is its documents concatenated in document order, and windows are cut
from that stream; the two subsets never share a document.

**Document boundaries** (``return_boundaries=True``).  Items are then dicts:
``tokens`` (``seq_len + 1``), ``position_ids`` (``seq_len``, int64: the
position of each input token counted from the window start or from the start
of its document, whichever is later) and ``cu_seqlens`` (int32: ``0``, every
input position where a document starts, ``seq_len``): what flash-attention's
varlen kernels and Megatron's document masking take.

``import ube_stream.loader`` never imports torch; :meth:`TokenDataset.as_torch`
and :func:`torch_dataset` build the ``torch.utils.data.Dataset`` subclass on
first use.
"""
from __future__ import annotations

import functools
import os
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple

import numpy as np

from ..errors import ShardFormatError

__all__ = ["TokenDataset", "collate", "inputs_targets", "torch_dataset"]

#: tokens per block of the serving check (16 KiB ids = 64 KiB): a sample is served once
#: every block it touches was checked against the vocabulary in this process
CHECK_BLOCK = 1 << 14


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
        verify: what is checked when the directories are opened, as in
            :class:`~ube_stream.shards.TokenShards`: ``"header"`` (default: MANIFEST,
            tokenizer fingerprint, every index header and offsets), ``"full"``
            (also the sha256 of every token and index file, and their largest id),
            ``"none"``.  At every level no sample is served before the ids
            around it were checked against the vocabulary: the first read of
            each block of :data:`CHECK_BLOCK` tokens (in each process) takes its
            ``max``; a token id outside the vocabulary is a
            :class:`~ube_stream.errors.ShardFormatError` naming the token file.
        mixed_tokenizers: allow a blend of directories encoded with different
            tokenizers (refused by default; see the module).
        cache_limit: for directories on a store (``s3://...``): the local
            cache's size limit (see :class:`~ube_stream.shards.TokenShards`);
            token files are fetched as samples need them.

    ``len(ds)`` is this rank's number of remaining samples; ``ds[k]`` its ``k``-th one.
    """

    def __init__(self, directory: "str | os.PathLike | Sequence[str | os.PathLike]", seq_len: int, *,
                 seed: int = 0, epoch: int = 0, rank: int = 0, world_size: int = 1, consumed_samples: int = 0,
                 shuffle: bool = True, drop_last: bool = True, dtype: str = "int64",
                 weights: Optional[Sequence[float]] = None, num_samples: Optional[int] = None,
                 split: Optional[Tuple[float, float]] = None, subset: str = "train", split_seed: int = 0,
                 return_boundaries: bool = False, verify: str = "header", mixed_tokenizers: bool = False,
                 cache_limit: "int | str | None" = None):
        if int(seq_len) < 1:
            raise ValueError(f"seq_len must be >= 1, got {seq_len}")
        if int(world_size) < 1 or not 0 <= int(rank) < int(world_size):
            raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
        if np.dtype(dtype) not in (np.dtype(np.int64), np.dtype(np.uint32)):
            raise ValueError(f"dtype must be 'int64' or 'uint32', got {dtype!r}")
        if int(seed) < 0 or int(epoch) < 0:
            raise ValueError(f"seed and epoch must be >= 0, got seed={seed}, epoch={epoch}")
        directories = ([os.fspath(directory)] if isinstance(directory, (str, os.PathLike))
                       else [os.fspath(d) for d in directory])
        if not directories:
            raise ValueError("TokenDataset needs at least one shard directory")
        if weights is None:
            weights = [1.0] * len(directories)
        weights = [float(w) for w in weights]
        if len(weights) != len(directories) or not all(w >= 0 and np.isfinite(w) for w in weights) \
                or sum(weights) <= 0:
            raise ValueError(f"weights must be one non-negative number per directory ({len(directories)}), not "
                             f"all zero; got {weights}")
        if split is not None:
            if len(split) != 2 or min(split) < 0 or sum(split) <= 0:
                raise ValueError(f"split must be (train, valid) non-negative fractions, got {split!r}")
            if subset not in ("train", "valid"):
                raise ValueError(f"subset must be 'train' or 'valid', got {subset!r}")
        self.directories = directories
        self.directory = directories[0]
        self.blended = len(directories) > 1
        self.seq_len = int(seq_len)
        self.seed = int(seed)
        self.epoch = int(epoch)
        self.rank = int(rank)
        self.world_size = int(world_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.dtype = np.dtype(dtype)
        self.split = None if split is None else (float(split[0]), float(split[1]))
        self.subset = subset if split is not None else "all"
        self.split_seed = int(split_seed)
        self.return_boundaries = bool(return_boundaries)
        self.weights = [w / sum(weights) for w in weights]
        self.verify = verify
        self._components = [_Component(d, self.seq_len, self.split, self.subset, self.split_seed, verify,
                                       cache_limit)
                            for d in directories]
        self.fingerprints = [c.fingerprint for c in self._components]
        first = self._components[0]
        other = next((c for c in self._components if c.fingerprint != first.fingerprint), None)
        if other is not None and not mixed_tokenizers:
            from ..errors import ShardFormatError

            raise ShardFormatError(
                f"{other.directory}: encoded with tokenizer {other.fingerprint}, but {first.directory} with "
                f"{first.fingerprint}; a blend of different tokenizers serves ids that mean different text. "
                f"Re-encode one directory with the other's tokenizer, or pass mixed_tokenizers=True if the "
                f"model is meant to see both vocabularies")
        self.fingerprint = first.fingerprint if other is None else "mixed:" + ",".join(self.fingerprints)
        for c in self._components:
            if c.n_samples == 0:
                what = f" ({self.subset} subset of split {self.split})" if self.split is not None else ""
                raise ValueError(f"{c.directory}{what}: {c.n_tokens} tokens, fewer than one sample of seq_len + 1 = "
                                 f"{self.seq_len + 1} tokens; use a smaller seq_len or more data")
        if num_samples is not None:
            if int(num_samples) < 1:
                raise ValueError(f"num_samples must be >= 1, got {num_samples}")
            self.n_samples = int(num_samples)
        elif self.blended:
            self.n_samples = min(int(c.n_samples // w) if w > 0 else 2**62
                                 for c, w in zip(self._components, self.weights))
        else:
            self.n_samples = self._components[0].n_samples
        self.n_tokens = sum(c.n_tokens for c in self._components)
        self._blend: Optional[Tuple[np.ndarray, np.ndarray]] = None
        self._orders: Dict[Tuple[int, int], np.ndarray] = {}
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
        self._orders = {}
        self._set_consumed(0)

    def _component_order(self, c: int, cycle: int) -> np.ndarray:
        """Permutation of component ``c``'s windows for pass ``cycle`` over it."""
        key = (c, cycle)
        if key not in self._orders:
            n = self._components[c].n_samples
            order = np.arange(n, dtype=np.uint32 if n < 2**32 else np.int64)
            if self.shuffle:
                entropy = [self.seed, self.epoch] + ([c] if self.blended else []) + ([cycle] if cycle else [])
                np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy))).shuffle(order)
            order.flags.writeable = False
            self._orders[key] = order
        return self._orders[key]

    def global_order(self) -> np.ndarray:
        """One directory: the epoch's permutation of all window indices (before
        rank split and resume).  A blend: see :meth:`blend_index`."""
        if self.blended or self.n_samples > self._components[0].n_samples:
            raise ValueError("global_order() is for one directory read once per epoch; a blend (or "
                             "num_samples beyond the directory's windows) is described by blend_index()")
        return self._component_order(0, 0)

    def blend_index(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(component, j)`` for every blend position: the position holds the
        ``j``-th sample of that component (see the module for the rule)."""
        if self._blend is None:
            n = self.n_samples
            w = np.asarray(self.weights, dtype=np.float64)
            counts = np.floor(w * n).astype(np.int64)
            remainder = w * n - counts
            short = n - int(counts.sum())
            if short > 0:
                counts[np.lexsort((np.arange(len(w)), -remainder))[:short]] += 1
            comp = np.concatenate([np.full(k, c, dtype=np.int64) for c, k in enumerate(counts)])
            within = np.concatenate([np.arange(k, dtype=np.int64) for k in counts])
            keys = (within + 0.5) / np.maximum(counts, 1)[comp]
            order = np.lexsort((comp, keys))
            self._blend = (comp[order], within[order])
        return self._blend

    def _position_window(self, p: int) -> Tuple[int, int]:
        """``(component, window)`` of blend position ``p``."""
        if not self.blended and p < self._components[0].n_samples:
            return 0, int(self._component_order(0, 0)[p])
        comps, within = self.blend_index()
        c, j = int(comps[p]), int(within[p])
        n = self._components[c].n_samples
        return c, int(self._component_order(c, j // n)[j % n])

    def __len__(self) -> int:
        remaining = self.n_samples - self.consumed_samples
        if self.drop_last:
            return remaining // self.world_size
        return max(remaining - self.rank + self.world_size - 1, 0) // self.world_size

    def _position(self, k: int) -> int:
        n = len(self)
        if not -n <= k < n:
            raise IndexError(f"item {k} out of range for rank {self.rank}'s {n} samples")
        if k < 0:
            k += n
        return self.consumed_samples + self.rank + k * self.world_size

    def sample_index(self, k: int) -> int:
        """Window number (in its directory's stream) of this rank's item ``k``."""
        return self._position_window(self._position(k))[1]

    def sample_source(self, k: int) -> Tuple[int, int]:
        """``(directory index, window number)`` of this rank's item ``k``."""
        return self._position_window(self._position(k))

    def sample_indices(self) -> np.ndarray:
        """Window numbers of all this rank's items, in order (one directory)."""
        start = self.consumed_samples + self.rank
        positions = range(start, start + len(self) * self.world_size, self.world_size)
        if not self.blended and self.n_samples <= self._components[0].n_samples:
            return self.global_order()[start:start + len(self) * self.world_size:self.world_size]
        return np.array([self._position_window(p)[1] for p in positions], dtype=np.int64)

    # -- reading -----------------------------------------------------------

    def read_tokens(self, start: int, stop: int, component: int = 0) -> np.ndarray:
        """Tokens ``[start, stop)`` of a directory's stream (its subset's, with a
        split); a view when inside one shard and no split."""
        return self._components[component].read(start, stop)

    def window(self, i: int, component: int = 0) -> Any:
        """Window ``i`` of a directory's stream (unshuffled): tokens
        ``[i*seq_len, i*seq_len + seq_len + 1)``; a dict with boundaries when
        ``return_boundaries``."""
        comp = self._components[component]
        if not 0 <= i < comp.n_samples:
            raise IndexError(f"window {i} out of range 0..{comp.n_samples - 1}")
        start = i * self.seq_len
        tokens = comp.read(start, start + self.seq_len + 1)
        if self.dtype != np.uint32:
            tokens = tokens.astype(self.dtype)
        if not self.return_boundaries:
            return tokens
        position_ids, cu_seqlens = comp.boundaries(start, self.seq_len)
        return {"tokens": tokens, "position_ids": position_ids, "cu_seqlens": cu_seqlens}

    def __getitem__(self, k: int) -> Any:
        c, i = self.sample_source(int(k))
        return self.window(i, c)

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
                "n_tokens": self.n_tokens, "n_samples": self.n_samples, "fingerprint": self.fingerprint,
                "weights": self.weights, "split": list(self.split) if self.split else None, "subset": self.subset,
                "split_seed": self.split_seed}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Continue from :meth:`state_dict` (rank and world size may differ from the saved run)."""
        for key, mine in (("seq_len", self.seq_len), ("n_tokens", self.n_tokens),
                          ("fingerprint", self.fingerprint), ("shuffle", self.shuffle),
                          ("n_samples", self.n_samples), ("weights", self.weights),
                          ("split", list(self.split) if self.split else None), ("subset", self.subset),
                          ("split_seed", self.split_seed)):
            if key in state and state[key] != mine:
                raise ValueError(f"state_dict {key}={state[key]!r} but this dataset has {mine!r}: "
                                 "resume on the same shard directory with the same seq_len and shuffle")
        self.seed = int(state["seed"])
        self.epoch = int(state["epoch"])
        self._orders = {}
        self._set_consumed(state["consumed_samples"])

    # -- pickling (DataLoader workers): reopen the memmaps, recompute the order

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["_orders"] = {}
        state["_blend"] = None
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        where = self.directory if not self.blended else self.directories
        return (f"TokenDataset({where!r}, seq_len={self.seq_len}, seed={self.seed}, epoch={self.epoch}, "
                f"rank={self.rank}/{self.world_size}, consumed_samples={self.consumed_samples}: "
                f"{len(self)} of {self.n_samples} samples, {self.n_tokens} tokens)")

    def as_torch(self) -> "Any":
        """This dataset as a ``torch.utils.data.Dataset`` returning int64 tensors (imports torch)."""
        return _torch_class()(self)


class _Component:
    """One shard directory's token stream for a :class:`TokenDataset`: all its
    documents, or one subset of a split, as segments of the directory's
    concatenated stream."""

    def __init__(self, directory: str, seq_len: int, split: Optional[Tuple[float, float]], subset: str,
                 split_seed: int, verify: str = "header", cache_limit: "int | str | None" = None):
        from ..shards.encode import TokenShards

        reader = TokenShards(directory, verify=verify, cache_limit=cache_limit)
        self.directory = directory
        # the vocabulary every served id must lie in: the tokenizer's (loaded by the checks),
        # or under verify="none" the size the MANIFEST records (checked by its schema)
        self.vocab_size: Optional[int] = (reader.tokenizer.vocab_size if verify != "none"
                                          else reader.manifest["tokenizer"].get("vocab_size"))
        self.fingerprint = reader.manifest["tokenizer"]["fingerprint"]
        self.shards = list(reader.shards)
        sizes = np.array([s.num_tokens for s in self.shards], dtype=np.int64)
        self.shard_starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        lengths = reader.doc_lengths()
        doc_starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        if split is None:
            keep = np.arange(len(lengths), dtype=np.int64)
        else:
            n_docs = len(lengths)
            n_valid = int(round(n_docs * split[1] / (split[0] + split[1])))
            rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([split_seed, 0x5EED])))
            valid = np.zeros(n_docs, dtype=bool)
            valid[rng.permutation(n_docs)[:n_valid]] = True
            keep = np.flatnonzero(valid if subset == "valid" else ~valid)
        kept_lengths = lengths[keep]
        # the subset stream: kept documents in order; segments = runs of consecutive kept documents
        self.doc_starts = np.concatenate([[0], np.cumsum(kept_lengths)]).astype(np.int64)
        self.n_tokens = int(self.doc_starts[-1])
        if split is None:
            self.seg_starts = np.array([0, self.n_tokens], dtype=np.int64)
            self.seg_global = np.array([0], dtype=np.int64)
        else:
            new_run = np.ones(len(keep), dtype=bool)
            new_run[1:] = np.diff(keep) != 1
            firsts = np.flatnonzero(new_run)
            self.seg_starts = np.concatenate([self.doc_starts[firsts], [self.n_tokens]]).astype(np.int64)
            self.seg_global = doc_starts[keep[firsts]].astype(np.int64)
        self.n_samples = max(self.n_tokens - 1, 0) // seq_len
        # blocks of CHECK_BLOCK tokens of the directory's stream whose ids were checked
        # against the vocabulary (in this process): a window is served only from checked blocks
        self._checked = bytearray(-(-int(self.shard_starts[-1]) // CHECK_BLOCK))

    def _read_global(self, start: int, stop: int) -> np.ndarray:
        if self.vocab_size is not None:   # two lookups per sample once its blocks are checked
            checked = self._checked
            first, last = start // CHECK_BLOCK, (stop - 1) // CHECK_BLOCK
            if last - first > 1 or not (checked[first] and checked[last]):
                for block in range(first, last + 1):
                    if not checked[block]:
                        self._check_block(block)
        # Shard.read maps a local token file once; on a store it fetches only the blocks a window needs
        shards, starts = self.shards, self.shard_starts
        first = min(int(np.searchsorted(starts, start, side="right")) - 1, len(shards) - 1)
        if stop <= int(starts[first + 1]):
            base = int(starts[first])
            return shards[first].read(start - base, stop - base)
        out = np.empty(stop - start, dtype="<u4")
        pos, shard = start, first
        while pos < stop:
            end = min(stop, int(starts[shard + 1]))
            if end > pos:
                base = int(starts[shard])
                out[pos - start:end - start] = shards[shard].read(pos - base, end - base)
            pos, shard = end, shard + 1
        return out

    def read(self, start: int, stop: int) -> np.ndarray:
        """Tokens ``[start, stop)`` of this component's (subset) stream."""
        if not 0 <= start <= stop <= self.n_tokens:
            raise IndexError(f"token range [{start}, {stop}) outside the stream of {self.n_tokens} tokens")
        if start == stop:
            return np.zeros(0, dtype="<u4")
        seg = int(np.searchsorted(self.seg_starts, start, side="right")) - 1
        if stop <= int(self.seg_starts[seg + 1]):
            g = int(self.seg_global[seg]) + start - int(self.seg_starts[seg])
            return self._read_global(g, g + stop - start)
        out = np.empty(stop - start, dtype="<u4")
        pos = start
        while pos < stop:
            end = min(stop, int(self.seg_starts[seg + 1]))
            g = int(self.seg_global[seg]) + pos - int(self.seg_starts[seg])
            out[pos - start:end - start] = self._read_global(g, g + end - pos)
            pos, seg = end, seg + 1
        return out

    def _check_block(self, block: int) -> None:
        """Check the ids of block ``block`` of the directory's stream against the
        vocabulary (a ``max`` per shard part); mark it checked or raise."""
        assert self.vocab_size is not None
        start = block * CHECK_BLOCK
        stop = min(start + CHECK_BLOCK, int(self.shard_starts[-1]))
        starts = self.shard_starts
        shard = int(np.searchsorted(starts, start, side="right")) - 1
        while start < stop:
            end = min(stop, int(starts[shard + 1]))
            if end > start:
                base = int(starts[shard])
                part = np.asarray(self.shards[shard].read(start - base, end - base))
                if int(part.max()) >= self.vocab_size:
                    at = int(np.argmax(part >= self.vocab_size))
                    raise ShardFormatError(
                        f"{self.shards[shard].tokens_path}: token {start - base + at} is id {int(part[at])}, outside "
                        f"the vocabulary of {self.vocab_size} ids: the token file is corrupt, and no sample holding "
                        f"it is served. Find every damaged file with `ube verify --shards {self.directory}`, then "
                        f"re-encode")
            start, shard = end, shard + 1
        self._checked[block] = 1

    def boundaries(self, start: int, seq_len: int) -> Tuple[np.ndarray, np.ndarray]:
        """``(position_ids, cu_seqlens)`` of the inputs ``[start, start + seq_len)``."""
        lo = int(np.searchsorted(self.doc_starts, start, side="right"))
        hi = int(np.searchsorted(self.doc_starts, start + seq_len, side="left"))
        inner = np.unique(self.doc_starts[lo:hi]) - start   # document starts strictly inside (empty docs: once)
        cu = np.concatenate([[0], inner, [seq_len]]).astype(np.int32)
        pos = np.arange(seq_len, dtype=np.int64)
        seg_start = np.repeat(cu[:-1].astype(np.int64), np.diff(cu))
        return pos - seg_start, cu


def torch_dataset(directory: str, seq_len: int, **options: Any) -> "Any":
    """``TokenDataset(directory, seq_len, **options).as_torch()``."""
    return TokenDataset(directory, seq_len, **options).as_torch()


def inputs_targets(sample: Any) -> Tuple[Any, Any]:
    """``(x[..., :-1], x[..., 1:])`` of a sample or a stacked batch (numpy or torch)."""
    return sample[..., :-1], sample[..., 1:]


def collate(samples: Sequence[Any]) -> Any:
    """Stack samples (numpy arrays or torch tensors) and split: ``(inputs, targets)``.

    Use as ``DataLoader(ds.as_torch(), batch_size=B, collate_fn=collate)``.

    Samples with boundaries (``return_boundaries=True``: dicts) give a dict
    instead: ``input_ids`` and ``labels`` (``B x seq_len``), ``position_ids``
    (``B x seq_len``), and the packed form flash-attention's varlen kernels
    take for the batch flattened to ``B * seq_len`` tokens: ``cu_seqlens``
    (int32, every sample's document starts shifted by ``b * seq_len``, then
    ``B * seq_len``) and ``max_seqlen`` (an int).
    """
    if not samples:
        raise ValueError("collate needs at least one sample")
    first = samples[0]
    if isinstance(first, dict):
        return _collate_boundaries(samples)
    return inputs_targets(_stack([s for s in samples]))


def _stack(arrays: Sequence[Any]) -> Any:
    if type(arrays[0]).__module__.startswith("torch"):
        import torch

        return torch.stack(list(arrays))
    return np.stack([np.asarray(a) for a in arrays])


def _collate_boundaries(samples: Sequence[Any]) -> dict:
    missing = [k for k in ("tokens", "position_ids", "cu_seqlens") if any(k not in s for s in samples)]
    if missing:
        raise ValueError(f"collate: boundary samples need the keys tokens, position_ids and cu_seqlens; "
                         f"missing {missing[0]!r}")
    tokens = _stack([s["tokens"] for s in samples])
    seq_len = int(tokens.shape[-1]) - 1
    parts = []
    for b, s in enumerate(samples):
        cu = np.asarray(s["cu_seqlens"], dtype=np.int64)
        if cu.ndim != 1 or len(cu) < 2 or cu[0] != 0 or cu[-1] != seq_len:
            raise ValueError(f"collate: sample {b} has cu_seqlens {cu.tolist()[:8]} that do not run "
                             f"from 0 to seq_len {seq_len}")
        parts.append(cu[:-1] + b * seq_len)
    parts.append(np.array([len(samples) * seq_len], dtype=np.int64))
    cu_all = np.concatenate(parts)
    max_seqlen = int(np.diff(cu_all).max())
    cu_out: Any = cu_all.astype(np.int32)
    if type(tokens).__module__.startswith("torch"):
        import torch

        cu_out = torch.from_numpy(cu_out)
    inputs, labels = inputs_targets(tokens)
    return {"input_ids": inputs, "labels": labels,
            "position_ids": _stack([s["position_ids"] for s in samples]),
            "cu_seqlens": cu_out, "max_seqlen": max_seqlen}


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

        def __getitem__(self, k: int) -> Any:
            sample = self.base[int(k)]
            if isinstance(sample, dict):
                return {"tokens": torch.from_numpy(np.ascontiguousarray(sample["tokens"], dtype=np.int64)),
                        "position_ids": torch.from_numpy(sample["position_ids"]),
                        "cu_seqlens": torch.from_numpy(sample["cu_seqlens"])}
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
