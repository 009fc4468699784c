"""SCRIPT pre-tokenization (``pattern="script"``, cython_src/_pretok_script.pxd) and
pattern naming.

Truth: golden cases worked out by hand from Land & Arnett's rules (arXiv
2505.24689; their code, github.com/sanderland/script_bpe); the readable twin
``_reference.pretokenize_script``, which follows the paper's group-then-join
formulation and asks the ``regex`` module each character's script and category
one property at a time; real multilingual text; round trips through trained
tokenizers on every substrate.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from _helpers import read_jsonl_zst
from hypothesis import given, settings
from hypothesis import strategies as st

from ube_stream import Tokenizer, _pretok, _reference, train
from ube_stream.errors import InvalidTextError, TokenizerFormatError
from ube_stream.pretokenizer import (
    GPT2_PATTERN,
    PATTERN_NAMES,
    SC_SCRIPT_SHIFT,
    SC_SPACE_JOINS,
    SC_SUPER_MASK,
    SPLIT_SCRIPT,
    chunk_bounds,
    chunk_bounds_batch,
    kernel_split,
    pretokenize,
    resolve_pattern,
    script_class_table,
    script_names,
)

SUPERCATEGORY = ("LM", "N", "PS", "Z", "C")


def byte_ends(chunks):
    return np.cumsum([len(c.encode("utf-8")) for c in chunks], dtype=np.int64)


def table_class(char):
    """``(script, supercategory)`` of a character as the kernel's table has it."""
    value = int(script_class_table()[ord(char)])
    return script_names()[value >> SC_SCRIPT_SHIFT], SUPERCATEGORY[value & SC_SUPER_MASK]


# --------------------------------------------------------------------------- golden cases

GOLDEN = [
    # one string per script pair: a script change ends a chunk ...
    ("abcабв", ["abc", "абв"]),                             # Latin | Cyrillic
    ("abγδ", ["ab", "γδ"]),                                 # Latin | Greek
    ("Ωmega ω", ["Ω", "mega", " ω"]),                       # Greek | Latin | space + Greek
    ("abcمرحبا", ["abc", "مرحبا"]),                          # Latin | Arabic
    ("東京タワー", ["東京", "タワー"]),                        # Han | Katakana (ー is Inherited: joins)
    ("カタかた", ["カタ", "かた"]),                             # Katakana | Hiragana
    # ... except Han next to Hiragana, which join either way
    ("日本語です", ["日本語です"]),
    ("です日本", ["です日本"]),
    ("日本語ですカタカナー。", ["日本語です", "カタカナー", "。"]),
    # one leading space joins letters of the scripts written with spaces ...
    ("hello мир", ["hello", " мир"]),
    ("한국어 문장", ["한국어", " 문장"]),
    ("مرحبا بالعالم", ["مرحبا", " بالعالم"]),
    ("नमस्ते दुनिया", ["नमस्ते", " दुनिया"]),                   # Devanagari vowel signs are Devanagari marks
    # ... and not those of the others
    ("สวัสดี ครับ", ["สวัสดี", " ", "ครับ"]),                    # Thai
    ("中文 字", ["中文", " ", "字"]),                           # Han
    # Common and Inherited
    ("cafe\u0301 ok", ["cafe\u0301", " ok"]),               # a combining mark (Inherited) joins its letter
    ("a\u0301β", ["a\u0301", "β"]),                         # and does not join scripts across it
    ("\u0301abc", ["\u0301", "abc"]),                       # a chunk that starts Inherited takes no letters
    ("x\u200cy", ["x\u200cy"]),                             # ZWNJ (Inherited, a format character) joins
    ("👩\u200d💻 ok", ["👩\u200d💻", " ok"]),                   # emoji (Common symbols) + ZWJ: one chunk
    ("らーめん", ["らーめん"]),                                  # U+30FC prolonged sound mark is Inherited
    ("ســلام", ["ســلام"]),                                  # U+0640 tatweel is Arabic
    ("a (b)", ["a", " (", "b", ")"]),                        # Common punctuation takes a space
    ("?!...$%", ["?!...$%"]),                               # punctuation and symbols are one category
    ("¿Qué?", ["¿", "Qué", "?"]),
    ("I'm e-mail", ["I", "'", "m", " e", "-", "mail"]),     # no contraction rule
    # spaces
    ("  word", ["  ", "word"]),                             # two spaces are a run of their own
    ("a  b", ["a", "  ", "b"]),
    ("word ", ["word", " "]),
    ("x \ny", ["x", " \n", "y"]),                            # \n and \t are whitespace (the overrides)
    ("\t a", ["\t ", "a"]),
    ("\r\n", ["\r", "\n"]),                                  # \r stays a control character
    ("a\u00a0b", ["a", "\u00a0", "b"]),                      # only U+0020 joins the next word
    # digits: a run of one script's digits, never joined to a space or a word
    (" 123", [" ", "123"]),
    ("abc123", ["abc", "123"]),
    ("12.5", ["12", ".", "5"]),
    ("C++ 3.14", ["C", "++", " ", "3", ".", "14"]),
    ("عدد١٢٣", ["عدد", "١٢٣"]),                              # Arabic-Indic digits are Arabic N
    # characters the paper's table lacks are kept, as script Unknown
    ("a\ue000b", ["a", "\ue000", "b"]),                      # private use
    ("a\u0378b", ["a", "\u0378", "b"]),                      # unassigned
    ("", []),
]


@pytest.mark.parametrize("text, expected", GOLDEN)
def test_golden_cases(text, expected):
    assert pretokenize(text, "script") == expected
    assert _reference.pretokenize_script(text) == expected
    assert np.array_equal(chunk_bounds(text.encode("utf-8"), "script"), byte_ends(expected))


def test_worked_twin_docstring():
    assert _reference.pretokenize_script("Hello  world, 42 日本です") == [
        "Hello", "  ", "world", ",", " ", "42", " ", "日本です"]


# --------------------------------------------------------------------------- class table

def test_class_table_matches_the_twin_per_character():
    table = script_class_table()
    assert table.shape == (0x110000,) and table.dtype == np.uint16 and not table.flags.writeable
    assert not table[0xD800:0xE000].any()
    sample = list(range(0, 0x110000, 241)) + [ord(c) for text, _ in GOLDEN for c in text]
    for cp in sample:
        if 0xD800 <= cp <= 0xDFFF:
            continue
        assert table_class(chr(cp)) == _reference.script_char_class(chr(cp)), f"U+{cp:04X}"


def test_space_joining_flag():
    table = script_class_table()
    for char, joins in [("a", True), ("я", True), ("ا", True), ("(", True), ("$", True), ("日", False),
                        ("ก", False), ("1", False), (" ", False), ("\u0301", False)]:
        assert bool(table[ord(char)] & SC_SPACE_JOINS) == joins, char


# --------------------------------------------------------------------------- kernel == twin

def _table_twin(text):
    return _reference.pretokenize_script(text, classify=table_class)


@pytest.mark.parametrize("separator, stride", [
    (" ", 5), ("a", 5), pytest.param(" ", 1, marks=pytest.mark.slow), pytest.param("a", 1, marks=pytest.mark.slow)])
def test_every_scalar_value(separator, stride):
    # each scalar value after a separator: where every chunk ends depends on each
    # code point's class; the twin walks the same text the paper's way, reading the
    # classes from the table (checked against regex per character above).  The
    # default suite takes every 5th scalar value (each offset class of 5 in turn, by
    # separator), the slow suite all of them
    codepoints = np.arange(0x110000, dtype=np.uint32)
    codepoints = codepoints[(codepoints < 0xD800) | (codepoints > 0xDFFF)]
    codepoints = codepoints[(0 if separator == " " else 2)::stride]
    interleaved = np.empty(2 * codepoints.shape[0], dtype="<u4")
    interleaved[0::2] = ord(separator)
    interleaved[1::2] = codepoints
    text = interleaved.tobytes().decode("utf-32-le")
    chunks = pretokenize(text, "script")
    assert "".join(chunks) == text
    assert chunks == _table_twin(text)


REPRESENTATIVES = [" ", "  ", "\n", "\t", "\r", "\u00a0", "a", "Z", "é", "e\u0301", "\u0301", "\u200d", "\u200c",
                   "я", "ω", "ا", "\u0640", "١", "क", "\u093f", "日", "本", "か", "カ", "ー", "ｰ", "한", "ก",
                   "1", "٣", ".", "(", "$", "😀", "\ue000", "\u0378", "ʹ", "\U00020000"]
interesting_text = st.lists(
    st.one_of(st.sampled_from(REPRESENTATIVES), st.characters(blacklist_categories=("Cs",))),
    max_size=40).map("".join)


@settings(max_examples=150, deadline=None)
@given(interesting_text)
def test_hypothesis_text_equals_twin(text):
    chunks = pretokenize(text, "script")
    assert chunks == _reference.pretokenize_script(text)
    assert np.array_equal(chunk_bounds(text.encode("utf-8"), "script"), byte_ends(chunks))


@settings(max_examples=60, deadline=None)
@given(st.lists(interesting_text, max_size=8))
def test_batch_equals_per_document(texts):
    encoded = [t.encode("utf-8") for t in texts]
    offsets = np.concatenate([[0], np.cumsum([len(e) for e in encoded])]).astype(np.int64)
    ends, doc_chunk_offsets = chunk_bounds_batch(b"".join(encoded), offsets, "script")
    for d, text in enumerate(texts):
        own = ends[doc_chunk_offsets[d]:doc_chunk_offsets[d + 1]] - offsets[d]
        assert np.array_equal(own, byte_ends(pretokenize(text, "script")))


def _real_texts(step):
    texts = [row["text"][::1 if step == 1 else 8] for row in read_jsonl_zst("docs_sample.jsonl.zst")]
    texts += [row["text"] for row in read_jsonl_zst("parallel_sample.jsonl.zst")]
    texts += [row["text"] for row in read_jsonl_zst("unicode_sample.jsonl.zst")][::step * 7]
    import zstandard

    from ube_stream.sample import sample_paths

    with open(sample_paths()["parallel"], "rb") as f:
        lines = zstandard.ZstdDecompressor().stream_reader(f).read().decode("utf-8").splitlines()
    texts += [json.loads(line)["text"] for line in lines[::step * 5]]
    return texts


@pytest.mark.parametrize("step", [3, pytest.param(1, marks=pytest.mark.slow)])
def test_real_multilingual_text_equals_twin(step):
    # the default suite: an eighth of each handbook text (every 8th character: new
    # neighbours, same characters), every 3rd sample row; the slow suite: all of it
    texts = _real_texts(step)
    assert len(texts) > 1000
    encoded = [t.encode("utf-8") for t in texts]
    offsets = np.concatenate([[0], np.cumsum([len(e) for e in encoded])]).astype(np.int64)
    ends, doc_chunk_offsets = chunk_bounds_batch(b"".join(encoded), offsets, "script")
    for d, text in enumerate(texts):
        expected = _reference.pretokenize_script(text)
        assert "".join(expected) == text
        assert np.array_equal(ends[doc_chunk_offsets[d]:doc_chunk_offsets[d + 1]] - offsets[d],
                              byte_ends(expected)), text[:80]


# --------------------------------------------------------------------------- errors and inputs

@pytest.mark.parametrize("bad", [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"])
@pytest.mark.parametrize("prefix", [b"", b" ", b"ab", b"\xe6\x97\xa5 "])
def test_invalid_utf8_names_byte_offset(prefix, bad):
    with pytest.raises(InvalidTextError) as info:
        chunk_bounds(prefix + bad + b" ok", "script")
    assert info.value.offset == len(prefix)
    with pytest.raises(InvalidTextError) as info:
        chunk_bounds_batch(b"fine" + prefix + bad, [0, 4, 4 + len(prefix) + len(bad)], "script")
    assert info.value.document == 1


def test_lone_surrogate_names_character_offset():
    with pytest.raises(InvalidTextError) as info:
        pretokenize("héllo \ud83d", "script")
    assert info.value.offset == 6 and info.value.unit == "char"


def test_kernel_checks_its_table():
    ends = np.empty(4, np.int64)
    with pytest.raises(ValueError, match="script_class_table"):
        _pretok.split(b"abcd", np.zeros(0x110000, np.uint16).view(np.uint8), ends, SPLIT_SCRIPT)
    with pytest.raises(ValueError, match="script_class_table"):
        _pretok.split(b"abcd", script_class_table().view(np.uint8)[:0x110000], ends, SPLIT_SCRIPT)
    assert _pretok.split(b"ab c", script_class_table().view(np.uint8), ends, SPLIT_SCRIPT)[1] == 2


# --------------------------------------------------------------------------- pattern names

def test_pattern_names_resolve():
    assert "script" in PATTERN_NAMES
    assert resolve_pattern("script") == ("script", "script")
    assert kernel_split("script") == SPLIT_SCRIPT
    assert resolve_pattern("gpt2") == resolve_pattern(GPT2_PATTERN) == resolve_pattern("regex:" + GPT2_PATTERN)
    assert resolve_pattern(r"regex:\w+|\s") == ("custom", r"\w+|\s")
    assert pretokenize("ab cd", r"regex:\w+") == ["ab", " ", "cd"]


@pytest.mark.parametrize("bad", ["scirpt", "SCRIPT", r"\w+", "custom", "regex"])
def test_unknown_pattern_name_is_an_error_listing_the_names(bad):
    with pytest.raises(ValueError, match=r"unknown pattern.*'gpt2'.*'script'.*regex:") as info:
        resolve_pattern(bad)
    assert repr(bad) in str(info.value)
    with pytest.raises(ValueError, match="unknown pattern"):
        pretokenize("text", bad)
    with pytest.raises(ValueError, match="unknown pattern"):
        Tokenizer(substrate="ube", merges=[], pattern=bad)
    with pytest.raises(ValueError, match="unknown pattern"):
        train(iter(["some text"]), vocab_size=600, pattern=bad, workers=1, show_progress=False)


def test_bad_marked_regex_is_an_error():
    with pytest.raises(ValueError, match="not a valid regular expression"):
        resolve_pattern("regex:(unclosed")
    with pytest.raises(ValueError, match="is empty"):
        resolve_pattern("regex:")


def test_cli_refuses_an_unknown_pattern(tmp_path, capsys):
    from ube_stream.cli.main import main

    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\n")
    code = main(["train", str(corpus), "--vocab-size", "600", "--pattern", "scirpt", "-q",
                 "-o", str(tmp_path / "t.json")])
    assert code != 0 and not (tmp_path / "t.json").exists()
    err = capsys.readouterr().err
    assert "unknown pattern 'scirpt'" in err and "script" in err and "regex:" in err


def _file_with_pattern(pattern_object):
    from ube_stream.tokenizer import file_format

    doc = json.loads(Tokenizer(substrate="utf8", merges=[[104, 105]]).to_json())
    doc["pattern"] = pattern_object
    content = {k: doc[k] for k in ("format", "version", "substrate", "pattern", "normalization", "base_size",
                                   "merges", "special_tokens")}
    doc["fingerprint"] = file_format.fingerprint(content)
    return json.dumps(doc)


def test_tokenizer_files_keep_loading():
    # a custom regex as files have always recorded it: name "custom" and the bare regex
    tok = Tokenizer.from_json(_file_with_pattern({"name": "custom", "regex": r"\w+|\s"}))
    assert tok.pattern_name == "custom" and tok.pattern == r"\w+|\s"
    assert list(tok.encode("hi hi")) == [256, 32, 256]
    again = Tokenizer.from_json(tok.to_json())
    assert again.fingerprint == tok.fingerprint
    # a known pattern recorded by name with its regex
    assert Tokenizer.from_json(_file_with_pattern({"name": "gpt2", "regex": GPT2_PATTERN})).pattern_name == "gpt2"
    # script records only its name
    tok = Tokenizer.from_json(_file_with_pattern({"name": "script"}))
    assert tok.pattern_name == "script" and json.loads(tok.to_json())["pattern"] == {"name": "script"}
    with pytest.raises(TokenizerFormatError, match="pattern 'scirpt' is not one this version"):
        Tokenizer.from_json(_file_with_pattern({"name": "scirpt", "regex": "x"}))


def test_hf_export_refuses_script(tmp_path):
    tok = Tokenizer(substrate="utf8", merges=[], pattern="script")
    with pytest.raises(ValueError, match="rule-based split"):
        tok.export_hf(tmp_path / "tokenizer.json")


# --------------------------------------------------------------------------- tokenizers trained with it

@pytest.fixture(scope="module")
def script_tokenizers(docs_rows):
    text = [row["text"][:6000] for row in docs_rows]
    return {substrate: train(iter(text), vocab_size=900, substrate=substrate, pattern="script", workers=1,
                             show_progress=False)
            for substrate in ("ube", "utf8", "utf16")}


@pytest.mark.parametrize("substrate", ["ube", "utf8", "utf16"])
def test_round_trips(script_tokenizers, substrate, parallel_rows, unicode_rows, tmp_path):
    tok = script_tokenizers[substrate]
    assert tok.pattern_name == "script" and tok.training["chunks"] > 0
    path = tmp_path / "tok.json"
    tok.save(path)
    loaded = Tokenizer.load(path)
    assert loaded.fingerprint == tok.fingerprint and loaded.pattern_name == "script"
    texts = [row["text"] for row in parallel_rows][::3] + [row["text"] for row in unicode_rows][::97]
    for text, ids in zip(texts, loaded.encode_batch(texts, num_threads=2)):
        assert loaded.decode(ids.tolist()) == text
    # every chunk is encoded on its own: the twin's split and merges give the same ids
    for text in texts[::11]:
        assert list(loaded.encode_ordinary(text)) == _reference.encode_reference(loaded, text)

