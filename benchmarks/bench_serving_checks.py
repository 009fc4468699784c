"""Cost of the serving checks on ``TokenDataset`` throughput (docs/reliability.md).

Every sample a ``TokenDataset`` serves is checked against the vocabulary (one
``max`` over its ``seq_len + 1`` ids).  This script encodes the bundled
sample corpus (repeated ``--copies`` times) into a shard directory, then reads
``--samples`` shuffled samples per run (cycling over the directory's), alternating runs *with* the check and
*without* it (the components' vocabulary size set to None, which skips it: the only difference), and writes
the median samples/s of each and the overhead in percent as a record
(``_record.py``).  It also times opening the directory at each ``verify=`` level.

Usage::

    python benchmarks/bench_serving_checks.py [--seq-len 2048] [--samples 20000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the worktree's package (built in place)

from ube_stream import encode_corpus, sample_paths, train  # noqa: E402
from ube_stream.loader import TokenDataset  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from _record import write_record  # noqa: E402


def make_directory(root: str, copies: int) -> str:
    train_path = sample_paths()["train"]
    tok = train([train_path], vocab_size=4000, workers=1, show_progress=False)
    out = os.path.join(root, "shards")
    encode_corpus([train_path] * copies, tokenizer=tok, output=out, workers=1, show_progress=False)
    return out


def read_all(ds: TokenDataset, n: int) -> float:
    """Seconds to read ``n`` samples (the rank's samples in order, again from the
    first when ``n`` exceeds them: the tokens stay in the page cache, so the
    per-sample CPU cost, the check's, is what differs)."""
    started = time.perf_counter()
    count = len(ds)
    for k in range(n):
        ds[k % count]
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--samples", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--copies", type=int, default=8, help="repeat the sample corpus this many times")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ube-bench-serving-") as root:
        directory = make_directory(root, args.copies)
        opens = {}
        for level in ("none", "header", "full"):
            started = time.perf_counter()
            ds = TokenDataset(directory, args.seq_len, verify=level)
            opens[level] = time.perf_counter() - started
        first_pass = {}
        for label in ("unchecked", "checked", "unchecked_again", "checked_again"):   # fresh datasets:
            fresh = TokenDataset(directory, args.seq_len, seed=1)   # blocks checked on first touch
            if label.startswith("unchecked"):
                for c in fresh._components:
                    c.vocab_size = None
            first_pass[label] = read_all(fresh, len(fresh))
        ds = TokenDataset(directory, args.seq_len, seed=1)
        samples = args.samples
        read_all(ds, samples)   # warm the page cache and the permutation
        real_vocab = {id(c): c.vocab_size for c in ds._components}
        times = {"checked": [], "unchecked": []}
        for _ in range(args.repeat):   # interleaved A/B: load changes hit both alike
            for label in ("checked", "unchecked"):
                for c in ds._components:   # no vocabulary size: the check is skipped
                    c.vocab_size = None if label == "unchecked" else real_vocab[id(c)]
                times[label].append(read_all(ds, samples))
        checked, unchecked = statistics.median(times["checked"]), statistics.median(times["unchecked"])
        result = {
            "benchmark": "serving checks on TokenDataset", "seq_len": args.seq_len, "samples": samples,
            "distinct_samples": len(ds), "tokens": ds.n_tokens, "repeat": args.repeat,
            "samples_per_s_checked": samples / checked, "samples_per_s_unchecked": samples / unchecked,
            "overhead_percent": 100.0 * (checked - unchecked) / unchecked,
            "open_seconds": opens, "first_pass_seconds": first_pass,
        }
    print(json.dumps(result, indent=1))
    rows = [["samples/s, checked", result["samples_per_s_checked"]],
            ["samples/s, unchecked", result["samples_per_s_unchecked"]],
            ["overhead of the check (%)", result["overhead_percent"]],
            *([f"open, verify={level} (s)", s] for level, s in opens.items()),
            *([f"first pass, {label} (s)", s] for label, s in first_pass.items())]
    write_record("bench_serving_checks", title="Cost of the serving checks on TokenDataset throughput",
                 columns=["what", "value"], rows=rows,
                 notes=[f"seq_len {args.seq_len}, {samples} samples per run over {len(ds)} distinct, "
                        f"{ds.n_tokens} tokens (the bundled sample x{args.copies}); medians of {args.repeat} "
                        "interleaved runs"], data=result)


if __name__ == "__main__":
    main()
