"""A/B of two builds of the chunk-counting kernel (``_count.ChunkCounter``), in one process.

    python benchmarks/ab_count.py BEFORE_ROOT [--after-root .] [--mb 100] [--rounds 7]

Loads the compiled ``_count`` of each checkout (``BEFORE_ROOT`` and ``--after-root``, each
with its kernels built in place) side by side, cuts the first ``--mb`` MB of text of
``benchmarks/data/large/large.jsonl`` (``make_large_corpus.py``) into 16 MiB units as
training does, splits them with the GPT-2 pattern outside the timing, and times what a
counting worker does per unit: ``add_chunks`` into a fresh table, then ``export`` (the
sorted table it saves).  Rounds interleave the two builds (the order alternates); CPU
seconds (``time.process_time``), medians; every exported table is checked identical
between the builds before anything is reported.
"""
import argparse
import hashlib
import json
import os
import statistics
import sys
import time

import numpy as np
from _record import write_record  # noqa: E402
from measure import built_module  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
UNIT_BYTES = 16 << 20


def units_of(corpus: str, mb: int):
    """The corpus's first ``mb`` MB of text in 16 MiB units: (UTF-8 bytes, chunk ends) each."""
    sys.path.insert(0, ROOT)
    from ube_stream.pretokenizer import chunk_bounds_batch

    units, texts, size, total = [], [], 0, 0
    with open(corpus, "rb") as f:
        for line in f:
            text = json.loads(line)["text"].encode("utf-8")
            texts.append(text)
            size += len(text)
            total += len(text)
            if size >= UNIT_BYTES or total >= mb * 10**6:
                units.append(texts)
                texts, size = [], 0
            if total >= mb * 10**6:
                break
    if texts:
        units.append(texts)
    prepared = []
    for texts in units:
        data = np.frombuffer(b"".join(texts), np.uint8)
        offsets = np.cumsum([0] + [len(t) for t in texts]).astype(np.int64)
        ends, _ = chunk_bounds_batch(data, offsets, "gpt2")
        prepared.append((np.ascontiguousarray(data), np.ascontiguousarray(ends, dtype=np.int64)))
    return prepared, total


def run(module, units):
    add = export = 0.0
    digest = hashlib.sha256()
    for data, ends in units:
        counter = module.ChunkCounter()
        t0 = time.process_time()
        counter.add_chunks(data, ends)
        t1 = time.process_time()
        table = counter.export()
        t2 = time.process_time()
        add, export = add + t1 - t0, export + t2 - t1
        for array in table:
            digest.update(array.tobytes())
    return add, export, digest.hexdigest()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before_root")
    parser.add_argument("--after-root", default=ROOT)
    parser.add_argument("--corpus", default=os.path.join(HERE, "data", "large", "large.jsonl"))
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    if not os.path.exists(args.corpus):
        raise SystemExit(f"{args.corpus} missing: run python benchmarks/make_large_corpus.py first")
    builds = {"before": built_module(os.path.abspath(args.before_root), "_count", "before"),
              "after": built_module(os.path.abspath(args.after_root), "_count", "after")}
    units, text_bytes = units_of(args.corpus, args.mb)
    times = {label: {"add": [], "export": []} for label in builds}
    digests = {}
    for r in range(args.rounds):
        order = list(builds) if r % 2 == 0 else list(reversed(builds))
        for label in order:
            add, export, digest = run(builds[label], units)
            times[label]["add"].append(add)
            times[label]["export"].append(export)
            digests.setdefault(label, digest)
            if digests[label] != digest:
                raise SystemExit(f"{label}: the tables changed between rounds")
    if digests["before"] != digests["after"]:
        raise SystemExit("the two builds export different tables")
    rows = []
    for part, what in (("add", "add_chunks"), ("export", "export (sort)"), ("both", "both")):
        med = {}
        for label in builds:
            values = ([a + e for a, e in zip(times[label]["add"], times[label]["export"])] if part == "both"
                      else times[label][part])
            med[label] = statistics.median(values)
        rows.append([what, round(text_bytes / 1e6 / med["before"], 1), round(text_bytes / 1e6 / med["after"], 1),
                     round(med["before"] / med["after"], 2)])
    chunks = sum(len(e) for _, e in units)
    headline = f"add_chunks {rows[0][3]}x, add + export {rows[2][3]}x"
    notes = [f"{text_bytes / 1e6:.0f} MB of text of {os.path.relpath(args.corpus, ROOT)} in {len(units)} units of "
             f"16 MiB, {chunks:,} chunks (GPT-2 pattern, split outside the timing); medians of {args.rounds} "
             "interleaved rounds in one process; exported tables identical",
             f"before: {os.path.abspath(args.before_root)}; after: {os.path.abspath(args.after_root)}"]
    write_record("ab_count", title="A/B of two builds of the chunk-counting kernel (MB of text per CPU second)",
                 columns=["step", "before (MB/s)", "after (MB/s)", "after / before (x)"], rows=rows,
                 notes=notes, headline=headline, argv=sys.argv[1:] if argv is None else argv)
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
