"""One large unit on several threads (issue 24 item 2): a compressed JSONL/text
file is one unit (a single stream is decoded from its start), so its batches
are encoded (and counted) by ``threads`` threads fed by one reader.  The shards
and the tokenizer must be the same bytes for any thread and worker count, and a
damaged stream must give the same error as one thread does."""
from __future__ import annotations

import gzip
import json
import os

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
import zstandard
from _helpers import tree

from ube_stream.errors import InputError
from ube_stream.shards import encode as _encode_module
from ube_stream.shards import encode_corpus
from ube_stream.shards import overlap as _overlap_module
from ube_stream.shards import writer as _writer_module
from ube_stream.shards.overlap import OrderedMap, unit_threads
from ube_stream.training import trainer as _trainer_module
from ube_stream.training.trainer import train

KINDS = ("jsonl.gz", "jsonl.zst", "jsonl.zst-frames", "txt.zst", "parquet", "arrow")


def _frames(raw: bytes, size: int) -> bytes:
    """zstd frames of ``size`` bytes each, cut anywhere (pzstd / zstd --block-size style)."""
    cctx = zstandard.ZstdCompressor(write_checksum=True)
    return b"".join(cctx.compress(raw[i:i + size]) for i in range(0, len(raw), size))


@pytest.fixture(scope="module")
def texts(multilingual_lines):
    return [t for t in multilingual_lines if "\r" not in t][:9000]


@pytest.fixture(scope="module")
def files(tmp_path_factory, texts):
    d = tmp_path_factory.mktemp("big")
    jsonl = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts).encode()
    text = "".join(t + "\n" for t in texts).encode()
    out = {}
    for kind in KINDS:
        name = kind.split("-")[0]
        path = str(d / f"{kind}.{name}")
        if kind == "jsonl.gz":
            data = gzip.compress(jsonl)
        elif kind == "jsonl.zst":
            data = zstandard.ZstdCompressor().compress(jsonl)
        elif kind == "jsonl.zst-frames":
            data = _frames(jsonl, 37_000)
        elif kind == "txt.zst":
            data = zstandard.ZstdCompressor().compress(text)
        if kind == "parquet":
            pq.write_table(pa.table({"text": texts}), path, row_group_size=700)
        elif kind == "arrow":
            table = pa.table({"text": texts})
            with ipc.new_file(path, table.schema) as w:
                w.write_table(table, max_chunksize=700)
        else:
            with open(path, "wb") as f:
                f.write(data)
        out[kind] = path
    return out


@pytest.fixture(scope="module")
def tok_path(tmp_path_factory, texts):
    tok = train(iter(texts[:2000]), vocab_size=512 + 300 + 1, workers=1, show_progress=False)
    path = tmp_path_factory.mktemp("tok") / "tok.json"
    tok.save(path)
    return str(path)


def _spy(monkeypatch, module):
    """The thread counts the unit functions of ``module`` ran their OrderedMap with."""
    used = []

    class Spy(OrderedMap):
        def __init__(self, items, fn, threads, **kwargs):
            used.append(threads)
            super().__init__(items, fn, threads, **kwargs)

    monkeypatch.setattr(module, "OrderedMap", Spy)
    return used


def _shards(path, tok_path, out, threads, monkeypatch, **kwargs):
    monkeypatch.setattr(_encode_module, "unit_threads", lambda *a: threads)
    used = _spy(monkeypatch, _writer_module)
    encode_corpus([path], tokenizer=tok_path, output=str(out), workers=1, show_progress=False,
                  shard_tokens=20_000, unit_rows=10**9, **kwargs)
    assert used == [threads]
    files = tree(os.path.join(out, "shards"))
    files.update({k: v for k, v in tree(os.path.join(out, "units")).items()})
    return files


@pytest.mark.parametrize("kind", KINDS)
def test_shards_are_the_same_bytes_for_any_thread_count(files, tok_path, tmp_path, monkeypatch, kind):
    base = _shards(files[kind], tok_path, tmp_path / "t1", 1, monkeypatch)
    assert len([n for n in base if n.endswith(".tokens")]) > 3   # several shards, many batches
    for threads in (2, 3):
        assert _shards(files[kind], tok_path, tmp_path / f"t{threads}", threads, monkeypatch) == base


@pytest.mark.parametrize("kind", ["jsonl.zst", "parquet"])
def test_tokenizer_is_the_same_bytes_for_any_thread_count(files, tmp_path, monkeypatch, kind):
    got = []
    for threads in (1, 2, 3):
        monkeypatch.setattr(_trainer_module, "unit_threads", lambda *a, t=threads: t)
        used = _spy(monkeypatch, _overlap_module)
        tok = train([files[kind]], vocab_size=512 + 200 + 1, workers=1, show_progress=False,
                    unit_rows=10**9, work_dir=str(tmp_path / f"w{threads}"))
        assert used == [threads]
        got.append(tok.to_json())
    assert got[0] == got[1] == got[2]


@pytest.mark.parametrize("compression", ["zstd-frames", "gzip"])
def test_a_damaged_stream_gives_the_same_error_on_threads(texts, tok_path, tmp_path, monkeypatch, compression):
    raw = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts).encode()
    packed = _frames(raw, 37_000) if compression == "zstd-frames" else gzip.compress(raw)
    cut = packed[: len(packed) * 2 // 3]
    path = str(tmp_path / ("d.jsonl.zst" if compression == "zstd-frames" else "d.jsonl.gz"))
    with open(path, "wb") as f:
        f.write(cut)
    errors = []
    for threads in (1, 2):
        with pytest.raises(InputError) as info:
            _shards(path, tok_path, tmp_path / f"e{threads}", threads, monkeypatch)
        errors.append((info.value.reason, info.value.row, info.value.offset, str(info.value)))
        assert info.value.reason == "truncated_file" and path in str(info.value)
    assert errors[0] == errors[1]
    # skip mode: the whole file counted, nothing written, the same for both thread counts
    skipped = [_shards(path, tok_path, tmp_path / f"s{threads}", threads, monkeypatch, on_error="skip")
               for threads in (1, 2)]
    assert skipped[0] == skipped[1]


def test_unit_threads_share_out_the_workers(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert unit_threads("local", 8, 1) == 8         # one big file: all workers' cores in its one process
    assert unit_threads("local", 8, 3) == 2
    assert unit_threads("local", 8, 20) == 1
    assert unit_threads("local", 16, 1) == 8        # never more than the cores
    assert unit_threads("local", 1, 1) == 1
    assert unit_threads("ray", 8, 1) == 1           # a Ray task holds one CPU


def test_one_unit_on_two_cores_gets_two_encoder_threads_beside_the_reader(monkeypatch):
    """With fewer units than workers a unit gets the workers' cores as encoder threads, and still reads
    ahead and writes behind in threads of its own: one .jsonl.zst of 200 MB on 2 pinned idle cores ran
    1.63-1.72x one worker on one core this way, against 1.39-1.42x with one encoder thread (the reader
    and writer then leave most of the second core idle; docs/scaling.md)."""
    from ube_stream.shards.encode import _overlap

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(2)), raising=False)
    assert unit_threads("local", 2, 1) == 2 and _overlap("local", 2, 1)
    assert unit_threads("local", 1, 1) == 1 and _overlap("local", 1, 1)      # one worker: its threads use the idle core
    assert unit_threads("local", 2, 5) == 1 and not _overlap("local", 2, 5)  # the workers fill the cores
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert unit_threads("local", 16, 1) == 16


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["jsonl.zst", "jsonl.gz", "parquet"])
def test_shards_and_tokenizer_are_the_same_bytes_for_1_2_3_workers(files, tok_path, tmp_path, kind):
    shards, toks = [], []
    for workers in (1, 2, 3):
        out = tmp_path / f"o{workers}"
        encode_corpus([files[kind]], tokenizer=tok_path, output=str(out), workers=workers, show_progress=False,
                      shard_tokens=20_000)
        shards.append(tree(os.path.join(out, "shards")))
        toks.append(train([files[kind]], vocab_size=512 + 200 + 1, workers=workers, show_progress=False,
                          work_dir=str(tmp_path / f"w{workers}")).to_json())
    assert shards[0] == shards[1] == shards[2] and toks[0] == toks[1] == toks[2]


def test_parquet_units_are_whole_row_groups(tmp_path, texts):
    import numpy as np

    from ube_stream.readers import plan_units, read_unit, resolve_inputs

    path = str(tmp_path / "g.parquet")
    with pq.ParquetWriter(path, pa.schema([("text", pa.string())])) as w:   # groups of uneven sizes
        start = 0
        for size in (700, 700, 300, 2000, 100, 50):
            w.write_table(pa.table({"text": texts[start:start + size]}), row_group_size=size)
            start += size
    meta = pq.ParquetFile(path).metadata
    bounds = set(np.cumsum([0] + [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]).tolist())
    assert sorted(bounds) == [0, 700, 1400, 1700, 3700, 3800, 3850]
    for unit_rows, expected in ((1000, [0, 700, 1700, 3700]), (1500, [0, 1400, 1700, 3700]),
                                (10**9, [0])):
        units = plan_units(resolve_inputs(path), unit_rows=unit_rows)
        assert [u.row_start for u in units] == expected
        assert all(u.row_start in bounds and u.row_stop in bounds for u in units)
        got = [t for u in units for b in read_unit(u) for t in b.to_pylist()]
        assert got == texts[:3850]


# --------------------------------------------------------------------------- multi-frame zstd: units at frames

def _whole_file_rows(path, **kwargs):
    from ube_stream.readers import iter_batches

    batches = list(iter_batches(path, **kwargs))
    return [t for b in batches for t in b.to_pylist()], [int(r) for b in batches for r in b.rows]


@pytest.mark.parametrize("seed", range(6))
def test_frame_units_read_every_row_once_numbered_as_the_whole_file(tmp_path, texts, seed):
    import random

    from ube_stream.readers import plan_units, read_unit, resolve_inputs

    rng = random.Random(seed)
    chosen = [texts[rng.randrange(len(texts))] for _ in range(3000)]
    for k in rng.sample(range(len(chosen)), 5):   # lines longer than a frame, and empty lines
        chosen[k] = "long " * rng.randrange(2000, 9000) if k % 2 else ""
    jsonl = seed % 2 == 0
    raw = ("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in chosen) if jsonl
           else "".join(t + "\n" for t in chosen)).encode()
    if seed % 3 == 0:
        raw = raw[:-1]   # no newline at the end
    cctx = zstandard.ZstdCompressor(write_checksum=seed % 2 == 1, write_content_size=seed % 3 != 1)
    cuts = sorted(rng.sample(range(1, len(raw)), 40))
    frames = [cctx.compress(raw[a:b]) for a, b in zip([0] + cuts, cuts + [len(raw)])]
    skippable = b"\x5e\x2a\x4d\x18" + (5).to_bytes(4, "little") + b"seek!"   # as the seekable format's table
    path = str(tmp_path / ("f.jsonl.zst" if jsonl else "f.txt.zst"))
    with open(path, "wb") as f:
        f.write(b"".join(frames) + skippable)
    expected_texts, expected_rows = _whole_file_rows(path, on_error="skip")
    units = plan_units(resolve_inputs(path), unit_rows=400, unit_bytes=20_000)
    assert len(units) > 5 and all(u.zstd_frames is not None for u in units)
    assert [u.row_start for u in units] == sorted({u.row_start for u in units})     # distinct, in order
    assert all(a.row_stop == b.row_start for a, b in zip(units, units[1:])) and units[-1].row_stop is None
    got_texts, got_rows = [], []
    for unit in units:
        for batch in read_unit(unit, on_error="skip"):
            got_texts.extend(batch.to_pylist())
            got_rows.extend(int(r) for r in batch.rows)
    assert got_rows == expected_rows and got_texts == expected_texts
    assert expected_texts == chosen and expected_rows == list(range(len(chosen)))
    assert units == plan_units(resolve_inputs(path), unit_rows=400, unit_bytes=20_000)   # deterministic


def test_frame_units_give_the_same_shards_as_one_unit(files, tok_path, tmp_path, monkeypatch):
    from ube_stream.readers import compression as _compression

    path = files["jsonl.zst-frames"]
    base = _shards(path, tok_path, tmp_path / "one", 1, monkeypatch)   # one unit (unit_rows=10**9, 16 MiB)
    out = tmp_path / "many"
    encode_corpus([path], tokenizer=tok_path, output=str(out), workers=1, show_progress=False,
                  shard_tokens=20_000, unit_rows=500)
    units = json.loads(open(os.path.join(out, "MANIFEST.json")).read())["shards"]
    assert len({s["unit_id"] for s in units}) > 5
    from ube_stream.shards import TokenShards

    def documents(directory):
        shards = TokenShards(str(directory))
        return [(shards.source(i)[1], shards.doc(i).tolist()) for i in range(len(shards))]

    assert documents(out) == documents(tmp_path / "one")
    assert _compression.zstd_frame_units(files["jsonl.zst"], 500, None) is None   # one frame: one unit
    assert base


AFFINITY_PROBE = """
import json, os, sys
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})   # as `taskset -c N` or a container's cpuset does
from ube_stream.cli.main import build_parser
from ube_stream.executors import LocalExecutor, usable_cores
from ube_stream.shards.encode import _overlap
from ube_stream.shards.overlap import unit_threads
from ube_stream.verification.report import default_workers
parser = build_parser()
print(json.dumps({
    "usable_cores": usable_cores(), "cpu_count": os.cpu_count(),
    "encode_workers": parser.parse_args(["encode", "c.jsonl", "--tokenizer", "t.json", "-o", "out"]).workers,
    "train_workers": parser.parse_args(["train", "c.jsonl", "--vocab-size", "300", "-o", "t.json"]).workers,
    "pool_workers": LocalExecutor().workers, "verify_workers": default_workers(None, 10),
    "unit_threads": unit_threads("local", 8, 1),
    "overlap": _overlap("local", 1, 1)}))
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(getattr(os, "sched_getaffinity", set)(0)) < 2,
                    reason="needs CPU affinity and at least 2 usable cores")
def test_defaults_follow_the_cpu_affinity_not_the_machine(tmp_path):
    """Under ``taskset -c 0`` (a process limited to one of the machine's cores) every default
    sized by cores is one: the workers of ``ube encode``/``ube train``, the pool, the verify
    tasks, the encoder threads of one large unit; and one worker fills the core, so no thread
    reads ahead beside it."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", AFFINITY_PROBE], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": os.path.dirname(
                              os.path.dirname(os.path.abspath(__file__)))})
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["cpu_count"] >= 2   # the machine's cores, which the defaults must not use
    assert found == {"usable_cores": 1, "cpu_count": found["cpu_count"], "encode_workers": 1, "train_workers": 1,
                     "pool_workers": 1, "verify_workers": 1, "unit_threads": 1,
                     "overlap": False}
    # the same probe's calls in this (unrestricted) process see every core of the mask
    cores = len(os.sched_getaffinity(0))
    assert unit_threads("local", 8, 1) == min(8, cores) and _encode_module._overlap("local", 1, 1)


def _bad_rows_file(texts, path):
    """A .jsonl.zst whose lines include every kind of bad row, spread over many blocks."""
    bad = ['{"text": "unterminated', '{"other": "no text key"}', '{"text": null}', '{"text": 7}', "",
           '{"text": "' + "x" * 5000 + '"}', "[1, 2]", '{"text": "ok \\ud800 lone"}']
    lines = []
    for i, t in enumerate(texts):
        lines.append(json.dumps({"text": t}, ensure_ascii=i % 2 == 0))
        if i % 97 == 5:
            lines.append(bad[(i // 97) % len(bad)])
    with open(path, "wb") as f:
        f.write(zstandard.ZstdCompressor().compress(("\n".join(lines) + "\n").encode()))
    return path


def test_blocks_parsed_on_threads_report_bad_rows_as_one_thread_does(texts, tok_path, tmp_path, monkeypatch):
    """Several encoder or counting threads parse the blocks one thread decompressed: the skipped rows
    (counts and examples, in the unit records), the shards, the tokenizer and the first error are those
    of one thread."""
    from ube_stream.readers import compression

    monkeypatch.setattr(compression, "BLOCK_BYTES", 1 << 15)   # ~40 blocks, bad rows in most of them
    path = _bad_rows_file(texts, str(tmp_path / "bad.jsonl.zst"))
    limit = {"max_document_bytes": 4000}
    runs = []
    for threads in (1, 2, 3):
        files = _shards(path, tok_path, tmp_path / f"s{threads}", threads, monkeypatch, on_error="skip", **limit)
        with open(tmp_path / f"s{threads}" / "MANIFEST.json") as f:
            manifest = json.load(f)
        runs.append((files, manifest["totals"], manifest["sources"]))
    assert runs[0] == runs[1] == runs[2]
    skipped = runs[0][1]["skipped"]
    assert set(skipped) == {"invalid_json", "missing_field", "null", "not_string", "blank_line",
                            "document_too_large", "not_object", "invalid_text"}
    assert sum(skipped.values()) == sum(1 for i in range(len(texts)) if i % 97 == 5)
    errors = []
    for threads in (1, 2, 3):
        with pytest.raises(InputError) as info:
            _shards(path, tok_path, tmp_path / f"r{threads}", threads, monkeypatch, **limit)
        errors.append((info.value.reason, info.value.row, str(info.value)))
    assert errors[0] == errors[1] == errors[2] and errors[0][1] == 6   # the first bad line, row 6
    toks = []
    for threads in (1, 2, 3):
        monkeypatch.setattr(_trainer_module, "unit_threads", lambda *a, t=threads: t)
        toks.append(train([path], vocab_size=512 + 200 + 1, workers=1, show_progress=False, unit_rows=10**9,
                          on_error="skip", work_dir=str(tmp_path / f"w{threads}"), **limit).to_json())
    assert toks[0] == toks[1] == toks[2]
