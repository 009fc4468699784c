"""Small helpers shared by several test modules (importable: tests/ is on sys.path)."""
import functools
import io
import json
import os

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def read_jsonl_zst(name):
    """The rows of a zstd JSON Lines fixture in tests/data (they ship with the repository)."""
    import zstandard

    path = os.path.join(DATA, name)
    assert os.path.exists(path), f"fixture {path} is missing (it ships with the repository)"
    with open(path, "rb") as f:
        reader = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(f), encoding="utf-8")
        return [json.loads(line) for line in reader]


def tree(directory):
    """Every file and directory under ``directory``: relative path -> bytes (None for a directory)."""
    out = {}
    for root, dirs, files in os.walk(directory):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), directory)] = None
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                out[os.path.relpath(os.path.join(root, name), directory)] = f.read()
    return out


def openai_rank_file(name):
    """Path of bpe-openai's real rank file ``name`` (``cl100k_base``, ``o200k_base``; a test dependency)."""
    import bpe_openai

    path = os.path.join(os.path.dirname(bpe_openai.__file__), "data", f"{name}.tiktoken.gz")
    assert os.path.isfile(path), f"bpe-openai (a test dependency) has no {name} rank file at {path}"
    return path


def openai_ranks(name, limit=None):
    """bpe-openai's real ranks ``{token bytes: rank}`` (ranks below ``limit`` only, when given),
    read here line by line, independently of ube_stream's own rank-file reader (once per
    session and file; each call gets its own dict)."""
    ranks = _openai_ranks_read(name)
    return dict(ranks) if limit is None else {token: rank for token, rank in ranks.items() if rank < limit}


@functools.lru_cache(maxsize=None)
def _openai_ranks_read(name):
    import base64
    import gzip

    ranks = {}
    with gzip.open(openai_rank_file(name), "rb") as f:
        for line in f:
            if line.strip():
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    return ranks


def kill_when(proc, ready, *, timeout, poll=0.005, grace=0.0):
    """Wait until ``ready()`` is true (or ``proc`` ends, or ``timeout`` seconds pass), sleep
    ``grace`` seconds, then SIGKILL ``proc``'s whole process group (it was started with
    ``start_new_session=True``): the one way the crash tests kill a run part way.
    Returns ``(returncode, stderr bytes)``."""
    import signal
    import time

    deadline = time.time() + timeout
    try:
        while time.time() < deadline and proc.poll() is None and not ready():
            time.sleep(poll)
        if grace:
            time.sleep(grace)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, err = proc.communicate()
    return proc.returncode, err or b""


def superbpe_from_plain(plain, texts, *, max_words=4, rounds=2, per_round=40):
    """A hand-built SuperBPE tokenizer: ``plain``'s merges as stage 1, then stage-2
    merges chosen from the adjacent token pairs ``texts`` encode to (most frequent
    first, ``per_round`` a round, re-encoding between rounds so later merges build on
    earlier ones).  The pairs include superwords (" of" + " the"), subword pairs
    inside a chunk, and pairs across span boundaries (", " + " the") that the
    encoder must never apply."""
    from collections import Counter

    from ube_stream import Tokenizer

    def build(merges):
        return Tokenizer(substrate=plain.substrate, merges=merges, special_tokens=list(plain._special_internal),
                         pattern=plain.pattern_name if plain.pattern_name != "custom" else "regex:" + plain.pattern,
                         superbpe={"stage1_merges": len(plain.merges), "max_words": max_words})

    merges = list(plain.merges)
    tok = build(merges)
    for _ in range(rounds):
        counts = Counter()
        for ids in tok.encode_ordinary_batch(list(texts)):
            ids = ids.tolist()
            counts.update(zip(ids, ids[1:]))
        known = set(merges)
        new = [pair for pair, _ in counts.most_common() if pair not in known][:per_round]
        merges += new
        tok = build(merges)
    return tok


def slow_after(values, keep=1, *, several=False):
    """Parameters for ``pytest.mark.parametrize``: the first ``keep`` values in the default
    suite, the others marked slow (they run in CI's slow job), so a variant test keeps its
    primary case (``ube``, the product) fast and its siblings still run somewhere.
    ``several=True`` when each value is a tuple of several arguments (``"substrate, files"``)."""
    import pytest

    values = list(values)
    return values[:keep] + [pytest.param(*(v if several else (v,)), marks=pytest.mark.slow) for v in values[keep:]]


def write_jsonl(path, texts):
    """A JSON Lines file of ``{"text": t}`` rows; returns its path as a string."""
    with open(path, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
    return str(path)


#: the patterns the compiled split kernels run
SPLIT_PATTERN_NAMES = ("gpt2", "cl100k", "llama3", "o200k")


@functools.lru_cache(maxsize=None)
def compiled_split_pattern(name):
    """``regex.compile`` of the pattern text of ``name`` (one of SPLIT_PATTERN_NAMES)."""
    import regex

    from ube_stream.pretokenizer import PATTERNS, resolve_pattern

    return regex.compile(PATTERNS.get(name) or resolve_pattern(name)[1])


def assert_split_matches_regex(texts, name):
    """Split ``texts`` in one ``chunk_bounds_batch`` call (each a document) with the
    compiled ``name`` pattern and compare every document's chunks with
    ``regex.findall`` of the pattern's text."""
    import numpy as np
    import pytest

    from ube_stream.pretokenizer import chunk_bounds_batch

    compiled = compiled_split_pattern(name)
    encoded = [text.encode("utf-8") for text in texts]
    offsets = np.concatenate([[0], np.cumsum([len(e) for e in encoded])]).astype(np.int64)
    ends, doc_chunk_offsets = chunk_bounds_batch(b"".join(encoded), offsets, name)
    for d, (text, start) in enumerate(zip(texts, offsets[:-1].tolist())):
        expected = start + np.cumsum([len(c.encode("utf-8")) for c in compiled.findall(text)], dtype=np.int64)
        ours = ends[doc_chunk_offsets[d]:doc_chunk_offsets[d + 1]]
        if not np.array_equal(ours, expected):
            data = b"".join(encoded)
            got = [data[a:b].decode() for a, b in zip([start] + ours[:-1].tolist(), ours)]
            pytest.fail(f"{name} {text!r}: kernel {got!r} != regex {compiled.findall(text)!r}")


_VERIFY_CHILD = """
import json, sys
from ube_stream.cli import main
from ube_stream.verification import shards as vs
real = vs.run_tasks
def dispatched(fn, tasks, *args, **kwargs):   # the units this run sends to its executor
    print("DISPATCHED " + json.dumps([t.unit_id for t in tasks]), flush=True)
    return real(fn, tasks, *args, **kwargs)
vs.run_tasks = dispatched
sys.exit(main(json.loads(sys.argv[1])))
"""


def verify_killed_then_resumed(directory, tmp, kill_unit, argv):
    """``ube verify --shards directory --json FILE -q *argv`` in a child (its own session,
    ``TMPDIR=tmp``) whose driver SIGKILLs its process group right after committing the
    result of unit ``kill_unit`` (``$UBE_TEST_KILL_UNIT``), then the same command again
    with the same kill point armed afresh, so a rerun that checked ``kill_unit`` again
    would die.  Returns ``(records the killed run left, the units each run dispatched,
    whether the rerun reached the kill point, the rerun's exit status and stderr, its
    --json bytes)``."""
    import glob
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.makedirs(tmp, exist_ok=True)
    report = os.path.join(tmp, "..", "resumed.json")
    runs = []
    for attempt in ("killed", "rerun"):
        marker = os.path.join(tmp, "..", f"kill-marker-{attempt}")
        env = dict(os.environ, TMPDIR=tmp, UBE_TEST_KILL_UNIT=f"{directory}|{kill_unit}|{marker}|group")
        command = ["verify", "--shards", directory, "--json", report, "-q"] + list(argv)
        proc = subprocess.run([sys.executable, "-c", _VERIFY_CHILD, json.dumps(command)], cwd=root, env=env,
                              capture_output=True, text=True, start_new_session=True, timeout=300)
        units = [json.loads(line.split(" ", 1)[1]) for line in proc.stdout.splitlines()
                 if line.startswith("DISPATCHED ")]
        runs.append((proc, units, os.path.exists(marker)))
        if attempt == "killed":
            assert proc.returncode == -9 and runs[0][2], (proc.returncode, proc.stderr[-2000:])
            records = len(glob.glob(os.path.join(tmp, "ube-verify-*", "run-*", "units", "*.pickle")))
    (_, first, _), (rerun, second, killed_again) = runs
    data = b""
    if os.path.exists(report):
        with open(report, "rb") as f:
            data = f.read()
    return records, first, second, killed_again, (rerun.returncode, rerun.stderr[-2000:]), data


def wait_for_other_threads(timeout=10.0):
    """Let threads that earlier tests' pools leave behind finish (a process pool's
    management thread ends shortly after its shutdown returns): will_fork() is
    rightly False while any runs, which made this test depend on the files before it."""
    import threading

    for t in threading.enumerate():
        if type(t).__name__ == "TMonitor":   # tqdm's monitor (a test that showed a tqdm bar) lives until told
            t.exit()
        elif t is not threading.main_thread():
            t.join(timeout)
    assert threading.active_count() == 1, f"threads still alive: {threading.enumerate()}"
