"""The measured effect of SuperBPE's span rule: rule "v1" vs Liu et al.'s rule "liu".

    python benchmarks/superbpe_rules.py [--vocab 8000] [--transition 6400]
                                        [--variants plain,v1,liu,liu-w8] [--max-bytes N] [--no-record]

Trains one ``utf8`` tokenizer per variant (token lengths are then UTF-8 bytes) on the
bundled training sample (``ube_stream/data/sample_train.jsonl.zst``, 9 languages, 0.94 MB):

  plain    plain BPE at ``--vocab`` (the baseline every SuperBPE row is compared with);
  v1       SuperBPE, transition ``--transition``, W = 4, span rule "v1" (the default: spans
           end at punctuation, digits, symbols, emoji and line breaks);
  liu      the same with span rule "liu" (Liu et al.'s stage-2 pre-tokenization: only
           numbers, line ends and ": " end a span): differences 1 and 3 of
           docs/training.md together;
  liu-w8   rule "liu" with W = 8: how much the word limit matters once punctuation and
           space chunks count as words (difference 2 is not switchable: its direction only).

and measures per variant, on the bundled sample (the training text: in-distribution) and on
held-out text (``tests/data/docs_sample``: Debian Handbook pages in 26 languages, the pages
whose text is not in the training sample; ``tests/data/parallel_sample``: short parallel
items in ~270 languages):

* tokens per UTF-8 byte (compression; lower is better) and its ratio to ``plain``;
* superword share: the share of emitted tokens that cover bytes of more than one pattern
  chunk (a token across a chunk boundary: only stage-2 merges make them);
* mean token length: UTF-8 bytes per emitted token, and the mean length of the merged
  vocabulary's tokens;
* training time (median wall seconds of ``train`` over ``--repeat`` interleaved rounds,
  one worker; depends on the load, reported with it) and distinct spans;
* where rule "liu" cuts held-out running text (a span ends at a number chunk, after a
  line feed, or between ':' and a space): how much each part of the rule decides.

Token counts do not depend on the machine's load; times do.  ``UBE_BENCH_SMOKE=1`` (or a
small ``--max-bytes``) proves the script works; records go through ``_record``.
"""
import argparse
import collections
import json
import os
import statistics
import sys
import time

import numpy as np
import zstandard

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".."), HERE]   # this checkout's package (not an installed one), _record
from _record import is_smoke, load_average, write_record  # noqa: E402

from ube_stream import train  # noqa: E402
from ube_stream.pretokenizer import chunk_bounds, superword_spans  # noqa: E402
from ube_stream.sample import sample_paths  # noqa: E402
from ube_stream.training import TrainSummary  # noqa: E402

DATA = os.path.join(HERE, "..", "tests", "data")
#: variant -> train() options on top of vocab_size / substrate
VARIANTS = {
    "plain": {},
    "v1": {"superbpe_spans": "v1", "superbpe_max_words": 4},
    "liu": {"superbpe_spans": "liu", "superbpe_max_words": 4},
    "liu-w8": {"superbpe_spans": "liu", "superbpe_max_words": 8},
}


def read_rows(path):
    with open(path, "rb") as f:
        raw = zstandard.ZstdDecompressor().stream_reader(f).read().decode("utf-8")
    return [json.loads(line) for line in raw.split("\n") if line]


def text_sets(max_bytes):
    """{name: [texts]}: the bundled training sample (cut to the bytes trained on) and the held-out sets."""
    train_rows = read_rows(sample_paths()["train"])
    blob = "\n".join(r["text"] for r in train_rows)
    bundled, size = [], 0
    for row in train_rows:
        if max_bytes is not None and size >= max_bytes:
            break
        bundled.append(row["text"])
        size += len(row["text"].encode("utf-8"))
    docs = collections.defaultdict(list)
    for row in read_rows(os.path.join(DATA, "docs_sample.jsonl.zst")):
        text = row["text"]
        if text[1000:1200] not in blob and text[:200] not in blob:     # held out from training
            docs[row["lang"]].append(text)
    held = [t for texts in docs.values() for t in texts]
    return {
        "bundled sample": bundled,
        f"held-out running text ({len(docs)} languages)": held,
        "held-out running text, en-US": docs.get("en-US", []),
        "held-out parallel items": [r["text"] for r in read_rows(os.path.join(DATA, "parallel_sample.jsonl.zst"))],
    }


def token_stats(tok, texts):
    """(tokens, UTF-8 bytes, tokens covering more than one pattern chunk) over ``texts``
    (a trained ``utf8`` tokenizer: ids are token ids, a token's length is its expansion's)."""
    lengths = np.array([len(e) for e in tok._expansions], dtype=np.int64)
    tokens = nbytes = crossing = 0
    for text, ids in zip(texts, tok.encode_ordinary_batch(texts)):
        data = text.encode("utf-8")
        ends = np.cumsum(lengths[ids.astype(np.int64)])
        starts = ends - lengths[ids.astype(np.int64)]
        chunk_ends = chunk_bounds(data, tok.pattern_name)
        # a token crosses a chunk boundary when some chunk end lies strictly inside it
        inside = np.searchsorted(chunk_ends, ends, "left") - np.searchsorted(chunk_ends, starts, "right")
        tokens += len(ids)
        nbytes += len(data)
        crossing += int((inside > 0).sum())
    return tokens, nbytes, crossing


def liu_cuts(texts):
    """{cause: count} of the boundaries between consecutive rule-liu spans of ``texts``."""
    causes = collections.Counter()
    for text in texts:
        spans = superword_spans(text, rule="liu")
        for before, after in zip(spans, spans[1:]):
            last, first = before[-1], after[0]
            causes["line feed" if last.endswith("\n") else
                   "': '" if last.endswith(":") and first.startswith(" ") else "number"] += 1
    return dict(causes)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--transition", type=int, default=6400, help="SuperBPE transition vocabulary size")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--max-bytes", type=int, default=None, help="train on about this many bytes of the sample")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved training rounds (median time)")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    if args.no_record:
        os.environ["UBE_BENCH_NO_RECORD"] = "1"
    if is_smoke() and args.max_bytes is None:
        args.max_bytes, args.vocab, args.transition = 150_000, 1200, 1000
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; choose from {list(VARIANTS)}")
    sets = text_sets(args.max_bytes)
    toks, times, spans = {}, collections.defaultdict(list), {}
    for _ in range(max(1, args.repeat)):
        for name in variants:        # interleaved: each round trains every variant once
            options = dict(VARIANTS[name])
            if options:
                options["superbpe_transition"] = args.transition
            summary = TrainSummary()
            started = time.perf_counter()
            toks[name] = train([sample_paths()["train"]], vocab_size=args.vocab, substrate="utf8", workers=1,
                               max_bytes=args.max_bytes, show_progress=False, summary=summary, **options)
            times[name].append(time.perf_counter() - started)
            spans[name] = summary.unique_spans
    seconds = {name: statistics.median(times[name]) for name in variants}
    for name in variants:
        print(f"trained {name}: median {seconds[name]:.2f} s of {len(times[name])}, vocab {toks[name].vocab_size}, "
              f"{spans[name]:,} distinct spans (load {load_average()})", file=sys.stderr)
    rows, data = [], {}
    for set_name, texts in sets.items():
        if not texts:
            continue
        base = None
        for name in variants:
            tokens, nbytes, crossing = token_stats(toks[name], texts)
            per_byte = tokens / nbytes
            base = per_byte if base is None else base
            data[f"{set_name}/{name}"] = {"tokens": tokens, "bytes": nbytes, "superword_tokens": crossing}
            rows.append([set_name, name, f"{per_byte:.4f}", f"{per_byte / base:.3f}",
                         f"{100 * crossing / tokens:.1f}", f"{nbytes / tokens:.2f}"])
    notes = []
    for name in variants:
        tok = toks[name]
        made = tok._expansions[tok.base_size:]
        k = tok.superbpe["stage1_merges"] if tok.superbpe else len(tok.merges)
        notes.append(f"{name}: vocab {tok.vocab_size}, {len(tok.merges) - k} stage-2 merges, mean merged-token "
                     f"length {np.mean([len(e) for e in made]):.2f} base symbols, {spans[name]:,} distinct "
                     f"spans, training {seconds[name]:.2f} s (median)")
    held = next(texts for set_name, texts in sets.items() if set_name.startswith("held-out running text ("))
    cuts = liu_cuts(held)
    notes.append("rule liu's span boundaries on the held-out running text: "
                 + ", ".join(f"{cause} {n:,} ({100 * n / sum(cuts.values()):.1f}%)" for cause, n in sorted(cuts.items())))
    notes.append(f"training times at load {load_average()} (load when the script started: see load_before); "
                 "token counts do not depend on the load")
    for row in rows:
        print(*row, sep="\t")
    for note in notes:
        print(note)
    write_record("superbpe_rules",
                 title=f"SuperBPE span rules v1 / liu (utf8, vocab {args.vocab}, "
                       f"transition {args.transition})",
                 columns=["text", "variant", "tokens per byte", "vs plain", "superword tokens %",
                          "bytes per token"],
                 rows=rows, notes=notes,
                 data={"train_seconds": dict(times), "unique_spans": spans, "counts": data, "liu_cuts": cuts,
                       "max_bytes": args.max_bytes})


if __name__ == "__main__":
    main()
