"""UBE tokenizers in the model ecosystem: the transformers class (every substrate),
a tiny causal LM trained on our shards and generating through it, complete HF
folders for utf8 tokenizers, and existing models' tokenizers (HF tokenizer.json,
tiktoken rank files) through the one as_tokenizer."""
import json
import os

import numpy as np
import pytest
import transformers
from _helpers import openai_rank_file, openai_ranks

from ube_stream import Tokenizer, train  # noqa: E402
from ube_stream.sample import sample_paths  # noqa: E402

SUBSTRATES = ("ube", "utf8", "utf16")
SPECIALS = ["<|endoftext|>", "<|pad|>"]


@pytest.fixture(scope="module")
def toks():
    """A small tokenizer per substrate, trained on the bundled sample."""
    train_file = sample_paths()["train"]
    return {s: train([train_file], vocab_size={"ube": 800, "utf8": 600, "utf16": 600}[s], substrate=s,
                     special_tokens=SPECIALS, workers=1, show_progress=False) for s in SUBSTRATES}


@pytest.fixture(scope="module")
def texts(docs_rows):
    """Real multilingual lines (Bengali, CJK, Arabic, Cyrillic... from the Debian Handbook)."""
    by_lang = {}
    for row in docs_rows:
        by_lang.setdefault(row["lang"], row["text"])
    return [t[:400] for t in by_lang.values()]


def _ube(tok):
    from ube_stream.hf import UbeTokenizer

    return UbeTokenizer(tokenizer=tok)


# --------------------------------------------------------------------------- the class

@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_class_ids_equal_tokenizer_encode(toks, texts, substrate):
    tok = toks[substrate]
    hf = _ube(tok)
    assert (hf.eos_token, hf.pad_token, hf.bos_token, hf.unk_token) == ("<|endoftext|>", "<|pad|>", None, None)
    assert hf.eos_token_id == tok.special_tokens["<|endoftext|>"] and len(hf) == tok.vocab_size
    expected = [tok.encode(t).tolist() for t in texts]
    assert [hf(t)["input_ids"] for t in texts] == expected
    assert hf.encode(texts[0]) == expected[0]
    batch = hf(texts, padding=True, return_tensors="np")
    width = max(map(len, expected))
    assert batch["input_ids"].shape == (len(texts), width)
    for row, mask, ids in zip(batch["input_ids"], batch["attention_mask"], expected):
        assert row[:len(ids)].tolist() == ids and set(row[len(ids):].tolist()) <= {hf.pad_token_id}
        assert mask.tolist() == [1] * len(ids) + [0] * (width - len(ids))
    cut = hf(texts, truncation=True, max_length=7)["input_ids"]
    assert cut == [ids[:7] for ids in expected]
    for t, ids in zip(texts, expected):
        assert hf.decode(ids) == t == tok.decode(ids)
    # special tokens written in text are recognised (HF's rule), split_special_tokens encodes them as text
    marked = texts[1][:30] + "<|endoftext|>" + texts[2][:30]
    assert hf(marked)["input_ids"] == tok.encode(marked, allowed_special="all").tolist()
    assert hf(marked, split_special_tokens=True)["input_ids"] == tok.encode_ordinary(marked).tolist()
    with_special = hf(marked)["input_ids"]
    assert hf.decode(with_special, skip_special_tokens=True) == texts[1][:30] + texts[2][:30]
    assert hf.convert_tokens_to_string(hf.tokenize(texts[3])) == texts[3]
    assert hf.convert_tokens_to_ids(hf.tokenize(texts[3])) == tok.encode(texts[3]).tolist()


def test_class_bos_eos_pairs_and_stream_decoding(toks, texts):
    from ube_stream.hf import UbeTokenizer

    tok = toks["ube"]
    hf = UbeTokenizer(tokenizer=tok, add_eos=True, bos_token="<|pad|>", add_bos=True)
    a, b = tok.encode(texts[0]).tolist(), tok.encode(texts[1]).tolist()
    bos, eos = tok.special_tokens["<|pad|>"], tok.special_tokens["<|endoftext|>"]
    assert hf(texts[0])["input_ids"] == [bos] + a + [eos]
    assert hf(texts[0], texts[1])["input_ids"] == [bos] + a + [eos, bos] + b + [eos]
    assert hf(texts[0], add_special_tokens=False)["input_ids"] == a
    assert hf(texts[0], return_special_tokens_mask=True)["special_tokens_mask"] == [1] + [0] * len(a) + [1]
    with pytest.raises(ValueError, match="not a special token"):
        UbeTokenizer(tokenizer=tok, eos_token="</s>")
    with pytest.raises(ValueError, match="cannot add tokens"):
        hf.add_tokens(["<new>"])
    # incremental: never part of a character, and equal to decode for every prefix
    ids = tok.encode(texts[1] + "😀👍🏽").tolist()
    dec = hf.stream_decoder()
    pieces = [dec.feed(i) for i in ids]
    assert "".join(pieces) + dec.flush() == tok.decode(ids)
    assert all("\ufffd" not in p for p in pieces)
    assert all(tok.decode(ids).startswith("".join(pieces[:k])) for k in range(len(pieces)))


def test_save_pretrained_and_auto_tokenizer(toks, texts, tmp_path):
    from ube_stream.hf import UbeTokenizer

    tok = toks["utf16"]
    folder = tmp_path / "tok"
    _ube(tok).save_pretrained(folder)
    names = set(os.listdir(folder))
    assert {"ube_tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenization_ube.py"} <= names
    assert Tokenizer.load(folder / "ube_tokenizer.json") == tok
    assert json.loads((folder / "special_tokens_map.json").read_text()) == {
        "eos_token": "<|endoftext|>", "pad_token": "<|pad|>"}
    again = UbeTokenizer.from_pretrained(folder)
    auto = transformers.AutoTokenizer.from_pretrained(str(folder), trust_remote_code=True)
    assert type(auto).__name__ == "UbeTokenizer"
    for loaded in (again, auto):
        assert loaded.pad_token_id == tok.special_tokens["<|pad|>"]
        assert [loaded(t)["input_ids"] for t in texts] == [tok.encode(t).tolist() for t in texts]
    from ube_stream.tokenizer import as_tokenizer

    assert as_tokenizer(folder) == tok   # a saved folder is a --tokenizer too


def test_datasets_map_batched(toks, texts):
    import datasets
    tok = toks["ube"]
    hf = _ube(tok)
    ds = datasets.Dataset.from_dict({"text": texts})
    mapped = ds.map(lambda batch: hf(batch["text"]), batched=True, batch_size=3, remove_columns=["text"])
    assert mapped["input_ids"] == [tok.encode(t).tolist() for t in texts]
    assert mapped["attention_mask"] == [[1] * len(tok.encode(t)) for t in texts]


def test_tiny_causal_lm_on_our_shards_generates_through_the_class(toks, tmp_path):
    """Forward + backward on TokenDataset batches over shards encode_corpus wrote;
    generate's ids decode the same through the class, the streamer, the stream
    decoder and Tokenizer.decode."""
    torch = pytest.importorskip("torch")
    from ube_stream.hf import UbeStreamer
    from ube_stream.loader import TokenDataset, collate
    from ube_stream.shards import encode_corpus

    tok = toks["ube"]
    hf = _ube(tok)
    out = tmp_path / "shards"
    encode_corpus([sample_paths()["train"]], tokenizer=tok, output=out, workers=1, show_progress=False)
    ds = TokenDataset(str(out), seq_len=32, seed=1)
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=tok.vocab_size, n_positions=64, n_embd=64, n_layer=2, n_head=2,
                                     eos_token_id=hf.eos_token_id, bos_token_id=hf.eos_token_id,
                                     pad_token_id=hf.pad_token_id)
    model = transformers.GPT2LMHeadModel(config)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = collate([torch.as_tensor(ds[k]) for k in range(8)])
    assert x.shape == (8, 32) and int(x.max()) < tok.vocab_size
    losses = []
    for _ in range(3):
        logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        optim.zero_grad()
        loss.backward()
        optim.step()
        losses.append(float(loss.detach()))
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert abs(losses[0] - np.log(tok.vocab_size)) < 1.0   # a random model starts near uniform
    model.eval()
    prompt = hf(["Debian 性能"], return_tensors="pt")
    pieces = []
    streamer = UbeStreamer(hf, on_text=pieces.append)
    with torch.no_grad():
        generated = model.generate(**prompt, max_new_tokens=24, do_sample=True, top_k=50, streamer=streamer,
                                   pad_token_id=hf.pad_token_id)
    ids = generated[0].tolist()
    assert ids[:prompt["input_ids"].shape[1]] == tok.encode("Debian 性能").tolist()
    expected = tok.decode(ids, errors="replace")
    assert hf.decode(ids) == expected == hf.batch_decode(generated)[0]
    assert "".join(pieces) == streamer.text == expected
    dec = tok.stream_decoder(errors="replace")
    assert "".join(dec.feed(i) for i in ids) + dec.flush() == expected


# --------------------------------------------------------------------------- HF folders (utf8)

def test_export_hf_folder_loads_in_transformers(toks, texts, tmp_path):
    tok = toks["utf8"]
    folder = tmp_path / "hf"
    tok.export_hf(folder)
    fast = transformers.PreTrainedTokenizerFast.from_pretrained(str(folder))
    auto = transformers.AutoTokenizer.from_pretrained(str(folder))
    marked = texts[4][:40] + "<|endoftext|>"
    for loaded in (fast, auto):
        assert (loaded.eos_token, loaded.pad_token, loaded.bos_token) == ("<|endoftext|>", "<|pad|>", None)
        assert loaded.eos_token_id == tok.special_tokens["<|endoftext|>"]
        assert [loaded(t)["input_ids"] for t in texts] == [tok.encode(t).tolist() for t in texts]
        assert loaded(marked)["input_ids"] == tok.encode(marked, allowed_special="all").tolist()
        assert loaded.decode(tok.encode(texts[5]).tolist()) == texts[5]
    assert Tokenizer.from_hf(folder) == Tokenizer.from_hf(folder / "tokenizer.json")
    back = Tokenizer.from_hf(folder)
    assert [back.encode(t).tolist() for t in texts] == [tok.encode(t).tolist() for t in texts]
    with pytest.raises(ValueError, match="UbeTokenizer"):
        toks["ube"].export_hf(tmp_path / "ube")


# --------------------------------------------------------------------------- special text in shards

def test_shards_keep_special_text_as_text_and_count_it(toks, tmp_path):
    from ube_stream.shards import EncodeSummary, TokenShards, encode_corpus

    tok = toks["ube"]
    docs = ["before <|endoftext|> after", "plain", "<|pad|><|endoftext|>x", "split <|end", "oftext|> across rows"]
    src = tmp_path / "c.jsonl"
    src.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    summary = EncodeSummary()
    manifest = encode_corpus([str(src)], tokenizer=tok, output=tmp_path / "out", workers=1, show_progress=False,
                             summary=summary)
    assert manifest["totals"]["documents"] == len(docs)
    assert manifest["totals"]["special_text"] == {"<|endoftext|>": 2, "<|pad|>": 1}
    assert summary.special_text == {"<|endoftext|>": 2, "<|pad|>": 1}
    assert "3 occurrences of special-token text" in summary.format()
    shards = TokenShards(str(tmp_path / "out"))
    eos = tok.special_tokens["<|endoftext|>"]
    for i, d in enumerate(docs):
        stored = shards.doc(i).tolist()
        assert stored == tok.encode_ordinary(d).tolist() + [eos]   # one EOS, at the end only
        assert shards.decode_doc(i) == d


# --------------------------------------------------------------------------- existing models, CLI

def _cli(argv, capsys):
    from ube_stream.cli import main

    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_as_tokenizer_reads_every_kind_by_content(toks, texts, tmp_path, capsys):
    import base64
    import gzip

    from ube_stream.errors import TokenizerFormatError
    from ube_stream.tokenizer import as_tokenizer

    tok = toks["utf8"]
    ours = tmp_path / "ours.json"
    tok.save(ours)
    hf_file = tmp_path / "named-oddly.txt"   # content decides, not the name
    tok.export_hf(tmp_path / "x.json")
    os.replace(tmp_path / "x.json", hf_file)
    n = tok.vocab_size - len(tok.special_tokens)
    lines = "".join(f"{base64.b64encode(bytes(tok.token_expansion(i))).decode()} {i}\n" for i in range(n))
    plain, gz = tmp_path / "ranks.tiktoken", tmp_path / "ranks.bin"
    plain.write_text(lines)
    gz.write_bytes(gzip.compress(lines.encode()))
    specials = dict(tok.special_tokens)
    expected = [tok.encode(t).tolist() for t in texts]
    for source, kwargs in ((ours, {}), (hf_file, {}), (plain, dict(pattern="gpt2", special_tokens=specials)),
                           (gz, dict(pattern="gpt2", special_tokens=list(specials)))):
        loaded = as_tokenizer(source, **kwargs)
        assert [loaded.encode(t).tolist() for t in texts] == expected, source
        assert loaded.special_tokens == specials
    with pytest.raises(TokenizerFormatError, match="does not record its pre-tokenization pattern"):
        as_tokenizer(plain)
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01 not a tokenizer")
    with pytest.raises(TokenizerFormatError, match=f"{junk}: not a tokenizer file"):
        as_tokenizer(junk)
    bad = tmp_path / "bad.tiktoken"
    bad.write_text(lines.splitlines()[0] + "\nnot base64!! x\n")
    with pytest.raises(TokenizerFormatError, match=r"line 2 \(byte offset \d+\)"):
        as_tokenizer(bad, pattern="gpt2")
    # the CLI: every --tokenizer through it; its errors speak in flags
    code, out, err = _cli(["encode-text", "--tokenizer", str(plain), "x"], capsys)
    assert code == 1 and "--pattern" in err and "pattern=" not in err
    code, out, _ = _cli(["encode-text", "--tokenizer", str(gz), "--pattern", "gpt2", "--json", texts[0]], capsys)
    assert code == 0 and json.loads(out) == expected[0]
    code, out, err = _cli(["encode-text", "--tokenizer", str(ours), "a<|pad|>"], capsys)
    assert code == 1 and "--allow-special" in err and "offset 1" in err
    code, out, _ = _cli(["encode-text", "--tokenizer", str(ours), "--special-as-text", "a<|pad|>"], capsys)
    assert [int(i) for i in out.split()] == tok.encode_ordinary("a<|pad|>").tolist()
    ids = expected[1]
    for form in (" ".join(map(str, ids)), ", ".join(map(str, ids)), f'"{" ".join(map(str, ids))}"',
                 json.dumps(ids), json.dumps({"ids": ids})):
        code, out, _ = _cli(["decode-ids", "--tokenizer", str(hf_file), form], capsys)
        assert code == 0 and out == texts[1] + "\n", form
    code, _, err = _cli(["decode-ids", "--tokenizer", str(ours), "1 x 2"], capsys)
    assert code == 1 and "entry 1 is 'x'" in err
    converted = tmp_path / "converted.json"
    code, _, _ = _cli(["convert", str(plain), "--pattern", "gpt2", "--special-token", "<|endoftext|>=598",
                       "--special-token", "<|pad|>=599", "-o", str(converted)], capsys)
    assert code == 0 and Tokenizer.load(converted).encode(texts[2]).tolist() == expected[2]
    code, _, err = _cli(["encode", str(tmp_path / "none.jsonl"), "--tokenizer", str(hf_file), "-o",
                         str(tmp_path / "s"), "-q"], capsys)
    assert "from_hf" not in err   # an HF file is accepted; the error is about the missing input


def _tiktoken_encoding(name, ranks, monkeypatch):
    """tiktoken's own constructor arguments for ``name`` (pattern, special tokens),
    with its rank download replaced by the local ranks."""
    import tiktoken
    import tiktoken.load  # noqa: F401  (the module whose rank download is replaced)
    from tiktoken_ext import openai_public

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *a, **k: ranks)
    return tiktoken.Encoding(**getattr(openai_public, name)())


def _check_openai(name, texts, tmp_path, monkeypatch, with_hf):
    from ube_stream.tokenizer import as_tokenizer

    path, ranks = openai_rank_file(name), openai_ranks(name)
    enc = _tiktoken_encoding(name, ranks, monkeypatch)
    tok = as_tokenizer(path)   # named like the encoding: its pattern and special tokens
    assert tok.special_tokens == enc._special_tokens
    sample = texts + ["hello<|endoftext|>world", "  spaces\n\n\ttabs 12345 don't"]
    for t in sample:
        assert tok.encode(t, allowed_special="all").tolist() == enc.encode(t, allowed_special="all")
        assert tok.encode_ordinary(t).tolist() == enc.encode_ordinary(t)
    with pytest.raises(ValueError):
        enc.encode(sample[-2])
    with pytest.raises(ValueError, match="special token '<\\|endoftext\\|>'"):
        tok.encode(sample[-2])
    if with_hf:   # an HF tokenizer.json from the same ranks, loaded by HF tokenizers itself
        import tokenizers
        hf_path = tmp_path / "tokenizer.json"
        tok.export_hf(hf_path)
        hf = tokenizers.Tokenizer.from_file(str(hf_path))
        again = as_tokenizer(hf_path)
        for t in sample:
            want = enc.encode(t, allowed_special="all")
            assert hf.encode(t, add_special_tokens=False).ids == want
            assert again.encode(t, allowed_special="all").tolist() == want


@pytest.mark.slow  # the default suite checks cl100k ids against tiktoken in test_pretok_tiktoken.py
def test_cl100k_ranks_equal_tiktoken(texts, tmp_path, monkeypatch):
    _check_openai("cl100k_base", texts, tmp_path, monkeypatch, with_hf=True)


@pytest.mark.slow
def test_o200k_ranks_equal_tiktoken(texts, tmp_path, monkeypatch):
    _check_openai("o200k_base", texts, tmp_path, monkeypatch, with_hf=False)
