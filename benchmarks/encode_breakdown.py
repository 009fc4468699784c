"""Where `ube encode`'s CPU goes beyond the encoder kernel, and how two workers
should run (issue 24 items 3 and 5).

    python benchmarks/encode_breakdown.py [--size 100MB] [--repeat 5] [--layouts w1,p2,t2,t2n]

Two parts, on the same prefix of `benchmarks/data/large/large.jsonl` (real mixed
text, built by `make_large_corpus.py`) and the same `utf8` tokenizer:

1. **Stages**, one process, one thread, CPU seconds (`time.process_time`) of
   each step `ube encode` takes, on the same bytes:
   Python start-up, imports and the CLI parser (a fresh `python -m ube_stream encode --help`),
   loading the tokenizer (`as_tokenizer`, as the command does: the HF `tokenizer.json` the
   CLI is given, and the ube-stream file a worker loads), the driver's `tokenizer.json`
   and fingerprint of the run, the plan (sources and units), reading (the
   JSON Lines reader and its `_jsonl` kernel: batches of UTF-8 + offsets), the
   kernel alone (`Tokenizer.encode_utf8_batch` over those batches with a fresh
   chunk cache, again with the cache warm, and split over two fresh caches as two
   workers split it), the tokens checksum (sha256, the format's, against zlib's
   crc32 and xxh3 when `xxhash` is installed), and writing the token files
   with fsync; reading, the kernel, the checksums and the writes are timed in
   passes made unit by unit as one worker makes them (a unit's batches read,
   encoded, checksummed and written, then dropped: memory stays a unit's, as
   in the command).  Then the whole command, `ube encode --workers 1` in a fresh
   process (wait4 rusage), so the gap between it and the kernel is shown
   stage by stage, and the same command by part (`inside` rows): its CLI run
   in a fresh process with each part's CPU taken by the thread it runs in
   (`time.thread_time`: loading `--tokenizer`, the plan's line scan, the
   tokenizer's fingerprint and the run's `tokenizer.json`, the kernel calls, the reading thread, the writing
   thread, MANIFEST), so the parts are what the command itself spends, not
   the stages rebuilt one by one.  Each stage is the median of `--repeat` runs.
2. **Layouts** of two workers, each a fresh process, rounds interleaved, the
   load average beside each run: `w1` one worker (units in the calling
   process, reading ahead and writing behind in threads), `p2` the default
   for two workers (two forked worker processes, one unit each at a time), `t2`
   one process whose units each run two encoder threads (`OrderedMap`) with
   the read-ahead and write-behind threads, `t2n` the same without them (the
   encoder threads read, the calling thread writes).  `t2` and `t2n` swap
   `shards.encode`'s thread choice (`unit_threads`, `_overlap`) for
   the run; a layout whose hook is missing is reported, not run.  Wall ratios
   need idle cores: on a loaded machine only the CPU column and ratios of runs
   next to each other mean anything.

With `--baseline DIR` (a folder holding another copy of the `ube_stream`
package with its compiled kernels, e.g. main's copied to /tmp), every round
runs the stages and the whole command of this checkout and of that package
one after the other, each in a fresh process, in ABBA order (the side that
runs first alternates: the first run measured slower), so both meet the same
load, and the record gives both columns and their ratio.

Records `benchmarks/records/encode_breakdown/` through `_record.py`.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import measure  # noqa: E402
from _record import write_record  # noqa: E402  (load_before: at import, before the work)

sys.path.insert(0, measure.REPO)

LAYOUTS = {
    "w1": "one worker: units in the calling process, read-ahead and write-behind threads",
    "p2": "two forked worker processes (the default for --workers 2)",
    "t2": "one process, two encoder threads per unit, read-ahead and write-behind threads",
    "t2n": "one process, two encoder threads per unit (they read), writes in the calling thread",
}

# a layout run: a fresh process encoding `files`; prints its own wall/CPU (imports included in CPU)
_LAYOUT_SCRIPT = r"""
import resource, sys, time
t0 = time.perf_counter()
layout, tok, out, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
import ube_stream.shards.encode as E
from ube_stream.executors import start_method
workers = 2 if layout == "p2" else 1
if layout in ("t2", "t2n"):
    if not (hasattr(E, "unit_threads") and hasattr(E, "_overlap")):
        print("MISSING shards.encode.unit_threads/_overlap"); sys.exit(3)
    E.unit_threads = lambda *a: 2
    if layout == "t2n":
        E._overlap = lambda *a: False
with start_method("fork"):   # as the ube CLI runs
    E.encode_corpus(files, tokenizer=tok, output=out, workers=workers, show_progress=False)
s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print("RESULT", time.perf_counter() - t0, s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime)
"""


# the whole command by part: `ube encode` through the CLI's main in a fresh process, each part's
# CPU time taken by the thread it runs in (time.thread_time), so the reading and writing
# threads' work is told apart from the kernel's; prints the parts as JSON
_PARTS_SCRIPT = r"""
import gc, json, os, sys, time
gc.disable()   # as main() does in a process of its own, before numpy is imported here
parts = {}


def timed(owner, name, label):
    fn = getattr(owner, name)

    def run(*args, **kwargs):
        start = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            parts[label] = parts.get(label, 0.0) + time.thread_time() - start
    setattr(owner, name, run)


import ube_stream.cli.options as options
import ube_stream.readers.inputs as inputs
import ube_stream.shards.encode as encode
import ube_stream.shards.overlap as overlap
from ube_stream.cli import main
from ube_stream.cli.main import build_parser
from ube_stream.tokenizer import file_format
from ube_stream.tokenizer.core import Tokenizer

build_parser()
gc.freeze()
gc.enable()
owners = {"options": options, "inputs": inputs, "encode": encode, "ReadAhead": overlap.ReadAhead,
          "WriteBehind": overlap.WriteBehind, "Tokenizer": Tokenizer, "file_format": file_format}
for owner, name, label in json.loads(sys.argv[1]):
    timed(owners[owner], name, label)
code = main(sys.argv[2:])
usage = os.times()
parts["whole process"] = usage.user + usage.system
print("PARTS", json.dumps(parts))
sys.exit(code)
"""
PARTS = [   # (its module or class, as _PARTS_SCRIPT names them; function; what it is)
    ("options", "load_tokenizer", "in the command: loading --tokenizer"),
    ("inputs", "scan_line_starts", "in the command: the plan's line scan"),
    ("file_format", "fingerprint", "in the command: the tokenizer's fingerprint"),
    ("Tokenizer", "to_json", "in the command: the run's tokenizer.json"),
    ("Tokenizer", "encode_utf8_batch", "in the command: the encoder kernel (unit thread)"),
    ("ReadAhead", "_run", "in the command: the reading thread (JSON Lines -> batches)"),
    ("WriteBehind", "_run", "in the command: the writing thread (sha256, writes, index)"),
    ("encode", "_finalize", "in the command: MANIFEST and cleanup"),
]


def package_env(package_dir):
    """Environment in which `python -m ube_stream` imports the package in `package_dir`."""
    env = dict(os.environ)
    env["PYTHONPATH"] = package_dir + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def median_cpu(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def split_files(path, n, work_dir):
    """`path` (JSON Lines) cut into `n` files of about equal bytes, kept in `work_dir`."""
    folder = os.path.join(work_dir, f"{os.path.splitext(os.path.basename(path))[0]}-{n}files")
    names = [os.path.join(folder, f"part-{k:04d}.jsonl") for k in range(n)]
    if all(os.path.exists(p) for p in names):
        return names
    os.makedirs(folder, exist_ok=True)
    size = os.path.getsize(path)
    with open(path, "rb") as src:
        for k, name in enumerate(names):
            with open(name + ".part", "wb") as dst:
                written = 0
                for line in src:
                    dst.write(line)
                    written += len(line)
                    if k < n - 1 and written >= size / n:
                        break
            os.replace(name + ".part", name)
    return names


def stages(path, hf_tokenizer, ube_tokenizer, repeat, tmp, package_dir=measure.REPO):
    """CPU seconds of each stage on `path` (see the module), of the `ube_stream` in `package_dir`
    (imported here: the process must not have imported another one)."""
    import numpy as np

    sys.path.insert(0, package_dir)
    from ube_stream import Tokenizer
    from ube_stream.runs.corpus import Corpus
    from ube_stream.shards.writer import _drop_cached_pages as drop_cached_pages
    from ube_stream.tokenizer import as_tokenizer

    out = {}
    imports = []
    for _ in range(repeat):
        run = measure.run_measured(measure.ube_cmd("encode", "--help"), env=package_env(package_dir))
        imports.append(run["cpu_s"])
    out["start-up, imports, CLI parser (fresh process)"] = statistics.median(imports)
    # as the command loads them: `--tokenizer` and a worker's file both through as_tokenizer
    out["tokenizer load, HF tokenizer.json (the driver)"] = median_cpu(lambda: as_tokenizer(hf_tokenizer), repeat)
    out["tokenizer load, ube-stream file (a worker)"] = median_cpu(lambda: as_tokenizer(ube_tokenizer), repeat)

    def run_file(tok):   # a fresh tokenizer each time: its fingerprint is computed once per object
        t0 = time.process_time()
        tok.to_json()
        assert tok.fingerprint
        return time.process_time() - t0
    out["the run's tokenizer file and fingerprint (the driver)"] = statistics.median(
        run_file(as_tokenizer(hf_tokenizer)) for _ in range(repeat))
    corpus = Corpus([path], even_bytes=True)
    units = corpus.units(corpus.sources())
    out["plan: sources and units"] = median_cpu(lambda: corpus.units(corpus.sources()), repeat)
    eos = Tokenizer.load(ube_tokenizer).special_tokens.get("<|endoftext|>")
    try:
        import xxhash
    except ImportError:
        xxhash = None
    sink = os.path.join(tmp, "stage.tokens")

    def stream(toks):
        """One pass as one worker makes it: unit by unit, its batches read, encoded (batch
        k by ``toks[k % len(toks)]``), checksummed and written, then dropped, so memory
        stays a unit's (keeping a 1 GB corpus's batches and ids alive instead made every
        stage pay for fresh pages and read 88% for a kernel that is 58-64% of the
        command).  Returns ({step: CPU seconds}, text bytes, tokens)."""
        tally = dict.fromkeys(("read", "kernel", "sha256", "xxh3", "crc32", "write"), 0.0)
        k = text = tokens = 0
        for unit in units:
            with open(sink, "wb") as f:   # a unit's shard, written as the writer does (writer._close)
                t0 = time.process_time()
                batches = [b.utf8() for b in corpus.batches(unit)]
                tally["read"] += time.process_time() - t0
                t0 = time.process_time()
                encoded = [toks[(k + i) % len(toks)].encode_utf8_batch(d, o, eos_id=eos)
                           for i, (d, o) in enumerate(batches)]
                tally["kernel"] += time.process_time() - t0
                k += len(batches)
                text += sum(int(o[-1]) for _, o in batches)
                del batches
                buffers = [np.ascontiguousarray(ids, "<u4").data for ids, _ in encoded]
                tokens += sum(len(b) for b in buffers)
                for name, make in (("sha256", hashlib.sha256), ("xxh3", xxhash.xxh3_128 if xxhash else None)):
                    if make is not None:
                        t0 = time.process_time()
                        h = make()
                        for b in buffers:
                            h.update(b)
                        tally[name] += time.process_time() - t0
                t0 = time.process_time()
                for b in buffers:
                    zlib.crc32(b)
                tally["crc32"] += time.process_time() - t0
                t0 = time.process_time()
                for b in buffers:
                    f.write(b)
                f.flush()
                os.fsync(f.fileno())
                drop_cached_pages(f.fileno())
                tally["write"] += time.process_time() - t0
        return tally, text, tokens

    def fresh(parts):
        toks = [Tokenizer.load(ube_tokenizer) for _ in range(parts)]
        for tok in toks:   # the tables, built once per process, are not what is measured
            tok.encode_utf8_batch(np.frombuffer(b" ", np.uint8), np.array([0, 1], np.int64))
        return toks

    one, two, warm = [], [], []
    for _ in range(repeat):
        toks = fresh(1)
        tally, text_bytes, tokens = stream(toks)
        one.append(tally)
        warm.append(stream(toks)[0])                      # the same cache, now warm
        two.append(stream(fresh(2))[0])

    def med(runs, key):
        return statistics.median(r[key] for r in runs)
    out["read: JSON Lines -> UTF-8 batches"] = med(one, "read")
    out["kernel, one fresh chunk cache"] = med(one, "kernel")
    out["kernel, two fresh chunk caches (batches alternating)"] = med(two, "kernel")
    out["kernel, warm chunk cache"] = med(warm, "kernel")
    out["checksum: sha256 of the tokens (the format's)"] = med(one, "sha256")
    out["checksum: crc32 (zlib), for comparison"] = med(one, "crc32")
    if xxhash is not None:
        out["checksum: xxh3-128, for comparison"] = med(one, "xxh3")
    out["write tokens + fsync"] = med(one, "write")
    return out, text_bytes / 1e6, tokens, len(units)


def child_stages(path, hf_tokenizer, ube_tokenizer, repeat, tmp, package_dir):
    """`stages` of the package in `package_dir`, in a fresh process (this script, `--child-stages`)."""
    result = os.path.join(tmp, "child-stages.json")
    res = subprocess.run([sys.executable, os.path.abspath(__file__), "--child-stages", result, "--package-dir",
                          package_dir, "--child-args", json.dumps([path, hf_tokenizer, ube_tokenizer, repeat, tmp])],
                         capture_output=True, text=True, env=package_env(package_dir))
    if res.returncode != 0:
        raise SystemExit(f"the stages of {package_dir} failed:\n{res.stderr[-2000:]}")
    with open(result) as f:
        return json.load(f)


def whole(files, hf_tokenizer, workers, tmp, round_no, package_dir=measure.REPO):
    out = os.path.join(tmp, f"whole-{workers}-{round_no}")
    load = os.getloadavg()[0]
    run = measure.check(measure.run_measured(measure.ube_cmd("encode", *files, "--tokenizer", hf_tokenizer, "-o", out,
                                                             "--workers", str(workers), "-q"),
                                             env=package_env(package_dir)), f"ube encode --workers {workers}")
    shutil.rmtree(out, ignore_errors=True)
    return run["wall_s"], run["cpu_s"], load


def parts_run(files, hf_tokenizer, tmp, round_no):
    """CPU seconds of each of PARTS inside one `ube encode --workers 1` (see _PARTS_SCRIPT)."""
    out = os.path.join(tmp, f"parts-{round_no}")
    res = subprocess.run([sys.executable, "-c", _PARTS_SCRIPT, json.dumps(PARTS), "encode", *files, "--tokenizer",
                          hf_tokenizer, "-o", out, "--workers", "1", "-q"], capture_output=True, text=True,
                         env=dict(measure.ube_env(), OPENBLAS_NUM_THREADS="1"), cwd=measure.REPO)
    shutil.rmtree(out, ignore_errors=True)
    line = next((x for x in res.stdout.splitlines() if x.startswith("PARTS ")), None)
    if res.returncode != 0 or line is None:
        raise SystemExit(f"the parts run failed:\n{res.stderr[-2000:]}")
    return json.loads(line[len("PARTS "):])


def layout_run(layout, files, tokenizer, tmp, round_no):
    out = os.path.join(tmp, f"layout-{layout}-{round_no}")
    load = os.getloadavg()[0]
    res = subprocess.run([sys.executable, "-c", _LAYOUT_SCRIPT, layout, tokenizer, out, *files],
                         capture_output=True, text=True, env=measure.ube_env(), cwd=measure.REPO)
    shutil.rmtree(out, ignore_errors=True)
    line = next((x for x in res.stdout.splitlines() if x.startswith(("RESULT", "MISSING"))), None)
    if res.returncode != 0 or line is None or line.startswith("MISSING"):
        return None, (line or res.stderr[-500:])
    _, wall, cpu = line.split()
    return (float(wall), float(cpu), load), None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=os.path.join(HERE, "data", "large", "large.jsonl"))
    parser.add_argument("--size", default="100MB", help="text bytes (default 100MB)")
    parser.add_argument("--files", type=int, default=4, help="files the prefix is cut into (default 4)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each stage / interleaved layout rounds")
    parser.add_argument("--layouts", default="w1,p2,t2,t2n", help=f"of {','.join(LAYOUTS)} (empty: none)")
    parser.add_argument("--vocab-size", type=int, default=32768)
    parser.add_argument("--work-dir", default=os.path.join(HERE, "data", "e2e-work"),
                        help="prefix, files and tokenizers (kept; side_by_side_e2e.py's by default)")
    parser.add_argument("--baseline", help="a folder holding another ube_stream package (with its compiled "
                        "kernels), measured interleaved with this checkout's (A/B)")
    parser.add_argument("--child-stages", help=argparse.SUPPRESS)   # internal: one process's stages, as JSON
    parser.add_argument("--package-dir", help=argparse.SUPPRESS)
    parser.add_argument("--child-args", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_stages:
        path, hf_tokenizer, ube_tokenizer, repeat, tmp = json.loads(args.child_args)
        costs, text_mb, tokens, units = stages(path, hf_tokenizer, ube_tokenizer, repeat, tmp, args.package_dir)
        with open(args.child_stages, "w") as f:
            json.dump({"costs": costs, "text_mb": text_mb, "tokens": tokens, "units": units}, f)
        return 0
    if args.baseline:
        args.baseline = os.path.abspath(args.baseline)
        if not os.path.isfile(os.path.join(args.baseline, "ube_stream", "__init__.py")):
            raise SystemExit(f"--baseline {args.baseline}: no ube_stream package there; copy one there "
                             "(cp -r /path/to/checkout/ube_stream DIR/) with its compiled kernels")
        return ab(args)
    layouts = [x for x in args.layouts.split(",") if x]
    unknown = sorted(set(layouts) - set(LAYOUTS))
    if unknown:
        raise SystemExit(f"--layouts: unknown {unknown}; choose from {sorted(LAYOUTS)}")
    path, text_bytes, documents, files, ube_tokenizer, hf_tokenizer = prepare(args)
    measure.compile_package()   # imported as an installed package is: from its bytecode
    rows, data = [], {"documents": documents, "text_mb": round(text_bytes / 1e6, 3), "files": len(files)}
    with tempfile.TemporaryDirectory() as tmp:
        costs, text_mb, tokens, units = stages(path, hf_tokenizer, ube_tokenizer, args.repeat, tmp)
        runs = [whole(files, hf_tokenizer, 1, tmp, r) for r in range(args.repeat)]
        whole_cpu = statistics.median(r[1] for r in runs)
        kernel = costs["kernel, one fresh chunk cache"]
        for stage, cpu in costs.items():
            rows.append(["stage", stage, round(cpu, 3), round(100 * cpu / whole_cpu, 1), None, None])
        rows.append(["whole", "ube encode --workers 1 (fresh process, HF tokenizer.json)", round(whole_cpu, 3), 100.0,
                     round(statistics.median(r[0] for r in runs), 3), round(statistics.median(r[2] for r in runs), 2)])
        inside = [parts_run(files, hf_tokenizer, tmp, r) for r in range(args.repeat)]
        for label in inside[0]:
            cpu = statistics.median(run.get(label, 0.0) for run in inside)
            rows.append(["inside", label, round(cpu, 3), round(100 * cpu / whole_cpu, 1), None, None])
        data.update(stages=costs, whole_runs=runs, tokens=tokens, units=units, inside_runs=inside)
        layout_runs = {name: [] for name in layouts}
        failed = {}
        for round_no in range(args.repeat if layouts else 0):
            for name in layouts:
                if name in failed:
                    continue
                result, error = layout_run(name, files, ube_tokenizer, tmp, round_no)
                if result is None:
                    failed[name] = error
                else:
                    layout_runs[name].append(result)
                    print(f"round {round_no} {name}: {result[0]:.2f} s wall, {result[1]:.2f} CPU s, "
                          f"load {result[2]:.2f}", file=sys.stderr)
        base = layout_runs.get("w1") or []
        for name, got in layout_runs.items():
            if not got:
                continue
            wall, cpu = statistics.median(r[0] for r in got), statistics.median(r[1] for r in got)
            ratio_wall = (statistics.median(r[0] for r in base) / wall) if base else None
            rows.append(["layout", f"{name}: {LAYOUTS[name]}", round(cpu, 3),
                         round(100 * cpu / statistics.median(r[1] for r in base), 1) if base else None,
                         round(wall, 3), round(statistics.median(r[2] for r in got), 2)])
            data.setdefault("layouts", {})[name] = {"runs": got, "wall_s": wall, "cpu_s": cpu,
                                                    "speedup_vs_w1_wall": round(ratio_wall, 3) if ratio_wall else None}
        data["layouts_failed"] = failed
        data["targets"] = {
            "whole_vs_kernel_rate": {"value": round(kernel / whole_cpu, 3), "target": ">= 0.85 (issue 24 item 3)",
                                     "met": kernel / whole_cpu >= 0.85},
        }
        if "p2" in data.get("layouts", {}) and base:
            speedup = data["layouts"]["p2"]["speedup_vs_w1_wall"]
            data["targets"]["two_workers_vs_one_wall"] = {
                "value": speedup, "target": ">= 1.8 on two idle cores (issue 24 item 3)",
                "met": speedup >= 1.8, "load_1min": [r[2] for r in layout_runs["p2"]]}
    headline = (f"kernel {100 * kernel / whole_cpu:.0f}% of ube encode's CPU at {text_mb:.0f} MB "
                f"({text_mb / whole_cpu:.1f} vs {text_mb / kernel:.1f} MB per CPU s)")
    notes = [f"{text_mb:.1f} MB of text of {os.path.relpath(args.corpus)} ({documents} documents, {len(files)} files, "
             f"{units} units), {tokens:,} tokens; utf8 tokenizer, {args.vocab_size} tokens, trained on 10 MB; "
             f"medians of {args.repeat}",
             "stage rows: CPU seconds of that step alone, and its share of the whole command's CPU; layout rows: "
             "CPU seconds of the run (share: of w1's), wall seconds, load average (1 min) at its start",
             "wall seconds and layout wall ratios need idle cores; under load compare CPU only"]
    write_record("encode_breakdown", title="ube encode: where the CPU goes beyond the kernel, and two-worker layouts",
                 columns=["part", "what", "cpu_s (s)", "share_pct (%)", "wall_s (s)", "load_1min"], rows=rows,
                 notes=notes, headline=headline, argv=sys.argv[1:] if argv is None else argv, data=data)
    return 0


def prepare(args):
    """The prefix, its files and the two tokenizers (made once, kept in ``--work-dir``)."""
    if not os.path.exists(args.corpus):
        raise SystemExit(f"{args.corpus} missing: run python benchmarks/make_large_corpus.py first")
    size = measure.parse_sizes(args.size)[0]
    path, text_bytes, documents = measure.cut_prefix(args.corpus, size, args.work_dir)
    files = split_files(path, args.files, args.work_dir)
    ube_tokenizer = os.path.join(args.work_dir, f"breakdown-utf8-{args.vocab_size}.ube.json")
    hf_tokenizer = os.path.join(args.work_dir, f"breakdown-utf8-{args.vocab_size}.tokenizer.json")
    if not os.path.exists(ube_tokenizer):
        sample = measure.cut_prefix(args.corpus, 10 * 10**6, args.work_dir)[0]
        measure.check(measure.run_measured(measure.ube_cmd("train", sample, "--substrate", "utf8", "--vocab-size",
                                                           str(args.vocab_size), "-o", ube_tokenizer, "-q"),
                                           env=measure.ube_env()), "training the tokenizer")
    if not os.path.exists(hf_tokenizer):
        subprocess.run([sys.executable, "-c", "import sys; from ube_stream import Tokenizer; "
                        "Tokenizer.load(sys.argv[1]).export_hf(sys.argv[2])", ube_tokenizer, hf_tokenizer],
                       check=True, env=measure.ube_env())
    return path, text_bytes, documents, files, ube_tokenizer, hf_tokenizer


def ab(args):
    """This checkout against ``--baseline``: stages and whole command, rounds interleaved (see the module)."""
    path, text_bytes, documents, files, ube_tokenizer, hf_tokenizer = prepare(args)
    import compileall

    measure.compile_package()
    compileall.compile_dir(os.path.join(args.baseline, "ube_stream"), quiet=1)
    sides = {"this": measure.REPO, "baseline": args.baseline}
    got = {side: {"stages": [], "whole": []} for side in sides}
    with tempfile.TemporaryDirectory() as tmp:
        for round_no in range(args.repeat):
            # ABBA: the side that runs first alternates (the first run of a round measured slower, +0.05-0.1 s)
            order = list(sides.items())[::-1 if round_no % 2 else 1]
            for side, package_dir in order:
                got[side]["stages"].append(child_stages(path, hf_tokenizer, ube_tokenizer, 1, tmp, package_dir))
            for side, package_dir in order[::-1]:
                got[side]["whole"].append(whole(files, hf_tokenizer, 1, tmp, round_no, package_dir))
                print(f"round {round_no} {side}: whole {got[side]['whole'][-1][1]:.3f} CPU s, load "
                      f"{got[side]['whole'][-1][2]:.2f}", file=sys.stderr)
    rows = []
    medians = {}
    for side in sides:
        costs = {stage: statistics.median(run["costs"][stage] for run in got[side]["stages"])
                 for stage in got[side]["stages"][0]["costs"]}
        costs["whole: ube encode --workers 1 (fresh process, HF tokenizer.json)"] = statistics.median(
            r[1] for r in got[side]["whole"])
        medians[side] = costs
    whole_key = "whole: ube encode --workers 1 (fresh process, HF tokenizer.json)"
    for stage, cpu in medians["this"].items():
        before = medians["baseline"].get(stage)
        rows.append([stage, round(before, 3) if before is not None else None, round(cpu, 3),
                     round(cpu / before, 3) if before else None,
                     round(100 * cpu / medians["this"][whole_key], 1)])
    kernel = {side: medians[side]["kernel, one fresh chunk cache"] for side in sides}
    rate = {side: kernel[side] / medians[side][whole_key] for side in sides}
    loads = [r[2] for side in sides for r in got[side]["whole"]]
    text_mb = got["this"]["stages"][0]["text_mb"]
    data = {"documents": documents, "text_mb": round(text_bytes / 1e6, 3), "files": len(files),
            "baseline": args.baseline, "runs": got, "medians": medians,
            "targets": {"whole_vs_kernel_rate": {"value": round(rate["this"], 3), "baseline": round(rate["baseline"], 3),
                                                 "target": ">= 0.85 (issue 24 item 3)", "met": rate["this"] >= 0.85}}}
    headline = (f"ube encode at {rate['this']:.2f}x the kernel's rate per CPU s (baseline {rate['baseline']:.2f}x); "
                f"whole command {medians['this'][whole_key]:.3f} vs {medians['baseline'][whole_key]:.3f} CPU s "
                f"at {text_mb:.0f} MB")
    notes = [f"{text_mb:.1f} MB of text of {os.path.relpath(args.corpus)} ({documents} documents, {len(files)} files); "
             f"utf8 tokenizer, {args.vocab_size} tokens; medians of {args.repeat} interleaved rounds, each stage "
             "and each whole command a fresh process",
             f"baseline: the ube_stream package in {args.baseline}",
             f"load average (1 min) at the whole commands: {min(loads):.2f}-{max(loads):.2f}; compare the columns "
             "(measured side by side), not their values against another run"]
    write_record("encode_breakdown_ab", title="ube encode's CPU beyond the kernel: this checkout against a baseline",
                 columns=["what", "baseline_cpu_s (s)", "cpu_s (s)", "ratio", "share_pct (%)"], rows=rows,
                 notes=notes, headline=headline, argv=sys.argv[1:], data=data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
