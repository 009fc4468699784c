"""Throughput of GPT-2 pre-tokenization: the Cython kernel vs ``regex.findall``
(and of the cl100k / llama3 / o200k kernels; see side_by_side_tiktoken_patterns.py
for those against ``regex``).

The corpus is a few MB of mixed text: running text in 26 languages
(``docs.jsonl.zst``), short parallel items in hundreds of languages
(``parallel.jsonl.zst``) from ``../shared/data`` when present (else the small
fixtures in ``tests/data``), plus this Python's standard-library ``.py`` files
for code.  ``UBE_BENCH_CORPUS=path`` (``.jsonl[.zst]`` with a ``text`` field, or
plain text) replaces it; the test skips when no source exists.

Run::

    python -m pytest benchmarks/bench_pretokenize.py --benchmark-enable --benchmark-columns=mean,rounds
    python benchmarks/bench_pretokenize.py          # prints MB/s and leaves a record (_record.py)
"""
from __future__ import annotations

import io
import json
import os
import pathlib
import sys
import sysconfig
import time

import numpy as np
import pytest
import regex
import zstandard

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the worktree's package (built in place)

from _record import write_record  # noqa: E402

from ube_stream.pretokenizer import GPT2_PATTERN, chunk_bounds, chunk_bounds_batch  # noqa: E402

SHARED = [ROOT.parent / "shared" / "data", pathlib.Path("/work/shared/data")]
BUDGET = {"docs": 2_500_000, "parallel": 1_000_000, "code": 1_000_000}  # bytes per source


def _read_jsonl(path: pathlib.Path, limit: int, stride: int = 1) -> list[str]:
    texts, size = [], 0
    with open(path, "rb") as raw:
        stream = raw
        if path.suffix == ".zst":
            stream = zstandard.ZstdDecompressor().stream_reader(raw)
        for i, line in enumerate(io.TextIOWrapper(stream, encoding="utf-8")):
            if i % stride:
                continue
            text = json.loads(line).get("text")
            if text:
                texts.append(text)
                size += len(text.encode("utf-8"))
                if size >= limit:
                    break
    return texts


def _find(name: str) -> pathlib.Path | None:
    for folder in SHARED:
        if (folder / name).exists():
            return folder / name
    fixture = ROOT / "tests" / "data" / name.replace(".jsonl", "_sample.jsonl")
    return fixture if fixture.exists() else None


def load_corpus() -> tuple[list[str], list[str]]:
    """(documents, notes about the sources used or missing)."""
    override = os.environ.get("UBE_BENCH_CORPUS")
    if override:
        path = pathlib.Path(override)
        if ".jsonl" in path.name:
            return _read_jsonl(path, 1 << 40), [f"corpus {path}"]
        return [path.read_text(encoding="utf-8")], [f"corpus {path}"]
    documents, notes = [], []
    for source, name, stride in (("docs", "docs.jsonl.zst", 7), ("parallel", "parallel.jsonl.zst", 101)):
        path = _find(name)
        if path is None:
            notes.append(f"{source}: missing ({name})")
            continue
        documents += _read_jsonl(path, BUDGET[source], stride if "shared" in str(path) else 1)
        notes.append(f"{source}: {path}")
    size = 0
    stdlib = pathlib.Path(sysconfig.get_paths()["stdlib"])
    for py in sorted(stdlib.glob("*.py")):
        try:
            text = py.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        documents.append(text)
        size += len(text.encode("utf-8"))
        if size >= BUDGET["code"]:
            break
    notes.append(f"code: {stdlib}/*.py" if size else "code: missing")
    return documents, notes


@pytest.fixture(scope="module")
def corpus():
    documents, notes = load_corpus()
    if not documents:
        pytest.skip("no benchmark corpus: " + "; ".join(notes))
    text = "\n".join(documents)
    data = text.encode("utf-8")
    offsets = np.concatenate([[0], np.cumsum([len(d.encode("utf-8")) + 1 for d in documents])])
    offsets[-1] -= 1  # no newline after the last document
    return {"text": text, "data": data, "offsets": offsets.astype(np.int64), "notes": notes}


def _megabytes(corpus) -> float:
    return len(corpus["data"]) / 1e6


def _record_throughput(benchmark, corpus) -> None:
    benchmark.extra_info["MB"] = round(_megabytes(corpus), 2)
    if benchmark.stats is not None:  # None under --benchmark-disable (the project default)
        benchmark.extra_info["MB/s"] = round(_megabytes(corpus) / benchmark.stats.stats.mean, 1)


def test_chunk_bounds_gpt2(benchmark, corpus):
    ends = benchmark(chunk_bounds, corpus["data"])
    assert ends[-1] == len(corpus["data"])
    _record_throughput(benchmark, corpus)


def test_chunk_bounds_batch_gpt2(benchmark, corpus):
    ends, doc_chunk_offsets = benchmark(chunk_bounds_batch, corpus["data"], corpus["offsets"])
    assert doc_chunk_offsets[-1] == ends.shape[0]
    _record_throughput(benchmark, corpus)


@pytest.mark.parametrize("name", ["cl100k", "llama3", "o200k"])
def test_chunk_bounds_batch_tiktoken(benchmark, corpus, name):
    """tiktoken's patterns in their kernels (side_by_side_tiktoken_patterns.py compares regex)."""
    ends, doc_chunk_offsets = benchmark(chunk_bounds_batch, corpus["data"], corpus["offsets"], name)
    assert doc_chunk_offsets[-1] == ends.shape[0]
    _record_throughput(benchmark, corpus)


def test_regex_findall_gpt2(benchmark, corpus):
    pattern = regex.compile(GPT2_PATTERN)
    chunks = benchmark.pedantic(pattern.findall, args=(corpus["text"],), rounds=3, iterations=1)
    assert "".join(chunks) == corpus["text"]
    _record_throughput(benchmark, corpus)


def main(argv=None) -> None:
    import argparse

    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    documents, notes = load_corpus()
    print("\n".join(notes))
    if not documents:
        sys.exit("no corpus")
    text = "\n".join(documents)
    data = text.encode("utf-8")
    mb = len(data) / 1e6
    pattern = regex.compile(GPT2_PATTERN)

    def best(fn, repeat):
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - start)
        return min(times), result

    seconds_ours, ends = best(lambda: chunk_bounds(data), 10)
    seconds_regex, chunks = best(lambda: pattern.findall(text), 3)
    assert len(chunks) == ends.shape[0]
    print(f"corpus: {mb:.1f} MB UTF-8, {len(text):,} characters, {len(chunks):,} chunks")
    print(f"chunk_bounds (Cython): {mb / seconds_ours:8.1f} MB/s")
    print(f"regex.findall:         {mb / seconds_regex:8.1f} MB/s")
    print(f"speed-up:              {seconds_regex / seconds_ours:8.1f}x")
    write_record("bench_pretokenize", title="GPT-2 pre-tokenization: the Cython kernel vs regex.findall",
                 columns=["what", "MB/s", "x regex.findall"],
                 rows=[["chunk_bounds (Cython)", mb / seconds_ours, seconds_regex / seconds_ours],
                       ["regex.findall", mb / seconds_regex, 1.0]],
                 notes=[*notes, f"{mb:.1f} MB UTF-8, {len(chunks):,} chunks; best of 10 (kernel) and 3 (regex)"])


if __name__ == "__main__":
    main()
