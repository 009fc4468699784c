"""Where training's time and peak memory go, phase by phase (one ``ube_stream.train`` run).

    python benchmarks/make_corpus.py --mb 100 -o benchmarks/data/mixed100.jsonl     # once
    python benchmarks/train_phases.py benchmarks/data/mixed100.jsonl --mb 100 --substrate ube --vocab-size 32000 256000

Each training runs in a fresh child process (``--repeat`` times, sizes and
substrates interleaved).  The child wraps the trainer's phase entry points
(the phase-1 table reduce, routing, the merge kernel's two halves
``prepare_merges`` / ``run_merges``, the construction of the ``Tokenizer``) and reads ``VmRSS`` / ``VmHWM`` from ``/proc/self/status`` at
each boundary, so C allocations count too (tracemalloc does not see them);
``VmHWM`` is reset (``/proc/self/clear_refs`` = 5) at each boundary where the
kernel allows it, so every phase's own peak is reported, not the run's so far.
Reported per phase: seconds, RSS at its end, its own peak RSS; plus the
merges and the phase-2 time per merge beyond the base (merge-kernel seconds,
both halves, / merges), the number the vocabulary-scaling target compares
between sizes.
Phase 1 (reading, pre-tokenizing, counting) runs in worker processes when
``--workers`` > 1; with the default 1 it runs in this process.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from _record import write_record  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def status_kib():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(line.split()[1])
    return out


def reset_hwm():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def child(corpus, vocab_size, substrate, workers):
    sys.path.insert(0, ROOT)
    import ube_stream
    from ube_stream.training import trainer

    phases = []
    state = {"t": time.perf_counter(), "name": "read+pretokenize+count"}
    can_reset = reset_hwm()

    def boundary(next_name):
        now = time.perf_counter()
        st = status_kib()
        phases.append({"phase": state["name"], "seconds": now - state["t"], "rss_mib": st["VmRSS"] / 1024,
                       "peak_mib": st["VmHWM"] / 1024})
        reset_hwm()
        state.update(t=time.perf_counter(), name=next_name)

    def wrap(obj, attr, name, after):
        original = getattr(obj, attr)

        def wrapped(*args, **kwargs):
            boundary(name)
            result = original(*args, **kwargs)
            boundary(after)
            return result
        setattr(obj, attr, wrapped)

    wrap(trainer, "_reduce_tables", "reduce tables", "between")
    wrap(trainer._route, "route_batch", "route", "between")
    wrap(trainer._merge, "prepare_merges", "merge build", "between")
    wrap(trainer._merge, "run_merges", "merge loop", "between")
    wrap(trainer, "Tokenizer", "Tokenizer()", "rest")
    summary = trainer.TrainSummary()
    started = time.perf_counter()
    ube_stream.train([corpus], vocab_size=vocab_size, substrate=substrate, workers=workers,
                     show_progress=False, summary=summary)
    boundary("end")
    wall = time.perf_counter() - started
    kernel = sum(p["seconds"] for p in phases if p["phase"] in ("merge build", "merge loop"))
    print(json.dumps({"wall": wall, "merges": summary.merges, "kernel_s": kernel,
                      "us_per_merge": kernel / max(summary.merges, 1) * 1e6,
                      "unique_chunks": summary.unique_chunks, "hwm_reset": can_reset,
                      "peak_mib": max(p["peak_mib"] for p in phases), "phases": phases}))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="?", default=os.path.join(HERE, "data", "mixed.jsonl"))
    parser.add_argument("--mb", type=float, default=None, help="first MB of the corpus (default: all of it)")
    parser.add_argument("--vocab-size", type=int, nargs="+", default=[32000])
    parser.add_argument("--substrate", nargs="+", default=["ube"])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.corpus, int(args.child[0]), args.child[1], int(args.child[2]))
    corpus = args.corpus
    if args.mb is not None:
        sys.path.insert(0, HERE)
        from side_by_side_train import slice_corpus

        corpus = os.path.join(HERE, "data", f"train-{args.mb:g}mb.jsonl")
        size = slice_corpus(args.corpus, args.mb, corpus)
        print(f"corpus: {corpus}: {size / 1e6:.1f} MB of text")
    runs = {}
    for _ in range(args.repeat):
        for substrate in args.substrate:
            for vocab_size in args.vocab_size:
                out = subprocess.run([sys.executable, __file__, corpus, "--child", str(vocab_size), substrate,
                                      str(args.workers)], capture_output=True, text=True)
                if out.returncode:
                    sys.exit(out.stderr[-3000:])
                result = json.loads(out.stdout.strip().splitlines()[-1])
                runs.setdefault((substrate, vocab_size), []).append(result)
                phases = "; ".join(f"{p['phase']} {p['seconds']:.2f} s peak {p['peak_mib']:.0f}" for p in result["phases"]
                                   if p["seconds"] > 0.005 or p["phase"] != "between")
                print(f"{substrate} {vocab_size}: wall {result['wall']:.1f} s, {result['merges']} merges, kernel "
                      f"{result['kernel_s']:.2f} s ({result['us_per_merge']:.1f} us/merge), peak "
                      f"{result['peak_mib']:.0f} MiB | {phases}", flush=True)
    print(f"\n{'substrate':<10}{'vocab':>8}{'merges':>9}{'wall s':>8}{'kernel s':>10}{'us/merge':>10}{'peak MiB':>10}")
    rows = []
    for (substrate, vocab_size), rs in runs.items():
        med = {k: statistics.median(r[k] for r in rs) for k in ("wall", "kernel_s", "us_per_merge", "peak_mib", "merges")}
        print(f"{substrate:<10}{vocab_size:>8}{med['merges']:>9.0f}{med['wall']:>8.1f}{med['kernel_s']:>10.2f}"
              f"{med['us_per_merge']:>10.1f}{med['peak_mib']:>10.0f}")
        rows.append([substrate, vocab_size, med["merges"], med["wall"], med["kernel_s"], med["us_per_merge"],
                     med["peak_mib"]])
    sys.path.insert(0, HERE)
    write_record("train_phases", title="ube train by phase: wall, merge kernel, us per merge, peak memory",
                 columns=["substrate", "vocab", "merges", "wall (s)", "kernel (s)", "us/merge", "peak (MiB)"],
                 rows=rows, notes=[f"corpus {corpus}; {args.workers} workers; medians of {args.repeat} runs, each a "
                                   "fresh process; the phases of every run are in the record's data"],
                 data={f"{s} {v}": rs for (s, v), rs in runs.items()}, argv=argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
