"""What `ube encode` (and every `ube` command) spends before its first document:
the modules a run of plain JSON Lines never imports, the process settings the
command line makes for itself only, and the tokenizer load computing each
thing once.  (The output of the command itself: tests/test_pipeline.py,
tests/test_shards.py, tests/test_errors.py.)"""
from __future__ import annotations

import gc
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest
import zstandard
from _helpers import write_jsonl

from ube_stream import storage
from ube_stream.cli import main
from ube_stream.readers import compression
from ube_stream.shards import TokenShards
from ube_stream.tokenizer import Tokenizer, file_format
from ube_stream.tokenizer.core import as_tokenizer
from ube_stream.training.trainer import train

TEXTS = ["Hello world, it's me.", "Grüße aus Köln: 42 Äpfel", "GPU性能 テスト", "plain ascii line"] * 5
# imported by other commands or inputs (Parquet, URLs, zstd, progress bars, Ray, HF, a pool of workers)
NOT_NEEDED = ("pyarrow", "fsspec", "s3fs", "tqdm", "ray", "transformers", "torch", "zstandard", "socket",
              "multiprocessing")

PROBE = """
import gc, json, os, sys
from ube_stream.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(m for m in %r if m in sys.modules),
                  "openblas": os.environ.get("OPENBLAS_NUM_THREADS"), "gc": gc.isenabled()}))
""" % (NOT_NEEDED,)


@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("tok") / "utf8.json"
    train(iter(TEXTS), vocab_size=300, substrate="utf8", workers=1, show_progress=False).save(path)
    return path


def run_probe(argv, env=None):
    proc = subprocess.run([sys.executable, "-c", PROBE, *map(str, argv)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_encode_of_plain_jsonl_imports_only_what_it_uses(tmp_path, tokenizer_file):
    corpus = write_jsonl(tmp_path / "c.jsonl", TEXTS)
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    found = run_probe(["encode", corpus, "--tokenizer", tokenizer_file, "-o", tmp_path / "out", "--workers", "1",
                       "-q"], env=env)
    assert found == {"code": 0, "modules": [], "openblas": "1", "gc": True}
    shards = TokenShards(tmp_path / "out", verify="full")
    tok = Tokenizer.load(tokenizer_file)
    assert [shards[i].tolist() for i in range(len(shards))] == [list(tok.encode(t)) + [tok.special_tokens["<|endoftext|>"]] for t in TEXTS]


def test_a_thread_count_the_user_set_is_kept(tmp_path, tokenizer_file):
    corpus = write_jsonl(tmp_path / "c.jsonl", TEXTS[:2])
    env = dict(os.environ, OPENBLAS_NUM_THREADS="3")
    found = run_probe(["encode", corpus, "--tokenizer", tokenizer_file, "-o", tmp_path / "out", "-q"], env=env)
    assert found["code"] == 0 and found["openblas"] == "3"


def test_a_hf_file_is_parsed_once_with_the_collector_paused(tokenizer_file, tmp_path, monkeypatch):
    from ube_stream.errors import TokenizerFormatError

    hf_file = tmp_path / "tokenizer.json"
    Tokenizer.load(tokenizer_file).export_hf(hf_file)
    text = hf_file.read_text(encoding="utf-8")
    direct = Tokenizer.from_hf(hf_file)
    real_loads = json.loads
    parses = []   # (whole file?, collector on?) of each json.loads while as_tokenizer runs

    def loads(doc, *args, **kwargs):
        parses.append((doc == text, gc.isenabled()))
        return real_loads(doc, *args, **kwargs)

    monkeypatch.setattr(json, "loads", loads)
    via = as_tokenizer(hf_file)
    monkeypatch.setattr(json, "loads", real_loads)
    assert (via.fingerprint, via.merges, via.special_tokens) == (direct.fingerprint, direct.merges,
                                                                 direct.special_tokens)
    assert [p for p in parses if p[0]] == [(True, False)] and gc.isenabled()   # once, collector off, on after
    doc = real_loads(text)
    doc["model"]["merges"][3] = "x \u2603"   # not a byte-level token: refused, the same way by both paths
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(TokenizerFormatError) as by_content:
        as_tokenizer(bad)
    with pytest.raises(TokenizerFormatError) as by_hf:
        Tokenizer.from_hf(bad)
    assert str(by_content.value) == str(by_hf.value) and "model.merges[3]" in str(by_hf.value)
    assert gc.isenabled()   # on again after a refusal
    gc.disable()
    try:
        as_tokenizer(hf_file)
        assert not gc.isenabled()   # a caller's collector left off stays off
    finally:
        gc.enable()


def test_main_in_a_callers_process_leaves_its_settings(tmp_path, tokenizer_file, monkeypatch, capsys):
    # numpy is imported here: main() is a library call, so neither the environment nor
    # the collector of the caller's process is touched
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    frozen = gc.get_freeze_count()
    corpus = write_jsonl(tmp_path / "c.jsonl", TEXTS[:3])
    assert main(["encode", corpus, "--tokenizer", str(tokenizer_file), "-o", str(tmp_path / "out"), "-q"]) == 0
    assert "OPENBLAS_NUM_THREADS" not in os.environ and gc.isenabled() and gc.get_freeze_count() == frozen
    assert len(TokenShards(tmp_path / "out")) == 3


def test_help_restores_the_collector():
    # --help leaves parse_args by SystemExit: the collector is on again all the same
    proc = subprocess.run([sys.executable, "-c", "import gc, sys\nfrom ube_stream.cli import main\ntry:\n"
                           "    main(['encode', '--help'])\nexcept SystemExit:\n    print(gc.isenabled())"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "True" and "--tokenizer" in proc.stdout


def test_broken_stream_errors_name_zstandard_only_for_zstd():
    assert compression.broken_errors(None) == compression.broken_errors("gzip")
    assert zstandard.ZstdError not in compression.broken_errors(None)
    assert zstandard.ZstdError in compression.broken_errors("zstd")
    assert EOFError in compression.broken_errors(None) and OSError in compression.broken_errors("gzip")


def test_hostname_is_the_socket_hostname():
    assert storage.hostname() == socket.gethostname()
    assert storage.temp_name("/x/f", unique=True) == f"/x/f{storage.TMP_SUFFIX}.{socket.gethostname()}.{os.getpid()}"


def test_fingerprint_is_computed_once_and_follows_the_id_map(tokenizer_file):
    tok = Tokenizer.load(tokenizer_file)
    first = tok.fingerprint
    assert first == file_format.fingerprint(tok._canonical()) == json.loads(tokenizer_file.read_text())["fingerprint"]
    assert tok.fingerprint is first                         # cached
    order = np.arange(tok.vocab_size)[::-1].copy()
    tok._set_id_map(order)                                   # model ids of their own: new content, new print
    assert tok.fingerprint != first and tok.fingerprint == file_format.fingerprint(tok._canonical())
    tok._set_id_map(None)
    assert tok.fingerprint == first


def test_as_tokenizer_reads_the_file_once_as_from_json_would(tokenizer_file):
    text = tokenizer_file.read_text(encoding="utf-8")
    via_path, via_text = as_tokenizer(tokenizer_file), Tokenizer.from_json(text, source=str(tokenizer_file))
    assert via_path == via_text and via_path.merges == via_text.merges and via_path.trust_pattern is False
    doc = json.loads(text)
    doc["merges"][3] = [1, "x"]
    bad = tokenizer_file.parent / "bad.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(Exception) as by_path:
        as_tokenizer(bad)
    with pytest.raises(Exception) as by_text:
        Tokenizer.load(bad)
    assert type(by_path.value) is type(by_text.value) and str(by_path.value) == str(by_text.value)
    assert "merges[3]" in str(by_path.value) and str(bad) in str(by_path.value)
