"""Cost and effect of the character-integrity constraint (``char_integrity``).

Training (``--what train``): routes the GPT-2 chunks of the bundled training
sample (about 1 MB, 9 languages) under each substrate and times
``_merge.train_merges`` to ``--vocab`` without and with ``char_starts``,
interleaved, ``--rounds`` times (CPU time); prints the medians and their ratio.

Encoding (``--what encode``): trains a char-integrity tokenizer of ``--vocab``
per substrate on the sample, then encodes the sample's documents with it and
with the same merges without the encoder's check (``char_integrity=False``),
interleaved, ``--rounds`` times, single thread, timed as the thread's CPU
time (``time.thread_time``: on a shared machine wall time mostly measures the
neighbours; the fastest runs are the least disturbed): *fresh* (a new encoder, empty
chunk cache: every distinct chunk is merged once, where the check costs),
*warm* (the same text again: cache hits) and *uncached* (a cache too small
to hold a chunk: every chunk is merged, so the ratio is the merge kernels').  It also counts the token
occurrences that straddle a character (hold part of one character and
anything of another; boundaries from ``substrate.char_starts``) in the
encoded sample and in ``tests/data/docs_sample`` (26 languages), with and
without the check.

    python benchmarks/bench_char_integrity.py [--what train|encode|all] [--vocab 8000] [--rounds 5]
"""
import argparse
import collections
import json
import os
import statistics
import sys
import time

import numpy as np
import zstandard
from _record import write_record  # noqa: E402

from ube_stream import Tokenizer, train
from ube_stream import _reference as ref
from ube_stream._merge import train_merges
from ube_stream.sample import sample_paths
from ube_stream.substrate import char_starts, encode_symbols

N_BASE = {"ube": 512, "utf8": 256, "utf16": 256}
DOCS_SAMPLE = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "docs_sample.jsonl.zst")


def read_texts(path):
    raw = zstandard.ZstdDecompressor().stream_reader(open(path, "rb")).read().decode()
    return [json.loads(line)["text"] for line in raw.split("\n") if line]


def bench_train(args, rows: list) -> None:
    chunks = collections.Counter()
    for text in read_texts(sample_paths()["train"]):
        chunks.update(ref.pretokenize(text))
    print(f"training: {sum(chunks.values()):,} chunks, {len(chunks):,} unique")
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
                started = time.thread_time()
                status, m = train_merges(symbols, offsets, counts, n_base, args.vocab, 2, -1, **extra)
                times[name].append(time.thread_time() - started)
                merges[name] = len(m)
        plain, strict = (statistics.median(times[k]) for k in ("plain", "char_integrity"))
        print(f"{substrate:6s} plain {plain:.3f} s ({merges['plain']} merges)  char_integrity {strict:.3f} s "
              f"({merges['char_integrity']} merges)  ratio {strict / plain:.2f}")
        rows.append(["train merges (CPU s)", substrate, strict, plain, strict / plain])


def straddling(tok: Tokenizer, text: str) -> tuple:
    """(straddling token occurrences, tokens) of ``text`` encoded by ``tok``."""
    ids = tok.encode_ordinary(text)
    _, offsets = tok._internal_expansion_table()
    lengths = np.diff(offsets)[ids]
    ends = np.cumsum(lengths)
    starts = ends - lengths
    flags = np.append(char_starts(text.encode(), tok.substrate), 1).astype(bool)
    started = np.cumsum(flags)
    whole = flags[starts] & flags[ends]
    inside_one = started[ends - 1] == started[starts]
    return int(np.count_nonzero(~(whole | inside_one))), int(ids.size)


def bench_encode(args, rows: list) -> None:
    texts = read_texts(sample_paths()["train"])
    data = "\n".join(texts)
    docs = read_texts(DOCS_SAMPLE)
    print(f"encoding: the training sample, {len(data.encode()) / 1e6:.2f} MB in {len(texts)} documents, "
          f"one thread; straddles also on docs_sample ({len(docs)} documents)")
    for substrate in ("ube", "utf16", "utf8"):
        tok = train([sample_paths()["train"]], vocab_size=args.vocab, substrate=substrate, workers=1,
                    show_progress=False, char_integrity=True)
        variants = {"checked": tok, "unchecked": Tokenizer(substrate=substrate, merges=tok.merges)}
        fresh = {k: [] for k in variants}
        warm = {k: [] for k in variants}
        uncached = {k: [] for k in variants}
        ids = {}
        for _ in range(args.rounds):
            for name, base in variants.items():
                t = Tokenizer(substrate=substrate, merges=base.merges, char_integrity=base.char_integrity)
                t._kernel()                                   # tables built outside the timing
                started = time.thread_time()
                ids[name] = t.encode_ordinary_batch(texts, num_threads=1)
                fresh[name].append(time.thread_time() - started)
                started = time.thread_time()
                t.encode_ordinary_batch(texts, num_threads=1)
                warm[name].append(time.thread_time() - started)
                t.set_cache(entries=1, bytes=1)
                t._kernel()
                started = time.thread_time()
                t.encode_ordinary_batch(texts, num_threads=1)
                uncached[name].append(time.thread_time() - started)
        mb = len(data.encode()) / 1e6
        line = [f"{substrate:6s} vocab {tok.vocab_size}  encoder check {tok._kernel()[0].char_integrity!s:5s}"]
        for label, times in (("fresh", fresh), ("warm", warm), ("uncached", uncached)):
            a, b = statistics.median(times["checked"]), statistics.median(times["unchecked"])
            low = min(times["checked"]) / min(times["unchecked"])
            line.append(f"{label:8s}: checked {mb / a:6.2f} MB/s, unchecked {mb / b:6.2f} MB/s, "
                        f"time ratio {a / b:.2f} (medians), {low:.2f} (fastest runs)")
            rows.append([f"encode {label} (MB/s)", substrate, mb / a, mb / b, a / b])
        print("\n       ".join(line))
        changed = sum(not np.array_equal(a, b) for a, b in zip(ids["checked"], ids["unchecked"]))
        for corpus, items in (("sample", texts), ("docs_sample", docs)):
            counts = {}
            for name, t in variants.items():
                pairs = [straddling(t, text) for text in items]
                counts[name] = (sum(p[0] for p in pairs), sum(p[1] for p in pairs))
            rows.append([f"straddling tokens on {corpus}", substrate, counts["checked"][0], counts["unchecked"][0],
                         None])
            print(f"       {corpus:11s} straddling tokens: unchecked {counts['unchecked'][0]:,} of "
                  f"{counts['unchecked'][1]:,}, checked {counts['checked'][0]:,} of {counts['checked'][1]:,}"
                  + (f"  ({changed} of {len(texts)} sample documents encode differently)"
                     if corpus == "sample" else ""))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--what", choices=("train", "encode", "all"), default="all")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    rows: list = []
    if args.what in ("train", "all"):
        bench_train(args, rows)
    if args.what in ("encode", "all"):
        bench_encode(args, rows)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    write_record("bench_char_integrity", title="Cost and effect of the character-integrity constraint",
                 columns=["what", "substrate", "char_integrity (checked)", "plain (unchecked)", "ratio (time)"],
                 rows=rows, notes=[f"the bundled training sample; vocab {args.vocab}; medians of {args.rounds} "
                                   "interleaved rounds, one thread"])


if __name__ == "__main__":
    main()
