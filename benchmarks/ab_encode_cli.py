"""A/B of `ube encode` between built checkouts: 1 and 2 workers, interleaved
rounds, median wall and CPU seconds (the process and its workers), and a check
that the MANIFESTs of the first two checkouts are byte-identical.

    python benchmarks/ab_encode_cli.py CORPUS.jsonl TOKENIZER.json BEFORE AFTER [--rounds 5]

Each checkout runs its own `python -m ube_stream` (cwd = the checkout, so its
package and kernels are used)."""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from _record import write_record  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus")
    parser.add_argument("tokenizer")
    parser.add_argument("repos", nargs="+", help="built checkouts")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    with tempfile.TemporaryDirectory() as tmp:
        def run(i, workers):
            out = os.path.join(tmp, f"out-{i}-{workers}")
            shutil.rmtree(out, ignore_errors=True)
            r0, t = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            subprocess.run([sys.executable, "-m", "ube_stream", "encode", os.path.abspath(args.corpus),
                            "--tokenizer", os.path.abspath(args.tokenizer), "-o", out, "--workers", str(workers),
                            "-q"], check=True, env=env, cwd=args.repos[i])
            wall, r1 = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN)
            return wall, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime

        for i in range(len(args.repos)):   # .pyc files written once, as an install would
            run(i, 1)
        times = {}
        for _ in range(args.rounds):
            for i in range(len(args.repos)):
                for workers in (1, 2):
                    times.setdefault((i, workers), []).append(run(i, workers))
        print(f"load average: {os.getloadavg()}\n\n| checkout | workers | wall s | CPU s |\n|---|---:|---:|---:|")
        for (i, workers), v in times.items():
            print(f"| {args.repos[i]} | {workers} | {statistics.median(w for w, _ in v):.3f} | "
                  f"{statistics.median(c for _, c in v):.3f} |")
        notes = [f"corpus {args.corpus}, tokenizer {args.tokenizer}; medians of {args.rounds} interleaved rounds"]
        if len(args.repos) >= 2:
            for workers in (1, 2):
                a, b = (open(os.path.join(tmp, f"out-{i}-{workers}", "MANIFEST.json"), "rb").read() for i in (0, 1))
                print(f"MANIFEST of {workers} worker(s) identical: {a == b}")
                notes.append(f"MANIFEST of {workers} worker(s) identical in the first two checkouts: {a == b}")
    write_record("ab_encode_cli", title="A/B of ube encode between built checkouts",
                 columns=["checkout", "workers", "wall (s)", "CPU (s)"],
                 rows=[[args.repos[i], workers, statistics.median(w for w, _ in v), statistics.median(c for _, c in v)]
                       for (i, workers), v in times.items()], notes=notes, argv=argv)


if __name__ == "__main__":
    main()
