"""The measured effect of SuperBPE's differences from Liu et al. (span rule, word limit, stage 1 in chunks).

    python benchmarks/superbpe_rules.py [--vocab 8000] [--transition 6400]
                                        [--variants plain,v1,liu,liu-w8] [--max-bytes N] [--check N]
                                        [--no-record]

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
  line feed, or between ':' and a space): how much each part of the rule decides;
* difference 4 (stage-1 merges stay inside chunks), per SuperBPE variant and text set:
  the same trained merges and the same spans encoded three ways: ours (``encode``: stage 1
  inside each chunk, stage 2 across the span's chunks with the per-occurrence word
  limit), ours without the word limit at encoding (the same with W lifted: what the
  limit alone decides), and Liu et al.'s (every merge, stage 1 and 2, by rank over the
  whole span's base symbols: plain BPE over the span, as HF's BPE encodes a pre-token;
  ``_superword.Stage2`` holding all merges, each span one chunk).  Tokens per byte each
  way and the share of spans (and of their bytes) whose segmentation differs from ours;
  ``--check N`` compares N short spans of Liu's encoding with the readable twin
  ``_reference.encode_chunk_reference``;
* difference 2 (the word limit counts chunks, theirs ``token.split("Ġ")`` pieces): over
  each trained tokenizer's stage-2 tokens, how many have more than 4 of Liu's words (their
  rule would refuse them) and how many cover more than 4 pattern chunks when the token's
  text is pre-tokenized alone (ours at W = 4 refuses such an occurrence).  A retraining
  under their rule is not possible: the merge kernel tests chunk starts per occurrence.

Token counts do not depend on the machine's load; times do.  ``UBE_BENCH_SMOKE=1`` (or a
small ``--max-bytes``) proves the script works; records go through ``_record``.
"""
import argparse
import collections
import copy
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

from ube_stream import _superword, train  # noqa: E402
from ube_stream._reference import encode_chunk_reference  # noqa: E402
from ube_stream.errors import check_status, err_buffer  # noqa: E402
from ube_stream.pretokenizer import chunk_bounds, span_ends, superword_spans  # noqa: E402
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


def whole_span_bpe(tok):
    """Liu et al.'s encoding of a span: ``_superword.Stage2`` holding *every* merge (stage 1
    and 2) in rank order.  Given a span as one chunk of base symbols, no chunk start lies
    inside any token, so the word limit never applies and the kernel is plain BPE over the
    span (lowest rank first, all its occurrences left to right), ids in the model's numbering."""
    if tok.substrate != "utf8" or tok.base_size != 256:
        raise ValueError("whole_span_bpe reads base symbols as UTF-8 bytes: a utf8 tokenizer only")
    return _superword.Stage2(np.asarray(tok.merges, dtype=np.uint32).reshape(-1, 2),
                             np.asarray(tok.merge_results, dtype=np.uint32), 1, len(tok._expansions), tok._id_map)


def without_word_limit(tok):
    """A copy of SuperBPE tokenizer ``tok`` whose encoder applies no word limit (W lifted)."""
    twin = copy.copy(tok)          # __getstate__ drops the compiled stage-2 table: rebuilt with the new W
    twin.superbpe = dict(tok.superbpe, max_words=2 ** 31 - 1)
    return twin


def span_byte_ends(data, tok):
    """Byte offset where each span of ``data`` ends, by the tokenizer's pattern and span rule."""
    ends = chunk_bounds(data, tok.pattern_name)
    return ends[span_ends(data, ends, rule=tok.superbpe_spans) - 1] if len(ends) else ends


def token_ends(ids, lengths):
    return np.cumsum(lengths[np.asarray(ids, dtype=np.int64)])


def encoding_ways(tok, texts, check=0):
    """Difference 4 on ``texts``: {way: tokens} for "ours", "ours, no word limit" and "liu",
    with bytes, spans, and the spans (count, bytes) whose token boundaries differ from ours.
    ``check``: this many spans of at most 300 bytes also go through the readable twin."""
    lengths = np.array([len(e) for e in tok._expansions], dtype=np.int64)
    stage2_all, unlimited = whole_span_bpe(tok), without_word_limit(tok)
    merges = [(a, b, r) for (a, b), r in zip(tok.merges, tok.merge_results)]
    ours_ids = tok.encode_ordinary_batch(texts)
    free_ids = unlimited.encode_ordinary_batch(texts)
    out = {"tokens": collections.Counter(), "differ": collections.Counter(), "differ_bytes": collections.Counter(),
           "bytes": 0, "spans": 0, "checked": 0}
    for text, ours, free in zip(texts, ours_ids, free_ids):
        data = text.encode("utf-8")
        if not data:
            continue
        stops = span_byte_ends(data, tok)
        starts = np.concatenate(([0], stops[:-1]))
        err = err_buffer()
        status, liu, _ = stage2_all.encode_spans(np.frombuffer(data, dtype=np.uint8).astype(np.uint32),
                                                 np.concatenate(([0], stops)).astype(np.int64),
                                                 np.arange(1, len(stops) + 1, dtype=np.int64),
                                                 np.array([0, len(stops)], dtype=np.int64), err)
        check_status(status, err, what="whole-span BPE", data=data)
        reference = token_ends(ours, lengths)
        if not np.isin(stops, reference).all():
            raise AssertionError("a token of ours crosses a span end")
        out["bytes"] += len(data)
        out["spans"] += len(stops)
        for way, ids in (("ours", ours), ("ours, no word limit", free), ("liu", liu)):
            ends = token_ends(ids, lengths)
            if ends[-1] != len(data):
                raise AssertionError(f"{way}: the tokens cover {ends[-1]} of {len(data)} bytes")
            out["tokens"][way] += len(ids)
            # a span differs when some token end inside it is in one segmentation and not the other
            differ = np.unique(np.searchsorted(stops, np.setxor1d(ends, reference), "left"))
            out["differ"][way] += len(differ)
            out["differ_bytes"][way] += int((stops[differ] - starts[differ]).sum())
            if way == "liu":
                for s in range(len(stops)):
                    if out["checked"] >= check:
                        break
                    a, b = int(starts[s]), int(stops[s])
                    if b - a > 300:
                        continue
                    mine = np.asarray(liu)[(ends > a) & (ends <= b)].tolist()
                    twin = encode_chunk_reference(list(data[a:b]), merges)
                    if mine != [tok._model_id(i) for i in twin]:
                        raise AssertionError(f"whole-span BPE of {data[a:b]!r}: {mine} != twin {twin}")
                    out["checked"] += 1
    return out


def liu_words(token: bytes) -> int:
    """Liu et al.'s word count of a byte-level token: ``token.split("Ġ")`` without empty pieces."""
    return sum(1 for piece in token.split(b" ") if piece)


def word_limits(tok, limit=4):
    """Difference 2 over the stage-2 tokens of SuperBPE tokenizer ``tok`` (new ids of merges[k:]):
    {stage2_tokens, liu_over (more than ``limit`` of Liu's words), chunks_over (more than
    ``limit`` chunks when the token's text is pre-tokenized alone), both, partial (tokens that
    are not whole UTF-8: pre-tokenized with U+FFFD for the partial character)}."""
    k = tok.superbpe["stage1_merges"]
    made = set(tok.merge_results[k:]) - set(tok.merge_results[:k]) - set(range(tok.base_size))
    counts = collections.Counter(stage2_tokens=len(made))
    for internal in made:
        token = bytes(tok._expansions[internal])
        text = token.decode("utf-8", "replace")
        counts["partial"] += text.encode("utf-8") != token
        chunks = len(chunk_bounds(text.encode("utf-8"), tok.pattern_name))
        liu_over, chunks_over = liu_words(token) > limit, chunks > limit
        counts["liu_over"] += liu_over
        counts["chunks_over"] += chunks_over
        counts["both"] += liu_over and chunks_over
    return dict(counts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--transition", type=int, default=6400, help="SuperBPE transition vocabulary size")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--max-bytes", type=int, default=None, help="train on about this many bytes of the sample")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved training rounds (median time)")
    parser.add_argument("--check", type=int, default=30,
                        help="spans per text set whose whole-span BPE is compared with the readable twin")
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
    ways, limits = {}, {}
    for name in variants:
        tok = toks[name]
        if tok.superbpe is None:
            continue
        limits[name] = word_limits(tok)
        c = limits[name]
        n = c["stage2_tokens"]
        notes.append(f"difference 2, {name}: of {n:,} stage-2 tokens, {c.get('liu_over', 0):,} "
                     f"({100 * c.get('liu_over', 0) / max(n, 1):.1f}%) have more than 4 of Liu's words "
                     f"(split on spaces), {c.get('chunks_over', 0):,} ({100 * c.get('chunks_over', 0) / max(n, 1):.1f}%) "
                     f"more than 4 chunks pre-tokenized alone, {c.get('both', 0):,} both "
                     f"({c.get('partial', 0):,} tokens are partial UTF-8)")
        for set_name, texts in sets.items():
            if not texts:
                continue
            w = ways[f"{set_name}/{name}"] = encoding_ways(tok, texts, args.check)
            ours = w["tokens"]["ours"]
            parts = []
            for way in ("ours, no word limit", "liu"):
                parts.append(f"{way} {w['tokens'][way] / w['bytes']:.4f} ({100 * (w['tokens'][way] / ours - 1):+.2f}%), "
                             f"{100 * w['differ'][way] / w['spans']:.2f}% of spans "
                             f"({100 * w['differ_bytes'][way] / w['bytes']:.1f}% of bytes) segmented otherwise")
            notes.append(f"difference 4, {name}, {set_name}: tokens/byte ours {ours / w['bytes']:.4f}; "
                         + "; ".join(parts) + f" ({w['spans']:,} spans; {w['checked']} checked against the twin)")
    notes.append(f"training times at load {load_average()} (load when the script started: see load_before); "
                 "token counts do not depend on the load")
    for row in rows:
        print(*row, sep="\t")
    for note in notes:
        print(note)
    write_record("superbpe_rules",
                 title=f"SuperBPE span rules v1 / liu, word limit, stage 1 in chunks (utf8, vocab {args.vocab}, "
                       f"transition {args.transition})",
                 columns=["text", "variant", "tokens per byte", "vs plain", "superword tokens %",
                          "bytes per token"],
                 rows=rows, notes=notes,
                 data={"train_seconds": dict(times), "unique_spans": spans, "counts": data, "liu_cuts": cuts,
                       "encoding_ways": {key: {"tokens": dict(w["tokens"]), "differ_spans": dict(w["differ"]),
                                               "differ_bytes": dict(w["differ_bytes"]), "bytes": w["bytes"],
                                               "spans": w["spans"], "checked": w["checked"]}
                                         for key, w in ways.items()},
                       "word_limits": limits,
                       "max_bytes": args.max_bytes})


if __name__ == "__main__":
    main()
