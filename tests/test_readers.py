"""Readers: the same real multilingual documents come out of every format,
with and without unit splitting; bad inputs fail (or are counted) with the
file and the place in the message.  Truth is the fixture text read with
zstandard + json, Python's codecs and str.split."""
import gzip
import io
import json
import os
import random
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from ube_stream.errors import InputError
from ube_stream.readers import SkipCounter, TextBatch, iter_batches, iter_texts, plan_units, read_unit, resolve_inputs
from ube_stream.readers import compression as _compression

DATA = os.path.join(os.path.dirname(__file__), "data")


def _fixture_records(name):
    with open(os.path.join(DATA, name), "rb") as f:
        reader = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(f), encoding="utf-8")
        return [json.loads(line) for line in reader]


@pytest.fixture(scope="module")
def docs():
    """~5k one-line documents in many languages and scripts, with empty ones."""
    parallel = [r["text"] for r in _fixture_records("parallel_sample.jsonl.zst")][::5]
    handbook_lines = [line for r in _fixture_records("docs_sample.jsonl.zst") for line in r["text"].split("\n")]
    chosen = parallel + handbook_lines[::20] + ["", "", "tab\tand\u2028ls\u0085nel"]
    random.Random(7).shuffle(chosen)
    chosen = [t for t in chosen if "\n" not in t and "\r" not in t]
    assert len(chosen) > 4000 and len({t for t in chosen if not t.isascii()}) > 1000
    return chosen


def _write_text_like(path, data: bytes, compression):
    if compression == "zstd":
        # two frames, to exercise concatenated-frame reading
        half = len(data) // 2
        cctx = zstandard.ZstdCompressor()
        data = cctx.compress(data[:half]) + cctx.compress(data[half:])
    elif compression == "gzip":
        data = gzip.compress(data)
    with open(path, "wb") as f:
        f.write(data)


@pytest.fixture(scope="module")
def corpus(docs, tmp_path_factory):
    """The documents in every format: {name: path}."""
    root = tmp_path_factory.mktemp("corpus")
    table = pa.table({"id": list(range(len(docs))), "text": docs})
    paths = {}
    paths["parquet"] = root / "c.parquet"
    pq.write_table(table, paths["parquet"], row_group_size=700)
    assert pq.ParquetFile(paths["parquet"]).metadata.num_row_groups > 5
    batches = table.to_batches(max_chunksize=450)
    paths["arrow_file"] = root / "c.arrow"
    with ipc.new_file(str(paths["arrow_file"]), table.schema) as w:
        for b in batches:
            w.write_batch(b)
    paths["arrow_stream"] = root / "c_stream.arrow"
    with ipc.new_stream(str(paths["arrow_stream"]), table.schema) as w:
        for b in batches:
            w.write_batch(b)
    paths["feather"] = root / "c.feather"
    feather.write_feather(table, str(paths["feather"]), chunksize=333)  # lz4-compressed Arrow IPC file
    jsonl = "".join(json.dumps({"id": i, "text": t}, ensure_ascii=i % 2 == 0) + "\n" for i, t in enumerate(docs))
    text = "".join(t + "\n" for t in docs)
    for ext, compression in (("", None), (".zst", "zstd"), (".gz", "gzip")):
        paths["jsonl" + ext] = root / f"c.jsonl{ext}"
        _write_text_like(paths["jsonl" + ext], jsonl.encode(), compression)
        paths["txt" + ext] = root / f"c.txt{ext}"
        _write_text_like(paths["txt" + ext], text.encode(), compression)
    import datasets
    paths["hf_dataset"] = root / "hf"
    datasets.Dataset.from_dict({"text": docs}).save_to_disk(str(paths["hf_dataset"]), num_shards=3)
    return {name: str(p) for name, p in paths.items()}


def _group_sizes(source):
    """Rows of each Parquet row group or Arrow record batch of ``source``, as pyarrow reads them."""
    if source.format == "parquet":
        meta = pq.ParquetFile(source.path).metadata
        return {meta.row_group(g).num_rows for g in range(meta.num_row_groups)}
    if source.format in ("arrow_file", "feather"):
        reader = ipc.open_file(source.path)
        return {reader.get_batch(i).num_rows for i in range(reader.num_record_batches)}
    if source.format == "arrow_stream":
        return {b.num_rows for b in ipc.open_stream(source.path)}
    return set()


def _read_all(units, **kwargs):
    texts, provenance = [], []
    for unit in units:
        for batch in read_unit(unit, **kwargs):
            assert len(batch) <= kwargs.get("batch_rows", 1024)
            texts.extend(batch.to_pylist())
            provenance.extend((batch.source_id, int(r)) for r in batch.rows)
    return texts, provenance


def _check_cover(units):
    """Units of each source are contiguous from row 0, ids unique and sorted."""
    ids = [u.unit_id for u in units]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    by_source = {}
    for u in units:
        by_source.setdefault(u.source.source_id, []).append(u)
    for source_units in by_source.values():
        assert source_units[0].row_start == 0
        for prev, nxt in zip(source_units, source_units[1:]):
            assert prev.row_stop == nxt.row_start
        last = source_units[-1]
        assert last.row_stop in (None, last.source.num_rows) or last.source.num_rows is None


FORMATS = ["parquet", "arrow_file", "arrow_stream", "feather", "jsonl", "jsonl.zst", "jsonl.gz",
           "txt", "txt.zst", "txt.gz", "hf_dataset"]


@pytest.mark.parametrize("name", ["jsonl", "jsonl.zst", "txt"])
def test_line_file_batches_hold_one_block_of_text(corpus, docs, name, monkeypatch):
    """A batch of a line file never joins blocks: its text is at most one block
    plus the end of the line the block before cut, and at most batch_rows
    documents; the batches in order are the documents."""
    monkeypatch.setattr(_compression, "BLOCK_BYTES", 5000)
    longest = max(len(json.dumps({"text": d}, ensure_ascii=False).encode()) for d in docs)
    texts = []
    for batch in iter_batches(corpus[name], batch_rows=300):
        data, offsets = batch.utf8()
        assert len(batch) <= 300
        assert offsets[-1] - offsets[0] <= 5000 + longest
        texts += batch.to_pylist()
    assert texts == docs


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("unit_rows", [None, 777])
def test_every_format_gives_the_same_documents(corpus, docs, name, unit_rows, monkeypatch):
    monkeypatch.setattr(_compression, "BLOCK_BYTES", 5000)  # many blocks and lines cut across them
    sources = resolve_inputs(corpus[name])
    units = plan_units(sources, unit_rows=unit_rows)
    _check_cover(units)
    texts, provenance = _read_all(units, batch_rows=300)
    assert texts == docs
    if name == "hf_dataset":
        assert len(sources) == 3 and all(s.format == "arrow_stream" for s in sources)
        expected = [(s.source_id, r) for s in sources for r in range(s.num_rows)]
    else:
        assert len(sources) == 1
        expected = [(0, r) for r in range(len(docs))]
    assert provenance == expected
    splittable = name not in ("jsonl.zst", "jsonl.gz", "txt.zst", "txt.gz")
    if unit_rows and splittable:
        assert len(units) >= len(docs) // unit_rows
        # at most unit_rows rows, or one row group / record batch alone (units are whole groups and batches)
        assert all(u.row_stop - u.row_start <= unit_rows or u.row_stop - u.row_start in _group_sizes(u.source)
                   for u in units)
    elif unit_rows and name.endswith(".zst"):   # two zstd frames (_write_text_like): a unit each
        assert len(units) == 2 and units[1].zstd_frames is not None
    else:
        assert len(units) == len(sources)


def test_format_and_compression_are_detected(corpus):
    seen = {os.path.basename(s.path): (s.format, s.compression, s.num_rows is not None)
            for s in resolve_inputs(sorted(p for n, p in corpus.items() if n != "hf_dataset"))}
    assert seen == {
        "c.parquet": ("parquet", None, True), "c.arrow": ("arrow_file", None, True),
        "c_stream.arrow": ("arrow_stream", None, True), "c.feather": ("feather", None, True),
        "c.jsonl": ("jsonl", None, False), "c.jsonl.zst": ("jsonl", "zstd", False),
        "c.jsonl.gz": ("jsonl", "gzip", False), "c.txt": ("text", None, False),
        "c.txt.zst": ("text", "zstd", False), "c.txt.gz": ("text", "gzip", False),
    }


def test_plan_is_independent_of_input_order_and_duplicates(corpus):
    paths = [corpus[n] for n in FORMATS]
    plan = [(u.unit_id, u.source.path, u.row_start, u.row_stop, u.byte_start)
            for u in plan_units(resolve_inputs(paths), unit_rows=1000)]
    shuffled = paths[::-1] + [corpus["txt"], os.path.dirname(corpus["parquet"]) + "/c.parq*"]
    again = [(u.unit_id, u.source.path, u.row_start, u.row_stop, u.byte_start)
             for u in plan_units(resolve_inputs(shuffled), unit_rows=1000)]
    assert plan == again
    # the directory holds exactly these files, so walking it gives the same plan
    walked = [(u.unit_id, u.source.path) for u in plan_units(resolve_inputs(os.path.dirname(corpus["txt"])),
                                                             unit_rows=1000)]
    assert walked == [p[:2] for p in plan]


def test_plain_line_units_seek_to_their_rows(corpus, docs):
    for name in ("jsonl", "txt"):
        units = plan_units(resolve_inputs(corpus[name]), unit_rows=1000)
        middle = units[2]
        assert middle.byte_start > 0 and middle.unit_id == "00000-000000002000"
        texts, provenance = _read_all([middle])
        assert texts == docs[2000:3000] and provenance == [(0, r) for r in range(2000, 3000)]


def _utf8_truth(texts):
    encoded = [t.encode("utf-8") for t in texts]
    return b"".join(encoded), np.cumsum([0] + [len(e) for e in encoded])


@pytest.mark.parametrize("name", ["parquet", "arrow_stream", "jsonl", "txt.zst"])
def test_utf8_buffers_equal_the_encoding(corpus, name):
    for batch in iter_batches(corpus[name], batch_rows=500):
        data, offsets = batch.utf8()
        want_data, want_offsets = _utf8_truth(batch.to_pylist())
        assert data.dtype == np.uint8 and offsets.dtype == np.int64
        assert data.tobytes() == want_data and offsets.tolist() == want_offsets.tolist()


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string()])
def test_utf8_of_sliced_arrow_arrays_is_zero_copy(docs, kind):
    array = pa.array(docs[:50], type=kind).slice(7, 20)
    batch = TextBatch(array, np.arange(20), 0)
    data, offsets = batch.utf8()
    want_data, want_offsets = _utf8_truth(docs[7:27])
    assert data.tobytes() == want_data and offsets.tolist() == want_offsets.tolist()
    assert np.shares_memory(data, np.frombuffer(array.buffers()[2], np.uint8))
    empty = TextBatch(pa.array(["", ""], type=kind), np.arange(2), 0).utf8()
    assert empty[0].size == 0 and empty[1].tolist() == [0, 0, 0]


def _line_truth(data: bytes):
    """Documents of a text file by the documented rule, with str.split."""
    lines = data.decode("utf-8").split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def test_text_lines_crlf_u2028_nel_and_empty_lines(tmp_path):
    raw = "a\r\nb\u2028c\x85d\n\n\re\r\r\n\u2029\rlast".encode()
    path = tmp_path / "t.txt"
    path.write_bytes(raw)
    assert list(iter_texts(str(path))) == ["a", "b\u2028c\x85d", "", "\re\r", "\u2029\rlast"]
    assert list(iter_texts(str(path))) == _line_truth(raw)
    path.write_bytes(b"x\n")
    assert list(iter_texts(str(path))) == ["x"]
    path.write_bytes(b"\n")
    assert list(iter_texts(str(path))) == [""]
    path.write_bytes(b"")
    assert list(iter_texts(str(path))) == []
    assert [u.row_stop for u in plan_units(resolve_inputs(str(path)), unit_rows=10)] == [0]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=40), st.integers(1, 9), st.integers(1, 12),
       st.integers(1, 120), st.booleans(), st.booleans())
def test_units_end_at_a_byte_budget_too(tmp_path_factory, lengths, block, unit_rows, unit_bytes, newline_at_end,
                                        even):
    """A unit of an uncompressed line file ends after ``unit_rows`` rows or at the end
    of the first line that reaches ``unit_bytes`` bytes from the unit's start (checked
    against a plain walk over the lines), whatever the read block size; with
    ``even_bytes`` the budget is ``unit_bytes`` shared out evenly over the file."""
    raw = b"\n".join(b"x" * n for n in lengths) + (b"\n" if newline_at_end and lengths else b"")
    path = tmp_path_factory.mktemp("b") / "t.txt"
    path.write_bytes(raw)
    budget = unit_bytes
    if even and len(raw) > unit_bytes:
        pieces = -(-len(raw) // unit_bytes)       # ceil: the units a plain budget gives at least
        budget = -(-len(raw) // pieces)
    want, row, pos, start = [(0, 0)], 0, 0, (0, 0)
    lines = raw.split(b"\n")[:-1] if raw.endswith(b"\n") else raw.split(b"\n") if raw else []
    for line in lines[:-1]:   # a cut after the last line starts no unit
        row, pos = row + 1, pos + len(line) + 1
        if row - start[0] >= unit_rows or pos - start[1] >= budget:
            start = (row, pos)
            want.append(start)
    old = _compression.BLOCK_BYTES
    _compression.BLOCK_BYTES = block
    try:
        units = plan_units(resolve_inputs(str(path)), unit_rows=unit_rows, unit_bytes=unit_bytes, even_bytes=even)
        texts, provenance = _read_all(units)
    finally:
        _compression.BLOCK_BYTES = old
    assert [(u.row_start, u.byte_start or 0) for u in units] == want
    assert [u.row_stop for u in units] == [r for r, _ in want[1:]] + [len(lines)]
    assert texts == [line.decode() for line in lines] and provenance == [(0, r) for r in range(len(lines))]


def test_even_byte_units_are_about_equal(tmp_path):
    """100 lines of 101 bytes, budget 4000: plain cuts give 4040 + 4040 + 2020 bytes
    (the last unit half the others), even cuts three units within one line of each other."""
    path = tmp_path / "t.txt"
    path.write_bytes(b"".join(b"%100d\n" % i for i in range(100)))

    def sizes(even):
        units = plan_units(resolve_inputs(str(path)), unit_rows=1000, unit_bytes=4000, even_bytes=even)
        return [101 * (u.row_stop - u.row_start) for u in units]

    assert sizes(False) == [4040, 4040, 2020]
    assert sizes(True) == [3434, 3434, 3232]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["\n", "\r", "\r\n", "a", "é", "性", "😀", "\u2028", "\x85", " "]), max_size=60),
       st.integers(1, 9), st.sampled_from([None, 3]))
def test_text_lines_property(tmp_path_factory, pieces, block, unit_rows):
    raw = "".join(pieces).encode()
    path = tmp_path_factory.mktemp("p") / "t.txt"
    path.write_bytes(raw)
    old = _compression.BLOCK_BYTES
    _compression.BLOCK_BYTES = block
    try:
        texts, provenance = _read_all(plan_units(resolve_inputs(str(path)), unit_rows=unit_rows))
    finally:
        _compression.BLOCK_BYTES = old
    want = _line_truth(raw) if raw else []
    assert texts == want and provenance == [(0, r) for r in range(len(want))]


def test_text_file_mode(tmp_path):
    raw = "one\r\ndocument\u2028whole\n".encode()
    (tmp_path / "a.txt.gz").write_bytes(gzip.compress(raw))
    (tmp_path / "b.txt").write_bytes(b"")
    sources = resolve_inputs(str(tmp_path), text_mode="file")
    assert [s.num_rows for s in sources] == [1, 1]
    assert list(iter_texts(str(tmp_path), text_mode="file")) == [raw.decode(), ""]


def test_nulls_are_skipped_and_counted(tmp_path):
    path = str(tmp_path / "n.parquet")
    pq.write_table(pa.table({"text": ["a", None, "", None, "b"]}), path, row_group_size=2)
    skips = SkipCounter()
    texts, provenance = _read_all(plan_units(resolve_inputs(path), unit_rows=2), skips=skips)
    assert texts == ["a", "", "b"] and provenance == [(0, 0), (0, 2), (0, 4)]
    assert skips.counts == {"null": 2}
    assert [(e.row, e.reason) for e in skips.examples] == [(1, "null"), (3, "null")]


# --------------------------------------------------------------------------- errors

def _error(inputs, **kwargs):
    with pytest.raises(InputError) as info:
        list(iter_texts(inputs, **kwargs))
    return info.value


def test_missing_and_non_text_columns(tmp_path):
    path = str(tmp_path / "c.parquet")
    pq.write_table(pa.table({"body": ["x"], "n": [1]}), path)
    err = _error(path)
    assert path in str(err) and "'text'" in str(err) and "'body', 'n'" in str(err)
    err = _error(path, column="n")
    assert "int64" in str(err) and err.reason == "not_string"
    stream = str(tmp_path / "s.arrow")
    with ipc.new_stream(stream, pa.schema([("body", pa.string())])) as w:
        w.write_batch(pa.record_batch([pa.array(["x"])], names=["body"]))
    assert "'body'" in str(_error(stream, on_error="skip"))  # a wrong column is never skipped


def test_invalid_utf8_in_text_names_row_and_byte(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes("ok\nné\n".encode() + b"ab\xffcd\nlast\n")
    err = _error(str(path))
    assert str(path) in str(err) and "row 2:" in str(err) and "byte offset 9" in str(err)
    assert (err.row, err.offset, err.reason) == (2, 9, "invalid_utf8")
    skips = SkipCounter()
    assert list(iter_texts(str(path), on_error="skip", skips=skips)) == ["ok", "né", "last"]
    assert skips.counts == {"invalid_utf8": 1}


JSONL_CASES = [
    (b'{"text": "ok"}\n', None, None),
    (b'{"text": "caf\xc3"}\n', "invalid_utf8", "byte offset 28"),
    (b'{"text": "x",}\n', "invalid_json", "row 2 (byte offset"),
    (b'["text"]\n', "not_object", "found a list"),
    (b'{"body": "x"}\n', "missing_field", "'body'"),
    (b'{"text": 5}\n', "not_string", "found int"),
    (b'{"text": "a\\ud800b"}\n', "invalid_text", "U+D800"),
    (b'{"text": null}\n', None, None),
    (b'\n', None, None),
    (b'{"text": ""}\n', None, None),
]


def test_jsonl_errors_and_exact_skip_counts(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"".join(line for line, _, _ in JSONL_CASES))
    for i, (line, reason, needle) in enumerate(JSONL_CASES):
        if reason is None:
            continue
        one = tmp_path / f"one{i}.jsonl"
        one.write_bytes(b'{"text": "ok"}\n' * i + line)
        err = _error(str(one))
        assert err.reason == reason and err.row == i and str(one) in str(err) and f"row {i}" in str(err)
        assert needle in str(err)
    err = _error(str(path))
    assert err.reason == "invalid_utf8" and err.offset == 28 and "byte offset 28" in str(err)
    skips = SkipCounter()
    texts, provenance = _read_all(plan_units(resolve_inputs(str(path), on_error="skip"), unit_rows=4),
                                  on_error="skip", skips=skips)
    assert texts == ["ok", ""] and provenance == [(0, 0), (0, 9)]
    assert skips.counts == {"blank_line": 1, "invalid_json": 1, "invalid_text": 1, "invalid_utf8": 1,
                            "missing_field": 1, "not_object": 1, "not_string": 1, "null": 1}
    assert list(skips.counts) == sorted(skips.counts)
    assert [e.row for e in skips.examples] == [1, 2, 3, 4, 5]


def _docs_bytes(n):
    return "".join(f"документ {i} 文档\n" for i in range(n)).encode()


@pytest.mark.parametrize("compression", ["zstd", "gzip"])
def test_truncated_compressed_file(tmp_path, compression, monkeypatch):
    raw = _docs_bytes(3000)
    packed = zstandard.ZstdCompressor().compress(raw) if compression == "zstd" else gzip.compress(raw)
    path = tmp_path / ("t.txt.zst" if compression == "zstd" else "t.txt.gz")
    path.write_bytes(packed[: len(packed) * 2 // 3])
    err = _error(str(path))
    assert err.reason == "truncated_file" and str(path) in str(err) and "byte offset" in str(err)
    skips = SkipCounter()
    texts = list(iter_texts(str(path), on_error="skip", skips=skips))
    # the stream fails its check, so the whole unit is discarded (its rows before the damage
    # were never verified) and counted with the rows decoded before the damage (at least 1)
    assert texts == [] and list(skips.counts) == ["truncated_file"]
    decoded = _line_truth(raw)
    assert 1 <= skips.counts["truncated_file"] <= len(decoded)
    if compression == "gzip":   # gzip decodes as it goes: every complete line before the cut is counted
        assert skips.counts["truncated_file"] > len(decoded) // 2
    assert "whole file" in skips.examples[0].message


def test_corrupt_compressed_and_parquet_files(tmp_path):
    bad_zst = tmp_path / "g.jsonl.zst"
    bad_zst.write_bytes(b"this is not zstd at all\n")
    err = _error(str(bad_zst))
    assert err.reason == "corrupt_file" and str(bad_zst) in str(err)
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"text": ["x"] * 100}), str(path))
    path.write_bytes(path.read_bytes()[:-40])
    err = _error(str(path))
    assert err.reason == "corrupt_file" and str(path) in str(err) and "Re-download" in str(err)
    skips = SkipCounter()
    assert list(iter_texts([str(path), str(bad_zst)], on_error="skip", skips=skips)) == []
    assert skips.counts == {"corrupt_file": 2}


def test_missing_paths_and_unknown_formats(tmp_path):
    err = _error(str(tmp_path / "nope.parquet"))
    assert "nope.parquet" in str(err) and "no such file" in str(err)
    assert "no file matches" in str(_error(str(tmp_path / "*.jsonl")))
    odd = tmp_path / "data.bin"
    odd.write_bytes(b"hello")
    err = _error(str(odd))
    assert err.reason == "unknown_format" and "data.bin" in str(err) and "format=" in str(err)
    assert list(iter_texts(str(odd), format="text")) == ["hello"]
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "README.md").write_text("not a corpus file")
    with pytest.raises(InputError, match="no readable files"):
        resolve_inputs(str(tmp_path / "docs"))
    with pytest.raises(InputError, match="iter"):
        list(iter_texts(["not a path, a text"]))


# --------------------------------------------------------------------------- in-memory inputs

def test_in_memory_inputs(docs):
    import datasets

    assert list(iter_texts(iter(docs[:100]))) == docs[:100]
    assert list(iter_texts(d for d in [{"text": "a"}, {"text": None}, {"text": "b"}])) == ["a", "b"]
    ds = datasets.Dataset.from_dict({"text": docs[:300], "n": list(range(300))})
    picked = ds.select(range(299, -1, -3))  # an indices mapping: order must follow it
    assert list(iter_texts(picked)) == docs[299::-3]
    assert list(iter_texts(ds.to_iterable_dataset())) == docs[:300]
    assert list(iter_texts(pa.table({"text": docs[:10]}))) == docs[:10]
    skips = SkipCounter()
    assert list(iter_texts(iter(["a", "\udc80", None, "b"]), on_error="skip", skips=skips)) == ["a", "b"]
    assert skips.counts == {"invalid_text": 1, "null": 1}
    with pytest.raises(InputError, match="'n'"):
        list(iter_texts(ds, column="missing"))
    with pytest.raises(InputError, match="split"):
        list(iter_texts(datasets.DatasetDict({"train": ds})))


def test_skip_counter_merge_is_order_independent():
    parts = []
    for k in range(4):
        c = SkipCounter(max_examples=3)
        for row in range(k, 12, 4):
            c.add("invalid_json" if row % 3 else "null", path=f"f{row % 2}", row=row, message="m")
        parts.append(c)
    a = SkipCounter(max_examples=3)
    b = SkipCounter(max_examples=3)
    for c in parts:
        a.merge(c)
    for c in reversed(parts):
        b.merge(c)
    assert a.to_dict() == b.to_dict()
    assert a.counts == {"invalid_json": 8, "null": 4} and a.total == 12
    assert [(e.path, e.row) for e in a.examples] == [("f0", 0), ("f0", 2), ("f0", 4)]
    assert SkipCounter.from_dict(a.to_dict(), max_examples=3).to_dict() == a.to_dict()


def test_import_is_lazy():
    code = ("import sys, ube_stream.readers; print(','.join(m for m in ('pyarrow', 'datasets') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(DATA)))
    assert out.stdout.strip() == ""


def test_other_arrow_text_layouts(tmp_path, docs):
    """Dictionary-encoded, string_view and all-null columns (Feather v1: tests/test_input_limits.py)."""
    table = pa.table({"text": pa.array(["b", "a", None, "b"]).dictionary_encode(),
                      "view": pa.array(["x", "", "y", None], type=pa.string_view()),
                      "none": pa.nulls(4)})
    path = str(tmp_path / "layouts.parquet")
    pq.write_table(table, path)
    arrow_path = str(tmp_path / "layouts.arrow")
    with ipc.new_file(arrow_path, table.schema) as w:
        w.write_table(table)
    for p in (path, arrow_path):
        assert list(iter_texts(p)) == ["b", "a", "b"]
        skips = SkipCounter()
        batches = list(iter_batches(p, column="view", skips=skips))
        assert [b.to_pylist() for b in batches] == [["x", "", "y"]] and skips.counts == {"null": 1}
        assert batches[0].utf8()[0].tobytes() == b"xy"
        skips = SkipCounter()
        assert list(iter_texts(p, column="none", skips=skips)) == [] and skips.counts == {"null": 4}


def test_invalid_utf8_inside_an_arrow_stream(tmp_path):
    data = pa.py_buffer(b"okbad\xffyes")
    offsets = pa.py_buffer(np.array([0, 2, 6, 9], dtype=np.int32))
    array = pa.StringArray.from_buffers(3, offsets, data)
    path = str(tmp_path / "s.arrow")
    with ipc.new_stream(path, pa.schema([("text", pa.string())])) as w:
        w.write_batch(pa.record_batch([array], names=["text"]))
    err = _error(path)
    assert (err.reason, err.row, err.offset) == ("invalid_utf8", 1, 3) and path in str(err) and "row 1" in str(err)
    skips = SkipCounter()
    assert list(iter_texts(path, on_error="skip", skips=skips)) == ["ok", "yes"]
    assert skips.counts == {"invalid_utf8": 1}


def test_dataset_dict_directory_and_picklable_units(tmp_path, docs):
    import pickle

    import datasets

    root = tmp_path / "dd"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": docs[:40]}),
                          "test": datasets.Dataset.from_dict({"text": docs[40:50]})}).save_to_disk(str(root))
    (root / "train" / "cache-stray.arrow").write_bytes(b"not listed in state.json")
    # the whole folder would mix train and test: refused, naming the splits and the fix
    with pytest.raises(InputError, match=r"DatasetDict folder with splits 'train', 'test'; .* split='train'"):
        resolve_inputs(str(root))
    sources = resolve_inputs(str(root / "train"))
    assert [os.path.relpath(s.path, root).split(os.sep)[0] for s in sources] == ["train"]
    assert list(iter_texts(str(root / "train"))) == docs[:40]
    assert list(iter_texts(str(root / "test"))) == docs[40:50]
    units = plan_units(sources, unit_rows=16)
    # save_to_disk wrote the 40 rows as one record batch: one unit (units are whole batches)
    assert [b.num_rows for b in ipc.open_stream(sources[0].path)] == [40]
    assert [(u.unit_id, u.row_stop) for u in units] == [("00000-000000000000", 40)]
    units = plan_units(sources, unit_rows=16, arrow_batches=False)   # the row cuts of older directories
    assert [u.unit_id for u in units] == ["00000-000000000000", "00000-000000000016", "00000-000000000032"]
    assert pickle.loads(pickle.dumps(units)) == units


def test_json_suffix_is_json_lines_and_a_json_array_is_refused(tmp_path):
    import gzip

    rows = ["première ligne", "第二行", ""]
    (tmp_path / "d").mkdir()
    lines = "".join(json.dumps({"text": r}, ensure_ascii=False) + "\n" for r in rows)
    (tmp_path / "d" / "a.json").write_text(lines, encoding="utf-8")
    with gzip.open(tmp_path / "d" / "b.json.gz", "wt", encoding="utf-8") as f:
        f.write(lines)
    assert [s.format for s in resolve_inputs(str(tmp_path / "d"))] == ["jsonl", "jsonl"]   # found by the walk
    assert list(iter_texts(str(tmp_path / "d"))) == rows + rows
    (tmp_path / "arr.json").write_text(json.dumps([{"text": "x"}]))
    with pytest.raises(InputError, match=r"arr\.json: a JSON array, not JSON Lines"):
        resolve_inputs(str(tmp_path / "arr.json"))


# --------------------------------------------------------------------------- content sniffing, --format

def _jsonl_bytes(texts):
    return "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts).encode("utf-8")


def test_content_sniffing_decides_when_the_name_does_not(tmp_path, docs):
    from ube_stream.readers.formats import detect_format

    texts = docs[:200]
    (tmp_path / "jsonl_no_suffix").write_bytes(_jsonl_bytes(texts))
    (tmp_path / "gzip_no_suffix").write_bytes(gzip.compress(_jsonl_bytes(texts)))
    (tmp_path / "part.zst").write_bytes(zstandard.ZstdCompressor().compress(_jsonl_bytes(texts)))
    pq.write_table(pa.table({"text": texts}), tmp_path / "parquet_blob")
    feather.write_feather(pa.table({"text": texts}), tmp_path / "arrow_blob", compression="uncompressed")
    with ipc.new_stream(str(tmp_path / "stream_blob"), pa.schema([("text", pa.string())])) as w:
        w.write_table(pa.table({"text": texts}))
    expected = {"jsonl_no_suffix": ("jsonl", None), "gzip_no_suffix": ("jsonl", "gzip"),
                "part.zst": ("jsonl", "zstd"), "parquet_blob": ("parquet", None),
                "arrow_blob": ("arrow_file", None), "stream_blob": ("arrow_stream", None)}
    for name, fmt in expected.items():
        path = str(tmp_path / name)
        assert detect_format(path) == fmt, name
        assert list(iter_texts(path)) == texts, name
    # plain text is never guessed; the error says how to name it, and format= reads it
    (tmp_path / "notes").write_text("one\ntwo\n", encoding="utf-8")
    err = _error(str(tmp_path / "notes"))
    assert err.reason == "unknown_format" and "notes" in str(err) and 'format="text"' in str(err)
    assert list(iter_texts(str(tmp_path / "notes"), format="text")) == ["one", "two"]
    # a JSON-looking first line that is not an object is not JSON Lines
    (tmp_path / "array_lines").write_text('["a"]\n', encoding="utf-8")
    assert _error(str(tmp_path / "array_lines")).reason == "unknown_format"
    # format= is checked once, with the accepted names in the message
    with pytest.raises(ValueError, match="format must be one of parquet, arrow_file"):
        resolve_inputs(str(tmp_path / "notes"), format="csv")
    # a forced line format still notices compression by its magic bytes
    assert list(iter_texts(str(tmp_path / "gzip_no_suffix"), format="jsonl")) == texts


def test_directory_walk_lists_every_skipped_file_with_its_reason(tmp_path, docs):
    from ube_stream.readers import SkippedFile

    root = tmp_path / "corpus"
    (root / "_tmp").mkdir(parents=True)
    (root / "_tmp" / "half.jsonl").write_bytes(_jsonl_bytes(["hidden folder"]))
    (root / "a.jsonl").write_bytes(_jsonl_bytes(docs[:5]))
    (root / "b_no_suffix").write_bytes(_jsonl_bytes(docs[5:9]))   # sniffed: JSON Lines, read
    (root / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    (root / "README.md").write_text("# about this corpus\n", encoding="utf-8")
    (root / "stats.csv").write_text("lang,n\nen,5\n", encoding="utf-8")
    skipped = []
    sources = resolve_inputs(str(root), skipped_files=skipped)
    assert [os.path.basename(s.path) for s in sources] == ["a.jsonl", "b_no_suffix"]
    assert list(iter_texts(str(root))) == docs[:9]
    hidden = "hidden name (starts with '.' or '_')"
    unknown = "format not recognised from the name or the content (choose one with --format / format=)"
    assert skipped == sorted([SkippedFile(str(root / ".DS_Store"), hidden),
                              SkippedFile(str(root / "README.md"), unknown),
                              SkippedFile(str(root / "_tmp") + "/", hidden),
                              SkippedFile(str(root / "stats.csv"), unknown)])
    assert all(os.path.isabs(s.path) for s in skipped)


@pytest.mark.parametrize("kind", ["arrow_file", "arrow_stream"])
@pytest.mark.parametrize("claimed", [1, 3, 7])
def test_a_null_count_that_disagrees_with_the_validity_bitmap_is_an_input_error(tmp_path, kind, claimed):
    """Issue 26: an IPC file whose record batch says it has ``claimed`` nulls
    while its validity bitmap clears 2 bits (the null count of a FieldNode
    damaged; truth: the bytes written by pyarrow, the node found by its packed
    (length, null_count)).  on_error="raise": an InputError naming the file and
    the batch's rows; "skip": that batch's rows counted as corrupt_array, the
    other batches read."""
    import struct

    rows = ["aa", "bb", "cc", "dd", "ee", "ff", "gg", "hh", "ii", "jj", "kk", "ll", "mm", "nn"]
    second = pa.array(rows[7:], mask=np.array([0, 1, 0, 1, 0, 0, 0], dtype=bool))
    table = pa.Table.from_batches([pa.record_batch({"text": pa.array(rows[:7])}),
                                   pa.record_batch({"text": second})])
    path = tmp_path / f"t.{kind}"
    with (ipc.new_file if kind == "arrow_file" else ipc.new_stream)(str(path), table.schema) as w:
        w.write_table(table)
    raw = path.read_bytes()
    node = struct.pack("<qq", 7, 2)
    assert raw.count(node) == 1
    path.write_bytes(raw.replace(node, struct.pack("<qq", 7, claimed)))
    with pytest.raises(InputError) as info:
        list(iter_texts(str(path), format=kind))
    assert str(info.value).startswith(f"{path}: rows 7..13: the Arrow array's null count ({claimed}) disagrees with "
                                      f"its validity bitmap (2 nulls)")
    assert (info.value.path, info.value.row, info.value.reason) == (str(path), 7, "corrupt_array")
    skips = SkipCounter()
    assert list(iter_texts(str(path), format=kind, on_error="skip", skips=skips)) == rows[:7]
    assert skips.counts == {"corrupt_array": 7}
    # the clean file: nulls skipped and counted, nothing else
    path.write_bytes(raw)
    skips = SkipCounter()
    assert list(iter_texts(str(path), format=kind, skips=skips)) == [r for i, r in enumerate(rows) if i not in (8, 10)]
    assert skips.counts == {"null": 2}


def _damage(doc, how):
    if how == "filename_out":
        doc["_data_files"][0]["filename"] = "../../../etc/passwd"
    elif how == "filename_type":
        doc["_data_files"][1]["filename"] = 7
    elif how == "files_missing":
        del doc["_data_files"]
    elif how == "files_nested":
        doc["_data_files"] = [[[{"filename": "x"}]]]
    elif how == "filename_subfolder":
        doc["_data_files"][0]["filename"] = "sub/data.arrow"
    return json.dumps(doc)


@pytest.mark.parametrize("how,field", [
    ("not_json", "not valid JSON"), ("truncated", "not valid JSON"), ("not_utf8", "not UTF-8"),
    ("list", "the document must be an object"),
    ("filename_out", "field '_data_files[0].filename' must be a relative path inside the directory"),
    ("filename_type", "field '_data_files[1].filename' must be a relative path"),
    ("files_missing", "field '_data_files' must be present"),
    ("files_nested", "field '_data_files[0]' must be an object with 'filename'"),
    ("filename_subfolder", "field '_data_files[0].filename' names 'sub/data.arrow', not a file of the folder"),
    ("symlink_out", "field '_data_files[0].filename' names 'data-00000-of-00003.arrow', which resolves to"),
    ("fifo", "the datasets state.json is not a regular file"),
    ("huge", "the datasets state.json is 268,435,457 bytes, more than the 268,435,456"),
])
def test_a_damaged_save_to_disk_state_is_an_error_naming_file_and_field(corpus, docs, tmp_path, how, field):
    """Issue 26: a ``save_to_disk`` folder whose state.json is damaged was walked
    as plain files (its metadata read as JSON Lines rows, the Arrow files in
    whatever order).  Now state.json is read bounded (a regular file of at most
    256 MiB), checked against its schema, and every data file it lists must be a
    regular file of the folder itself: an InputError naming state.json and the
    field, before any row is read."""
    import shutil

    root = tmp_path / "hf"
    shutil.copytree(corpus["hf_dataset"], root)
    state = root / "state.json"
    raw = state.read_bytes()
    if how == "not_json":
        state.write_text("{'_data_files': []}")
    elif how == "truncated":
        state.write_bytes(raw[:len(raw) // 2])
    elif how == "not_utf8":
        state.write_bytes(b"\xff" + raw)
    elif how == "list":
        state.write_text("[]")
    elif how == "symlink_out":
        outside = tmp_path / "secret.arrow"
        outside.write_bytes(b"secret")
        (root / "data-00000-of-00003.arrow").unlink()
        (root / "data-00000-of-00003.arrow").symlink_to(outside)
    elif how == "fifo":
        state.unlink()
        os.mkfifo(state)
    elif how == "huge":
        with open(state, "r+b") as f:    # sparse: costs no disk
            f.truncate((256 << 20) + 1)
    else:
        state.write_text(_damage(json.loads(raw), how))
    with pytest.raises(InputError) as info:
        resolve_inputs(str(root))
    message = str(info.value)
    assert message.startswith(f"{state}: ") and field in message, message
    assert "save_to_disk" in message and info.value.path == str(state)
    with pytest.raises(InputError, match="state.json"):
        list(iter_texts(str(root)))
    # the undamaged folder reads every document, in order
    assert list(iter_texts(corpus["hf_dataset"])) == docs


@pytest.mark.parametrize("name,content,field", [
    ("dataset_info.json", "{", "the datasets dataset_info.json is not valid JSON"),
    ("dataset_info.json", '{"features": 3}', "field 'features' must be an object"),
    ("dataset_dict.json", '{"splits": "train"}', "field 'splits' must be a list"),
    ("dataset_dict.json", '{"splits": ["train", 3]}', "field 'splits[1]' must be a string"),
])
def test_damaged_dataset_info_or_dict_is_an_error_naming_file_and_field(corpus, tmp_path, name, content, field):
    import shutil

    root = tmp_path / "hf"
    shutil.copytree(corpus["hf_dataset"], root / "train" if name == "dataset_dict.json" else root)
    (root / name).write_text(content)
    with pytest.raises(InputError) as info:
        resolve_inputs(str(root), split="train")
    assert str(info.value).startswith(f"{root / name}: ") and field in str(info.value), str(info.value)
    assert info.value.reason == "bad_metadata"


def test_dataset_dict_needs_a_split_and_reads_only_it(tmp_path, docs):
    import datasets

    root = tmp_path / "dd"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": docs[:40]}),
                          "test": datasets.Dataset.from_dict({"text": docs[40:50]})}).save_to_disk(str(root))
    with pytest.raises(InputError, match=r"splits 'train', 'test'.*choose one with split="):
        resolve_inputs(str(root))
    with pytest.raises(InputError, match=r"no split 'validation'; its splits are 'train', 'test'") as info:
        resolve_inputs(str(root), split="validation")
    assert info.value.reason == "dataset_dict"
    skipped = []
    sources = resolve_inputs(str(root), split="test", skipped_files=skipped)
    assert {os.path.relpath(s.path, root).split(os.sep)[0] for s in sources} == {"test"}
    assert list(iter_texts(str(root), split="test")) == docs[40:50]
    assert list(iter_texts(str(root), split="train")) == docs[:40]
    reasons = {os.path.relpath(s.path.rstrip("/"), root): s.reason for s in skipped}
    assert reasons["train"] == "split 'train' of a DatasetDict, not selected (split='test')"
    assert reasons["dataset_dict.json"].startswith("HF datasets metadata")
    assert reasons[os.path.join("test", "dataset_info.json")].startswith("HF datasets metadata")
    # a split for inputs that hold no DatasetDict is an error, not ignored
    (tmp_path / "plain.jsonl").write_bytes(_jsonl_bytes(["x"]))
    with pytest.raises(InputError, match="no input is a datasets DatasetDict"):
        resolve_inputs(str(tmp_path / "plain.jsonl"), split="train")
    # the same rule for a DatasetDict in memory
    in_memory = datasets.load_from_disk(str(root))
    assert list(iter_texts(in_memory, split="train")) == docs[:40]
    with pytest.raises(InputError, match=r"has no split 'dev'"):
        list(iter_texts(in_memory, split="dev"))
    with pytest.raises(InputError, match="not a dataset dict"):
        list(iter_texts(in_memory["train"], split="train"))


def test_column_on_plain_text_is_an_error_naming_the_file(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("a\nb\n", encoding="utf-8")
    err = _error(str(path), column="body")
    assert err.reason == "bad_option" and str(path) in str(err) and "column='body'" in str(err)
    assert list(iter_texts(str(path))) == ["a", "b"]


def test_one_numbering_scheme_across_formats(tmp_path):
    """The same bad document (row 3: a null / invalid UTF-8) is reported as
    ``row 3`` by every reader, in the message and in the skip example."""
    good = ["zero", "one", "two"]
    (tmp_path / "t.txt").write_bytes(b"zero\none\ntwo\nbad\xff\nfour\n")
    (tmp_path / "j.jsonl").write_bytes(_jsonl_bytes(good) + b'{"text": null}\n' + _jsonl_bytes(["four"]))
    (tmp_path / "g.jsonl.gz").write_bytes(gzip.compress(_jsonl_bytes(good) + b'{"text": "\xff"}\n'))
    pq.write_table(pa.table({"text": good + [None, "four"]}), tmp_path / "p.parquet")
    raw = [b"zero", b"one", b"two", b"\xff", b"four"]   # a string array holding invalid UTF-8 (unvalidated)
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in raw])]).astype(np.int32)
    bad = pa.Array.from_buffers(pa.string(), len(raw), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(raw))])
    with ipc.new_file(str(tmp_path / "b.arrow"), pa.schema([("text", pa.string())])) as w:
        w.write_batch(pa.record_batch([bad], names=["text"]))
    for name in ("t.txt", "j.jsonl", "g.jsonl.gz", "p.parquet", "b.arrow"):
        skips = SkipCounter()
        texts = list(iter_texts(str(tmp_path / name), on_error="skip", skips=skips))
        assert texts[:3] == good, name
        (example,) = skips.examples
        assert example.row == 3 and "row 3" in example.message, (name, example)
        assert "line " not in example.message, (name, example.message)


@pytest.mark.parametrize("escaped, expected", [
    (b"\\ud83d\\ude00", "\U0001F600"), (b"\\uD83D\\uDE00", "\U0001F600"), (b"\\u00e9\\u4e2d", "\u00e9\u4e2d"),
    (b"\\uDC80", None), (b"\\udbff", None), (b"a\\ud83d", None), (b"\\\\ud800", "\\ud800"),
])
def test_jsonl_surrogate_escapes_as_json_loads(tmp_path, escaped, expected):
    """The fast path checks for lone surrogates only on lines with a \\uD800-\\uDFFF
    escape: pairs and other escapes (either case) parse as json.loads does, lone
    halves are invalid_text, an escaped backslash before 'u' is plain text."""
    path = tmp_path / "escapes.jsonl"
    path.write_bytes(b'{"text": "' + escaped + b'"}  \n')
    if expected is None:
        assert _error(str(path)).reason == "invalid_text"
    else:
        assert list(iter_texts(str(path))) == [expected] == [json.loads(path.read_bytes())["text"]]


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(0, 300), min_size=0, max_size=60), unit_rows=st.integers(1, 30),
       unit_bytes=st.one_of(st.none(), st.integers(1, 2000)), block=st.sampled_from([7, 64, 1000]),
       final_newline=st.booleans(), crlf=st.booleans())
def test_scan_line_starts_equals_a_line_by_line_walk(tmp_path_factory, lengths, unit_rows, unit_bytes, block,
                                                     final_newline, crlf):
    """The unit cuts of a line file (a unit ends after unit_rows rows, or at the end of
    the first line reaching unit_bytes from its start) as a walk over the lines finds
    them, for any block size the scan reads with: empty lines, lines longer than the
    block, CRLF endings (the \\r stays in its row's bytes) and no final newline."""
    cr = b"\r" if crlf else b""
    content = b"\n".join(b"x" * n + cr for n in lengths) + (b"\n" if final_newline and lengths else b"")
    path = tmp_path_factory.mktemp("scan") / "f.txt"
    path.write_bytes(content)
    lines = content.split(b"\n")
    if content.endswith(b"\n") or not content:
        lines = lines[:-1]
    want, row0, byte0, pos = [(0, 0)], 0, 0, 0
    for i, line in enumerate(lines):
        pos += len(line) + 1
        if i + 1 < len(lines) or content.endswith(b"\n"):
            if i + 1 - row0 >= unit_rows or (unit_bytes is not None and pos - byte0 >= unit_bytes):
                row0, byte0 = i + 1, pos
                if row0 < len(lines):
                    want.append((row0, byte0))
    old = _compression.BLOCK_BYTES
    _compression.BLOCK_BYTES = block
    try:
        assert _compression.scan_line_starts(str(path), unit_rows, unit_bytes) == (len(lines), want)
    finally:
        _compression.BLOCK_BYTES = old
