"""Build the default mixed benchmark corpus.

    python benchmarks/make_corpus.py [--mb 60] [--shared ../shared/data] [-o benchmarks/data/mixed.jsonl]

Mixes, document by document (round-robin, so every prefix is mixed):
- running text of the Debian Administrator's Handbook in 26 languages
  (``docs.jsonl.zst``: English, CJK, Arabic, Persian, Russian, Greek, ...),
- parallel interface items in 400 languages, grouped 200 items per document
  (``parallel.jsonl.zst``: Devanagari, Bengali, Thai, Tibetan, Ethiopic, ...),
- emoji test strings (``unicode_audit.jsonl.zst``),
- this Python's standard-library ``.py`` files (code).
A missing source is reported and skipped.  Output: JSONL with a ``text`` field,
deterministic for the same inputs.
"""
import argparse
import glob
import io
import itertools
import json
import os
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))


def read_zst_jsonl(path):
    import zstandard

    with open(path, "rb") as f:
        reader = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(f), encoding="utf-8")
        for line in reader:
            yield json.loads(line)


def docs(shared):
    path = os.path.join(shared, "docs.jsonl.zst")
    if not os.path.exists(path):
        print(f"make_corpus: {path} missing: no running text", file=sys.stderr)
        return
    by_lang = {}
    for row in read_zst_jsonl(path):
        by_lang.setdefault(row["lang"], []).append(row["text"])
    # round-robin over the 26 languages, so every prefix holds all of them
    for group in itertools.zip_longest(*(by_lang[lang] for lang in sorted(by_lang))):
        yield from (text for text in group if text is not None)


def parallel(shared, per_doc=200):
    path = os.path.join(shared, "parallel.jsonl.zst")
    if not os.path.exists(path):
        print(f"make_corpus: {path} missing: no parallel items", file=sys.stderr)
        return
    rows = (r["text"] for r in read_zst_jsonl(path))
    while True:
        block = list(itertools.islice(rows, per_doc))
        if not block:
            return
        yield "\n".join(block)


def emoji(shared, per_doc=100):
    path = os.path.join(shared, "unicode_audit.jsonl.zst")
    if not os.path.exists(path):
        print(f"make_corpus: {path} missing: no emoji strings", file=sys.stderr)
        return
    rows = (r["text"] for r in read_zst_jsonl(path) if "emoji" in r["source"])
    while True:
        block = list(itertools.islice(rows, per_doc))
        if not block:
            return
        yield " ".join(block)


def code():
    stdlib = sysconfig.get_paths()["stdlib"]
    files = sorted(glob.glob(os.path.join(stdlib, "**", "*.py"), recursive=True))
    if not files:
        print(f"make_corpus: no .py files under {stdlib}: no code", file=sys.stderr)
    for path in files:
        if "site-packages" in path:
            continue
        try:
            with open(path, encoding="utf-8") as f:
                yield f.read()
        except (UnicodeDecodeError, OSError):
            continue


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=60.0, help="target size in MB of UTF-8 text (default 60)")
    parser.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared", "data"))
    parser.add_argument("-o", "--output", default=os.path.join(HERE, "data", "mixed.jsonl"))
    args = parser.parse_args(argv)
    target = int(args.mb * 1e6)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)) or ".", exist_ok=True)
    names = ["running text", "parallel items", "stdlib code", "emoji strings"]
    streams = [docs(args.shared), parallel(args.shared), code(), emoji(args.shared)]
    written = 0
    counts = [0] * len(streams)
    sizes = [0] * len(streams)
    tmp = args.output + ".part"
    with open(tmp, "w", encoding="utf-8") as out:
        live = list(range(len(streams)))
        while live and written < target:
            for i in list(live):
                text = next(streams[i], None)
                if text is None:        # a source runs out: nothing repeats
                    live.remove(i)
                    continue
                out.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
                size = len(text.encode("utf-8"))
                written += size
                counts[i] += 1
                sizes[i] += size
                if written >= target:
                    break
    os.replace(tmp, args.output)
    print(f"{args.output}: {written / 1e6:.1f} MB of text (no document repeated): " + ", ".join(
        f"{name} {n:,} documents {size / 1e6:.1f} MB" for name, n, size in zip(names, counts, sizes)))
    if written < target:
        print(f"make_corpus: the sources hold only {written / 1e6:.1f} MB of text, below --mb {args.mb:g}",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
