"""Side by side, one machine: `ube encode` on the local executor vs on Ray, same workers.

    python benchmarks/make_corpus.py --shared /work/shared/data --mb 60   # once: the mixed corpus
    python benchmarks/side_by_side_ray.py [CORPUS.jsonl] [--workers 2] [--unit-rows 250] [--repeat 2]

A ``--vocab`` (32k) UBE tokenizer is trained on the first ``--train-mb`` MB of
the corpus (cached next to the corpus).  Ray is started first
(``ray.init(num_cpus=--workers)``) and is not timed; then, alternating for
``--repeat`` rounds, ``ube encode`` (``ube_stream.cli.main``, in this
process) writes a fresh shard directory with ``--executor local --workers N``
and with ``--executor ray`` (the running Ray).  Timed: the whole command,
from the call to MANIFEST.json (the local pool's process start-up, Ray's task
dispatch and its workers' first import and tokenizer load are included).
The two directories are checked byte-identical.  Then the per-core rate:
``--workers 1`` (in-process) on the same corpus.  MB = UTF-8 MB of the
documents; wall times are the best of the rounds (the median is printed too).
"""
import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from _record import peer_versions, write_record  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the repository (a built, not installed, checkout)


def text_mb(path):
    size = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            size += len(json.loads(line)["text"].encode("utf-8"))
    return size / 1e6


def slice_corpus(path, mb, out):
    size = 0
    with open(path, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as g:
        for line in f:
            g.write(line)
            size += len(json.loads(line)["text"].encode("utf-8"))
            if size >= mb * 1e6:
                break


def digest_tree(directory):
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(directory)):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            h.update(os.path.relpath(path, directory).encode() + b"\0")
            with open(path, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="?", default=os.path.join(HERE, "data", "mixed.jsonl"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--unit-rows", type=int, default=250, help="rows per unit (mixed.jsonl: ~10 KB/row)")
    parser.add_argument("--train-mb", type=float, default=8.0)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--skip-per-core", action="store_true")
    parser.add_argument("--tmp", default=None, help="where to write the shard directories (default: system tmp)")
    args = parser.parse_args(argv)
    script_argv = sys.argv[1:] if argv is None else list(argv)   # `argv` is reused below
    if not os.path.exists(args.corpus):
        sys.exit(f"{args.corpus} not found: run `python benchmarks/make_corpus.py --mb 60` first")

    import ray

    from ube_stream import train
    from ube_stream.cli import main as ube

    mb = text_mb(args.corpus)
    tok_path = os.path.join(os.path.dirname(os.path.abspath(args.corpus)),
                            f"tok-ube-{args.vocab}-{args.train_mb:g}mb.json")
    if not os.path.exists(tok_path):
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            part = os.path.join(tmp, "train.jsonl")
            slice_corpus(args.corpus, args.train_mb, part)
            train([part], vocab_size=args.vocab, workers=args.workers, show_progress=False).save(tok_path)
        print(f"trained {tok_path} on {args.train_mb} MB in {time.perf_counter() - started:.1f} s", flush=True)
    print(f"corpus {args.corpus}: {mb:.1f} MB of text; tokenizer {tok_path}; {args.workers} workers; "
          f"--unit-rows {args.unit_rows}; {os.cpu_count()} cores on this machine", flush=True)

    started = time.perf_counter()
    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    print(f"ray {ray.__version__} started in {time.perf_counter() - started:.1f} s (not timed)", flush=True)

    root = tempfile.mkdtemp(prefix="ube-ray-bench-", dir=args.tmp)
    common = [args.corpus, "--tokenizer", tok_path, "--unit-rows", str(args.unit_rows), "-q"]
    times = {"local": [], "ray": []}
    digests = set()
    try:
        for round_ in range(args.repeat):
            for executor in ("local", "ray"):
                out = os.path.join(root, f"{executor}-{round_}")
                argv = common + ["-o", out, "--workers", str(args.workers), "--executor", executor]
                if executor == "ray":
                    argv += ["--ray-address", "auto"]
                started = time.perf_counter()
                assert ube(["encode"] + argv) == 0
                times[executor].append(time.perf_counter() - started)
                digests.add(digest_tree(out))
                print(f"  round {round_ + 1} {executor:<5} {times[executor][-1]:7.2f} s "
                      f"{mb / times[executor][-1]:7.2f} MB/s", flush=True)
                shutil.rmtree(out)
        assert len(digests) == 1, "local and Ray shard directories differ"
        best = {k: min(v) for k, v in times.items()}
        print(f"\nencode {mb:.1f} MB, {args.workers} workers (best of {args.repeat}; median in brackets):")
        for k in ("local", "ray"):
            print(f"  {k:<5} {best[k]:7.2f} s  {mb / best[k]:7.2f} MB/s  "
                  f"[{statistics.median(times[k]):.2f} s]")
        print(f"  ray / local wall time: {best['ray'] / best['local']:.3f}x (target <= 1.2x); "
              f"outputs byte-identical")
        rows = [[k, best[k], mb / best[k], statistics.median(times[k])] for k in ("local", "ray")]
        if not args.skip_per_core:
            out = os.path.join(root, "one")
            started = time.perf_counter()
            assert ube(["encode"] + common + ["-o", out, "--workers", "1"]) == 0
            one = time.perf_counter() - started
            assert digest_tree(out) in digests
            shutil.rmtree(out)
            print(f"  per core (--workers 1, in-process): {one:.2f} s, {mb / one:.2f} MB/s; "
                  f"{args.workers} workers reach {one / best['local']:.2f}x of it locally, "
                  f"{one / best['ray']:.2f}x on Ray")
            rows.append(["local, --workers 1 (in-process)", one, mb / one, one])
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        write_record("side_by_side_ray", title="ube encode on the local executor vs on Ray, same workers",
                     columns=["executor", "wall (s, best)", "MB/s", "wall (s, median)"], rows=rows,
                     headline=f"Ray / local wall {best['ray'] / best['local']:.2f}x (target <= 1.2x)",
                     peers=peer_versions("ray"),
                     notes=[f"{args.corpus}: {mb:.1f} MB of text; {args.workers} workers; best of {args.repeat}; "
                            "outputs byte-identical"], argv=script_argv)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        ray.shutdown()


if __name__ == "__main__":
    main()
