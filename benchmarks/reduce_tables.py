"""Training's reduce of the per-unit count tables, and the counting phase it ends, this checkout
against another (issue 24 item 4).

    python benchmarks/reduce_tables.py --baseline /tmp/base [--mb 1000] [--workers 1,2] [--rounds 3] [--train]

Counts the first ``--mb`` MB of ``benchmarks/data/large/large.jsonl`` (``make_large_corpus.py``)
once (``train(keep_work=True)`` of this checkout, 16 MiB units) and keeps the unit tables in
``--work-dir``.  Then, rounds interleaved, each checkout (``--baseline`` and this one, each with
its kernels built in place) runs ``trainer._reduce_tables`` over those same tables in a fresh
process, with a local executor of W workers started before the clock: wall seconds, the driver's
CPU, the workers' CPU, the driver's peak RSS.  The reduced tables are checked identical (sha256
of the three arrays) before anything is reported.  ``--train`` adds whole trainings (``utf8``,
vocabulary 8000, a fresh work directory) of each checkout: wall and the counting phase
(``TrainSummary.count_seconds``: reading, counting and the reduce), the tokenizers checked identical.
Medians of ``--rounds``.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

from _record import write_record  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

_REDUCE = r"""
import glob, hashlib, json, os, resource, sys, time
root, tables, tmp, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.path.insert(0, root)
from ube_stream.executors import get_executor
from ube_stream.training import trainer

if __name__ == "__main__":
    paths = sorted(p for p in glob.glob(os.path.join(tables, "*.npz")) if not p.endswith(".spans.npz"))
    os.makedirs(tmp, exist_ok=True)
    kwargs = {}
    if "parts" in trainer._reduce_tables.__code__.co_varnames:   # the range-partitioned reduce
        kwargs["parts"] = getattr(trainer, "REDUCE_PARTS_PER_WORKER", 1) * workers
    with get_executor("local", workers=workers) as runner:
        runner.map(abs, list(range(workers)))   # the pool is up before the clock starts
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t, c = time.perf_counter(), time.process_time()
        key_data, key_offsets, counts = trainer._reduce_tables(paths, runner, tmp, **kwargs)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    digest = hashlib.sha256(key_data.tobytes() + key_offsets.tobytes() + counts.tobytes()).hexdigest()
    print("RESULT " + json.dumps({"wall_s": wall, "driver_cpu_s": cpu,
                                  "workers_cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
                                  "driver_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                                  "keys": len(counts), "tables": len(paths), "sha256": digest}))
"""

_TRAIN = r"""
import hashlib, json, sys, time
root, corpus, work, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sys.path.insert(0, root)
from ube_stream import train
from ube_stream.training.trainer import TrainSummary

if __name__ == "__main__":
    summary = TrainSummary()
    t = time.perf_counter()
    tok = train(corpus, vocab_size=8000, substrate="utf8", workers=workers, show_progress=False, work_dir=work,
                summary=summary)
    print("RESULT " + json.dumps({"wall_s": time.perf_counter() - t, "count_s": summary.count_seconds,
                                  "sha256": hashlib.sha256(tok.to_json().encode()).hexdigest()}))
"""


def child(script, *args):
    res = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=HERE)
    line = next((x for x in res.stdout.splitlines() if x.startswith("RESULT ")), None)
    if res.returncode != 0 or line is None:
        raise SystemExit(f"{args[0]}: the run failed:\n{res.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="another checkout, kernels built in place")
    parser.add_argument("--corpus", default=os.path.join(HERE, "data", "large", "large.jsonl"))
    parser.add_argument("--mb", type=int, default=1000, help="MB of the corpus's text to count")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--train", action="store_true", help="also time whole trainings")
    parser.add_argument("--work-dir", default=os.path.join(HERE, "data", "reduce-work"))
    args = parser.parse_args(argv)
    sys.path.insert(0, HERE)
    import measure

    if not os.path.exists(args.corpus):
        raise SystemExit(f"{args.corpus} missing: run python benchmarks/make_large_corpus.py first")
    corpus, text_bytes, documents = measure.cut_prefix(args.corpus, args.mb * 10**6, args.work_dir)
    tables_root = os.path.join(args.work_dir, f"tables-{args.mb}MB")
    if not os.path.isdir(tables_root) or not os.listdir(tables_root):
        subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); from ube_stream import train\n"
                        "if __name__ == '__main__':\n"
                        "    train(sys.argv[2], vocab_size=300, substrate='utf8', workers=2, show_progress=False, "
                        "work_dir=sys.argv[3], keep_work=True)", ROOT, corpus, tables_root], check=True)
    runs = [d for d in os.listdir(tables_root) if d.startswith("run-")]
    if len(runs) != 1:
        raise SystemExit(f"{tables_root}: expected one run directory, found {runs}: remove it and run again")
    tables = os.path.join(tables_root, runs[0], "tables")
    checkouts = {"before": os.path.abspath(args.baseline), "after": ROOT}
    workers = [int(w) for w in args.workers.split(",")]
    reduce_runs = {(label, w): [] for label in checkouts for w in workers}
    train_runs = {(label, w): [] for label in checkouts for w in workers}
    for r in range(args.rounds):
        for w in workers:
            for label, root in checkouts.items():
                tmp = os.path.join(args.work_dir, f"tmp-{label}")
                shutil.rmtree(tmp, ignore_errors=True)
                res = child(_REDUCE, root, tables, tmp, str(w))
                reduce_runs[(label, w)].append(res)
                print(f"round {r} reduce {label} x{w}: {res['wall_s']:.2f} s wall, driver {res['driver_cpu_s']:.2f} "
                      f"CPU s, workers {res['workers_cpu_s']:.2f} CPU s", flush=True)
                if args.train:
                    work = os.path.join(args.work_dir, f"train-{label}")
                    shutil.rmtree(work, ignore_errors=True)
                    res = child(_TRAIN, root, corpus, work, str(w))
                    train_runs[(label, w)].append(res)
                    print(f"round {r} train {label} x{w}: {res['wall_s']:.2f} s wall, counting {res['count_s']:.2f} s",
                          flush=True)
    for kind, runs_of in (("reduce", reduce_runs), ("train", train_runs)):
        digests = {res["sha256"] for results in runs_of.values() for res in results}
        if len(digests) > 1:
            raise SystemExit(f"the {kind} results differ between checkouts or worker counts: {sorted(digests)}")

    def med(results, key):
        return round(statistics.median(res[key] for res in results), 3)

    rows = []
    for w in workers:
        b, a = reduce_runs[("before", w)], reduce_runs[("after", w)]
        rows.append([f"reduce, {w} worker(s)", "wall s", med(b, "wall_s"), med(a, "wall_s"),
                     round(med(b, "wall_s") / med(a, "wall_s"), 2)])
        cpu_b = med(b, "driver_cpu_s") + med(b, "workers_cpu_s")
        cpu_a = med(a, "driver_cpu_s") + med(a, "workers_cpu_s")
        rows.append([f"reduce, {w} worker(s)", "CPU s (driver + workers)", round(cpu_b, 3), round(cpu_a, 3),
                     round(cpu_b / cpu_a, 2)])
        rows.append([f"reduce, {w} worker(s)", "driver peak RSS MB", med(b, "driver_peak_mb"),
                     med(a, "driver_peak_mb"), round(med(b, "driver_peak_mb") / med(a, "driver_peak_mb"), 2)])
        if args.train:
            tb, ta = train_runs[("before", w)], train_runs[("after", w)]
            for key, what in (("count_s", "counting phase s"), ("wall_s", "whole training s")):
                rows.append([f"train, {w} worker(s)", what, med(tb, key), med(ta, key), round(med(tb, key) / med(ta, key), 2)])
    first = reduce_runs[("after", workers[0])][0]
    headline = ", ".join(f"reduce {row[0].split(', ')[1]} {row[4]}x faster" for row in rows
                         if row[0].startswith("reduce") and row[1] == "wall s")
    notes = [f"{text_bytes / 1e6:.0f} MB of text of {os.path.relpath(args.corpus, ROOT)} ({documents} documents), "
             f"{first['tables']} unit tables of 16 MiB units, {first['keys']:,} distinct chunks; medians of "
             f"{args.rounds} interleaved rounds, each run a fresh process",
             f"before: {checkouts['before']}; after: {checkouts['after']}; results identical (sha256 of the reduced "
             f"table{' and of the tokenizers' if args.train else ''})",
             "ratio: before / after (above 1: this checkout is faster or smaller)"]
    write_record("reduce_tables", title="Training's reduce of the unit count tables: two checkouts",
                 columns=["run", "measure", "before", "after", "before / after (x)"], rows=rows,
                 notes=notes, headline=headline, argv=sys.argv[1:] if argv is None else argv)
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
