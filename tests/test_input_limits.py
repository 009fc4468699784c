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
from ube_stream.readers import iter_texts

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
