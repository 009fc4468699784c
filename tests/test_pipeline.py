"""The one-command pipeline (``ube demo``) end to end on the bundled sample, and
inputs through train / encode / verify: in-memory data, skipped files, progress
bars, the CLI's input options."""
import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ube_stream import progress as _progress
from ube_stream.errors import ShardFormatError
from ube_stream.shards import EncodeSummary, TokenShards, encode_corpus
from ube_stream.tokenizer import Tokenizer
from ube_stream.training.trainer import TrainSummary, train


# slow: the whole demo (train, encode, verify, evaluate); each stage has default tests
@pytest.mark.slow
def test_demo_end_to_end(tmp_path):
    out = tmp_path / "demo"
    proc = subprocess.run([sys.executable, "-m", "ube_stream", "demo", "--out", str(out), "--vocab-size", "2000",
                           "--workers", "1", "-q"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for substrate in ("ube", "utf8", "utf16"):
        tok = Tokenizer.load(out / f"tokenizer-{substrate}-2000.json")
        assert tok.substrate == substrate and tok.vocab_size == 2000
        shards = TokenShards(out / f"shards-{substrate}", verify="full")
        assert len(shards) > 0 and shards.tokenizer == tok
        assert f"[verify] {substrate:<5} OK" in proc.stderr
    # the table printed: Gini per tokenizer, English tokens, wins
    assert "Gini" in proc.stdout and "en tokens" in proc.stdout and "ube vs utf8: won" in proc.stdout
    table = json.loads((out / "eval.json").read_text(encoding="utf-8"))
    gini = {name: table["summary"][name]["gini"] for name in ("ube", "utf8", "utf16")}
    assert gini["ube"] < gini["utf8"]
    assert os.path.getsize(out / "eval.csv") > 0
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (out / "premiums.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------- inputs through train / encode



@pytest.fixture(scope="module")
def texts(multilingual_lines):
    return multilingual_lines[::7][:600]


@pytest.fixture(scope="module")
def tok(texts):
    return train(iter(texts), vocab_size=512 + 120 + 1, workers=1, show_progress=False)


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def _token_hashes(manifest):
    return [s["sha256"] for s in manifest["shards"]]


def test_encode_corpus_takes_what_train_takes(tmp_path, texts, tok):
    """Lists/iterators of str, pyarrow tables, datasets.Dataset and a streaming
    IterableDataset give the same shards as the same texts in a file, for any
    worker count; every document is tok.encode(text) + EOS."""
    import datasets
    import pyarrow as pa

    file_manifest = encode_corpus(_jsonl(tmp_path / "c.jsonl", [{"text": t} for t in texts]), tokenizer=tok,
                                  output=str(tmp_path / "from-file"), workers=1, unit_rows=100, show_progress=False)
    ds = datasets.Dataset.from_dict({"text": texts, "n": list(range(len(texts)))})
    inputs = {"iter": lambda: iter(texts), "table": lambda: pa.table({"text": texts}), "dataset": lambda: ds,
              "streaming": lambda: ds.to_iterable_dataset(num_shards=3), "dicts": lambda: ({"text": t} for t in texts)}
    runs = [(name, 1) for name in inputs] + [("streaming", 2), ("dataset", 2)]   # worker pools cost seconds here
    for name, workers in runs:
        out = tmp_path / f"{name}-{workers}"
        manifest = encode_corpus(inputs[name](), tokenizer=tok, output=str(out), workers=workers, unit_rows=100,
                                 show_progress=False)
        assert _token_hashes(manifest) == _token_hashes(file_manifest), (name, workers)
        assert manifest["sources"][0]["path"].startswith("<in-memory ")
        assert manifest["totals"]["documents"] == len(texts)
        assert not (out / "units").exists()          # the spill went with the run's bookkeeping
    shards = TokenShards(str(tmp_path / "streaming-2"))
    eos = tok.special_tokens["<|endoftext|>"]
    for i in (0, 17, len(texts) - 1):
        assert shards.doc(i).tolist() == np.asarray(tok.encode(texts[i])).tolist() + [eos]
        assert shards.source(i) == (shards.manifest["sources"][0]["path"], i)
    # a rerun with the same data resumes (nothing to do); other data is refused
    again = EncodeSummary()
    encode_corpus(iter(texts), tokenizer=tok, output=str(tmp_path / "iter-1"), unit_rows=100, summary=again,
                  show_progress=False)
    assert again.already_complete
    with pytest.raises(ShardFormatError, match="other settings"):
        encode_corpus(iter(texts[:-1]), tokenizer=tok, output=str(tmp_path / "iter-1"), unit_rows=100,
                      show_progress=False)
    # skipped items of an in-memory input are counted in MANIFEST
    manifest = encode_corpus(iter(["a", None, "b"]), tokenizer=tok, output=str(tmp_path / "nulls"),
                             show_progress=False)
    assert manifest["totals"]["skipped"] == {"null": 1} and manifest["totals"]["documents"] == 2
    with pytest.raises(ValueError, match="ranks"):
        encode_corpus(iter(texts), tokenizer=tok, output=str(tmp_path / "ranked"), rank=0, world_size=2)


def test_in_memory_encode_keeps_datasets_import_lazy(tmp_path, tok):
    path = tmp_path / "tok.json"
    tok.save(path)
    code = ("import sys; from ube_stream.shards import encode_corpus; "
            f"encode_corpus(iter(['a b', 'c']), tokenizer={str(path)!r}, output={str(tmp_path / 'o')!r}, "
            "workers=1, show_progress=False); print('datasets' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "False"


def test_skipped_files_in_summary_manifest_and_training_metadata(tmp_path, texts, tok):
    root = tmp_path / "corpus"
    root.mkdir()
    _jsonl(root / "a.jsonl", [{"text": t} for t in texts[:50]])
    (root / "notes.md").write_text("not a corpus file\n", encoding="utf-8")
    (root / ".hidden.jsonl").write_text('{"text": "x"}\n', encoding="utf-8")
    expected = [{"path": str(root / ".hidden.jsonl"), "reason": "hidden name (starts with '.' or '_')"},
                {"path": str(root / "notes.md"),
                 "reason": "format not recognised from the name or the content (choose one with --format / format=)"}]
    summary = EncodeSummary()
    manifest = encode_corpus(str(root), tokenizer=tok, output=str(tmp_path / "out"), workers=1, summary=summary,
                             show_progress=False)
    assert manifest["skipped_files"] == expected and summary.skipped_files == expected
    text = summary.format()
    assert "skipped files  2" in text and f"{root / 'notes.md'}: format not recognised" in text
    proc = subprocess.run([sys.executable, "-m", "ube_stream", "inspect", str(tmp_path / "out")], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and f"  {root / '.hidden.jsonl'}: hidden name" in proc.stdout
    train_summary = TrainSummary()
    trained = train(str(root), vocab_size=512 + 20 + 1, workers=1, show_progress=False, summary=train_summary)
    assert trained.training["skipped_files"] == expected and train_summary.skipped_files == expected
    assert trained.training["inputs"] == [str(root / "a.jsonl")]          # full paths, not basenames
    assert "skipped files  2" in train_summary.format()
    in_memory = train(iter(texts[:50]), vocab_size=512 + 20 + 1, workers=1, show_progress=False)
    assert in_memory.training["inputs"] == ["<in-memory builtins.list_iterator>"]


class _RecordingBar:
    """Stands in for tqdm: keeps what the bar would show."""

    bars: list = []

    def __init__(self, **kwargs):
        self.total, self.unit, self.desc, self.n, self.postfix = kwargs["total"], kwargs["unit"], kwargs["desc"], 0, {}
        _RecordingBar.bars.append(self)

    def update(self, n=1):
        self.n += n

    def set_postfix(self, postfix=None, refresh=True, **kwargs):
        self.postfix = dict(postfix or {}, **kwargs)

    def close(self):
        pass


def test_progress_bars_count_documents_and_utf8_megabytes_like_the_summary(tmp_path, texts, tok, monkeypatch):
    monkeypatch.setattr(_progress, "progress_bar", lambda **kw: _RecordingBar(**kw))
    _RecordingBar.bars = []
    rows = [{"text": t} for t in texts[:300]]
    rows[5] = {"text": None}
    rows[77] = {"body": "no text field"}
    path = tmp_path / "c.jsonl.gz"
    path.write_bytes(gzip.compress("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()))
    plain = _jsonl(tmp_path / "plain.jsonl", rows)
    summary = EncodeSummary()
    encode_corpus([plain], tokenizer=tok, output=str(tmp_path / "o"), workers=2, unit_rows=64, on_error="skip",
                  summary=summary)
    (bar,) = [b for b in _RecordingBar.bars if b.desc == "encoding"]
    utf8 = sum(len(r["text"].encode()) for r in rows if isinstance(r.get("text"), str))
    assert bar.unit == "doc" and bar.n == summary.documents == 298 and bar.total == 298
    assert bar.postfix["MB"] == f"{utf8 / 1e6:,.1f}" and summary.bytes_read == utf8
    assert bar.postfix["tokens"] == f"{summary.tokens:,}" and bar.postfix["skipped"] == "2"
    from ube_stream.verification import verify_corpus

    _RecordingBar.bars = []
    report = verify_corpus([plain], tok, workers=1, unit_rows=64, on_error="skip")
    (bar,) = [b for b in _RecordingBar.bars if b.desc == "verify corpus" and b.unit == "doc"]
    assert bar.n == bar.total == report.checked["documents"] == 298
    assert bar.postfix["MB"] == f"{utf8 / 1e6:,.1f}" and report.checked["UTF-8 bytes"] == utf8
    # a compressed file: no row count ahead (total None), never compressed bytes
    _RecordingBar.bars = []
    train_summary = TrainSummary()
    train(str(path), vocab_size=512 + 20 + 1, workers=1, on_error="skip", summary=train_summary)
    (bar,) = [b for b in _RecordingBar.bars if b.desc == "counting chunks"]
    assert bar.unit == "doc" and bar.total is None and bar.n == train_summary.documents == 298
    assert bar.postfix["MB"] == f"{train_summary.bytes / 1e6:,.1f}" and train_summary.bytes == utf8


def test_cli_input_options_on_every_corpus_command(tmp_path, texts, tok):
    from ube_stream.cli.main import build_parser

    parser = build_parser()
    for argv in (["train", "x", "--vocab-size", "600", "-o", "t.json"], ["encode", "x", "--tokenizer", "t", "-o", "d"],
                 ["verify", "--corpus", "x", "--tokenizer", "t"], ["compare", "x"]):
        args = parser.parse_args(argv + ["--format", "jsonl", "--split", "train"])
        assert (args.format, args.split) == ("jsonl", "train"), argv
        with pytest.raises(SystemExit):
            parser.parse_args(argv + ["--format", "csv"])
    noext = tmp_path / "corpus_without_suffix"
    noext.write_text("".join(t + "\n" for t in texts[:40]), encoding="utf-8")
    tok_path = tmp_path / "tok.json"
    tok.save(tok_path)

    def ube(*argv):
        return subprocess.run([sys.executable, "-m", "ube_stream", *argv], capture_output=True, text=True, timeout=300)

    proc = ube("encode", str(noext), "--tokenizer", str(tok_path), "-o", str(tmp_path / "a"), "-q", "--workers", "1")
    assert proc.returncode == 1 and "--format text" in proc.stderr and str(noext) in proc.stderr
    proc = ube("encode", str(noext), "--format", "text", "--tokenizer", str(tok_path), "-o", str(tmp_path / "b"),
               "-q", "--workers", "1")
    assert proc.returncode == 0, proc.stderr
    assert TokenShards(str(tmp_path / "b")).manifest["options"]["format"] == "text"
    proc = ube("verify", "--shards", str(tmp_path / "b"), "-q", "--workers", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = ube("verify", "--corpus", str(noext), "--format", "text", "--column", "body", "--tokenizer", str(tok_path),
               "-q", "--workers", "1")
    assert proc.returncode == 1 and str(noext) in proc.stderr and "--column 'body'" in proc.stderr
