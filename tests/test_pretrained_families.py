"""The byte-level BPE files of real model families, read by from_hf / as_tokenizer /
--tokenizer / ube convert, with ids equal to HF ``tokenizers`` on held-out
multilingual text; one-line refusals for what the engine cannot run; hostile files
(huge ids, catastrophic regexes, malformed JSON and rank files) as TokenizerFormatError.

The files are built offline the way the families build theirs: HF's own BPE trainer
with GPT-2's / RoBERTa's published configuration, transformers' TikTokenConverter
over the real cl100k ranks (Llama-3), tiktoken's own o200k_harmony special tokens; Qwen2's
and GPT-NeoX's NFC normalizer; the utf8 export read back by tokenizers and gigatoken."""
import base64
import copy
import json
import random
import re
import signal
import time
import unicodedata

import pytest
import tokenizers
from _helpers import openai_rank_file, openai_ranks
from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, processors, trainers

from ube_stream.errors import SpecialTokenError, TokenizerFormatError, UbeError
from ube_stream.tokenizer import Tokenizer, as_tokenizer

LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                   "<|eot_id|>"]


def _hf_trained(train_text, tmp_path, name, *, specials, post_processor=None, vocab_size=1500, digits=None,
                split=None, nfc=False):
    """A byte-level BPE trained by HF tokenizers with GPT-2's pre-tokenizer configuration
    (after a Digits pre-tokenizer, as StarCoder's, when ``digits`` is given; a ``split``
    regex then ByteLevel without regex, as Qwen2's; ``nfc``: HF's NFC normalizer)."""
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    if digits is not None:
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=digits),
                                                     tok.pre_tokenizer])
    if split is not None:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = post_processor or processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(train_text, trainer=trainer)
    path = tmp_path / f"{name}.json"
    tok.save(str(path))
    return path


def _rank_file(tmp_path, ranks, name="ranks.tiktoken"):
    path = tmp_path / name
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks.items()))
    return path


def _llama3_file(tmp_path, limit=None):
    """What transformers writes for Llama-3 from tiktoken ranks (its TikTokenConverter):
    ignore_merges, every split of every token listed, ordered by the rank of the token."""
    from transformers.convert_slow_tokenizer import TikTokenConverter

    plain = _rank_file(tmp_path, openai_ranks("cl100k_base", limit=limit))
    converted = TikTokenConverter(vocab_file=str(plain), extra_special_tokens=LLAMA3_SPECIALS).converted()
    path = tmp_path / "llama3.json"
    converted.save(str(path))
    return path


def _assert_parity(path, texts):
    """Our ids equal HF tokenizers' on every text, with the added tokens recognised in text."""
    hf = tokenizers.Tokenizer.from_file(str(path))
    ours = as_tokenizer(path)
    assert ours == Tokenizer.from_hf(path)
    marked = [texts[0][:50] + special + texts[1][:50] for special in ours.special_tokens]
    for text in list(texts) + marked:
        assert ours.encode(text, allowed_special="all").tolist() == hf.encode(text, add_special_tokens=False).ids, text
    sample = texts[:50]
    normal = {"none": lambda t: t, "nfc": lambda t: unicodedata.normalize("NFC", t)}[ours.normalization]
    assert [ours.decode(ids) for ids in (hf.encode(t, add_special_tokens=False).ids for t in sample)] == \
        [normal(t) for t in sample]     # decoding does not undo the normalizer (HF's neither)
    return ours


# --------------------------------------------------------------------------- families

def test_gpt2_family_parity(train_text, held_out, tmp_path):
    """GPT-2's configuration: ByteLevel(use_regex) pre-tokenizer, merges in creation order."""
    path = _hf_trained(train_text, tmp_path, "gpt2", specials=["<|endoftext|>"])
    doc = json.loads(path.read_text())
    assert doc["model"]["ignore_merges"] is False and doc["pre_tokenizer"]["type"] == "ByteLevel"
    ours = _assert_parity(path, held_out)
    assert ours.special_tokens == {"<|endoftext|>": 0} and ours.pattern_name == "gpt2"


def test_roberta_family_parity(train_text, held_out, tmp_path):
    """RoBERTa's: the same BPE with <s>/<pad>/</s>/<unk>/<mask> first and its post-processor
    (which only adds <s> ... </s> around sequences: UbeTokenizer's add_bos/add_eos)."""
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    path = _hf_trained(train_text, tmp_path, "roberta", specials=specials,
                       post_processor=processors.RobertaProcessing(("</s>", 2), ("<s>", 0)))
    ours = _assert_parity(path, held_out)
    assert ours.special_tokens == {t: i for i, t in enumerate(specials)}


NUMBERS = ["x=12345; y = 3.14 ", "a  1", "a 1", "a\t\n 22 b", "  99", "½ ² Ⅻ ٣٤ ३", "v2.0.1-rc3\n\n  42  ",
           "tab\t7\tend", "1 2  3   4"]


@pytest.mark.parametrize("individual", [True, False], ids=["starcoder2", "digit-runs"])
def test_starcoder_family_parity(train_text, held_out, tmp_path, individual):
    """StarCoder/StarCoder2's Sequence[Digits, ByteLevel(use_regex)], read as one regex."""
    path = _hf_trained(train_text + NUMBERS * 20, tmp_path, "starcoder", specials=["<|endoftext|>", "<fim_prefix>"],
                       digits=individual)
    assert [p["type"] for p in json.loads(path.read_text())["pre_tokenizer"]["pretokenizers"]] == \
        ["Digits", "ByteLevel"]
    _assert_parity(path, NUMBERS + held_out)


# DeepSeek-V3's pre_tokenizer block, verbatim from its tokenizer.json
DEEPSEEK_V3_PRE_TOKENIZER = json.loads(r'''{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": false}, {"type": "Split", "pattern": {"Regex": "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"}, "behavior": "Isolated", "invert": false}, {"type": "Split", "pattern": {"Regex": "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]}''')
DEEPSEEK_TEXTS = ["第3章 2024年12月3日 価格は1234567円です。", "カタカナ゠ひらがな゙゚ ゛゜ ・ー", "x\u200f\u200fy \u200f\u200f 12",
                  "a  1 b\t\t22\n\n  333 c", "(abc) [12] {x}: 'quoted' \"dq\" --flag=3", "١٢٣٤ ½² Ⅻ 漢字123かな456"]


def test_deepseek_v3_family_parity(train_text, held_out, tmp_path):
    """DeepSeek-V3's Sequence of three Splits, read as one regex that splits the same way."""
    doc_path = _hf_trained(train_text, tmp_path, "base", specials=["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"])
    doc = json.loads(doc_path.read_text())
    doc["pre_tokenizer"] = DEEPSEEK_V3_PRE_TOKENIZER
    hf = tokenizers.Tokenizer.from_str(json.dumps(doc))
    trainer = trainers.BpeTrainer(vocab_size=2500, special_tokens=["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"],
                                  show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    hf.train_from_iterator(train_text + DEEPSEEK_TEXTS * 20, trainer=trainer)   # merges under this pre-tokenizer
    path = tmp_path / "deepseek.json"
    hf.save(str(path))
    assert json.loads(path.read_text())["pre_tokenizer"] == DEEPSEEK_V3_PRE_TOKENIZER
    _assert_parity(path, DEEPSEEK_TEXTS + held_out)


# Qwen2/2.5/3's pre-tokenizer regex, verbatim from its tokenizer.json; text NFC changes (decomposed
# accents, conjoining Hangul jamo, singletons, combining-mark order) and compatibility characters it keeps
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")
NFC_TEXTS = ["Cafe\u0301 nai\u0308ve re\u0301sume\u0301 e\u0301", "\u1112\u1161\u11ab\u1100\u116e\u11af \u1100\u1161 한국어",
             "\u212b \u2126 \u00c5 a\u0323\u0307 q\u0307\u0323", "\ufb01le \u2167 \u00bd \u2460 \uff21\uff22 \u3300 ²",
             "\u0928\u093c \u05e9\u05c1\u05bc \u0627\u0653"]


def _nfc_texts(held_out):
    """Held-out text, some of it decomposed (NFD), plus NFC_TEXTS; NFC changes a good part of it."""
    texts = NFC_TEXTS + held_out + [unicodedata.normalize("NFD", t) for t in held_out[::5]]
    assert sum(unicodedata.normalize("NFC", t) != t for t in texts) > 50
    return texts


def test_qwen2_family_parity(train_text, held_out, tmp_path):
    """Qwen2/2.5/3: NFC normalizer, Split(Qwen2's regex) then ByteLevel(use_regex=false)."""
    texts = _nfc_texts(held_out)
    path = _hf_trained(train_text + NFC_TEXTS * 10, tmp_path, "qwen2", specials=["<|endoftext|>", "<|im_start|>",
                                                                                 "<|im_end|>"],
                       split=QWEN2_REGEX, nfc=True)
    doc = json.loads(path.read_text())
    assert doc["normalizer"] == {"type": "NFC"} and doc["pre_tokenizer"]["pretokenizers"][0]["pattern"] == \
        {"Regex": QWEN2_REGEX}
    ours = _assert_parity(path, texts)
    assert ours.normalization == "nfc" and ours.pattern == QWEN2_REGEX
    assert json.loads(ours.to_json())["normalization"] == "nfc"


def test_gpt_neox_family_parity(train_text, held_out, tmp_path):
    """GPT-NeoX / Pythia: NFC normalizer, ByteLevel(use_regex=true) pre-tokenizer."""
    path = _hf_trained(train_text + NFC_TEXTS * 10, tmp_path, "neox", specials=["<|endoftext|>", "<|padding|>"],
                       nfc=True)
    ours = _assert_parity(path, _nfc_texts(held_out))
    assert ours.normalization == "nfc" and ours.pattern_name == "gpt2"


def test_llama3_family_parity(held_out, tmp_path):
    """Llama-3's file (ignore_merges, merges not in creation order) from the first 3,000
    cl100k ranks: read by the ranks of the tokens, ids equal HF's (a quarter of the lines; all in the slow set)."""
    path = _llama3_file(tmp_path, limit=3000)
    model = json.loads(path.read_text())["model"]
    assert model["ignore_merges"] is True and len(model["merges"]) > 3000 - 256
    ours = _assert_parity(path, held_out[::4])
    assert ours.special_tokens == {t: 3000 + i for i, t in enumerate(LLAMA3_SPECIALS)}
    assert ours.pattern_name == "custom" and not ours.trust_pattern


@pytest.mark.slow
def test_llama3_full_cl100k_parity(held_out, tmp_path):
    """The whole file: 233,378 merges over the real cl100k ranks."""
    path = _llama3_file(tmp_path)
    assert len(json.loads(path.read_text())["model"]["merges"]) == 233378
    ours = _assert_parity(path, held_out)
    assert ours.vocab_size == 100256 + len(LLAMA3_SPECIALS)


@pytest.mark.parametrize("family", ["llama3", "qwen2"])
def test_ube_convert_and_cli_read_a_family_file(train_text, held_out, tmp_path, capsys, family):
    from ube_stream.cli import main

    if family == "llama3":
        path, texts = _llama3_file(tmp_path, limit=3000), held_out[:100]
    else:
        path = _hf_trained(train_text, tmp_path, "qwen2", specials=["<|endoftext|>"], split=QWEN2_REGEX, nfc=True)
        texts = NFC_TEXTS + held_out[:100]
    out = tmp_path / "converted.json"
    assert main(["convert", str(path), "-o", str(out)]) == 0
    converted = Tokenizer.load(out)
    hf = tokenizers.Tokenizer.from_file(str(path))
    for text in texts:
        assert converted.encode(text).tolist() == hf.encode(text, add_special_tokens=False).ids
    capsys.readouterr()
    assert main(["encode-text", "--tokenizer", str(path), "--json", texts[0]]) == 0
    assert json.loads(capsys.readouterr().out) == hf.encode(texts[0], add_special_tokens=False).ids


def test_tiktoken_several_names_on_one_special_id(held_out, tmp_path):
    """tiktoken's o200k_harmony gives <|endofprompt|> and <|reserved_200018|> one id: the
    file loads with both names (the first is the one decode writes), ids equal tiktoken's on
    text holding every name."""
    import tiktoken

    ranks = openai_ranks("cl100k_base", limit=4000)
    specials = {"<|endoftext|>": 4000, "<|endofprompt|>": 4003, "<|reserved_4003|>": 4003, "<|call|>": 4004}
    path = _rank_file(tmp_path, ranks)
    ours = as_tokenizer(path, pattern="cl100k", special_tokens=specials)
    from ube_stream.pretokenizer import CL100K_PATTERN

    enc = tiktoken.Encoding("subset", pat_str=CL100K_PATTERN, mergeable_ranks=ranks, special_tokens=specials)
    assert ours.special_tokens == {"<|endoftext|>": 4000, "<|endofprompt|>": 4003, "<|call|>": 4004}
    assert ours.special_aliases == {"<|reserved_4003|>": 4003}
    every = "".join(f"x{name} " for name in specials)
    for text in held_out[:300] + ["a<|endofprompt|>b<|call|>", every, "<|reserved_4003|><|reserved_4003|>"]:
        assert ours.encode(text, allowed_special="all").tolist() == enc.encode(text, allowed_special="all")
    assert ours.decode(enc.encode(every, allowed_special="all")) == every.replace("<|reserved_4003|>",
                                                                                    "<|endofprompt|>")
    with pytest.raises(SpecialTokenError):
        ours.encode("a<|reserved_4003|>")
    converted = tmp_path / "converted.json"
    ours.save(converted)
    again = Tokenizer.load(converted)
    assert again == ours and again.encode(every, allowed_special="all").tolist() == enc.encode(every,
                                                                                              allowed_special="all")


@pytest.mark.slow
def test_o200k_harmony_loads_and_equals_tiktoken(held_out, monkeypatch):
    import tiktoken
    from tiktoken_ext import openai_public

    ranks = openai_ranks("o200k_base")
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *a, **k: ranks)
    spec = openai_public.o200k_harmony()
    enc = tiktoken.Encoding(**spec)
    ours = as_tokenizer(openai_rank_file("o200k_base"), special_tokens=spec["special_tokens"])
    assert ours.special_aliases == {"<|reserved_200018|>": 200018}
    every = "".join(f"a{name}" for name in spec["special_tokens"])
    for text in held_out[:300] + ["<|start|>user<|message|>hi<|end|>", every]:
        assert ours.encode(text, allowed_special="all").tolist() == enc.encode(text, allowed_special="all")


# --------------------------------------------------------------------------- refusals

@pytest.fixture(scope="module")
def gpt2_doc(train_text, tmp_path_factory):
    path = _hf_trained(train_text[:400], tmp_path_factory.mktemp("gpt2"), "small", specials=["<|endoftext|>"],
                       vocab_size=300)
    return json.loads(path.read_text())


def _split(regex):
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}


BYTE_LEVEL_NO_REGEX = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
REFUSED = {
    "model WordPiece": lambda d: d["model"].update(type="WordPiece"),
    "model Unigram": lambda d: d["model"].update(type="Unigram"),
    "byte_fallback": lambda d: d["model"].update(byte_fallback=True),
    "pre_tokenizer Metaspace": lambda d: d.update(pre_tokenizer={"type": "Metaspace", "replacement": "▁"}),
    "normalizer NFKC": lambda d: d.update(normalizer={"type": "NFKC"}),
    "normalizer Sequence[NFC, Lowercase]": lambda d: d.update(normalizer={
        "type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}),
    "normalizer Sequence[Replace, NFC]": lambda d: d.update(normalizer={   # a Replace that is no alias
        "type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"String": "a"}, "content": "b"},
                                            {"type": "NFC"}]}),
    "normalizer Sequence[Replace, Replace]": lambda d: d.update(normalizer={   # one alias, two tokens
        "type": "Sequence", "normalizers": [
            {"type": "Replace", "pattern": {"String": "<x>"}, "content": "<|endoftext|>"},
            {"type": "Replace", "pattern": {"String": "<x>"}, "content": "<|endoftext|>"}]}),
    "Sequence[Split, Split, Split, ByteLevel]": lambda d: d.update(pre_tokenizer={   # not DeepSeek-V3's
        "type": "Sequence", "pretokenizers": [_split(r"\p{N}{1,3}"), _split("[一-龥]+"), _split(r"\s+|\S+"),
                                              BYTE_LEVEL_NO_REGEX]}),
    "Sequence[Digits, Split, ByteLevel]": lambda d: d.update(pre_tokenizer={
        "type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, _split(r"\s+|\S+"),
                                              BYTE_LEVEL_NO_REGEX]}),
    "ByteLevel(add_prefix_space=true)": lambda d: d["pre_tokenizer"].update(add_prefix_space=True),
}


@pytest.mark.parametrize("component", sorted(REFUSED))
def test_files_the_engine_cannot_run_are_refused_in_one_line(gpt2_doc, tmp_path, component):
    doc = copy.deepcopy(gpt2_doc)
    REFUSED[component](doc)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TokenizerFormatError) as info:
        as_tokenizer(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and component in message and "not supported" in message


# --------------------------------------------------------------------------- hostile files

def test_huge_ids_are_refused_before_anything_is_sized(gpt2_doc, tmp_path):
    big = 2 ** 31
    cases = {"model.vocab": lambda d: d["model"]["vocab"].update({"Ġ": big}),
             "added_tokens[0]": lambda d: d["added_tokens"][0].update(id=big)}
    for field, edit in cases.items():
        doc = copy.deepcopy(gpt2_doc)
        edit(doc)
        path = tmp_path / "tokenizer.json"
        path.write_text(json.dumps(doc))
        start = time.perf_counter()
        with pytest.raises(TokenizerFormatError, match=rf"{re.escape(field)}: .*{big}.*expected an integer in 0\.\.\d+"):
            as_tokenizer(path)
        assert time.perf_counter() - start < 5
    ranks = openai_ranks("cl100k_base", limit=400)
    ranks[next(iter(t for t in ranks if len(t) > 1))] = big
    with pytest.raises(TokenizerFormatError, match=rf"rank {big}; expected ranks below 65936"):
        as_tokenizer(_rank_file(tmp_path, ranks), pattern="gpt2")
    good = _rank_file(tmp_path, openai_ranks("cl100k_base", limit=400), "good.tiktoken")
    with pytest.raises(TokenizerFormatError, match=rf"special_tokens: '<x>' has id {big}"):
        as_tokenizer(good, pattern="gpt2", special_tokens={"<x>": big})


def test_a_catastrophic_split_regex_runs_under_the_time_budget(gpt2_doc, tmp_path, capsys):
    from ube_stream.cli import main

    doc = copy.deepcopy(gpt2_doc)
    doc["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [_split("(a|a)*$"), BYTE_LEVEL_NO_REGEX]}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc))
    tok = as_tokenizer(path)
    start = time.perf_counter()
    with pytest.raises(TokenizerFormatError, match="time budget"):
        tok.encode("a" * 40 + "b")
    code = main(["encode-text", "--tokenizer", str(path), "a" * 40 + "b"])
    assert code == 1 and "time budget" in capsys.readouterr().err
    assert time.perf_counter() - start < 20


def test_deeply_nested_json_is_a_format_error(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text('{"model": ' + "[" * 100000 + "]" * 100000 + "}")
    for load in (Tokenizer.from_hf, as_tokenizer):
        with pytest.raises(TokenizerFormatError, match="nested too deeply") as info:
            load(path)
        assert str(path) in str(info.value)


# --------------------------------------------------------------------------- mutation fuzz

_ODD_VALUES = [None, True, False, -1, 0, 2 ** 31, 2 ** 63, 1.5, "", "x", "Ġ", [], {}, [[[[[]]]]], {"type": None},
               ["a", "b", "c"], "a b c", [1, 2]]


def _nodes(value, path=()):
    yield path, value
    if isinstance(value, dict):
        for key in list(value)[:400]:
            yield from _nodes(value[key], path + (key,))
    elif isinstance(value, list):
        for index in range(min(len(value), 400)):
            yield from _nodes(value[index], path + (index,))


def _mutate_json(doc, rng):
    doc = copy.deepcopy(doc)
    nodes = [(p, v) for p, v in _nodes(doc) if p]
    if rng.random() < 0.5:   # half the mutants near the top: model, pre_tokenizer, added_tokens, normalizer
        nodes = [(p, v) for p, v in nodes if len(p) <= 3 and p[:2] not in (("model", "vocab"), ("model", "merges"))]
    path, value = rng.choice(nodes)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    op = rng.randrange(5)
    if op == 0 and isinstance(parent, dict):
        del parent[key]
    elif op == 1 and isinstance(value, str) and value:
        cut = rng.randrange(len(value))
        parent[key] = value[:cut] + rng.choice(["", " ", "\u0100", "€", "Ġ Ġ", "\x00"]) + value[cut + 1:]
    elif op == 2 and isinstance(parent, list):
        parent.insert(rng.randrange(len(parent) + 1), copy.deepcopy(rng.choice(parent)))
    elif op == 3 and isinstance(value, int) and not isinstance(value, bool):
        parent[key] = rng.choice([value + 1, value - 1, -value - 1, value * 1000003, 2 ** 31 + value])
    else:
        parent[key] = copy.deepcopy(rng.choice(_ODD_VALUES))
    text = json.dumps(doc, ensure_ascii=False)
    if rng.random() < 0.1:
        text = text[:rng.randrange(len(text))]
    return text.encode("utf-8")


def _mutate_ranks(data, rng):
    lines = data.split(b"\n")
    k = rng.randrange(len(lines) - 1)
    op = rng.randrange(7)
    if op == 0:
        del lines[k]
    elif op == 1:
        lines.insert(rng.randrange(len(lines)), lines[k])
    elif op == 2:
        token, _ = lines[k].split()
        lines[k] = token + b" " + rng.choice([b"-1", b"2147483648", b"x", b"1e3", b"", b"99999999999999999999"])
    elif op == 3:
        j = rng.randrange(len(lines) - 1)
        (a, ra), (b, rb) = lines[k].split(), lines[j].split()
        lines[k], lines[j] = a + b" " + rb, b + b" " + ra
    elif op == 4:
        lines[k] = rng.choice([b"!!!! 3", b"", b"QQ== 1 2", b"\xff\xfe 7", b"=" * 8 + b" 9"])
    elif op == 5:
        return data[:rng.randrange(len(data))]
    else:
        return bytes(b ^ (1 << rng.randrange(8)) if rng.random() < 0.001 else b for b in data)
    return b"\n".join(lines)


class _Hang(Exception):
    pass


def _fuzz(tmp_path, base, mutate, load, count, seed):
    """Load ``count`` mutants of ``base``; every failure must be an UbeError, within 10 s, and
    a file that does not load is named in its error."""
    rng = random.Random(seed)
    crashes, hangs, unnamed, loaded = [], [], [], 0

    def alarm(*_):
        raise _Hang()

    old = signal.signal(signal.SIGALRM, alarm)
    try:
        for k in range(count):
            path = tmp_path / f"mutant{k}"
            path.write_bytes(mutate(base, rng))
            signal.alarm(10)
            try:
                try:
                    tok = load(path)
                except UbeError as exc:
                    if str(path) not in str(exc):
                        unnamed.append((k, str(exc)[:200]))
                    continue
                tok.decode(tok.encode("Debian 性能 12345 don't\n\n", allowed_special="all"), errors="replace")
                loaded += 1
            except UbeError:
                pass
            except _Hang:
                hangs.append(k)
            except Exception as exc:  # noqa: BLE001  (what the fuzz counts)
                crashes.append((k, repr(exc)[:200]))
            finally:
                signal.alarm(0)
    finally:
        signal.signal(signal.SIGALRM, old)
    assert (crashes, hangs) == ([], []), f"{len(crashes)} crashes, {len(hangs)} hangs of {count}"
    assert unnamed == [], "load errors that do not name the file"
    return loaded


@pytest.mark.parametrize("count", [pytest.param(30, id="30"), pytest.param(300, id="300", marks=pytest.mark.slow)])
@pytest.mark.parametrize("family", ["gpt2", "llama3"])
def test_fuzz_hf_tokenizer_json(gpt2_doc, tmp_path, count, family):
    """Mutants of a creation-order file (GPT-2's) and of a rank-order one (Llama-3's, 500 cl100k ranks)."""
    import warnings

    base = gpt2_doc if family == "gpt2" else json.loads(_llama3_file(tmp_path, limit=500).read_text())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = _fuzz(tmp_path, base, _mutate_json, as_tokenizer, count, seed=27)
    assert loaded < count   # the mutants do break files


@pytest.mark.parametrize("count", [pytest.param(30, id="30"), pytest.param(300, id="300", marks=pytest.mark.slow)])
def test_fuzz_tiktoken_rank_file(tmp_path, count):
    import warnings

    base = _rank_file(tmp_path, openai_ranks("cl100k_base", limit=600)).read_bytes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = _fuzz(tmp_path, base, _mutate_ranks, lambda p: as_tokenizer(p, pattern="gpt2"), count, seed=26)
    assert loaded < count


def test_added_tokens_spelled_outside_the_byte_alphabet(gpt2_doc, held_out, tmp_path):
    """A special token also listed in model.vocab with characters no byte maps to (as
    DeepSeek's <｜begin▁of▁sentence｜>) is a special token, not a broken vocabulary."""
    doc = copy.deepcopy(gpt2_doc)
    special = "<｜begin▁of▁sentence｜>"
    new_id = len(doc["model"]["vocab"])
    doc["model"]["vocab"][special] = new_id
    doc["added_tokens"].append({"id": new_id, "content": special, "single_word": False, "lstrip": False,
                                "rstrip": False, "normalized": False, "special": True})
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc, ensure_ascii=False))
    ours = _assert_parity(path, held_out[:200])
    assert ours.special_tokens[special] == new_id


# --------------------------------------------------------------------------- exports other tools read

@pytest.mark.parametrize("nfc", [False, True], ids=["gpt2", "gpt2-nfc"])
def test_utf8_export_reads_back_in_tokenizers_and_gigatoken(held_out, tmp_path, nfc):
    """export_hf of the gpt2 pattern writes GPT-2's own layout (ByteLevel with its regex, merges
    as "a b" strings): HF tokenizers and gigatoken load it and give our ids."""
    ranks = openai_ranks("cl100k_base", limit=3000)
    plain = as_tokenizer(_rank_file(tmp_path, ranks), pattern="gpt2", special_tokens={"<|endoftext|>": 3000})
    tok = plain if not nfc else Tokenizer(substrate="utf8", merges=plain.merges, special_tokens=["<|endoftext|>"],
                                          pattern="gpt2", normalization="nfc", id_map=plain.id_map)
    path = tmp_path / "export.json"
    tok.export_hf(path)
    doc = json.loads(path.read_text())
    assert doc["pre_tokenizer"] == {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                                    "use_regex": True}
    assert all(isinstance(m, str) and len(m.split(" ")) == 2 for m in doc["model"]["merges"])
    assert doc["normalizer"] == ({"type": "NFC"} if nfc else None)
    texts = NFC_TEXTS + held_out[:300] + ["a<|endoftext|>b"]
    ours = [tok.encode(t, allowed_special="all").tolist() for t in texts]
    hf = tokenizers.Tokenizer.from_file(str(path))
    assert [hf.encode(t, add_special_tokens=False).ids for t in texts] == ours
    assert Tokenizer.from_hf(path) == tok    # and it reads back as the same tokenizer
    gigatoken = pytest.importorskip("gigatoken")
    giga = gigatoken.Tokenizer(str(path))
    assert [[int(i) for i in giga.encode(t)] for t in texts] == ours


TRAILING_SPACE = ["x\n ", "x\n   ", "a \n ", "}\n  \n  ", "end\r\n\t", "12345 678901\n", "tail  "]


@pytest.mark.parametrize("name,pattern", [("cl100k_base", "cl100k"), ("o200k_base", "o200k")])
def test_tiktoken_pattern_exports_read_back_in_tokenizers_and_gigatoken(held_out, tmp_path, name, pattern):
    """export_hf of the cl100k and o200k patterns: HF tokenizers and gigatoken give tiktoken's ids.
    gigatoken knows regexes by their text; for cl100k the export writes the spelling it knows
    and HF runs as cl100k (Llama 3's), exact because no token crosses the one cut it adds."""
    import tiktoken

    from ube_stream.tokenizer.export import CL100K_PORTABLE

    ranks = openai_ranks(name, limit=3000)
    tok = as_tokenizer(_rank_file(tmp_path, ranks), pattern=pattern, special_tokens={"<|endoftext|>": 3000})
    enc = tiktoken.Encoding(name, pat_str=tok.pattern, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 3000})
    path = tmp_path / "export.json"
    tok.export_hf(path)
    regex = json.loads(path.read_text())["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    assert (regex == CL100K_PORTABLE) == (pattern == "cl100k")
    texts = TRAILING_SPACE + held_out[::2]
    want = [enc.encode_ordinary(t) for t in texts]
    assert [tok.encode_ordinary(t).tolist() for t in texts] == want
    hf = tokenizers.Tokenizer.from_file(str(path))
    assert [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)] == want
    assert Tokenizer.from_hf(path) == tok
    gigatoken = pytest.importorskip("gigatoken")
    giga = gigatoken.Tokenizer(str(path))
    assert [[int(i) for i in giga.encode(t)] for t in texts] == want


def test_cl100k_export_of_a_token_across_the_last_line_break(tmp_path):
    """A cl100k-pattern vocabulary with a token of a line break then spaces ("\\n " at the end of
    a text: one cl100k chunk, two in Llama 3's spelling) is exported in the exact spelling:
    HF gives our ids; gigatoken, which knows no such spelling, refuses the file."""
    base = as_tokenizer(_rank_file(tmp_path, openai_ranks("cl100k_base", limit=1000)), pattern="cl100k")
    tok = Tokenizer(substrate="utf8", merges=base.merges + [(10, 32)], special_tokens=[], pattern="cl100k")
    path = tmp_path / "export.json"
    tok.export_hf(path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    for text in TRAILING_SPACE:
        assert hf.encode(text, add_special_tokens=False).ids == tok.encode(text).tolist()
    assert tok.encode("x\n ").tolist()[-1] == tok.vocab_size - 1     # the token is used
    assert Tokenizer.from_hf(path) == tok
    # the same vocabulary under Llama 3's spelling is read as that (not as cl100k): HF's ids
    from ube_stream.pretokenizer import LLAMA3_PATTERN
    from ube_stream.tokenizer.export import CL100K_PORTABLE

    doc = json.loads(path.read_text())
    doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = CL100K_PORTABLE
    portable = tmp_path / "portable.json"
    portable.write_text(json.dumps(doc))
    ours, theirs = Tokenizer.from_hf(portable), tokenizers.Tokenizer.from_file(str(portable))
    assert ours.pattern == LLAMA3_PATTERN
    for text in TRAILING_SPACE:
        assert ours.encode(text).tolist() == theirs.encode(text, add_special_tokens=False).ids
    assert ours.encode("x\n ").tolist() != tok.encode("x\n ").tolist()
    gigatoken = pytest.importorskip("gigatoken")
    with pytest.raises(Exception, match="Unknown pre_tokenizer Split regex"):
        gigatoken.Tokenizer(str(path))
