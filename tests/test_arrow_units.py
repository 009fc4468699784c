"""Arrow IPC files and streams are cut into units of whole record batches
(issue 24 item 2), like Parquet row groups: one big Arrow file gives several
units, no batch is read by two units, and what the units yield together is
the file as pyarrow reads it.  Shards and tokenizers are the same bytes for
any worker count, and the same token streams for any unit size."""
from __future__ import annotations

import json
import random

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from _helpers import tree

from ube_stream import readers
from ube_stream.shards import TokenShards, encode_corpus
from ube_stream.training.trainer import train

#: record batch sizes of the test files: uneven, with a batch bigger than some unit sizes and an empty one
BATCHES = [5, 300, 1, 0, 700, 50, 1200, 3, 90, 450, 2, 800, 60]


@pytest.fixture(scope="module")
def texts(multilingual_lines):
    lines = [t for t in multilingual_lines if t]
    out = [lines[i % len(lines)] + f" #{i}" for i in range(sum(BATCHES))]
    out[7] = None   # a null: skipped and counted, the row keeps its number
    return out


def _write(path, texts, kind, compression=None):
    schema = pa.schema([("id", pa.int64()), ("text", pa.string())])
    options = ipc.IpcWriteOptions(compression=compression)
    with (ipc.new_file if kind == "arrow_file" else ipc.new_stream)(str(path), schema, options=options) as w:
        start = 0
        for size in BATCHES:
            w.write_batch(pa.record_batch([pa.array(range(start, start + size), pa.int64()),
                                           pa.array(texts[start:start + size], pa.string())], schema=schema))
            start += size
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory, texts):
    d = tmp_path_factory.mktemp("arrow")
    return {(kind, comp): _write(d / f"{kind}-{comp}.{'arrow' if kind == 'arrow_file' else 'arrows'}",
                                 texts, kind, comp)
            for kind in ("arrow_file", "arrow_stream") for comp in (None, "zstd")}


def _truth(path):
    """The text column and row numbers as pyarrow reads the file (the independent truth)."""
    with pa.memory_map(path) as source:
        try:
            table = ipc.open_file(source).read_all()
        except pa.ArrowInvalid:
            table = ipc.open_stream(pa.memory_map(path)).read_all()
    values = table.column("text").to_pylist()
    return [(row, v) for row, v in enumerate(values) if v is not None]


@pytest.mark.parametrize("kind", ["arrow_file", "arrow_stream"])
@pytest.mark.parametrize("compression", [None, "zstd"])
@pytest.mark.parametrize("unit_rows", [1, 250, 1000, 1500, 10**9])
def test_units_are_whole_record_batches_and_cover_the_file(files, kind, compression, unit_rows):
    path = files[(kind, compression)]
    (source,) = readers.resolve_inputs([path])
    units = readers.plan_units([source], unit_rows=unit_rows)
    bounds = set(np.cumsum([0] + BATCHES).tolist())
    assert [u.row_start for u in units] == sorted({u.row_start for u in units})
    assert units[0].row_start == 0 and units[-1].row_stop == sum(BATCHES)
    for before, after in zip(units, units[1:]):
        assert before.row_stop == after.row_start
    for u in units:
        assert u.row_start in bounds and u.row_stop in bounds        # cut at batch boundaries only
        # a unit holds at most unit_rows rows, unless it is one batch alone
        first = [i for i, s in enumerate(np.cumsum([0] + BATCHES)) if s == u.row_start]
        assert u.batch_start in first
        assert u.row_stop - u.row_start <= unit_rows or \
            u.row_stop - u.row_start in BATCHES
    if unit_rows <= 1000:
        assert len(units) > 3                                         # one big file, several units
    got = []
    for u in units:
        for batch in readers.read_unit(u, batch_rows=97):
            got.extend(zip(batch.rows.tolist(), batch.to_pylist()))
            assert all(u.row_start <= r < u.row_stop for r in batch.rows.tolist())
    assert got == _truth(path)


def test_rows_cut_plans_stay_available_for_old_directories(files):
    """``arrow_batches=False``: the row cuts of directories written before (verify replans them)."""
    (source,) = readers.resolve_inputs([files[("arrow_file", None)]])
    units = readers.plan_units([source], unit_rows=1000, arrow_batches=False)
    assert [(u.row_start, u.row_stop, u.batch_start) for u in units] == \
        [(s, min(s + 1000, sum(BATCHES)), None) for s in range(0, sum(BATCHES), 1000)]
    got = [(r, t) for u in units for b in readers.read_unit(u) for r, t in zip(b.rows.tolist(), b.to_pylist())]
    assert got == _truth(files[("arrow_file", None)])


def test_a_random_batch_layout_is_cut_and_read_exactly(tmp_path):
    rng = random.Random(5)
    for trial in range(6):
        sizes = [rng.choice([0, 1, 2, 17, 64, 300]) for _ in range(rng.randint(1, 12))]
        texts = [f"doc {i} " + "x" * rng.randint(0, 20) for i in range(sum(sizes))]
        path = str(tmp_path / f"r{trial}.arrow")
        schema = pa.schema([("text", pa.large_string())])
        with ipc.new_stream(path, schema) as w:
            start = 0
            for size in sizes:
                w.write_batch(pa.record_batch([pa.array(texts[start:start + size], pa.large_string())],
                                              schema=schema))
                start += size
        (source,) = readers.resolve_inputs([path])
        unit_rows = rng.choice([1, 3, 50, 400])
        units = readers.plan_units([source], unit_rows=unit_rows)
        got = [t for u in units for b in readers.read_unit(u) for t in b.to_pylist()]
        assert got == texts, (sizes, unit_rows)


def _encode(path_or_data, tok_path, out, workers, unit_rows):
    encode_corpus(path_or_data, tokenizer=tok_path, output=str(out), workers=workers, show_progress=False,
                  shard_tokens=5_000, unit_rows=unit_rows)
    return tree(str(out))


def _documents(out):
    shards = TokenShards(str(out))
    return [shards.doc(i).tolist() for i in range(len(shards))], [shards.source(i)[1] for i in range(len(shards))]


@pytest.fixture(scope="module")
def tok_path(tmp_path_factory, texts):
    tok = train(iter([t for t in texts[:1500] if t]), vocab_size=512 + 200 + 1, workers=1, show_progress=False)
    path = tmp_path_factory.mktemp("tok") / "tok.json"
    tok.save(path)
    return str(path)


def test_shards_carry_the_same_documents_for_any_unit_size(files, tok_path, tmp_path, texts):
    path = files[("arrow_file", "zstd")]
    results = []
    for rows in (400, 10**9):
        _encode([path], tok_path, tmp_path / f"u{rows}", 1, rows)
        results.append(_documents(tmp_path / f"u{rows}"))
    assert results[0] == results[1]
    assert results[0][1] == [r for r, t in enumerate(texts) if t is not None]   # provenance: the file's rows
    with open(tmp_path / "u400" / "MANIFEST.json") as f:
        manifest = json.load(f)
    assert manifest["options"]["arrow_units"] == "batches"
    assert len({s["unit_id"] for s in manifest["shards"]}) > 3


def test_in_memory_spill_is_cut_at_its_batches(tok_path, tmp_path, texts):
    """An in-memory table is spilled to ``units/in-memory.arrows`` one batch of
    documents at a time; its units are whole spill batches and the shards hold
    every document once, in order."""
    data = pa.table({"text": texts})
    _encode(data, tok_path, tmp_path / "m", 1, 1500)
    with open(tmp_path / "m" / "MANIFEST.json") as f:
        manifest = json.load(f)
    units = sorted({s["unit_id"] for s in manifest["shards"]})
    assert len(units) > 2
    ids, rows = _documents(tmp_path / "m")
    assert len(ids) == sum(t is not None for t in texts)
    assert rows == list(range(len(ids)))   # the spill numbers the documents it wrote
    _encode(data, tok_path, tmp_path / "m1", 1, 10**9)
    assert _documents(tmp_path / "m1")[0] == ids


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["arrow_file", "arrow_stream"])
def test_shards_are_the_same_bytes_for_any_worker_count(files, tok_path, tmp_path, kind):
    path = files[(kind, None)]
    base = _encode([path], tok_path, tmp_path / "w1", 1, 400)
    assert _encode([path], tok_path, tmp_path / "w2", 2, 400) == base
    assert _encode([path], tok_path, tmp_path / "w3", 3, 400) == base


@pytest.mark.slow
def test_in_memory_spill_shards_are_the_same_bytes_for_any_worker_count(tok_path, tmp_path, texts):
    data = pa.table({"text": texts})
    base = _encode(data, tok_path, tmp_path / "w1", 1, 1500)
    assert _encode(data, tok_path, tmp_path / "w2", 2, 1500) == base


@pytest.mark.slow
def test_tokenizer_is_the_same_bytes_for_any_worker_count_and_unit_size(files, tmp_path):
    path = files[("arrow_stream", "zstd")]
    got = {(workers, rows): train([path], vocab_size=512 + 150 + 1, workers=workers, show_progress=False,
                                  unit_rows=rows, work_dir=str(tmp_path / f"w{workers}-{rows}")).to_json()
           for workers, rows in ((1, 10**9), (1, 400), (2, 400), (3, 250))}
    assert got[(1, 400)] == got[(2, 400)]                 # any worker count: the same bytes
    merged = {key: json.loads(text) for key, text in got.items()}
    for doc in merged.values():
        doc["training"].pop("unit_rows")                  # any unit size: the same, but for the option recorded
    assert merged[(1, 10**9)] == merged[(1, 400)] == merged[(3, 250)]

