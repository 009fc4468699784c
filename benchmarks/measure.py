"""What the end-to-end benchmarks (`scale.py`, `side_by_side_e2e.py`) share:
run a command as a fresh process and measure it and every process it starts,
cut corpus prefixes.  Results
leave through `_record.write_record` (benchmarks/records/), like every
benchmark's.

`run_measured(cmd, cores=...)` runs the command on the given cores only
(`os.sched_setaffinity` in the child before exec: the whole process tree
inherits the mask); `pinned_cores(workers, pin)` gives W workers the first W
cores of this process's mask, so that a run with W workers is measured on W
cores (`--pin` of the scaling scripts), and `cores_label` is how a record
shows the mask.

`run_measured` polls the process tree under `/proc` (Linux) every
`interval` seconds: per process its peak RSS (`VmHWM`, the kernel's own high
-water mark, so a peak between two polls is not missed), CPU seconds and the
bytes it moved through read/write calls (`/proc/PID/io` `rchar`/`wchar`: files,
pipes and sockets alike) and to or from the disk (`read_bytes`/`write_bytes`).
The values of a process are the largest of its polls (a process that lives
under one interval is seen only through the totals).  Linux adds a reaped
child's I/O counters to its parent's, so the main process's `rchar`/`wchar`
include those of the workers it has waited for: its own are the difference.  Wall and CPU totals are
exact: `wait4` rusage of the whole tree.
"""
import json
import os
import resource
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CLOCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("ascii", "replace")
    except OSError:
        return None


def _children_of():
    """{ppid: [pid, ...]} of every process now alive."""
    tree = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        stat = _read(f"/proc/{name}/stat")
        if stat is None:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        tree.setdefault(int(fields[1]), []).append(int(name))
    return tree


def _sample(pid):
    stat, status, io = _read(f"/proc/{pid}/stat"), _read(f"/proc/{pid}/status"), _read(f"/proc/{pid}/io")
    if stat is None or status is None:
        return None
    name = stat[stat.find("(") + 1: stat.rfind(")")]
    fields = stat[stat.rfind(")") + 2:].split()
    out = {"name": name, "cpu_s": (int(fields[11]) + int(fields[12])) / CLOCK}
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            out["peak_rss_mb"] = int(line.split()[1]) / 1024
    for line in (io or "").splitlines():
        key, _, value = line.partition(":")
        if key in ("rchar", "wchar", "read_bytes", "write_bytes"):
            out[key] = int(value)
    return out


def pinned_cores(workers, pin):
    """The cores a run with `workers` workers may use: with `pin`, the first
    `workers` cores of this process's CPU affinity (W workers on W cores, the
    per-core form of a scaling target); without, None (every core this process
    has).  SystemExit when the mask holds fewer than `workers` cores."""
    if not pin:
        return None
    mine = sorted(os.sched_getaffinity(0))
    if workers > len(mine):
        raise SystemExit(f"--pin: {workers} workers need {workers} cores, this process may use {len(mine)} "
                         f"({cores_label(mine)}): lower --workers or run on a larger machine")
    return mine[:workers]


def cores_label(cores):
    """How a record shows an affinity: "0", "0-3", "0,2", or "all N" (None: unpinned, N usable cores)."""
    if cores is None:
        return f"all {len(os.sched_getaffinity(0))}"
    cores = sorted(cores)
    if cores == list(range(cores[0], cores[-1] + 1)):
        return str(cores[0]) if len(cores) == 1 else f"{cores[0]}-{cores[-1]}"
    return ",".join(map(str, cores))


def pin_to(cores):
    """A `preexec_fn` that restricts the child, before it execs, to `cores`
    (None: nothing); every process and thread it starts inherits the mask."""
    if cores is None:
        return None
    return lambda: os.sched_setaffinity(0, cores)


def run_measured(cmd, *, env=None, cwd=None, interval=0.1, cores=None):
    """Run `cmd` (on `cores` only, when given: see `pinned_cores`); returns {wall_s, cpu_s, max_rss_mb,
    processes: [...], main_cpu_timeline, returncode, output_tail}.

    `processes` lists the command's process (role "main") and every descendant
    seen (role "child"), with the values of their last poll."""
    seen = {}
    timeline = []   # (seconds since start, main process CPU seconds) at every poll
    done = threading.Event()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=pin_to(cores))

    def poll():
        while not done.is_set():
            tree = _children_of()
            stack, pids = [proc.pid], []
            while stack:
                pid = stack.pop()
                pids.append(pid)
                stack.extend(tree.get(pid, ()))
            for pid in pids:
                sample = _sample(pid)
                if sample is None:
                    continue
                sample["role"] = "main" if pid == proc.pid else "child"
                if pid == proc.pid:
                    timeline.append((round(time.perf_counter() - t0, 3), sample["cpu_s"]))
                known = seen.setdefault(pid, sample)
                for key, value in sample.items():   # counters only grow; a zombie's status has no VmHWM
                    if isinstance(value, (int, float)):
                        known[key] = max(known.get(key, 0), value)
            done.wait(interval)

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    output, _ = proc.communicate()
    wall = time.perf_counter() - t0
    done.set()
    watcher.join()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "returncode": proc.returncode,
        "wall_s": round(wall, 4),
        "cpu_s": round(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, 4),
        "max_rss_mb": round(r1.ru_maxrss / 1024, 1),   # the largest process of all runs so far (Linux: KiB)
        "processes": [dict(pid=pid, **s) for pid, s in sorted(seen.items())],
        "main_cpu_timeline": timeline,
        "output_tail": output.decode("utf-8", "replace")[-4000:],
    }


def check(result, what):
    if result["returncode"] != 0:
        raise SystemExit(f"{what} failed (exit {result['returncode']}):\n{result['output_tail']}")
    return result


def ube_env():
    """Environment in which `python -m ube_stream` imports this checkout's package."""
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def compile_package():
    """Byte-compile this checkout's ``ube_stream`` (``__pycache__``), as ``pip install`` does, so that a
    measured ``python -m ube_stream`` imports it as an installed package does: without it, and with
    ``PYTHONDONTWRITEBYTECODE`` set, every fresh process compiled ~50 modules (~0.1 CPU s) that the
    peers, installed with their bytecode, never pay."""
    import compileall

    compileall.compile_dir(os.path.join(REPO, "ube_stream"), quiet=1)


def ube_cmd(*args):
    return [sys.executable, "-m", "ube_stream", *args]


def cut_prefix(corpus, size, work_dir):
    """The first documents of a JSON Lines `corpus` holding at least `size`
    bytes of UTF-8 text (field `text`), written once to `work_dir` and reused;
    returns (path, text bytes, documents)."""
    name = f"{os.path.splitext(os.path.basename(corpus))[0]}-{size // 10**6}MB.jsonl"
    path = os.path.join(work_dir, name)
    meta = path + ".json"
    stamp = [os.path.abspath(corpus), os.path.getsize(corpus), os.path.getmtime(corpus), size]
    if os.path.exists(path) and os.path.exists(meta):
        with open(meta) as f:
            known = json.load(f)
        if known["source"] == stamp:
            return path, known["text_bytes"], known["documents"]
    os.makedirs(work_dir, exist_ok=True)
    text_bytes = documents = 0
    with open(corpus, "rb") as src, open(path + ".part", "wb") as dst:
        for line in src:
            if text_bytes >= size:
                break
            text_bytes += len(json.loads(line)["text"].encode("utf-8"))
            documents += 1
            dst.write(line)
    if text_bytes < size:
        raise SystemExit(f"{corpus} holds {text_bytes / 1e6:.1f} MB of text, below the {size / 1e6:g} MB asked for: "
                         "build a larger one with benchmarks/make_large_corpus.py --size ...")
    os.replace(path + ".part", path)
    with open(meta, "w") as f:
        json.dump({"source": stamp, "text_bytes": text_bytes, "documents": documents}, f)
    return path, text_bytes, documents


def dir_bytes(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names)


def parse_sizes(text):
    """'10MB,100MB,1GB' -> [10**7, 10**8, 10**9]."""
    units = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
    sizes = []
    for part in text.split(","):
        value = part.strip().upper()
        unit = next((u for u in units if value.endswith(u)), None)
        sizes.append(int(float(value[:-2]) * units[unit]) if unit else int(float(value.rstrip("B"))))
    return sizes


def cpu_at(timeline, seconds):
    """The main process's CPU seconds at `seconds` after its start (the last poll before)."""
    before = [cpu for t, cpu in timeline if t <= seconds]
    return before[-1] if before else 0.0


def built_module(root, name, label):
    """The kernel ``ube_stream.<name>`` compiled in place in the checkout at ``root``, loaded
    under its own name (``<label>.<name>``), so that the A/B scripts hold two builds of one
    kernel side by side in one process."""
    import glob
    import importlib.util

    paths = glob.glob(os.path.join(root, "ube_stream", f"{name}*.so")) + \
        glob.glob(os.path.join(root, "ube_stream", f"{name}*.pyd"))
    if not paths:
        raise SystemExit(f"{root}: no built ube_stream/{name} module (run `python setup.py build_ext --inplace` there)")
    spec = importlib.util.spec_from_file_location(f"{label}.{name}", paths[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
