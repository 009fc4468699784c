"""The one way a benchmark script leaves its result: a JSON record in
``benchmarks/records/<script>.json`` that ``benchmarks/render_results.py``
turns into ``benchmarks/RESULTS.md``.

A record holds what a reader needs to trust and repeat the figures: the
command, the UTC date, the commit, the load average during the run, the
machine (cores, Python, platform), the table (``columns`` + ``rows``) and
notes.  ``--no-record`` (``UBE_BENCH_NO_RECORD=1``) leaves nothing."""
import datetime
import json
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDS = os.path.join(HERE, "records")


def _commit():
    try:
        out = subprocess.run(["git", "-C", HERE, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", HERE, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def write_record(script, *, title, columns, rows, notes=(), argv=None, results_dir=None):
    """Write ``records/<script>.json`` (``script``: the file name without ``.py``);
    returns its path, or ``None`` when recording is off."""
    if os.environ.get("UBE_BENCH_NO_RECORD"):
        return None
    argv = sys.argv[1:] if argv is None else list(argv)
    record = {
        "script": script,
        "title": title,
        "command": " ".join(["python", f"benchmarks/{script}.py", *argv]),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": _commit(),
        "load": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "columns": list(columns),
        "rows": [list(r) for r in rows],
        "notes": list(notes),
    }
    folder = results_dir or RECORDS
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{script}.json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f, ensure_ascii=False, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    print(f"recorded {os.path.relpath(path)} (python benchmarks/render_results.py writes RESULTS.md)",
          file=sys.stderr)
    return path
