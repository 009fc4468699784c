"""CPU of `ube verify --shards` against the `ube encode` that wrote the shards (issue 24).

    python benchmarks/verify_vs_encode.py [--corpus FILE.jsonl] [--docs 200000] [--tokenizer T]
                                          [--workers 1] [--repeats 1]

Each command runs as users run it: a fresh ``python -m ube_stream`` process
(workers included), timed by the CPU seconds it and its children used
(``resource.getrusage(RUSAGE_CHILDREN)`` before and after) and by wall time.
Without ``--corpus`` a JSON Lines corpus of ``--docs`` lines of real running
text (tests/data/docs_sample.jsonl.zst, 26 languages, repeated) is written to a
temporary directory; without ``--tokenizer`` a 4k-vocabulary tokenizer is
trained on it first (not timed).  The record (``_record.py``,
``benchmarks/records/verify_vs_encode/``) holds both commands' CPU and wall
seconds per repeat and the verify / encode CPU ratio (the issue's target: at
most 1.5), with the load average at the start and end (figures on a loaded
machine are not results).
"""
import argparse
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from _record import write_record  # noqa: E402


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv):
    """(cpu seconds, wall seconds) of one fresh command; raises on failure."""
    cpu, wall = children_cpu(), time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "ube_stream", *argv], cwd=ROOT, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - wall, children_cpu() - cpu
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return cpu, wall


def write_corpus(path, docs):
    import zstandard

    with open(os.path.join(ROOT, "tests", "data", "docs_sample.jsonl.zst"), "rb") as f:
        rows = [json.loads(line) for line in
                io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(f), encoding="utf-8")]
    lines = [line for row in rows for line in row["text"].split("\n") if line.strip()]
    with open(path, "w", encoding="utf-8") as out:
        for i in range(docs):
            out.write(json.dumps({"text": lines[i % len(lines)]}, ensure_ascii=False) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", help="a JSON Lines corpus with a text field (default: written from tests/data)")
    parser.add_argument("--docs", type=int, default=200_000, help="documents of the default corpus")
    parser.add_argument("--tokenizer", help="tokenizer file (default: a 4k one trained on the corpus)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ube-bench-") as tmp:
        corpus = args.corpus or os.path.join(tmp, "corpus.jsonl")
        if not args.corpus:
            write_corpus(corpus, args.docs)
        tokenizer = args.tokenizer
        if tokenizer is None:
            tokenizer = os.path.join(tmp, "tok.json")
            timed(["train", corpus, "--vocab-size", "4000", "--workers", str(args.workers), "-q", "-o", tokenizer])
        runs = []
        for k in range(args.repeats):
            out = os.path.join(tmp, f"shards-{k}")
            encode = timed(["encode", corpus, "--tokenizer", tokenizer, "-o", out, "--workers", str(args.workers),
                            "-q"])
            verify = timed(["verify", "--shards", out, "--workers", str(args.workers), "-q"])
            with open(os.path.join(out, "MANIFEST.json"), encoding="utf-8") as f:
                totals = json.load(f)["totals"]
            runs.append({"encode_cpu_s": round(encode[0], 3), "encode_wall_s": round(encode[1], 3),
                         "verify_cpu_s": round(verify[0], 3), "verify_wall_s": round(verify[1], 3),
                         "verify_over_encode_cpu": round(verify[0] / encode[0], 3) if encode[0] else None})
        corpus_bytes = os.path.getsize(corpus)
    ratios = sorted(r["verify_over_encode_cpu"] for r in runs if r["verify_over_encode_cpu"] is not None)
    median = ratios[len(ratios) // 2] if ratios else None
    write_record("verify_vs_encode", title="ube verify --shards vs the ube encode that wrote the shards (CPU seconds)",
                 columns=["repeat", "encode CPU (s)", "encode wall (s)", "verify CPU (s)", "verify wall (s)",
                          "verify / encode CPU (x)"],
                 rows=[[k, r["encode_cpu_s"], r["encode_wall_s"], r["verify_cpu_s"], r["verify_wall_s"],
                        r["verify_over_encode_cpu"]] for k, r in enumerate(runs)],
                 headline=f"verify costs {median:.2f}x encode's CPU (target <= 1.5)" if median is not None else None,
                 notes=[f"corpus: {args.corpus or f'tests/data/docs_sample.jsonl.zst lines x{args.docs}'} "
                        f"({corpus_bytes / 1e6:.1f} MB, {totals['documents']} documents, {totals['tokens']} tokens); "
                        f"tokenizer: {args.tokenizer or '4k trained on the corpus'}; {args.workers} workers"])


if __name__ == "__main__":
    main()
