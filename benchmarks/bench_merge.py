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
"""
from __future__ import annotations

import argparse
import collections
import io
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

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
print(json.dumps({"seconds": seconds, "rss_before_mb": before, "peak_rss_mb": status_mb("VmHWM"),
                  "merges": len(merges), "vocab": int(args["n_base"] + len(set(merges[:, 2].tolist())))}))
"""


def run_kernel(symbols, offsets, counts, options) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "words.npz")
        np.savez(path, symbols=symbols, offsets=offsets, counts=counts)
        out = subprocess.run([sys.executable, "-c", CHILD, path, str(ROOT), json.dumps(options)],
                             capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


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
    parser.add_argument("--max-vocab", type=int, default=32000)
    parser.add_argument("--min-frequency", type=int, default=2)
    parser.add_argument("--max-token-length", type=int, default=-1, help="< 0: no limit")
    parser.add_argument("--no-peers", action="store_true", help="skip the HF tokenizers peer")
    args = parser.parse_args(argv)
    if not args.corpus.exists():
        print(f"corpus {args.corpus} is missing: pass --corpus PATH (JSON Lines with 'text')")
        return 2

    start = time.perf_counter()
    texts = read_texts(args.corpus, int(args.mb * 1e6))
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    symbols, offsets, counts, n_chunks = word_arrays(texts, args.substrate)
    prep = time.perf_counter() - start
    print(f"corpus   {args.corpus} : {len(texts)} docs, {n_bytes / 1e6:.1f} MB UTF-8, "
          f"{int(counts.sum())} chunks, {n_chunks} unique; substrate {args.substrate}: "
          f"{len(counts)} unique words, {len(symbols)} symbols (prep {prep:.1f} s)")

    n_base = 512 if args.substrate == "ube" else 256
    result = run_kernel(symbols, offsets, counts, {
        "n_base": n_base, "max_vocab": args.max_vocab, "min_frequency": args.min_frequency,
        "max_token_length": args.max_token_length})
    print(f"ube_stream._merge.train_merges  max_vocab {args.max_vocab}: {result['merges']} merges "
          f"in {result['seconds']:.2f} s ({result['merges'] / result['seconds']:.0f} merges/s); "
          f"RSS {result['rss_before_mb']:.0f} MB with inputs loaded, peak {result['peak_rss_mb']:.0f} MB "
          f"(+{result['peak_rss_mb'] - result['rss_before_mb']:.0f} MB for training)")

    if not args.no_peers:
        peer = run_hf_peer(texts, args.max_vocab, args.min_frequency)
        if peer:
            print(f"peer HF tokenizers BpeTrainer (utf8 byte-level, includes its own pre-tokenization "
                  f"and counting): vocab {peer['vocab']} in {peer['seconds']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
