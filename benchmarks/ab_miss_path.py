"""A/B of two builds of the encoder kernel (``_encode``) in one process, interleaved.

    python benchmarks/ab_miss_path.py BEFORE_SO [--data DIR] [--kb 300] [--rounds 7]
    python benchmarks/ab_miss_path.py BEFORE_SO --pretok-before BEFORE_PRETOK_SO ...

``BEFORE_SO``: the ``_encode*.so`` of the old build (copy it aside before
rebuilding); the new one is this checkout's.  Both are loaded into this process
and each ``Tokenizer`` gets its kernel from one of them, so both encode the same
text objects with the same Python around them.  Per vocabulary (cl100k, o200k:
bpe-openai's rank files) and text set (English rows of ``docs``, Indic-script
rows of ``parallel``, Chinese, Japanese and Korean rows of ``docs``, all under
``--data``: ``tests/data``'s samples or ``/work/shared/data``; ``--sets`` picks
some), each round times, alternating which build goes first:

* ``miss``: the chunk cache off (``set_cache(bytes=0)``), so every chunk takes the
  miss path (routing + merge), one thread, CPU time;
* ``fresh``: a fresh tokenizer (empty cache, tables built untimed by a one-chunk
  call) encoding the set once: the miss path on first sightings plus the hits;
* ``second``: that tokenizer encoding the set again, five times (every chunk a
  hit; five passes, as one takes a millisecond or so).

With ``--pretok-before`` (the ``_pretok*.so`` of the old build), each round also
times ``split``: the pre-tokenizer kernel alone (``_pretok.split_batch`` of the
vocabulary's pattern over the set's UTF-8, ten passes), the old build's module
against this checkout's: the share of the second pass that is pre-tokenization.

Prints and records (``benchmarks/_record.py``) the median over rounds of each
figure (MB/s) and the after/before ratio of the medians.
"""
import argparse
import importlib.machinery
import importlib.util
import io
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _record import write_record  # noqa: E402

INDIC = ("Deva", "Beng", "Taml", "Telu", "Knda", "Mlym", "Gujr", "Guru", "Orya", "Sinh")


def texts(data, kb):
    """English, Indic and CJK text sets of about ``kb`` KB each from ``data``."""
    import zstandard

    sample = os.path.isfile(os.path.join(data, "docs_sample.jsonl.zst"))

    def rows(name):
        with open(os.path.join(data, f"{name}_sample.jsonl.zst" if sample else f"{name}.jsonl.zst"), "rb") as f:
            for line in io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(f), encoding="utf-8"):
                yield json.loads(line)

    def take(it, want):
        out, got = [], 0
        for t in it:
            out.append(t)
            got += len(t.encode())
            if got >= want:
                break
        return out
    return {"english": take((r["text"] for r in rows("docs") if r["lang"].split("-")[0] == "en"), kb * 1000),
            "indic": take((r["text"] for r in rows("parallel") if r.get("script") in INDIC), kb * 1000),
            "cjk": take((r["text"] for r in rows("docs") if r["lang"].split("-")[0] in ("zh", "ja", "ko")), kb * 1000)}


def load_kernel(path, name="_encode"):
    """The ``name`` extension at ``path`` as a module of its own (not in sys.modules)."""
    loader = importlib.machinery.ExtensionFileLoader(f"ube_stream.{name}", path)
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(
        f"ube_stream.{name}", path, loader=loader))
    loader.exec_module(module)
    if name == "_encode" and not hasattr(module.Encoder, "seed_caches"):   # a build from before seeding
        module.Encoder = type("Encoder", (module.Encoder,), {"seed_caches": lambda self, *tables: 0})
    return module


def tokenizer(path, vocab, kernel, cache_off):
    """A fresh tokenizer whose kernel state is built by ``kernel`` (the untimed first call)."""
    from ube_stream import Tokenizer
    from ube_stream.tokenizer import core

    tok = Tokenizer.from_tiktoken(path, vocab)
    if cache_off:
        tok.set_cache(bytes=0)
    saved, core._encode = core._encode, kernel
    try:
        tok.encode_ordinary_batch(["x"], num_threads=1)
    finally:
        core._encode = saved
    return tok


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("before_so")
    p.add_argument("--data", default=os.path.join(HERE, "..", "tests", "data"))
    p.add_argument("--kb", type=int, default=300, help="KB of text per set")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--sets", default="english,indic,cjk", help="comma-separated: english, indic, cjk")
    p.add_argument("--pretok-before", help="the old build's _pretok*.so: also time the pre-tokenizer alone")
    args = p.parse_args()
    sys.path.insert(0, os.path.dirname(HERE))
    import bpe_openai
    import numpy as np

    from ube_stream import _encode, _pretok
    from ube_stream.pretokenizer import encoder_split, tiktoken_class_table
    kernels = {"before": load_kernel(args.before_so), "after": _encode}
    splitters = {"before": load_kernel(args.pretok_before, "_pretok"), "after": _pretok} if args.pretok_before else {}
    sets = {name: tx for name, tx in texts(args.data, args.kb).items() if name in args.sets.split(",")}
    runs = {}
    for vocab in ("cl100k", "o200k"):
        path = os.path.join(os.path.dirname(bpe_openai.__file__), "data", f"{vocab}_base.tiktoken.gz")
        miss = {side: tokenizer(path, vocab, k, True) for side, k in kernels.items()}
        for label, tx in sets.items():
            mb = sum(len(t.encode()) for t in tx) / 1e6
            data, offsets = _encode.utf8_join(tx)
            ends, doc_chunks = np.empty(data.shape[0], np.int64), np.empty(offsets.shape[0], np.int64)
            kind, classes = encoder_split(miss["after"].pattern), tiktoken_class_table()
            for r in range(args.rounds):
                for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
                    if splitters:
                        t0 = time.process_time()
                        for _ in range(10):
                            splitters[side].split_batch(data, offsets, classes, ends, doc_chunks, kind)
                        runs.setdefault(f"{vocab}/{label}/split", {}).setdefault(side, []).append(
                            10 * mb / (time.process_time() - t0))
                    for mode in ("miss", "fresh", "second"):
                        if mode != "second":   # the second pass reuses the fresh tokenizer
                            tok = miss[side] if mode == "miss" else tokenizer(path, vocab, kernels[side], False)
                        passes = 5 if mode == "second" else 1
                        t0 = time.process_time()
                        for _ in range(passes):
                            tok.encode_ordinary_batch(tx, num_threads=1)
                        runs.setdefault(f"{vocab}/{label}/{mode}", {}).setdefault(side, []).append(
                            passes * mb / (time.process_time() - t0))
    table = {}
    print(f"{'MB/s (CPU time)':24s} {'before':>8s} {'after':>8s} {'ratio':>6s}   (medians of {args.rounds})")
    for key, sides in runs.items():
        b, a = statistics.median(sides["before"]), statistics.median(sides["after"])
        table[key] = {"before": b, "after": a, "ratio": a / b}
        print(f"{key:24s} {b:8.2f} {a:8.2f} {a / b:6.3f}")
    write_record("ab_miss_path", title=f"Encoder miss path: A/B of two _encode builds, {args.kb} KB a set, "
                                        f"medians of {args.rounds} interleaved rounds, one thread, CPU time",
                 columns=["vocabulary/set/mode", "before MB/s", "after MB/s", "after/before"],
                 rows=[[key, f"{v['before']:.2f}", f"{v['after']:.2f}", f"{v['ratio']:.3f}"]
                       for key, v in table.items()],
                 notes=["miss: the chunk cache off, every chunk routed and merged; fresh: a fresh tokenizer "
                        "encoding the set once; second: five more passes; split (with --pretok-before): the "
                        "pre-tokenizer kernel alone, ten passes", f"before: {os.path.abspath(args.before_so)}"]
                 + ([f"pretok before: {os.path.abspath(args.pretok_before)}"] if args.pretok_before else []),
                 data={"rounds": args.rounds, "kb": args.kb, "data": os.path.abspath(args.data), "results": table})

if __name__ == "__main__":
    main()
