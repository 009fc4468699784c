"""pytest-benchmark suite of the kernels on real multilingual text.

    python -m pytest benchmarks/bench_kernels.py --benchmark-enable --benchmark-columns=median,rounds

Uses tests/data/docs_sample.jsonl.zst (2.3 MB, 26 languages; ships with the
repository), or ``UBE_BENCH_CORPUS`` (JSONL with a ``text`` field, optionally
.zst).  The side-by-side scripts in this folder compare with the peers; this
suite tracks our own kernels over time.  Throughput = bytes / median.
"""
import io
import json
import os
import pathlib

import numpy as np
import pytest

from ube_stream import _count, _merge, _route

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = os.environ.get("UBE_BENCH_CORPUS", str(ROOT / "tests" / "data" / "docs_sample.jsonl.zst"))


def _texts(path):
    with open(path, "rb") as f:
        stream = f
        if path.endswith(".zst"):
            import zstandard

            stream = zstandard.ZstdDecompressor().stream_reader(f)
        return [json.loads(line)["text"] for line in io.TextIOWrapper(stream, encoding="utf-8")]


@pytest.fixture(scope="module")
def corpus():
    if not os.path.exists(CORPUS):
        pytest.skip(f"no corpus at {CORPUS}")
    texts = _texts(CORPUS)
    encoded = [t.encode("utf-8") for t in texts]
    data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    offsets = np.concatenate([[0], np.cumsum([len(e) for e in encoded])]).astype(np.int64)
    return texts, data, offsets


@pytest.fixture(scope="module")
def tokenizer(corpus):
    import ube_stream

    texts, _, _ = corpus
    return ube_stream.train(iter(texts), vocab_size=8000, substrate="ube", workers=1, show_progress=False)


@pytest.mark.parametrize("substrate", ["ube", "utf8", "utf16"])
def test_route(benchmark, corpus, substrate):
    from ube_stream.substrate import route_bytes

    _, data, _ = corpus
    symbols = benchmark(route_bytes, data, substrate)
    assert len(symbols) >= len(data) // 2


def test_pretokenize_batch(benchmark, corpus):
    from ube_stream.pretokenizer import chunk_bounds_batch

    _, data, offsets = corpus
    ends, _ = benchmark(chunk_bounds_batch, data, offsets)
    assert ends[-1] == len(data)


def test_count_chunks(benchmark, corpus):
    from ube_stream.pretokenizer import chunk_bounds_batch

    _, data, offsets = corpus
    ends, _ = chunk_bounds_batch(data, offsets)

    def count():
        counter = _count.ChunkCounter()
        counter.add_chunks(data, ends, 0)
        return counter

    assert len(benchmark(count)) > 1000


def test_train_merges(benchmark, corpus):
    from ube_stream.pretokenizer import chunk_bounds_batch

    _, data, offsets = corpus
    ends, _ = chunk_bounds_batch(data, offsets)
    counter = _count.ChunkCounter()
    counter.add_chunks(data, ends, 0)
    key_data, key_offsets, counts = counter.export()
    _, symbols, sym_offsets = _route.route_batch(key_data, key_offsets, 0)
    _, merges = benchmark(_merge.train_merges, symbols, sym_offsets, counts, 512, 8000, 2, -1)
    assert len(merges) > 1000


def test_encode_utf8_batch(benchmark, corpus, tokenizer):
    _, data, offsets = corpus
    ids, token_offsets = benchmark(tokenizer.encode_utf8_batch, data, offsets)
    assert token_offsets[-1] == len(ids)


def test_decode(benchmark, corpus, tokenizer):
    texts, data, offsets = corpus
    ids, _ = tokenizer.encode_utf8_batch(data, offsets)
    text = benchmark(tokenizer.decode, ids)
    assert text == "".join(texts)


def _scan_all_lines(block, key, out, ends, offsets, ok):
    from ube_stream import _jsonl

    at, rows, simple = 0, 0, 0
    while at < block.shape[0]:
        n = _jsonl.scan_lines(block, at, block.shape[0], key, out, ends, offsets, ok)
        rows, simple, at = rows + n, simple + int(ok[:n].sum()), int(ends[n - 1])
    return rows, simple


def test_jsonl_scan_lines(benchmark, corpus):
    """The read stage's kernel: JSONL lines scanned and their ``text`` strings
    decoded to UTF-8 (what ``ube encode`` reads with); bytes = the JSONL's.
    Written unescaped (``ensure_ascii=False``), as most corpora are, so the
    strings' plain UTF-8 runs dominate."""
    texts, _, _ = corpus
    raw = b"".join(json.dumps({"id": i, "text": t}, ensure_ascii=False).encode("utf-8") + b"\n" for i, t in enumerate(texts))
    block = np.frombuffer(raw, np.uint8)
    key = np.frombuffer(b"text", np.uint8)
    out = np.empty(len(raw), np.uint8)
    ends, offsets, ok = np.empty(4096, np.int64), np.empty(4097, np.int64), np.empty(4096, np.uint8)
    rows, simple = benchmark(_scan_all_lines, block, key, out, ends, offsets, ok)
    assert rows == simple == len(texts)
