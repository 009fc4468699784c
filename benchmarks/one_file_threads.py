"""One large compressed file in one process: where its pipeline's time goes
(issue 24 item 2).  A single-frame `.jsonl.zst` is one work unit; with idle
cores, `ube encode` runs it as one reader thread (decompressing), T encoder
threads (parsing the JSON Lines blocks and encoding them, `OrderedMap`), the
calling thread (taking results in order) and one writer thread (shards,
checksums).  This script runs `encode_corpus` on one such file with T encoder
threads for each T of `--threads` and reports, per run, the wall time, the
process CPU and the CPU of each pipeline thread (`time.thread_time`, taken as
each thread ends).  A stage whose CPU comes close to the wall time is the
serial limit of the pipeline.

    python benchmarks/one_file_threads.py [--mb 300] [--threads 1,2,4,8,16] [--repeat 3]

Each run is a fresh process (`--child`), rounds interleaved; figures are
medians.  The file is the first `--mb` MB of
`benchmarks/data/large/large.jsonl` (`make_large_corpus.py`), compressed at
level 3 in one frame; the tokenizer is a `utf8` one of `--vocab-size` tokens
trained on its first 20 MB.  Output: a record in
`benchmarks/records/one_file_threads/`.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def child(path, tokenizer, threads, out):
    """One run in this process: prints a JSON line of its figures."""
    import collections
    import shutil

    sys.path.insert(0, REPO)
    from ube_stream import encode_corpus
    from ube_stream.shards import encode as encode_module
    from ube_stream.shards import overlap

    cpu = collections.defaultdict(float)
    count = collections.Counter()

    def timed(cls, name):
        run = cls._run

        def wrapped(self, *args, **kwargs):
            try:
                return run(self, *args, **kwargs)
            finally:
                cpu[name] += time.thread_time()
                count[name] += 1
        cls._run = wrapped

    timed(overlap.ReadAhead, "reader")
    timed(overlap.OrderedMap, "encoders")
    timed(overlap.WriteBehind, "writer")
    encode_module.unit_threads = lambda *args: threads   # the thread count under test, whatever the cores
    shutil.rmtree(out, ignore_errors=True)
    wall, process, main = time.perf_counter(), time.process_time(), time.thread_time()
    manifest = encode_corpus([path], tokenizer=tokenizer, output=out, workers=1, show_progress=False)
    figures = {"threads": threads, "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - process,
               "main_thread_cpu_s": time.thread_time() - main, "tokens": manifest["totals"]["tokens"],
               **{f"{name}_cpu_s": cpu[name] for name in ("reader", "encoders", "writer")},
               "encoder_threads_seen": count["encoders"]}
    shutil.rmtree(out, ignore_errors=True)
    print(json.dumps(figures))


def prepare(args):
    """The compressed prefix and the tokenizer (made once, then reused)."""
    import zstandard

    os.makedirs(args.work_dir, exist_ok=True)
    path = os.path.join(args.work_dir, f"large-{args.mb:g}MB.jsonl.zst")
    tokenizer = os.path.join(args.work_dir, f"utf8-{args.vocab_size}.json")
    if not os.path.exists(path):
        limit, raw = args.mb * 1e6, bytearray()
        with open(args.corpus, "rb") as f:
            for line in f:
                if len(raw) + len(line) > limit:
                    break
                raw += line
        with open(path + ".part", "wb") as f:
            f.write(zstandard.ZstdCompressor(level=3).compress(bytes(raw)))
        os.replace(path + ".part", path)
        with open(os.path.join(args.work_dir, "train.jsonl"), "wb") as f:
            f.write(bytes(raw[:raw.rfind(b"\n", 0, 20_000_000) + 1]))
    if not os.path.exists(tokenizer):
        subprocess.run([sys.executable, "-m", "ube_stream", "train", os.path.join(args.work_dir, "train.jsonl"),
                        "--substrate", "utf8", "--vocab-size", str(args.vocab_size), "-o", tokenizer, "-q"],
                       check=True, cwd=REPO)
    return path, tokenizer


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=os.path.join(HERE, "data", "large", "large.jsonl"))
    parser.add_argument("--mb", type=float, default=300, help="MB of JSON Lines compressed into the one file")
    parser.add_argument("--threads", default="1,2", help="encoder thread counts (comma-separated)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--vocab-size", type=int, default=32768)
    parser.add_argument("--work-dir", default=os.path.join(HERE, "data", "one-file-threads"))
    parser.add_argument("--child", nargs=4, metavar=("PATH", "TOKENIZER", "THREADS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        path, tokenizer, threads, out = args.child
        child(path, tokenizer, int(threads), out)
        return 0
    from _record import write_record

    if not os.path.exists(args.corpus):
        raise SystemExit(f"{args.corpus} missing: run python benchmarks/make_large_corpus.py first")
    path, tokenizer = prepare(args)
    counts = [int(t) for t in args.threads.split(",")]
    runs = []
    for round_no in range(args.repeat):
        for threads in counts:
            out = os.path.join(args.work_dir, f"out-{threads}")
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", path, tokenizer,
                                   str(threads), out], capture_output=True, text=True, cwd=REPO)
            if done.returncode:
                raise SystemExit(f"threads {threads}: {done.stderr[-2000:]}")
            run = json.loads(done.stdout.strip().splitlines()[-1])
            run.update(round=round_no, load_1min=round(os.getloadavg()[0], 2))
            runs.append(run)
            print(f"round {round_no} threads {threads}: {run['wall_s']:.2f} s wall, {run['cpu_s']:.2f} CPU s "
                  f"(reader {run['reader_cpu_s']:.2f}, encoders {run['encoders_cpu_s']:.2f}, "
                  f"writer {run['writer_cpu_s']:.2f}, main {run['main_thread_cpu_s']:.2f})", file=sys.stderr)
    if len({r["tokens"] for r in runs}) != 1:
        raise SystemExit(f"token counts differ between thread counts: {sorted({r['tokens'] for r in runs})}")
    mb = args.mb   # MB of JSON Lines (the figures below are MB of the file, decompressed)
    keys = ["wall_s", "cpu_s", "reader_cpu_s", "encoders_cpu_s", "writer_cpu_s", "main_thread_cpu_s"]
    rows, base = [], None
    for threads in counts:
        med = {k: round(statistics.median(r[k] for r in runs if r["threads"] == threads), 3) for k in keys}
        base = base or med
        rows.append([threads, med["wall_s"], med["cpu_s"], round(mb / med["wall_s"], 1),
                     round(base["wall_s"] / med["wall_s"], 2), med["reader_cpu_s"], med["encoders_cpu_s"],
                     med["writer_cpu_s"], med["main_thread_cpu_s"],
                     round(max(med["reader_cpu_s"], med["writer_cpu_s"], med["main_thread_cpu_s"]) / med["wall_s"],
                           2)])
    last = rows[-1]
    write_record("one_file_threads", title="One compressed file, one process: pipeline threads' CPU",
                 columns=["encoder threads", "wall (s)", "CPU (s)", "MB/s wall", "speed-up vs first (x)",
                          "reader CPU (s)", "encoders CPU (s)", "writer CPU (s)", "main thread CPU (s)",
                          "busiest serial thread / wall"],
                 rows=rows, headline=f"{args.mb:g} MB .jsonl.zst: x{last[4]} wall at {last[0]} encoder threads, "
                                     f"busiest serial thread {last[9]} of the wall",
                 notes=[f"first {args.mb:g} MB of {os.path.relpath(args.corpus, REPO)} as one zstd frame (level 3); "
                        f"utf8 tokenizer of {args.vocab_size} tokens; medians of {args.repeat} interleaved rounds, "
                        "each a fresh process; thread CPU from time.thread_time as each pipeline thread ends",
                        f"{os.cpu_count()} cores here"],
                 argv=sys.argv[1:] if argv is None else argv, data={"runs": runs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
