"""The character-integrity constraint in the encoder: a ``char_integrity``
tokenizer applies a merge at an occurrence only where the token it makes keeps
characters whole (the trainer's rule), under ``utf16`` and ``ube`` in the
kernel (``_encode.merge_short_ci`` / ``merge_long`` with flags); ``utf8`` needs no
test (a token's bytes fix where it can sit in valid UTF-8), so it keeps the
plain encoder and must give the same ids.

Truth: the readable twin (``_reference.encode_chunk_reference(char_starts=)``,
``encode_reference``), the trainer's own definition of a chunk's final
segmentation (its merges replayed with ``_reference._merge_pair_training``),
character boundaries from Python's codecs (``_reference.char_starts_reference``,
``str.encode``), hand-worked cases, HF ``tokenizers``, and real multilingual
text (``tests/data``, ``ube_stream/data``)."""
import json

import numpy as np
import pytest
from _helpers import read_jsonl_zst
from hypothesis import given, settings
from hypothesis import strategies as st
from test_char_integrity import token_is_sound

from ube_stream import Tokenizer
from ube_stream import _reference as ref
from ube_stream._merge import train_merges
from ube_stream.sample import sample_paths
from ube_stream.tokenizer.core import _utf8_keeps_characters
from ube_stream.training.trainer import train

SUBSTRATES = ("ube", "utf8", "utf16")
N_BASE = {"ube": 512, "utf8": 256, "utf16": 256}


def with_merges(substrate, merges, char_integrity=True):
    """A tokenizer of these ``(left, right)`` merges (no special tokens)."""
    return Tokenizer(substrate=substrate, merges=merges, special_tokens=(), char_integrity=char_integrity)


def chunk_kernel(tok, symbols, char_integrity=None):
    """The kernel's merge of one routed chunk (short path up to 32 symbols, heap path above):
    the tokenizer's encoder, or one built with ``char_integrity`` forced."""
    if char_integrity is None:
        encoder, _ = tok._kernel()
    else:
        from ube_stream import _encode
        from ube_stream.pretokenizer import gpt2_class_table
        from ube_stream.substrate import substrate_code

        encoder = _encode.Encoder(np.asarray(tok.merges, np.uint32).reshape(-1, 2),
                                  np.asarray(tok.merge_results, np.uint32), tok.base_size,
                                  substrate_code(tok.substrate), gpt2_class_table(), char_integrity=char_integrity)
    return encoder.encode_chunk_symbols(np.asarray(symbols, dtype=np.uint16)).tolist()


def twin_merges(tok):
    return [(a, b, r) for (a, b), r in zip(tok.merges, tok.merge_results)]


# --------------------------------------------------------------------------- worked by hand

def test_golden_utf16_token_across_two_characters_is_not_made():
    # utf16 "た一" = 5F 30 | 00 4E: the bytes 30 00 across the two characters spell "0" (U+0030).
    # Merge 0: (30, 00) -> 256 "0".  Plain BPE makes it across the boundary; the constraint
    # refuses it there ([30] is part of た, [00] part of 一) and keeps it for "0" itself.
    merges = [(0x30, 0x00)]
    assert with_merges("utf16", merges, False).encode("た一").tolist() == [0x5F, 256, 0x4E]
    tok = with_merges("utf16", merges)
    assert tok._kernel()[0].char_integrity
    assert tok.encode("た一").tolist() == [0x5F, 0x30, 0x00, 0x4E]
    assert tok.encode("0た0").tolist() == [256, 0x5F, 0x30, 256]
    assert tok.decode(tok.encode("た一")) == "た一"


def test_golden_ube_utf16_symbols_across_two_characters():
    # ube "中文": 中 U+4E2D, 文 U+6587 take UTF-16LE symbols 256 + (2D 4E) and 256 + (87 65);
    # the middle two, 4E 87, spell 蝎 U+874E.  Merges: 0 (0x14E, 0x187) -> 512 "蝎",
    # 1 (0x12D, 0x14E) -> 513 "中", 2 (0x187, 0x165) -> 514 "文", 3 (513, 514) -> 515 "中文".
    # Plain: rank 0 first, across the characters: 12D 512 165, and nothing else applies.
    # Constrained: rank 0 is refused there, 1 and 2 make 中 and 文, 3 joins them.
    merges = [(0x14E, 0x187), (0x12D, 0x14E), (0x187, 0x165), (513, 514)]
    assert with_merges("ube", merges, False).encode("中文").tolist() == [0x12D, 512, 0x165]
    tok = with_merges("ube", merges)
    assert tok.encode("中文").tolist() == [515]
    assert tok.encode("蝎").tolist() == [512]
    assert tok.encode("中a文").tolist() == [513, 0x61, 514]


def test_golden_inside_one_character_merges_stay_allowed():
    # ube "😀" U+1F600 = UTF-16LE 3D D8 00 DE: merges inside a surrogate pair are parts of one
    # character and stay allowed, the pair's low half joined to "a" does not.
    sym = ref.route_symbols("😀a", "ube")                    # 13D 1D8 100 1DE 61
    merges = [(sym[3], sym[4]), (sym[2], sym[3]), (sym[0], sym[1]), (514, 513)]
    plain = with_merges("ube", merges, False)
    assert chunk_kernel(plain, sym) == [514, sym[2], 512]          # rank 0 first, across 😀 and a
    tok = with_merges("ube", merges)
    assert chunk_kernel(tok, sym) == [515, 0x61]
    assert ref.encode_chunk_reference(sym, twin_merges(tok), ref.char_starts_reference("😀a", "ube")) == [515, 0x61]


def test_utf8_char_integrity_tokenizer_keeps_the_plain_encoder():
    # merged tokens é, [E4 B8] (part of 中), [B8 AD] (part of 中), 中: plain encoder
    tok = with_merges("utf8", [(0xC3, 0xA9), (0xE4, 0xB8), (0xB8, 0xAD), (257, 0xAD)])
    assert tok.char_integrity and not tok._kernel()[0].char_integrity
    # a token "a" + lead byte of é holds part of a character and another: such merges
    # (not from a char-integrity trainer) take the test under utf8 too
    odd = with_merges("utf8", [(0x61, 0xC3), (0xC3, 0xA9)])
    assert odd._kernel()[0].char_integrity
    assert odd.encode("aé").tolist() == [0x61, 257] == ref.encode_reference(odd, "aé")
    # under ube the same holds for chunks of UTF-8 symbols (characters of up to 2 bytes)
    ube_odd = with_merges("ube", [(0x61, 0xC3), (0xC3, 0xA9)])
    assert ube_odd._kernel()[0].check_utf8 and not with_merges("ube", [(0xC3, 0xA9)])._kernel()[0].check_utf8
    assert ube_odd.encode("aé").tolist() == [0x61, 513] == ref.encode_reference(ube_odd, "aé")
    assert with_merges("utf8", [(0x61, 0xC3)], False).encode("aé").tolist() == [256, 0xA9]
    for substrate in ("ube", "utf16"):
        assert with_merges(substrate, [(0x61, 0x62)])._kernel()[0].char_integrity
        assert not with_merges(substrate, [(0x61, 0x62)], False)._kernel()[0].char_integrity


# --------------------------------------------------------------------------- kernel == twin (hypothesis)

# characters whose UTF-16LE bytes recombine across neighbours (た一, 中文, 0), surrogate pairs,
# 2-byte UTF-8 letters (UTF-8 under ube) and ASCII
alphabet = st.sampled_from(list("た一中文蝎0a é😀𝔸ßü ") + ["\u0301"])
corpora = st.dictionaries(st.text(alphabet, min_size=1, max_size=14), st.integers(1, 4), min_size=1, max_size=6)


def trained(texts, substrate, new_tokens, integrity):
    """Merges the twin trainer learns from ``texts`` (plain or under the constraint)."""
    words, flags = {}, {}
    for text, count in texts.items():
        word = tuple(ref.route_symbols(text, substrate))
        words[word] = words.get(word, 0) + count
        flags[word] = tuple(ref.char_starts_reference(text, substrate))
    return ref.train_bpe_reference(words, n_base=N_BASE[substrate], max_vocab=N_BASE[substrate] + new_tokens,
                                   min_frequency=1, char_starts=flags if integrity else None)


@settings(max_examples=120, deadline=None)
@given(corpus=corpora, probe=st.text(alphabet, max_size=100), substrate=st.sampled_from(SUBSTRATES),
       new_tokens=st.integers(1, 50), integrity_trained=st.booleans())
def test_kernel_equals_twin_on_generated_text(corpus, probe, substrate, new_tokens, integrity_trained):
    # merges trained plain hold tokens that straddle characters: the encoder must refuse them
    # wherever they would straddle; the whole texts (long chunks too) take both merge paths
    merges = trained(corpus, substrate, new_tokens, integrity_trained)
    tok = with_merges(substrate, [(a, b) for a, b, _ in merges])
    assert [r for _, _, r in merges] == tok.merge_results
    for text in list(corpus) + [probe, "".join(corpus) * 3]:
        symbols = ref.route_symbols(text, substrate)
        flags = ref.char_starts_reference(text, substrate)
        expected = ref.encode_chunk_reference(symbols, merges, flags)
        assert chunk_kernel(tok, symbols, True) == expected
        assert tok.encode(text).tolist() == ref.encode_reference(tok, text)
        assert tok.decode(tok.encode(text)) == text


@settings(max_examples=60, deadline=None)
@given(corpus=corpora, probe=st.text(alphabet, max_size=100), new_tokens=st.integers(1, 50))
def test_utf8_plain_encoder_equals_constrained_twin(corpus, probe, new_tokens):
    # the utf8 claim: with merges a char-integrity trainer made, the plain rule and the
    # constrained rule agree at every occurrence (the kernel's own constrained variant too)
    merges = trained(corpus, "utf8", new_tokens, True)
    tok = with_merges("utf8", [(a, b) for a, b, _ in merges])
    assert not tok._kernel()[0].char_integrity
    for text in list(corpus) + [probe, "".join(corpus) * 3]:
        symbols = ref.route_symbols(text, "utf8")
        expected = ref.encode_chunk_reference(symbols, merges, ref.char_starts_reference(text, "utf8"))
        assert chunk_kernel(tok, symbols) == expected == ref.encode_chunk_reference(symbols, merges)
        assert chunk_kernel(tok, symbols, True) == expected
        assert tok.encode(text).tolist() == ref.encode_reference(tok, text)


# --------------------------------------------------------------------------- real text

def real_texts():
    """Real multilingual text: 2,000 characters of each Debian Handbook page language
    (tests/data, 26 languages), 2,500 of each document of the bundled training sample, and
    the bundled Unicode audit strings (ube_stream/data)."""
    import io

    import zstandard

    from ube_stream.sample import sample_paths as paths

    out, seen = [], set()
    for row in read_jsonl_zst("docs_sample.jsonl.zst"):
        if row["lang"] not in seen:
            seen.add(row["lang"])
            out.append(row["text"][:2000])
    with open(paths()["train"], "rb") as f:
        lines = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(f), encoding="utf-8").read().split("\n")
    out.extend(json.loads(line)["text"][:2500] for line in lines if line)
    import pathlib

    import ube_stream

    audit = pathlib.Path(ube_stream.__file__).parent / "data" / "unicode_audit.jsonl.zst"
    rows = [json.loads(line) for line in zstandard.ZstdDecompressor().decompress(
        audit.read_bytes(), max_output_size=1 << 30).decode().split("\n") if line]
    out.append("".join(r["text"] for r in rows[:400])[:6000])
    return out


@pytest.fixture(scope="module")
def texts():
    return real_texts()


@pytest.fixture(scope="module")
def toks(sample_tokenizer_files):
    """Per substrate: a char-integrity tokenizer trained on the bundled sample, and the
    merges of a plain one with char_integrity set (straddling tokens for the encoder to refuse)
    (trained once, in conftest, for this module and test_char_integrity)."""
    out = {}
    for substrate in SUBSTRATES:
        for integrity in (True, False):
            tok = Tokenizer.from_json(sample_tokenizer_files[substrate, integrity])
            out[substrate, integrity] = tok if integrity else with_merges(substrate, tok.merges)
    return out


@pytest.mark.parametrize("substrate", SUBSTRATES)
@pytest.mark.parametrize("integrity_trained", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_kernel_equals_twin_on_real_text(toks, texts, substrate, integrity_trained):
    # every other text (a second pass with merges trained plain, which hold straddling
    # tokens for the encoder to refuse, runs with the slow tests)
    tok = toks[substrate, integrity_trained]
    if substrate == "ube":  # a char-integrity vocabulary lets chunks of UTF-8 symbols skip the check
        assert tok._kernel()[0].check_utf8 == (not integrity_trained)
    long_chunks = 0
    for text in texts[::2]:
        assert tok.encode(text).tolist() == ref.encode_reference(tok, text)
        long_chunks += sum(len(ref.route_symbols(c, substrate)) > 64 for c in ref.pretokenize(text))
    assert long_chunks > 0  # the heap path ran too (CJK runs)


def spans(tok, ids):
    """``[start, end)`` of each token in base symbols of the text."""
    lengths = np.array([len(tok.token_expansion(i)) for i in ids], dtype=np.int64)
    ends = np.cumsum(lengths)
    return ends - lengths, ends


def straddling(tok, text, ids):
    """Token occurrences holding part of one character and anything of another: a token
    that neither starts and ends at character boundaries nor lies inside one character
    (boundaries from Python's codecs, one character at a time)."""
    flags = np.array(ref.char_starts_reference(text, tok.substrate) + [1], dtype=bool)
    starts, ends = spans(tok, ids)
    assert ends[-1] == len(flags) - 1 if len(ids) else True
    boundaries = np.cumsum(flags)        # characters started up to each position
    whole = flags[starts] & flags[ends]
    inside_one = boundaries[ends - 1] == boundaries[starts]  # no character starts in (start, end)
    return int(np.count_nonzero(~(whole | inside_one)))


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_no_token_of_real_text_straddles_a_character(toks, texts, substrate):
    tok = toks[substrate, True]
    plain = with_merges(substrate, tok.merges, char_integrity=False)
    bad, plain_bad = 0, 0
    for text in texts:
        ids = tok.encode(text).tolist()
        bad += straddling(tok, text, ids)
        plain_ids = plain.encode(text).tolist()
        plain_bad += straddling(plain, text, plain_ids)
        if substrate == "utf8":
            assert plain_ids == ids
    assert bad == 0
    if substrate != "utf8":
        assert plain_bad > 0  # the same merges without the encoder's test do straddle: the check bites
    else:
        assert plain_bad == 0


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_encoded_text_falls_into_whole_characters(toks, texts, substrate):
    """What "no token decodes to a partial character" means under character integrity.

    A token may legitimately be a strict part of ONE character (a UTF-8 byte of a
    3-byte character, a surrogate of a pair), so not every token decodes alone.
    Asserted instead, for every token occurrence of encoded real text: it either
    covers whole characters, and then decoding that one token gives exactly those
    characters of the text, or it lies inside one character, and then the tokens
    inside that character together decode to exactly it (nothing of a neighbour).
    So cutting the ids at any token boundary that is a character boundary decodes
    both sides exactly, and every token boundary inside a character is a boundary
    of tokens that belong to that character only."""
    tok = toks[substrate, True]
    for text in texts[::3]:
        ids = tok.encode(text).tolist()
        sizes = np.array([len(ref.route_symbols(ch, substrate)) for ch in text])
        char_ends = np.cumsum(sizes)
        char_starts = char_ends - sizes
        last_char = {int(e): c for c, e in enumerate(char_ends)}    # character ending at a position
        starts, ends = spans(tok, ids)
        k = 0
        while k < len(ids):
            c = int(np.searchsorted(char_ends, starts[k], side="right"))  # the character holding the start
            if starts[k] == char_starts[c] and int(ends[k]) in last_char:  # whole characters c..last
                assert tok.decode([ids[k]]) == text[c:last_char[int(ends[k])] + 1]
                k += 1
                continue
            run = k                                   # else: tokens inside character c, from its start
            while run < len(ids) and ends[run] <= char_ends[c]:
                run += 1
            assert starts[k] == char_starts[c] and run > k and ends[run - 1] == char_ends[c], (text, k)
            assert tok.decode(ids[k:run]) == text[c]
            k = run


# --------------------------------------------------------------------------- training chunk == trainer's final word

def real_chunks():
    """GPT-2 chunks of the first 400 characters of each docs_sample page (26 languages), counted."""
    import collections

    chunks = collections.Counter()
    for row in read_jsonl_zst("docs_sample.jsonl.zst"):
        chunks.update(ref.pretokenize(row["text"][:400]))
    return chunks


def trained_on_real_chunks(substrate, char_rule="pieces"):
    """The kernel trainer's 400 merges under ``char_rule`` on :func:`real_chunks`:
    ``(words, flags, rows, tok)`` with each chunk's routed symbols and character-start
    flags, the ``(left, right, result)`` merges and a tokenizer of them."""
    chunks = real_chunks()
    words = [ref.route_symbols(c, substrate) for c in chunks]
    flags = [ref.char_starts_reference(c, substrate) for c in chunks]
    offsets = np.zeros(len(words) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(w) for w in words])
    status, merges = train_merges(np.array([s for w in words for s in w], np.uint16), offsets,
                                  np.fromiter(chunks.values(), np.int64), N_BASE[substrate],
                                  N_BASE[substrate] + 400, 2, -1, None, None,
                                  char_starts=np.array([f for fl in flags for f in fl], np.uint8), char_rule=char_rule)
    assert status == 0 and len(merges) == 400
    rows = [tuple(r) for r in merges.tolist()]
    tok = with_merges(substrate, [(a, b) for a, b, _ in rows], char_integrity=char_rule)
    assert tok.merge_results == [r for _, _, r in rows]
    return words, flags, rows, tok


def trainers_word(word, flags, rows, char_rule="pieces"):
    """The trainer's segmentation of one chunk: its merges replayed in rank order where
    ``char_rule`` allows (_merge_pair_training, the twin trainer's rewrite step)."""
    tokens, starts = list(word), list(range(len(word)))
    present = set(zip(tokens, tokens[1:]))
    for left, right, result in rows:
        if (left, right) in present:
            tokens, starts = ref._merge_pair_training(tokens, (left, right), result, starts, flags + [1],
                                                      char_rule=char_rule)
            present = set(zip(tokens, tokens[1:]))
    return tokens


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_encoding_a_training_chunk_gives_the_trainers_final_word(substrate):
    # the kernel trainer on real chunks; encoding a chunk gives the trainer's segmentation of it
    words, flags, rows, tok = trained_on_real_chunks(substrate)
    differ = 0
    for word, fl in zip(words, flags):
        tokens = trainers_word(word, fl, rows)
        assert chunk_kernel(tok, word) == tokens
        differ += ref.encode_chunk_reference(word, rows) != tokens   # what the plain rule would give
    if substrate == "utf16":
        assert differ > 0   # the plain rule would not give the trainer's words


# --------------------------------------------------------------------------- every path

@pytest.mark.slow
def test_tokenizer_file_is_byte_identical_for_1_and_2_workers(tmp_path):
    import subprocess
    import sys

    for substrate in ("ube", "utf16"):
        files = []
        for workers in (1, 2):
            out = tmp_path / f"{substrate}-{workers}.json"
            subprocess.run([sys.executable, "-m", "ube_stream", "train", sample_paths()["train"], "--vocab-size",
                            "1500", "--substrate", substrate, "--char-integrity", "-q", "--workers", str(workers),
                            "-o", str(out)], check=True)
            files.append(out.read_bytes())
        assert files[0] == files[1]
        assert json.loads(files[0])["char_integrity"] is True


@pytest.mark.slow
@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_verify_unicode_round_trips_every_scalar_value(toks, substrate, tmp_path):
    from ube_stream.verification import verify_unicode

    path = tmp_path / "tok.json"
    toks[substrate, True].save(path)
    loaded = Tokenizer.load(path)
    assert loaded.char_integrity and loaded._kernel()[0].char_integrity == (substrate != "utf8")
    report = verify_unicode(str(path), substrates=(), workers=1, show_progress=False)
    assert report.ok, report.format()
    assert report.checked["scalar/alone/tokenizer"] == 1_112_064


@pytest.mark.parametrize("substrate,via", [("ube", "api"), ("utf16", "api"),
                                           pytest.param("ube", "cli", marks=pytest.mark.slow)])
def test_shards_encode_with_a_char_integrity_tokenizer(toks, texts, substrate, via, tmp_path):
    from ube_stream.shards import TokenShards, encode_corpus
    from ube_stream.verification import verify_shards

    tok = toks[substrate, True]
    tok_path = tmp_path / "tok.json"
    tok.save(tok_path)
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8")
    out = tmp_path / "shards"
    if via == "cli":  # `ube encode`, two worker processes (each rebuilds the checked encoder)
        import subprocess
        import sys

        subprocess.run([sys.executable, "-m", "ube_stream", "encode", str(corpus), "--tokenizer", str(tok_path),
                        "-o", str(out), "--no-eos", "--workers", "2", "--shard-tokens", "5000", "--unit-rows", "20",
                        "-q"], check=True)
    else:
        encode_corpus([str(corpus)], tokenizer=str(tok_path), output=str(out), workers=1, show_progress=False,
                      eos=False, shard_tokens=5000)
    ds = TokenShards(str(out), verify="full")
    assert len(ds) == len(texts)
    plain = with_merges(substrate, tok.merges, char_integrity=False)
    changed = 0
    for i, text in enumerate(texts):
        assert ds[i].tolist() == tok.encode(text).tolist()
        changed += ds[i].tolist() != plain.encode(text).tolist()
    assert changed > 0
    assert verify_shards(str(out), workers=1, show_progress=False).ok


@pytest.mark.parametrize("substrate", ["ube", "utf16"])
def test_transformers_class_gives_the_same_ids(toks, texts, substrate):
    from ube_stream.hf import UbeTokenizer

    tok = toks[substrate, True]
    hf = UbeTokenizer(tokenizer=tok)
    assert [hf(t)["input_ids"] for t in texts] == [tok.encode(t).tolist() for t in texts]
    assert hf.decode(hf(texts[0])["input_ids"]) == texts[0]


def test_hf_export_utf8_is_exact_and_others_are_refused(toks, texts):
    import tokenizers

    tok = toks["utf8", True]
    hf = tokenizers.Tokenizer.from_str(json.dumps(tok.to_hf_dict()))
    for k, text in enumerate(texts):
        ids = tok.encode(text).tolist()
        assert hf.encode(text).ids == ids
        if k % 4 == 0:
            assert ids == ref.encode_reference(tok, text)   # the constrained twin
    for substrate in ("ube", "utf16"):
        with pytest.raises(ValueError, match="utf8 substrate"):
            toks[substrate, True].to_hf_dict()


@settings(max_examples=150, deadline=None)
@given(text=st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=12), data=st.data())
def test_utf8_vocabulary_check_agrees_with_the_codec_check(text, data):
    # any byte span of valid UTF-8: Tokenizer's check (which picks the plain encoder for a
    # char-integrity utf8 tokenizer) agrees with the codec-based check of test_char_integrity
    # and with the span's position against the character boundaries
    raw = text.encode()
    start = data.draw(st.integers(0, len(raw) - 1))
    end = data.draw(st.integers(start + 1, len(raw)))
    flags = ref.char_starts_reference(text, "utf8") + [1]
    at_position = (flags[start] and flags[end]) or not any(flags[start + 1:end])
    assert _utf8_keeps_characters(raw[start:end]) == token_is_sound(list(raw[start:end]), "utf8") == bool(at_position)


@pytest.mark.parametrize("substrate", [pytest.param("ube", marks=pytest.mark.slow), "utf16"])
def test_script_pattern_tokenizer_takes_the_check_too(texts, substrate):
    # SCRIPT pre-tokenization hands the encoder chunk ends (encode_chunks): the same check applies
    tok = train([sample_paths()["train"]], vocab_size=2000, substrate=substrate, workers=1, show_progress=False,
                char_integrity=True, pattern="script")
    assert tok.pattern_name == "script" and tok._kernel()[0].char_integrity
    plain = Tokenizer(substrate=substrate, merges=tok.merges, pattern="script", special_tokens=())
    straddles = 0
    for text in texts[::6]:
        ids = tok.encode(text).tolist()
        assert ids == ref.encode_reference(tok, text)
        assert straddling(tok, text, ids) == 0
        straddles += straddling(plain, text, plain.encode(text).tolist())
    if substrate == "utf16":
        assert straddles > 0
