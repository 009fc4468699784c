"""Reading a HF ``tokenizer.json``'s byte-level vocabulary and merges: tokens spelled
in GPT-2's byte characters become their bytes (checked against HF ``tokenizers``
on a hand-built file), and every spelling that is not byte-level, every id given
twice and every merge that is not two vocabulary tokens joining into one is
refused in one line naming the token or merge (hand-worked messages)."""
from __future__ import annotations

import copy
import json
import re

import pytest

from ube_stream import Tokenizer
from ube_stream._reference import bytes_to_unicode  # GPT-2's table, written out apart from the loader's
from ube_stream.errors import TokenizerFormatError

CHAR = bytes_to_unicode()


def spell(raw: bytes) -> str:
    return "".join(CHAR[b] for b in raw)


# merges in creation order: "he", "ll", "hell", "hello", " w", "é" (c3 a9), " é"
MERGES = [(b"h", b"e"), (b"l", b"l"), (b"he", b"ll"), (b"hell", b"o"), (b" ", b"w"), (b"\xc3", b"\xa9"),
          (b" ", b"\xc3\xa9")]


def _doc():
    vocab = {spell(bytes([b])): b for b in range(256)}
    for left, right in MERGES:
        vocab[spell(left + right)] = len(vocab)
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None, "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                                            "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [f"{spell(a)} {spell(b)}" for a, b in MERGES]},
    }


def _load(doc, tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return Tokenizer.from_hf(path), path


TEXTS = ["hello world", "hello é wé", "héllo", " \t\n", "ÿ\x00\x7f\u0100 ń"]


def test_byte_level_tokens_encode_as_hf_tokenizers_does(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    doc = _doc()
    tok, path = _load(doc, tmp_path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    for text in TEXTS:
        assert tok.encode(text).tolist() == hf.encode(text).ids, text
        assert tok.decode(tok.encode(text)) == text
    listed = copy.deepcopy(doc)   # merges written as [a, b] pairs read the same
    listed["model"]["merges"] = [m.split(" ") for m in doc["model"]["merges"]]
    assert _load(listed, tmp_path)[0].fingerprint == tok.fingerprint


def test_a_special_token_spelled_outside_the_byte_alphabet_is_left_to_the_added_tokens(tmp_path):
    doc = _doc()
    doc["model"]["vocab"]["<｜end▁of▁text｜>"] = 300
    doc["added_tokens"] = [{"id": 300, "content": "<｜end▁of▁text｜>", "special": True}]
    tok, _ = _load(doc, tmp_path)
    assert tok.encode("hello<｜end▁of▁text｜>", allowed_special="all")[-1] == 300


def _refused(doc, tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(TokenizerFormatError) as info:
        Tokenizer.from_hf(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    return message[len(f"{path}: "):]


def _with_vocab(**edits):
    doc = _doc()
    doc["model"]["vocab"].update(edits)
    return doc


@pytest.mark.parametrize("token, char", [("a b", " "), ("hń", "ń"), ("\u00adx", "\u00ad"), ("x\U0001F600", "\U0001F600"),
                                         ("ab\x7f", "\x7f")])
def test_a_vocabulary_token_with_a_character_no_byte_has_is_refused_naming_it(tmp_path, token, char):
    doc = _doc()
    doc["model"]["vocab"][token] = 400
    assert _refused(doc, tmp_path) == (f"model.vocab: token {token!r} holds {char!r}, which is not a GPT-2 byte "
                                       "character: not a byte-level vocabulary")


def test_two_tokens_on_one_id_are_refused_naming_both_in_file_order(tmp_path):
    doc = _doc()
    vocab = doc["model"]["vocab"]
    vocab[spell(b"xyz")] = vocab[spell(b"he")]
    assert _refused(doc, tmp_path) == (f"model.vocab: tokens {spell(b'he')!r} and {spell(b'xyz')!r} both have id "
                                       f"{vocab[spell(b'he')]}; expected one id per token")
    doc["model"]["vocab"]["a b"] = 500   # a later fault: the id given twice is still what is named
    assert "both have id" in _refused(doc, tmp_path)


def test_an_empty_token_is_refused(tmp_path):
    assert _refused(_with_vocab(**{"": 400}), tmp_path) == 'model.vocab: expected non-empty tokens, found ""'


@pytest.mark.parametrize("merge", ["h e l", "he", "h  e", ["h", 5], ["h"], 7, "h\u0144 e", ["", "e"]])
def test_a_merge_that_is_not_two_byte_level_tokens_is_refused_as_written(tmp_path, merge):
    doc = _doc()
    doc["model"]["merges"][3] = merge
    shown = json.dumps(merge, ensure_ascii=False)
    assert _refused(doc, tmp_path) == f"model.merges[3]: expected two byte-level tokens ('a b' or [a, b]), found {shown}"


@pytest.mark.parametrize("left, right, missing", [("h", "zz", "zz"), ("zz", "h", "zz"), ("e", "h", "eh")])
def test_a_merge_of_parts_or_into_a_token_not_in_the_vocabulary_is_refused_naming_it(tmp_path, left, right, missing):
    doc = _doc()
    doc["model"]["merges"][1] = f"{left} {right}"
    expected = (f"model.merges[1] ({left!r}, {right!r}): {missing!r} is not in model.vocab; expected merges of "
                "vocabulary tokens into a vocabulary token")
    assert _refused(doc, tmp_path) == expected


def test_the_first_bad_merge_in_file_order_is_the_one_named(tmp_path):
    doc = _doc()
    doc["model"]["merges"][2] = "h zz"
    doc["model"]["merges"][4] = "a b c"
    assert re.match(r"model\.merges\[2\] ", _refused(doc, tmp_path))
