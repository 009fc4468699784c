"""Throughput of chunk counting (phase 1 of BPE training).

Reads ~20 MB of real multilingual text (the Debian Administrator's Handbook in
26 languages, ``docs.jsonl.zst``), splits it with the GPT-2 regex *outside*
the timing (the pre-tokenizer is benchmarked separately), then times:

* ``ChunkCounter.add_chunks`` on the byte buffer + int64 chunk ends;
* ``collections.Counter`` over Python ``bytes`` slices of the same buffer
  (what a pure-Python trainer does after byte-level pre-tokenization);
* ``collections.Counter`` over the ``str`` chunks (the regex's own output);
* ``ChunkCounter.export`` and a 4-way ``merge_tables``.

Usage::

    python benchmarks/bench_count.py [CORPUS.jsonl.zst] [--mb 20] [--repeat 3]
"""
from __future__ import annotations

import argparse
import io
import json
import pathlib
import sys
import time
from collections import Counter

import numpy as np
import regex
import zstandard

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the worktree's package (built in place)

from _record import write_record  # noqa: E402

from ube_stream._count import ChunkCounter  # noqa: E402
from ube_stream._reference import GPT2_PATTERN  # noqa: E402
from ube_stream.training.chunk_table import merge_tables  # noqa: E402

CANDIDATES = [ROOT.parent / "shared" / "data" / "docs.jsonl.zst",
              pathlib.Path("/work/shared/data/docs.jsonl.zst")]


def find_corpus(path):
    if path:
        return pathlib.Path(path)
    for candidate in CANDIDATES:
        if candidate.exists():
            return candidate
    sys.exit("no corpus given and none of these exists: " + ", ".join(map(str, CANDIDATES)))


def read_texts(path, limit_bytes):
    texts, size = [], 0
    with open(path, "rb") as raw:
        reader = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(raw), encoding="utf-8")
        for line in reader:
            text = json.loads(line)["text"]
            texts.append(text)
            size += len(text.encode("utf-8"))
            if size >= limit_bytes:
                break
    return texts


def best_of(repeat, fn):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", nargs="?", help="a .jsonl.zst file with a 'text' field")
    parser.add_argument("--mb", type=float, default=20.0, help="megabytes of UTF-8 text to use")
    parser.add_argument("--repeat", type=int, default=5, help="best of this many runs")
    args = parser.parse_args(argv)

    corpus = find_corpus(args.corpus)
    t0 = time.perf_counter()
    texts = read_texts(corpus, int(args.mb * 1e6))
    str_chunks = [m for text in texts for m in regex.findall(GPT2_PATTERN, text)]
    byte_chunks = [c.encode("utf-8") for c in str_chunks]
    data = b"".join(byte_chunks)
    ends = np.cumsum(np.fromiter(map(len, byte_chunks), np.int64, len(byte_chunks)))
    del byte_chunks
    buffer = np.frombuffer(data, np.uint8)
    n, mb = len(ends), len(data) / 1e6
    print(f"corpus {corpus}: {len(texts)} documents, {mb:.1f} MB, {n:,} chunks "
          f"(prepared in {time.perf_counter() - t0:.1f} s, not timed)")

    def kernel():
        counter = ChunkCounter()
        counter.add_chunks(buffer, ends)
        return counter

    def counter_bytes():
        starts = [0, *ends[:-1].tolist()]
        return Counter(data[s:e] for s, e in zip(starts, ends.tolist()))

    rows = []
    t_kernel, counter = best_of(args.repeat, kernel)
    rows.append(("ChunkCounter.add_chunks", t_kernel))
    t_bytes, truth = best_of(args.repeat, counter_bytes)
    rows.append(("Counter(bytes slices)", t_bytes))
    t_str, _ = best_of(args.repeat, lambda: Counter(str_chunks))
    rows.append(("Counter(str chunks)", t_str))
    assert len(counter) == len(truth) and counter.total == n

    print(f"{len(counter):,} distinct chunks, table {counter.memory_bytes / 1e6:.1f} MB "
          f"(capacity {counter.capacity:,} slots)")
    print(f"{'method':<26}{'seconds':>9}{'Mchunks/s':>11}{'MB/s':>9}{'speed-up':>10}")
    for name, seconds in rows:
        print(f"{name:<26}{seconds:9.3f}{n / seconds / 1e6:11.2f}{mb / seconds:9.1f}"
              f"{rows[1][1] / seconds:9.1f}x")

    t_export, table = best_of(args.repeat, counter.export)
    print(f"export (sorted): {t_export * 1e3:.1f} ms for {len(counter):,} keys")
    quarter = n // 4
    parts = []
    for i in range(4):
        part = ChunkCounter()
        lo, hi = i * quarter, (n if i == 3 else (i + 1) * quarter)
        part.add_chunks(buffer, ends[lo:hi], start=int(ends[lo - 1]) if lo else 0)
        parts.append(part.export())
    t_merge, merged = best_of(args.repeat, lambda: merge_tables(parts))
    assert all(np.array_equal(a, b) for a, b in zip(table, merged))
    print(f"merge_tables of 4 partial tables: {t_merge * 1e3:.1f} ms")
    write_record("bench_count", title="Chunk counting (phase 1 of BPE training): ChunkCounter vs collections.Counter",
                 columns=["method", "seconds (best)", "Mchunks/s", "MB/s", "x Counter(bytes slices)"],
                 rows=[[name, seconds, n / seconds / 1e6, mb / seconds, rows[1][1] / seconds]
                       for name, seconds in rows]
                 + [["ChunkCounter.export (sorted)", t_export, None, None, None],
                    ["merge_tables of 4 partial tables", t_merge, None, None, None]],
                 notes=[f"{corpus}: {len(texts)} documents, {mb:.1f} MB, {n:,} chunks, {len(counter):,} distinct; "
                        f"best of {args.repeat}"], argv=argv)


if __name__ == "__main__":
    main()
