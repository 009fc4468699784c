"""Side by side: BPE training wall time and peak memory, each trainer in its own process.

    python benchmarks/make_corpus.py --mb 60                 # once
    python benchmarks/side_by_side_train.py [CORPUS.jsonl] [--mb 50] [--vocab-size 32000 128000] [--threads 1]

Trainers, on the same documents (the first ``--mb`` MB of the corpus), same
vocabulary size and the GPT-2 pattern where the trainer lets us choose:
- ube-stream, ``utf8`` substrate (BBPE) and ``ube`` substrate: ``ube_stream.train`` on the JSONL file;
- gigatoken ``train_bpe`` on a ``JsonlFileSource`` (it reads the file itself;
  its pre-tokenizer is built in, not selectable);
- HF ``tokenizers`` ``BpeTrainer`` via ``train_from_iterator`` (ByteLevel, no prefix space);
- ``rustbpe`` ``train_from_iterator`` with the GPT-2 pattern.
Each runs in a fresh subprocess with ``--threads`` threads (RAYON_NUM_THREADS /
RAYON_RS_NUM_THREADS for the Rust trainers, ``workers`` for ours), trainers
interleaved within each repeat. Reported: wall time of the training call
(reading included for everyone: HF and rustbpe read the JSONL through a Python
generator, gigatoken and we read the file ourselves), peak RSS of the process
(``ru_maxrss`` of the child from ``os.wait4``, the per-child figure behind
``getrusage(RUSAGE_CHILDREN)``) and peak minus the RSS before training;
medians of ``--repeat`` runs, and ratios to rustbpe and to gigatoken.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _record import write_record  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def vm_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def slice_corpus(path, mb, out):
    os.makedirs(os.path.dirname(out), exist_ok=True)
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
    elif name == "gigatoken":
        import gigatoken

        gigatoken.train_bpe(gigatoken.JsonlFileSource([corpus]), vocab_size, ["<|endoftext|>"])
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
    parser.add_argument("--vocab-size", type=int, nargs="+", default=[32000])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--trainers", default="ube-stream:utf8,ube-stream:ube,gigatoken,rustbpe,hf-tokenizers")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child, args.corpus, args.vocab_size[0], args.threads)
    if not os.path.exists(args.corpus):
        sys.exit(f"{args.corpus} not found: run `python benchmarks/make_corpus.py` first")
    sliced = os.path.join(HERE, "data", f"train-{args.mb:g}mb.jsonl")
    size = slice_corpus(args.corpus, args.mb, sliced)
    # the children import this checkout's ube_stream
    root = os.path.dirname(HERE)
    pythonpath = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=pythonpath, RAYON_NUM_THREADS=str(args.threads), RAYON_RS_NUM_THREADS=str(args.threads),
               TOKENIZERS_PARALLELISM="true" if args.threads > 1 else "false")
    names = args.trainers.split(",")
    for vocab_size in args.vocab_size:
        print(f"corpus: {sliced}: {size / 1e6:.1f} MB of text; vocab {vocab_size}; {args.threads} thread(s)")
        runs = {name: [] for name in names}
        for _ in range(args.repeat):
            for name in names:       # interleaved, so that load on the machine hits every trainer alike
                if runs[name] is None:
                    continue
                result = run_child(name, sliced, vocab_size, args.threads, env)
                if result is None:
                    runs[name] = None
                    continue
                runs[name].append(result)
                print(f"  {name}: {result['wall']:.1f} s, peak {result['peak_kib'] / 1024:.0f} MiB", flush=True)
        report(runs, size, vocab_size, args.threads)
    return 0


def run_child(name, corpus, vocab_size, threads, env):
    """One training in a fresh process: its JSON line, ``peak_kib`` replaced by the
    child's ``ru_maxrss`` (``os.wait4``); None (and the error shown) when it fails."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, __file__, corpus, "--child", name, "--vocab-size",
                                 str(vocab_size), "--threads", str(threads)], stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            print(f"{name}: failed:\n{err.read()[-2000:]}")
            return None
        result = json.loads(out.read().strip().splitlines()[-1])
    result["vm_hwm_kib"] = result["peak_kib"]
    result["peak_kib"] = usage.ru_maxrss        # KiB on Linux
    return result


def report(runs, size, vocab, threads):
    results = {}
    for name, rs in runs.items():
        if rs:
            results[name] = {
                "wall": statistics.median(r["wall"] for r in rs),
                "peak_mib": statistics.median(r["peak_kib"] for r in rs) / 1024,
                "delta_mib": statistics.median(r["peak_kib"] - r["before_kib"] for r in rs) / 1024,
            }
    base, giga = results.get("rustbpe"), results.get("gigatoken")
    print(f"\n{'trainer':<20}{'wall s':>9}{'MB/s':>8}{'peak MiB':>10}{'+MiB':>8}{'time/rustbpe':>14}"
          f"{'mem/rustbpe':>13}{'time/gigatoken':>16}{'mem/gigatoken':>15}")
    for name, r in results.items():
        rt = f"{r['wall'] / base['wall']:.2f}x" if base else "-"
        rm = f"{r['peak_mib'] / base['peak_mib']:.2f}x" if base else "-"
        gt = f"{r['wall'] / giga['wall']:.2f}x" if giga else "-"
        gm = f"{r['peak_mib'] / giga['peak_mib']:.2f}x" if giga else "-"
        print(f"{name:<20}{r['wall']:>9.1f}{size / 1e6 / r['wall']:>8.1f}{r['peak_mib']:>10.0f}{r['delta_mib']:>8.0f}"
              f"{rt:>14}{rm:>13}{gt:>16}{gm:>15}")
    print()
    write_record("side_by_side_train", title="Training side by side (one process per trainer, fresh)",
                 columns=["trainer", "wall s", "MB/s", "peak MiB", "+MiB", "time / rustbpe", "memory / rustbpe",
                          "time / gigatoken", "memory / gigatoken"],
                 rows=[(name, round(r["wall"], 2), round(size / 1e6 / r["wall"], 2), round(r["peak_mib"]),
                        round(r["delta_mib"]), *[round(a / b, 2) if b else None for a, b in (
                            (r["wall"], base and base["wall"]), (r["peak_mib"], base and base["peak_mib"]),
                            (r["wall"], giga and giga["wall"]), (r["peak_mib"], giga and giga["peak_mib"]))])
                       for name, r in results.items()],
                 notes=[f"{size / 1e6:.1f} MB of text, vocabulary {vocab}; medians over the runs of each trainer"],
                 headline=_headline(results, size, vocab, threads))


def _headline(results, size, vocab, threads):
    """ube-stream (utf8, the substrate every peer trains on) against the fastest peer."""
    ours = results.get("ube-stream:utf8")
    peers = {name: r for name, r in results.items() if not name.startswith("ube-stream")}
    if not ours or not peers:
        return None
    name, best = min(peers.items(), key=lambda item: item[1]["wall"])
    return (f"{size / 1e6:.0f} MB, vocabulary {vocab}, {threads} thread(s): ube-stream (utf8) trains "
            f"{best['wall'] / ours['wall']:.1f}x faster than the fastest peer ({name}) with "
            f"{ours['peak_mib'] / best['peak_mib']:.2f}x its peak memory")


if __name__ == "__main__":
    raise SystemExit(main())
