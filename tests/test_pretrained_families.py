"""The byte-level BPE files of real model families, read by from_hf / as_tokenizer /
--tokenizer / ube convert, with ids equal to HF ``tokenizers`` on held-out
multilingual text; one-line refusals for what the engine cannot run; hostile files
(huge ids, catastrophic regexes, malformed JSON and rank files) as TokenizerFormatError.

The files are built offline the way the families build theirs: HF's own BPE trainer
with GPT-2's / RoBERTa's published configuration, transformers' TikTokenConverter
over the real cl100k ranks (Llama-3), tiktoken's own o200k_harmony special tokens."""
import base64
import copy
import json
import random
import re
import signal
import time

import pytest
import tokenizers
from _helpers import openai_rank_file, openai_ranks
from tokenizers import decoders, models, pre_tokenizers, processors, trainers

from ube_stream.errors import TokenizerFormatError, UbeError
from ube_stream.tokenizer import Tokenizer, as_tokenizer

LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                   "<|eot_id|>"]


@pytest.fixture(scope="module")
def train_text(parallel_rows):
    """Training text for the HF-trained families (parallel items); the checks run on other text."""
    return [row["text"] for row in parallel_rows]


@pytest.fixture(scope="module")
def held_out(docs_rows, unicode_rows):
    """Held-out multilingual lines: the Debian Handbook in 26 languages plus Unicode test strings."""
    lines = [line for row in docs_rows for line in row["text"].split("\n") if line.strip()]
    return lines[::3][:1200] + [row["text"] for row in unicode_rows][:300]


def _hf_trained(train_text, tmp_path, name, *, specials, post_processor=None, vocab_size=1500, digits=None):
    """A byte-level BPE trained by HF tokenizers with GPT-2's pre-tokenizer configuration
    (after a Digits pre-tokenizer, as StarCoder's, when ``digits`` is given)."""
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    if digits is not None:
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=digits),
                                                     tok.pre_tokenizer])
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
    assert [ours.decode(ids) for ids in (hf.encode(t, add_special_tokens=False).ids for t in sample)] == sample
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


def test_ube_convert_and_cli_read_a_family_file(train_text, held_out, tmp_path, capsys):
    from ube_stream.cli import main

    path = _llama3_file(tmp_path, limit=3000)
    out = tmp_path / "converted.json"
    assert main(["convert", str(path), "-o", str(out)]) == 0
    converted = Tokenizer.load(out)
    hf = tokenizers.Tokenizer.from_file(str(path))
    for text in held_out[:100]:
        assert converted.encode(text).tolist() == hf.encode(text, add_special_tokens=False).ids
    capsys.readouterr()
    assert main(["encode-text", "--tokenizer", str(path), "--json", held_out[5]]) == 0
    assert json.loads(capsys.readouterr().out) == hf.encode(held_out[5], add_special_tokens=False).ids


def test_tiktoken_several_names_on_one_special_id(held_out, tmp_path):
    """tiktoken's o200k_harmony gives <|endofprompt|> and <|reserved_200018|> one id: the
    file loads (the first name kept, with a warning naming the others), ids equal tiktoken's."""
    import tiktoken

    ranks = openai_ranks("cl100k_base", limit=4000)
    specials = {"<|endoftext|>": 4000, "<|endofprompt|>": 4003, "<|reserved_4003|>": 4003, "<|call|>": 4004}
    path = _rank_file(tmp_path, ranks)
    with pytest.warns(UserWarning, match=r"<\|reserved_4003\|>.*share the id of \['<\|endofprompt\|>'\]"):
        ours = as_tokenizer(path, pattern="cl100k", special_tokens=specials)
    from ube_stream.pretokenizer import CL100K_PATTERN

    enc = tiktoken.Encoding("subset", pat_str=CL100K_PATTERN, mergeable_ranks=ranks, special_tokens=specials)
    assert ours.special_tokens == {"<|endoftext|>": 4000, "<|endofprompt|>": 4003, "<|call|>": 4004}
    for text in held_out[:300] + ["a<|endofprompt|>b<|call|>"]:
        assert ours.encode(text, allowed_special="all").tolist() == enc.encode(text, allowed_special="all")


@pytest.mark.slow
def test_o200k_harmony_loads_and_equals_tiktoken(held_out, monkeypatch):
    import tiktoken
    from tiktoken_ext import openai_public

    ranks = openai_ranks("o200k_base")
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *a, **k: ranks)
    spec = openai_public.o200k_harmony()
    enc = tiktoken.Encoding(**spec)
    with pytest.warns(UserWarning, match="reserved_200018"):
        ours = as_tokenizer(openai_rank_file("o200k_base"), special_tokens=spec["special_tokens"])
    for text in held_out[:300] + ["<|start|>user<|message|>hi<|end|>"]:
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
    "normalizer NFC": lambda d: d.update(normalizer={"type": "NFC"}),          # Qwen2, GPT-NeoX
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
    with pytest.raises(TokenizerFormatError, match="nested too deeply"):
        Tokenizer.from_hf(path)


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
