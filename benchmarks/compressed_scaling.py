"""One large compressed file on 1 and 2 workers: `ube train` and `ube encode`
(fresh processes, the commands users run), wall and CPU seconds, and whether
the outputs are the same bytes for both worker counts (issue 24 item 2).

    python benchmarks/compressed_scaling.py [--mb 500] [--kinds jsonl.zst,jsonl.gz,txt.zst,jsonl.zst-frames]
        [--workers 1,2] [--rounds 1] [--pin]

    python benchmarks/compressed_scaling.py --plan [--mb 500] [--rounds 5]

    python benchmarks/compressed_scaling.py --cpu-ab [--mb 200] [--rounds 5] [--workers 1,2]

    python benchmarks/compressed_scaling.py --read-ab [--mb 200] [--rounds 5]

    python benchmarks/compressed_scaling.py --scan [--scan-file benchmarks/data/large/large.jsonl] [--rounds 5]

``--plan`` measures planning alone on a ``jsonl.zst-frames`` file (4 MB
frames): ``plan_units`` (the frame headers walked, then every frame
decompressed on up to 16 threads to count its lines), the header walk alone
(``zstd_frame_layout``), and, interleaved with them in one process, one
single-threaded decompression of the whole file and the serial frame walk planning did
before (each block through the package's decoder, newlines counted).  Record ``compressed_plan``: medians of
``--rounds`` rounds, wall and CPU seconds, and the ratio to the serial
decompression.

``--cpu-ab`` asks whether W workers do more work than one on the same file:
in this one process, interleaved, ``train()`` and ``encode_corpus()`` with 1
worker on 1 core against W workers on W cores (``os.sched_setaffinity`` of
this process before each call; the package sizes its threads by it; pools fork,
as the command line's do), CPU seconds of the process and its reaped workers.
Record ``compressed_cpu_ab``: per kind and command, the medians of
``--rounds`` rounds and the median of the per-round CPU ratios (1.0: no
extra work), and for ``train`` the CPU of summing the per-thread count tables
(``chunk_table.merge_tables`` in this process: a unit's threads' tables, and
the reduce of several units' tables when it runs here, i.e. with one worker).  CPU ratios measured side by side in one
process survive a loaded machine far better than fresh-process wall times.

The file is built from real text: the running text of ``docs.jsonl.zst`` and
the short items of ``parallel.jsonl.zst`` (``/work/shared/data``, or
``--data DIR``), repeated until it holds ``--mb`` MB of JSON Lines, then
compressed as one stream (gzip, zstd) so it is one work unit: the workers a
run has beyond its units become encoder threads of that unit
(``unit_threads``); ``jsonl.zst-frames`` is zstd in independent 4 MB frames
(as ``zstd --block-size=4MB``), cut into units at frame boundaries.  The tokenizer (vocab 8000) is trained once on the
bundled sample.  Records (``_record.py``, ``benchmarks/records/compressed_scaling/``)
one row per (kind, command, workers) with the median wall and CPU seconds (the
process and its workers), the speed-up over one worker, CPU seconds per MB of
text, the bytes the whole process tree read (``/proc/self/io`` ``rchar`` of
this script around the run: Linux adds a reaped child's counters to its
parent's, so every process of the run is counted, the compressed input, the
tokenizer and Python's files alike), and ``same_output``.  The same CPU and the
same bytes per MB at every worker count mean no worker repeats another's work.

``--pin`` restricts a run with W workers to W cores (the first W of this
process's CPU affinity, set in the child before exec: its threads and worker
processes inherit it), so the speed-up is N workers on N cores over one worker
on one core, the per-core form of issue 24's target (unpinned, one worker
already keeps more than one core busy with its read-ahead and write-behind
threads).  The ``cores`` column shows the mask ("all N": unpinned).
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure  # noqa: E402
from _record import write_record  # noqa: E402


def build_corpus(data_dir: str, target_bytes: int, kind: str, path: str) -> int:
    """Write ``target_bytes`` (about) of JSON Lines or text from the real data,
    compressed as one stream; returns the uncompressed size."""
    import zstandard

    docs, items = [], []
    with open(os.path.join(data_dir, "docs.jsonl.zst"), "rb") as f:
        for line in zstandard.ZstdDecompressor().stream_reader(f).read().splitlines():
            docs.append(json.loads(line)["text"])
    with open(os.path.join(data_dir, "parallel.jsonl.zst"), "rb") as f:
        reader = zstandard.ZstdDecompressor().stream_reader(f)
        for k, line in enumerate(reader.read(64 << 20).splitlines()[:-1]):
            if k % 10 == 0:
                items.append(json.loads(line)["text"])
    texts = docs + ["\n".join(items[i:i + 50]) for i in range(0, len(items), 50)]
    jsonl = kind.startswith("jsonl")
    written = 0
    sink = (gzip.open(path, "wb", compresslevel=6) if kind.endswith(".gz")
            else _Frames(path, 4_000_000) if kind.endswith("-frames")
            else zstandard.ZstdCompressor(level=3).stream_writer(open(path, "wb")))
    with sink:
        rep = 0
        while written < target_bytes:
            for text in texts:
                if not jsonl:
                    text = text.replace("\n", " ")
                line = (json.dumps({"text": text, "rep": rep}, ensure_ascii=False) if jsonl else text) + "\n"
                data = line.encode()
                sink.write(data)
                written += len(data)
                if written >= target_bytes:
                    break
            rep += 1
    return written


class _Frames:
    """A writer of independent zstd frames of ``frame_bytes`` input bytes each."""

    def __init__(self, path: str, frame_bytes: int):
        import zstandard

        self.file, self.frame_bytes, self.buffer = open(path, "wb"), frame_bytes, bytearray()
        self.cctx = zstandard.ZstdCompressor(level=3)

    def write(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= self.frame_bytes:
            self.file.write(self.cctx.compress(bytes(self.buffer[:self.frame_bytes])))
            del self.buffer[:self.frame_bytes]

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        if self.buffer:
            self.file.write(self.cctx.compress(bytes(self.buffer)))
        self.file.close()


def tree_read_bytes() -> int:
    """``rchar`` of this process, its reaped children's included (Linux); 0 where there is no /proc."""
    try:
        with open("/proc/self/io") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))
    except (OSError, StopIteration):
        return 0


def run(cmd: list[str], env: dict, cores=None) -> tuple[float, float, int]:
    """Wall s, CPU s and bytes read of ``python -m ube_stream cmd`` (on ``cores`` only, when given)."""
    io0, r0, t = tree_read_bytes(), resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([sys.executable, "-m", "ube_stream", *cmd], check=True, env=env, cwd=ROOT,
                   preexec_fn=measure.pin_to(cores))
    wall, r1 = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, tree_read_bytes() - io0


def digest_tree(directory: str) -> str:
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(directory)):
        dirs.sort()
        for name in sorted(files):
            if name in ("MANIFEST.json",):   # holds wall times
                continue
            path = os.path.join(root, name)
            h.update(os.path.relpath(path, directory).encode())
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def plan_times(args, argv) -> None:
    """``--plan``: the plan of one multi-frame zstd file, against a serial decompression of it."""
    import zstandard

    sys.path.insert(0, ROOT)   # this checkout's package, as the commands' subprocesses run it
    from ube_stream import readers
    from ube_stream.readers.compression import zstd_frame_layout

    def serial(path):
        with open(path, "rb") as f:
            reader = zstandard.ZstdDecompressor().stream_reader(f)
            while reader.read(1 << 20):
                pass

    def before(path):   # the counting loop planning ran before: every block through the decoder, serially
        from ube_stream.readers.compression import _ZstdRaw

        newlines = 0
        with _ZstdRaw(path) as raw:
            while not raw._eof:
                piece = raw._step()
                newlines += piece.count(b"\n")
        return newlines

    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.jsonl.zst")
        size = build_corpus(args.data, int(args.mb * 1e6), "jsonl.zst-frames", corpus)
        (source,) = readers.resolve_inputs([corpus])
        cases = {"plan_units (headers, then frames decompressed on threads)":
                 lambda: readers.plan_units([source]),
                 "zstd_frame_layout (headers only)": lambda: zstd_frame_layout(corpus),
                 "the plan's serial frame walk before this change": lambda: before(corpus),
                 "serial decompression (zstandard stream_reader)": lambda: serial(corpus)}
        times: dict = {name: [] for name in cases}
        units = len(readers.plan_units([source]))
        frames = len(zstd_frame_layout(corpus) or [])
        packed = os.path.getsize(corpus)
        for _ in range(args.rounds):   # interleaved: each round runs every case once
            for name, fn in cases.items():
                r0, t = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
                fn()
                wall, r1 = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF)
                times[name].append((wall, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime))
    base = statistics.median(w for w, _ in times["serial decompression (zstandard stream_reader)"])
    walk = statistics.median(w for w, _ in times["the plan's serial frame walk before this change"])
    rows = []
    for name, runs in times.items():
        wall = statistics.median(w for w, _ in runs)
        rows.append([name, round(wall, 3), round(statistics.median(c for _, c in runs), 3), round(wall / base, 3),
                     round(wall / walk, 3)])
        print(json.dumps(rows[-1]), flush=True)
    write_record("compressed_plan", title="Planning one multi-frame .jsonl.zst: frame headers, then lines counted",
                 columns=["case", "wall (s)", "CPU (s)", "wall / serial decompression (x)",
                          "wall / the walk before (x)"], rows=rows,
                 headline=f"plan of {args.mb:g} MB in {frames} frames: {rows[0][1]} s wall "
                          f"({rows[0][4]}x the serial walk before), headers alone {rows[1][1]} s",
                 notes=[f"{size / 1e6:,.0f} MB of real JSON Lines in {frames} zstd frames of 4 MB "
                        f"({packed / 1e6:,.0f} MB compressed), {units} units; "
                        f"{os.cpu_count()} cores; medians of {args.rounds} interleaved rounds; the file is in the "
                        f"page cache after the first round"], argv=argv)


def cpu_ab(args, argv) -> None:
    """``--cpu-ab``: 1 worker on 1 core against W workers on W cores, in this process, interleaved."""
    sys.path.insert(0, ROOT)   # this checkout's package
    from ube_stream import sample_paths
    from ube_stream.executors import start_method
    from ube_stream.shards import encode_corpus
    from ube_stream.training import chunk_table
    from ube_stream.training.trainer import train

    merged: list = []
    merge_tables = chunk_table.merge_tables

    def timed_merge(parts):   # count_unit imports it at each call: the wrapper is what it finds
        t = time.process_time()
        try:
            return merge_tables(parts)
        finally:
            merged.append(time.process_time() - t)

    def cpu_now():
        own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime

    workers_list = [int(w) for w in args.workers.split(",")]
    mine = sorted(os.sched_getaffinity(0))
    configs = [(w, measure.pinned_cores(w, True)) for w in workers_list]
    rows = []
    chunk_table.merge_tables = timed_merge
    try:
        with tempfile.TemporaryDirectory() as tmp, start_method("fork"):
            tok = os.path.join(tmp, "tok.json")
            train([sample_paths()["train"]], vocab_size=args.vocab_size, workers=1, show_progress=False).save(tok)
            for kind in args.kinds.split(","):
                corpus = os.path.join(tmp, f"corpus.{kind}")
                size = build_corpus(args.data, int(args.mb * 1e6), kind, corpus)
                for command in args.commands.split(","):
                    runs: dict = {w: [] for w in workers_list}
                    for _ in range(args.rounds):
                        for workers, cores in configs:
                            out = os.path.join(tmp, f"{command}-{workers}")
                            shutil.rmtree(out, ignore_errors=True)
                            merged.clear()
                            os.sched_setaffinity(0, cores)
                            try:
                                c0, t0 = cpu_now(), time.perf_counter()
                                if command == "encode":
                                    encode_corpus([corpus], tokenizer=tok, output=out, workers=workers,
                                                  show_progress=False)
                                else:
                                    train([corpus], vocab_size=args.vocab_size, workers=workers, show_progress=False,
                                          work_dir=out)
                                wall, cpu = time.perf_counter() - t0, cpu_now() - c0
                            finally:
                                os.sched_setaffinity(0, mine)
                            runs[workers].append((cpu, wall, sum(merged)))
                    one = runs[workers_list[0]]
                    for workers, cores in configs:
                        these = runs[workers]
                        ratios = [b[0] / a[0] for a, b in zip(one, these)]
                        rows.append([kind, command, workers, measure.cores_label(cores),
                                     round(statistics.median(r[0] for r in these) / (size / 1e6), 4),
                                     round(statistics.median(r[0] for r in these), 3),
                                     round(statistics.median(ratios), 3),
                                     round(min(ratios), 3), round(max(ratios), 3),
                                     round(statistics.median(r[2] for r in these), 3) if command == "train" else None,
                                     round(statistics.median(a[1] / b[1] for a, b in zip(one, these)), 3)])
                        print(json.dumps(rows[-1]), flush=True)
    finally:
        chunk_table.merge_tables = merge_tables
    most = max(workers_list)
    write_record("compressed_cpu_ab", title="One compressed file: the CPU of W workers on W cores against 1 on 1, "
                                            "in one process",
                 columns=["kind", "command", "workers", "cores", "CPU s per MB", "CPU (s)", "CPU / 1 worker's (x)",
                          "lowest round (x)", "highest round (x)", "summing count tables in this process (CPU s)",
                          "wall speed-up over 1 worker (x)"], rows=rows,
                 headline=f"CPU at {most} workers on {most} cores / 1 on 1: " + ", ".join(
                     f"{r[1]} {r[0]} {r[6]}x" for r in rows if r[2] == most and most > 1),
                 notes=[f"{args.mb:g} MB of real text per file; medians of {args.rounds} interleaved rounds in one "
                        f"process (pools fork); CPU = this process and its reaped workers; 1.0x = no work repeated; "
                        f"the wall speed-up is the load's as much as the code's; tokenizer vocab {args.vocab_size} "
                        f"trained on the bundled sample"],
                 data={"pinned": True}, argv=argv)


def read_ab(args, argv) -> None:
    """The gzip readers side by side, interleaved in this process: Python's
    ``gzip.GzipFile`` (the reader before 2026-12-04) and the package's
    ``_GzipRaw`` with zlib and with zlib-ng, each drained with ``read1`` of
    1 MiB as ``line_blocks`` does; CPU seconds, MB/s per CPU second and the
    number of pieces handed out (each a batch for the encoder threads)."""
    sys.path.insert(0, ROOT)
    from ube_stream.readers import compression

    def drain(stream) -> tuple[int, int]:
        size = pieces = 0
        with stream:
            for block in iter(lambda: stream.read1(compression.BLOCK_BYTES), b""):
                size += len(block)
                pieces += 1
        return size, pieces

    def package(module):
        def read(path):
            raw = compression._GzipRaw(path)
            raw._zlib = module
            return drain(io.BufferedReader(raw, compression.BLOCK_BYTES))
        return read

    readers = {"gzip.GzipFile": lambda path: drain(gzip.open(path, "rb")), "_GzipRaw zlib": package(zlib)}
    try:
        from zlib_ng import zlib_ng
        readers["_GzipRaw zlib-ng"] = package(zlib_ng)
    except ImportError:
        print("zlib-ng is not installed (the fastgzip extra): its row is left out", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "corpus.jsonl.gz")
        size = build_corpus(args.data, int(args.mb * 1e6), "jsonl.gz", path)
        cpu: dict = {name: [] for name in readers}
        pieces: dict = {}
        for _ in range(args.rounds):
            for name, read in readers.items():
                t = time.process_time()
                got, pieces[name] = read(path)
                cpu[name].append(time.process_time() - t)
                assert got == size, (name, got, size)
        rows = []
        base = statistics.median(cpu["gzip.GzipFile"])
        for name in readers:
            median = statistics.median(cpu[name])
            rows.append([name, round(median, 3), round(size / 1e6 / median, 1), pieces[name], round(base / median, 2)])
            print(json.dumps(dict(zip(("reader", "cpu_s", "mb_per_cpu_s", "pieces", "speedup"), rows[-1]))), flush=True)
    write_record("compressed_read_ab", title="Reading one .jsonl.gz: gzip.GzipFile against the package's gzip decoder",
                 columns=["reader", "CPU (s)", "MB/s per CPU second", "pieces handed out", "speed-up over GzipFile (x)"],
                 rows=rows, headline=", ".join(f"{r[0]} {r[2]} MB/s in {r[3]} pieces" for r in rows),
                 notes=[f"{size / 1e6:.0f} MB of JSON Lines (real text, gzip level 6); medians of {args.rounds} "
                        f"interleaved rounds in one process; read1 of 1 MiB until the end"],
                 argv=argv)


_SCAN_CASES = {
    "scan_line_starts (one buffer and mask)":
        "from ube_stream.readers.compression import scan_line_starts\n"
        "def scan(path):\n    scan_line_starts(path, 10_000, 64 << 20)\n",
    "fresh block and mask per read (before)":
        "import numpy as np\n"   # as the code before: the last block and mask live on while the next are made
        "def scan(path):\n    with open(path, 'rb') as f:\n"
        "        while True:\n            block = f.read(1 << 20)\n            if not block:\n                break\n"
        "            newline = np.frombuffer(block, dtype=np.uint8) == 10\n"
        "            count = int(np.count_nonzero(newline))\n",
}


def scan_times(args, argv) -> None:
    """``--scan``: the driver's plan of an uncompressed JSON Lines file
    (``scan_line_starts``, every byte read to find the row starts), against
    the same scan with a fresh block and mask per 1 MiB read (the code before
    2026-12-04, where the last block and mask were still alive while the
    next were made); each in a fresh process, as the driver of a run meets
    it, CPU seconds of the scan alone per GB."""
    path = args.scan_file
    size = os.path.getsize(path)
    cpu: dict = {name: [] for name in _SCAN_CASES}
    for _ in range(args.rounds + 1):   # the first round puts the file in the page cache; dropped
        for name, code in _SCAN_CASES.items():
            code += ("import sys, time\nt = time.process_time()\nscan(sys.argv[1])\n"
                     "print(time.process_time() - t)\n")
            out = subprocess.run([sys.executable, "-c", code, path], check=True, capture_output=True, text=True,
                                 cwd=ROOT).stdout
            cpu[name].append(float(out))
    rows = []
    for name, runs in cpu.items():
        median = statistics.median(runs[1:])
        rows.append([name, round(median, 3), round(median / (size / 1e9), 3), round(size / 1e9 / median, 2)])
        print(json.dumps(rows[-1]), flush=True)
    write_record("plan_scan", title="Planning an uncompressed JSON Lines file: the driver's line scan",
                 columns=["case", "CPU (s)", "CPU s per GB", "GB per CPU second"], rows=rows,
                 headline=f"{rows[0][3]} GB per CPU second ({rows[1][3]} before)",
                 notes=[f"{os.path.basename(path)}: {size / 1e9:.2f} GB, in the page cache; each case in a fresh "
                        f"process, CPU of the scan alone; medians of {args.rounds} interleaved rounds"], argv=argv)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=500)
    parser.add_argument("--kinds", default="jsonl.zst,jsonl.gz,txt.zst,jsonl.zst-frames")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--commands", default="encode,train", help="which commands to time (default: both)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--data", default="/work/shared/data")
    parser.add_argument("--plan", action="store_true", help="measure the plan of a multi-frame .zst only")
    parser.add_argument("--pin", action="store_true",
                        help="run W workers on W cores (the first W of this process's CPU affinity)")
    parser.add_argument("--scan", action="store_true",
                        help="the driver's line scan of an uncompressed file (--scan-file), CPU per GB")
    parser.add_argument("--scan-file", default=os.path.join(ROOT, "benchmarks", "data", "large", "large.jsonl"),
                        help="the file --scan reads (default: make_large_corpus.py's large.jsonl)")
    parser.add_argument("--read-ab", action="store_true",
                        help="the gzip readers side by side in this process (GzipFile, ours with zlib and zlib-ng)")
    parser.add_argument("--cpu-ab", action="store_true",
                        help="the CPU of W workers on W cores against 1 on 1, in this process, interleaved")
    args = parser.parse_args(argv)
    for flag, mode in ((args.plan, plan_times), (args.cpu_ab, cpu_ab), (args.read_ab, read_ab),
                       (args.scan, scan_times)):
        if flag:
            mode(args, argv)
            return
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    workers_list = [int(w) for w in args.workers.split(",")]
    result: dict = {"mb": args.mb, "rows": []}
    sys.path.insert(0, ROOT)   # this checkout's package, as the commands' subprocesses run it
    with tempfile.TemporaryDirectory() as tmp:
        from ube_stream import sample_paths

        tok = os.path.join(tmp, "tok.json")
        run(["train", sample_paths()["train"], "--vocab-size", str(args.vocab_size), "-o", tok, "-q",
             "--workers", "1"], env)
        for kind in args.kinds.split(","):
            corpus = os.path.join(tmp, f"corpus.{kind}")
            size = build_corpus(args.data, int(args.mb * 1e6), kind, corpus)
            for command in args.commands.split(","):
                times: dict = {}
                outputs: dict = {}
                for _ in range(args.rounds):
                    for workers in workers_list:
                        out = os.path.join(tmp, f"{command}-{workers}")
                        shutil.rmtree(out, ignore_errors=True)
                        if command == "encode":
                            cmd = ["encode", corpus, "--tokenizer", tok, "-o", out, "--workers", str(workers), "-q"]
                        else:
                            os.makedirs(out)
                            cmd = ["train", corpus, "--vocab-size", str(args.vocab_size), "-o",
                                   os.path.join(out, "tok.json"), "--workers", str(workers), "-q",
                                   "--work-dir", os.path.join(tmp, f"work-{workers}")]
                        times.setdefault(workers, []).append(run(cmd, env, measure.pinned_cores(workers, args.pin)))
                        outputs[workers] = digest_tree(out)
                one = statistics.median(w for w, _, _ in times[workers_list[0]])
                for workers in workers_list:
                    wall = statistics.median(w for w, _, _ in times[workers])
                    cpu = statistics.median(c for _, c, _ in times[workers])
                    result["rows"].append({
                        "kind": kind, "command": command, "workers": workers,
                        "cores": measure.cores_label(measure.pinned_cores(workers, args.pin)),
                        "uncompressed_bytes": size, "compressed_bytes": os.path.getsize(corpus),
                        "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "speedup": round(one / wall, 3),
                        "mb_per_s": round(size / 1e6 / wall, 1), "cpu_s_per_mb": round(cpu / (size / 1e6), 4),
                        "read_mb": round(statistics.median(b for _, _, b in times[workers]) / 1e6, 1),
                        "same_output": outputs[workers] == outputs[workers_list[0]]})
                    print(json.dumps(result["rows"][-1]), flush=True)
    keys = ("kind", "command", "workers", "cores", "uncompressed_bytes", "compressed_bytes", "wall_s", "cpu_s",
            "speedup", "mb_per_s", "cpu_s_per_mb", "read_mb", "same_output")
    most = max(workers_list)
    headline = ", ".join(f"{r['command']} {r['kind']} x{r['speedup']}" + ("" if r["same_output"] else " (OUTPUT DIFFERS)")
                         for r in result["rows"] if r["workers"] == most and most > 1)
    where = f" on {most} cores (pinned)" if args.pin else ""
    write_record("compressed_scaling", title="One large compressed file on 1 and 2 workers: ube encode and ube train",
                 columns=["kind", "command", "workers", "cores", "uncompressed (bytes)", "compressed (bytes)",
                          "wall (s)", "CPU (s)", "speed-up over 1 worker (x)", "MB/s (wall)", "CPU s per MB",
                          "read by the process tree (MB)", "same output"],
                 rows=[[r[k] for k in keys] for r in result["rows"]],
                 headline=f"wall speed-up at {most} workers{where}: {headline}" if headline else None,
                 notes=[f"{args.mb:g} MB of real text per file; medians of {args.rounds} rounds; tokenizer vocab "
                        f"{args.vocab_size} trained on the bundled sample",
                        "pinned (--pin): W workers ran on W cores (the `cores` column: the CPU affinity of the whole "
                        "process tree), so the speed-up is per core" if args.pin else
                        "unpinned: every run could use every core (the `cores` column); one worker already keeps "
                        "more than one core busy, so the speed-up is not per core (--pin measures that)"],
                 data={"pinned": args.pin}, argv=argv)


if __name__ == "__main__":
    main()
