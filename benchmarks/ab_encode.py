"""A/B of two builds of the encoder, in alternating processes: warm and fresh CPU time.

    python benchmarks/ab_encode.py prep [--mb 2 --side-mb 1 --train-mb 2]   # once: corpora + trained-32k
    python benchmarks/ab_encode.py ab BEFORE_ROOT AFTER_ROOT [--rounds 5] [--only cl100k,trained-32k]
    python benchmarks/ab_encode.py inproc BEFORE_ROOT [--rounds 8] [--only trained-32k]

``prep`` writes the corpora (``mixed``, ``english``, ``cjk`` as side_by_side_encode.py
takes them, ``indic`` as encode_corpus_scale.py does) and a utf8 tokenizer trained on
the mixed text (GPT-2 pattern) to ``--dir``.  ``ab`` then runs ``--rounds`` pairs of processes, before and after
alternating, each importing ``ube_stream`` from its own built checkout and timing,
per vocabulary and corpus, one *fresh* call (an unpickled tokenizer: empty caches,
tables built untimed by a first call on one short text) and the median of
``--warm`` warm calls, all ``time.process_time`` (CPU time, one thread).  Prints the
median over rounds of each figure (MB/s) and the after/before ratio.

``inproc`` holds both builds of ``_encode`` in one process (``measure.built_module``:
this checkout's as imported, BEFORE_ROOT's under its own name) and alternates them
round by round on fresh tokenizers (the one ``ube_stream.tokenizer.core`` builds its
encoder from is swapped), ids checked identical.  On this shared 2-core machine
separate processes land in a fast or a slow mode at random (the same build's warm
pass read 300 or 450-540 MB/s from one process to the next, ASLR and neighbours), so
interleaving in one process is the steadier comparison.
"""
import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import time

from _record import write_record  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VOCABS = ("cl100k", "o200k", "trained-32k")


def prep(args):
    sys.path.insert(0, os.path.dirname(HERE))
    import encode_corpus_scale as scale
    import side_by_side_encode as sbs

    from ube_stream import train

    os.makedirs(args.dir, exist_ok=True)
    corpora = sbs.corpora(args.corpus, args.shared, args.mb, args.side_mb)
    # Indic scripts: GPT-2's pattern cuts their words at every vowel sign (a chunk a character or two)
    corpora["indic"] = scale.take(scale.grouped(scale.read_jsonl(os.path.join(args.shared, "parallel.jsonl.zst")),
                                                lambda r: r["script"] in scale.INDIC), args.side_mb)
    with open(os.path.join(args.dir, "corpora.pkl"), "wb") as f:
        pickle.dump(corpora, f)
    tok = train(iter(sbs.take(iter(corpora["mixed"]), args.train_mb)), vocab_size=32000, substrate="utf8",
                workers=1, show_progress=False)
    with open(os.path.join(args.dir, "trained.pkl"), "wb") as f:
        pickle.dump(tok, f)
    print({k: round(sbs.mb_of(v), 2) for k, v in corpora.items()})


def one(args):
    sys.path.insert(0, HERE)
    from side_by_side_encode import rank_file  # (it puts this checkout first on sys.path)

    sys.path.insert(0, args.root)              # so the build under test goes before it
    import ube_stream
    from ube_stream import Tokenizer

    if not os.path.abspath(ube_stream.__file__).startswith(os.path.abspath(args.root) + os.sep):
        raise SystemExit(f"imported {ube_stream.__file__}, not the build under test in {args.root}")

    with open(os.path.join(args.dir, "corpora.pkl"), "rb") as f:
        corpora = pickle.load(f)
    out = {}
    for vocab in args.only.split(","):
        if vocab == "trained-32k":
            with open(os.path.join(args.dir, "trained.pkl"), "rb") as f:
                tok = pickle.load(f)
        else:
            _, ranks = rank_file(f"{vocab}_base", args.dir)
            tok = Tokenizer.from_tiktoken(ranks, vocab)
        for label, texts in corpora.items():
            mb = sum(len(t.encode()) for t in texts) / 1e6
            fresh = pickle.loads(pickle.dumps(tok))
            fresh.encode_ordinary_batch(["x"], num_threads=1)  # tables built; cache nearly empty
            t0 = time.process_time()
            fresh.encode_ordinary_batch(texts, num_threads=1)
            out[f"{vocab}/{label}/fresh"] = mb / (time.process_time() - t0)
            runs = []
            for _ in range(args.warm):
                t0 = time.process_time()
                fresh.encode_ordinary_batch(texts, num_threads=1)
                runs.append(mb / (time.process_time() - t0))
            out[f"{vocab}/{label}/warm"] = statistics.median(runs)
    print(json.dumps(out))


def ab(args):
    res = {"before": [], "after": []}
    for r in range(args.rounds):
        for side, root in (("before", args.before), ("after", args.after)) if r % 2 == 0 else \
                (("after", args.after), ("before", args.before)):
            cmd = [sys.executable, __file__, "one", root, "--dir", args.dir, "--only", args.only,
                   "--warm", str(args.warm)]
            line = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
            res[side].append(json.loads(line))
    report({key: [x[key] for x in res["before"]] for key in res["before"][0]},
           {key: [x[key] for x in res["after"]] for key in res["before"][0]},
           f"medians of {args.rounds}",
           f"before {args.before}, after {args.after}; corpora in {args.dir}; medians of {args.rounds} "
           "alternating processes")


def report(before, after, label, note):
    """Print and record the median of each case's rounds (``{case: [MB/s, ...]}`` per side)."""
    print(f"{'MB/s (CPU time)':28s} {'before':>8s} {'after':>8s} {'ratio':>6s}   ({label})")
    rows = []
    for key in before:
        b, a = statistics.median(before[key]), statistics.median(after[key])
        print(f"{key:28s} {b:8.2f} {a:8.2f} {a / b:6.3f}")
        rows.append([key, b, a, a / b])
    write_record("ab_encode", title="A/B of two builds of the encoder (MB/s of CPU time)",
                 columns=["case", "before (MB/s)", "after (MB/s)", "after / before (x)"], rows=rows, notes=[note])


def inproc(args):
    from measure import built_module

    import ube_stream.tokenizer.core as core

    with open(os.path.join(args.dir, "corpora.pkl"), "rb") as f:
        corpora = pickle.load(f)
    with open(os.path.join(args.dir, "trained.pkl"), "rb") as f:
        trained = pickle.load(f)
    builds = {"after": core._encode, "before": built_module(args.before, "_encode", "ab_before")}
    res = {side: {} for side in builds}
    for r in range(args.rounds):
        for side in ("after", "before") if r % 2 == 0 else ("before", "after"):
            core._encode = builds[side]
            try:
                for vocab in args.only.split(","):
                    if vocab != "trained-32k":
                        raise SystemExit("inproc measures trained-32k only (--only trained-32k)")
                    for label, texts in corpora.items():
                        mb = sum(len(t.encode()) for t in texts) / 1e6
                        tok = pickle.loads(pickle.dumps(trained))
                        tok.encode_ordinary_batch(["x"], num_threads=1)
                        t0 = time.process_time()
                        ids = tok.encode_ordinary_batch(texts, num_threads=1)
                        res[side].setdefault(f"{vocab}/{label}/fresh", []).append(mb / (time.process_time() - t0))
                        runs = []
                        for _ in range(args.warm):
                            t0 = time.process_time()
                            tok.encode_ordinary_batch(texts, num_threads=1)
                            runs.append(mb / (time.process_time() - t0))
                        res[side].setdefault(f"{vocab}/{label}/warm", []).append(statistics.median(runs))
                        digest = res[side].setdefault(f"ids/{label}", [])
                        digest.append(hash(b"".join(a.tobytes() for a in ids)))
            finally:
                core._encode = builds["after"]
    for key in res["after"]:
        if key.startswith("ids/") and set(res["after"][key]) != set(res["before"][key]):
            raise SystemExit(f"{key}: the two builds' ids differ")
    cases = [key for key in res["after"] if not key.startswith("ids/")]
    report({key: res["before"][key] for key in cases}, {key: res["after"][key] for key in cases},
           f"medians of {args.rounds}, one process",
           f"before {args.before}, after this checkout; corpora in {args.dir}; medians of {args.rounds} "
           "rounds alternating in one process; ids checked identical")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=("prep", "ab", "one", "inproc"))
    p.add_argument("before", nargs="?")
    p.add_argument("after", nargs="?")
    p.add_argument("--dir", default="/tmp/ube_ab")
    p.add_argument("--corpus", default=os.path.join(HERE, "data", "mixed.jsonl"))
    p.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared", "data"))
    p.add_argument("--mb", type=float, default=2.0)
    p.add_argument("--side-mb", type=float, default=1.0)
    p.add_argument("--train-mb", type=float, default=2.0)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--warm", type=int, default=3)
    p.add_argument("--only", default=",".join(VOCABS))
    args = p.parse_args()
    if args.mode == "prep":
        prep(args)
    elif args.mode == "one":
        args.root = args.before
        one(args)
    elif args.mode == "inproc":
        inproc(args)
    else:
        ab(args)


if __name__ == "__main__":
    main()
