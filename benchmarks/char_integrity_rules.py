"""The effect of the character-integrity rule on tokens per language and Gini.

Trains three tokenizers per substrate on the bundled training sample
(``ube_stream/data/sample_train.jsonl.zst``, 9 languages) at ``--vocab``
(default 8,000): ``char_integrity`` off (``none``), ``"pieces"`` (any two
pieces of one character may merge; ``True``) and ``"prefix"`` (SCRIPT's rule:
inside a character only its prefix and the next piece merge), then measures:

* on the bundled parallel sample (``sample_parallel``, the in-distribution
  evaluation) and on held-out parallel text (``tests/data/parallel_sample``,
  up to ~270 languages): the Gini coefficient of the token premiums, the mean
  premium and the total tokens (``ube_stream.evaluation.evaluate``);
* on held-out running text (``tests/data/docs_sample``, 26 languages of the
  Debian Handbook): tokens per language for each rule;
* per vocabulary: merged tokens that lie strictly inside one character, and of
  those the ones that do not start it (the "pieces" rule's continuation-only
  tokens; "prefix" makes none).

Writes ``benchmarks/records/char_integrity_rules.json`` (``_record``).

    python benchmarks/char_integrity_rules.py [--vocab 8000] [--substrates ube,utf8,utf16]
"""
import argparse
import collections
import json
import os
import sys

import zstandard

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".."), HERE]   # this checkout's package (not an installed one), _record
from _record import write_record  # noqa: E402

from ube_stream import train  # noqa: E402
from ube_stream.evaluation import evaluate  # noqa: E402
from ube_stream.sample import sample_paths  # noqa: E402

DATA = os.path.join(HERE, "..", "tests", "data")
RULES = {"none": False, "pieces": "pieces", "prefix": "prefix"}


def read_rows(path):
    with open(path, "rb") as f:
        raw = zstandard.ZstdDecompressor().stream_reader(f).read().decode()
    return [json.loads(line) for line in raw.split("\n") if line]


def inside_tokens(tok) -> tuple:
    """(merged tokens strictly inside one character, of those not starting it)."""
    inside = not_prefix = 0
    for expansion in tok._expansions[tok.base_size:]:
        if len(expansion) < 2:
            continue
        sub = tok.substrate
        if sub == "ube":               # ids >= 256 are UTF-16LE bytes, lower ones UTF-8 bytes
            if not (all(s >= 256 for s in expansion) or all(s < 256 for s in expansion)):
                continue               # mixes the two alphabets: whole characters
            sub = "utf16" if expansion[0] >= 256 else "utf8"
        data = bytes(s & 0xFF for s in expansion)
        flags = _flags_alone(data, sub)
        if flags is None:
            continue
        if not any(flags[1:]) and not _whole(data, sub):
            inside += 1
            not_prefix += not flags[0]
    return inside, not_prefix


def _whole(data: bytes, sub: str) -> bool:
    try:
        data.decode("utf-8" if sub == "utf8" else "utf-16-le")
        return True
    except UnicodeDecodeError:
        return False


def _flags_alone(data: bytes, sub: str):
    """Character-start flags of a token read on its own: 1 at a lead/ASCII byte (utf8)
    or at a code unit that is not a low surrogate's (utf16, even offsets only)."""
    if sub == "utf8":
        return [0 if 0x80 <= b <= 0xBF else 1 for b in data]
    return None if len(data) % 2 else [
        1 if k % 2 == 0 and not (0xDC <= data[k + 1] <= 0xDF) else 0 for k in range(len(data))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--substrates", default="ube,utf8,utf16")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    if args.no_record:
        os.environ["UBE_BENCH_NO_RECORD"] = "1"
    sets = {"sample_parallel": sample_paths()["parallel"],
            "held-out parallel": os.path.join(DATA, "parallel_sample.jsonl.zst")}
    docs = collections.defaultdict(str)
    for row in read_rows(os.path.join(DATA, "docs_sample.jsonl.zst")):
        docs[row["lang"]] += row["text"] + "\n"
    rows, notes = [], []
    for substrate in args.substrates.split(","):
        toks = {name: train([sample_paths()["train"]], vocab_size=args.vocab, substrate=substrate, workers=1,
                            show_progress=False, char_integrity=value) for name, value in RULES.items()}
        for name, tok in toks.items():
            inside, not_prefix = inside_tokens(tok)
            notes.append(f"{substrate} {name}: vocab {tok.vocab_size}, {inside} merged tokens inside one "
                         f"character, {not_prefix} of them not starting it")
        for set_name, path in sets.items():
            table = evaluate(list(toks.values()), path, names=list(toks))
            cells = []
            for name in toks:
                summary = table["summary"][name]
                total = sum(r["tokenizers"][name]["tokens"] for r in table["languages"])
                cells.append(f"{summary['gini']:.4f} / {summary['mean_premium']:.4f} / {total:,}")
            rows.append([substrate, f"{set_name} ({summary['languages']} languages): Gini / mean premium / tokens",
                         *cells])
        for lang, text in sorted(docs.items()):
            rows.append([substrate, f"docs_sample {lang}: tokens",
                         *(f"{len(tok.encode_ordinary(text)):,}" for tok in toks.values())])
    for row in rows:
        print(*row, sep="\t")
    write_record("char_integrity_rules",
                 title=f"Character-integrity rules: none / pieces / prefix at vocab {args.vocab}",
                 columns=["substrate", "text", *RULES],
                 rows=rows, notes=notes)


if __name__ == "__main__":
    main()
