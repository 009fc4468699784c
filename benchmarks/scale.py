"""Scale, measured: `ube train` and `ube encode` on prefixes of the large corpus
(10 / 100 / 1000 MB of text by default) with 1 and 2 workers; wall, CPU, peak
RSS per process, bytes each process moved, and the per-worker costs that
predict N workers.

    python benchmarks/make_large_corpus.py              # once: benchmarks/data/large/large.jsonl
    python benchmarks/scale.py [--sizes 10MB,100MB,1000MB] [--workers 1,2] [--repeat 5]
    python benchmarks/scale.py --workers 1,2,4,8,16     # the scaling curve, on a 16-core machine
    python benchmarks/scale.py --input jsonl.zst        # each prefix as one compressed file
    python benchmarks/scale.py --pin                    # W workers on W cores (the per-core speed-up)

Every run is a fresh `python -m ube_stream ...` process of this checkout
(`ube train --substrate utf8 --vocab-size V`, then `ube encode` with one fixed
tokenizer: `utf8`, V tokens, trained once on the smallest prefix before any
timed run).  Rounds are interleaved (round r runs every size and worker count
once), and each figure is the median over `--repeat` rounds.  The process tree
is polled under /proc (see benchmarks/measure.py): the driver is the `ube`
process, workers are its descendants.  Output: a record in
benchmarks/records/scale/ (`_record.py`; the table: medians with units; its
`data`: `runs`, one per run, and `per_worker_costs` and `prediction`, the
model docs/scaling.md uses).

What "linear" means here: seconds per MB at each size divided by seconds per
MB at the smallest size, in wall time and in CPU time (1.0 = linear; the
smallest size carries the fixed start-up cost, so larger sizes read below 1
until the per-MB cost dominates; under load, trust the CPU column).
Training's counting phase and merge phase come from `ube train`'s own summary
line (`counts X s, merges Y s`), when it prints one.

Speed-up: `speedup_vs_1_worker` is one worker's wall over N workers'; but one
worker already keeps more than one core busy (`cores_used` = CPU s / wall s:
its reading and writing run in threads beside the encoder), so on N cores N
workers are at most N / cores_used(1) as fast.  `efficiency_vs_1_worker_cpu` =
CPU s of one worker / (N x wall s of N workers) says how much of the N cores
did one worker's work (1.0: all of it), which a loaded machine distorts less.
`--pin` measures the per-core form directly: a run with W workers is
restricted to W cores (the first W of this process's affinity, set in the
child before exec, so the whole process tree inherits it; the `cores` column
shows the mask, "all N" when unpinned), so `speedup_vs_1_worker` is N workers
on N cores over one worker on one core, the issue's target.  A pinned run
sizes its threads by its mask too (`usable_cores`): one worker on one core
reads and writes in its encoder's thread.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile

import measure
from _record import write_record

HERE = os.path.dirname(os.path.abspath(__file__))
PHASES = re.compile(r"counts ([0-9.]+) s, merges ([0-9.]+) s")
UNITS = re.compile(r"^units\s+([0-9,]+)", re.M)


def process_costs(run):
    """Driver and worker figures of one measured run.  The driver's I/O
    counters include its reaped workers' (Linux), so its own are the
    difference (an upper bound: a worker's last tenth of a second is unseen)."""
    procs = run["processes"]
    driver = [p for p in procs if p["role"] == "main"]
    workers = [p for p in procs if p["role"] == "child" and p["cpu_s"] > 0.05]
    get = lambda ps, key: sum(p.get(key, 0) for p in ps)   # noqa: E731
    return {
        "driver_cpu_s": round(get(driver, "cpu_s"), 3),
        "driver_peak_rss_mb": round(max((p.get("peak_rss_mb", 0) for p in driver), default=0), 1),
        "driver_own_rchar_mb": round(max(get(driver, "rchar") - get(workers, "rchar"), 0) / 1e6, 3),
        "driver_own_wchar_mb": round(max(get(driver, "wchar") - get(workers, "wchar"), 0) / 1e6, 3),
        "workers_seen": len(workers),
        "workers_cpu_s": round(get(workers, "cpu_s"), 3),
        "worker_peak_rss_mb": round(max((p.get("peak_rss_mb", 0) for p in workers), default=0), 1),
        "workers_rchar_mb": round(get(workers, "rchar") / 1e6, 3),
        "workers_wchar_mb": round(get(workers, "wchar") / 1e6, 3),
    }


def compressed(path):
    """`path` + '.zst' (written once, then reused)."""
    import zstandard

    out = path + ".zst"
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(path):
        with open(path, "rb") as src, open(out + ".part", "wb") as dst:
            zstandard.ZstdCompressor(level=3, write_content_size=True).copy_stream(src, dst,
                                                                                size=os.path.getsize(path))
        os.replace(out + ".part", out)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=os.path.join(HERE, "data", "large", "large.jsonl"))
    parser.add_argument("--sizes", default="10MB,100MB,1000MB", help="text bytes of each prefix (comma-separated)")
    parser.add_argument("--workers", default="1,2", help="worker counts (comma-separated)")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds; figures are medians")
    parser.add_argument("--vocab-size", type=int, default=32768)
    parser.add_argument("--tasks", default="train,encode", help="train, encode or both")
    parser.add_argument("--input", choices=("jsonl", "jsonl.zst"), default="jsonl",
                        help="encode/train each prefix as plain JSON Lines (default) or as one .jsonl.zst file "
                             "(one zstd frame, level 3: today one work unit per compressed file)")
    parser.add_argument("--pin", action="store_true",
                        help="run W workers on W cores (the first W of this process's CPU affinity)")
    parser.add_argument("--work-dir", default=os.path.join(HERE, "data", "scale-work"),
                        help="prefixes and the fixed tokenizer (kept); run outputs go to a temporary folder")
    args = parser.parse_args(argv)
    sizes = sorted(measure.parse_sizes(args.sizes))
    worker_counts = [int(w) for w in args.workers.split(",")]
    tasks = [t.strip() for t in args.tasks.split(",")]
    if not os.path.exists(args.corpus):
        raise SystemExit(f"{args.corpus} missing: run python benchmarks/make_large_corpus.py first")
    env = measure.ube_env()
    measure.compile_package()   # imported as an installed package is: from its bytecode
    prefixes = {size: measure.cut_prefix(args.corpus, size, args.work_dir) for size in sizes}
    if args.input == "jsonl.zst":
        prefixes = {size: (compressed(path), text_bytes, documents)
                    for size, (path, text_bytes, documents) in prefixes.items()}
    tokenizer = os.path.join(args.work_dir, f"utf8-{args.vocab_size}-{sizes[0] // 10**6}MB.json")
    if "encode" in tasks and not os.path.exists(tokenizer):
        train = measure.ube_cmd("train", prefixes[sizes[0]][0], "--substrate", "utf8", "--vocab-size",
                                str(args.vocab_size), "-o", tokenizer, "-q")
        measure.check(measure.run_measured(train, env=env), "training the tokenizer")
    records = []
    with tempfile.TemporaryDirectory(dir=args.work_dir) as tmp:
        for round_no in range(args.repeat):
            for size in sizes:
                path, text_bytes, documents = prefixes[size]
                for workers in worker_counts:
                    for task in tasks:
                        out = os.path.join(tmp, f"{task}-{size}-{workers}")
                        if task == "train":
                            out += ".json"
                            cmd = measure.ube_cmd("train", path, "--substrate", "utf8", "--vocab-size",
                                                  str(args.vocab_size), "--workers", str(workers), "-o", out)
                        else:
                            cmd = measure.ube_cmd("encode", path, "--tokenizer", tokenizer, "--workers",
                                                  str(workers), "-o", out, "-q")
                        load = os.getloadavg()[0]
                        cores = measure.pinned_cores(workers, args.pin)
                        run = measure.check(measure.run_measured(cmd, env=env, cores=cores),
                                            f"{task} {size // 10**6} MB, {workers} workers")
                        phases = PHASES.search(run["output_tail"]) if task == "train" else None
                        units = UNITS.search(run["output_tail"]) if task == "train" else None
                        record = {
                            "task": task, "input": args.input, "round": round_no,
                            "size_mb": round(text_bytes / 1e6, 3),
                            "documents": documents, "workers": workers, "cores": measure.cores_label(cores),
                            "load_1min": round(load, 2),
                            "wall_s": run["wall_s"], "cpu_s": run["cpu_s"],
                            "mb_per_s_wall": round(text_bytes / 1e6 / run["wall_s"], 2),
                            "mb_per_cpu_s": round(text_bytes / 1e6 / run["cpu_s"], 2),
                            "output_mb": round(measure.dir_bytes(out) / 1e6, 3),
                            "units": int(units.group(1).replace(",", "")) if units else None,
                            "counts_s": float(phases.group(1)) if phases else None,
                            "merges_s": float(phases.group(2)) if phases else None,
                            **process_costs(run),
                        }
                        if phases:   # the driver's CPU when the merge phase began (it ends about when the run does)
                            record["driver_counting_cpu_s"] = measure.cpu_at(
                                run["main_cpu_timeline"], run["wall_s"] - float(phases.group(2)))
                        if task == "encode":
                            with open(os.path.join(out, "MANIFEST.json")) as f:
                                manifest = json.load(f)
                            record.update({k: manifest.get("totals", {}).get(k) for k in ("tokens", "shards")})
                            record["units"] = len({s.get("unit_id") for s in manifest.get("shards", [])}) or None
                        records.append(record)
                        print(f"round {round_no} {task} {record['size_mb']:.0f} MB x{workers} "
                              f"(cores {record['cores']}): "
                              f"{record['wall_s']:.2f} s wall, {record['cpu_s']:.2f} CPU s, "
                              f"worker peak {record['worker_peak_rss_mb']} MB, load {load:.2f}", file=sys.stderr)
                        shutil.rmtree(out, ignore_errors=True) if os.path.isdir(out) else os.remove(out)
    summary = summarize(records, sizes, worker_counts, tasks)
    largest = max(r["size_mb"] for r in summary["summary"])
    most = max(worker_counts)
    headline = "; ".join(
        f"{r['task']} {r['size_mb']:.0f} MB" + (" as one .jsonl.zst file" if args.input == "jsonl.zst" else "")
        + f": {r['mb_per_cpu_s']} MB per CPU s, x{r['speedup_vs_1_worker']} wall "
        f"at {most} workers" + (f" on {most} cores" if args.pin else "")
        for r in summary["summary"] if r["size_mb"] == largest and r["workers"] == most)
    notes = [
        f"`{args.input}` prefixes of {os.path.relpath(args.corpus)}; tokenizer utf8, {args.vocab_size} tokens, "
        f"trained on {sizes[0] / 1e6:g} MB; medians of {args.repeat} interleaved rounds",
        ("pinned (--pin): W workers ran on W cores (the `cores` column: the CPU affinity of the whole process "
         "tree), so the speed-up is per core" if args.pin else
         "unpinned: every run could use every core (the `cores` column); one worker already keeps more than one "
         "core busy, so the speed-up is not per core (--pin measures that)"),
        "wall/CPU are the whole process tree (wait4 rusage); per-process figures are the last /proc poll (0.1 s) of "
        "each process: peak RSS is the kernel's VmHWM; rchar/wchar count every read/write call (files and pipes), "
        "so the driver's are an upper bound on the bytes it exchanged with its workers",
        "the prediction and per-worker costs (docs/scaling.md) are in the record's data",
    ]
    write_record("scale", title="Scale: ube train and ube encode by corpus size and worker count",
                 columns=[f"{c} ({u})" if u else c for c, u in ((c["name"], c["unit"]) for c in summary["columns"])],
                 rows=summary["rows"], notes=notes, headline=headline,
                 argv=sys.argv[1:] if argv is None else argv,
                 data={"pinned": args.pin, "per_worker_costs": summary["per_worker_costs"],
                       "prediction": summary["prediction"],
                       "runs": records, "tokenizer": {"path": os.path.relpath(tokenizer), "substrate": "utf8",
                                                      "vocab_size": args.vocab_size,
                                                      "trained_on_mb": sizes[0] / 1e6}})
    return 0


def summarize(records, sizes, worker_counts, tasks):
    """Medians per (task, size, workers), linearity, speed-up, and the per-worker model."""
    groups = {}
    for r in records:
        groups.setdefault((r["task"], r["size_mb"], r["workers"]), []).append(r)
    med = lambda rs, key: None if any(r.get(key) is None for r in rs) else round(   # noqa: E731
        statistics.median(r[key] for r in rs), 3)
    keys = ["units", "wall_s", "cpu_s", "mb_per_s_wall", "mb_per_cpu_s", "counts_s", "merges_s", "driver_cpu_s",
            "driver_counting_cpu_s",
            "workers_cpu_s", "driver_peak_rss_mb", "worker_peak_rss_mb", "driver_own_rchar_mb", "driver_own_wchar_mb",
            "workers_rchar_mb", "workers_wchar_mb", "workers_seen", "output_mb", "load_1min"]
    rows = []
    for (task, size_mb, workers), rs in sorted(groups.items()):
        rows.append({"task": task, "size_mb": size_mb, "workers": workers, "cores": rs[0]["cores"], "runs": len(rs),
                     **{k: med(rs, k) for k in keys}})
    by = {(r["task"], r["size_mb"], r["workers"]): r for r in rows}
    smallest = min(r["size_mb"] for r in rows)
    one = min(worker_counts)
    for r in rows:
        base = by.get((r["task"], smallest, r["workers"]))
        r["s_per_mb_vs_smallest"] = round((r["wall_s"] / r["size_mb"]) / (base["wall_s"] / base["size_mb"]), 3)
        r["cpu_s_per_mb_vs_smallest"] = round((r["cpu_s"] / r["size_mb"]) / (base["cpu_s"] / base["size_mb"]), 3)
        ref = by.get((r["task"], r["size_mb"], one))
        r["speedup_vs_1_worker"] = round(ref["wall_s"] / r["wall_s"], 3)
        # one worker already keeps more than one core busy (reading and writing in threads beside the encoder), so
        # N workers are at most N / cores_used(1) as fast: the efficiency is the reachable form of a speed-up target
        r["cores_used"] = round(r["cpu_s"] / r["wall_s"], 3)
        r["efficiency_vs_1_worker_cpu"] = round(ref["cpu_s"] / (r["workers"] * r["wall_s"]), 3)
        if r["task"] == "train" and r["counts_s"] and ref["counts_s"]:
            r["counting_speedup_vs_1_worker"] = round(ref["counts_s"] / r["counts_s"], 3)
    columns = [("task", ""), ("size_mb", "MB"), ("workers", ""), ("cores", ""), ("units", ""), ("wall_s", "s"), ("cpu_s", "s"),
               ("mb_per_s_wall", "MB/s"), ("mb_per_cpu_s", "MB/CPU s"), ("speedup_vs_1_worker", "x"),
               ("cores_used", "cores"), ("efficiency_vs_1_worker_cpu", "x"),
               ("s_per_mb_vs_smallest", "x"), ("cpu_s_per_mb_vs_smallest", "x"), ("counts_s", "s"), ("merges_s", "s"),
               ("driver_peak_rss_mb", "MB"), ("worker_peak_rss_mb", "MB"), ("driver_own_rchar_mb", "MB"),
               ("workers_rchar_mb", "MB"), ("workers_wchar_mb", "MB"), ("load_1min", "")]
    out = {"columns": [{"name": c, "unit": u} for c, u in columns],
           "rows": [[r.get(c) for c, _ in columns] for r in rows], "summary": rows}
    # per-worker costs: the largest size, the smallest worker count above 1 (with one worker the CLI runs the
    # units in its own process, so driver and worker costs cannot be told apart)
    largest = max(r["size_mb"] for r in rows)
    multi = sorted(w for w in worker_counts if w > 1)
    costs, prediction = {}, {}
    for task in tasks:
        r = by.get((task, largest, multi[0])) if multi else None
        if r is None or not r["workers_seen"]:
            continue
        driver_s = r["driver_cpu_s"]
        if task == "train" and r.get("driver_counting_cpu_s") is not None:
            driver_s = r["driver_counting_cpu_s"]   # the driver's share of the counting phase
        costs[task] = {
            "size_mb": largest, "workers": multi[0],
            "worker_cpu_s_per_mb": round(r["workers_cpu_s"] / largest, 5),
            "driver_cpu_s_per_mb": round(driver_s / largest, 5),
            "merge_phase_s": r["merges_s"] if task == "train" else None,
            "worker_peak_rss_mb": r["worker_peak_rss_mb"], "driver_peak_rss_mb": r["driver_peak_rss_mb"],
            "worker_read_mb_per_mb": round(r["workers_rchar_mb"] / largest, 3),
            "worker_write_mb_per_mb": round(r["workers_wchar_mb"] / largest, 3),
            "driver_own_read_mb_per_mb": round(r["driver_own_rchar_mb"] / largest, 3),
            "driver_own_write_mb_per_mb": round(r["driver_own_wchar_mb"] / largest, 3),
            "output_mb_per_mb": round(r["output_mb"] / largest, 3),
        }
        # wall(N) between max(D, W/N) (the driver's work overlaps the workers') and D + W/N (it does not)
        work, drv = r["workers_cpu_s"], driver_s
        name = "train_counting_phase" if task == "train" else task
        prediction[name] = {str(n): {"low": round((drv + work) / (drv + work / n), 2),
                                     "high": round((drv + work) / max(drv, work / n), 2)} for n in (1, 2, 4, 8, 16)}
    out["per_worker_costs"] = costs
    out["prediction"] = {
        "what": "speed-up at N workers on N idle cores over the same work done by one worker, from the CPU seconds "
                "of the driver (D) and of all workers (W) at the largest size and the smallest worker count above 1: "
                "low = (D + W) / (D + W/N) (the driver's work never overlaps the workers'), high = (D + W) / max(D, "
                "W/N) (it always does); train: the counting phase only (D = the driver's CPU up to the start of the merge "
                "phase, read from its CPU timeline; the merge phase is serial); "
                "assumes workers share nothing (no common disk, page cache or memory-bandwidth limit)",
        "speedup": prediction,
    }
    return out


if __name__ == "__main__":
    raise SystemExit(main())
