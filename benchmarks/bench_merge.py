"""Benchmark BPE merge training (``ube_stream._merge.train_merges``).

Reads ~``--mb`` MB (UTF-8) of real text from a JSON Lines corpus
(``{"text": ...}`` per line, optionally .zst), pre-tokenizes it with the GPT-2
pattern (``regex``), counts the unique chunks, routes them to base symbols
and times ``train_merges`` on them.  The training runs in a fresh child
process so its peak RSS is not mixed with the text and chunk counting; the
report gives the child's RSS before training (inputs loaded) and its peak.

Peer (same invocation, unless ``--no-peers``): Hugging Face ``tokenizers``'
BPE trainer on the same texts with a byte-level pre-tokenizer (a UTF-8
baseline, its own pre-tokenization and counting included in its time).

    python benchmarks/bench_merge.py                      # ../shared/data/docs.jsonl.zst
    python benchmarks/bench_merge.py --corpus my.jsonl.zst --mb 20 --max-vocab 32000

``--one-chunk`` measures what chunk length costs: the letters of the CJK pages
(zh-CN, zh-TW, ja, ko) of the corpus, ``--mb`` MB of them, trained once as a
single chunk (one word) and once cut where the original text had non-letters
(the chunks the GPT-2 pattern gives), interleaved ``--repeat`` times; the
report gives the medians and their ratio:

    python benchmarks/bench_merge.py --one-chunk --mb 10 --max-vocab 8000 --repeat 3
"""
from __future__ import annotations

import argparse
import collections
import io
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _record import peer_versions, write_record  # noqa: E402

from ube_stream import _reference as ref  # noqa: E402

# ../shared/data beside the checkout (or beside the folder of worktrees)
_CANDIDATES = [base / "shared" / "data" / "docs.jsonl.zst" for base in (ROOT.parent, ROOT.parent.parent)]
DEFAULT_CORPUS = next((path for path in _CANDIDATES if path.exists()), _CANDIDATES[0])


def read_texts(path: pathlib.Path, limit_bytes: int) -> list:
    """Texts from the start of a JSON Lines file until ``limit_bytes`` of UTF-8."""
    texts, total = [], 0
    raw = open(path, "rb")
    if path.suffix == ".zst":
        import zstandard
        raw = zstandard.ZstdDecompressor().stream_reader(raw)
    with io.TextIOWrapper(raw, encoding="utf-8") as lines:
        for line in lines:
            text = json.loads(line).get("text")
            if not text:
                continue
            texts.append(text)
            total += len(text.encode("utf-8"))
            if total >= limit_bytes:
                break
    return texts


def word_arrays(texts: list, substrate: str):
    chunks = collections.Counter()
    for text in texts:
        chunks.update(ref.pretokenize(text))
    words = collections.Counter()
    for chunk, count in chunks.items():
        words[tuple(ref.route_symbols(chunk, substrate))] += count
    items = list(words.items())
    symbols = np.fromiter((s for word, _ in items for s in word), dtype=np.uint16)
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(word) for word, _ in items])
    counts = np.fromiter((count for _, count in items), dtype=np.int64, count=len(items))
    return symbols, offsets, counts, len(chunks)


CHILD = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[2])
from ube_stream._merge import train_merges
args = json.loads(sys.argv[3])
def status_mb(field):  # VmRSS now, VmHWM = peak (ru_maxrss would include the pre-exec fork)
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
data = np.load(sys.argv[1])
symbols, offsets, counts = data["symbols"], data["offsets"], data["counts"]
before = status_mb("VmRSS")
start = time.perf_counter()
_, merges = train_merges(symbols, offsets, counts, args["n_base"],
                         args["max_vocab"], args["min_frequency"], args["max_token_length"])
seconds = time.perf_counter() - start
if len(sys.argv) > 4:
    np.save(sys.argv[4], merges)
print(json.dumps({"seconds": seconds, "rss_before_mb": before, "peak_rss_mb": status_mb("VmHWM"),
                  "merges": len(merges), "vocab": int(args["n_base"] + len(set(merges[:, 2].tolist())))}))
"""


def run_kernel(symbols, offsets, counts, options) -> dict:
    """Train in a fresh child process; the result holds the merges too."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "words.npz")
        merges_path = os.path.join(tmp, "merges.npy")
        np.savez(path, symbols=symbols, offsets=offsets, counts=counts)
        out = subprocess.run([sys.executable, "-c", CHILD, path, str(ROOT), json.dumps(options), merges_path],
                             capture_output=True, text=True, check=True)
        result = json.loads(out.stdout)
        result["merge_rows"] = np.load(merges_path)
    return result


CJK_LANGS = ("zh-CN", "zh-TW", "ja", "ko")


def cjk_letter_runs(path: pathlib.Path, limit_bytes: int) -> list:
    """Runs of letters (``\\p{L}+``) of the corpus's CJK pages, in order, until
    ``limit_bytes`` of UTF-8 (cycling over the pages when they hold fewer)."""
    import regex
    runs, total, letters = [], 0, regex.compile(r"\p{L}+")
    raw = open(path, "rb")
    if path.suffix == ".zst":
        import zstandard
        raw = zstandard.ZstdDecompressor().stream_reader(raw)
    with io.TextIOWrapper(raw, encoding="utf-8") as lines:
        pages = [row["text"] for row in map(json.loads, lines) if row.get("lang") in CJK_LANGS]
    if not pages:
        raise SystemExit(f"{path} holds no {'/'.join(CJK_LANGS)} pages; pass --corpus docs.jsonl.zst")
    while total < limit_bytes:
        for page in pages:
            for run in letters.findall(page):
                runs.append(run)
                total += len(run.encode("utf-8"))
                if total >= limit_bytes:
                    return runs
    return runs


def routed_words(chunks: list, substrate: str):
    """Unique words (base ids) with counts, as ``train_merges`` takes them."""
    words = collections.Counter(tuple(ref.route_symbols(chunk, substrate)) for chunk in chunks)
    items = list(words.items())
    symbols = np.fromiter((s for word, _ in items for s in word), dtype=np.uint16)
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(word) for word, _ in items])
    counts = np.fromiter((count for _, count in items), dtype=np.int64, count=len(items))
    return symbols, offsets, counts


def one_chunk(args) -> int:
    runs = cjk_letter_runs(args.corpus, int(args.mb * 1e6))
    text = "".join(runs)
    n_base = 512 if args.substrate == "ube" else (256 if args.substrate == "utf8" else 65536)
    cases = {"one chunk": routed_words([text], args.substrate), "cut into lines": routed_words(runs, args.substrate)}
    print(f"one-chunk: {len(text.encode('utf-8')) / 1e6:.1f} MB of CJK letters from {args.corpus}, "
          f"{len(runs)} runs; substrate {args.substrate}, max_vocab {args.max_vocab[0]}, "
          f"min_frequency {args.min_frequency}")
    options = {"n_base": n_base, "max_vocab": args.max_vocab[0], "min_frequency": args.min_frequency,
               "max_token_length": args.max_token_length}
    seconds: dict = {name: [] for name in cases}
    peaks: dict = {name: [] for name in cases}
    merges: dict = {}
    for _ in range(args.repeat):
        for name, (symbols, offsets, counts) in cases.items():
            result = run_kernel(symbols, offsets, counts, options)
            seconds[name].append(result["seconds"])
            peaks[name].append(result["peak_rss_mb"] - result["rss_before_mb"])
            merges[name] = result["merge_rows"]
    for name, (symbols, _offsets, counts) in cases.items():
        print(f"  {name:<15} {len(counts):>8} words {len(symbols):>10} symbols: "
              f"{len(merges[name])} merges, median {statistics.median(seconds[name]):.2f} s "
              f"(runs {', '.join(f'{s:.2f}' for s in seconds[name])}), "
              f"+{statistics.median(peaks[name]):.0f} MB for training")
    print(f"  one chunk / cut into lines: "
          f"{statistics.median(seconds['one chunk']) / statistics.median(seconds['cut into lines']):.2f}x")
    write_record("bench_merge", title="BPE merge training: CJK letters as one chunk vs cut into lines",
                 columns=["case", "words", "symbols", "merges", "seconds (median)", "MB for training (median)"],
                 rows=[[name, len(counts), len(symbols), len(merges[name]), statistics.median(seconds[name]),
                        statistics.median(peaks[name])] for name, (symbols, _offsets, counts) in cases.items()],
                 notes=[f"{len(text.encode('utf-8')) / 1e6:.1f} MB of CJK letters from {args.corpus}, {len(runs)} "
                        f"runs; substrate {args.substrate}, max_vocab {args.max_vocab[0]}; {args.repeat} runs"])
    return 0


def run_hf_peer(texts: list, max_vocab: int, min_frequency: int) -> dict | None:
    try:
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    except ImportError:
        print("peer skipped: `tokenizers` is not installed")
        return None
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=max_vocab, min_frequency=min_frequency,
                                  show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    start = time.perf_counter()
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return {"seconds": time.perf_counter() - start, "vocab": tokenizer.get_vocab_size()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=pathlib.Path, default=DEFAULT_CORPUS,
                        help="JSON Lines (.jsonl or .jsonl.zst) with a 'text' field")
    parser.add_argument("--mb", type=float, default=20.0, help="UTF-8 megabytes of text to read")
    parser.add_argument("--substrate", choices=ref.SUBSTRATES, default="ube")
    parser.add_argument("--max-vocab", type=int, nargs="+", default=[32000],
                        help="several: one training each, and time per merge against the first")
    parser.add_argument("--min-frequency", type=int, default=2)
    parser.add_argument("--max-token-length", type=int, default=-1, help="< 0: no limit")
    parser.add_argument("--no-peers", action="store_true", help="skip the HF tokenizers peer")
    parser.add_argument("--one-chunk", action="store_true",
                        help="time CJK letters as one chunk against the same letters cut into runs")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs per case (--one-chunk)")
    args = parser.parse_args(argv)
    if not args.corpus.exists():
        print(f"corpus {args.corpus} is missing: pass --corpus PATH (JSON Lines with 'text')")
        return 2
    if args.one_chunk:
        return one_chunk(args)

    start = time.perf_counter()
    texts = read_texts(args.corpus, int(args.mb * 1e6))
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    symbols, offsets, counts, n_chunks = word_arrays(texts, args.substrate)
    prep = time.perf_counter() - start
    print(f"corpus   {args.corpus} : {len(texts)} docs, {n_bytes / 1e6:.1f} MB UTF-8, "
          f"{int(counts.sum())} chunks, {n_chunks} unique; substrate {args.substrate}: "
          f"{len(counts)} unique words, {len(symbols)} symbols (prep {prep:.1f} s)")

    n_base = 512 if args.substrate == "ube" else 256
    first = None
    rows = []
    for max_vocab in args.max_vocab:
        result = run_kernel(symbols, offsets, counts, {
            "n_base": n_base, "max_vocab": max_vocab, "min_frequency": args.min_frequency,
            "max_token_length": args.max_token_length})
        per_merge = result["seconds"] / max(result["merges"], 1)
        first = first or per_merge
        print(f"ube_stream._merge.train_merges  max_vocab {max_vocab}: {result['merges']} merges "
              f"in {result['seconds']:.2f} s ({1e6 * per_merge:.1f} us per merge, "
              f"{per_merge / first:.2f}x the first); "
              f"RSS {result['rss_before_mb']:.0f} MB with inputs loaded, peak {result['peak_rss_mb']:.0f} MB "
              f"(+{result['peak_rss_mb'] - result['rss_before_mb']:.0f} MB for training)")
        rows.append(["ube_stream._merge.train_merges", max_vocab, result["merges"], result["seconds"],
                     1e6 * per_merge, result["rss_before_mb"], result["peak_rss_mb"]])
    args.max_vocab = args.max_vocab[-1]

    peers = {}
    if not args.no_peers:
        peer = run_hf_peer(texts, args.max_vocab, args.min_frequency)
        if peer:
            print(f"peer HF tokenizers BpeTrainer (utf8 byte-level, includes its own pre-tokenization "
                  f"and counting): vocab {peer['vocab']} in {peer['seconds']:.2f} s")
            rows.append(["HF tokenizers BpeTrainer (with its own pre-tokenization and counting)", peer["vocab"],
                         None, peer["seconds"], None, None, None])
            peers = peer_versions("tokenizers")
    write_record("bench_merge", title="BPE merge training (train_merges) on real text",
                 columns=["what", "max vocab", "merges", "seconds", "us per merge", "RSS with inputs (MB)",
                          "peak RSS (MB)"], rows=rows, peers=peers,
                 notes=[f"{args.corpus}: {len(texts)} docs, {n_bytes / 1e6:.1f} MB UTF-8, {int(counts.sum())} "
                        f"chunks; substrate {args.substrate}; min_frequency {args.min_frequency}"], argv=argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
