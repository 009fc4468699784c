"""The per-format tally of the random-mutation fault suite (for the issue's closing note).

Runs tests/faults/mutate_inputs.py (each format in its own child process, so a
crash is counted, not fatal) and prints one row per format: the mutants tried
and how each read ended, under ``on_error="raise"`` and ``on_error="skip"``:
an InputError, counted skips (nulls are always counted, in both modes),
clean (the mutation was harmless: every row read back as written), other
text (no error and nothing counted, but rows differ from what was written:
damage that still decodes, possible where the format has no checksum), a
crash of the child process or an exception other than InputError (must be
0), and faults of the accounting or the messages (must be 0).

    python tests/faults/tally.py [CASES] [SEED]      # default 300 cases, seed 1
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHILD = os.path.join(ROOT, "tests", "faults", "mutate_inputs.py")
FORMATS = ("arrow", "arrows", "feather", "parquet", "jsonl.zst", "jsonl.gz")
NAMES = {"arrow": "Arrow IPC file", "arrows": "Arrow IPC stream", "feather": "Feather", "parquet": "Parquet",
         "jsonl.zst": "JSONL.zst", "jsonl.gz": "JSONL.gz"}


def run(fmt: str, cases: int, seed: int) -> dict:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory(prefix="ube-tally-") as work:
        proc = subprocess.run([sys.executable, CHILD, fmt, str(cases), str(seed), work], capture_output=True,
                              text=True, env=env, cwd=ROOT, timeout=1800, check=False)
    if proc.returncode != 0:
        return {"crashed": f"rc {proc.returncode}: {proc.stderr[-500:]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def row(fmt: str, cases: int, result: dict) -> list:
    if "crashed" in result:
        return [NAMES[fmt], cases, *["-"] * 8, f"1 ({result['crashed'][:60]})", "-"]
    t = result["tally"]

    def n(mode: str, prefix: str) -> int:
        return sum(v for k, v in t.items() if k.startswith(f"{mode}/{prefix}"))

    other = n("skip", "OTHER") + n("raise", "OTHER")
    return [NAMES[fmt], cases, n("raise", "input_error"), n("raise", "ok_skipped"), n("raise", "ok_clean"),
            n("raise", "ok_changed"), n("skip", "input_error"), n("skip", "ok_skipped"), n("skip", "ok_clean"),
            n("skip", "ok_changed"), other, result["n_bad"]]


def main() -> int:
    cases = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    head = ["format", "cases", "raise: InputError", "raise: nulls counted", "raise: clean", "raise: other text",
            "skip: InputError", "skip: counted skips", "skip: clean", "skip: other text", "crashes",
            "accounting/message faults"]
    rows = [row(fmt, cases, run(fmt, cases, seed)) for fmt in FORMATS]
    totals = ["all", *[sum(r[i] for r in rows if isinstance(r[i], int)) for i in range(1, len(head))]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in [*rows, totals]]
    print(f"random byte mutations, seed {seed} (1-16 bytes changed, 10% also truncated):")
    print("\n".join(lines))
    bad = sum(r[10] if isinstance(r[10], int) else 1 for r in rows) + sum(r[11] if isinstance(r[11], int) else 0
                                                                            for r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
