"""End-to-end corpus encoding (``encode_corpus``) against the bare encode kernel.

    python benchmarks/side_by_side_shards.py CORPUS.{parquet,jsonl} --tokenizer T.json [--workers 1 2] [--unit-rows 200]

Times, in one process run: the encoder kernel alone (``encode_utf8_batch`` on
the whole corpus already in memory, 1 thread, warm cache as in a long job) and
``encode_corpus`` (reading, encoding, writing shards + MANIFEST) into a fresh
directory with each ``--workers`` value; prints MB/s of UTF-8 text and the
ratio to the kernel rate.
"""
import argparse
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
from _record import write_record  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus")
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--unit-rows", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    from ube_stream import readers
    from ube_stream.shards import encode_corpus
    from ube_stream.tokenizer import Tokenizer

    tok = Tokenizer.load(args.tokenizer)
    pieces = [b.utf8() for u in readers.plan_units(readers.resolve_inputs([args.corpus]))
              for b in readers.read_unit(u)]
    data = np.concatenate([p[0] for p in pieces])
    lengths = np.concatenate([np.diff(p[1]) for p in pieces])
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    mb = data.nbytes / 1e6
    print(f"{args.corpus}: {len(lengths):,} documents, {mb:.1f} MB; {tok!r}")
    tok.encode_utf8_batch(data, offsets)  # warm the chunk cache
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        tok.encode_utf8_batch(data, offsets)
        times.append(time.perf_counter() - start)
    kernel = mb / statistics.median(times)
    print(f"{'encode kernel (1 thread, in memory)':<40}{kernel:>8.1f} MB/s")
    rows = [["encode kernel (1 thread, in memory)", kernel, 1.0]]
    for workers in args.workers:
        times = []
        for _ in range(args.repeat):
            out = tempfile.mkdtemp(prefix="ube-bench-shards-")
            shutil.rmtree(out)
            start = time.perf_counter()
            encode_corpus([args.corpus], tokenizer=args.tokenizer, output=out, workers=workers,
                          unit_rows=args.unit_rows, show_progress=False)
            times.append(time.perf_counter() - start)
            shutil.rmtree(out)
        rate = mb / statistics.median(times)
        print(f"{f'encode_corpus, {workers} worker(s)':<40}{rate:>8.1f} MB/s  {rate / kernel:.2f}x kernel")
        rows.append([f"encode_corpus, {workers} worker(s)", rate, rate / kernel])
    write_record("side_by_side_shards", title="encode_corpus (read, encode, write shards) vs the bare encode kernel",
                 columns=["what", "MB/s (wall)", "x kernel"], rows=rows,
                 notes=[f"{args.corpus}: {len(lengths):,} documents, {mb:.1f} MB; {tok!r}; medians of "
                        f"{args.repeat}; unit_rows {args.unit_rows}"], argv=argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
