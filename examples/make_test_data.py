"""Cut the small test fixtures in tests/data/ from ../shared/data (see its README).

Run from the repository root:  python examples/make_test_data.py [SHARED_DATA_DIR]
The output is deterministic (first rows in file order), so rerunning it gives
the same files.
"""
import collections
import os
import sys

from zst_rows import read_rows, write_rows  # examples/, beside this script

SRC = sys.argv[1] if len(sys.argv) > 1 else os.path.join("..", "shared", "data")
DST = os.path.join("tests", "data")


def docs_sample(chars_per_lang=80_000):
    taken = collections.Counter()
    rows = []
    for row in read_rows(os.path.join(SRC, "docs.jsonl.zst")):
        if taken[row["lang"]] < chars_per_lang:
            text = row["text"][: chars_per_lang - taken[row["lang"]] + 2000]
            taken[row["lang"]] += len(text)
            rows.append({"lang": row["lang"], "source": row["source"], "text": text})
    return rows


def parallel_sample(n_keys=60):
    by_key = collections.defaultdict(list)
    for row in read_rows(os.path.join(SRC, "parallel.jsonl.zst")):
        by_key[(row["source"], row["key"])].append(row)
    # keys with English and the most languages first; ties by key for determinism
    keys = sorted((k for k, v in by_key.items() if any(r["lang"] == "en" for r in v)),
                  key=lambda k: (-len(by_key[k]), k))[:n_keys]
    rows = [r for k in sorted(keys) for r in by_key[k]]
    return [{f: r[f] for f in ("lang", "script", "key", "text", "source")} for r in rows]


def unicode_sample(bidi_rows=2000):
    rows, bidi = [], 0
    for row in read_rows(os.path.join(SRC, "unicode_audit.jsonl.zst")):
        if row["source"] == "unicode:BidiCharacterTest":
            bidi += 1
            if bidi > bidi_rows:
                continue
        rows.append(row)
    return rows


if __name__ == "__main__":
    os.makedirs(DST, exist_ok=True)
    write_rows(os.path.join(DST, "docs_sample.jsonl.zst"), docs_sample())
    write_rows(os.path.join(DST, "parallel_sample.jsonl.zst"), parallel_sample())
    write_rows(os.path.join(DST, "unicode_sample.jsonl.zst"), unicode_sample())
