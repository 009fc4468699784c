"""normalization="nfc": Unicode NFC (Python's unicodedata, the truth here) applied on every
encode path -- encode, encode_ordinary, encode_batch, encode_utf8_batch, encode_corpus,
the transformers class -- stored in the tokenizer file (version 2, its own fingerprint),
and what verify compares; several names on one special id (aliases)."""
import json
import random
import unicodedata

import numpy as np
import pytest
from _helpers import openai_ranks

from ube_stream.errors import SpecialTokenError, TokenizerFormatError
from ube_stream.tokenizer import Tokenizer, as_tokenizer
from ube_stream.tokenizer.normalization import normalize_utf8

#: text NFC changes: decomposed accents, conjoining Hangul jamo, a singleton (U+212B ANGSTROM
#: SIGN -> U+00C5), reordered combining marks; and compatibility characters it leaves alone
NFC_CHANGES = ["Cafe\u0301 nai\u0308ve re\u0301sume\u0301", "\u1112\u1161\u11ab\u1100\u116e\u11af \u1100\u1161",
               "\u212b and \u2126", "a\u0323\u0307 q\u0307\u0323", "\u0928\u093c \u05e9\u05c1\u05bc"]
NFC_KEEPS = ["\ufb01le \u2167 \u00bd \u2460 \uff21\uff22 \u3300", "\u00e9\u00e8 \uac00\ud55c plain ascii"]


def _texts(unicode_rows, docs_rows):
    held = [row["text"] for row in unicode_rows][:200] + [row["text"] for row in docs_rows][:20]
    return held + NFC_CHANGES + NFC_KEEPS + [unicodedata.normalize("NFD", t) for t in held[:100]]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """The same BPE (cl100k's first 3000 ranks) with normalization none and nfc."""
    import base64

    path = tmp_path_factory.mktemp("ranks") / "ranks.tiktoken"
    ranks = openai_ranks("cl100k_base", limit=3000)
    path.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks.items()))
    plain = as_tokenizer(path, pattern="cl100k", special_tokens={"<|endoftext|>": 3000})
    nfc = Tokenizer(substrate="utf8", merges=plain.merges, special_tokens=list(plain._special_internal),
                    pattern=plain.pattern_name, normalization="nfc", id_map=plain.id_map)
    return plain, nfc


def test_every_encode_path_applies_nfc(pair, unicode_rows, docs_rows):
    plain, nfc = pair
    texts = _texts(unicode_rows, docs_rows)
    truth = [plain.encode_ordinary(unicodedata.normalize("NFC", t)).tolist() for t in texts]
    assert any(unicodedata.normalize("NFC", t) != t for t in texts)
    assert [nfc.encode(t).tolist() for t in texts] == truth
    assert [nfc.encode_ordinary(t).tolist() for t in texts] == truth
    assert [ids.tolist() for ids in nfc.encode_batch(texts, num_threads=2)] == truth
    data = "".join(texts).encode("utf-8")
    offsets = np.cumsum([0] + [len(t.encode("utf-8")) for t in texts])
    ids, token_offsets = nfc.encode_utf8_batch(np.frombuffer(data, np.uint8), offsets, eos_id=3000)
    assert [ids[a:b].tolist() for a, b in zip(token_offsets[:-1], token_offsets[1:])] == [t + [3000] for t in truth]
    # decoding gives the normalised text (HF neither un-normalises)
    assert [nfc.decode(ids) for ids in truth] == [unicodedata.normalize("NFC", t) for t in texts]
    assert nfc.normalize("e\u0301") == "\u00e9" and plain.normalize("e\u0301") == "e\u0301"


def test_special_tokens_split_before_normalising(pair):
    """As HF: special tokens are found in the raw text, each stretch between them normalised on
    its own (a combining mark after a special token stays a mark)."""
    plain, nfc = pair
    text = "e\u0301<|endoftext|>\u0301x"
    expected = (plain.encode_ordinary("\u00e9").tolist() + [3000]
                + plain.encode_ordinary(unicodedata.normalize("NFC", "\u0301x")).tolist())
    assert nfc.encode(text, allowed_special="all").tolist() == expected
    with pytest.raises(SpecialTokenError):
        nfc.encode(text)


def test_normalize_utf8_matches_unicodedata():
    rng = random.Random(7)
    alphabet = ["a", " ", "e\u0301", "\u00e9", "\u1100\u1161", "\u212b", "\ufb01", "\u0323\u0307", "\u4e2d", "\U0001f600"]
    docs = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12))) for _ in range(300)]
    raw = [d.encode("utf-8") for d in docs] + [b"\xffe\xcc\x81"]   # invalid UTF-8 is left as is
    prefix = b"skipped"
    data = np.frombuffer(prefix + b"".join(raw), np.uint8)
    offsets = len(prefix) + np.cumsum([0] + [len(r) for r in raw])
    out, out_offsets = normalize_utf8("nfc", data, offsets)
    got = [out[a:b].tobytes() for a, b in zip(out_offsets[:-1], out_offsets[1:])]
    assert got == [unicodedata.normalize("NFC", d).encode("utf-8") for d in docs] + [raw[-1]]
    ascii_data = np.frombuffer(b"plain text only \xc3\xa9", np.uint8)   # below U+0300: the same buffer back
    same = normalize_utf8("nfc", ascii_data, np.array([0, ascii_data.size]))
    assert same[0] is ascii_data


def test_file_format_records_nfc_and_none_files_are_unchanged(pair, tmp_path):
    plain, nfc = pair
    plain_doc, nfc_doc = json.loads(plain.to_json()), json.loads(nfc.to_json())
    assert plain_doc["version"] == 1 and plain_doc["normalization"] == "none"
    assert nfc_doc["version"] == 2 and nfc_doc["normalization"] == "nfc"
    assert nfc.fingerprint != plain.fingerprint
    path = tmp_path / "nfc.json"
    nfc.save(path)
    loaded = Tokenizer.load(path)
    assert loaded == nfc and loaded.normalization == "nfc" and loaded.to_json() == nfc.to_json()
    assert loaded.encode("Cafe\u0301").tolist() == plain.encode("Caf\u00e9").tolist()
    # a version-1 file may not ask for nfc (an older reader would encode without it)
    nfc_doc["version"] = 1
    with pytest.raises(TokenizerFormatError, match=r"field 'version' must be 2 for a file with \['normalization'\]"):
        Tokenizer.from_json(json.dumps(nfc_doc), source="edited.json")
    nfc_doc["version"], nfc_doc["normalization"] = 2, "nfkc"
    with pytest.raises(TokenizerFormatError, match=r"edited.json: field 'normalization' must be one of \['none', 'nfc'\]"):
        Tokenizer.from_json(json.dumps(nfc_doc), source="edited.json")
    with pytest.raises(ValueError, match="normalization 'NFKC' is not supported"):
        Tokenizer(substrate="utf8", merges=[], normalization="NFKC")


def test_encode_corpus_and_verify_compare_the_normalised_text(pair, tmp_path):
    from ube_stream.shards.encode import encode_corpus
    from ube_stream.shards.reader import TokenShards
    from ube_stream.verification import verify_corpus, verify_shards

    _, nfc = pair
    texts = NFC_CHANGES + NFC_KEEPS + ["plain"]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    tok_path = tmp_path / "nfc.json"
    nfc.save(tok_path)
    encode_corpus([str(corpus)], tokenizer=str(tok_path), output=str(tmp_path / "shards"), workers=1,
                  show_progress=False)
    shards = TokenShards(str(tmp_path / "shards"))
    stored = [np.asarray(shards[i]).tolist() for i in range(len(shards))]
    eos = nfc.special_tokens["<|endoftext|>"]
    assert stored == [nfc.encode_ordinary(unicodedata.normalize("NFC", t)).tolist() + [eos] for t in texts]
    assert verify_corpus([str(corpus)], str(tok_path), workers=1, show_progress=False).ok
    assert verify_shards(str(tmp_path / "shards"), workers=1, show_progress=False).ok


def test_transformers_class_normalises(pair, tmp_path):
    pytest.importorskip("transformers")
    from ube_stream.hf import UbeTokenizer

    _, nfc = pair
    path = tmp_path / "nfc.json"
    nfc.save(path)
    hf = UbeTokenizer(ube_file=str(path))
    for text in NFC_CHANGES:
        assert hf(text)["input_ids"] == nfc.encode(unicodedata.normalize("NFC", text)).tolist()


# --------------------------------------------------------------------------- aliases

def test_several_names_on_one_special_id(pair, tmp_path):
    plain, _ = pair
    n = len(plain._expansions)
    tok = Tokenizer(substrate="utf8", merges=plain.merges, pattern="cl100k", id_map=list(plain.id_map[:len(plain._expansions)]) + [3000, 3001],
                    special_tokens={"<|endoftext|>": n, "<|eot|>": n, "<|call|>": n + 1, "<|reserved_3001|>": n + 1})
    assert tok.special_tokens == {"<|endoftext|>": 3000, "<|call|>": 3001}
    assert tok.special_aliases == {"<|eot|>": 3000, "<|reserved_3001|>": 3001}
    text = "a<|eot|>b<|endoftext|>c<|reserved_3001|>d<|call|>"
    a, b, c, d = (plain.encode_ordinary(x).tolist() for x in "abcd")
    assert tok.encode(text, allowed_special="all").tolist() == a + [3000] + b + [3000] + c + [3001] + d + [3001]
    assert tok.encode("x<|eot|>", allowed_special={"<|eot|>"}).tolist()[-1] == 3000
    with pytest.raises(SpecialTokenError, match="<\\|eot\\|>"):
        tok.encode("x<|eot|>")
    assert tok.encode_ordinary("<|eot|>").tolist() == plain.encode_ordinary("<|eot|>").tolist()
    assert tok.decode([3000, 3001]) == "<|endoftext|><|call|>"    # the first name
    doc = json.loads(tok.to_json())
    assert doc["version"] == 2 and [s["text"] for s in doc["special_tokens"]] == [
        "<|endoftext|>", "<|call|>", "<|eot|>", "<|reserved_3001|>"]
    path = tmp_path / "aliases.json"
    tok.save(path)
    loaded = Tokenizer.load(path)
    assert loaded == tok and loaded.special_aliases == tok.special_aliases and loaded.to_json() == tok.to_json()
    no_alias = json.loads(tok.to_json())
    no_alias["special_tokens"] = no_alias["special_tokens"][:2] + [no_alias["special_tokens"][1]]
    with pytest.raises(TokenizerFormatError, match="field 'special_tokens' must be each text once"):
        Tokenizer.from_json(json.dumps(no_alias))


def test_nfc_is_hf_tokenizers_nfc_normalizer():
    """Python's NFC (unicodedata) equals HF tokenizers' NFC normalizer on every scalar value
    and on a base letter followed by every combining mark (compared block by block, then
    character by character where a block differs, to name it)."""
    normalizers = pytest.importorskip("tokenizers.normalizers")
    hf_nfc = normalizers.NFC().normalize_str
    scalars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    marks = [c for c in scalars if unicodedata.combining(c)]
    pieces = scalars + [base + mark for base in ("a", "e", "\u1100", "\u0627", "\u0915") for mark in marks]
    differ = []
    for i in range(0, len(pieces), 2000):
        block = "|".join(pieces[i:i + 2000])
        if hf_nfc(block) != unicodedata.normalize("NFC", block):
            differ += [p for p in pieces[i:i + 2000] if hf_nfc(p) != unicodedata.normalize("NFC", p)]
    assert differ == [], f"unicodedata {unicodedata.unidata_version} and HF's NFC differ on {differ[:10]}"
