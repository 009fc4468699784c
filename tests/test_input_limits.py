"""Inputs that must never take the process down or its memory: Feather v1 is
refused before pyarrow's v1 reader (which can SIGSEGV on a damaged file)
touches it, and a document larger than ``max_document_bytes`` is refused or
skipped before it is materialised (issue 26, items 3 and 4)."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pyarrow as pa
import pyarrow.feather as feather
import pytest

from ube_stream.errors import InputError
from ube_stream.readers import SkipCounter, iter_batches, iter_texts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _feather_v1(path, rows=200):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        feather.write_feather(pa.table({"text": [f"document {i} " * (i % 7) for i in range(rows)]}), path,
                              version=1)
    return path


def test_feather_v1_is_refused_with_how_to_convert(tmp_path):
    path = _feather_v1(str(tmp_path / "v1.feather"))
    assert open(path, "rb").read(4) == b"FEA1"
    for kwargs in ({}, {"on_error": "skip"}, {"format": "feather"}, {"format": "arrow"}):
        with pytest.raises(InputError) as info:
            list(iter_texts(path, **kwargs))
        assert info.value.reason == "unsupported_format"
        message = str(info.value)
        assert "\n" not in message and path in message and "Feather v1" in message
        assert "write_feather" in message and "read_table" in message
    # the conversion the message gives reads back the same documents
    out = str(tmp_path / "v2.feather")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        table = feather.read_table(path)
    feather.write_feather(table, out)
    assert list(iter_texts(out)) == table.column("text").to_pylist()
    # found by content (no suffix) it is refused too
    os.replace(path, tmp_path / "noname")
    with pytest.raises(InputError, match="Feather v1"):
        list(iter_texts(str(tmp_path / "noname")))


# Every mutant is read in a child process, so a crash is a failed test (a
# negative return code), not a dead test runner; the child prints one line per
# mutant: "ok" (read), or the UbeError's reason.
_MUTANT_SCRIPT = r"""
import os, random, sys
from ube_stream.errors import UbeError
from ube_stream.readers import SkipCounter, iter_texts
path, seed, count, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
base = open(path, "rb").read()
rng = random.Random(seed)
for k in range(count):
    data = bytearray(base)
    if k == 0:
        data[len(data) - 8] = 0xB7          # the repro of issue 26 item 3
    else:
        for _ in range(rng.choice((1, 1, 2, 4))):
            data[rng.randrange(len(data))] = rng.randrange(256)
    mutant = os.path.join(out, f"m{k}.feather")
    with open(mutant, "wb") as f:
        f.write(data)
    results = []
    for on_error in ("raise", "skip"):
        try:
            list(iter_texts(mutant, on_error=on_error, skips=SkipCounter()))
            results.append("ok")
        except UbeError as exc:
            results.append(getattr(exc, "reason", type(exc).__name__))
    print(k, *results, flush=True)
    os.unlink(mutant)
"""


def _run_mutants(tmp_path, seed, count):
    path = _feather_v1(str(tmp_path / "base.feather"))
    out = tmp_path / "mutants"
    out.mkdir()
    proc = subprocess.run([sys.executable, "-c", _MUTANT_SCRIPT, path, str(seed), str(count), str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, f"the reader died on a mutant (rc {proc.returncode}): {proc.stderr[-2000:]}"
    lines = proc.stdout.splitlines()
    assert len(lines) == count
    return [line.split()[1:] for line in lines]


def test_feather_v1_mutants_never_crash(tmp_path):
    results = _run_mutants(tmp_path, seed=1, count=8)
    assert results[0] == ["unsupported_format", "unsupported_format"]   # the repro: refused, no crash
    assert all(len(r) == 2 for r in results)


@pytest.mark.slow
def test_feather_v1_mutants_never_crash_many(tmp_path):
    results = _run_mutants(tmp_path, seed=26, count=500)
    # a mutant whose magic survived is refused; the others fail as corrupt/unknown files or read
    assert sum(r == ["unsupported_format", "unsupported_format"] for r in results) > 400


# --------------------------------------------------------------------------- max_document_bytes

CAP = 1024


def _lines(big_at=(3, 9)):
    """Short text lines, with lines of exactly CAP + 1 bytes at ``big_at``, and one of exactly CAP bytes."""
    lines = [f"line {i} ünïcode 文" for i in range(14)]
    for i in big_at:
        lines[i] = ("x" * (CAP + 1))
    lines[6] = "y" * CAP   # exactly at the limit: kept
    return lines


def _write(path, raw: bytes, compression):
    import gzip

    import zstandard

    if compression == "gzip":
        raw = gzip.compress(raw)
    elif compression == "zstd":
        raw = zstandard.ZstdCompressor().compress(raw)
    with open(path, "wb") as f:
        f.write(raw)
    return str(path)


def _line_file(tmp_path, fmt, compression, lines):
    import json

    if fmt == "jsonl":   # the cap measures the JSON line: keep the record's overhead out of the text
        texts = [t[:max(0, len(t.encode()) - 12)] if len(t) >= CAP else t for t in lines]
        raw = "".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts)
        expected_texts = texts
    else:
        raw = "".join(t + "\n" for t in lines)
        expected_texts = lines
    name = f"d.{'jsonl' if fmt == 'jsonl' else 'txt'}" + {"gzip": ".gz", "zstd": ".zst", None: ""}[compression]
    return _write(tmp_path / name, raw.encode(), compression), expected_texts


@pytest.mark.parametrize("block", [1 << 20, 200])   # lines inside one block, and lines spanning blocks
@pytest.mark.parametrize("compression", [None, "gzip", "zstd"])
@pytest.mark.parametrize("fmt", ["jsonl", "text"])
def test_documents_over_the_limit_are_refused_or_skipped(tmp_path, monkeypatch, fmt, compression, block):
    from ube_stream.readers import compression as _compression

    monkeypatch.setattr(_compression, "BLOCK_BYTES", block)
    path, texts = _line_file(tmp_path, fmt, compression, _lines())
    with open(path, "rb") as f:
        raw = f.read()
    if compression is None:   # each big line is CAP + 1 bytes in the file, the one at the limit CAP
        sizes = [len(line) for line in raw.split(b"\n")[:-1]]
        assert sizes[3] == sizes[9] == CAP + 1 and sizes[6] == CAP
    with pytest.raises(InputError) as info:
        list(iter_texts(path, max_document_bytes=CAP))
    err = info.value
    assert err.reason == "document_too_large" and err.row == 3 and path in str(err)
    assert "max_document_bytes=1,024" in str(err) and "on_error='skip'" in str(err)
    skips = SkipCounter()
    batches = list(iter_batches(path, on_error="skip", skips=skips, max_document_bytes=CAP))
    got = [t for b in batches for t in b.to_pylist()]
    rows = [int(r) for b in batches for r in b.rows]
    keep = [i for i in range(len(texts)) if i not in (3, 9)]
    assert got == [texts[i] for i in keep] and rows == keep   # the others keep their row numbers
    assert skips.counts == {"document_too_large": 2}
    assert [e.row for e in skips.examples] == [3, 9]
    # without the limit every line is read
    assert list(iter_texts(path)) == texts


def test_text_file_mode_and_in_memory_over_the_limit(tmp_path):
    small = _write(tmp_path / "a.txt.zst", b"x" * CAP, "zstd")
    big = _write(tmp_path / "b.txt.zst", b"x" * (CAP + 1), "zstd")
    assert list(iter_texts(small, text_mode="file", max_document_bytes=CAP)) == ["x" * CAP]
    with pytest.raises(InputError, match="document_too_large|max_document_bytes") as info:
        list(iter_texts(big, text_mode="file", max_document_bytes=CAP))
    assert info.value.reason == "document_too_large" and info.value.row == 0
    skips = SkipCounter()
    assert list(iter_texts([small, big], text_mode="file", on_error="skip", skips=skips,
                           max_document_bytes=CAP)) == ["x" * CAP]
    assert skips.counts == {"document_too_large": 1}
    # Python strings: measured in UTF-8 (3 bytes a character here)
    texts = ["é" * 10, "文" * 342, "文" * 341]
    skips = SkipCounter()
    assert list(iter_texts(iter(texts), on_error="skip", skips=skips, max_document_bytes=CAP)) == [texts[0], texts[2]]
    assert skips.examples[0].row == 1


@pytest.mark.parametrize("kind", ["parquet", "arrow", "arrow_stream"])
def test_columnar_values_over_the_limit(tmp_path, kind):
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    texts = [f"row {i}" for i in range(300)]
    texts[5] = "é" * (CAP // 2 + 1)      # CAP + 2 bytes of UTF-8 in CAP // 2 + 1 characters
    texts[250] = "z" * (CAP + 1)
    texts[100] = None
    table = pa.table({"text": texts})
    path = str(tmp_path / f"t.{'parquet' if kind == 'parquet' else 'arrow'}")
    if kind == "parquet":
        pq.write_table(table, path, row_group_size=64)
    elif kind == "arrow":
        with ipc.new_file(path, table.schema) as w:
            w.write_table(table, max_chunksize=64)
    else:
        with ipc.new_stream(path, table.schema) as w:
            w.write_table(table, max_chunksize=64)
    with pytest.raises(InputError) as info:
        list(iter_texts(path, max_document_bytes=CAP))
    assert info.value.reason == "document_too_large" and info.value.row == 5
    skips = SkipCounter()
    batches = list(iter_batches(path, on_error="skip", skips=skips, max_document_bytes=CAP))
    rows = [int(r) for b in batches for r in b.rows]
    assert rows == [i for i in range(300) if i not in (5, 100, 250)]
    assert [t for b in batches for t in b.to_pylist()] == [texts[i] for i in rows]
    assert skips.counts == {"document_too_large": 2, "null": 1}


def test_max_document_bytes_is_validated(tmp_path):
    path = _write(tmp_path / "a.txt", b"a\n", None)
    for bad in (0, -1, 1.5, "1", True):
        with pytest.raises(ValueError, match="max_document_bytes"):
            list(iter_texts(path, max_document_bytes=bad))


# the peak is VmHWM (this process's own mapping), not ru_maxrss, which a child inherits from the
# parent it was forked from (the test runner)
_MEMORY_SCRIPT = r"""
import sys
from ube_stream.readers import SkipCounter, iter_batches
skips = SkipCounter()
rows = [int(r) for b in iter_batches(sys.argv[1], on_error="skip", skips=skips,
                                     max_document_bytes=int(sys.argv[2])) for r in b.rows]
peak = [line for line in open("/proc/self/status") if line.startswith("VmHWM:")][0].split()[1]
print(int(peak) // 1024, rows, dict(skips.counts))
"""


def _huge_line_file(tmp_path, line_bytes, name):
    """``"a"\\n`` then one line of ``line_bytes`` bytes, then ``"b"``: highly compressible, written a MiB at a time."""
    import gzip

    import zstandard

    path = str(tmp_path / name)
    chunk = b"x" * (1 << 20)
    jsonl = ".jsonl." in name
    with open(path, "wb") as f, (gzip.GzipFile(fileobj=f, mode="wb", compresslevel=1) if name.endswith(".gz")
                                 else zstandard.ZstdCompressor(level=1).stream_writer(f)) as w:
        w.write(b'{"text": "a"}\n{"text": "' if jsonl else b"a\n")
        for _ in range(line_bytes >> 20):
            w.write(chunk)
        w.write(b'"}\n{"text": "b"}\n' if jsonl else b"\nb\n")
    return path


def _peak_rss_mib(path, cap):
    proc = subprocess.run([sys.executable, "-c", _MEMORY_SCRIPT, path, str(cap)], capture_output=True,
                          text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    peak, rest = proc.stdout.split(" ", 1)
    assert rest.strip() == "[0, 2] {'document_too_large': 1}"
    return int(peak)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
@pytest.mark.parametrize("name", ["huge.txt.zst", "huge.jsonl.zst", "huge.txt.gz", "huge.jsonl.gz"])
def test_a_huge_compressible_line_reads_in_bounded_memory(tmp_path, name):
    path = _huge_line_file(tmp_path, 256 << 20, name)
    assert os.path.getsize(path) < (2 << 20)   # over 100 times smaller than its line
    assert _peak_rss_mib(path, 1 << 20) < 220   # the line is 256 MiB: holding it would take > 256 MiB


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_a_4gb_line_in_a_small_zst_reads_in_bounded_memory(tmp_path):
    path = _huge_line_file(tmp_path, 4 << 30, "huge.txt.zst")
    assert _peak_rss_mib(path, 1 << 30) < 1024 + 400   # the default limit (1 GiB) plus a block and the imports


def test_max_document_bytes_on_the_command_line(tmp_path, capsys):
    """``--max-document-bytes`` reaches the readers of train, encode and verify."""
    import json

    from ube_stream.cli.main import main

    corpus = tmp_path / "c.txt"
    lines = [f"line number {i} with some words" for i in range(300)]
    lines[7] = "w" * 3000
    corpus.write_text("".join(t + "\n" for t in lines))
    tok = str(tmp_path / "t.json")
    assert main(["train", str(corpus), "--vocab-size", "600", "-q", "-o", tok, "--workers", "1",
                 "--max-document-bytes", "1KiB"]) != 0
    assert "max_document_bytes=1,024" in capsys.readouterr().err
    assert main(["train", str(corpus), "--vocab-size", "600", "-q", "-o", tok, "--workers", "1",
                 "--max-document-bytes", "1KiB", "--on-error", "skip"]) == 0
    out = str(tmp_path / "shards")
    assert main(["encode", str(corpus), "--tokenizer", tok, "-o", out, "--workers", "1", "-q",
                 "--max-document-bytes", "1KiB", "--on-error", "skip"]) == 0
    manifest = json.loads(open(os.path.join(out, "MANIFEST.json")).read())
    assert manifest["options"]["max_document_bytes"] == 1024
    assert manifest["totals"]["documents"] == 299 and manifest["totals"]["skipped"] == {"document_too_large": 1}
    assert main(["verify", "--corpus", str(corpus), "--tokenizer", tok, "--workers", "1", "-q",
                 "--max-document-bytes", "1KiB"]) != 0
    assert main(["verify", "--corpus", str(corpus), "--tokenizer", tok, "--workers", "1", "-q"]) == 0
