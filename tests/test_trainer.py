"""The streaming trainer end to end: kernels vs reference, determinism, HF quality, file format."""
import collections
import glob
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from _helpers import slow_after, write_jsonl

from ube_stream import _count, _route
from ube_stream import _reference as ref
from ube_stream.errors import TokenizerFormatError
from ube_stream.tokenizer import Tokenizer
from ube_stream.training.trainer import TrainSummary, train


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory, docs_rows):
    """Three JSONL files of real running text (several languages per file)."""
    root = tmp_path_factory.mktemp("corpus")
    rows = [r for r in docs_rows if r["lang"] in ("en-US", "zh-CN", "ja-JP", "ar-MA", "ru-RU", "ko-KR")]
    paths = []
    for i in range(3):
        texts = [line for r in rows[i::3] for line in r["text"][:20000].split("\n")]
        paths.append(write_jsonl(root / f"part-{i}.jsonl", texts))
    return paths


def reference_word_counts(paths, substrate):
    counts = collections.Counter()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                for chunk in ref.pretokenize(json.loads(line)["text"]):
                    counts[tuple(ref.route_symbols(chunk, substrate))] += 1
    return counts


# the reference recounts every pair at every merge (~10 s on all three files): the default
# suite takes ube on the first file (5 of the 6 languages), the slow tests all three files
# on every substrate
@pytest.mark.parametrize("substrate, files", slow_after([("ube", 1), ("ube", 3), ("utf8", 3), ("utf16", 3)],
                                                                several=True))
def test_trainer_equals_reference(small_corpus, substrate, files):
    n_base = 512 if substrate == "ube" else 256
    vocab = n_base + 120 + 1
    inputs = small_corpus[:files]
    tok = train(inputs, vocab_size=vocab, substrate=substrate, workers=1, show_progress=False)
    expected = ref.train_bpe_reference(reference_word_counts(inputs, substrate), n_base=n_base,
                                       max_vocab=vocab - 1, min_frequency=2)
    assert tok.merges == [(a, b) for a, b, _ in expected]
    assert tok.merge_results == [c for _, _, c in expected]
    assert tok.vocab_size == vocab
    assert tok.special_tokens == {"<|endoftext|>": vocab - 1}


def _saved_bytes(tok, path):
    tok.save(path)
    return path.read_bytes()


@pytest.fixture(scope="module")
def one_worker_file(small_corpus, tmp_path_factory):
    """The tokenizer file of one worker reading the files in order (what the others must equal)."""
    tok = train(small_corpus, vocab_size=900, substrate="ube", workers=1, show_progress=False, unit_rows=50)
    return _saved_bytes(tok, tmp_path_factory.mktemp("one-worker") / "tok.json")


# two workers on the files reversed (both changes at once) in the default suite; two
# workers in order with the slow tests
@pytest.mark.parametrize("reverse", slow_after([True, False]))
def test_deterministic_across_workers_and_input_order(small_corpus, one_worker_file, tmp_path, reverse, monkeypatch):
    from ube_stream.training import trainer

    monkeypatch.setattr(trainer, "PARTITION_MIN_BYTES", 0)   # two workers reduce in key ranges, one in the driver
    inputs = list(reversed(small_corpus)) if reverse else small_corpus
    tok = train(inputs, vocab_size=900, substrate="ube", workers=2, show_progress=False, unit_rows=50)
    assert _saved_bytes(tok, tmp_path / "tok.json") == one_worker_file


def test_max_bytes_sample_independent_of_workers(small_corpus):
    a = train(small_corpus, vocab_size=700, workers=1, max_bytes=150_000, show_progress=False, unit_rows=40)
    b = train(small_corpus, vocab_size=700, workers=2, max_bytes=150_000, show_progress=False, unit_rows=40)
    corpus_bytes = 0   # the UTF-8 text of every row, counted here
    for path in small_corpus:
        with open(path, encoding="utf-8") as f:
            corpus_bytes += sum(len(json.loads(line)["text"].encode("utf-8")) for line in f)
    assert a.to_json() == b.to_json()
    assert a.training["bytes"] < corpus_bytes
    # each unit reads whole documents up to its share: at most one document over per unit
    assert 150_000 <= a.training["bytes"] < 150_000 * 1.25, (a.training["bytes"], corpus_bytes)


def test_min_frequency_stops_early_with_smaller_vocab(tmp_path):
    from ube_stream import encode_symbols, pretokenize

    texts = ["abc abc abd"]
    path = write_jsonl(tmp_path / "tiny.jsonl", texts)
    summary = TrainSummary()
    tok = train([path], vocab_size=5000, substrate="utf8", workers=1, show_progress=False, summary=summary)
    assert tok.vocab_size < 5000
    assert summary.vocab_size == tok.vocab_size
    # every merge was seen at least twice: replay the merges on the corpus chunks, counting
    # each merged pair (overlaps included) just before it is applied; once training stopped,
    # no pair is left that occurs twice
    words = [list(encode_symbols(chunk, "utf8").tolist()) for t in texts for chunk in pretokenize(t)]

    def pair_counts():
        return collections.Counter(p for w in words for p in zip(w, w[1:]))

    for (left, right), result in zip(tok.merges, tok.merge_results):
        assert pair_counts()[(left, right)] >= 2, (left, right)
        for w in words:  # rewrite left to right, without overlap
            i = 0
            while i + 1 < len(w):
                if (w[i], w[i + 1]) == (left, right):
                    w[i:i + 2] = [result]
                i += 1
    assert max(pair_counts().values()) == 1
    # by hand: chunks "abc" " abc" " abd"; (a,b) x3 -> 256; then (" ",256) x2 and (256,c) x2
    # tie, the smaller pair wins -> 257; left: (256,c) (257,c) (257,d) once each
    assert tok.merges == [(97, 98), (32, 256)]
    assert tok.vocab_size == summary.vocab_size == 256 + 2 + 1


def test_special_tokens_replace_default_and_follow_merges(small_corpus):
    tok = train(small_corpus, vocab_size=600, special_tokens=["<s>", "</s>", "<pad>"], workers=1,
                show_progress=False)
    assert list(tok.special_tokens) == ["<s>", "</s>", "<pad>"]
    assert list(tok.special_tokens.values()) == [597, 598, 599]
    assert tok.token_symbols(597) == "<s>"


def test_in_memory_iterable(small_corpus):
    texts = []
    for path in small_corpus:
        with open(path, encoding="utf-8") as f:
            texts.extend(json.loads(line)["text"] for line in f)
    from_files = train(small_corpus, vocab_size=700, workers=1, show_progress=False)
    from_memory = train(iter(texts), vocab_size=700, workers=1, show_progress=False)
    assert from_memory.merges == from_files.merges


def test_weighted_count_above_2_31_merges_first():
    """A chunk seen 3e9 times (weighted table, not a 3e9-word corpus) must win the first merge."""
    from ube_stream.training.trainer import _train_merges

    counter = _count.ChunkCounter()
    keys = [b"zq", b"ab", b"ab ab"]
    data = np.frombuffer(b"".join(keys), dtype=np.uint8)
    offsets = np.array([0, 2, 4, 9], dtype=np.int64)
    counter.add_weighted(data, offsets, np.array([3_000_000_000, 2_000_000_000, 1_000_000_000], dtype=np.int64))
    key_data, key_offsets, counts = counter.export()
    assert counts.dtype == np.int64 and counts.max() == 3_000_000_000
    _, symbols, sym_offsets = _route.route_batch(key_data, key_offsets, 1)
    merges = _train_merges([symbols, sym_offsets, counts, None], n_base=256, max_vocab=258, min_frequency=2,
                           max_token_length=None, show_progress=False)
    # (a,b) occurs 2e9 + 2*1e9 = 4e9 times; (z,q) 3e9: both above 2^31, ordered correctly
    assert [tuple(m[:2]) for m in merges] == [(ord("a"), ord("b")), (ord("z"), ord("q"))]


# ---------------------------------------------------------------- tokenizer file

@pytest.fixture(scope="module")
def utf8_tokenizer(small_corpus):
    return train(small_corpus, vocab_size=1200, substrate="utf8", workers=1, show_progress=False)


def test_save_load_roundtrip(utf8_tokenizer, tmp_path):
    path = tmp_path / "tok.json"
    utf8_tokenizer.save(path)
    loaded = Tokenizer.load(path)
    assert loaded == utf8_tokenizer
    assert loaded.to_json() == path.read_text(encoding="utf-8")
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["format"] == "ube-stream-tokenizer" and doc["version"] == 1
    assert doc["substrate"] == "utf8" and doc["normalization"] == "none"
    assert doc["fingerprint"].startswith("sha256:")
    assert doc["training"]["ube_stream_version"]


def test_load_detects_edits(utf8_tokenizer, tmp_path):
    doc = json.loads(utf8_tokenizer.to_json())
    doc["merges"][5] = [doc["merges"][5][1], doc["merges"][5][0]]
    bad = tmp_path / "edited.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(TokenizerFormatError, match="fingerprint mismatch"):
        Tokenizer.load(bad)
    doc = json.loads(utf8_tokenizer.to_json())
    doc["version"] = 99
    bad.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(TokenizerFormatError, match="version 99"):
        Tokenizer.load(bad)
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(TokenizerFormatError, match="not a JSON file"):
        Tokenizer.load(bad)
    with pytest.raises(TokenizerFormatError, match="no such tokenizer file"):
        Tokenizer.load(tmp_path / "missing.json")


def test_version_2_fields_round_trip_and_version_1_still_loads(utf8_tokenizer, tmp_path):
    """``char_integrity`` and ``superbpe`` are encoding-relevant (fingerprinted) and make the file
    version 2; a tokenizer without them stays version 1, byte for byte."""
    plain = utf8_tokenizer
    assert json.loads(plain.to_json())["version"] == 1
    kw = dict(substrate=plain.substrate, merges=plain.merges, special_tokens=plain._special_internal,
              pattern=plain.pattern_name)
    for extra in ({"char_integrity": True}, {"superbpe": {"stage1_merges": 100, "max_words": 4}},
                  {"char_integrity": True, "superbpe": {"stage1_merges": 0, "max_words": 1}}):
        tok = Tokenizer(**kw, **extra)
        doc = json.loads(tok.to_json())
        assert doc["version"] == 2
        for key, value in extra.items():
            assert doc[key] == value
        assert tok.fingerprint != plain.fingerprint
        path = tmp_path / "v2.json"
        tok.save(path)
        loaded = Tokenizer.load(path)
        assert loaded == tok and loaded.to_json() == tok.to_json()
        assert loaded.char_integrity == bool(extra.get("char_integrity"))
        assert loaded.superbpe == extra.get("superbpe")


@pytest.mark.parametrize("edit, match", [
    (lambda d: d.update(version=1), r"'version' must be 2 for a file with \['superbpe'\]"),
    (lambda d: d["superbpe"].update(stage1_merges=10**6), "'superbpe' must be"),
    (lambda d: d["superbpe"].update(max_words=0), "'superbpe' must be"),
    (lambda d: d["superbpe"].update(extra=1), "'superbpe' must be"),
    (lambda d: d.update(char_integrity="yes"), "'char_integrity' must be true"),
])
def test_version_2_fields_are_checked(utf8_tokenizer, tmp_path, edit, match):
    tok = Tokenizer(substrate="utf8", merges=utf8_tokenizer.merges, pattern="gpt2",
                    superbpe={"stage1_merges": 5, "max_words": 4})
    doc = json.loads(tok.to_json())
    edit(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(TokenizerFormatError, match=match):
        Tokenizer.load(path)


def test_export_vocab_merges(tmp_path, small_corpus):
    tok = train(small_corpus, vocab_size=800, substrate="ube", workers=1, show_progress=False)
    vocab_path, merges_path = tok.export_vocab_merges(tmp_path)
    vocab = json.loads(open(vocab_path, encoding="utf-8").read())
    assert len(vocab) == tok.vocab_size
    assert sorted(vocab.values()) == list(range(tok.vocab_size))
    lines = open(merges_path, encoding="utf-8").read().splitlines()
    assert lines[0].startswith("#version")
    assert len(lines) - 1 == len(tok.merges)
    for line, (a, b), result in zip(lines[1:], tok.merges, tok.merge_results):
        left, right = line.split(" ")
        assert vocab[left] == a and vocab[right] == b and vocab[left + right] == result


def test_export_vocab_merges_marks_where_superbpe_stage2_starts(tmp_path, small_corpus, docs_rows):
    from _helpers import superbpe_from_plain

    plain = train(small_corpus, vocab_size=700, substrate="ube", workers=1, show_progress=False)
    texts = [r["text"][:3000] for r in docs_rows if r["lang"] == "en-US"][:20]
    tok = superbpe_from_plain(plain, texts, max_words=3, rounds=1, per_round=20)
    _, merges_path = tok.export_vocab_merges(tmp_path)
    lines = open(merges_path, encoding="utf-8").read().splitlines()
    assert lines[0] == (f"#version: 0.2 ube-stream substrate=ube superbpe_stage1_merges={len(plain.merges)} "
                        "superbpe_max_words=3")
    assert len(lines) - 1 == len(tok.merges) > len(plain.merges)
    _, plain_path = plain.export_vocab_merges(tmp_path / "plain")
    assert open(plain_path, encoding="utf-8").readline() == "#version: 0.2 ube-stream substrate=ube\n"


def test_export_hf_loads_and_encodes_like_reference(utf8_tokenizer, tmp_path, multilingual_lines):
    import tokenizers
    path = tmp_path / "hf.json"
    utf8_tokenizer.export_hf(path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    assert hf.get_vocab_size() == utf8_tokenizer.vocab_size
    merges = [(a, b, c) for (a, b), c in zip(utf8_tokenizer.merges, utf8_tokenizer.merge_results)]
    for text in multilingual_lines[:300:7]:
        ours = [t for chunk in ref.pretokenize(text)
                for t in ref.encode_chunk_reference(ref.route_symbols(chunk, "utf8"), merges)]
        assert hf.encode(text).ids == ours
        assert hf.decode(ours) == text


def test_export_hf_refuses_other_substrates(small_corpus):
    tok = train(small_corpus, vocab_size=600, substrate="ube", workers=1, show_progress=False)
    with pytest.raises(ValueError, match="utf8 substrate"):
        tok.to_hf_dict()


@pytest.mark.slow  # trains HF tokenizers twice on 2.3 MB
def test_quality_within_one_percent_of_hf(docs_rows, tmp_path):
    """Same corpus, utf8 substrate, same vocab: our merges encode the corpus in
    about as many tokens as HF's ByteLevel BPE trainer (both measured by HF's
    encoder, loaded once with each merge list)."""
    import tokenizers
    from tokenizers import Regex, models, pre_tokenizers, trainers

    texts = [line for r in docs_rows for line in r["text"].split("\n")]
    vocab = 4096
    ours = train(iter(texts), vocab_size=vocab, substrate="utf8", workers=1, show_progress=False)
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(ref.GPT2_PATTERN), "isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    hf.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=vocab, min_frequency=2, special_tokens=["<|endoftext|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = tmp_path / "ours.json"
    ours.export_hf(path)
    ours_hf = tokenizers.Tokenizer.from_file(str(path))
    ours_total = sum(len(e.ids) for e in ours_hf.encode_batch(texts))
    hf_total = sum(len(e.ids) for e in hf.encode_batch(texts))
    assert abs(ours_total - hf_total) / hf_total < 0.01, (ours_total, hf_total)


# ---------------------------------------------------------------- CLI

def test_cli_train(small_corpus, tmp_path):
    out = tmp_path / "cli.json"
    proc = subprocess.run([sys.executable, "-m", "ube_stream", "train", *small_corpus, "--vocab-size", "700",
                           "--substrate", "ube", "--workers", "2", "-o", str(out)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "unique" in proc.stderr and "merges" in proc.stderr
    tok = Tokenizer.load(out)
    assert tok.vocab_size == 700 and tok.substrate == "ube"
    api = train(small_corpus, vocab_size=700, substrate="ube", workers=1, show_progress=False)
    assert api.to_json() == out.read_text(encoding="utf-8")


def test_cli_train_bad_input_names_file(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"text": "ok"}\n{"text": "\xff\xfe"}\n')
    out = tmp_path / "x.json"
    proc = subprocess.run([sys.executable, "-m", "ube_stream", "train", str(bad), "--vocab-size", "600",
                           "-o", str(out), "-q", "--workers", "1"], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "bad.jsonl" in proc.stderr and "error" in proc.stderr
    assert not out.exists()
    proc = subprocess.run([sys.executable, "-m", "ube_stream", "train", str(bad), "--vocab-size", "600",
                           "-o", str(out), "-q", "--workers", "1", "--on-error", "skip"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert Tokenizer.load(out).training["skipped"] == {"invalid_utf8": 1}


# ---------------------------------------------------------------- crashes: kept count tables, work directory, modes

RESUME = dict(vocab_size=700, substrate="ube", workers=1, unit_rows=100, show_progress=False)


@pytest.fixture(scope="module")
def clean_tokenizer_bytes(small_corpus, tmp_path_factory):
    """The tokenizer file of an uninterrupted run (the truth a resumed run must equal)."""
    out = tmp_path_factory.mktemp("clean") / "tok.json"
    summary = TrainSummary()
    train(small_corpus, output=str(out), summary=summary, **RESUME)
    assert summary.units > 3 and summary.units_reused == 0
    assert not os.path.exists(str(out) + ".ube-work"), "a finished run leaves its work directory behind"
    return out.read_bytes()


def _records(work_root):
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(work_root, "run-*", "tables", "*.json")))


def test_failed_phase2_keeps_tables_and_rerun_reuses_them(small_corpus, tmp_path, monkeypatch,
                                                          clean_tokenizer_bytes):
    from ube_stream.training import trainer

    out = tmp_path / "tok.json"

    def broken_merges(*args, **kwargs):
        raise MemoryError("phase 2 failed (injected)")

    monkeypatch.setattr(trainer, "_train_merges", broken_merges)
    with pytest.raises(MemoryError, match="injected"):
        train(small_corpus, output=str(out), **RESUME)
    assert not out.exists()
    kept = _records(str(out) + ".ube-work")
    assert len(kept) > 3
    monkeypatch.undo()

    def no_recount(task):
        raise AssertionError(f"unit {task['unit'].unit_id} was counted again")

    monkeypatch.setattr(trainer, "_count_unit_star", no_recount)   # workers=1: phase 1 runs in this process
    summary = TrainSummary()
    train(small_corpus, output=str(out), summary=summary, **RESUME)
    assert summary.units_reused == summary.units == len(kept)
    assert out.read_bytes() == clean_tokenizer_bytes
    assert not os.path.exists(str(out) + ".ube-work")


def test_damaged_table_of_a_finished_unit_is_counted_again(small_corpus, tmp_path, monkeypatch,
                                                          clean_tokenizer_bytes):
    from ube_stream.training import trainer
    from ube_stream.training.chunk_table import TableFile

    out = tmp_path / "tok.json"
    monkeypatch.setattr(trainer, "_train_merges", lambda *a, **k: (_ for _ in ()).throw(MemoryError("injected")))
    with pytest.raises(MemoryError, match="injected"):
        train(small_corpus, output=str(out), **RESUME)
    monkeypatch.undo()
    tables = sorted(glob.glob(str(out) + ".ube-work/run-*/tables/*.npz"))
    with TableFile(tables[1]) as table:
        at = table._data_at["counts"] + 8 * (table.n_keys // 2)
    raw = bytearray(open(tables[1], "rb").read())
    raw[at] ^= 0x01          # one count off by one: the structure holds, the CRC does not
    with open(tables[1], "wb") as f:
        f.write(raw)
    summary = TrainSummary()
    train(small_corpus, output=str(out), summary=summary, **RESUME)
    assert summary.units_reused == summary.units - 1 == len(tables) - 1
    assert out.read_bytes() == clean_tokenizer_bytes


@pytest.mark.parametrize("parts", [1, 2, 3, 8])
def test_range_partitioned_reduce_equals_adding_every_table(tmp_path, monkeypatch, small_corpus, parts):
    """Unit tables of real text reduced in key ranges on two workers: the same table as one
    ``merge_tables`` of them all, for any number of ranges (an empty table among them)."""
    from ube_stream.executors import LocalExecutor
    from ube_stream.pretokenizer import chunk_bounds_batch
    from ube_stream.training import trainer
    from ube_stream.training.chunk_table import load_table, merge_tables, save_table

    monkeypatch.setattr(trainer, "PARTITION_MIN_BYTES", 0)
    paths, tables = [], []
    for i, path in enumerate(small_corpus * 2):
        with open(path, encoding="utf-8") as f:
            texts = [json.loads(line)["text"] for line in f][i::2]
        raw = [t.encode("utf-8") for t in texts]
        data = np.frombuffer(b"".join(raw), np.uint8)
        offsets = np.cumsum([0] + [len(r) for r in raw]).astype(np.int64)
        ends, _ = chunk_bounds_batch(data, offsets, "gpt2")
        counter = _count.ChunkCounter()
        counter.add_chunks(np.ascontiguousarray(data), ends, 0)
        tables.append(counter.export())
        paths.append(str(tmp_path / f"unit-{i}.npz"))
        save_table(paths[-1], tables[-1])
    empty = _count.ChunkCounter().export()
    save_table(tmp_path / "empty.npz", empty)
    paths.insert(2, str(tmp_path / "empty.npz"))
    expected = merge_tables(tables)
    assert len(expected[2]) > 5000
    os.makedirs(tmp_path / "tmp")
    with LocalExecutor(2) as runner:
        got = trainer._reduce_tables(paths, runner, str(tmp_path / "tmp"), parts=parts)
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
    assert os.listdir(tmp_path / "tmp") == []          # the range tables are removed
    assert all(len(load_table(p)[2]) == len(t[2]) for p, t in zip(paths[:2], tables))   # inputs kept


def test_sigkilled_train_resumes_from_the_finished_units(small_corpus, tmp_path, clean_tokenizer_bytes):
    from ube_stream import readers

    out = tmp_path / "tok.json"
    units = readers.plan_units(readers.resolve_inputs(small_corpus), unit_rows=RESUME["unit_rows"])
    killed = next(i for i, u in enumerate(units) if u.source.source_id == 1 and u.row_start > 0)
    env = dict(os.environ, UBE_TEST_KILL_UNIT=f"{out}.ube-work/*|{units[killed].unit_id}|{tmp_path / 'killed'}|group")
    proc = subprocess.run([sys.executable, "-m", "ube_stream", "train", *small_corpus, "--vocab-size", "700",
                           "--unit-rows", "100", "--workers", "1", "-q", "-o", str(out)],
                          capture_output=True, text=True, env=env, start_new_session=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert not out.exists()
    assert len(_records(str(out) + ".ube-work")) == killed     # the units before the killed one are kept
    proc = subprocess.run([sys.executable, "-m", "ube_stream", "train", *small_corpus, "--vocab-size", "700",
                           "--unit-rows", "100", "--workers", "2", "-o", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"({killed} counted by an earlier run" in proc.stderr
    assert out.read_bytes() == clean_tokenizer_bytes
    assert not os.path.exists(str(out) + ".ube-work")


def test_changed_input_never_reuses_stale_tables(small_corpus, tmp_path, monkeypatch):
    from ube_stream.training import trainer

    inputs = []
    for i, path in enumerate(small_corpus):
        inputs.append(str(tmp_path / f"part-{i}.jsonl"))
        shutil.copyfile(path, inputs[-1])
    out = tmp_path / "tok.json"
    monkeypatch.setattr(trainer, "_train_merges", lambda *a, **k: (_ for _ in ()).throw(OSError("injected")))
    with pytest.raises(OSError, match="injected"):
        train(inputs, output=str(out), **RESUME)
    stale = glob.glob(str(out) + ".ube-work/run-*")
    assert len(stale) == 1
    monkeypatch.undo()
    with open(inputs[0], "a", encoding="utf-8") as f:        # same size class, new content
        f.write(json.dumps({"text": "a line added after the crash, counted by the rerun"}) + "\n")
    summary = TrainSummary()
    train(inputs, output=str(out), summary=summary, **RESUME)
    assert summary.units_reused == 0
    assert not os.path.exists(stale[0]), "the dead run's stale tables were left behind"
    assert out.read_text(encoding="utf-8") == train(inputs, **RESUME).to_json()


def test_leftovers_of_dead_runs_are_removed_live_ones_kept(small_corpus, tmp_path, monkeypatch):
    import socket

    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    os.makedirs(tmp_path / "tmp")
    work = tmp_path / "work"
    dead, live = work / "run-dead", work / "run-live"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        for d, pid in ((dead, 2 ** 22 + 12345), (live, sleeper.pid)):
            os.makedirs(d / "tmp")
            (d / "tmp" / "in-memory.arrow").write_bytes(b"x" * 4096)
            (d / "lock").write_text(json.dumps({"host": socket.gethostname(), "pid": pid}))
        texts = [json.loads(line)["text"] for p in small_corpus for line in open(p, encoding="utf-8")][:300]
        train(iter(texts), work_dir=str(work), **RESUME)         # in memory: spilled under the work dir
        assert sorted(os.listdir(work)) == ["run-live"]
        train(iter(texts), **RESUME)                              # no output, no work_dir: $TMPDIR, cleaned
        assert os.listdir(tmp_path / "tmp") == []
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_tokenizer_and_eval_files_follow_the_umask(small_corpus, tmp_path, umask):
    from ube_stream.evaluation.output import write_csv, write_json

    tok = train(small_corpus[:1], vocab_size=600, workers=1, show_progress=False)
    table = {"tokenizers": [], "languages": []}
    old = os.umask(umask)
    try:
        tok.save(tmp_path / "tok.json")
        write_json(table, tmp_path / "eval.json")
        write_csv(table, tmp_path / "eval.csv")
    finally:
        os.umask(old)
    for name in ("tok.json", "eval.json", "eval.csv"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o666 & ~umask, name


def test_same_training_running_elsewhere(small_corpus, tmp_path, monkeypatch):
    """A live process holding the run directory: with a work directory of its own (output or
    work_dir) a second run stops with a LockError naming it; in the shared $TMPDIR it works apart."""
    import socket

    from ube_stream.errors import LockError
    from ube_stream.training import trainer

    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    os.makedirs(tmp_path / "tmp")
    monkeypatch.setattr(trainer, "_train_merges", lambda *a, **k: (_ for _ in ()).throw(OSError("injected")))
    with pytest.raises(OSError, match="injected"):
        train(small_corpus, **RESUME)
    monkeypatch.undo()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)
    (run_dir,) = glob.glob(str(tmp_path / "tmp" / "ube-train-*" / "run-*"))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        with open(os.path.join(run_dir, "lock"), "w") as f:
            json.dump({"host": socket.gethostname(), "pid": sleeper.pid}, f)
        summary = TrainSummary()
        tok = train(small_corpus, summary=summary, **RESUME)
        assert summary.units_reused == 0 and os.path.isdir(os.path.join(run_dir, "tables"))
        with pytest.raises(LockError, match=f"process {sleeper.pid}"):
            train(small_corpus, work_dir=os.path.dirname(run_dir), **RESUME)
    finally:
        sleeper.kill()
        sleeper.wait()
    summary = TrainSummary()                                   # the holder is gone: its tables are reused
    assert train(small_corpus, summary=summary, **RESUME).to_json() == tok.to_json()
    assert summary.units_reused == summary.units
