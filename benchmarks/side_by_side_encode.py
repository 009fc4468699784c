"""Side by side, one process: encode throughput of ube-stream vs gigatoken, quicktok-v1, tiktoken, HF.

    python benchmarks/make_corpus.py --mb 60                 # once: the mixed corpus
    python benchmarks/side_by_side_encode.py [CORPUS.jsonl] [--mb 20] [--side-mb 5] [--repeat 3]

Vocabularies:
  cl100k, o200k  the real ranks that ``bpe-openai`` ships (``Tokenizer.from_tiktoken``;
                 gigatoken ``from_tiktoken`` on the same file, quicktok's bundled
                 encoding, tiktoken ``Encoding`` on the same ranks, HF on our ``export_hf``);
  trained-32k    a ``utf8`` tokenizer trained here on ``--train-mb`` MB of the corpus
                 (``--vocab``, GPT-2 pattern); HF loads its ``export_hf`` output,
                 tiktoken gets its ranks, quicktok imports the tokenizer.json, gigatoken
                 its ranks as a .tiktoken file with ``pretokenizer="gpt2"`` (gigatoken
                 0.10 refuses the tokenizer.json: it has no fast path for a Split regex);
  ube-32k        the ``ube`` tokenizer trained on the same text (ours only: its row is
                 compared with its ``utf8`` twin).
Corpora: ``mixed`` (the first ``--mb`` MB of CORPUS, the headline), ``english`` (its
documents that are >= 97% ASCII: prose and code) and ``cjk`` (the Chinese, Japanese
and Korean pages of docs.jsonl.zst and CJK items of parallel.jsonl.zst, 200 per
document), ``--side-mb`` MB each.

Before any timing, every encoder's ids are checked identical to ours on the first
200 documents of each corpus.  Then, per corpus: one pass with a *fresh* instance of
each encoder (built untimed; its first call, with whatever it initialises lazily
and a cold cache, is timed), then ``--repeat`` interleaved rounds on the warm
instances at 1 and 2 threads (ours ``encode_ordinary_batch(num_threads=k)``,
gigatoken ``encode_batch(parallel=k > 1)`` with ``RAYON_NUM_THREADS=2``, quicktok
``encode_batch(threads=k)``, tiktoken ``encode_ordinary_batch(num_threads=k)``, HF
``encode_batch`` with ``TOKENIZERS_PARALLELISM`` off for 1 thread).  Figures are
MB/s of UTF-8 input, medians of the rounds, and ratios to gigatoken and tiktoken.
"""
import argparse
import base64
import gzip
import io
import json
import os
import pathlib
import pickle
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the repository (a built, not installed, checkout)
os.environ.setdefault("RAYON_NUM_THREADS", "2")  # gigatoken's and HF's pools, before they are imported

import numpy as np  # noqa: E402
from _record import write_record  # noqa: E402

CHECK_DOCS = 200


# --------------------------------------------------------------------------- corpora

def read_jsonl(path):
    if path.endswith(".zst"):
        import zstandard

        f = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(open(path, "rb")), encoding="utf-8")
    else:
        f = open(path, encoding="utf-8")
    with f:
        for line in f:
            yield json.loads(line)


def take(texts, mb):
    out, size = [], 0
    for text in texts:
        if not text:
            continue
        out.append(text)
        size += len(text.encode("utf-8"))
        if size >= mb * 1e6:
            break
    return out


def corpora(path, shared, mb, side_mb):
    mixed = take((r["text"] for r in read_jsonl(path)), mb)
    english = take((r["text"] for r in read_jsonl(path)
                    if r["text"] and sum(c < "\x80" for c in r["text"]) >= 0.97 * len(r["text"])), side_mb)

    def cjk():
        for row in read_jsonl(os.path.join(shared, "docs.jsonl.zst")):
            if row["lang"] in ("ja", "ko", "zh-CN", "zh-TW"):
                yield row["text"]
        block = []
        for row in read_jsonl(os.path.join(shared, "parallel.jsonl.zst")):
            if row["script"] in ("Hans", "Hant", "Jpan", "Kore"):
                block.append(row["text"])
                if len(block) == 200:
                    yield "\n".join(block)
                    block = []

    return {"mixed": mixed, "english": english, "cjk": take(cjk(), side_mb)}


def mb_of(texts):
    return sum(len(t.encode("utf-8")) for t in texts) / 1e6


# --------------------------------------------------------------------------- encoders

def rank_file(name, tmp):
    """bpe-openai's rank file, unpacked under its own name (gigatoken reads the pattern from it)."""
    import bpe_openai

    src = pathlib.Path(bpe_openai.__file__).parent / "data" / f"{name}.tiktoken.gz"
    dst = os.path.join(tmp, f"{name}.tiktoken")
    with gzip.open(src, "rb") as f, open(dst, "wb") as g:
        shutil.copyfileobj(f, g)
    from ube_stream.tokenizer.pretrained import load_tiktoken_ranks

    return dst, load_tiktoken_ranks(dst)


class Ours:
    name = "ube-stream"

    def __init__(self, tok):
        self.tok = tok

    def fresh(self):
        return Ours(pickle.loads(pickle.dumps(self.tok)))  # no compiled tables, empty caches

    def encode(self, texts, threads):
        return self.tok.encode_ordinary_batch(texts, num_threads=threads)

    def ids(self, texts):
        return [a.tolist() for a in self.encode(texts, 1)]


class Giga:
    name = "gigatoken"

    def __init__(self, make):
        self.make = make
        self.g = make()

    def fresh(self):
        return Giga(self.make)

    def encode(self, texts, threads):
        return self.g.encode_batch(texts, parallel=threads > 1)

    def ids(self, texts):
        return [list(x) for x in self.g.encode_batch_list(texts, parallel=False)]


class Quick:
    name = "quicktok-v1"

    def __init__(self, make):
        self.make = make
        self.q = make()

    def fresh(self):
        return Quick(self.make)

    def encode(self, texts, threads):
        return self.q.encode_batch(texts, threads=threads)

    def ids(self, texts):
        tokens, offsets = self.encode(texts, 1)
        tokens, offsets = np.asarray(tokens), np.asarray(offsets)
        return [tokens[a:b].tolist() for a, b in zip(offsets[:-1], offsets[1:])]


class Tik:
    name = "tiktoken"

    def __init__(self, make):
        self.make = make
        self.e = make()

    def fresh(self):
        return Tik(self.make)

    def encode(self, texts, threads):
        return self.e.encode_ordinary_batch(texts, num_threads=threads)

    def ids(self, texts):
        return [self.e.encode_ordinary(t) for t in texts]


class HF:
    name = "HF tokenizers"

    def __init__(self, path):
        import tokenizers

        self.path = path
        self.h = tokenizers.Tokenizer.from_file(path)

    def fresh(self):
        return HF(self.path)

    def encode(self, texts, threads):
        os.environ["TOKENIZERS_PARALLELISM"] = "true" if threads > 1 else "false"
        return self.h.encode_batch_fast(texts, add_special_tokens=False) if hasattr(
            self.h, "encode_batch_fast") else self.h.encode_batch(texts, add_special_tokens=False)

    def ids(self, texts):
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        return [e.ids for e in self.h.encode_batch(texts, add_special_tokens=False)]


def attempt(what, fn):
    try:
        return fn()
    except Exception as exc:  # a competitor that cannot load this vocabulary is reported, not fatal
        print(f"  ({what}: unavailable: {type(exc).__name__}: {str(exc)[:160]})", flush=True)
        return None


def vocabularies(args, tmp, train_texts):
    import gigatoken
    import tiktoken

    try:
        import quicktok
    except ImportError:   # a peer that is not installed is reported (its rows left out), not fatal
        quicktok = None
        print("  (quicktok: not installed: pip install quicktok)", flush=True)

    from ube_stream import Tokenizer, train
    from ube_stream.pretokenizer import resolve_pattern

    for name, pattern in (("cl100k_base", "cl100k"), ("o200k_base", "o200k")):
        path, ranks = rank_file(name, tmp)
        started = time.perf_counter()
        tok = Tokenizer.from_tiktoken(ranks, pattern)
        load = time.perf_counter() - started
        hf_path = os.path.join(tmp, f"{pattern}.json")
        tok.export_hf(hf_path)
        pat = resolve_pattern(pattern)[1]
        encoders = [Ours(tok), Giga(lambda p=path: gigatoken.Tokenizer.from_tiktoken(p)),
                    attempt("quicktok", lambda n=name: Quick(lambda: quicktok.get_encoding(n))) if quicktok else None,
                    Tik(lambda n=name, r=ranks, p=pat: tiktoken.Encoding(n, pat_str=p, mergeable_ranks=r,
                                                                       special_tokens={})),
                    HF(hf_path)]
        yield pattern, load, [e for e in encoders if e is not None], None

    started = time.perf_counter()
    twins = {s: train(iter(train_texts), vocab_size=args.vocab, substrate=s, workers=1, show_progress=False)
             for s in ("utf8", "ube")}
    print(f"trained utf8 and ube, vocab {args.vocab}, on {mb_of(train_texts):.1f} MB in "
          f"{time.perf_counter() - started:.0f} s", flush=True)
    tok = twins["utf8"]
    hf_path = os.path.join(tmp, "trained.json")
    tok.export_hf(hf_path)
    n = tok.vocab_size - len(tok.special_tokens)
    ranks = {bytes(tok.token_expansion(i)): i for i in range(n)}
    qdir = os.path.join(tmp, "quicktok")

    def quick():
        quicktok.import_tokenizer(hf_path, "ube_trained", data_dir=qdir)
        return Quick(lambda: quicktok.get_encoding("ube_trained", data_dir=qdir))

    tiktoken_path = os.path.join(tmp, "trained.tiktoken")  # gigatoken takes the GPT-2 scheme by name
    with open(tiktoken_path, "wb") as f:
        f.writelines(base64.b64encode(token) + b" %d\n" % rank for token, rank in ranks.items())
    encoders = [Ours(tok), Giga(lambda: gigatoken.Tokenizer.from_tiktoken(tiktoken_path, pretokenizer="gpt2")),
                attempt("quicktok", quick) if quicktok else None,
                Tik(lambda: tiktoken.Encoding("trained", pat_str=resolve_pattern("gpt2")[1], mergeable_ranks=ranks,
                                              special_tokens={})),
                HF(hf_path)]
    yield f"trained-{args.vocab // 1000}k", 0.0, [e for e in encoders if e is not None], None
    yield f"ube-{args.vocab // 1000}k", 0.0, [Ours(twins["ube"])], Ours(tok)


# --------------------------------------------------------------------------- timing

def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="?", default=os.path.join(HERE, "data", "mixed.jsonl"))
    parser.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared", "data"))
    parser.add_argument("--mb", type=float, default=20.0, help="MB of the mixed corpus (the headline)")
    parser.add_argument("--side-mb", type=float, default=5.0, help="MB of the english and cjk corpora")
    parser.add_argument("--train-mb", type=float, default=4.0)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated vocabularies to run (default all)")
    args = parser.parse_args(argv)
    if not os.path.exists(args.corpus):
        sys.exit(f"{args.corpus} not found: run `python benchmarks/make_corpus.py` first")
    texts_by_corpus = corpora(args.corpus, args.shared, args.mb, args.side_mb)
    for label, texts in texts_by_corpus.items():
        print(f"corpus {label}: {len(texts):,} documents, {mb_of(texts):.1f} MB", flush=True)
    train_texts = take(iter(texts_by_corpus["mixed"]), args.train_mb)
    only = set(filter(None, args.only.split(",")))
    table = []
    with tempfile.TemporaryDirectory() as tmp:
        for vocab, load, encoders, twin in vocabularies(args, tmp, train_texts):
            if only and vocab not in only:
                continue
            print(f"\n[{vocab}] encoders: {', '.join(e.name for e in encoders)}"
                  + (f"; from_tiktoken built in {load:.1f} s" if load else ""), flush=True)
            for label, texts in texts_by_corpus.items():
                mb = mb_of(texts)
                reference = encoders[0].ids(texts[:CHECK_DOCS])
                runs = [encoders[0]]
                for e in encoders[1:]:
                    theirs = e.ids(texts[:CHECK_DOCS])
                    differ = [i for i, (a, b) in enumerate(zip(reference, theirs)) if a != b]
                    if differ:  # not timed: a row is only worth its ids
                        i = differ[0]
                        at = next((j for j, (a, b) in enumerate(zip(reference[i], theirs[i])) if a != b),
                                  min(len(reference[i]), len(theirs[i])))
                        print(f"  {label}: {e.name} ids differ on {len(differ)} of {len(reference)} documents "
                              f"(first: document {i}, token {at}: ours {reference[i][at:at + 3]}, theirs "
                              f"{theirs[i][at:at + 3]}): left out", flush=True)
                    else:
                        runs.append(e)
                runs += [twin] if twin is not None else []
                fresh = {}
                for e in runs:
                    instance = e.fresh()
                    fresh[e] = mb / timed(lambda: instance.encode(texts, 1))
                warm = {(e, k): [] for e in runs for k in (1, 2)}
                for _ in range(args.repeat):
                    for k in (1, 2):
                        for e in runs:
                            warm[e, k].append(mb / timed(lambda: e.encode(texts, k)))
                med = {key: statistics.median(v) for key, v in warm.items()}
                giga = next((e for e in runs if e.name == "gigatoken"), None)
                tik = next((e for e in runs if e.name == "tiktoken"), None)
                for e in runs:
                    name = e.name + (" (utf8 twin)" if e is twin else "")
                    vs_giga = (f"{fresh[e] / fresh[giga]:.2f} / {med[e, 1] / med[giga, 1]:.2f}"
                               if giga else "")
                    vs_tik = f"{med[e, 1] / med[tik, 1]:.1f}" if tik else ""
                    vs_twin = f"{med[e, 1] / med[twin, 1]:.2f}" if twin is not None and e is not twin else ""
                    row = (vocab, label, name, fresh[e], med[e, 1], med[e, 2], vs_giga, vs_tik, vs_twin)
                    table.append(row)
                    print(f"  {label:<8} {name:<24} fresh {fresh[e]:7.1f}  warm 1t {med[e, 1]:7.1f}  "
                          f"2t {med[e, 2]:7.1f} MB/s  x gigatoken (fresh/warm) {vs_giga:<12} x tiktoken {vs_tik}"
                          + (f"  x utf8 twin {vs_twin}" if vs_twin else ""), flush=True)
    print("\n| vocabulary | corpus | encoder | fresh 1 thread | warm 1 thread | warm 2 threads "
          "| x gigatoken (fresh / warm) | x tiktoken (warm) |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for vocab, label, name, fr, w1, w2, vs_giga, vs_tik, vs_twin in table:
        extra = f" (x {vs_twin} of the utf8 twin)" if vs_twin else ""
        print(f"| {vocab} | {label} | {name}{extra} | {fr:.1f} | {w1:.1f} | {w2:.1f} | {vs_giga} | {vs_tik} |")
    write_record("side_by_side_encode", title="Encode throughput side by side (MB/s of UTF-8 input, one process)",
                 columns=["vocabulary", "corpus", "encoder", "fresh 1 thread", "warm 1 thread", "warm 2 threads",
                          "x gigatoken (fresh / warm)", "x tiktoken (warm)", "x utf8 twin (warm)"],
                 rows=[(v, c, n, round(fr, 1), round(w1, 1), round(w2, 1), g or None, t or None, tw or None)
                       for v, c, n, fr, w1, w2, g, t, tw in table],
                 notes=[f"--repeat {args.repeat} interleaved rounds, medians; ids checked identical to ours on "
                        f"the first {CHECK_DOCS} documents of each corpus before timing"])


if __name__ == "__main__":
    main()
