"""ube verify: the Unicode audit, corpus round trips, and shard directories with planted faults.

Truth comes from outside the code under test: Python's codecs and
``unicodedata``, the ``emoji`` package, the real text in tests/data, and shard
files edited byte by byte from the agreed format spec.
"""
import argparse
import hashlib
import json
import os
import shutil
import unicodedata

import numpy as np
import pytest

from ube_stream import _route
from ube_stream.tokenizer import Tokenizer
from ube_stream.verification import first_difference, verify_corpus, verify_shards, verify_unicode
from ube_stream.verification import unicode as vu

# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def tok_path(tmp_path_factory, docs_rows):
    from ube_stream.training.trainer import train

    path = tmp_path_factory.mktemp("tok") / "train.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for row in docs_rows:
            f.write(json.dumps({"text": row["text"][:20000]}, ensure_ascii=False) + "\n")
    tok = train([str(path)], vocab_size=700, substrate="ube", workers=1, show_progress=False)
    out = tmp_path_factory.mktemp("tok") / "tok.json"
    tok.save(out)
    return str(out)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory, docs_rows, parallel_rows):
    """A JSONL file (pages, cut to 1,500 characters) and a text file (one parallel item per line)."""
    root = tmp_path_factory.mktemp("corpus")
    jsonl = root / "pages.jsonl"
    with open(jsonl, "w", encoding="utf-8") as f:
        for row in docs_rows[::3]:
            f.write(json.dumps({"text": row["text"][:1500]}, ensure_ascii=False) + "\n")
    text = root / "items.txt"
    lines = [r["text"].replace("\n", " ").replace("\r", " ") for r in parallel_rows[:600]]
    with open(text, "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(lines) + "\n")
    return str(jsonl), str(text)


@pytest.fixture(scope="session")
def encoded(tmp_path_factory, corpus, tok_path):
    from ube_stream.shards import encode_corpus

    out = tmp_path_factory.mktemp("shards") / "out"
    encode_corpus(list(corpus), tokenizer=tok_path, output=str(out), workers=1, show_progress=False,
                  shard_tokens=4000, unit_rows=200)
    return str(out)


@pytest.fixture
def shard_copy(encoded, tmp_path):
    """A private copy of the encoded directory (the sources stay where MANIFEST says)."""
    dst = tmp_path / "copy"
    shutil.copytree(encoded, dst)
    return str(dst)


def manifest_of(directory):
    with open(os.path.join(directory, "MANIFEST.json"), encoding="utf-8") as f:
        return json.load(f)


def write_manifest(directory, manifest):
    with open(os.path.join(directory, "MANIFEST.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, ensure_ascii=False, indent=1)


def index_arrays(idx_path):
    header = np.fromfile(idx_path, dtype=np.uint8, count=128)
    n = int(np.frombuffer(header[16:24].tobytes(), "<u8")[0])
    offsets = np.fromfile(idx_path, "<u8", count=n + 1, offset=128)
    rows = np.fromfile(idx_path, "<u8", count=n, offset=128 + 8 * (n + 1))
    sources = np.fromfile(idx_path, "<u4", count=n, offset=128 + 16 * n + 8)
    return offsets, rows, sources


def cli(argv):
    from ube_stream.cli import verify as _cli_verify

    parser = argparse.ArgumentParser(prog="ube")
    _cli_verify.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


# --------------------------------------------------------------------------- helpers

def test_first_difference():
    assert first_difference("abc", "abc") == -1
    assert first_difference("abc", "abd") == 2
    assert first_difference("ab", "abc") == 2
    long = "x" * 10000
    assert first_difference(long + "a" + long, long + "b" + long) == 10000


@pytest.mark.parametrize("substrate", ["ube", "utf8", "utf16"])
def test_expected_symbols_follow_the_substrate_rules(substrate):
    text = "a\u07ff\u0800中😀"
    ids, lengths = vu.expected_symbols(text, substrate)
    by_char = []
    for ch in text:
        if substrate == "utf8" or (substrate == "ube" and len(ch.encode("utf-8")) <= 2):
            by_char.append(list(ch.encode("utf-8")))
        else:
            by_char.append([b + (256 if substrate == "ube" else 0) for b in ch.encode("utf-16-le")])
    assert ids.tolist() == [b for c in by_char for b in c]
    assert lengths.tolist() == [len(c) for c in by_char]


def test_item_sets_are_what_they_claim():
    scalars = vu.scalar_values()
    assert len(scalars) == 1_112_064 and scalars[0] == "\x00" and scalars[-1] == "\U0010ffff"
    assert not any(0xD800 <= ord(c) < 0xE000 for c in scalars[0xD7F0:0xD810])
    import emoji

    assert set(vu.items_of("emoji")) == set(emoji.EMOJI_DATA)
    nfd = vu.items_of("nfd")
    assert unicodedata.normalize("NFD", "é") in nfd and len(nfd) > 10000
    assert all(unicodedata.is_normalized("NFD", s) for s in nfd[::97])


# --------------------------------------------------------------------------- unicode

@pytest.mark.slow  # all 1,112,064 scalar values through a tokenizer; the substrate checks stay in the default suite
def test_unicode_every_scalar_value_all_substrates_and_a_tokenizer(tok_path):
    report = verify_unicode(tok_path, workers=1, show_progress=False)
    assert report.ok, report.format()
    for checker in ("ube", "utf8", "utf16", "tokenizer"):
        assert report.checked[f"scalar/alone/{checker}"] == 1_112_064
        assert report.checked[f"scalar/runs/{checker}"] == len(vu.runs_of(vu.scalar_values()))
        assert report.checked[f"audit/alone/{checker}"] > 135_889  # text plus the normal forms
    import emoji

    assert report.checked["emoji/alone/ube"] == len(emoji.EMOJI_DATA)
    assert "OK" in report.format().splitlines()[0]


def test_unicode_catches_a_decoder_that_drops_a_character(monkeypatch, tok_path):
    import ube_stream.substrate as substrate

    real = substrate.decode_symbols

    def lossy(ids, name="ube", errors="strict"):
        text = real(ids, name, errors)
        return text.replace("\u00e9", "", 1)

    monkeypatch.setattr(substrate, "decode_symbols", lossy)
    report = verify_unicode(substrates=("utf8",), item_sets=("mixed",), workers=1, show_progress=False)
    assert not report.ok
    assert set(report.failed) == {"mixed/runs/utf8"}
    example = report.examples[0]
    assert example.expected[example.expected.index("'") + 1:].startswith("é") or "é" in example.expected
    assert example.offset is not None and example.offset >= 0


def test_unicode_catches_a_router_that_swaps_bytes(monkeypatch):
    route = _route
    real = route.route_batch

    def swapped(data, offsets, code, err=None):
        status, symbols, symbol_offsets = real(data, offsets, code, err)
        symbols = symbols.copy()
        high = np.flatnonzero(symbols >= 256)
        if high.size >= 2:
            symbols[high[0]], symbols[high[1]] = symbols[high[1]], symbols[high[0]]
        return status, symbols, symbol_offsets

    monkeypatch.setattr(route, "route_batch", swapped)
    report = verify_unicode(substrates=("ube",), item_sets=("emoji",), workers=1, show_progress=False)
    assert "emoji/alone/ube" in report.failed and "Python's codecs" in report.examples[0].message


def test_unicode_catches_a_tokenizer_decode_bug(monkeypatch, tok_path):
    real = Tokenizer.decode

    def lossy(self, ids, *, errors="strict"):
        text = real(self, ids, errors=errors)
        return text.replace("\U0001F600", "?")

    monkeypatch.setattr(Tokenizer, "decode", lossy)
    report = verify_unicode(tok_path, substrates=(), item_sets=("mixed", "emoji"), workers=1, show_progress=False)
    assert {"mixed/alone/tokenizer", "emoji/alone/tokenizer"} <= set(report.failed)
    assert any("😀" in m.expected and "?" in m.found for m in report.examples)


# --------------------------------------------------------------------------- corpus

def test_verify_corpus_passes_on_real_text(corpus, tok_path, docs_rows):
    report = verify_corpus(list(corpus), tok_path, workers=1, show_progress=False)
    assert report.ok, report.format()
    assert report.checked["documents"] == len(docs_rows[::3]) + 600
    assert report.checked["sources"] == 2 and report.checked["tokens"] > 0


def test_verify_corpus_reports_a_planted_decoder_bug(monkeypatch, corpus, tok_path, capsys):
    real = Tokenizer.decode

    def drops_sixth_character(self, ids, *, errors="strict"):
        text = real(self, ids, errors=errors)
        return text[:5] + text[6:] if len(text) > 5 else text

    monkeypatch.setattr(Tokenizer, "decode", drops_sixth_character)
    report = verify_corpus([corpus[0]], tok_path, workers=1, show_progress=False, max_examples=3)
    assert not report.ok
    assert report.failed["documents"] == sum(1 for _ in open(corpus[0], encoding="utf-8"))
    first = report.examples[0]
    assert (first.source, first.row, first.offset) == (corpus[0], 0, 5)
    with open(corpus[0], encoding="utf-8") as f:
        row0 = json.loads(f.readline())["text"]
    assert first.expected.startswith(repr(row0[:29])[:-1])
    assert first.found.startswith(repr(row0[:5] + row0[6:29])[:-1])
    assert cli(["verify", "--corpus", corpus[0], "--tokenizer", tok_path, "--workers", "1", "-q"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "character offset 5" in out and f"source {corpus[0]}, row 0" in out


# --------------------------------------------------------------------------- shards

def test_verify_shards_passes_and_counts(encoded, tok_path, capsys):
    report = verify_shards(encoded, workers=1, show_progress=False)
    assert report.ok, report.format()
    manifest = manifest_of(encoded)
    assert report.checked["decoded documents"] == manifest["totals"]["documents"]
    assert report.checked["checksums"] == len(manifest["shards"]) > 1
    assert report.checked["tokens"] == manifest["totals"]["tokens"]
    assert cli(["verify", "--shards", encoded, "--workers", "2", "-q"]) == 0
    assert "OK" in capsys.readouterr().out
    assert report.checked["reader documents"] == manifest["totals"]["documents"]
    sampled = verify_shards(encoded, workers=1, sample=10, show_progress=False)
    assert sampled.ok and sampled.checked["decoded documents"] == 10


def _flip_one_token(directory, fix_checksums):
    manifest = manifest_of(directory)
    record = manifest["shards"][1]
    tokens_path = os.path.join(directory, record["tokens_file"])
    idx_path = os.path.join(directory, record["index_file"])
    tokens = np.fromfile(tokens_path, "<u4")
    offsets, rows, sources = index_arrays(idx_path)
    doc = int(np.argmax(np.diff(offsets.astype(np.int64))))  # the longest document of the shard
    at = int(offsets[doc]) + 2
    tokens[at] = 65 if tokens[at] != 65 else 66  # 'A' or 'B': still decodes, to the wrong text
    tokens.astype("<u4").tofile(tokens_path)
    if fix_checksums:
        digest = hashlib.sha256(open(tokens_path, "rb").read()).digest()
        with open(idx_path, "r+b") as f:
            f.seek(32)
            f.write(digest)
        record["sha256"] = digest.hex()
        record["index_sha256"] = hashlib.sha256(open(idx_path, "rb").read()).hexdigest()
        write_manifest(directory, manifest)
    source = manifest["sources"][int(sources[doc])]["path"]
    return record["name"], doc, source, int(rows[doc])


def test_flipped_token_with_fixed_checksums_is_caught_by_the_content_checks(shard_copy):
    name, doc, source, row = _flip_one_token(shard_copy, fix_checksums=True)
    report = verify_shards(shard_copy, workers=1, show_progress=False)
    assert not report.ok
    assert set(report.failed) == {"decoded documents", "re-encoded documents"}
    for example in report.examples:
        assert (example.shard, example.document, example.source, example.row) == (name, doc, source, row)
    decoded = next(m for m in report.examples if m.category == "decoded documents")
    assert decoded.offset is not None and decoded.expected != decoded.found


def test_flipped_token_without_fixing_the_checksum_is_caught_by_it(shard_copy, capsys):
    name, _, _, _ = _flip_one_token(shard_copy, fix_checksums=False)
    report = verify_shards(shard_copy, workers=1, show_progress=False)
    assert "checksums" in report.failed
    checksum = next(m for m in report.examples if m.category == "checksums")
    assert checksum.shard == name and "index header and the MANIFEST" in checksum.message
    assert cli(["verify", "--shards", shard_copy, "--workers", "1", "-q"]) == 1
    assert name in capsys.readouterr().out


def test_truncated_index_is_caught(shard_copy):
    record = manifest_of(shard_copy)["shards"][0]
    idx_path = os.path.join(shard_copy, record["index_file"])
    size = os.path.getsize(idx_path)
    with open(idx_path, "r+b") as f:
        f.truncate(size - 4)
    report = verify_shards(shard_copy, workers=1, show_progress=False)
    assert "index" in report.failed
    example = next(m for m in report.examples if m.category == "index")
    assert example.shard == record["name"] and "truncated" in example.message
    # the documents of the broken shard are missing from the comparison, and say so
    assert "documents" in report.failed


def test_source_row_edited_after_encoding(shard_copy, corpus, tmp_path):
    path = corpus[1]
    backup = tmp_path / "items.bak"
    shutil.copy(path, backup)
    try:
        with open(path, encoding="utf-8", newline="") as f:
            lines = f.read().split("\n")
        row = next(i for i, line in enumerate(lines) if len(line) > 20 and line[10].isascii() and line[10] != "Q")
        lines[row] = lines[row][:10] + "Q" + lines[row][11:]  # same size on disk: only the content checks see it
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write("\n".join(lines))
        report = verify_shards(shard_copy, workers=1, show_progress=False)
    finally:
        shutil.copy(backup, path)
    assert set(report.failed) == {"decoded documents", "re-encoded documents"}
    decoded = next(m for m in report.examples if m.category == "decoded documents")
    assert (decoded.source, decoded.row, decoded.offset) == (path, row, 10)
    assert "Q" in decoded.expected and decoded.shard is not None


def test_tokenizer_with_altered_merges_round_trips_but_not_against_the_shards(shard_copy, corpus, tok_path):
    original = Tokenizer.load(tok_path)
    altered = Tokenizer(substrate=original.substrate, merges=original.merges[: len(original.merges) // 2],
                        special_tokens=list(original.special_tokens), pattern=original.pattern_name)
    altered_path = os.path.join(shard_copy, "tokenizer.json")
    altered.save(altered_path)  # a valid, re-fingerprinted file
    assert Tokenizer.load(altered_path).fingerprint != original.fingerprint
    corpus_report = verify_corpus(list(corpus), altered_path, workers=1, show_progress=False)
    assert corpus_report.ok, corpus_report.format()
    report = verify_shards(shard_copy, workers=1, show_progress=False, keep_going=True)
    assert {"tokenizer", "re-encoded documents"} <= set(report.failed)
    assert any("fingerprint" in m.message and original.fingerprint in m.message for m in report.examples)


def test_wrong_tokenizer_stops_the_check_unless_asked_to_keep_going(encoded, tok_path, tmp_path, capsys):
    """Issue 28: the wrong tokenizer is one failure, reported at once; no document is read or compared
    (before, every document was checked anyway and failed).  --keep-going compares them all."""
    original = Tokenizer.load(tok_path)
    other = Tokenizer(substrate=original.substrate, merges=original.merges[: len(original.merges) // 3],
                      special_tokens=list(original.special_tokens), pattern=original.pattern_name)
    other_path = str(tmp_path / "other.json")
    other.save(other_path)
    report = verify_shards(encoded, tokenizer=other_path, workers=1, show_progress=False)
    assert set(report.failed) == {"tokenizer"} and not report.ok
    assert "decoded documents" not in report.checked and "re-encoded documents" not in report.checked
    assert any("keep_going=True" in note for note in report.notes)
    report = verify_shards(encoded, tokenizer=other_path, workers=1, show_progress=False, keep_going=True)
    assert report.failed["re-encoded documents"] > 0
    assert report.checked["decoded documents"] == manifest_of(encoded)["totals"]["documents"]
    assert cli(["verify", "--shards", encoded, "--tokenizer", other_path, "-q"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out.splitlines()[0] and "re-encoded documents" not in out and "--keep-going" in out


def test_row_accounting_is_checked(shard_copy):
    manifest = manifest_of(shard_copy)
    manifest["sources"][0]["rows_read"] += 1
    write_manifest(shard_copy, manifest)
    report = verify_shards(shard_copy, workers=1, show_progress=False)
    assert set(report.failed) == {"row accounting"}
    assert report.examples[0].source == manifest["sources"][0]["path"]


def test_the_package_reader_is_checked_against_the_spec(encoded, monkeypatch):
    from ube_stream.shards import TokenShards

    real = TokenShards.source

    def off_by_one(self, i):
        path, row = real(self, i)
        return path, row + (i == 3)

    monkeypatch.setattr(TokenShards, "source", off_by_one)
    report = verify_shards(encoded, workers=1, show_progress=False)
    assert set(report.failed) == {"reader"} and report.failed["reader"] == 1


def test_missing_source_is_reported(encoded, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(encoded, copy)
    manifest = manifest_of(str(copy))
    manifest["sources"][1]["path"] = str(tmp_path / "gone.txt")
    write_manifest(str(copy), manifest)
    report = verify_shards(str(copy), workers=1, show_progress=False)
    assert "sources" in report.failed
    assert any(m.source == str(tmp_path / "gone.txt") and "missing" in m.message for m in report.examples)
    assert report.checked["decoded documents"] == manifest["sources"][0]["documents"]


@pytest.mark.slow
def test_cli_unicode_full_run_with_workers(tok_path, capsys):
    assert cli(["verify", "--unicode", "--tokenizer", tok_path, "--workers", "2", "-q"]) == 0
    out = capsys.readouterr().out
    assert "scalar/alone/tokenizer" in out and "1,112,064" in out


def test_verify_tasks_never_carry_the_tokenizer(encoded, corpus, tok_path, monkeypatch):
    """Issue 24: each worker loads the tokenizer once from its file; no task message holds a Tokenizer
    (a 6 MB pickle per task for cl100k before), for a tokenizer file or a Tokenizer object alike."""
    import io
    import pickle

    from ube_stream.runs import engine

    sent = []
    real = engine.run_units

    class Finder(pickle.Pickler):
        """Pickles a task as the pool sends it, counting the Tokenizer objects inside."""

        def __init__(self):
            super().__init__(io.BytesIO())
            self.found = 0

        def persistent_id(self, obj):
            self.found += isinstance(obj, Tokenizer)
            return None

    def spy(fn, tasks, **kwargs):
        for task in tasks:
            finder = Finder()
            finder.dump((fn, task))
            sent.append(finder.found)
        return real(fn, tasks, **kwargs)

    monkeypatch.setattr(engine, "run_units", spy)
    tok = Tokenizer.load(tok_path)
    assert verify_shards(encoded, workers=2, show_progress=False).ok
    assert verify_shards(encoded, tokenizer=tok, workers=2, show_progress=False).ok
    assert verify_corpus(list(corpus), tok, workers=2, show_progress=False).ok
    assert len(sent) > 3 and sent == [0] * len(sent)


def test_failed_verification_resumes_from_its_finished_units(encoded, monkeypatch, tmp_path):
    """verify --shards records each finished unit in its run directory ($TMPDIR/ube-verify-<uid>/run-<key>/):
    a failed or killed verification is resumed by the same call, checking only the units it had not
    finished, with the same report; a finished one leaves nothing behind."""
    import glob
    import tempfile

    from ube_stream.verification import shards as vs

    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    os.makedirs(tmp_path / "tmp")
    real = vs.unit_task
    checked = []

    def counting(task, *args):
        checked.append(task.unit_id)
        return real(task, *args)

    monkeypatch.setattr(vs, "unit_task", counting)
    clean = verify_shards(encoded, workers=1, show_progress=False)
    assert clean.ok and len(checked) > 3 and os.listdir(tmp_path / "tmp") == []
    units, checked[:] = list(checked), []

    def failing(task, *args):
        if len(checked) == 2:
            raise OSError("verification stopped (injected)")
        return counting(task, *args)

    monkeypatch.setattr(vs, "unit_task", failing)
    with pytest.raises(OSError, match="injected"):
        verify_shards(encoded, workers=1, show_progress=False)
    assert len(glob.glob(str(tmp_path / "tmp" / "ube-verify-*" / "run-*" / "units" / "*.pickle"))) == 2
    first, checked[:] = list(checked), []
    monkeypatch.setattr(vs, "unit_task", counting)
    assert verify_shards(encoded, workers=1, show_progress=False).to_dict() == clean.to_dict()
    assert sorted(first + checked) == sorted(units) and not set(first) & set(checked)
    assert os.listdir(tmp_path / "tmp") == []


def verify_json(directory, path, argv=()):
    """The bytes ``ube verify --shards directory --json path`` writes (run here, uninterrupted)."""
    from ube_stream.cli import main

    assert main(["verify", "--shards", directory, "--json", path, "-q", *argv]) == 0
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.slow
def test_killed_verification_resumes_with_the_same_json(encoded, tmp_path):
    """The whole verification (driver and 2 pool workers) SIGKILLed right after the driver
    committed one unit's result: the same command again dispatches only the units without a
    record (never the killed one, whose kill point would fire again), and writes a --json
    report byte-identical to an uninterrupted run's; its run directory is then gone."""
    from _helpers import verify_killed_then_resumed

    clean = verify_json(encoded, str(tmp_path / "clean.json"))
    units = sorted({r["unit_id"] for r in manifest_of(encoded)["shards"]})
    assert len(units) >= 4
    tmp = str(tmp_path / "tmp")
    records, first, second, killed_again, (code, err), resumed = verify_killed_then_resumed(
        encoded, tmp, units[1], ["--workers", "2"])
    assert sorted(first[0]) == units and 0 < records <= len(units)
    assert code == 0 and not killed_again, err
    assert len(second) == 1 and units[1] not in second[0] and len(second[0]) == len(units) - records
    assert resumed == clean
    assert not [n for n in os.listdir(tmp) if n.startswith("ube-verify-") and
                os.path.isdir(os.path.join(tmp, n)) and any(x.startswith("run-") for x in os.listdir(os.path.join(tmp, n)))]
