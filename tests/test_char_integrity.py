"""The character-integrity merge constraint (``train(..., char_integrity=True)``,
``ube train --char-integrity``): no merge creates a token that holds part of
one character and anything of another character.

Truth: the readable twin (``_reference.train_bpe_reference(char_starts=...)``),
character boundaries from Python's codecs (``_reference.char_starts_reference``),
a case worked by hand, and, on the bundled sample, each vocabulary token checked
on its own with Python's codecs."""
import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ube_stream import _reference as ref
from ube_stream._merge import train_merges
from ube_stream.sample import sample_paths
from ube_stream.substrate import char_starts
from ube_stream.tokenizer import Tokenizer

N_BASE = {"ube": 512, "utf8": 256, "utf16": 256}
ALL_LONG, ALL_SHORT = 2, 2**62


def routed(texts, substrate):
    """{text: count} -> the twin's inputs ({word: count}, {word: flags})."""
    words, flags = {}, {}
    for text, count in texts.items():
        word = tuple(ref.route_symbols(text, substrate))
        words[word] = words.get(word, 0) + count
        flags[word] = tuple(ref.char_starts_reference(text, substrate))
    return words, flags


def kernel(words, flags, *, n_base, max_vocab, min_frequency=1, long_word=None, max_token_length=-1,
           char_rule="pieces"):
    items = list(words.items())
    symbols = np.array([s for w, _ in items for s in w], dtype=np.uint16)
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(w) for w, _ in items])
    counts = np.array([c for _, c in items], dtype=np.int64)
    starts = np.array([f for w, _ in items for f in flags[w]], dtype=np.uint8)
    extra = {} if long_word is None else {"long_word": long_word}
    status, merges = train_merges(symbols, offsets, counts, n_base, max_vocab, min_frequency,
                                  max_token_length, None, None, char_starts=starts, char_rule=char_rule, **extra)
    assert status == 0
    return [tuple(row) for row in merges.tolist()]


def both(texts, substrate, *, new_tokens, min_frequency=1, max_token_length=None, char_rule="pieces"):
    """The twin's merges, checked equal to the kernel's on the short and the long-word paths."""
    words, flags = routed(texts, substrate)
    n_base = N_BASE[substrate]
    expected = ref.train_bpe_reference(words, n_base=n_base, max_vocab=n_base + new_tokens,
                                       min_frequency=min_frequency, char_starts=flags, char_rule=char_rule,
                                       max_token_length=max_token_length)
    for long_word in (None, ALL_LONG, ALL_SHORT):
        got = kernel(words, flags, n_base=n_base, max_vocab=n_base + new_tokens, min_frequency=min_frequency,
                     long_word=long_word, max_token_length=-1 if max_token_length is None else max_token_length,
                     char_rule=char_rule)
        assert got == expected, long_word
    return expected


# ------------------------------------------------------------------ worked by hand

def test_golden_utf8_partial_bytes_never_join_a_neighbour():
    # utf8, word "éa" x 3 and "aé" x 2:  é = C3 A9, a = 61.
    #   "éa" = C3 A9 61: (C3,A9) inside é: ok; (A9,61): A9 ends é but the left
    #          token [A9] is not whole -> not counted
    #   "aé" = 61 C3 A9: (61,C3): [C3] is part of é -> not counted; (C3,A9) ok
    # counts: (C3,A9) = 3 + 2 = 5, nothing else.
    # 1. (C3,A9) -> 256 "é" (whole):  "éa" = 256 61, "aé" = 61 256
    #    counts: (256,61) = 3, (61,256) = 2  (both whole now)
    # 2. (256,61) -> 257; 3. (61,256) -> 258; then nothing is left.
    merges = both({"éa": 3, "aé": 2}, "utf8", new_tokens=10)
    assert merges == [(0xC3, 0xA9, 256), (256, 0x61, 257), (0x61, 256, 258)]


def test_golden_partial_pair_loses_to_nothing_when_forbidden():
    # utf8, "中a" x 4: 中 = E4 B8 AD.  Pairs: (E4,B8) 4, (B8,AD) 4, (AD,61) 4.
    # Without the constraint the smallest tie (AD,61) -> 256 comes first: a token
    # "end of 中 + a", which the constraint forbids ([AD] is not a whole character).
    # With it: (B8,AD) -> 256 (ties: (B8,AD) < (E4,B8)), then (E4,256) -> 257 = 中,
    # then (257,61) -> 258 = "中a".
    words, flags = routed({"中a": 4}, "utf8")
    plain = ref.train_bpe_reference(words, n_base=256, max_vocab=257, min_frequency=1)
    assert plain == [(0xAD, 0x61, 256)]
    merges = both({"中a": 4}, "utf8", new_tokens=10)
    assert merges == [(0xB8, 0xAD, 256), (0xE4, 256, 257), (257, 0x61, 258)]


def test_golden_utf16_crossing_byte_pair_is_not_counted():
    # utf16, "ab" x 2: 61 00 62 00.  Pairs (61,00) 2, (00,62) 2 (crosses a..b:
    # [00] ends "a" but is part of it), (62,00) 2.
    # 1. (61,00) -> 256 "a"; 2. (62,00) -> 257 "b"; 3. (256,257) -> 258 "ab".
    merges = both({"ab": 2}, "utf16", new_tokens=10)
    assert merges == [(0x61, 0x00, 256), (0x62, 0x00, 257), (256, 257, 258)]
    words, flags = routed({"ab": 2}, "utf16")
    assert ref.train_bpe_reference(words, n_base=256, max_vocab=257, min_frequency=1) == [(0x00, 0x62, 256)]


def test_golden_ube_surrogate_pair_merges_inside_first():
    # ube, "😀a" x 3: 😀 U+1F600 = UTF-16LE 3D D8 00 DE (ids +256), a = 61.
    # Inside 😀: (0x13D,0x1D8), (0x1D8,0x100), (0x100,0x1DE), all 3; (0x1DE,0x61) crosses: never.
    # 1. (0x100,0x1DE) -> 512 (smallest tie); 2. (0x13D,0x1D8) -> 513;
    # 3. (513,512) -> 514 = 😀; 4. (514,0x61) -> 515.
    merges = both({"😀a": 3}, "ube", new_tokens=10)
    assert merges == [(0x100, 0x1DE, 512), (0x13D, 0x1D8, 513), (513, 512, 514), (514, 0x61, 515)]


# ------------------------------------------------------------------ kernel == twin

alphabet = st.sampled_from(list("ab é中文😀üß𝔸 ") + ["\u0301", "ñ"])
texts = st.dictionaries(st.text(alphabet, min_size=1, max_size=12), st.integers(1, 5), min_size=1, max_size=8)


@settings(max_examples=150, deadline=None)
@given(texts=texts, substrate=st.sampled_from(["ube", "utf8", "utf16"]), new_tokens=st.integers(0, 40),
       min_frequency=st.integers(0, 3), max_token_length=st.sampled_from([None, 3, 6]))
def test_kernel_matches_twin_on_generated_corpora(texts, substrate, new_tokens, min_frequency, max_token_length):
    both(texts, substrate, new_tokens=new_tokens, min_frequency=min_frequency, max_token_length=max_token_length)


long_texts = st.dictionaries(st.text(alphabet, min_size=20, max_size=90), st.integers(1, 4), min_size=1, max_size=4)


@settings(max_examples=40, deadline=None)
@given(texts=long_texts, substrate=st.sampled_from(["ube", "utf8", "utf16"]), new_tokens=st.integers(1, 80))
def test_long_words_match_twin(texts, substrate, new_tokens):
    both(texts, substrate, new_tokens=new_tokens)


@settings(max_examples=100, deadline=None)
@given(texts=texts, substrate=st.sampled_from(["ube", "utf8", "utf16"]))
def test_twin_tokens_are_whole_characters_or_part_of_one(texts, substrate):
    # positional truth: replay the twin's merges on every word and check each
    # token's span against the codec's character boundaries
    words, flags = routed(texts, substrate)
    merges = ref.train_bpe_reference(words, n_base=N_BASE[substrate], max_vocab=N_BASE[substrate] + 60,
                                     min_frequency=1, char_starts=flags)
    expansions = ref.token_expansions(merges, N_BASE[substrate])
    for word in words:
        tokens, spans = list(word), list(range(len(word)))
        bounds = list(flags[word]) + [1]
        for left, right, result in merges:
            tokens, spans = ref._merge_pair_training(tokens, (left, right), result, spans, bounds)
        for token, start in zip(tokens, spans):
            end = start + len(expansions.get(token, (token,)))
            whole = bounds[start] == 1 and bounds[end] == 1
            inside_one = not any(bounds[start + 1:end])
            assert whole or inside_one


def test_without_flags_the_kernel_is_unchanged():
    words, flags = routed({"éa": 3, "中a": 4, "ab": 2}, "utf8")
    plain = ref.train_bpe_reference(words, n_base=256, max_vocab=300, min_frequency=1)
    items = list(words.items())
    symbols = np.array([s for w, _ in items for s in w], dtype=np.uint16)
    offsets = np.zeros(len(items) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(w) for w, _ in items])
    counts = np.array([c for _, c in items], dtype=np.int64)
    status, merges = train_merges(symbols, offsets, counts, 256, 300, 1, -1)
    assert status == 0 and [tuple(r) for r in merges.tolist()] == plain
    with pytest.raises(ValueError, match="char_starts"):
        train_merges(symbols, offsets, counts, 256, 300, 1, -1, char_starts=np.ones(3, np.uint8))


@settings(max_examples=200, deadline=None)
@given(text=st.text(st.characters(blacklist_categories=["Cs"]), max_size=40),
       substrate=st.sampled_from(["ube", "utf8", "utf16"]))
def test_char_starts_match_the_codec_twin(text, substrate):
    flags = char_starts(text.encode(), substrate, len(ref.route_symbols(text, substrate)))
    assert flags.tolist() == ref.char_starts_reference(text, substrate)


# ------------------------------------------------------------------ vocabulary check on the sample

def _utf8_whole_or_part(b: bytes, max_char_bytes: int = 4) -> bool:
    """``b`` decodes to whole characters (of at most ``max_char_bytes`` UTF-8
    bytes each), or is a strict part of one character's UTF-8."""
    try:
        return all(len(ch.encode()) <= max_char_bytes for ch in b.decode("utf-8"))
    except UnicodeDecodeError:
        pass
    if all(0x80 <= x <= 0xBF for x in b):                 # continuation bytes only: a middle or tail
        return len(b) <= max_char_bytes - 1
    lead, rest = b[0], b[1:]
    need = 2 if 0xC2 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF else 4 if 0xF0 <= lead <= 0xF4 else 0
    if not need or need > max_char_bytes or len(b) >= need or not all(0x80 <= x <= 0xBF for x in rest):
        return False
    # a prefix: some completion decodes to one character
    seconds = [rest[0]] if rest else range(0x80, 0xC0)
    return any(len((bytes([lead, s]) + rest[1:] + b"\x80" * (need - len(b) - (0 if rest else 1)))
                   .decode("utf-8", "ignore")) == 1 for s in seconds)


def _utf16_whole_or_part(b: bytes, min_char_utf8: int = 1) -> bool:
    """``b`` (UTF-16LE) decodes to whole characters (each of at least
    ``min_char_utf8`` UTF-8 bytes), or is a strict part of one character."""
    if len(b) % 2 == 0:
        try:
            return all(len(ch.encode()) >= min_char_utf8 for ch in b.decode("utf-16-le"))
        except UnicodeDecodeError:
            pass
    if len(b) == 1:
        return True
    if len(b) == 2:                                        # one surrogate of a pair
        return 0xD8 <= b[1] <= 0xDF
    if len(b) == 3:                                        # 3 of a pair's 4 bytes
        return 0xD8 <= b[1] <= 0xDB or (0xD8 <= b[0] <= 0xDB and 0xDC <= b[2] <= 0xDF)
    return False


def token_is_sound(expansion, substrate) -> bool:
    """A token (its base ids) holds whole characters, or a strict part of one."""
    if substrate == "utf8":
        return _utf8_whole_or_part(bytes(expansion))
    if substrate == "utf16":
        return _utf16_whole_or_part(bytes(expansion))
    runs = []                                              # ube: runs of one alphabet
    for s in expansion:
        if runs and (s >= 256) == (runs[-1][0] >= 256):
            runs[-1].append(s)
        else:
            runs.append([s])
    whole = []
    for run in runs:
        data = bytes(s & 0xFF for s in run)
        try:
            chars = data.decode("utf-16-le") if run[0] >= 256 else data.decode("utf-8")
            whole.append(all((len(c.encode()) >= 3) == (run[0] >= 256) for c in chars))
        except UnicodeDecodeError:
            whole.append(False)
    if all(whole):
        return True
    if len(runs) != 1:
        return False
    data = bytes(s & 0xFF for s in runs[0])
    return _utf16_whole_or_part(data, 3) if runs[0][0] >= 256 else _utf8_whole_or_part(data, 2)


def test_token_check_knows_good_and_bad_tokens():
    assert token_is_sound(list("é".encode()), "utf8") and token_is_sound([0xE4, 0xB8], "utf8")
    assert token_is_sound([0xB8, 0xAD], "utf8") and not token_is_sound([0xAD, 0x61], "utf8")
    assert not token_is_sound([0xAD, 0xE4], "utf8") and not token_is_sound([0x61, 0xE4], "utf8")
    assert token_is_sound(list("ab".encode("utf-16-le")), "utf16") and token_is_sound([0x00], "utf16")
    assert not token_is_sound([0x00, 0x62, 0x00], "utf16")
    assert token_is_sound(ref.route_symbols("a😀中", "ube"), "ube")
    assert token_is_sound(ref.route_symbols("😀", "ube")[:3], "ube")
    assert not token_is_sound(ref.route_symbols("a中", "ube")[:2], "ube")
    assert not token_is_sound(ref.route_symbols("中", "ube")[1:] + [0x61], "ube")


@pytest.fixture(scope="module")
def sample_tokenizers(sample_tokenizer_files):
    # trained once (conftest) for this module and test_char_integrity_encode
    return {key: Tokenizer.from_json(text) for key, text in sample_tokenizer_files.items()}


def unsound_tokens(tokenizer):
    n_base = N_BASE[tokenizer.substrate]
    merges = [(left, right) for left, right in tokenizer.merges]
    # expansions from the merges (ids as derived by the twin's rule)
    expansions = {i: (i,) for i in range(n_base)}
    id_of = {(i,): i for i in range(n_base)}
    for left, right in merges:
        e = expansions[left] + expansions[right]
        if e not in id_of:
            id_of[e] = len(expansions)
            expansions[id_of[e]] = e
    # merged tokens only: a base symbol holds nothing of two characters
    return [e for e in expansions.values() if len(e) > 1 and not token_is_sound(e, tokenizer.substrate)]


@pytest.mark.parametrize("substrate", ["ube", "utf8", "utf16"])
def test_sample_vocabulary_has_no_mixed_partial_tokens(sample_tokenizers, substrate):
    plain = unsound_tokens(sample_tokenizers[substrate, False])
    strict = unsound_tokens(sample_tokenizers[substrate, True])
    assert strict == []
    assert len(plain) > 0          # the constraint changes something on real text
    assert sample_tokenizers[substrate, True].training["char_integrity"] is True
    assert sample_tokenizers[substrate, False].training["char_integrity"] is False


def test_sample_tokenizer_still_round_trips(sample_tokenizers):
    text = "Debian 中文 😀 é ñ — ok"
    for tok in sample_tokenizers.values():
        assert tok.decode(tok.encode(text)) == text


@pytest.mark.slow
def test_cli_option_is_recorded(tmp_path):
    out = tmp_path / "tok.json"
    subprocess.run([sys.executable, "-m", "ube_stream", "train", sample_paths()["train"], "--vocab-size", "700",
                    "--substrate", "utf16", "--char-integrity", "-q", "--workers", "1", "-o", str(out)], check=True)
    assert json.loads(out.read_text())["training"]["char_integrity"] is True


@pytest.mark.slow
@pytest.mark.parametrize("substrate", ["ube", "utf8", "utf16"])
def test_kernel_matches_twin_on_real_text(substrate):
    # the first 400 characters of each row of tests/data/docs_sample (26 languages), GPT-2 chunks
    import collections
    import pathlib

    import zstandard

    raw = zstandard.ZstdDecompressor().decompress(
        (pathlib.Path(__file__).parent / "data" / "docs_sample.jsonl.zst").read_bytes(), max_output_size=1 << 30)
    chunks = collections.Counter()
    for line in raw.splitlines():
        chunks.update(ref.pretokenize(json.loads(line)["text"][:400]))
    merges = both(dict(chunks), substrate, new_tokens=200, min_frequency=2)
    assert len(merges) == 200
