"""Cost of the character-integrity constraint in the merge kernel.

Routes the GPT-2 chunks of the bundled training sample (about 1 MB, 9
languages) under each substrate and times ``_merge.train_merges`` to
``--vocab`` without and with ``char_starts``, interleaved, ``--rounds``
times; prints the medians and their ratio.

    python benchmarks/bench_char_integrity.py [--vocab 8000] [--rounds 5]
"""
import argparse
import collections
import json
import statistics
import time

import numpy as np
import zstandard

from ube_stream import _reference as ref
from ube_stream._merge import train_merges
from ube_stream.sample import sample_paths
from ube_stream.substrate import char_starts, encode_symbols

N_BASE = {"ube": 512, "utf8": 256, "utf16": 256}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    raw = zstandard.ZstdDecompressor().stream_reader(open(sample_paths()["train"], "rb")).read()
    chunks = collections.Counter()
    for line in raw.decode().splitlines():
        chunks.update(ref.pretokenize(json.loads(line)["text"]))
    print(f"{sum(chunks.values()):,} chunks, {len(chunks):,} unique")
    for substrate, n_base in N_BASE.items():
        words = [encode_symbols(chunk, substrate) for chunk in chunks]
        symbols = np.concatenate(words).astype(np.uint16)
        offsets = np.zeros(len(words) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(w) for w in words])
        counts = np.fromiter(chunks.values(), dtype=np.int64)
        flags = char_starts("".join(chunks).encode(), substrate, len(symbols))
        times = {"plain": [], "char_integrity": []}
        merges = {}
        for _ in range(args.rounds):
            for name, extra in (("plain", {}), ("char_integrity", {"char_starts": flags})):
                started = time.perf_counter()
                status, m = train_merges(symbols, offsets, counts, n_base, args.vocab, 2, -1, **extra)
                times[name].append(time.perf_counter() - started)
                merges[name] = len(m)
        plain, strict = (statistics.median(times[k]) for k in ("plain", "char_integrity"))
        print(f"{substrate:6s} plain {plain:.3f} s ({merges['plain']} merges)  char_integrity {strict:.3f} s "
              f"({merges['char_integrity']} merges)  ratio {strict / plain:.2f}")


if __name__ == "__main__":
    main()
