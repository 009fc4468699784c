"""TokenDataset and the Megatron-LM exporter.

Truth is independent of the package: shard directories are written here with
numpy straight from the agreed format spec (uneven shards, empty documents, a
shard with no tokens), the expected samples are slices of the concatenated
documents, and the Megatron files are read back by `read_megatron` below,
written from the layout of Megatron-LM's `indexed_dataset.py` (`_IndexWriter`)
and sharing no code with the writer.
"""
import argparse
import hashlib
import json
import os
import pickle
import struct
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ube_stream.errors import ShardFormatError
from ube_stream.loader import TokenDataset, collate, export_megatron, inputs_targets
from ube_stream.tokenizer import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# a real (tiny) tokenizer: shard directories carry tokenizer.json, and the
# reader checks its fingerprint against MANIFEST and the index headers
# 8,449 ids (every byte pair (a, b < 32) merged): synthetic token streams whose ids are their
# positions stay inside the vocabulary, which the dataset checks every sample against
TOKENIZER = Tokenizer(substrate="utf8", merges=[(a, b) for a in range(256) for b in range(32)],
                      special_tokens=["<|endoftext|>"])
FINGERPRINT = TOKENIZER.fingerprint


# ---------------------------------------------------------------------------
# writing the shard format directly (the spec, not ube_stream.shards)


def write_shard_dir(path, shards, *, unit_id="00000-000000000000", tokenizer=TOKENIZER):
    """shards: list of shards, each a list of documents (sequences of ints < 2**32)."""
    fingerprint = tokenizer.fingerprint
    os.makedirs(os.path.join(path, "shards"))
    records = []
    row = 0
    for k, docs in enumerate(shards):
        name = f"{unit_id}-{k:04d}"
        tokens = np.array([t for d in docs for t in d], dtype="<u4")
        offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype("<u8")
        tokens_file, index_file = f"shards/{name}.tokens", f"shards/{name}.idx"
        with open(os.path.join(path, tokens_file), "wb") as f:
            f.write(tokens.tobytes())
        digest = hashlib.sha256(tokens.tobytes()).digest()
        header = (b"UBESHRD1" + struct.pack("<II", 1, 4) + struct.pack("<QQ", len(docs), tokens.size) + digest
                  + bytes.fromhex(fingerprint[7:]) + bytes(32))
        assert len(header) == 128
        rows = np.arange(row, row + len(docs), dtype="<u8")
        row += len(docs)
        with open(os.path.join(path, index_file), "wb") as f:
            f.write(header + offsets.tobytes() + rows.tobytes() + np.zeros(len(docs), "<u4").tobytes())
        records.append({"name": name, "unit_id": unit_id, "tokens_file": tokens_file, "index_file": index_file,
                        "documents": len(docs), "tokens": int(tokens.size), "sha256": digest.hex()})
    tokenizer.save(os.path.join(path, "tokenizer.json"))
    manifest = {"format": "ube-stream-shards", "version": 1, "ube_stream_version": "0.1.0", "dtype": "uint32",
                "tokenizer": {"file": "tokenizer.json", "fingerprint": fingerprint, "substrate": "utf8",
                              "vocab_size": tokenizer.vocab_size},
                "special_ids": {"eos": None, "bos": None}, "options": {"eos_token": None, "bos_token": None},
                "sources": [{"source_id": 0, "path": "synthetic", "size": 0, "format": "jsonl",
                             "rows_read": row, "documents": row, "skipped": {}}],
                "shards": records,
                "totals": {"documents": row, "tokens": sum(r["tokens"] for r in records), "shards": len(records)}}
    with open(os.path.join(path, "MANIFEST.json"), "w") as f:
        json.dump(manifest, f)
    return path


def uneven_shards(rng, n_shards=6):
    """Documents whose tokens are their stream positions (unique), in shards of uneven size,
    with empty documents and one shard holding only empty documents."""
    shards, pos = [], 0
    for k in range(n_shards):
        docs = []
        n_docs = 0 if k == 0 else int(rng.integers(1, 9))
        for _ in range(n_docs):
            length = int(rng.choice([0, 0, 1, 2, 5, 17, 40, 120]))
            if k == 2:
                length = 0  # a shard of empty documents: no tokens at all
            docs.append(list(range(pos, pos + length)))
            pos += length
        shards.append(docs)
    return shards


def stream_of(shards):
    return np.array([t for docs in shards for d in docs for t in d], dtype=np.int64)


@pytest.fixture(scope="module")
def shard_dir(tmp_path_factory):
    shards = uneven_shards(np.random.default_rng(7))
    path = write_shard_dir(str(tmp_path_factory.mktemp("shards") / "dir"), shards)
    stream = stream_of(shards)
    assert np.array_equal(stream, np.arange(stream.size))
    assert stream.size > 300
    return path, shards, stream


# ---------------------------------------------------------------------------
# windows


@pytest.mark.parametrize("seq_len", [1, 2, 7, 64, 250])
def test_windows_are_slices_of_the_concatenated_stream(shard_dir, seq_len):
    path, _, stream = shard_dir
    ds = TokenDataset(path, seq_len, shuffle=False)
    assert ds.n_tokens == stream.size
    assert ds.n_samples == len(ds) == (stream.size - 1) // seq_len
    for k in range(len(ds)):
        sample = ds[k]
        assert sample.dtype == np.int64 and sample.shape == (seq_len + 1,)
        assert np.array_equal(sample, stream[k * seq_len:k * seq_len + seq_len + 1])
        if k:  # neighbouring windows overlap by exactly one token
            assert ds[k - 1][-1] == sample[0]
            assert np.intersect1d(ds[k - 1], sample).size == 1


def test_windows_cross_shard_boundaries(shard_dir):
    path, shards, stream = shard_dir
    ds = TokenDataset(path, 16, shuffle=False)
    boundaries = np.cumsum([sum(len(d) for d in docs) for docs in shards])[:-1]
    crossing = [i for i in range(ds.n_samples) if any(i * 16 < b < i * 16 + 17 for b in boundaries)]
    assert crossing, "the fixture must have windows that cross shard boundaries"
    for i in crossing:
        assert np.array_equal(ds.window(i), stream[i * 16:i * 16 + 17])


@pytest.mark.parametrize("seq_len", [1, 5, 33])
def test_every_token_is_a_target_exactly_once_per_epoch(shard_dir, seq_len):
    path, _, stream = shard_dir
    targets = []
    for rank in range(3):
        ds = TokenDataset(path, seq_len, seed=11, epoch=2, rank=rank, world_size=3, drop_last=False)
        targets.extend(inputs_targets(x)[1] for x in ds)
    targets = np.sort(np.concatenate(targets))
    n = (stream.size - 1) // seq_len
    # tokens are their positions: targets are exactly positions 1..n*seq_len, each once
    assert np.array_equal(targets, np.arange(1, n * seq_len + 1))
    assert stream.size - 1 - n * seq_len < seq_len  # only the incomplete tail is dropped


@settings(max_examples=40, deadline=None)
@given(doc_lengths=st.lists(st.lists(st.integers(0, 30), max_size=6), min_size=1, max_size=6),
       seq_len=st.integers(1, 40), data=st.data())
def test_windows_property(tmp_path_factory, doc_lengths, seq_len, data):
    rng = np.random.default_rng(len(doc_lengths) * 1000 + seq_len)
    shards = [[rng.integers(0, TOKENIZER.vocab_size, size=n, dtype=np.uint64).tolist() for n in docs]
              for docs in doc_lengths]
    path = write_shard_dir(str(tmp_path_factory.mktemp("prop") / "dir"), shards)
    stream = stream_of(shards)
    if stream.size < seq_len + 1:   # shorter than one sample: an error naming both sizes
        with pytest.raises(ValueError, match=f": {stream.size} tokens, fewer than one sample of seq_len \\+ 1 = "
                                             f"{seq_len + 1} tokens"):
            TokenDataset(path, seq_len)
        return
    ds = TokenDataset(path, seq_len, seed=data.draw(st.integers(0, 2**63)), dtype="uint32")
    assert len(ds) == max(stream.size - 1, 0) // seq_len
    for k in range(len(ds)):
        i = ds.sample_index(k)
        assert np.array_equal(ds[k], stream[i * seq_len:i * seq_len + seq_len + 1])


def test_uint32_samples_are_zero_copy_views_inside_a_shard(shard_dir):
    path, shards, stream = shard_dir
    ds = TokenDataset(path, 4, shuffle=False, dtype="uint32")
    ends = np.cumsum([sum(len(d) for d in docs) for docs in shards])
    shard_of = lambda pos: int(np.searchsorted(ends, pos, side="right"))  # noqa: E731
    inside = [i for i in range(ds.n_samples) if shard_of(4 * i) == shard_of(4 * i + 4)]
    crossing = [i for i in range(ds.n_samples) if shard_of(4 * i) != shard_of(4 * i + 4)]
    assert inside and crossing
    for i in inside[:10]:
        sample = ds.window(i)
        assert sample.dtype == np.uint32 and not sample.flags.writeable and not sample.flags.owndata
        assert np.array_equal(sample, stream[4 * i:4 * i + 5])
    for i in crossing:
        sample = ds.window(i)
        assert sample.flags.owndata and np.array_equal(sample, stream[4 * i:4 * i + 5])


# ---------------------------------------------------------------------------
# order, ranks, resume


def test_order_is_the_documented_permutation(shard_dir):
    path, _, _ = shard_dir
    ds = TokenDataset(path, 3, seed=5, epoch=9)
    expected = np.random.Generator(np.random.PCG64(np.random.SeedSequence([5, 9]))).permutation(ds.n_samples)
    assert np.array_equal(ds.global_order(), expected)
    assert [ds.sample_index(k) for k in range(len(ds))] == expected.tolist()


def test_same_seed_and_epoch_same_order_else_different(shard_dir):
    path, _, _ = shard_dir
    a = [x.tolist() for x in TokenDataset(path, 3, seed=1, epoch=0)]
    assert a == [x.tolist() for x in TokenDataset(path, 3, seed=1, epoch=0)]
    assert a != [x.tolist() for x in TokenDataset(path, 3, seed=1, epoch=1)]
    assert a != [x.tolist() for x in TokenDataset(path, 3, seed=2, epoch=0)]
    ds = TokenDataset(path, 3, seed=1, epoch=0, consumed_samples=10)
    ds.set_epoch(1)
    assert ds.consumed_samples == 0
    assert [x.tolist() for x in ds] == [x.tolist() for x in TokenDataset(path, 3, seed=1, epoch=1)]
    # every epoch is a permutation of the same windows
    assert sorted(a) == sorted(x.tolist() for x in ds)


@pytest.mark.parametrize("world_size", [1, 2, 3, 5, 8])
def test_ranks_are_disjoint_and_cover_all_samples(shard_dir, world_size):
    path, _, _ = shard_dir
    n = TokenDataset(path, 4).n_samples
    parts = [TokenDataset(path, 4, seed=3, rank=r, world_size=world_size, drop_last=False).sample_indices()
             for r in range(world_size)]
    merged = np.concatenate(parts)
    assert merged.size == n and np.array_equal(np.sort(merged), np.arange(n))
    # rank r takes every world_size-th sample of the global order
    order = TokenDataset(path, 4, seed=3).global_order()
    for r, part in enumerate(parts):
        assert np.array_equal(part, order[r::world_size])
    # drop_last: equal lengths, disjoint, fewer than world_size samples left out
    equal = [TokenDataset(path, 4, seed=3, rank=r, world_size=world_size).sample_indices() for r in range(world_size)]
    assert len({p.size for p in equal}) == 1
    merged = np.concatenate(equal)
    assert np.unique(merged).size == merged.size and n - merged.size < world_size


@pytest.mark.parametrize("world_size,stop", [(1, 0), (1, 17), (2, 9), (3, 5), (4, 1)])
def test_resume_continues_the_same_sequence(shard_dir, world_size, stop):
    path, _, _ = shard_dir
    opts = dict(seed=21, epoch=4, world_size=world_size)
    for rank in range(world_size):
        full = [x.tolist() for x in TokenDataset(path, 6, rank=rank, **opts)]
        first = TokenDataset(path, 6, rank=rank, **opts)
        it = iter(first)
        head = [next(it).tolist() for _ in range(stop)]
        state = first.state_dict()
        assert state["consumed_samples"] == stop * world_size  # global, as Megatron counts
        resumed = TokenDataset(path, 6, rank=rank, world_size=world_size)
        resumed.load_state_dict(json.loads(json.dumps(state)))
        assert head + [x.tolist() for x in resumed] == full
        again = TokenDataset(path, 6, rank=rank, consumed_samples=stop * world_size, **opts)
        assert head + [x.tolist() for x in again] == full


def test_resume_with_another_world_size_keeps_the_global_sequence(shard_dir):
    path, _, _ = shard_dir
    order = TokenDataset(path, 6, seed=2).global_order()
    consumed = 12  # 6 steps on 2 ranks, then continue on 3 ranks
    parts = [TokenDataset(path, 6, seed=2, rank=r, world_size=3, consumed_samples=consumed, drop_last=False)
             for r in range(3)]
    interleaved = [p.sample_index(k) for k in range(max(map(len, parts))) for p in parts if k < len(p)]
    assert interleaved == order[consumed:].tolist()


# ---------------------------------------------------------------------------
# errors


def test_errors_name_the_problem(tmp_path, shard_dir):
    path, shards, _ = shard_dir
    with pytest.raises(ShardFormatError, match="MANIFEST.json"):
        TokenDataset(str(tmp_path), 4)
    with pytest.raises(ValueError, match="set_epoch"):
        TokenDataset(path, 4, consumed_samples=10**6)
    with pytest.raises(ValueError, match="rank"):
        TokenDataset(path, 4, rank=2, world_size=2)
    with pytest.raises(ValueError, match="seq_len"):
        TokenDataset(path, 0)
    ds = TokenDataset(path, 4)
    with pytest.raises(IndexError):
        ds[len(ds)]
    state = TokenDataset(path, 5).state_dict()
    with pytest.raises(ValueError, match="seq_len"):
        ds.load_state_dict(state)
    damaged = write_shard_dir(str(tmp_path / "damaged"), [[[1, 2, 3]], [[4, 5]]])
    with open(os.path.join(damaged, "shards", "00000-000000000000-0001.tokens"), "r+b") as f:
        f.truncate(4)
    with pytest.raises(ShardFormatError, match=r"0001\.tokens: token file is 4 bytes but .* 2 tokens \(8 bytes\)"):
        TokenDataset(damaged, 2)


def test_tiny_and_empty_streams(tmp_path):
    empty = write_shard_dir(str(tmp_path / "e"), [[[]], []])
    with pytest.raises(ValueError, match="e: 0 tokens, fewer than one sample of seq_len \\+ 1 = 5 tokens"):
        TokenDataset(empty, 4)
    exact = TokenDataset(write_shard_dir(str(tmp_path / "x"), [[[7, 8]], [[9]]]), 2)
    assert [x.tolist() for x in exact] == [[7, 8, 9]]
    short = write_shard_dir(str(tmp_path / "s"), [[[7, 8]]])
    with pytest.raises(ValueError, match="s: 2 tokens, fewer than one sample of seq_len \\+ 1 = 3 tokens"):
        TokenDataset(short, 2)


def test_collate_splits_inputs_and_targets(shard_dir):
    path, _, stream = shard_dir
    ds = TokenDataset(path, 8, shuffle=False)
    inputs, targets = collate([ds[0], ds[1], ds[2]])
    assert inputs.shape == targets.shape == (3, 8)
    assert np.array_equal(inputs, stream[:24].reshape(3, 8))
    assert np.array_equal(targets, stream[1:25].reshape(3, 8))


# ---------------------------------------------------------------------------
# torch


def test_import_never_imports_torch(shard_dir):
    path, _, _ = shard_dir
    code = ("import sys, ube_stream, ube_stream.loader, ube_stream.cli.loader\n"
            "from ube_stream.loader import TokenDataset, collate\n"
            f"ds = TokenDataset({path!r}, 4)\n"
            "inputs, targets = collate([ds[0], ds[1]])\n"
            "assert inputs.shape == (2, 4)\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_torch_dataset_and_dataloader(shard_dir):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, Dataset

    from ube_stream.loader import torch_dataset

    path, _, _ = shard_dir
    base = TokenDataset(path, 8, seed=4, rank=1, world_size=2)
    tds = base.as_torch()
    assert isinstance(tds, Dataset) and len(tds) == len(base)
    assert tds[0].dtype == torch.int64 and tds[0].tolist() == base[0].tolist()
    expected = np.stack(list(base))
    batches = list(DataLoader(tds, batch_size=5, collate_fn=collate))
    inputs = torch.cat([b[0] for b in batches])
    targets = torch.cat([b[1] for b in batches])
    assert inputs.tolist() == expected[:, :-1].tolist() and targets.tolist() == expected[:, 1:].tolist()
    # picklable for worker processes: the memmaps are reopened, the order recomputed
    clone = pickle.loads(pickle.dumps(tds))
    assert type(clone) is type(tds) and clone[3].tolist() == tds[3].tolist()
    other = torch_dataset(path, 8, seed=4, rank=1, world_size=2)
    assert [other[k].tolist() for k in range(len(other))] == expected.tolist()


@pytest.mark.slow  # spawns DataLoader workers (torch import per worker)
def test_dataloader_workers_keep_the_order(shard_dir):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    path, _, _ = shard_dir
    base = TokenDataset(path, 8, seed=4)
    loader = DataLoader(base.as_torch(), batch_size=4, num_workers=2, multiprocessing_context="spawn")
    got = torch.cat(list(loader)).tolist()
    assert got == [x.tolist() for x in base]


# ---------------------------------------------------------------------------
# Megatron export, read back by an independent reader


def read_megatron(prefix):
    """Read Megatron-LM's MMIDIDX .idx/.bin as documented in indexed_dataset.py (_IndexWriter)."""
    with open(prefix + ".idx", "rb") as f:
        raw = f.read()
    magic = raw[:9]
    (version,) = struct.unpack_from("<Q", raw, 9)
    (dtype_code,) = struct.unpack_from("<B", raw, 17)
    sequence_count, document_count = struct.unpack_from("<QQ", raw, 18)
    pos = 34
    lengths = np.frombuffer(raw, "<i4", sequence_count, pos)
    pos += 4 * sequence_count
    pointers = np.frombuffer(raw, "<i8", sequence_count, pos)
    pos += 8 * sequence_count
    document_indices = np.frombuffer(raw, "<i8", document_count, pos)
    pos += 8 * document_count
    dtype = {1: "<u1", 2: "<i1", 3: "<i2", 4: "<i4", 5: "<i8", 6: "<f8", 7: "<f4", 8: "<u2"}[dtype_code]
    data = np.fromfile(prefix + ".bin", dtype=dtype)
    itemsize = np.dtype(dtype).itemsize
    sequences = [data[p // itemsize:p // itemsize + n] for p, n in zip(pointers.tolist(), lengths.tolist())]
    documents = [np.concatenate(sequences[a:b]) if b > a else np.zeros(0, dtype)
                 for a, b in zip(document_indices[:-1].tolist(), document_indices[1:].tolist())]
    return {"magic": magic, "version": version, "dtype_code": dtype_code, "sequence_count": sequence_count,
            "document_count": document_count, "trailing_bytes": len(raw) - pos, "lengths": lengths,
            "pointers": pointers, "document_indices": document_indices, "documents": documents,
            "bin_bytes": os.path.getsize(prefix + ".bin")}


def test_megatron_export_reads_back_document_for_document(tmp_path):
    rng = np.random.default_rng(3)
    shards = uneven_shards(rng, n_shards=7)
    shards[3].append([TOKENIZER.vocab_size - 1, 0, TOKENIZER.vocab_size - 2])  # the largest ids of the vocabulary
    path = write_shard_dir(str(tmp_path / "dir"), shards)
    summary = export_megatron(path, str(tmp_path / "out" / "corpus_text_document"), dtype="int32")
    docs = [d for s in shards for d in s]
    got = read_megatron(str(tmp_path / "out" / "corpus_text_document"))
    assert got["magic"] == b"MMIDIDX\x00\x00" and got["version"] == 1 and got["dtype_code"] == 4
    assert got["sequence_count"] == len(docs) and got["document_count"] == len(docs) + 1
    assert got["trailing_bytes"] == 0
    assert got["document_indices"].tolist() == list(range(len(docs) + 1))
    assert got["lengths"].tolist() == [len(d) for d in docs]
    assert got["bin_bytes"] == 4 * sum(map(len, docs))
    assert [d.tolist() for d in got["documents"]] == [list(d) for d in docs]
    assert summary["documents"] == len(docs) and summary["tokens"] == sum(map(len, docs))
    assert sorted(os.listdir(tmp_path / "out")) == ["corpus_text_document.bin", "corpus_text_document.idx"]


def test_megatron_export_refuses_ids_beyond_the_vocabulary_and_leaves_nothing(tmp_path):
    path = write_shard_dir(str(tmp_path / "dir"), [[[1, 2]], [[3, TOKENIZER.vocab_size]]])
    with pytest.raises(ShardFormatError, match=f"id {TOKENIZER.vocab_size}, outside the vocabulary"):
        export_megatron(path, str(tmp_path / "out" / "x"))
    assert os.listdir(tmp_path / "out") == []
    huge = write_shard_dir(str(tmp_path / "huge"), [[[1, 2]], [[3, 2**31]]])   # was refused only for int32
    with pytest.raises(ShardFormatError, match="outside the vocabulary"):
        export_megatron(huge, str(tmp_path / "out" / "y"))


def test_megatron_uint16_export(tmp_path):
    wide = Tokenizer(substrate="utf8", merges=[(a, b) for a in range(256) for b in range(256)],
                     special_tokens=["<|endoftext|>"])   # 65,793 ids: 65536 is in the vocabulary
    shards = [[[0, 65535, 7], []], [[1, 2, 3, 4]]]
    path = write_shard_dir(str(tmp_path / "dir"), shards, tokenizer=wide)
    export_megatron(path, str(tmp_path / "u16"), dtype="uint16")
    got = read_megatron(str(tmp_path / "u16"))
    assert got["dtype_code"] == 8 and got["bin_bytes"] == 2 * 7
    assert got["pointers"].tolist() == [0, 6, 6]
    assert [d.tolist() for d in got["documents"]] == [[0, 65535, 7], [], [1, 2, 3, 4]]
    big = write_shard_dir(str(tmp_path / "big"), [[[65536]]], tokenizer=wide)
    with pytest.raises(ValueError, match="dtype='int32'"):
        export_megatron(big, str(tmp_path / "big16"), dtype="uint16")
    # auto: Megatron's rule on the 65,793-id vocabulary picks int32, which holds id 65536
    assert export_megatron(big, str(tmp_path / "big-auto"))["dtype"] == "int32"
    assert read_megatron(str(tmp_path / "big-auto"))["documents"][0].tolist() == [65536]
    with pytest.raises(ValueError, match="dtype"):
        export_megatron(path, str(tmp_path / "x"), dtype="int64")


def test_cli_export_megatron(tmp_path, shard_dir, capsys):
    from ube_stream.cli.loader import register

    path, shards, _ = shard_dir
    parser = argparse.ArgumentParser(prog="ube")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["export-megatron", path, str(tmp_path / "m")])
    assert args.func(args) == 0
    err = capsys.readouterr().err
    n_docs = sum(len(s) for s in shards)
    assert err.count("\n") == 1 and f"{n_docs} documents" in err and f"{len(shards)} shards" in err  # one line
    before = (tmp_path / "m.bin").read_bytes()
    # an existing export is not overwritten without --overwrite
    args = parser.parse_args(["export-megatron", "--dtype", "uint16", path, str(tmp_path / "m")])
    assert args.func(args) == 2
    assert "already exist; pass --overwrite to replace them" in capsys.readouterr().err
    assert (tmp_path / "m.bin").read_bytes() == before
    args = parser.parse_args(["export-megatron", "--overwrite", path, str(tmp_path / "m")])
    assert args.func(args) == 0 and (tmp_path / "m.bin").read_bytes() == before
    capsys.readouterr()
    got = read_megatron(str(tmp_path / "m"))
    assert [d.tolist() for d in got["documents"]] == [list(d) for s in shards for d in s]
    # the default follows Megatron's rule: this vocabulary has fewer than 65,500 ids -> uint16
    assert TOKENIZER.vocab_size < 65500 and got["dtype_code"] == 8 and "(uint16)" in err
    assert got["bin_bytes"] == 2 * sum(len(d) for s in shards for d in s)
    args = parser.parse_args(["export-megatron", "--dtype", "int32", "-q", path, str(tmp_path / "m32")])
    assert args.func(args) == 0 and capsys.readouterr().err == ""
    got32 = read_megatron(str(tmp_path / "m32"))
    assert got32["dtype_code"] == 4 and got32["bin_bytes"] == 2 * got["bin_bytes"]
    assert [d.tolist() for d in got32["documents"]] == [d.tolist() for d in got["documents"]]
    missing = parser.parse_args(["export-megatron", str(tmp_path / "nope"), str(tmp_path / "n")])
    with pytest.raises(ShardFormatError, match="nope: no such shard directory"):
        missing.func(missing)


# ---------------------------------------------------------------------------
# a real directory from the shard writer, when it is on this branch


def read_spec_documents(directory):
    """The documents of a finished shard directory, read with numpy from the agreed spec."""
    with open(os.path.join(directory, "MANIFEST.json")) as f:
        manifest = json.load(f)
    docs = []
    for shard in manifest["shards"]:
        tokens = np.fromfile(os.path.join(directory, shard["tokens_file"]), dtype="<u4")
        index = os.path.join(directory, shard["index_file"])
        n_docs = int(np.fromfile(index, dtype="<u8", count=3)[2])
        offsets = np.fromfile(index, dtype="<u8", count=n_docs + 1, offset=128).tolist()
        docs.extend(tokens[a:b] for a, b in zip(offsets[:-1], offsets[1:]))
    return manifest, docs


def test_real_shard_directory(tmp_path, multilingual_lines):
    from ube_stream import shards as shards_mod
    from ube_stream.training.trainer import train

    lines = multilingual_lines[:300]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines), encoding="utf-8")
    tokenizer = train([str(corpus)], vocab_size=700, substrate="ube", workers=1, show_progress=False)
    tokenizer.save(str(tmp_path / "tok.json"))
    out = str(tmp_path / "shards")
    shards_mod.encode_corpus([str(corpus)], tokenizer=str(tmp_path / "tok.json"), output=out, workers=1,
                             unit_rows=100, shard_tokens=2000, show_progress=False)
    manifest, docs = read_spec_documents(out)
    assert len(manifest["shards"]) > 3 and len(docs) == len(lines)
    eos = manifest["special_ids"]["eos"]
    for line, doc in list(zip(lines, docs))[:20]:
        assert doc.tolist() == list(tokenizer.encode(line)) + [eos]
    stream = np.concatenate(docs).astype(np.int64)
    ds = TokenDataset(out, 128, shuffle=False)
    assert ds.n_tokens == stream.size and len(ds) == (stream.size - 1) // 128
    for k in range(len(ds)):
        assert np.array_equal(ds[k], stream[k * 128:k * 128 + 129])
    export_megatron(out, str(tmp_path / "m"))
    got = read_megatron(str(tmp_path / "m"))
    assert [d.tolist() for d in got["documents"]] == [d.tolist() for d in docs]


def test_megatron_core_reads_the_export(tmp_path, shard_dir):
    """Megatron-LM's own reader, where megatron-core is installed (optional: pip install megatron-core)."""
    pytest.importorskip("torch")
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset")
    path, shards, _ = shard_dir
    export_megatron(path, str(tmp_path / "m"))
    docs = [list(d) for s in shards for d in s]
    ds = indexed.IndexedDataset(str(tmp_path / "m"))
    assert len(ds) == len(docs)
    # the default is the dtype megatron-core's own rule picks for this vocabulary
    assert ds.index.dtype == indexed.DType.optimal_dtype(TOKENIZER.vocab_size) == np.uint16
    assert ds.document_indices.tolist() == list(range(len(docs) + 1))
    assert [ds[i].tolist() for i in range(len(ds))] == docs
    export_megatron(path, str(tmp_path / "m32"), dtype="int32")
    ds32 = indexed.IndexedDataset(str(tmp_path / "m32"))
    assert ds32.index.dtype == np.int32 and [ds32[i].tolist() for i in range(len(ds32))] == docs


def test_megatron_auto_dtype_follows_megatron_core_rule(tmp_path):
    """`dtype="auto"` picks what megatron-core's DType.optimal_dtype picks, at the 65,500 edge too."""
    indexed = pytest.importorskip("megatron.core.datasets.indexed_dataset")
    from ube_stream.loader.megatron import megatron_dtype

    for vocab in (256, 32000, 65499, 65500, 65536, 100277, 200019):
        assert np.dtype(megatron_dtype(vocab)) == np.dtype(indexed.DType.optimal_dtype(vocab)), vocab
