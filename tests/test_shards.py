"""Token shards end to end: encode real text, read it back through the memory
map, and check it against the tokenizer, the source rows and the format spec;
corruption, crashes (SIGKILL + rerun), ranks and locks."""
import argparse
import hashlib
import io
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import redirect_stdout

import numpy as np
import pytest
from _helpers import kill_when, slow_after, tree

from ube_stream.cli import shards as _cli_shards
from ube_stream.errors import InputError, LockError, ShardFormatError
from ube_stream.shards import EncodeSummary, TokenShards, encode_corpus
from ube_stream.tokenizer import Tokenizer
from ube_stream.training.trainer import train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECIALS = ("<|endoftext|>", "<|bos|>")
MARKER = re.compile(r"^\d{5}-\d{12}\.json$")


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def lines(multilingual_lines):
    """Real running text in many languages, one document per line (a few hundred KB)."""
    return multilingual_lines[::4][:2400]


@pytest.fixture(scope="module")
def tok_path(tmp_path_factory, lines):
    tok = train(iter(lines[:1500]), vocab_size=512 + 200 + len(SPECIALS), special_tokens=SPECIALS,
                workers=1, show_progress=False)
    path = tmp_path_factory.mktemp("tok") / "tok.json"
    tok.save(path)
    return str(path)


@pytest.fixture(scope="module")
def tok(tok_path):
    return Tokenizer.load(tok_path)


@pytest.fixture(scope="module")
def other_tok_path(tmp_path_factory, lines):
    tok = train(iter(lines[:800]), vocab_size=512 + 50 + 1, workers=1, show_progress=False)
    path = tmp_path_factory.mktemp("tok2") / "other.json"
    tok.save(path)
    return str(path)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, lines):
    """Three sources: JSONL with empty documents, Parquet with nulls and empties,
    and a JSONL file with bad rows (null, blank line, invalid JSON, invalid UTF-8).
    Returns (paths, expected) where expected[path] = [(row, text), ...] read independently."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path_factory.mktemp("corpus")
    expected = {}
    a = str(root / "a.jsonl")
    texts = list(lines[:700])
    for i in (0, 50, 333):
        texts.insert(i, "")
    texts.insert(10, "line\u2028separator and \u0085 next-line are content")
    with open(a, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
    expected[a] = list(enumerate(texts))

    b = str(root / "b.parquet")
    values = list(lines[700:1200])
    for i in (3, 77, 400):
        values[i] = None
    values[5] = ""
    pq.write_table(pa.table({"text": pa.array(values, type=pa.string())}), b, row_group_size=128)
    table = pq.read_table(b)
    expected[b] = [(r, t) for r, t in enumerate(table.column("text").to_pylist()) if t is not None]

    c = str(root / "c.jsonl")
    raw = [json.dumps({"text": t}, ensure_ascii=False).encode() for t in lines[1200:1300]]
    raw[7] = b'{"text": null}'
    raw[20] = b""
    raw[33] = b'{"text": "broken",}'
    raw[41] = b'{"text": "caf\xc3 au lait"}'
    with open(c, "wb") as f:
        f.write(b"\n".join(raw) + b"\n")
    good = []
    for row, line in enumerate(raw):
        try:
            value = json.loads(line.decode("utf-8"))["text"]
        except (ValueError, UnicodeDecodeError):
            continue
        if value is not None:
            good.append((row, value))
    expected[c] = good
    return [a, b, c], expected


OPTIONS = dict(unit_rows=97, shard_tokens=3000, on_error="skip", show_progress=False)


@pytest.fixture(scope="module")
def encoded(tmp_path_factory, corpus, tok_path):
    out = str(tmp_path_factory.mktemp("enc") / "shards")
    summary = EncodeSummary()
    manifest = encode_corpus(corpus[0], tokenizer=tok_path, output=out, workers=1, summary=summary, **OPTIONS)
    return out, manifest, summary


def copy_of(src, tmp_path):
    dst = str(tmp_path / "copy")
    shutil.copytree(src, dst)
    return dst


# --------------------------------------------------------------------------- content

def test_every_document_equals_tokenizer_encode_plus_eos(encoded, corpus, tok):
    out, manifest, _ = encoded
    paths, expected = corpus
    ds = TokenShards(out, verify="full")
    want = [(p, row, text) for p in sorted(paths) for row, text in expected[p]]
    eos = tok.special_tokens["<|endoftext|>"]
    assert manifest["special_ids"] == {"eos": eos, "bos": None}
    assert len(ds) == len(want) == manifest["totals"]["documents"]
    total = 0
    for i, (path, row, text) in enumerate(want):
        doc = ds.doc(i)
        assert doc.dtype == np.uint32 and not doc.flags.writeable
        shard, _ = ds._locate(i)
        assert not doc.flags.owndata and np.shares_memory(doc, shard.tokens)     # a view into the map
        assert doc.tolist() == tok.encode(text).tolist() + [eos], (path, row)
        assert ds.decode_doc(i) == text
        assert ds.source(i) == (path, row)
        total += len(doc)
    assert ds.num_tokens == total == manifest["totals"]["tokens"]
    assert [d.tolist() for d in ds.iter_docs()][:50] == [ds.doc(i).tolist() for i in range(50)]
    assert ds.doc(-1).tolist() == ds.doc(len(ds) - 1).tolist()
    assert ds.decode_doc(0) == "" and ds.doc(0).tolist() == [eos]          # an empty document: EOS only
    with pytest.raises(IndexError):
        ds.doc(len(ds))
    assert ds.tokenizer.fingerprint == tok.fingerprint


def _resident_pages(path):
    """How many pages of ``path`` the page cache holds (Linux ``mincore`` over a private
    map of the file: untouched pages of such a map are the cache's own)."""
    import ctypes
    import mmap

    size = os.path.getsize(path)
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
    try:
        n = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = (ctypes.c_ubyte * n)()
        buf = (ctypes.c_char * size).from_buffer(m)
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            assert libc.mincore(ctypes.c_void_p(ctypes.addressof(buf)), ctypes.c_size_t(size), vec) == 0, \
                os.strerror(ctypes.get_errno())
        finally:
            del buf
        return sum(v & 1 for v in vec)
    finally:
        m.close()


@pytest.mark.skipif(sys.platform != "linux", reason="the page cache advice is Linux's")
def test_written_token_files_leave_the_page_cache(corpus, tok_path, tmp_path):
    """Each shard's token file is fsynced and then dropped from the page cache
    (POSIX_FADV_DONTNEED): a run writes as many bytes as it reads and never reads
    them back.  Its documents still read back whole (from disk)."""
    out = str(tmp_path / "shards")
    manifest = encode_corpus(corpus[0], tokenizer=tok_path, output=out, workers=1, **OPTIONS)
    files = [os.path.join(out, s["tokens_file"]) for s in manifest["shards"]]
    assert len(files) > 1 and all(os.path.getsize(f) > 0 for f in files)
    assert [_resident_pages(f) for f in files] == [0] * len(files)
    ds = TokenShards(out, verify="full")
    assert ds.num_tokens == manifest["totals"]["tokens"]
    assert _resident_pages(files[0]) > 0          # the check itself sees pages a reader brought in


@pytest.mark.skipif(sys.platform != "linux", reason="the page cache advice is Linux's")
def test_a_large_token_file_is_settled_while_it_is_written(tmp_path, monkeypatch):
    """One unit of a single compressed stream is one shard of up to 1 GiB: its token
    file is synced and dropped from the page cache every SETTLE_BYTES (here 64 KiB)
    while it is written, so the cache never holds more than that much of it, and the
    shard is the same bytes (sha256 and contents) as when nothing is dropped early."""
    from ube_stream.shards import writer
    from ube_stream.shards.index_format import SHARDS_DIR

    rng = np.random.default_rng(3)
    docs = [rng.integers(0, 50000, size=int(n), dtype=np.uint32) for n in rng.integers(1, 9000, size=120)]
    tokens = np.concatenate(docs)
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
    rows = np.arange(len(docs), dtype=np.uint64)

    def write(out, settle):
        monkeypatch.setattr(writer, "SETTLE_BYTES", settle)
        os.makedirs(out / SHARDS_DIR)
        shards = writer._UnitShards(str(out), "00000", 1 << 28, "sha256:" + "f" * 64, ".tmp")
        resident = []
        for k in range(0, len(docs), 10):   # ten documents (~180 KiB) per batch
            stop = min(k + 10, len(docs))
            shards.add(tokens[offsets[k]:offsets[stop]], offsets[k:stop + 1] - offsets[k], rows[k:stop], 0)
            resident.append(_resident_pages(shards.tokens_path + ".tmp"))
        (record,) = shards.finish()
        return record, resident, open(out / record["tokens_file"], "rb").read()

    settled, resident, data = write(tmp_path / "a", 64 << 10)
    whole, resident_whole, data_whole = write(tmp_path / "b", 1 << 40)
    assert data == data_whole == tokens.astype("<u4").tobytes()
    assert settled["sha256"] == whole["sha256"]
    page = os.sysconf("SC_PAGE_SIZE")
    batch_pages = max(offsets[k + 10] - offsets[k] for k in range(0, len(docs) - 10, 10)) * 4 // page + 2
    assert max(resident) <= (64 << 10) // page + batch_pages     # what is not yet settled, at most
    assert resident_whole[-1] > 4 * max(resident)                # without it the cache holds the file


@pytest.mark.skipif(sys.platform != "linux", reason="the page cache advice is Linux's")
def test_settling_on_a_file_system_without_fdatasync_or_with_an_io_error(tmp_path, monkeypatch):
    """A file system that refuses fdatasync (EINVAL) leaves the file to its final fsync:
    the shard is written whole; an I/O error while settling is the unit's error, raised
    then and not swallowed."""
    import errno

    from ube_stream.shards import writer
    from ube_stream.shards.index_format import SHARDS_DIR

    tokens = np.arange(100_000, dtype=np.uint32)
    offsets = np.array([0, 50_000, 100_000], dtype=np.int64)
    monkeypatch.setattr(writer, "SETTLE_BYTES", 64 << 10)
    for code, out in ((errno.EINVAL, tmp_path / "a"), (errno.EIO, tmp_path / "b")):
        calls = []

        def refuse(fd, code=code, calls=calls):
            calls.append(fd)
            raise OSError(code, os.strerror(code))

        monkeypatch.setattr(writer, "_DATASYNC", refuse)
        os.makedirs(out / SHARDS_DIR)
        shards = writer._UnitShards(str(out), "00000", 1 << 28, "sha256:" + "f" * 64, ".tmp")
        if code == errno.EIO:
            with pytest.raises(OSError, match="Input/output"):
                shards.add(tokens, offsets, np.arange(2, dtype=np.uint64), 0)
            continue
        shards.add(tokens[:50_000], offsets[:2], np.arange(1, dtype=np.uint64), 0)
        shards.add(tokens[50_000:], offsets[1:] - 50_000, np.arange(1, 2, dtype=np.uint64), 0)
        (record,) = shards.finish()
        assert len(calls) == 1    # refused once, then left to the final fsync
        assert open(out / record["tokens_file"], "rb").read() == tokens.astype("<u4").tobytes()


@pytest.mark.parametrize("cache_mb", [0, 0.004, 64])
def test_cache_bound_never_changes_the_shards(encoded, corpus, tok_path, tmp_path, cache_mb):
    """`ube encode --cache-mb`: no cache, a 4 KiB one that sweeps all the time, and a large one write
    the same bytes as the default (issue 25: the ids are a pure function of the chunk)."""
    out = str(tmp_path / "shards")
    argv = ["encode", *corpus[0], "--tokenizer", tok_path, "-o", out, "--workers", "1", "--unit-rows", "97",
            "--shard-tokens", "3000", "--on-error", "skip", "--cache-mb", str(cache_mb), "-q"]
    from ube_stream.cli import main

    assert main(argv) == 0
    assert tree(out) == tree(encoded[0])


def test_cache_bytes_is_checked_before_anything_is_written(corpus, tok_path, tmp_path):
    with pytest.raises(ValueError, match="cache_bytes"):
        encode_corpus(corpus[0], tokenizer=tok_path, output=str(tmp_path / "x"), workers=1, cache_bytes=-1,
                      **OPTIONS)
    assert not os.path.exists(tmp_path / "x")


def test_row_accounting_per_source(encoded, corpus):
    out, manifest, summary = encoded
    paths, expected = corpus
    a, b, c = paths
    with open(a, "rb") as f:
        a_rows = f.read().count(b"\n")
    with open(c, "rb") as f:
        c_rows = f.read().count(b"\n")
    import pyarrow.parquet as pq
    by_path = {s["path"]: s for s in manifest["sources"]}
    assert by_path[a]["rows_read"] == a_rows and by_path[a]["skipped"] == {}
    assert by_path[b]["rows_read"] == pq.ParquetFile(b).metadata.num_rows and by_path[b]["skipped"] == {"null": 3}
    assert by_path[c]["rows_read"] == c_rows
    assert by_path[c]["skipped"] == {"blank_line": 1, "invalid_json": 1, "invalid_utf8": 1, "null": 1}
    for s in manifest["sources"]:
        assert s["documents"] == len(expected[s["path"]])
        assert s["rows_read"] == s["documents"] + sum(s["skipped"].values())
    totals = manifest["totals"]
    assert totals["rows_read"] == a_rows + 500 + c_rows
    assert totals["skipped"] == {"blank_line": 1, "invalid_json": 1, "invalid_utf8": 1, "null": 4}
    assert summary.finalized and summary.documents == totals["documents"] and summary.skipped == totals["skipped"]
    # a finished directory holds only the manifest, the tokenizer and listed shard files
    listed = {s[k] for s in manifest["shards"] for k in ("tokens_file", "index_file")}
    assert set(tree(out)) == {"MANIFEST.json", "tokenizer.json", "shards"} | listed
    assert [s["name"] for s in manifest["shards"]] == sorted(s["name"] for s in manifest["shards"])


def test_bad_rows_raise_naming_file_and_row(corpus, tok_path, tmp_path):
    c = corpus[0][2]
    with pytest.raises(InputError) as info:
        encode_corpus([c], tokenizer=tok_path, output=str(tmp_path / "o"), workers=1, unit_rows=97,
                      show_progress=False)
    assert info.value.path == c and c in str(info.value) and info.value.row in (20, 33)


def test_invalid_utf8_reaching_the_encoder_is_skipped_or_named(tok_path, tok, tmp_path, monkeypatch):
    """The readers validate UTF-8 first; if a batch still holds invalid bytes the
    encoder drops that row (counted) or raises naming file and row."""
    from ube_stream import readers
    from ube_stream.readers.batch import TextBatch
    from ube_stream.readers.inputs import _Parsed

    path = str(tmp_path / "x.jsonl")
    texts = ["first", "bad one", "third row", ""]
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"text": t}) + "\n" for t in texts)

    class Corrupted(TextBatch):
        def utf8(self):
            data, offsets = super().utf8()
            data = data.copy()
            data[offsets[1] + 2] = 0xFF          # inside row 1
            return data, offsets

    def fake_read_unit_blocks(unit, **kwargs):   # the encoder reads a unit as parse jobs
        yield _Parsed(Corrupted(list(texts), np.arange(4, dtype=np.int64), unit.source.source_id))

    monkeypatch.setattr(readers, "read_unit_blocks", fake_read_unit_blocks)
    with pytest.raises(InputError) as info:
        encode_corpus([path], tokenizer=tok_path, output=str(tmp_path / "r"), workers=1, show_progress=False)
    assert info.value.row == 1 and path in str(info.value) and "row 1" in str(info.value)
    manifest = encode_corpus([path], tokenizer=tok_path, output=str(tmp_path / "s"), workers=1,
                             on_error="skip", show_progress=False)
    assert manifest["sources"][0]["skipped"] == {"invalid_utf8": 1}
    assert manifest["sources"][0]["rows_read"] == 4
    ds = TokenShards(str(tmp_path / "s"))
    assert [ds.decode_doc(i) for i in range(len(ds))] == ["first", "third row", ""]
    assert [ds.source(i)[1] for i in range(len(ds))] == [0, 2, 3]


def test_bos_and_eos_options(corpus, tok_path, tok, tmp_path):
    a = corpus[0][0]
    bos = tok.special_tokens["<|bos|>"]
    manifest = encode_corpus([a], tokenizer=tok_path, output=str(tmp_path / "b"), workers=1, eos=False, bos=True,
                             bos_token="<|bos|>", unit_rows=300, show_progress=False)
    assert manifest["special_ids"] == {"eos": None, "bos": bos}
    assert manifest["options"]["eos_token"] is None and manifest["options"]["bos_token"] == "<|bos|>"
    ds = TokenShards(str(tmp_path / "b"))
    for i in (0, 1, 11, 200):
        text = corpus[1][a][i][1]
        assert ds.doc(i).tolist() == [bos] + tok.encode(text).tolist()
        assert ds.decode_doc(i) == text
    manifest = encode_corpus([a], tokenizer=tok_path, output=str(tmp_path / "c"), workers=1,
                             eos_token="<|bos|>", unit_rows=300, show_progress=False)
    assert manifest["special_ids"] == {"eos": bos, "bos": None}
    with pytest.raises(ValueError, match="bos_token"):
        encode_corpus([a], tokenizer=tok_path, output=str(tmp_path / "d"), bos=True, show_progress=False)
    with pytest.raises(ValueError, match="not a special token"):
        encode_corpus([a], tokenizer=tok_path, output=str(tmp_path / "e"), eos_token="<|nope|>", show_progress=False)


def test_oversized_document_makes_one_oversized_shard(tok_path, tok, tmp_path, lines):
    long_text = " ".join(lines[:60])
    texts = [lines[0], long_text, lines[1], lines[2], "", lines[3]]
    path = str(tmp_path / "big.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts)
    shard_tokens = 40
    lengths = [len(tok.encode(t)) + 1 for t in texts]
    assert lengths[1] > 10 * shard_tokens
    # the rule, independently: a new shard starts when the current one holds >= shard_tokens
    groups, current = [], []
    for n in lengths:
        if current and sum(current) >= shard_tokens:
            groups.append(current)
            current = []
        current.append(n)
    groups.append(current)
    out = str(tmp_path / "o")
    manifest = encode_corpus([path], tokenizer=tok_path, output=out, workers=1, shard_tokens=shard_tokens,
                             show_progress=False)
    assert [s["documents"] for s in manifest["shards"]] == [len(g) for g in groups]
    assert [s["tokens"] for s in manifest["shards"]] == [sum(g) for g in groups]
    assert max(s["tokens"] for s in manifest["shards"]) > 10 * shard_tokens
    for name, data in tree(out).items():
        assert data is None or len(data) > 0, f"empty file {name}"
    ds = TokenShards(out, verify="full")
    assert [ds.decode_doc(i) for i in range(len(ds))] == texts


# --------------------------------------------------------------------------- format

def test_index_readable_with_numpy_alone(encoded):
    out, manifest, _ = encoded
    fingerprint = bytes.fromhex(manifest["tokenizer"]["fingerprint"].split(":")[1])
    ds = TokenShards(out)
    for entry, shard in zip(manifest["shards"], ds.shards):
        idx = os.path.join(out, entry["index_file"])
        tokens_file = os.path.join(out, entry["tokens_file"])
        # the spec's snippet, verbatim
        hdr = np.fromfile(idx, dtype=np.uint8, count=128); n_docs = int(np.frombuffer(hdr[16:24], "<u8")[0])  # noqa: E702
        doc_offsets = np.memmap(idx, "<u8", "r", offset=128, shape=(n_docs+1,))
        rows = np.memmap(idx, "<u8", "r", offset=128 + 8*(n_docs+1), shape=(n_docs,))
        source_ids = np.memmap(idx, "<u4", "r", offset=128 + 16*n_docs + 8, shape=(n_docs,))
        tokens = np.memmap(tokens_file, "<u4", "r")
        raw = hdr.tobytes()
        assert raw[:8] == b"UBESHRD1"
        assert np.frombuffer(raw[8:16], "<u4").tolist() == [2, 4]
        assert n_docs == entry["documents"] and int(np.frombuffer(raw[24:32], "<u8")[0]) == entry["tokens"]
        with open(tokens_file, "rb") as f:
            assert raw[32:64] == hashlib.sha256(f.read()).digest() == bytes.fromhex(entry["sha256"])
        # version 2: bytes 96..104 hold the largest token id + 1, the rest is reserved
        assert raw[64:96] == fingerprint and raw[104:128] == bytes(24)
        assert int(np.frombuffer(raw[96:104], "<u8")[0]) == (int(tokens.max()) + 1 if len(tokens) else 0)
        assert os.path.getsize(idx) == 128 + 8 * (n_docs + 1) + 8 * n_docs + 4 * n_docs
        assert doc_offsets[0] == 0 and doc_offsets[-1] == len(tokens) == entry["tokens"]
        assert np.array_equal(doc_offsets, shard.doc_offsets) and np.array_equal(rows, shard.rows)
        assert np.array_equal(source_ids, shard.source_ids) and np.array_equal(tokens, shard.tokens)
        path = manifest["sources"][int(source_ids[0])]["path"]
        assert entry["unit_id"].startswith(f"{int(source_ids[0]):05d}-") and os.path.exists(path)


def _flip_token(directory):
    path = os.path.join(directory, "shards", sorted(n for n in os.listdir(os.path.join(directory, "shards"))
                                                    if n.endswith(".tokens"))[1])
    data = bytearray(open(path, "rb").read())
    data[8] ^= 0x01
    open(path, "wb").write(bytes(data))
    return path


def _first(directory, suffix):
    return os.path.join(directory, "shards", sorted(n for n in os.listdir(os.path.join(directory, "shards"))
                                                    if n.endswith(suffix))[0])


def _bad_magic(d):
    path = _first(d, ".idx")
    with open(path, "r+b") as f:
        f.write(b"NOTSHARD")
    return path, "bad magic"


def _truncated_index(d):
    path = _first(d, ".idx")
    os.truncate(path, os.path.getsize(path) - 4)
    return path, "truncated"


def _short_header(d):
    path = _first(d, ".idx")
    os.truncate(path, 100)
    return path, "shorter than"


def _truncated_tokens(d):
    path = _first(d, ".tokens")
    os.truncate(path, os.path.getsize(path) - 4)
    return path, "token file is"


def _wrong_version(d):
    path = _first(d, ".idx")
    with open(path, "r+b") as f:
        f.seek(8)
        f.write(np.array([3], "<u4").tobytes())
    return path, "version 3"


def _manifest_count(d):
    path = os.path.join(d, "MANIFEST.json")
    m = json.load(open(path))
    m["shards"][0]["tokens"] += 1
    m["totals"]["tokens"] += 1
    open(path, "w").write(json.dumps(m))
    return _first(d, ".idx"), "MANIFEST.json records"


def _manifest_not_json(d):
    path = os.path.join(d, "MANIFEST.json")
    with open(path, "r+b") as f:
        f.write(b"{{{{")
    return path, "not valid JSON"


def _missing_manifest(d):
    os.unlink(os.path.join(d, "MANIFEST.json"))
    return os.path.join(d, "MANIFEST.json"), "unfinished"


@pytest.mark.parametrize("corrupt", [_bad_magic, _truncated_index, _short_header, _truncated_tokens, _wrong_version,
                                     _manifest_count, _manifest_not_json, _missing_manifest])
def test_corruption_is_detected_naming_the_file(encoded, tmp_path, corrupt):
    d = copy_of(encoded[0], tmp_path)
    path, words = corrupt(d)
    with pytest.raises(ShardFormatError) as info:
        TokenShards(d)
    assert path in str(info.value) and words in str(info.value)


def test_flipped_token_needs_full_verify(encoded, tmp_path):
    d = copy_of(encoded[0], tmp_path)
    path = _flip_token(d)
    TokenShards(d, verify="header")          # sizes and headers still agree
    with pytest.raises(ShardFormatError) as info:
        TokenShards(d, verify="full")
    assert path in str(info.value) and "sha256" in str(info.value)


def test_wrong_tokenizer_is_detected(encoded, other_tok_path, tmp_path):
    d = copy_of(encoded[0], tmp_path)
    shutil.copy(other_tok_path, os.path.join(d, "tokenizer.json"))
    with pytest.raises(ShardFormatError) as info:
        TokenShards(d)
    assert os.path.join(d, "tokenizer.json") in str(info.value) and "fingerprint" in str(info.value)
    # a shard of another tokenizer mixed in: its index header's fingerprint differs
    d2 = str(tmp_path / "mixed")
    shutil.copytree(encoded[0], d2)
    idx = _first(d2, ".idx")
    with open(idx, "r+b") as f:
        f.seek(64)
        f.write(bytes(32))
    with pytest.raises(ShardFormatError, match="another tokenizer") as info:
        TokenShards(d2)
    assert idx in str(info.value)


# --------------------------------------------------------------------------- determinism, resume, ranks

def test_workers_do_not_change_a_byte_and_rerun_is_a_noop(encoded, corpus, tok_path, other_tok_path, tmp_path,
                                                          capsys):
    out2 = str(tmp_path / "w2")
    encode_corpus(corpus[0], tokenizer=tok_path, output=out2, workers=2, **OPTIONS)
    assert tree(out2) == tree(encoded[0])
    before = {n: os.stat(os.path.join(out2, n)).st_mtime_ns for n in tree(out2)}
    summary = EncodeSummary()
    manifest = encode_corpus(corpus[0], tokenizer=tok_path, output=out2, workers=2, summary=summary,
                             **dict(OPTIONS, show_progress=True))
    assert summary.already_complete and manifest == encoded[1]
    assert "already complete" in capsys.readouterr().err
    assert {n: os.stat(os.path.join(out2, n)).st_mtime_ns for n in tree(out2)} == before
    with pytest.raises(ShardFormatError, match="options.shard_tokens") as info:
        encode_corpus(corpus[0], tokenizer=tok_path, output=out2, **dict(OPTIONS, shard_tokens=999))
    assert "new output directory" in str(info.value)  # the CLI says --output
    with pytest.raises(ShardFormatError, match="tokenizer.fingerprint"):
        encode_corpus(corpus[0], tokenizer=other_tok_path, output=out2, **OPTIONS)
    with pytest.raises(ShardFormatError, match="not a shard directory"):
        encode_corpus(corpus[0], tokenizer=tok_path, output=os.path.dirname(corpus[0][0]), **OPTIONS)


def _encode_command(inputs, tok_path, out, workers):
    code = (f"from ube_stream.shards import encode_corpus; "
            f"encode_corpus({inputs!r}, tokenizer={tok_path!r}, output={out!r}, workers={workers}, "
            f"**{OPTIONS!r})")
    return [sys.executable, "-c", code]


def _cli_command(inputs, tok_path, out, workers):
    """The same run through ``ube encode``, whose workers are forked (see executors.start_method)."""
    return [sys.executable, "-m", "ube_stream", "encode", *inputs, "--tokenizer", tok_path, "-o", out,
            "--workers", str(workers), "--unit-rows", str(OPTIONS["unit_rows"]),
            "--shard-tokens", str(OPTIONS["shard_tokens"]), "--on-error", OPTIONS["on_error"], "-q"]


def _markers(out):
    try:
        return [n for n in os.listdir(os.path.join(out, "units")) if MARKER.match(n)]
    except FileNotFoundError:
        return []


def _start_and_kill(cmd, out, moment, rng):
    proc = subprocess.Popen(cmd, cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    already = len(_markers(out))
    ready = {"first_marker": lambda: bool(_markers(out)),
             "next_marker": lambda: len(_markers(out)) > already,
             "some_markers": lambda: len(_markers(out)) >= already + 3,
             "manifest": lambda: os.path.exists(os.path.join(out, "MANIFEST.json"))}[moment]
    return kill_when(proc, ready, timeout=60, poll=0.002,
                     grace=rng.uniform(0, 0.05) if moment == "some_markers" else 0.0)


# killed at the first unit marker (part way: then the rerun is killed too) through the
# API (spawned workers) and the CLI (forked workers) in the default suite; killed after
# some markers and after the manifest with the slow tests
@pytest.mark.parametrize("command, moment", slow_after(
    [(_encode_command, "first_marker"), (_cli_command, "first_marker")]
    + [(c, m) for m in ("some_markers", "manifest") for c in (_encode_command, _cli_command)], keep=2, several=True),
    ids=lambda v: v if isinstance(v, str) else {_encode_command: "api-spawn", _cli_command: "cli-fork"}[v])
def test_sigkill_then_rerun_is_byte_identical(encoded, corpus, tok_path, tmp_path, command, moment):
    reference = tree(encoded[0])
    assert not [n for n in reference if n.split("/")[0] in ("units", "locks") or n.endswith(".tmp")]
    rng = random.Random(1234)
    out = str(tmp_path / f"killed-{moment}")
    code, err = _start_and_kill(command(corpus[0], tok_path, out, 2), out, moment, rng)
    assert code == -signal.SIGKILL, err.decode()[-2000:]
    if moment == "first_marker":   # really stopped part way: no manifest, some locks or leftovers
        assert not os.path.exists(os.path.join(out, "MANIFEST.json"))
        assert len(_markers(out)) < 13
    if moment != "manifest":        # kill the rerun too (at its first new marker), then complete
        code, err = _start_and_kill(command(corpus[0], tok_path, out, 1), out, "next_marker", rng)
        # the rerun may finish the few units left before the kill lands: then it must have succeeded
        assert code in (0, -signal.SIGKILL), err.decode()[-2000:]
    partial = not os.path.exists(os.path.join(out, "MANIFEST.json"))
    summary = EncodeSummary()
    encode_corpus(corpus[0], tokenizer=tok_path, output=out, workers=2, summary=summary, **OPTIONS)
    assert tree(out) == reference
    if partial:                     # the last run resumed: it skipped the units committed before
        assert summary.units_skipped > 0 and not summary.already_complete
    else:
        assert summary.already_complete


def test_three_ranks_and_finalize_equal_a_single_run(encoded, corpus, tok_path, tmp_path):
    out = str(tmp_path / "ranked")
    with pytest.raises(ShardFormatError) as info:
        encode_corpus(corpus[0], tokenizer=tok_path, output=out, workers=1, rank=0, world_size=3, finalize=True,
                      **OPTIONS)
    message = str(info.value)
    unit_ids = sorted(os.path.splitext(n)[0] for n in _markers(out))
    all_units = sorted({s["unit_id"] for s in encoded[1]["shards"]} | set(unit_ids))
    assert unit_ids == all_units[0::3] and "cannot finalize" in message
    assert all(u in message for u in all_units[1::3][:5]) and "rank 1" in message and "rank 2" in message
    assert not os.path.exists(os.path.join(out, "MANIFEST.json"))
    with pytest.raises(ShardFormatError, match="unfinished"):
        TokenShards(out)
    assert encode_corpus(corpus[0], tokenizer=tok_path, output=out, workers=2, rank=1, world_size=3,
                         **OPTIONS) == {}
    # damage two committed units of rank 1: finalize names them, rerunning rank 1 redoes just those
    damaged = all_units[1::3][:2]
    os.truncate(os.path.join(out, "shards", f"{damaged[0]}-0000.tokens"), 8)
    os.unlink(os.path.join(out, "shards", f"{damaged[1]}-0000.idx"))
    with pytest.raises(ShardFormatError) as info:
        encode_corpus(corpus[0], tokenizer=tok_path, output=out, workers=1, rank=2, world_size=3, finalize=True,
                      **OPTIONS)
    assert "2 of" in str(info.value) and all(u in str(info.value) for u in damaged)
    summary = EncodeSummary()
    encode_corpus(corpus[0], tokenizer=tok_path, output=out, workers=1, rank=1, world_size=3, summary=summary,
                  **OPTIONS)
    assert summary.units_done == 2 and summary.units_skipped == len(all_units[1::3]) - 2
    with open(os.path.join(out, "locks", "rank-1.lock"), "w") as f:     # left by a rank on another host
        json.dump({"host": "another-host", "pid": 4242}, f)
    open(os.path.join(out, "tokenizer.json.tmp.another-host.4242"), "w").close()
    manifest = encode_corpus(corpus[0], tokenizer=tok_path, output=out, workers=1, rank=2, world_size=3,
                             finalize=True, **OPTIONS)
    assert manifest == encoded[1]
    assert tree(out) == tree(encoded[0])


# --------------------------------------------------------------------------- locks

def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_locks_are_taken_over(corpus, tok_path, encoded, tmp_path):
    out = str(tmp_path / "stale")
    os.makedirs(os.path.join(out, "locks"))
    host = socket.gethostname()
    first_unit = encoded[1]["shards"][0]["unit_id"]
    for name in ("rank-0.lock", f"{first_unit}.lock"):
        with open(os.path.join(out, "locks", name), "w") as f:
            json.dump({"host": host, "pid": _dead_pid()}, f)
    encode_corpus(corpus[0], tokenizer=tok_path, output=out, workers=1, **OPTIONS)
    assert tree(out) == tree(encoded[0])


def test_lock_of_a_reused_pid_is_stale(corpus, tok_path, encoded, tmp_path):
    """A live pid whose start time differs from the recorded one is another process."""
    from ube_stream.runs.lock import start_time as _start_time

    out = str(tmp_path / "reused")
    os.makedirs(os.path.join(out, "locks"))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = _start_time(sleeper.pid)
        if started is None:
            pytest.skip("no /proc start times on this platform")
        with open(os.path.join(out, "locks", "rank-0.lock"), "w") as f:
            json.dump({"host": socket.gethostname(), "pid": sleeper.pid, "started": started - 1}, f)
        encode_corpus(corpus[0], tokenizer=tok_path, output=out, workers=1, **OPTIONS)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert tree(out) == tree(encoded[0])


def test_live_lock_stops_a_second_writer(corpus, tok_path, tmp_path):
    out = str(tmp_path / "live")
    os.makedirs(os.path.join(out, "locks"))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with open(os.path.join(out, "locks", "rank-0.lock"), "w") as f:
            json.dump({"host": socket.gethostname(), "pid": sleeper.pid}, f)
        with pytest.raises(LockError) as info:
            encode_corpus(corpus[0], tokenizer=tok_path, output=out, workers=1, **OPTIONS)
        assert f"process {sleeper.pid}" in str(info.value) and "rank-0.lock" in str(info.value)
    finally:
        sleeper.kill()
        sleeper.wait()
    with open(os.path.join(out, "locks", "rank-0.lock"), "w") as f:
        json.dump({"host": "some-other-host", "pid": 1}, f)
    with pytest.raises(LockError, match="some-other-host"):
        encode_corpus(corpus[0], tokenizer=tok_path, output=out, workers=1, **OPTIONS)


def _big_corpus(tmp_path, lines):
    big = str(tmp_path / "big.jsonl")
    with open(big, "w", encoding="utf-8") as f:
        for k in range(4):
            f.writelines(json.dumps({"text": f"{k} {t}"}, ensure_ascii=False) + "\n" for t in lines)
    return big


def _running_encode(big, tok_path, out, prelude=""):
    """A process encoding ``big`` into ``out`` (after running ``prelude``), returned once its plan is written."""
    command = _encode_command([big], tok_path, out, 1)
    proc = subprocess.Popen(command[:-1] + [prelude + command[-1]], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while not os.path.exists(os.path.join(out, "units", "_plan.json")) and time.time() < deadline:
        time.sleep(0.005)
    return proc


def _slow_finalize(flag):
    """A prelude for :func:`_running_encode`: the run creates ``flag`` when it reaches its finalization, then
    waits a minute there (the test kills it)."""
    return (f"import time, ube_stream.shards.encode as e; f = e._finalize; "
            f"e._finalize = lambda *a: (open({flag!r}, 'w').close(), time.sleep(60), f(*a))[2]; ")


@pytest.mark.parametrize("when", ["units", "finalize"])
def test_two_runs_on_one_directory_the_second_stops(corpus, tok_path, tmp_path, lines, when):
    """A second run of the same directory stops with a LockError naming the first while the first encodes
    and while it finalizes: the rank lock is held until MANIFEST.json is written (it was released before
    finalization, and a second run then resumed from unit records the first run's cleanup was removing)."""
    big = _big_corpus(tmp_path, lines)
    out = str(tmp_path / "two")
    flag = str(tmp_path / "finalizing")
    proc = _running_encode(big, tok_path, out, prelude=_slow_finalize(flag))
    try:
        lock = os.path.join(out, "locks", "rank-0.lock")
        deadline = time.time() + 60
        while when == "finalize" and not os.path.exists(flag) and proc.poll() is None and time.time() < deadline:
            time.sleep(0.01)
        assert proc.poll() is None, "the first run ended before the second started"
        assert when == "units" or os.path.exists(flag), "the first run did not reach its finalization in 60 s"
        with pytest.raises(LockError) as info:
            encode_corpus([big], tokenizer=tok_path, output=out, workers=1, **OPTIONS)
        assert lock in str(info.value) and f"process {proc.pid}" in str(info.value)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not os.path.exists(os.path.join(out, "MANIFEST.json"))
    encode_corpus([big], tokenizer=tok_path, output=out, workers=1, **OPTIONS)   # the rerun completes it
    assert os.path.exists(os.path.join(out, "MANIFEST.json")) and not os.path.exists(os.path.join(out, "units"))


@pytest.mark.slow   # two encodes of a 4x corpus (~9 s on a loaded machine); test_two_runs_... keeps the live case
def test_killed_holder_frees_the_output_at_once_even_from_another_host(tok_path, tmp_path, lines):
    """The rank lock is an flock: while its holder lives a second writer gets a LockError naming it; killed
    with SIGKILL it holds nothing, and the same command resumes at once.  The holder here records another
    host (a node writing the output over NFS): a lock of another host used to block every rerun until
    deleted by hand."""
    big = _big_corpus(tmp_path, lines)
    reference = str(tmp_path / "reference")
    encode_corpus([big], tokenizer=tok_path, output=reference, workers=1, **OPTIONS)
    out = str(tmp_path / "out")
    proc = _running_encode(big, tok_path, out, prelude="import ube_stream.runs.lock as lock; lock.HOST = 'node-7'; "
                           + _slow_finalize(str(tmp_path / "finalizing")))
    try:
        assert proc.poll() is None, "the first run ended before the second started"
        with pytest.raises(LockError) as info:
            encode_corpus([big], tokenizer=tok_path, output=out, workers=1, **OPTIONS)
        assert f"process {proc.pid} on host node-7" in str(info.value) and "rank-0.lock" in str(info.value)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not os.path.exists(os.path.join(out, "MANIFEST.json"))
    with open(os.path.join(out, "locks", "rank-0.lock")) as f:
        assert json.load(f)["host"] == "node-7"          # the dead holder's record stays, its flock is gone
    summary = EncodeSummary()
    encode_corpus([big], tokenizer=tok_path, output=out, workers=1, summary=summary, **OPTIONS)
    assert summary.units_done + summary.units_skipped == summary.units_total
    assert tree(out) == tree(reference)


def test_a_free_lock_recorded_on_another_host_does_not_block(corpus, tok_path, encoded, tmp_path):
    """A lock file of this version whose flock nobody holds (its holder died, on any host) is taken over."""
    out = str(tmp_path / "free")
    os.makedirs(os.path.join(out, "locks"))
    for name in ("rank-0.lock", f"{encoded[1]['shards'][0]['unit_id']}.lock", "finalize.lock"):
        with open(os.path.join(out, "locks", name), "w") as f:
            json.dump({"host": "node-7", "pid": 4242, "started": 1, "lock": "flock"}, f)
    encode_corpus(corpus[0], tokenizer=tok_path, output=out, workers=1, **OPTIONS)
    assert tree(out) == tree(encoded[0])


@pytest.mark.slow   # four encoding processes
def test_concurrent_encodes_of_one_output_never_corrupt_it(corpus, tok_path, encoded, tmp_path):
    """Two processes started together on one output: each finishes or stops with a LockError naming the
    rank lock; the directory is never mixed (a rerun completes it, byte-identical)."""
    for round_ in range(2):
        out = str(tmp_path / f"race{round_}")
        procs = [subprocess.Popen(_encode_command(corpus[0], tok_path, out, 1), cwd=ROOT, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outcomes = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
        for rc, err in outcomes:
            assert rc == 0 or ("LockError" in err and "is held by" in err), err[-2000:]
        if any(rc != 0 for rc, _ in outcomes):
            encode_corpus(corpus[0], tokenizer=tok_path, output=out, workers=1, **OPTIONS)
        assert tree(out) == tree(encoded[0])


def test_dispatched_unit_locks(corpus, tok_path, tok, encoded, tmp_path, monkeypatch):
    """A unit dispatched by a cluster driver (Ray): a unit lock held on another host (an attempt the cluster
    gave up on) does not stop it, a live holder on this host is waited for and then named; the shards are
    those of the whole-corpus run."""
    from ube_stream import readers
    from ube_stream.runs.corpus import Corpus
    from ube_stream.shards import writer

    reading = Corpus(corpus[0], on_error="skip", unit_rows=OPTIONS["unit_rows"], unit_bytes=readers.DEFAULT_UNIT_BYTES,
                     even_bytes=True)
    unit = reading.units(reading.sources())[0]
    out = str(tmp_path / "dispatched")
    for sub in ("shards", "units", "locks"):
        os.makedirs(os.path.join(out, sub))
    lock_path = os.path.join(out, "locks", f"{unit.unit_id}.lock")
    task = dict(out_dir=out, corpus=reading.reading(), shard_tokens=OPTIONS["shard_tokens"],
                eos_id=tok.special_tokens["<|endoftext|>"], bos_id=None, fingerprint=tok.fingerprint,
                tokenizer_path=tok_path, dispatched=True)

    def holder_on(host):
        code = (f"import sys, time\nimport ube_stream.runs.lock as lock\nlock.HOST = {host!r}\n"
                f"lock.FileLock({lock_path!r}, 'a unit').acquire()\nprint('held', flush=True)\ntime.sleep(120)")
        proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "held"
        return proc

    monkeypatch.setattr(writer, "DISPATCHED_LOCK_WAIT_S", 0.3)
    here = holder_on(writer.HOST)
    try:
        with pytest.raises(LockError, match=f"process {here.pid} on host {writer.HOST}"):
            writer.encode_unit(unit, **task)
    finally:
        here.kill()
        here.wait()
    elsewhere = holder_on("node-7")
    try:
        record = writer.encode_unit(unit, **task)
    finally:
        elsewhere.kill()
        elsewhere.wait()
    expected = [s for s in encoded[1]["shards"] if s["unit_id"] == unit.unit_id]
    assert [{k: s[k] for k in expected[0]} for s in record["shards"]] == expected
    assert writer.committed_record(out, unit.unit_id) == record
    assert writer.encode_unit(unit, **task) == record            # committed: not redone


def test_reader_pickles_without_token_data(encoded):
    import pickle

    ds = TokenShards(encoded[0])
    first = ds.doc(3).tolist()
    assert all(s._tokens is None for s in ds.shards[1:])            # mapped lazily, shard by shard
    blob = pickle.dumps(ds)
    assert len(blob) < 20_000 + 300 * len(ds.shards) < 4 * ds.num_tokens
    clone = pickle.loads(blob)
    assert clone.doc(3).tolist() == first and clone.source(3) == ds.source(3)
    assert clone.decode_doc(len(ds) - 1) == ds.decode_doc(len(ds) - 1)


def test_empty_source_and_text_mode_file(tok_path, tok, tmp_path):
    empty = str(tmp_path / "empty.jsonl")
    open(empty, "w").close()
    whole = str(tmp_path / "whole.txt")
    text = "first line\nsecond line, \u4e2d\u6587\r\n\nlast"
    with open(whole, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    out = str(tmp_path / "o")
    manifest = encode_corpus([empty, whole], tokenizer=tok_path, output=out, workers=1, text_mode="file",
                             show_progress=False)
    assert [(s["rows_read"], s["documents"]) for s in manifest["sources"]] == [(0, 0), (1, 1)]
    ds = TokenShards(out)
    assert len(ds) == 1 and ds.decode_doc(0) == text and ds.source(0) == (whole, 0)


# --------------------------------------------------------------------------- CLI

def test_cli_encode_and_inspect(corpus, tok_path, encoded, tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="ube")
    _cli_shards.register(parser.add_subparsers(dest="command"))
    out = str(tmp_path / "cli")
    args = parser.parse_args(["encode", *corpus[0], "--tokenizer", tok_path, "-o", out, "--workers", "1",
                              "--unit-rows", "97", "--shard-tokens", "3000", "--on-error", "skip"])
    assert args.func(args) == 0
    err = capsys.readouterr().err
    totals = encoded[1]["totals"]
    assert f"documents      {totals['documents']:,}" in err and f"tokens         {totals['tokens']:,}" in err
    assert "MB/s" in err and "invalid_json: 1" in err
    assert tree(out) == tree(encoded[0])
    args = parser.parse_args(["inspect", out, "--verify", "full"])
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert args.func(args) == 0
    text = buf.getvalue()
    assert f"documents   {totals['documents']:,}" in text and f"shards      {totals['shards']:,}" in text
    assert f"rows read {totals['rows_read']:,}" in text and "tokens per document" in text
    hist = [int(m.replace(",", "")) for m in re.findall(r"^\s+\S+\s+([\d,]+)  #", text, re.M)]
    assert sum(hist) == totals["documents"]
    args = parser.parse_args(["encode", corpus[0][0], "--tokenizer", tok_path, "-o", out, "--bos"])
    with pytest.raises(ValueError, match="bos_token"):
        args.func(args)


def test_cli_errors_name_flags_where_the_library_names_parameters(corpus, tok_path, tmp_path, capsys):
    from ube_stream.cli import main

    out = str(tmp_path / "flags")
    with pytest.raises(ValueError) as info:
        encode_corpus(corpus[0][:1], tokenizer=tok_path, output=out, bos=True, workers=1, show_progress=False)
    assert str(info.value) == "bos=True needs bos_token naming a special token"
    assert main(["encode", corpus[0][0], "--tokenizer", tok_path, "-o", out, "--bos", "-q"]) == 1
    assert capsys.readouterr().err == "ube encode: error: --bos needs --bos-token naming a special token\n"


@pytest.mark.parametrize("texts", [[b"<|endoftext|>", b"<|pad|>"], [b"ab", b"b", b"<|x|>"], [b"\xe6\x80\xa7"]])
def test_find_first_equals_its_twin(texts):
    """_encode.find_first (memchr when the texts share a first byte, a byte table
    otherwise) finds the leftmost occurrence bytes.find finds, in every range of
    random text built from the texts' own bytes and pieces of them (near misses)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from ube_stream import _encode
    from ube_stream._reference import find_first_reference

    pieces = texts + [t[:-1] for t in texts if len(t) > 1] + [b"<", b"|", b"x", b"\n"]
    table = np.frombuffer(b"".join(texts), np.uint8)
    offsets = np.cumsum([0] + [len(t) for t in texts]).astype(np.int64)

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.sampled_from(pieces), max_size=30), st.data())
    def check(parts, data):
        buf = b"".join(parts)
        start = data.draw(st.integers(0, len(buf)))
        stop = data.draw(st.integers(start, len(buf)))
        got = _encode.find_first(np.frombuffer(buf, np.uint8), start, stop, table, offsets)
        assert got == find_first_reference(buf, start, stop, texts)

    check()


def test_find_first_rejects_bad_ranges_and_empty_texts():
    from ube_stream import _encode

    data, texts = np.frombuffer(b"abc", np.uint8), np.frombuffer(b"b", np.uint8)
    assert _encode.find_first(data, 0, 3, texts, np.array([0, 1])) == 1
    assert _encode.find_first(data, 0, 3, texts, np.array([0])) == -1   # no texts
    with pytest.raises(ValueError, match="not a range"):
        _encode.find_first(data, 2, 4, texts, np.array([0, 1]))
    with pytest.raises(ValueError, match="empty"):
        _encode.find_first(data, 0, 3, texts, np.array([0, 0, 1]))


# --------------------------------------------------------------------------- reruns with other settings (issue 28)

def test_rerun_replaces_a_run_that_committed_nothing_refuses_one_that_did(tok_path, tmp_path, lines, capsys):
    """A wrong --column on a .jsonl.zst leaves a plan and no committed unit: the rerun with the right
    column replaces it (saying so on one line) and writes what a fresh run writes.  A run with committed
    units still refuses, naming the differing option, both values and the fix."""
    import zstandard

    src = str(tmp_path / "docs.jsonl.zst")
    with open(src, "wb") as f:
        f.write(zstandard.ZstdCompressor().compress(
            "".join(json.dumps({"content": t}, ensure_ascii=False) + "\n" for t in lines[:400]).encode("utf-8")))
    out = str(tmp_path / "out")
    with pytest.raises(InputError, match="text"):
        encode_corpus([src], tokenizer=tok_path, output=out, workers=1, unit_rows=97, show_progress=False)
    assert os.path.exists(os.path.join(out, "units", "_plan.json"))
    capsys.readouterr()
    manifest = encode_corpus([src], tokenizer=tok_path, output=out, workers=1, unit_rows=97, column="content")
    err = capsys.readouterr().err
    replaced = [line for line in err.splitlines() if "replacing an unfinished run" in line]
    assert len(replaced) == 1 and "options.column: 'text' recorded, 'content' now" in replaced[0], err
    fresh = str(tmp_path / "fresh")
    assert encode_corpus([src], tokenizer=tok_path, output=fresh, workers=1, unit_rows=97, column="content",
                         show_progress=False) == manifest
    assert tree(out) == tree(fresh)

    ranked = str(tmp_path / "ranked")                   # rank 0 of 2 commits its units, rank 1 never ran
    encode_corpus([src], tokenizer=tok_path, output=ranked, workers=1, unit_rows=97, column="content",
                  rank=0, world_size=2, show_progress=False)
    with pytest.raises(ShardFormatError) as info:
        encode_corpus([src], tokenizer=tok_path, output=ranked, workers=1, unit_rows=97, column="body",
                      rank=1, world_size=2, show_progress=False)
    message = str(info.value)
    assert "options.column: 'content' recorded, 'body' now" in message
    assert "rerun it with its own settings" in message and "new output directory" in message
    assert any(n.endswith(".json") and n != "_plan.json" for n in os.listdir(os.path.join(ranked, "units")))


def test_forked_workers_start_from_the_drivers_warm_cache_and_write_the_same_shards(corpus, tok_path, tmp_path):
    """Before it forks its workers the driver encodes the first documents of the
    first units (``_warm_cache``; a bad row among them is left to its unit): the
    workers inherit a chunk cache holding the corpus's frequent chunks, and the
    shards are the bytes one worker writes.  The fork runs in a fresh ``ube
    encode`` (the command forks; a test process may hold other tests' threads)."""
    from ube_stream.runs import Corpus
    from ube_stream.shards import encode as encode_module

    paths = corpus[0]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # `python -m ube_stream` of this checkout

    def tasks(path, unit_rows, on_error="raise"):
        c = Corpus(inputs=[path], unit_rows=unit_rows, on_error=on_error)
        return [{"corpus": c.reading(), "unit": u} for u in c.units(c.sources())]

    def entries(tok):
        encoder = tok._kernel()[0]
        return max(encoder.cache_stats(s)["entries"] for s in range(encoder.num_slots))

    tok = Tokenizer.load(tok_path)
    seeded = entries(tok)
    encode_module._warm_cache(tok, tasks(paths[0], 97), encode_module.PREWARM_BYTES)
    assert entries(tok) > seeded + 1000
    # a unit whose first documents hold bad rows (row 33: invalid JSON): nothing raised here
    tok = Tokenizer.load(tok_path)
    encode_module._warm_cache(tok, tasks(paths[2], 5), 1 << 20)
    assert entries(tok) > seeded
    args = ["--tokenizer", tok_path, "--unit-rows", "97", "--on-error", "skip", "-q"]
    for workers in ("1", "2"):
        subprocess.run([sys.executable, "-m", "ube_stream", "encode", *paths, "-o", str(tmp_path / workers),
                        "--workers", workers, *args], check=True, cwd=repo)
    assert tree(tmp_path / "1" / "shards") == tree(tmp_path / "2" / "shards")
    one, two = (json.loads((tmp_path / w / "MANIFEST.json").read_text())["totals"] for w in "12")
    assert one == two
    bad = subprocess.run([sys.executable, "-m", "ube_stream", "encode", *paths, "-o", str(tmp_path / "r"),
                          "--workers", "2", "--tokenizer", tok_path, "--unit-rows", "5", "-q"],
                         capture_output=True, text=True, cwd=repo)
    assert bad.returncode != 0 and "row 33" in bad.stderr   # raised by the unit that holds it
