"""Side by side: BPE training wall time and peak memory, each trainer in its own process.

    python benchmarks/make_corpus.py --mb 60                 # once
    python benchmarks/side_by_side_train.py [CORPUS.jsonl] [--mb 50] [--vocab-size 32000] [--threads 1]

Trainers, on the same documents (the first ``--mb`` MB of the corpus), same
vocabulary size and the GPT-2 pattern:
- ube-stream, ``utf8`` substrate (BBPE) and ``ube`` substrate: ``ube_stream.train`` on the JSONL file;
- HF ``tokenizers`` ``BpeTrainer`` via ``train_from_iterator`` (ByteLevel, no prefix space);
- ``rustbpe`` ``train_from_iterator`` with the GPT-2 pattern.
Each runs in a fresh subprocess with ``--threads`` threads (RAYON_NUM_THREADS /
RAYON_RS_NUM_THREADS for the Rust trainers, ``workers`` for ours). Reported:
wall time of the training call (reading included for everyone: the peers read
the JSONL through a Python generator, we read it ourselves), peak RSS of the
process (VmHWM) and peak minus the RSS before training; medians of
``--repeat`` runs, and ratios to rustbpe.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def vm_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def slice_corpus(path, mb, out):
    size = 0
    with open(path, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as g:
        for line in f:
            g.write(line)
            size += len(json.loads(line)["text"].encode("utf-8"))
            if size >= mb * 1e6:
                break
    return size


def texts(path):
    with open(path, encoding="utf-8") as f:
        for line in f:
            yield json.loads(line)["text"]


def child(name, corpus, vocab_size, threads):
    before = vm_kib("VmRSS")
    start = time.perf_counter()
    if name.startswith("ube-stream"):
        import ube_stream

        substrate = name.split(":")[1]
        ube_stream.train([corpus], vocab_size=vocab_size, substrate=substrate, workers=threads,
                         show_progress=False)
    elif name == "hf-tokenizers":
        from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

        from ube_stream.pretokenizer import GPT2_PATTERN

        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(GPT2_PATTERN), "isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok.train_from_iterator(texts(corpus), trainers.BpeTrainer(
            vocab_size=vocab_size, min_frequency=2, show_progress=False, special_tokens=["<|endoftext|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    elif name == "rustbpe":
        import rustbpe

        from ube_stream.pretokenizer import GPT2_PATTERN

        tok = rustbpe.Tokenizer()
        tok.train_from_iterator(texts(corpus), vocab_size, pattern=GPT2_PATTERN)
    else:
        raise SystemExit(f"unknown trainer {name}")
    wall = time.perf_counter() - start
    print(json.dumps({"wall": wall, "peak_kib": vm_kib("VmHWM"), "before_kib": before}))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="?", default=os.path.join(HERE, "data", "mixed.jsonl"))
    parser.add_argument("--mb", type=float, default=50.0)
    parser.add_argument("--vocab-size", type=int, default=32000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--trainers", default="ube-stream:utf8,ube-stream:ube,rustbpe,hf-tokenizers")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child, args.corpus, args.vocab_size, args.threads)
    if not os.path.exists(args.corpus):
        sys.exit(f"{args.corpus} not found: run `python benchmarks/make_corpus.py` first")
    sliced = os.path.join(HERE, "data", f"train-{args.mb:g}mb.jsonl")
    size = slice_corpus(args.corpus, args.mb, sliced)
    print(f"corpus: {sliced}: {size / 1e6:.1f} MB of text; vocab {args.vocab_size}; {args.threads} thread(s)")
    env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads), RAYON_RS_NUM_THREADS=str(args.threads),
               TOKENIZERS_PARALLELISM="true" if args.threads > 1 else "false")
    results = {}
    for name in args.trainers.split(","):
        runs = []
        for _ in range(args.repeat):
            out = subprocess.run([sys.executable, __file__, sliced, "--child", name, "--vocab-size",
                                  str(args.vocab_size), "--threads", str(args.threads)],
                                 capture_output=True, text=True, env=env)
            if out.returncode != 0:
                print(f"{name}: failed:\n{out.stderr[-2000:]}")
                break
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        if runs:
            results[name] = {
                "wall": statistics.median(r["wall"] for r in runs),
                "peak_mib": statistics.median(r["peak_kib"] for r in runs) / 1024,
                "delta_mib": statistics.median(r["peak_kib"] - r["before_kib"] for r in runs) / 1024,
            }
            r = results[name]
            print(f"  {name}: {r['wall']:.1f} s, peak {r['peak_mib']:.0f} MiB", flush=True)
    base = results.get("rustbpe")
    print(f"\n{'trainer':<20}{'wall s':>9}{'MB/s':>8}{'peak MiB':>10}{'+MiB':>8}{'time/rustbpe':>14}{'mem/rustbpe':>13}")
    for name, r in results.items():
        rt = f"{r['wall'] / base['wall']:.2f}x" if base else "-"
        rm = f"{r['peak_mib'] / base['peak_mib']:.2f}x" if base else "-"
        print(f"{name:<20}{r['wall']:>9.1f}{size / 1e6 / r['wall']:>8.1f}{r['peak_mib']:>10.0f}{r['delta_mib']:>8.0f}"
              f"{rt:>14}{rm:>13}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
