"""The one way a benchmark script leaves its result: a dated JSON record in
``benchmarks/records/<script>/<UTC time>.json`` that
``benchmarks/render_results.py`` turns into ``benchmarks/RESULTS.md`` (and the
README's headline table).

A record describes itself: the title, the command, the kind (``real``, or
``smoke`` for a run that only proves the script works: ``UBE_BENCH_SMOKE=1``),
the UTC date, the commit, the load average when the script started and when
it wrote the record, the machine (cores, CPU model, memory, Python,
platform), the versions of the peers it compared against, the table
(``columns``, whose names carry their units, and ``rows``), notes, an optional
one-line ``headline`` (what the README's table shows) and an optional ``data``
object (the script's full detail).  ``UBE_BENCH_NO_RECORD=1`` leaves nothing.
``load_before`` is the load when the script imported this module: import it
at the top of the script, before its work.

    from _record import write_record, peer_versions
    write_record("my_bench", title="...", columns=["case", "MB/s"], rows=[["a", 12.5]],
                 peers=peer_versions("tiktoken"), headline="1.4x tiktoken")
"""
import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RECORDS = os.path.join(HERE, "records")


def load_average():
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


LOAD_BEFORE = load_average()   # the load when the script imported this module: before its work


def git_commit():
    """The short commit of this checkout, ``+dirty`` when tracked files differ; ``None`` outside git."""
    try:
        out = subprocess.run(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _proc_field(path, prefix):
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def machine_info():
    memory = _proc_field("/proc/meminfo", "MemTotal:")
    return {"cpus": os.cpu_count(), "cpu": _proc_field("/proc/cpuinfo", "model name") or platform.processor(),
            "memory_gib": round(int(memory.split()[0]) / 1024 / 1024, 1) if memory else None,
            "python": platform.python_version(), "platform": platform.platform()}


def peer_versions(*names, python=None):
    """{distribution: installed version or None}, in this Python or in the one at ``python``
    (a peer's own virtual environment); ube-stream's own is the record's ``commit``."""
    if python is not None:
        code = ("import importlib.metadata as m, sys\nfor n in sys.argv[1:]:\n"
                " try: print(m.version(n))\n except m.PackageNotFoundError: print('')")
        try:
            out = subprocess.run([python, "-c", code, *names], capture_output=True, text=True, timeout=60)
            found = out.stdout.splitlines() if out.returncode == 0 else []
        except (OSError, subprocess.SubprocessError):
            found = []
        found += [""] * (len(names) - len(found))
        return {name: version or None for name, version in zip(names, found)}
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def _plain(value):
    """numpy scalars (and anything else JSON lacks) as plain values."""
    return value.item() if hasattr(value, "item") else str(value)


def is_smoke():
    return os.environ.get("UBE_BENCH_SMOKE", "") not in ("", "0")


def write_record(script, *, title, columns, rows, notes=(), headline=None, peers=None, data=None, argv=None,
                 records_dir=None):
    """Write ``records/<script>/<UTC time>.json`` (``script``: the file name without ``.py``);
    returns its path, or ``None`` when recording is off."""
    if os.environ.get("UBE_BENCH_NO_RECORD", "") not in ("", "0"):
        return None
    argv = sys.argv[1:] if argv is None else list(argv)
    now = datetime.datetime.now(datetime.timezone.utc)
    columns = list(columns)
    rows = [list(r) for r in rows]
    for i, row in enumerate(rows):
        if len(row) != len(columns):
            raise ValueError(f"{script}: row {i} has {len(row)} cells for {len(columns)} columns {columns}: {row}")
    record = {
        "script": script,
        "title": title,
        "kind": "smoke" if is_smoke() else "real",
        "command": " ".join(["python", f"benchmarks/{script}.py", *argv]),
        "date": now.strftime("%Y-%m-%d %H:%M UTC"),
        "commit": git_commit(),
        "load_before": LOAD_BEFORE,
        "load_after": load_average(),
        "machine": machine_info(),
        "peers": dict(peers or {}),
        "headline": headline,
        "columns": columns,
        "rows": rows,
        "notes": list(notes),
        "data": data,
    }
    folder = os.path.join(records_dir or RECORDS, script)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, now.strftime("%Y%m%dT%H%M%S%fZ") + ".json")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(record, f, ensure_ascii=False, indent=1, default=_plain)
        f.write("\n")
    os.replace(tmp, path)
    print(f"recorded {os.path.relpath(path)} (python benchmarks/render_results.py writes RESULTS.md)",
          file=sys.stderr)
    return path
