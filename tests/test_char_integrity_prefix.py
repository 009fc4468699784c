"""SCRIPT's within-character rule as a character-integrity mode
(``char_integrity="prefix"``, ``ube train --char-rule prefix``): inside a
character a merge is allowed only when the left token starts the character, so
every token inside a character is a prefix of it, grown left to right; whole
characters merge as under the ``"pieces"`` rule (``True``, today's rule: any two
pieces of one character may merge).

Truth: the readable twins (``_reference.train_bpe_reference(char_rule=)``,
``encode_chunk_reference(char_rule=)``, ``encode_reference``), character
boundaries from Python's codecs (``_reference.char_starts_reference``), cases
worked by hand, the trainer's own final segmentation of each training chunk (its
merges replayed with ``_reference._merge_pair_training``), the fingerprint the
release before this mode wrote, and real multilingual text (``tests/data``,
``ube_stream/data``)."""
import functools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_char_integrity import N_BASE, routed
from test_char_integrity import both as _both
from test_char_integrity import kernel as _kernel
from test_char_integrity_encode import chunk_kernel, real_chunks, real_texts, trained_on_real_chunks, trainers_word

from ube_stream import Tokenizer
from ube_stream import _reference as ref
from ube_stream.errors import TokenizerFormatError
from ube_stream.sample import sample_paths
from ube_stream.tokenizer.core import _utf8_keeps_characters
from ube_stream.training.trainer import train

SUBSTRATES = ("ube", "utf8", "utf16")


# the pieces tests' kernel and twin-parity helpers, under the prefix rule unless a call names another
kernel = functools.partial(_kernel, char_rule="prefix")
both = functools.partial(_both, char_rule="prefix")


def with_merges(substrate, merges, char_integrity="prefix"):
    return Tokenizer(substrate=substrate, merges=merges, special_tokens=(), char_integrity=char_integrity)


def inside_tokens_are_prefixes(lengths, text_flags) -> bool:
    """Every token of a segmentation (``lengths``: the tokens' lengths in base symbols) is whole characters, or lies inside one character and starts it, or is
    a single base symbol (a piece no merge took)."""
    position = 0
    flags = list(text_flags) + [1]
    for length in lengths:
        end = position + length
        inside = not any(flags[position + 1:end])
        whole = flags[position] and flags[end]
        if not whole and not (inside and (flags[position] or length == 1)):
            return False
        position = end
    return True


# ------------------------------------------------------------------ training, worked by hand

def test_golden_utf8_character_grows_from_its_lead_byte():
    # utf8, "中a" x 4: 中 = E4 B8 AD.  Pairs (E4,B8), (B8,AD), (AD,61) all 4.
    # pieces: (B8,AD) is the smallest allowed tie -> 256, then (E4,256) -> 中.
    # prefix: (B8,AD) has a left that does not start 中 and (AD,61) crosses: only (E4,B8).
    # 1. (E4,B8) -> 256; 2. (256,AD) -> 257 = 中 (left starts it); 3. (257,61) -> 258 "中a".
    assert both({"中a": 4}, "utf8", new_tokens=10, char_rule="pieces") == [
        (0xB8, 0xAD, 256), (0xE4, 256, 257), (257, 0x61, 258)]
    assert both({"中a": 4}, "utf8", new_tokens=10) == [(0xE4, 0xB8, 256), (256, 0xAD, 257), (257, 0x61, 258)]


def test_golden_utf16_surrogate_pair_left_to_right():
    # utf16, "😀" x 3: U+1F600 = 3D D8 00 DE.  pieces: (00,DE) -> 256 (smallest tie),
    # (3D,D8) -> 257, (257,256) -> 258.  prefix: only (3D,D8) starts the character:
    # 1. (3D,D8) -> 256; 2. (256,00) -> 257; 3. (257,DE) -> 258 = 😀.
    assert both({"😀": 3}, "utf16", new_tokens=10, char_rule="pieces") == [
        (0x00, 0xDE, 256), (0x3D, 0xD8, 257), (257, 256, 258)]
    assert both({"😀": 3}, "utf16", new_tokens=10) == [(0x3D, 0xD8, 256), (256, 0x00, 257), (257, 0xDE, 258)]


def test_golden_ube_surrogate_pair_left_to_right():
    # ube, "😀a" x 3: 😀 = 0x13D 0x1D8 0x100 0x1DE (UTF-16LE bytes + 256), a = 0x61.
    # pieces (test_char_integrity): (0x100,0x1DE) first.  prefix:
    # 1. (0x13D,0x1D8) -> 512; 2. (512,0x100) -> 513; 3. (513,0x1DE) -> 514 = 😀; 4. (514,0x61) -> 515.
    assert both({"😀a": 3}, "ube", new_tokens=10) == [
        (0x13D, 0x1D8, 512), (512, 0x100, 513), (513, 0x1DE, 514), (514, 0x61, 515)]


def test_char_rule_is_checked():
    words, flags = routed({"ab": 2}, "utf8")
    with pytest.raises(ValueError, match="char_rule"):
        kernel(words, flags, n_base=256, max_vocab=260, char_rule="suffix")


# ------------------------------------------------------------------ training: kernel == twin

alphabet = st.sampled_from(list("ab é中文😀üß𝔸 た一0") + ["\u0301", "ñ"])
texts = st.dictionaries(st.text(alphabet, min_size=1, max_size=12), st.integers(1, 5), min_size=1, max_size=8)


@settings(max_examples=120, deadline=None)
@given(texts=texts, substrate=st.sampled_from(SUBSTRATES), new_tokens=st.integers(0, 40),
       min_frequency=st.integers(0, 3), max_token_length=st.sampled_from([None, 3, 6]))
def test_kernel_matches_twin_on_generated_corpora(texts, substrate, new_tokens, min_frequency, max_token_length):
    merges = both(texts, substrate, new_tokens=new_tokens, min_frequency=min_frequency,
                  max_token_length=max_token_length)
    # and every token the twin makes is whole characters or a prefix of one character
    expansions = ref.token_expansions(merges, N_BASE[substrate])
    for text in texts:
        words, flags = routed({text: 1}, substrate)
        (word, word_flags), = flags.items()
        segmentation = ref.encode_chunk_reference(word, merges, word_flags, "prefix")
        assert inside_tokens_are_prefixes([len(expansions[t]) for t in segmentation], word_flags)


long_texts = st.dictionaries(st.text(alphabet, min_size=20, max_size=90), st.integers(1, 4), min_size=1, max_size=4)


@settings(max_examples=30, deadline=None)
@given(texts=long_texts, substrate=st.sampled_from(SUBSTRATES), new_tokens=st.integers(1, 80))
def test_long_words_match_twin(texts, substrate, new_tokens):
    both(texts, substrate, new_tokens=new_tokens)


# ------------------------------------------------------------------ encoding, worked by hand

def test_golden_encoder_refuses_a_piece_that_does_not_start_the_character():
    # utf16 "😀" = 3D D8 00 DE with the pieces vocabulary of the golden above:
    # rank 0 (00,DE) -> 256, rank 1 (3D,D8) -> 257, rank 2 (257,256) -> 258.
    # pieces: 256, then 257, then 258 = [258].  prefix: (00,DE) has a left that does
    # not start 😀 (no rank there); (3D,D8) -> 257; (257,00) is no merge: [257, 00, DE].
    merges = [(0x00, 0xDE), (0x3D, 0xD8), (257, 256)]
    symbols = [0x3D, 0xD8, 0x00, 0xDE]
    pieces, prefix = with_merges("utf16", merges, True), with_merges("utf16", merges)
    assert pieces.encode("😀").tolist() == [258]
    assert prefix.encode("😀").tolist() == [257, 0x00, 0xDE]
    assert prefix._kernel()[0].char_rule == "prefix" and pieces._kernel()[0].char_rule == "pieces"
    assert ref.encode_chunk_reference(symbols, [(0, 0xDE, 256), (0x3D, 0xD8, 257), (257, 256, 258)],
                                      [1, 0, 0, 0], "prefix") == [257, 0x00, 0xDE]
    # the heap path (a chunk of more than 32 symbols) applies the same rule
    assert prefix.encode("😀" * 40).tolist() == [257, 0x00, 0xDE] * 40
    assert pieces.encode("😀" * 40).tolist() == [258] * 40


def test_golden_trained_prefix_vocabulary_encodes_its_training_word():
    # the utf8 golden: merges (E4,B8), (256,AD), (257,61): "中a" is one token
    tok = with_merges("utf8", [(0xE4, 0xB8), (256, 0xAD), (257, 0x61)])
    assert tok.encode("中a").tolist() == [258]
    assert not tok._kernel()[0].char_integrity   # utf8 prefix tokens need no check (below)


def test_utf8_needs_a_check_only_for_tokens_that_are_not_prefixes():
    # a token of continuation bytes only is a strict part of a character (sound for
    # "pieces") but not a prefix: under "prefix" the encoder must test each occurrence
    assert _utf8_keeps_characters(bytes([0xB8, 0xAD]), "pieces")
    assert not _utf8_keeps_characters(bytes([0xB8, 0xAD]), "prefix")
    assert _utf8_keeps_characters(bytes([0xE4, 0xB8]), "prefix")
    assert not with_merges("utf8", [(0xB8, 0xAD)], True)._kernel()[0].char_integrity
    odd = with_merges("utf8", [(0xB8, 0xAD)])
    assert odd._kernel()[0].char_integrity and odd._kernel()[0].char_rule == "prefix"
    # 中 = E4 B8 AD: the merge would join two pieces that do not start the character
    assert odd.encode("中").tolist() == [0xE4, 0xB8, 0xAD] == ref.encode_reference(odd, "中")


# ------------------------------------------------------------------ encoding: kernel == twin

def trained(corpus, substrate, new_tokens, rule):
    words, flags = routed(corpus, substrate)
    return ref.train_bpe_reference(words, n_base=N_BASE[substrate], max_vocab=N_BASE[substrate] + new_tokens,
                                   min_frequency=1, char_starts=None if rule is None else flags,
                                   char_rule=rule or "pieces")


@settings(max_examples=100, deadline=None)
@given(corpus=texts, probe=st.text(alphabet, max_size=100), substrate=st.sampled_from(SUBSTRATES),
       new_tokens=st.integers(1, 50), trained_rule=st.sampled_from([None, "pieces", "prefix"]))
def test_encoder_equals_twin_on_generated_text(corpus, probe, substrate, new_tokens, trained_rule):
    # merges trained plain or by "pieces" hold tokens the prefix encoder must refuse
    merges = trained(corpus, substrate, new_tokens, trained_rule)
    tok = with_merges(substrate, [(a, b) for a, b, _ in merges])
    for text in list(corpus) + [probe, "".join(corpus) * 3]:
        symbols = ref.route_symbols(text, substrate)
        flags = ref.char_starts_reference(text, substrate)
        expected = ref.encode_chunk_reference(symbols, merges, flags, "prefix")
        assert chunk_kernel(tok, symbols) == expected
        assert tok.encode(text).tolist() == ref.encode_reference(tok, text)
        assert tok.decode(tok.encode(text)) == text


# ------------------------------------------------------------------ real text

@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_encoding_a_training_chunk_gives_the_trainers_final_word(substrate):
    # the kernel trainer under "prefix" on real chunks; encoding a chunk gives the trainer's
    # segmentation of it, and every token inside a character is a prefix of it
    words, flags, rows, tok = trained_on_real_chunks(substrate, char_rule="prefix")
    expansions = ref.token_expansions(rows, N_BASE[substrate])
    for word, fl in zip(words, flags):
        tokens = trainers_word(word, fl, rows, char_rule="prefix")
        assert chunk_kernel(tok, word) == tokens
        assert inside_tokens_are_prefixes([len(expansions[t]) for t in tokens], fl)


@pytest.fixture(scope="module")
def prefix_toks():
    """Per substrate: a "prefix" tokenizer trained on the bundled sample (vocab 2000)."""
    return {s: train([sample_paths()["train"]], vocab_size=2000, substrate=s, workers=1, show_progress=False,
                     char_integrity="prefix") for s in SUBSTRATES}


@pytest.mark.slow
@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_sample_tokenizer_equals_twin_on_real_text(prefix_toks, substrate):
    tok = prefix_toks[substrate]
    assert tok.char_rule == "prefix" and tok.training["char_integrity"] == "prefix"
    if substrate == "utf8":   # every UTF-8 token whole characters or a prefix of one: the plain encoder
        assert not tok._kernel()[0].char_integrity
        assert not any(0x80 <= e[0] <= 0xBF for e in tok._expansions[256:] if len(e) > 1)
    for text in real_texts()[::2]:
        ids = tok.encode(text).tolist()
        assert ids == ref.encode_reference(tok, text)
        flags = ref.char_starts_reference(text, substrate)
        assert inside_tokens_are_prefixes([len(tok.token_expansion(i)) for i in ids], flags)
        assert tok.decode(ids) == text


@pytest.mark.slow
@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_kernel_matches_twin_on_real_text(substrate):
    merges = both(dict(real_chunks()), substrate, new_tokens=200, min_frequency=2)
    assert len(merges) == 200


# ------------------------------------------------------------------ file, constructor, CLI

def test_file_records_the_rule_and_pieces_files_keep_their_fingerprint(tmp_path):
    merges = [(0x00, 0xDE), (0x3D, 0xD8), (257, 256)]
    pieces = with_merges("utf16", merges, True)
    # written by the release before "prefix" existed (main at b8d53d6) for this tokenizer
    assert pieces.fingerprint == "sha256:448f24f8e4bd50c45ff843aa93f36524f49d0770c110741c859e77a333b2e7ab"
    assert with_merges("utf16", merges, "pieces").to_json() == pieces.to_json()
    assert json.loads(pieces.to_json())["char_integrity"] is True
    prefix = with_merges("utf16", merges)
    doc = json.loads(prefix.to_json())
    assert doc["char_integrity"] == "prefix" and doc["version"] == 2
    assert prefix.fingerprint != pieces.fingerprint
    prefix.save(tmp_path / "p.json")
    loaded = Tokenizer.load(tmp_path / "p.json")
    assert loaded.char_rule == "prefix" and loaded.char_integrity and loaded.to_json() == prefix.to_json()
    assert loaded.encode("😀").tolist() == [257, 0x00, 0xDE]
    assert with_merges("utf16", merges, False).char_rule is None
    assert "char_integrity" not in json.loads(with_merges("utf16", merges, "none").to_json())


def test_bad_rules_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="'pieces'.*'prefix'"):
        with_merges("utf16", [], "suffix")
    with pytest.raises(ValueError, match="'prefix'"):
        train(["ab ab"], vocab_size=300, substrate="utf8", workers=1, show_progress=False, char_integrity="left")
    doc = json.loads(with_merges("utf16", [(0x3D, 0xD8)]).to_json())
    doc["char_integrity"] = "suffix"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TokenizerFormatError, match="char_integrity"):
        Tokenizer.load(path)


def test_superbpe_with_prefix_is_still_refused_off_utf8():
    with pytest.raises(ValueError, match="utf8"):
        Tokenizer(substrate="utf16", merges=[], special_tokens=(), char_integrity="prefix",
                  superbpe={"stage1_merges": 0, "max_words": 4})


@pytest.mark.slow
@pytest.mark.parametrize("flag,recorded", [(["--char-integrity"], True), (["--char-rule", "prefix"], "prefix"),
                                           (["--char-integrity", "--char-rule", "pieces"], True)])
def test_cli_option_is_recorded(tmp_path, flag, recorded):
    import subprocess
    import sys

    out = tmp_path / "tok.json"
    subprocess.run([sys.executable, "-m", "ube_stream", "train", sample_paths()["train"], "--vocab-size", "700",
                    "--substrate", "utf16", *flag, "-q", "--workers", "1", "-o", str(out)], check=True)
    doc = json.loads(out.read_text())
    assert doc["char_integrity"] == recorded and doc["training"]["char_integrity"] == recorded


def test_cli_refuses_an_unknown_rule(tmp_path):
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "ube_stream", "train", sample_paths()["train"], "--vocab-size", "700",
                          "--char-rule", "suffix", "-o", str(tmp_path / "t.json")], capture_output=True, text=True)
    assert run.returncode == 2 and "prefix" in run.stderr


@pytest.mark.slow
def test_superbpe_with_prefix_encodes_as_its_twin():
    # utf8 SuperBPE under "prefix": stage 1 and stage 2 keep the rule; the encoder equals the
    # twin (encode_reference -> encode_superbpe_reference) on real text
    tok = train([sample_paths()["train"]], vocab_size=1500, substrate="utf8", workers=1, show_progress=False,
                char_integrity="prefix", superbpe_transition=1000)
    assert tok.char_rule == "prefix" and tok.superbpe is not None
    assert not any(0x80 <= e[0] <= 0xBF for e in tok._expansions[256:] if len(e) > 1)
    for text in real_texts()[::3]:
        ids = tok.encode(text).tolist()
        assert ids == ref.encode_reference(tok, text)
        assert tok.decode(ids) == text


def test_train_prefix_never_starts_with_the_shared_continuation_bytes():
    # "中席渭" x 50 (utf8): B8 AD ends all three characters (150 times), each lead byte + B8
    # occurs 50 times.  "pieces" merges (B8,AD) first (tests/test_readme.py); "prefix" may not
    # (B8 does not start a character): its first merge is the smallest of the tied prefixes,
    # (E4,B8), then (E5,B8) and (E6,B8), then each prefix + AD.
    text = "中席渭" * 50
    assert [c.encode("utf-8") for c in "中席渭"] == [b"\xe4\xb8\xad", b"\xe5\xb8\xad", b"\xe6\xb8\xad"]
    tok = train(iter([text]), vocab_size=262, substrate="utf8", char_integrity="prefix", workers=1,
                show_progress=False, special_tokens=())
    assert tok.merges[:3] == [(0xE4, 0xB8), (0xE5, 0xB8), (0xE6, 0xB8)]
    assert tok.merges[3] == (256, 0xAD)                  # 中 = (E4 B8) + AD
    assert tok.encode("中席渭").tolist()[0] == 259
