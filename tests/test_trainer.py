"""The streaming trainer end to end: kernels vs reference, determinism, HF quality, file format."""
import collections
import json
import subprocess
import sys

import numpy as np
import pytest

from ube_stream import _count, _route
from ube_stream import _reference as ref
from ube_stream.errors import TokenizerFormatError
from ube_stream.tokenizer import Tokenizer
from ube_stream.training.trainer import TrainSummary, train


def write_jsonl(path, texts):
    with open(path, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
    return str(path)


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


@pytest.mark.parametrize("substrate", ["ube", "utf8", "utf16"])
def test_trainer_equals_reference(small_corpus, substrate):
    n_base = 512 if substrate == "ube" else 256
    vocab = n_base + 120 + 1
    tok = train(small_corpus, vocab_size=vocab, substrate=substrate, workers=1, show_progress=False)
    expected = ref.train_bpe_reference(reference_word_counts(small_corpus, substrate), n_base=n_base,
                                       max_vocab=vocab - 1, min_frequency=2)
    assert tok.merges == [(a, b) for a, b, _ in expected]
    assert tok.merge_results == [c for _, _, c in expected]
    assert tok.vocab_size == vocab
    assert tok.special_tokens == {"<|endoftext|>": vocab - 1}


def test_deterministic_across_workers_and_input_order(small_corpus, tmp_path):
    files = []
    for workers, inputs in ((1, small_corpus), (2, small_corpus), (2, list(reversed(small_corpus)))):
        tok = train(inputs, vocab_size=900, substrate="ube", workers=workers, show_progress=False, unit_rows=50)
        out = tmp_path / f"tok-{len(files)}.json"
        tok.save(out)
        files.append(out.read_bytes())
    assert files[0] == files[1] == files[2]


def test_max_bytes_sample_independent_of_workers(small_corpus):
    a = train(small_corpus, vocab_size=700, workers=1, max_bytes=150_000, show_progress=False, unit_rows=40)
    b = train(small_corpus, vocab_size=700, workers=2, max_bytes=150_000, show_progress=False, unit_rows=40)
    full = train(small_corpus, vocab_size=700, workers=1, show_progress=False, unit_rows=40)
    assert a.to_json() == b.to_json()
    assert a.training["bytes"] < full.training["bytes"]
    # each unit reads whole documents up to its share: at most one document over per unit
    assert 150_000 <= a.training["bytes"] < 150_000 * 1.25, (a.training["bytes"], full.training["bytes"])


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
    merges = _train_merges(symbols, sym_offsets, counts, n_base=256, max_vocab=258, min_frequency=2,
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
