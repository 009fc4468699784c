"""Cut the bundled sample (ube_stream/data/) from ../shared/data (see its README).

Run from the repository root:  python examples/make_sample.py [SHARED_DATA_DIR]

Writes two small zstd-compressed JSON Lines files, deterministically (choices
depend only on the input files, ties broken by key or language tag):

``sample_train.jsonl.zst``
    Running text (Debian Administrator's Handbook pages, ``lang``, ``source``,
    ``text``) in a few languages, English the largest share, as a corpus
    dominated by a handful of languages usually is.
``sample_parallel.jsonl.zst``
    Parallel items (``lang``, ``script``, ``key``, ``text``, ``source``): for
    each source the keys that English has and most languages share, in every
    language that has enough of them.  Emoji-bearing items are derived from
    CLDR annotations: the emoji of the annotation's key followed by a space and
    the annotation (the same emoji in every language, so items stay parallel).
"""
import collections
import os
import sys

from zst_rows import read_rows, write_rows  # examples/, beside this script


def _default_source():
    for candidate in (os.path.join("..", "shared", "data"), os.path.join("..", "..", "shared", "data")):
        if os.path.isdir(candidate):
            return candidate
    sys.exit("no ../shared/data here: pass the data directory as the first argument")


SRC = sys.argv[1] if len(sys.argv) > 1 else _default_source()
DST = os.path.join("ube_stream", "data")

# characters of running text per language (English largest, CJK smaller: 3 bytes each)
TRAIN_CHARS = {"en-US": 400_000, "de-DE": 70_000, "fr-FR": 70_000, "es-ES": 70_000, "ru-RU": 70_000,
               "ar-MA": 60_000, "zh-CN": 35_000, "ja-JP": 35_000, "ko-KR": 35_000}
# keys per source: the ones English has and the most languages share
KEYS_PER_SOURCE = {"cldr": 150, "cldr-annot": 60, "iso": 60, "debian-gettext": 60,
                   "django": 40, "libreoffice": 30, "cldr-fmt": 7}
EMOJI_ITEMS = 40       # derived "emoji + annotation" items (from cldr-annot tts keys)
MIN_ITEMS = 40         # a language needs this many selected keys to be kept
FIELDS = ("lang", "script", "key", "text", "source")


def train_sample():
    taken = collections.Counter()
    rows = []
    for row in read_rows(os.path.join(SRC, "docs.jsonl.zst")):
        budget = TRAIN_CHARS.get(row["lang"], 0) - taken[row["lang"]]
        if budget > 0:
            text = row["text"][:budget]
            taken[row["lang"]] += len(text)
            rows.append({"lang": row["lang"], "source": row["source"], "text": text})
    return rows


def _is_emoji_key(key):
    symbol = key.split(":", 2)[-1]
    return any(ord(c) >= 0x1F000 for c in symbol)


def parallel_sample():
    by_key = collections.defaultdict(dict)
    for row in read_rows(os.path.join(SRC, "parallel.jsonl.zst")):
        lang = row["lang"]
        if lang != "en" and lang.split("-")[0] == "en":
            continue  # en-GB, en-Shaw, ...: variants of the reference, not other languages
        by_key[row["key"]][lang] = {f: row[f] for f in FIELDS}
    english = {k: v["en"] for k, v in by_key.items() if "en" in v}
    keys = []
    for source, n in KEYS_PER_SOURCE.items():
        candidates = [k for k, r in english.items() if r["source"] == source
                      and (source != "cldr-annot" or k.startswith("cldr-annot:tts:"))]
        candidates.sort(key=lambda k: (-len(by_key[k]), k))
        keys.extend(candidates[:n])
    emoji_keys = sorted((k for k in english if k.startswith("cldr-annot:tts:") and _is_emoji_key(k)),
                        key=lambda k: (-len(by_key[k]), k))[:EMOJI_ITEMS]
    items = collections.defaultdict(dict)  # key -> lang -> row
    for k in keys:
        items[k] = by_key[k]
    for k in emoji_keys:
        emoji = k.split(":", 2)[-1]
        derived = "cldr-annot:emoji+tts:" + emoji
        items[derived] = {lang: dict(r, key=derived, text=f"{emoji} {r['text']}")
                          for lang, r in by_key[k].items()}
    per_lang = collections.Counter(lang for v in items.values() for lang in v)
    langs = sorted(lang for lang, n in per_lang.items() if n >= MIN_ITEMS)
    rows = [items[k][lang] for lang in langs for k in sorted(items) if lang in items[k]]
    return rows


if __name__ == "__main__":
    os.makedirs(DST, exist_ok=True)
    write_rows(os.path.join(DST, "sample_train.jsonl.zst"), train_sample())
    rows = parallel_sample()
    write_rows(os.path.join(DST, "sample_parallel.jsonl.zst"), rows)
    scripts = collections.Counter(r["script"] for r in rows)
    print(f"{len({r['lang'] for r in rows})} languages, scripts: {dict(sorted(scripts.items()))}")
