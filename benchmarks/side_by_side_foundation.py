"""Side by side, one process: pre-tokenization and routing throughput.

    python benchmarks/make_corpus.py --mb 60            # once: the mixed corpus
    python benchmarks/side_by_side_foundation.py [CORPUS.jsonl] [--mb 24] [--repeat 3]

Times, on the same text (the first ``--mb`` MB of the corpus, concatenated in
documents of the corpus):
- ``regex.findall`` with the GPT-2 pattern (on ``str``, the way users call it),
- our GPT-2 kernel (``chunk_bounds_batch`` on the UTF-8 buffer),
- our routing of the whole buffer to UBE symbols (``route_bytes``),
- pre-tokenization + routing of every chunk (``chunk_bounds_batch`` + ``route_batch``),
and prints MB/s (of UTF-8 input) and ratios; medians of ``--repeat`` runs.
Single thread throughout.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import regex
from _record import write_record  # noqa: E402

from ube_stream import _route

HERE = os.path.dirname(os.path.abspath(__file__))


def load_corpus(path, mb):
    """The first ``mb`` MB of the ``text`` fields of a JSON Lines file (plain or ``.zst``)."""
    texts, size = [], 0
    if path.endswith(".zst"):
        import io

        import zstandard

        f = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(open(path, "rb")), encoding="utf-8")
    else:
        f = open(path, encoding="utf-8")
    with f:
        for line in f:
            text = json.loads(line)["text"]
            texts.append(text)
            size += len(text.encode("utf-8"))
            if size >= mb * 1e6:
                break
    return texts


def median_time(fn, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="?", default=os.path.join(HERE, "data", "mixed.jsonl"))
    parser.add_argument("--mb", type=float, default=24.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if not os.path.exists(args.corpus):
        sys.exit(f"{args.corpus} not found: run `python benchmarks/make_corpus.py` first")

    from ube_stream.pretokenizer import GPT2_PATTERN, chunk_bounds_batch
    from ube_stream.substrate import route_bytes

    texts = load_corpus(args.corpus, args.mb)
    encoded = [t.encode("utf-8") for t in texts]
    data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    mb = data.nbytes / 1e6
    non_ascii = float((data >= 0x80).mean())
    print(f"corpus: {args.corpus}: {len(texts):,} documents, {mb:.1f} MB UTF-8 ({non_ascii:.0%} non-ASCII bytes)")
    compiled = regex.compile(GPT2_PATTERN)
    route_batch = _route.route_batch

    ends, _ = chunk_bounds_batch(data, offsets)
    n_regex = sum(len(compiled.findall(t)) for t in texts[:50])
    n_ours = sum(len(chunk_bounds_batch(e, [0, len(e)])[0]) for e in encoded[:50])
    assert n_regex == n_ours, (n_regex, n_ours)

    rows = []
    t_regex = median_time(lambda: [compiled.findall(t) for t in texts], max(1, args.repeat // 2))
    rows.append(("regex.findall (GPT-2 pattern)", t_regex))
    t_pretok = median_time(lambda: chunk_bounds_batch(data, offsets), args.repeat)
    rows.append(("ube pre-tokenizer kernel", t_pretok))
    for sub in ("ube", "utf8", "utf16"):
        rows.append((f"routing to {sub} symbols", median_time(lambda: route_bytes(data, sub), args.repeat)))
    code = 0

    def pretok_and_route():
        e, _ = chunk_bounds_batch(data, offsets)
        route_batch(data, np.concatenate([[0], e]).astype(np.int64), code)

    rows.append(("pre-tokenize + route (ube)", median_time(pretok_and_route, args.repeat)))
    print(f"{len(ends):,} chunks; medians of {args.repeat} runs (regex: {max(1, args.repeat // 2)})\n")
    print(f"{'step':<34}{'seconds':>9}{'MB/s':>10}{'vs regex':>10}")
    for name, t in rows:
        print(f"{name:<34}{t:>9.3f}{mb / t:>10.1f}{t_regex / t:>9.1f}x")
    write_record("side_by_side_foundation", title="Pre-tokenization and routing, one thread (MB/s of UTF-8 input)",
                 columns=["step", "seconds", "MB/s", "x regex.findall"],
                 rows=[(name, round(t, 4), round(mb / t, 1), round(t_regex / t, 2)) for name, t in rows],
                 notes=[f"{len(ends):,} chunks of {mb:.1f} MB; medians of {args.repeat} runs "
                        f"(regex: {max(1, args.repeat // 2)})"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
