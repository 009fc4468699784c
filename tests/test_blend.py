"""TokenDataset over several directories (weighted blend), validation splits by
document, and document boundaries, each checked sample by sample against a
brute-force twin written here: plain Python lists, Fractions for the blend
keys, and the rules as the loader module states them."""
import os
import pickle
from fractions import Fraction

import numpy as np
import pytest
from test_loader import TOKENIZER, write_shard_dir

from ube_stream.errors import ShardFormatError
from ube_stream.loader import TokenDataset, collate
from ube_stream.tokenizer import Tokenizer


def make_dir(path, seed, n_docs, base):
    """A shard directory of ``n_docs`` documents over 3 shards; token values are
    ``base + stream position`` (unique, so any misplaced token shows)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 23, size=n_docs)
    docs, pos = [], base
    for n in lengths:
        docs.append(list(range(pos, pos + int(n))))
        pos += int(n)
    cut = [0, n_docs // 3, 2 * n_docs // 3, n_docs]
    return write_shard_dir(str(path), [docs[cut[i]:cut[i + 1]] for i in range(3)]), docs


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("blend")
    return [make_dir(root / name, seed, n, base) for name, seed, n, base in
            (("a", 1, 60, 0), ("b", 2, 35, 2_000), ("c", 3, 80, 4_000))]


# ------------------------------------------------------------------ the twin

def twin_split(docs, split, subset, split_seed):
    if split is None:
        return docs
    n_valid = int(round(len(docs) * split[1] / (split[0] + split[1])))
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([split_seed, 0x5EED])))
    valid = set(rng.permutation(len(docs))[:n_valid].tolist())
    return [d for i, d in enumerate(docs) if (i in valid) == (subset == "valid")]


def twin_windows(docs, seq_len):
    stream = [t for d in docs for t in d]
    starts, pos = [], 0
    for d in docs:
        starts.append(pos)
        pos += len(d)
    windows = []
    for i in range((len(stream) - 1) // seq_len):
        lo = i * seq_len
        tokens = stream[lo:lo + seq_len + 1]
        inner = sorted({s - lo for s in starts if lo < s < lo + seq_len})
        cu = [0] + inner + [seq_len]
        positions = []
        for a, b in zip(cu, cu[1:]):
            positions += list(range(b - a))
        windows.append((tokens, positions, cu))
    return windows


def twin_blend(ns, weights, n_samples):
    total = sum(weights)
    w = [Fraction(x).limit_denominator(10**9) / Fraction(total).limit_denominator(10**9) for x in weights]
    counts = [int(x * n_samples) for x in w]
    rema = sorted(range(len(w)), key=lambda c: (-(w[c] * n_samples - counts[c]), c))
    for c in rema[:n_samples - sum(counts)]:
        counts[c] += 1
    keyed = sorted((Fraction(2 * j + 1, 2 * counts[c]), c, j) for c in range(len(w)) for j in range(counts[c]))
    return [(c, j) for _, c, j in keyed]


def twin_items(all_docs, seq_len, *, weights=None, seed=0, epoch=0, rank=0, world_size=1, consumed=0,
               split=None, subset="train", split_seed=0, num_samples=None, drop_last=True, shuffle=True):
    comps = [twin_windows(twin_split(d, split, subset, split_seed), seq_len) for d in all_docs]
    weights = weights or [1.0] * len(comps)
    blended = len(comps) > 1
    if num_samples is None:
        total = sum(weights)
        num_samples = (min(int(len(c) // (w / total)) for c, w in zip(comps, weights) if w > 0)
                       if blended else len(comps[0]))
    if blended:
        positions = twin_blend([len(c) for c in comps], weights, num_samples)
    else:
        positions = [(0, j) for j in range(num_samples)]

    perms = {}

    def window_of(c, j):
        n = len(comps[c])
        cycle = j // n
        if (c, cycle) not in perms:
            entropy = [seed, epoch] + ([c] if blended else []) + ([cycle] if cycle else [])
            perm = np.arange(n)
            if shuffle:
                np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy))).shuffle(perm)
            perms[c, cycle] = perm.tolist()
        return comps[c][perms[c, cycle][j % n]]

    remaining = num_samples - consumed
    count = remaining // world_size if drop_last else max(remaining - rank + world_size - 1, 0) // world_size
    return [window_of(*positions[consumed + rank + k * world_size]) for k in range(count)]


def check(ds, expected):
    assert len(ds) == len(expected)
    for k, (tokens, positions, cu) in enumerate(expected):
        item = ds[k]
        if isinstance(item, dict):
            assert item["tokens"].tolist() == tokens
            assert item["position_ids"].tolist() == positions
            assert item["cu_seqlens"].tolist() == cu and item["cu_seqlens"].dtype == np.int32
        else:
            assert item.tolist() == tokens


# ------------------------------------------------------------------ tests

def test_blend_matches_twin_for_every_rank_and_resume(dirs):
    paths, docs = [p for p, _ in dirs], [d for _, d in dirs]
    weights = [0.5, 0.2, 0.3]
    whole = twin_items(docs, 8, weights=weights, seed=7)
    check(TokenDataset(paths, 8, weights=weights, seed=7), whole)
    # ranks split the same sequence; a resumed run continues it
    for world_size in (2, 3):
        for rank in range(world_size):
            check(TokenDataset(paths, 8, weights=weights, seed=7, rank=rank, world_size=world_size),
                  twin_items(docs, 8, weights=weights, seed=7, rank=rank, world_size=world_size))
    resumed = TokenDataset(paths, 8, weights=weights, seed=7, consumed_samples=10, rank=1, world_size=2)
    check(resumed, twin_items(docs, 8, weights=weights, seed=7, consumed=10, rank=1, world_size=2))
    # the proportions are the weights', and the default size repeats no component
    ds = TokenDataset(paths, 8, weights=weights, seed=7)
    comps, _ = ds.blend_index()
    counts = np.bincount(comps, minlength=3)
    assert counts.sum() == ds.n_samples and np.all(np.abs(counts - np.array(weights) * ds.n_samples) < 1)
    assert all(counts[c] <= ds._components[c].n_samples for c in range(3))
    # every sample of every component is a real window of that component (tokens carry their base)
    for k in range(len(ds)):
        c, _ = ds.sample_source(k)
        assert int(ds[k][0]) // 2_000 == c


def test_blend_with_more_samples_wraps_and_pickles(dirs):
    paths, docs = [p for p, _ in dirs][:2], [d for _, d in dirs][:2]
    ds = TokenDataset(paths, 6, weights=[3, 1], seed=2, num_samples=200, epoch=1)
    check(ds, twin_items(docs, 6, weights=[3, 1], seed=2, num_samples=200, epoch=1))
    clone = pickle.loads(pickle.dumps(ds))          # what DataLoader workers get
    assert all(np.array_equal(clone[k], ds[k]) for k in range(0, len(ds), 7))


def test_split_is_disjoint_deterministic_and_matches_twin(dirs):
    path, docs = dirs[0]
    train = TokenDataset(path, 5, split=(0.8, 0.2), subset="train", shuffle=False)
    valid = TokenDataset(path, 5, split=(0.8, 0.2), subset="valid", shuffle=False)
    check(train, twin_items([docs], 5, split=(0.8, 0.2), subset="train", shuffle=False))
    check(valid, twin_items([docs], 5, split=(0.8, 0.2), subset="valid", shuffle=False))
    train_tokens = {t for k in range(len(train)) for t in train[k].tolist()}
    valid_tokens = {t for k in range(len(valid)) for t in valid[k].tolist()}
    assert not train_tokens & valid_tokens           # no document (token) in both
    n_valid_docs = round(len(docs) * 0.2)
    assert len(twin_split(docs, (0.8, 0.2), "valid", 0)) == n_valid_docs
    # another seed or epoch shuffles samples but never moves a document across the split
    other = TokenDataset(path, 5, split=(0.8, 0.2), subset="valid", seed=9, epoch=3)
    assert {t for k in range(len(other)) for t in other[k].tolist()} == valid_tokens
    # blending and splitting together
    paths, all_docs = [p for p, _ in dirs], [d for _, d in dirs]
    check(TokenDataset(paths, 4, weights=[1, 1, 2], split=(0.9, 0.1), subset="valid", seed=5),
          twin_items(all_docs, 4, weights=[1, 1, 2], split=(0.9, 0.1), subset="valid", seed=5))


def test_boundaries_match_twin(dirs):
    path, docs = dirs[2]
    ds = TokenDataset(path, 16, return_boundaries=True, seed=4, world_size=2, rank=1)
    expected = twin_items([docs], 16, seed=4, world_size=2, rank=1)
    check(ds, expected)
    assert any(len(cu) > 3 for _, _, cu in expected)     # windows that really cross documents
    split = TokenDataset(path, 16, return_boundaries=True, split=(0.7, 0.3), subset="valid")
    check(split, twin_items([docs], 16, split=(0.7, 0.3), subset="valid"))


def test_torch_wrapper_returns_boundaries(dirs):
    torch = pytest.importorskip("torch")
    path, _ = dirs[1]
    base = TokenDataset(path, 8, return_boundaries=True)
    item = base.as_torch()[0]
    assert item["tokens"].dtype == torch.int64 and item["tokens"].tolist() == base[0]["tokens"].tolist()
    assert item["cu_seqlens"].dtype == torch.int32


def test_too_short_and_bad_options_are_clear(dirs, tmp_path):
    path, docs = dirs[1]
    n_tokens = sum(len(d) for d in docs)
    with pytest.raises(ValueError, match=f"{n_tokens} tokens, fewer than one sample of seq_len \\+ 1 = "
                                         f"{n_tokens + 1} tokens"):
        TokenDataset(path, n_tokens)
    tiny, _ = make_dir(tmp_path / "tiny", 5, 3, 0)
    with pytest.raises(ValueError, match="valid subset of split"):
        TokenDataset([path, tiny], 40, split=(0.5, 0.5), subset="valid")
    with pytest.raises(ValueError, match="one non-negative number per directory"):
        TokenDataset([path, path], 4, weights=[1])
    with pytest.raises(ValueError, match="subset must be"):
        TokenDataset(path, 4, split=(0.9, 0.1), subset="test")


def test_single_directory_order_is_unchanged(dirs):
    """One directory without the new options keeps the documented order:
    permutation(SeedSequence([seed, epoch])) of the windows."""
    path, docs = dirs[0]
    ds = TokenDataset(path, 7, seed=11, epoch=2)
    perm = np.arange(len(twin_windows(docs, 7)))
    np.random.Generator(np.random.PCG64(np.random.SeedSequence([11, 2]))).shuffle(perm)
    assert ds.global_order().tolist() == perm.tolist()
    assert os.path.basename(ds.directory) == "a"


def test_collate_packs_boundaries_for_varlen_attention(dirs):
    """A batch of boundary samples becomes the packed varlen inputs: cu_seqlens over the
    flattened batch are exactly where position_ids restart at 0, then B * seq_len."""
    path, _ = dirs[2]
    ds = TokenDataset(path, 16, return_boundaries=True, seed=1)
    samples = [ds[k] for k in range(6)]
    batch = collate(samples)
    assert batch["input_ids"].shape == (6, 16) and batch["labels"].shape == (6, 16)
    assert np.array_equal(batch["input_ids"], np.stack([s["tokens"][:-1] for s in samples]))
    assert np.array_equal(batch["labels"], np.stack([s["tokens"][1:] for s in samples]))
    flat_pos = batch["position_ids"].reshape(-1)
    expected = np.append(np.flatnonzero(flat_pos == 0), 6 * 16)
    assert batch["cu_seqlens"].dtype == np.int32 and batch["cu_seqlens"].tolist() == expected.tolist()
    assert batch["max_seqlen"] == int(np.diff(expected).max())
    assert len(expected) > 7                              # some windows really cross documents
    with pytest.raises(ValueError, match="missing 'cu_seqlens'"):
        collate([{"tokens": s["tokens"], "position_ids": s["position_ids"]} for s in samples])


def test_collate_boundaries_through_a_torch_dataloader(dirs):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    path, _ = dirs[2]
    base = TokenDataset(path, 16, return_boundaries=True, seed=1)
    batch = next(iter(DataLoader(base.as_torch(), batch_size=4, collate_fn=collate)))
    numpy_batch = collate([base[k] for k in range(4)])
    assert batch["cu_seqlens"].dtype == torch.int32
    assert batch["cu_seqlens"].tolist() == numpy_batch["cu_seqlens"].tolist()
    assert batch["input_ids"].tolist() == numpy_batch["input_ids"].tolist()
    assert batch["position_ids"].tolist() == numpy_batch["position_ids"].tolist()


# ------------------------------------------------------------------ tokenizers must agree

def _manifest_fingerprint(directory):
    import json

    with open(os.path.join(directory, "MANIFEST.json")) as f:
        return json.load(f)["tokenizer"]["fingerprint"]


def test_blend_of_different_tokenizers_is_refused_unless_asked_for(dirs, tmp_path):
    """A blend whose directories hold ids of different vocabularies would serve ids
    that mean different text: refused, naming both directories and both
    fingerprints (read from each MANIFEST here), unless mixed_tokenizers=True."""
    other_tok = Tokenizer(substrate="utf8", merges=[(101, 32)], special_tokens=["<|endoftext|>", "<|pad|>"])
    assert other_tok.fingerprint != TOKENIZER.fingerprint
    (a, _), (b, _) = dirs[0], dirs[1]
    c = write_shard_dir(str(tmp_path / "other"), [[list(range(0, 40)), list(range(40, 90))]], tokenizer=other_tok)
    fa, fc = _manifest_fingerprint(a), _manifest_fingerprint(c)
    assert fa != fc
    for pair, (first, second) in (([a, c], (a, c)), ([c, a], (c, a))):
        with pytest.raises(ShardFormatError) as info:
            TokenDataset(pair, 8, weights=[0.5, 0.5])
        message = str(info.value)
        assert first in message and second in message and fa in message and fc in message
        assert "mixed_tokenizers=True" in message
    mixed = TokenDataset([a, c], 8, weights=[0.5, 0.5], mixed_tokenizers=True)
    assert mixed.fingerprints == [fa, fc]
    assert mixed.fingerprint == f"mixed:{fa},{fc}"
    assert mixed.state_dict()["fingerprint"] == mixed.fingerprint
    # a checkpoint records every tokenizer: one from a blend with another tokenizer does not resume here
    state = dict(mixed.state_dict(), fingerprint=f"mixed:{fa},{fa}")
    with pytest.raises(ValueError, match="fingerprint"):
        mixed.load_state_dict(state)
    # the same tokenizer everywhere: one fingerprint, which describes every directory
    same = TokenDataset([a, b], 8, weights=[0.5, 0.5])
    assert same.fingerprints == [fa, _manifest_fingerprint(b)] and same.fingerprint == fa
    assert TokenDataset(c, 8).fingerprint == fc
