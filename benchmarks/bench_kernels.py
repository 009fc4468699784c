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
