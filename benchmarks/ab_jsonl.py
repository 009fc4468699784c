"""A/B of two builds of the JSON Lines field kernel (``_jsonl.scan_lines``), in one process.

    python benchmarks/ab_jsonl.py BEFORE_ROOT [--after-root .] [--mb 100] [--rounds 7]

Loads the compiled ``_jsonl`` of each checkout (``BEFORE_ROOT`` and ``--after-root``,
each with its kernels built in place) side by side, and times ``scan_lines`` over
the first ``--mb`` MB of ``benchmarks/data/large/large.jsonl`` (``make_large_corpus.py``)
and over three subsets of its first 20,000 lines: mostly ASCII (> 97% of the first
2,000 characters), mixed (> 50%) and mostly non-ASCII.  Rounds interleave the two
builds; CPU seconds (``time.process_time``), medians; the texts the two builds
write are checked identical before anything is reported.
"""
import argparse
import json
import os
import statistics
import time

import numpy as np
from _record import write_record  # noqa: E402
from measure import built_module  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def subsets(data: bytes) -> dict:
    groups: dict = {"all": data, "ascii": [], "mixed": [], "non-ascii": []}
    for line in data.splitlines(keepends=True)[:20_000]:
        text = json.loads(line)["text"][:2000]
        ascii_share = sum(c < "\x80" for c in text) / max(1, len(text))
        groups["ascii" if ascii_share > 0.97 else "mixed" if ascii_share > 0.5 else "non-ascii"].append(line)
    return {k: v if isinstance(v, bytes) else b"".join(v) for k, v in groups.items()}


def scan(module, data: bytes) -> tuple[float, bytes]:
    block = np.frombuffer(data, dtype=np.uint8)
    n = data.count(b"\n") + 1
    out = np.empty(len(data), dtype=np.uint8)
    ends, offsets, ok = np.empty(n, np.int64), np.empty(n + 1, np.int64), np.empty(n, np.uint8)
    key = np.frombuffer(b"text", dtype=np.uint8)
    t = time.process_time()
    lines = module.scan_lines(block, 0, len(data), key, out, ends, offsets, ok)
    cpu = time.process_time() - t
    return cpu, out[:offsets[lines]].tobytes()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before_root")
    parser.add_argument("--after-root", default=os.path.dirname(HERE))
    parser.add_argument("--mb", type=float, default=100)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--corpus", default=os.path.join(HERE, "data", "large", "large.jsonl"))
    args = parser.parse_args(argv)
    builds = {"before": built_module(args.before_root, "_jsonl", "before"), "after": built_module(args.after_root, "_jsonl", "after")}
    with open(args.corpus, "rb") as f:
        data = f.read(int(args.mb * 1e6))
    data = data[:data.rfind(b"\n") + 1]
    rows = []
    for name, part in subsets(data).items():
        cpu: dict = {label: [] for label in builds}
        texts: dict = {}
        for _ in range(args.rounds):
            for label, module in builds.items():
                seconds, texts[label] = scan(module, part)
                cpu[label].append(seconds)
        assert texts["before"] == texts["after"], f"{name}: the two builds wrote different texts"
        mb = len(part) / 1e6
        before, after = statistics.median(cpu["before"]), statistics.median(cpu["after"])
        rows.append([name, round(mb, 1), round(mb / before), round(mb / after), round(before / after, 2)])
        print(json.dumps(rows[-1]), flush=True)
    write_record("ab_jsonl", title="A/B of two builds of the JSON Lines field kernel (MB per CPU second)",
                 columns=["text", "MB", "before (MB/s)", "after (MB/s)", "after / before (x)"], rows=rows,
                 headline=", ".join(f"{r[0]} {r[4]}x" for r in rows),
                 notes=[f"{os.path.basename(args.corpus)}, first {args.mb:g} MB; subsets of its first 20,000 lines "
                        f"by the ASCII share of their text; medians of {args.rounds} interleaved rounds in one process",
                        f"before: {os.path.abspath(args.before_root)}; after: {os.path.abspath(args.after_root)}"],
                 argv=argv)


if __name__ == "__main__":
    main()
