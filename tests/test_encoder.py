"""The Cython encoder and decoder behind Tokenizer, checked against independent truth:
HF ``tokenizers`` and ``tiktoken`` built from the same merges, the pure-Python
twins in ``_reference``, Python's codecs (round trips), and hypothesis properties."""
import argparse
import io
import os
from contextlib import redirect_stdout

import numpy as np
import pytest
from _helpers import slow_after
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ube_stream import Tokenizer, train
from ube_stream._reference import GPT2_PATTERN, decode_reference, encode_chunk_reference, encode_reference
from ube_stream.errors import InvalidTextError, SymbolDecodeError

SUBSTRATES = ("ube", "utf8", "utf16")
SPECIALS = ["<|endoftext|>", "<|pad|>"]
HYPO = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def real_texts(docs_rows, parallel_rows, unicode_rows):
    """~2.5 MB of real multilingual text: 26 languages of running text, ~270 languages
    of parallel items, Unicode test strings."""
    texts = [r["text"] for r in docs_rows]
    texts += [r["text"] for r in parallel_rows]
    texts += [r["text"] for r in unicode_rows]
    return [t for t in texts if t]


@pytest.fixture(scope="module")
def tokenizers_by_substrate(docs_rows):
    text = [r["text"] for r in docs_rows]
    return {s: train(iter(text), vocab_size=3000, substrate=s, special_tokens=SPECIALS, workers=1,
                     show_progress=False) for s in SUBSTRATES}


@pytest.fixture(scope="module")
def utf8_tok(tokenizers_by_substrate):
    return tokenizers_by_substrate["utf8"]


def _mergeable_ranks(tok):
    """tiktoken ranks of a trained utf8 tokenizer: token bytes -> id."""
    n = tok.vocab_size - len(tok.special_tokens)
    return {bytes(tok.token_expansion(i)): i for i in range(n)}


@pytest.fixture(scope="module")
def hf_file(utf8_tok, tmp_path_factory):
    path = tmp_path_factory.mktemp("hf") / "tokenizer.json"
    utf8_tok.export_hf(path)
    return path


@pytest.fixture(scope="module")
def tiktoken_encoding(utf8_tok):
    import tiktoken
    return tiktoken.Encoding("ube-test", pat_str=GPT2_PATTERN, mergeable_ranks=_mergeable_ranks(utf8_tok),
                             special_tokens=dict(utf8_tok.special_tokens))


assigned_text = st.text(st.characters(blacklist_categories=("Cs", "Cn")), max_size=80)
any_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=80)


def _hypo_text_for(tok):
    """Text mixing the tokenizer's own tokens (so merges fire) with arbitrary characters."""
    pieces = st.one_of(assigned_text, st.sampled_from(
        ["the ", " des", "的", "ال", "ing", "  ", "\n\n", "'s", "1234", "Дебиан", "데비안", "😀👍🏽"]))
    return st.lists(pieces, max_size=12).map("".join)


# --------------------------------------------------------------------------- differential

@pytest.fixture(scope="module")
def hf_ids(hf_file, real_texts):
    """HF ``tokenizers``' ids for each of ``real_texts`` (one text a call: its batch call is
    slower here, on 66k short texts), computed once for the tests that compare with them."""
    import tokenizers
    hf = tokenizers.Tokenizer.from_file(str(hf_file))
    return [hf.encode(text, add_special_tokens=False).ids for text in real_texts]


def test_hf_tokenizers_give_identical_ids(utf8_tok, hf_ids, real_texts):
    ours = utf8_tok.encode_batch(real_texts)
    for i, (a, b) in enumerate(zip(ours, hf_ids)):
        assert a.tolist() == b, f"text {i} differs"
    assert sum(len(a) for a in ours) > 300_000


def test_tiktoken_gives_identical_ids(utf8_tok, tiktoken_encoding, real_texts):
    # one text a call: tiktoken's encode_ordinary_batch (a thread pool) is ~10x slower on 66k short texts
    theirs = [tiktoken_encoding.encode_ordinary(text) for text in real_texts]
    ours = utf8_tok.encode_batch(real_texts)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a.tolist() == b, f"text {i} differs"


@HYPO
@given(text=assigned_text)
def test_hypothesis_text_matches_hf_and_tiktoken(utf8_tok, hf_file, tiktoken_encoding, text):
    import tokenizers
    hf = _HF_CACHE.setdefault(str(hf_file), tokenizers.Tokenizer.from_file(str(hf_file)))
    ours = utf8_tok.encode_ordinary(text).tolist()
    assert ours == tiktoken_encoding.encode_ordinary(text)
    if not any(special in text for special in SPECIALS):  # HF always encodes an added token's text as it
        assert ours == hf.encode(text, add_special_tokens=False).ids


_HF_CACHE = {}


# --------------------------------------------------------------------------- kernel == reference

@pytest.mark.parametrize("substrate", [pytest.param("ube"), pytest.param("utf8", marks=pytest.mark.slow), pytest.param("utf16", marks=pytest.mark.slow)])  # utf8/utf16 with the slow tests
def test_kernel_equals_reference_on_real_text(tokenizers_by_substrate, real_texts, substrate):
    tok = tokenizers_by_substrate[substrate]
    sample = [t[:1000] for t in real_texts[::29]]
    for text, ids in zip(sample, tok.encode_batch(sample)):
        assert ids.tolist() == encode_reference(tok, text)


@pytest.mark.parametrize("substrate", slow_after(SUBSTRATES))
def test_kernel_equals_reference_hypothesis(tokenizers_by_substrate, substrate):
    tok = tokenizers_by_substrate[substrate]

    @HYPO
    @given(text=_hypo_text_for(tok))
    def check(text):
        ids = tok.encode_ordinary(text)  # arbitrary text may spell a special token: text, as the reference does
        assert ids.dtype == np.uint32
        assert ids.tolist() == encode_reference(tok, text)
        assert tok.decode(ids) == text

    check()


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_long_chunks_take_the_heap_path_and_agree(tokenizers_by_substrate, substrate):
    """Chunks longer than the min-scan limit (SHORT_CHUNK, 32 symbols): CJK runs, repeated letters."""
    tok = tokenizers_by_substrate[substrate]
    texts = ["的" * 300, "a" * 257, "ab" * 200, "데비안데비안" * 40, "1" * 500, "!?" * 150,
             "ﻻ" * 99 + "ال" * 99, "😀" * 77]
    for text in texts:
        assert tok.encode(text).tolist() == encode_reference(tok, text), text[:10]


@HYPO
@given(symbols=st.lists(st.sampled_from([97, 98, 99, 32, 228, 184, 173]), min_size=0, max_size=200))
def test_chunk_merge_kernel_equals_reference(utf8_tok, symbols):
    """Encoder.encode_chunk_symbols (min-scan for <= 32 symbols, heap above) vs the reference rule."""
    encoder, _ = utf8_tok._kernel()
    merges = [(a, b, r) for (a, b), r in zip(utf8_tok.merges, utf8_tok.merge_results)]
    got = encoder.encode_chunk_symbols(np.array(symbols, dtype=np.uint16)).tolist()
    assert got == encode_chunk_reference(symbols, merges)


def test_reused_merge_results_follow_the_rank_rule():
    """A merge whose result already exists (abc = ab+c = a+bc) keeps the all-occurrences
    rank rule of encode_chunk_reference in both merge paths."""
    a, b, c = 97, 98, 99
    merges = [(a, b), (b, c), (256, c), (a, 257), (258, a)]
    tok = Tokenizer(substrate="utf8", merges=merges, special_tokens=[])
    assert tok.merge_results == [256, 257, 258, 258, 259]
    for text in ["abca", "abcabcabc", "aabc" * 30, "xbca" * 40, "abc" * 70 + "a"]:
        assert tok.encode(text).tolist() == encode_reference(tok, text)


# --------------------------------------------------------------------------- round trips

@pytest.mark.parametrize("substrate", slow_after(SUBSTRATES))
def test_round_trip_real_text(tokenizers_by_substrate, real_texts, substrate):
    tok = tokenizers_by_substrate[substrate]
    encoded = tok.encode_batch(real_texts)
    assert tok.decode_batch(encoded) == real_texts


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_round_trip_every_scalar_value(tokenizers_by_substrate, substrate):
    tok = tokenizers_by_substrate[substrate]
    scalars = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    texts = ["".join(map(chr, scalars[i:i + 4096])) for i in range(0, len(scalars), 4096)]
    encoded = tok.encode_batch(texts)
    assert tok.decode_batch(encoded) == texts


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_round_trip_hypothesis(tokenizers_by_substrate, substrate):
    tok = tokenizers_by_substrate[substrate]

    @HYPO
    @given(text=any_text)
    def check(text):
        assert tok.decode(tok.encode_ordinary(text)) == text  # arbitrary text may spell a special token

    check()


# --------------------------------------------------------------------------- decoding

def test_decode_special_tokens_flush_and_write_text(tokenizers_by_substrate):
    tok = tokenizers_by_substrate["ube"]
    text = "性能<|endoftext|>é<|pad|><|pad|>x"
    ids = tok.encode(text, allowed_special="all")
    assert tok.decode(ids) == text == decode_reference(tok, ids)


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_decode_invalid_ids_strict_and_replace(tokenizers_by_substrate, substrate):
    tok = tokenizers_by_substrate[substrate]
    rng = np.random.default_rng(0)
    raised = 0
    for _ in range(200):
        ids = rng.integers(0, tok.vocab_size, size=rng.integers(1, 12))
        try:
            expected = decode_reference(tok, ids, errors="strict")
        except (UnicodeDecodeError, SymbolDecodeError):
            expected = None
        if expected is None:
            with pytest.raises(SymbolDecodeError) as info:
                tok.decode(ids)
            assert 0 <= info.value.position < len(ids)
            raised += 1
        else:
            assert tok.decode(ids) == expected
        assert tok.decode(ids, errors="replace") == decode_reference(tok, ids, errors="replace")
    assert raised > 20


def test_decode_error_names_the_token_position(utf8_tok):
    ids = utf8_tok.encode("hello world").tolist()
    ids.insert(2, 0xE4)  # a lone UTF-8 lead byte
    with pytest.raises(SymbolDecodeError) as info:
        utf8_tok.decode(ids)
    assert info.value.position == 2
    assert "position 2" in str(info.value)
    with pytest.raises(ValueError, match="position 1"):
        utf8_tok.decode([5, utf8_tok.vocab_size])
    with pytest.raises(ValueError, match="position 0"):
        utf8_tok.decode([-1])


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_stream_decoder_equals_decode_hypothesis(tokenizers_by_substrate, substrate):
    """At every split point (one id at a time), the outputs so far are final and their
    concatenation plus flush() equals decode(ids) -- for arbitrary ids, with replace."""
    tok = tokenizers_by_substrate[substrate]
    n = tok.vocab_size

    @HYPO
    @given(ids=st.lists(st.one_of(st.integers(0, 511 if substrate == "ube" else 255),
                                  st.integers(0, n - 1)), max_size=30),
           text=any_text)
    def check(ids, text):
        for sequence, errors in ((ids, "replace"), (tok.encode(text, allowed_special="all").tolist(), "strict")):
            expected = tok.decode(sequence, errors=errors)
            decoder = tok.stream_decoder(errors=errors)
            emitted = ""
            for token in sequence:
                emitted += decoder.feed(token)
                assert expected.startswith(emitted)
            assert emitted + decoder.flush() == expected

    check()


def test_stream_decoder_holds_split_characters(tokenizers_by_substrate):
    tok = tokenizers_by_substrate["utf16"]
    decoder = tok.stream_decoder()
    # U+1F600 as UTF-16LE: 3D D8 00 DE, fed one byte (base symbol) at a time
    assert [decoder.feed(b) for b in (0x3D, 0xD8, 0x00)] == ["", "", ""]
    assert decoder.feed(0xDE) == "😀"
    assert decoder.flush() == ""
    strict = tokenizers_by_substrate["utf8"].stream_decoder()
    assert strict.feed(0xE4) == ""
    with pytest.raises(SymbolDecodeError):
        strict.flush()


# --------------------------------------------------------------------------- API behaviour

def test_threads_give_identical_results(utf8_tok, multilingual_lines):
    lines = multilingual_lines[:6000]
    one = utf8_tok.encode_batch(lines, num_threads=1)
    four = utf8_tok.encode_batch(lines, num_threads=4)
    assert len(one) == len(four) == len(lines)
    assert all(np.array_equal(a, b) for a, b in zip(one, four))
    data = "".join(lines).encode()
    offsets = np.cumsum([0] + [len(x.encode()) for x in lines])
    ids1, off1 = utf8_tok.encode_utf8_batch(np.frombuffer(data, np.uint8), offsets)
    ids3, off3 = utf8_tok.encode_utf8_batch(np.frombuffer(data, np.uint8), offsets, num_threads=3)
    assert np.array_equal(ids1, ids3) and np.array_equal(off1, off3)
    assert np.array_equal(ids1, np.concatenate(one))


@pytest.mark.parametrize("path", ["inline split", "regex split", "superbpe"])
@pytest.mark.parametrize("bos_id, eos_id", [(None, 1), (0, 1), (2, None), (None, None)])
def test_kernel_writes_bos_and_eos_around_every_document(tokenizers_by_substrate, multilingual_lines, path,
                                                         bos_id, eos_id):
    """encode_utf8_batch(bos_id=, eos_id=) gives each document [BOS] + its ids + [EOS],
    as a plain walk over encode_ordinary builds it, empty documents included, for the
    inline split, the regex path (chunk ends from outside) and SuperBPE's stage 2, on 1
    and 3 threads."""
    from _helpers import superbpe_from_plain

    from ube_stream import Tokenizer

    plain = tokenizers_by_substrate["ube"]
    lines = multilingual_lines[:300]
    if path == "regex split":
        tok = Tokenizer(substrate="ube", merges=plain.merges, special_tokens=SPECIALS,
                        pattern=r"regex:\p{L}+|\s+|[^\p{L}\s]+")
    elif path == "superbpe":
        tok = superbpe_from_plain(plain, lines[:100])
    else:
        tok = plain
    docs = [""] + lines[:40] + ["", ""] + lines[40:]
    data = np.frombuffer("".join(docs).encode(), np.uint8)
    offsets = np.cumsum([0] + [len(d.encode()) for d in docs])
    want, want_offsets = [], [0]
    for doc in docs:
        want += [bos_id] * (bos_id is not None) + tok.encode_ordinary(doc).tolist() + [eos_id] * (eos_id is not None)
        want_offsets.append(len(want))
    for threads in (1, 3):
        ids, token_offsets = tok.encode_utf8_batch(data, offsets, num_threads=threads, bos_id=bos_id, eos_id=eos_id)
        assert ids.dtype == np.uint32 and ids.tolist() == want and token_offsets.tolist() == want_offsets


@pytest.mark.parametrize("bad", [-1, 3000 + len(SPECIALS), 1 << 32, 1.0, True, "1"])
def test_bos_and_eos_must_be_token_ids(utf8_tok, bad):
    data = np.frombuffer(b"ab", np.uint8)
    with pytest.raises(ValueError, match="eos_id must be a token id"):
        utf8_tok.encode_utf8_batch(data, np.array([0, 2]), eos_id=bad)
    with pytest.raises(ValueError, match="bos_id must be a token id"):
        utf8_tok.encode_utf8_batch(data, np.array([0, 2]), bos_id=bad)


def test_special_tokens_only_when_allowed(utf8_tok, tiktoken_encoding):
    """tiktoken's rules: allowed markers become special ids, disallowed ones (default:
    all) raise naming the offset, disallowed_special=() and encode_ordinary give text."""
    from ube_stream.errors import SpecialTokenError

    text = "a<|endoftext|>b<|pad|>"
    eot, pad = utf8_tok.special_tokens["<|endoftext|>"], utf8_tok.special_tokens["<|pad|>"]
    with pytest.raises(SpecialTokenError, match="'<\\|endoftext\\|>' at character offset 1") as info:
        utf8_tok.encode(text)
    assert (info.value.token, info.value.offset, info.value.byte_offset) == ("<|endoftext|>", 1, 1)
    with pytest.raises(ValueError):   # tiktoken refuses the same text the same way
        tiktoken_encoding.encode(text)
    with pytest.raises(SpecialTokenError) as info:
        utf8_tok.encode_batch(["fine", "é<|pad|>"])
    assert (info.value.document, info.value.offset, info.value.byte_offset) == (1, 1, 2)
    plain = utf8_tok.encode(text, disallowed_special=()).tolist()
    assert plain == utf8_tok.encode_ordinary(text).tolist() == tiktoken_encoding.encode_ordinary(text)
    assert eot not in plain and pad not in plain
    assert plain == utf8_tok.encode("a").tolist() + encode_reference(utf8_tok, "<|endoftext|>b<|pad|>")
    assert utf8_tok.decode(plain) == text
    assert [a.tolist() for a in utf8_tok.encode_ordinary_batch([text, "x"])] == [plain, [ord("x")]]
    with pytest.raises(SpecialTokenError, match="<\\|pad\\|>"):   # the one not allowed still raises
        utf8_tok.encode(text, allowed_special={"<|endoftext|>"})
    some = utf8_tok.encode(text, allowed_special={"<|endoftext|>"}, disallowed_special=()).tolist()
    assert some == tiktoken_encoding.encode(text, allowed_special={"<|endoftext|>"}, disallowed_special=())
    assert some.count(eot) == 1 and pad not in some
    full = utf8_tok.encode(text, allowed_special="all").tolist()
    assert full == utf8_tok.encode("a").tolist() + [eot] + utf8_tok.encode("b").tolist() + [pad]
    assert full == encode_reference(utf8_tok, text, "all") == tiktoken_encoding.encode(text, allowed_special="all")
    with pytest.raises(ValueError, match="not a special token"):
        utf8_tok.encode(text, allowed_special={"<s>"})
    with pytest.raises(TypeError):
        utf8_tok.encode(text, disallowed_special="<|pad|>")


def test_tiny_cache_gives_identical_results(docs_rows):
    text = [r["text"] for r in docs_rows]
    tok = train(iter(text), vocab_size=2000, substrate="ube", workers=1, show_progress=False)
    sample = [t[:20000] for t in text]
    expected = tok.encode_batch(sample)
    tok.set_cache(entries=8, bytes=4096)
    got = tok.encode_batch(sample)
    assert all(np.array_equal(a, b) for a, b in zip(expected, got))
    encoder, _ = tok._kernel()
    stats = [encoder.cache_stats(s) for s in range(encoder.num_slots)]
    assert sum(s["sweeps"] for s in stats) > 100
    assert max(s["entries"] for s in stats) <= 8 and max(s["bytes"] for s in stats) <= 4096


def test_invalid_input_is_reported(utf8_tok):
    with pytest.raises(InvalidTextError) as info:
        utf8_tok.encode_batch(["fine", "bad \ud800 here"])
    assert info.value.document == 1 and info.value.offset == 4
    data = np.frombuffer(b"okfine\xff", np.uint8)
    with pytest.raises(InvalidTextError) as info:
        utf8_tok.encode_utf8_batch(data, np.array([0, 2, 7]))
    assert info.value.document == 1 and info.value.offset == 4
    with pytest.raises(TypeError):
        utf8_tok.encode(b"bytes")


def test_other_pattern_uses_precomputed_chunks(docs_rows):
    import tiktoken

    from ube_stream.pretokenizer import CL100K_PATTERN

    custom = f"regex:(?:{CL100K_PATTERN})"  # cl100k's chunks, but not its text: no compiled kernel
    text = [r["text"][:30000] for r in docs_rows]
    tok = train(iter(text), vocab_size=1200, substrate="utf8", pattern=custom, workers=1,
                show_progress=False, special_tokens=[])
    assert tok.pattern_name == "custom"
    enc = tiktoken.Encoding("cl", pat_str=tok.pattern, mergeable_ranks=_mergeable_ranks(tok),
                            special_tokens={})
    sample = [t[:5000] for t in text]
    for t, ids in zip(sample, tok.encode_batch(sample, num_threads=2)):
        assert ids.tolist() == enc.encode_ordinary(t) == encode_reference(tok, t)


# --------------------------------------------------------------------------- existing models

def test_from_hf_reproduces_hf_ids(hf_file, hf_ids, real_texts, tmp_path):
    tok = Tokenizer.from_hf(hf_file)
    sample = real_texts[::3]
    for text, ids, expected in zip(sample, tok.encode_batch(sample), hf_ids[::3]):
        assert ids.tolist() == expected
        assert tok.decode(ids) == text


def test_from_tiktoken_with_its_own_numbering(utf8_tok, real_texts, tmp_path):
    """Ranks that do not put the 256 bytes first: encode returns tiktoken's ids,
    decode takes them, and the id map survives save/load with its fingerprint."""
    import tiktoken
    base = _mergeable_ranks(utf8_tok)
    n_merged = len(base) - 256
    ranks = {t: (i - 256 if i >= 256 else n_merged + 3 * i) for t, i in base.items()}  # bytes last, spread
    specials = {"<|endoftext|>": 5000, "<|fim|>": 4999}
    enc = tiktoken.Encoding("perm", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens=specials)
    tok = Tokenizer.from_tiktoken(ranks, "gpt2", specials)
    assert tok.special_tokens == {"<|fim|>": 4999, "<|endoftext|>": 5000}
    assert tok.vocab_size == 5001
    sample = real_texts[::3]
    for text, ids in zip(sample, tok.encode_batch(sample)):
        assert ids.tolist() == enc.encode_ordinary(text)
    mixed = "x<|endoftext|>y<|fim|>"
    assert tok.encode(mixed, allowed_special="all").tolist() == enc.encode(mixed, allowed_special="all")
    assert tok.decode(enc.encode(mixed, allowed_special="all")) == mixed
    path = tmp_path / "perm.json"
    tok.save(path)
    again = Tokenizer.load(path)
    assert again.fingerprint == tok.fingerprint
    assert again.encode(sample[0]).tolist() == enc.encode_ordinary(sample[0])
    ranks_file = tmp_path / "perm.tiktoken"
    import base64
    ranks_file.write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks.items()))
    assert Tokenizer.from_tiktoken(ranks_file, "gpt2", specials).fingerprint == tok.fingerprint
    symbols, offsets = tok.expansion_table()
    assert offsets.shape == (5002,)
    some = enc.encode_ordinary("expansion table")
    assert b"".join(bytes(symbols[offsets[i]:offsets[i + 1]].astype(np.uint8)) for i in some) == b"expansion table"


def test_trained_file_format_unchanged(utf8_tok, tmp_path):
    """No id map for trained tokenizers: the file and fingerprint keep their layout."""
    path = tmp_path / "t.json"
    utf8_tok.save(path)
    assert '"id_map"' not in path.read_text()
    assert Tokenizer.load(path) == utf8_tok and utf8_tok.id_map is None


# --------------------------------------------------------------------------- CLI

def _run_cli(argv, stdin_text=None, monkeypatch=None):
    from ube_stream.cli.codec import register

    parser = argparse.ArgumentParser(prog="ube")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    if stdin_text is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin_text))
    out = io.StringIO()
    with redirect_stdout(out):
        code = args.func(args)
    return code, out.getvalue()


def test_cli_encode_decode_explain(tokenizers_by_substrate, tmp_path, monkeypatch):
    from ube_stream.cli.codec import explain_tokens

    tok = tokenizers_by_substrate["ube"]
    path = tmp_path / "ube.json"
    tok.save(path)
    text = "Debian 性能 😀"
    code, out = _run_cli(["encode-text", "--tokenizer", str(path), text])
    assert code == 0 and [int(x) for x in out.split()] == tok.encode(text).tolist()
    code, out2 = _run_cli(["encode-text", "--tokenizer", str(path), "-"], text, monkeypatch)
    assert out2 == out
    code, back = _run_cli(["decode-ids", "--tokenizer", str(path), *out.split()])
    assert code == 0 and back == text + "\n"
    code, back = _run_cli(["decode-ids", "--tokenizer", str(path), "-"], out, monkeypatch)
    assert back == text + "\n"
    # explain on a tokenizer small enough to work out by hand: "性能 性能" has the chunks
    # [295,352,509,384] and [32,295,352,509,384]; (295,352) 512, then (509,384) < (512,509)
    # 513, then (512,513) 514; vocab 512 + 3 + 1 special = 516
    small = train(iter(["性能 性能"]), vocab_size=1000, substrate="ube", workers=1, show_progress=False)
    assert small.merges == [(295, 352), (509, 384), (512, 513)]
    # a: 97; " 性能": 32 (Ġ), 514; 😀: its UTF-16LE bytes 3D D8 00 DE, each a token that holds
    # part of a character; the special; é: C3 A9 (Ã ©), each part of a character.  UTF-16 byte
    # symbols are named (they are invisible Private Use characters U+E100 + byte)
    assert explain_tokens(small, "a 性能😀<|endoftext|>é") == (
        "tokens (ube, vocab 516): 10\n"
        "     #       id  symbols                   text\n"
        "     0       97  a                         'a'\n"
        "     1       32  Ġ                         ' '\n"
        "     2      514  <U+E127><U+E160><U+E1FD><U+E180>  '性能'\n"
        "     3      317  <U+E13D>                  <U3D>\n"
        "     4      472  <U+E1D8>                  <UD8>\n"
        "     5      256  <U+E100>                  <U00>\n"
        "     6      478  <U+E1DE>                  <UDE>\n"
        "     7      515  <|endoftext|>             <|endoftext|> (special)\n"
        "     8      195  Ã                         <C3>\n"
        "     9      169  ©                         <A9>\n"
    )


# ------------------------------------------------------------------ the kernels' status convention

def test_encode_kernels_return_status_and_write_err(utf8_tok):
    from ube_stream.errors import STATUS_INVALID_UTF8, err_buffer

    encoder, _ = utf8_tok._kernel()
    err = err_buffer()
    data = np.frombuffer(b"okfine\xff", np.uint8)
    assert encoder.encode_utf8(data, np.array([0, 2, 7]), 0, err) == (STATUS_INVALID_UTF8, None, None)
    assert list(err) == [6, 1]  # absolute byte, document
    status, ids, token_offsets = encoder.encode_utf8(data, np.array([0, 2, 6]), 0, err)
    assert status == 0 and token_offsets[-1] == len(ids) and list(err) == [6, 1]
    data = np.frombuffer(b"xyab\xffc", np.uint8)  # precomputed chunks route the bad byte
    status, ids, token_offsets = encoder.encode_chunks(data, np.array([0, 2, 6]), np.array([2, 6]),
                                                       np.array([0, 1, 2]), 0, err)
    assert (status, ids, token_offsets, list(err)) == (STATUS_INVALID_UTF8, None, None, [4, 1])
    assert not hasattr(encoder, "clear_cache")


def test_uint32_id_outside_the_vocabulary_names_its_position(utf8_tok):
    with pytest.raises(SymbolDecodeError) as info:  # the kernel's range check, through check_status
        utf8_tok.decode(np.array([5, 6, utf8_tok.vocab_size], np.uint32))
    assert info.value.position == 2 and "token id" in str(info.value) and "position 2" in str(info.value)
    assert isinstance(info.value, ValueError)


# --------------------------------------------------------------------------- slices of huge documents

#: text where pre-tokenizer chunks run long and cuts are tempting: whitespace runs with
#: newlines inside (\s*[\r\n]+ backtracks), "/" after newlines (o200k's [\r\n/]*), spaces
#: that are not U+0020, contractions, number runs, CJK after newlines, case runs
_SLICE_PIECES = ["the ", " des", "x  \n  y", "\n\n   \n", "a \n/b", "\n中文", "\n\u3000x", "\n\u00a0y",
                 "it's", " DON'T", "12345 ", "7\n8", "\r\n", "ÉCOLE école", "\t", " ", "\n", "😀 ",
                 "'ll ", "Дебиан\n", "//", "a/b", " 1", "ſ'S"]


def _sliced(tok, slice_bytes):
    """A copy of ``tok`` whose kernel splits documents ``slice_bytes`` at a time."""
    other = Tokenizer.from_json(tok.to_json(), trust_pattern=True)
    if tok.id_map is not None:
        other._set_id_map(tok.id_map)
    other.slice_bytes = slice_bytes
    return other


@pytest.fixture(scope="module")
def tiktoken_pattern_toks(utf8_tok):
    """The trained utf8 vocabulary under tiktoken's patterns (the cl100k/llama3/o200k
    kernels), beside tiktoken Encodings with the same ranks and pattern."""
    import tiktoken

    from ube_stream.pretokenizer import resolve_pattern

    ranks = _mergeable_ranks(utf8_tok)
    out = {}
    for name in ("cl100k", "llama3", "o200k"):
        tok = Tokenizer.from_tiktoken(ranks, name)
        out[name] = (tok, tiktoken.Encoding(f"ube-{name}", pat_str=resolve_pattern(name)[1],
                                            mergeable_ranks=ranks, special_tokens={}))
    out["gpt2"] = (utf8_tok, tiktoken.Encoding("ube-gpt2", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                                               special_tokens={}))
    return out


@pytest.mark.parametrize("name", ["gpt2", "cl100k", "llama3", "o200k"])
def test_slices_give_the_ids_of_one_pass(tiktoken_pattern_toks, docs_rows, name):
    # every safe cut taken (slice_bytes=1) and a few sizes: tiktoken's ids on real text
    tok, encoding = tiktoken_pattern_toks[name]
    texts = [r["text"][:30000] for r in docs_rows[::4]] + ["".join(_SLICE_PIECES) * 40]
    expected = [encoding.encode_ordinary(t) for t in texts]
    for slice_bytes in (1, 7, 4096):
        got = _sliced(tok, slice_bytes).encode_ordinary_batch(texts)
        for i, (a, b) in enumerate(zip(got, expected)):
            assert a.tolist() == b, f"slice_bytes={slice_bytes}: text {i} {texts[i][:40]!r} differs"


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(_SLICE_PIECES), max_size=40).map("".join))
def test_slices_hypothesis(tiktoken_pattern_toks, text):
    for name in ("cl100k", "o200k", "gpt2"):
        tok, encoding = tiktoken_pattern_toks[name]
        sliced = tok.__dict__.setdefault("_test_sliced", _sliced(tok, 1))
        assert sliced.encode_ordinary(text).tolist() == encoding.encode_ordinary(text), name


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_slices_on_every_substrate_equal_the_reference(tokenizers_by_substrate, docs_rows, substrate):
    tok = tokenizers_by_substrate[substrate]
    texts = [r["text"][:3000] for r in docs_rows[::40]] + ["".join(_SLICE_PIECES) * 5]
    got = _sliced(tok, 1).encode_ordinary_batch(texts)
    for text, ids in zip(texts, got):
        assert ids.tolist() == encode_reference(tok, text)


def test_invalid_utf8_position_survives_slicing(utf8_tok):
    data = ("word " * 50).encode() + b"\xff" + b" tail"
    tok = _sliced(utf8_tok, 3)
    with pytest.raises(InvalidTextError) as info:
        tok.encode_utf8_batch(np.frombuffer(data, np.uint8), np.array([0, len(data)]))
    assert info.value.offset == 250 and info.value.document == 0


# --------------------------------------------------------------------------- pair table, chunk cache, batch input

def _shifted(tok, shift):
    """Merges and results of ``tok`` with every merged id moved up by ``shift``."""
    base = tok.base_size

    def up(i):
        return i if i < base else i + shift

    merges = np.array([(up(a), up(b)) for a, b in tok.merges], dtype=np.uint32).reshape(-1, 2)
    results = np.array([up(r) for r in tok.merge_results], dtype=np.uint32)
    return merges, results, up


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_ids_past_21_bits_take_the_wide_pair_table_and_agree(tokenizers_by_substrate, real_texts, substrate):
    """A pair packs into one 8-byte slot only while every id and rank fits 21 bits;
    with merged ids moved past 2^21 the encoder takes 16-byte slots and must merge
    the same: equal to the packed encoder and to the reference rule."""
    from ube_stream import _encode
    from ube_stream.pretokenizer import gpt2_class_table
    from ube_stream.substrate import substrate_code

    tok = tokenizers_by_substrate[substrate]
    merges, results, up = _shifted(tok, 1 << 21)
    wide = _encode.Encoder(merges, results, tok.base_size, substrate_code(substrate), gpt2_class_table())
    narrow = _encode.Encoder(np.array(tok.merges, dtype=np.uint32).reshape(-1, 2),
                             np.array(tok.merge_results, dtype=np.uint32), tok.base_size,
                             substrate_code(substrate), gpt2_class_table())
    ranked = [(int(a), int(b), int(r)) for (a, b), r in zip(merges, results)]
    texts = real_texts[:300] + ["的" * 300, "ภาษาไทยเป็นภาษาราชการ" * 9, "😀👍🏽" * 60]
    data = "".join(texts).encode()
    offsets = np.cumsum([0] + [len(t.encode()) for t in texts]).astype(np.int64)
    status, ids_wide, off_wide = wide.encode_utf8(np.frombuffer(data, np.uint8), offsets)
    status2, ids_narrow, off_narrow = narrow.encode_utf8(np.frombuffer(data, np.uint8), offsets)
    assert status == status2 == 0 and np.array_equal(off_wide, off_narrow)
    assert ids_wide.tolist() == [up(i) for i in ids_narrow.tolist()]
    assert ids_wide.max() >= 1 << 21   # the shifted ids were really used
    from ube_stream.substrate import encode_symbols
    for text in texts[-3:] + texts[:20]:
        symbols = encode_symbols(text[:300], substrate).astype(np.uint16)
        assert wide.encode_chunk_symbols(symbols).tolist() == encode_chunk_reference(symbols.tolist(), ranked)


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_results_numbered_against_rank_keep_the_rank_rule(tokenizers_by_substrate, real_texts, substrate):
    """The pair tables hold each merge's result id when results rise with rank (every
    trained or tiktoken vocabulary), its rank otherwise.  Renumber the merged ids in
    reverse rank order (the last merge's result first): the encoder must take the rank
    tables and still give, id for renumbered id, the ids of the rising numbering, and
    the reference rule's ids, in both merge paths (min-scan and heap)."""
    from ube_stream import _encode
    from ube_stream.pretokenizer import gpt2_class_table
    from ube_stream.substrate import encode_symbols, substrate_code

    tok = tokenizers_by_substrate[substrate]
    base, n = tok.base_size, len(tok.merges)
    assert tok.merge_results == list(range(base, base + n))  # rising: the result-id tables

    def down(i):
        return i if i < base else 2 * base + n - 1 - i

    merges = np.array([(down(a), down(b)) for a, b in tok.merges], dtype=np.uint32).reshape(-1, 2)
    results = np.array([down(r) for r in tok.merge_results], dtype=np.uint32)
    assert (np.diff(results.astype(np.int64)) < 0).all()
    falling = _encode.Encoder(merges, results, base, substrate_code(substrate), gpt2_class_table())
    rising = _encode.Encoder(np.array(tok.merges, dtype=np.uint32).reshape(-1, 2),
                             np.array(tok.merge_results, dtype=np.uint32), base,
                             substrate_code(substrate), gpt2_class_table())
    texts = real_texts[:300] + ["的" * 300, "ภาษาไทยเป็นภาษาราชการ" * 9, "aaaaaaaaaa" * 20]
    data = np.frombuffer("".join(texts).encode(), np.uint8)
    offsets = np.cumsum([0] + [len(t.encode()) for t in texts]).astype(np.int64)
    status, ids_falling, off_falling = falling.encode_utf8(data, offsets)
    status2, ids_rising, off_rising = rising.encode_utf8(data, offsets)
    assert status == status2 == 0 and np.array_equal(off_falling, off_rising)
    assert ids_falling.tolist() == [down(i) for i in ids_rising.tolist()]
    assert ids_rising.max() >= base + 100  # merges were really made
    ranked = [(int(a), int(b), int(r)) for (a, b), r in zip(merges, results)]
    for text in texts[-3:] + texts[:20]:
        symbols = encode_symbols(text[:300], substrate).astype(np.uint16)
        assert falling.encode_chunk_symbols(symbols).tolist() == encode_chunk_reference(symbols.tolist(), ranked)


@pytest.mark.parametrize("substrate", slow_after(SUBSTRATES))
def test_cache_grows_and_keeps_every_entry(tokenizers_by_substrate, real_texts, substrate):
    """A chunk cache starts at 4096 slots and doubles at half load: after a corpus of
    many distinct chunks (the table grown several times) a second pass takes every
    chunk from the cache, with the ids of the first pass and of the reference twin
    (long CJK, Thai and emoji chunks included)."""
    import pickle

    tok = pickle.loads(pickle.dumps(tokenizers_by_substrate[substrate]))  # its own, empty caches
    texts = real_texts + ["的一是不了人我在有他这为之大来以个中上们" * 20, "ภาษาไทยเป็นภาษาราชการ" * 12,
                          "👩‍👩‍👧‍👦🏳️‍🌈" * 40, "데비안데비안" * 40]
    first = tok.encode_ordinary_batch(texts)
    encoder, _ = tok._kernel()
    (before,) = [encoder.cache_stats(s) for s in range(encoder.num_slots) if encoder.cache_stats(s)["misses"]]
    assert before["entries"] > 4 * 4096 and before["sweeps"] == 0
    second = tok.encode_ordinary_batch(texts)
    after = max((encoder.cache_stats(s) for s in range(encoder.num_slots)), key=lambda st: st["entries"])
    assert after["misses"] == before["misses"] and after["hits"] > before["hits"]
    assert all(np.array_equal(a, b) for a, b in zip(first, second))
    for i in list(range(0, len(texts) - 4, 97)) + list(range(len(texts) - 4, len(texts))):
        assert first[i].tolist() == encode_reference(tok, texts[i]), i


def test_freed_outputs_are_kept_for_later_calls_and_never_shared(utf8_tok, tiktoken_encoding, real_texts):
    """A call's output (256 KiB and more) that numpy frees is kept for a later call's
    output (``_encode.output_buffers_kept``), so a warm call writes into pages it has
    written before.  A kept buffer serves one call at a time: arrays still alive are
    never written, calls from several threads get tiktoken's ids, small outputs are
    freed, and what is kept stays within its bound (64 MiB)."""
    import threading

    from ube_stream import _encode

    tok = utf8_tok
    want = [np.asarray(ids, np.uint32) for ids in tiktoken_encoding.encode_ordinary_batch(real_texts)]
    assert sum(len(ids) for ids in want) * 4 >= 256 << 10   # an output the pool keeps

    def same(got):
        return len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))

    _encode.drop_output_buffers()   # whatever earlier tests left kept
    assert _encode.output_buffers_kept() == 0
    held = tok.encode_ordinary_batch(real_texts)
    assert same(held) and _encode.output_buffers_kept() == 0
    alive = [tok.encode_ordinary_batch(real_texts) for _ in range(3)]   # each its own buffer
    assert all(same(got) for got in alive) and same(held)
    del alive
    freed = _encode.output_buffers_kept()
    assert freed > 0 and freed <= 64 << 20
    again = tok.encode_ordinary_batch(real_texts)            # takes one of them
    assert _encode.output_buffers_kept() < freed and same(again) and same(held)
    del again
    small = tok.encode_ordinary_batch(["abc"])
    kept = _encode.output_buffers_kept()
    del small
    assert _encode.output_buffers_kept() == kept              # a small output is freed, not kept

    failures = []

    def worker():
        for _ in range(3):
            got = tok.encode_ordinary_batch(real_texts, num_threads=2)
            if not same(got):
                failures.append("ids differ")
    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures and same(held)
    assert _encode.output_buffers_kept() <= 64 << 20
    _encode.drop_output_buffers()
    assert _encode.output_buffers_kept() == 0 and same(held)
    tok.encode_ordinary_batch(real_texts)   # freed at once, and kept again
    assert _encode.output_buffers_kept() > 0
    # a forked worker (the local executor forks) inherits the kept buffers and uses them
    del held
    assert _encode.output_buffers_kept() > 0
    pid = os.fork()
    if pid == 0:   # the child: exit status 0 only with tiktoken's ids from an inherited buffer
        ok = same(tok.encode_ordinary_batch(real_texts))
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_one_thread_after_two_gets_the_warmest_cache(utf8_tok, multilingual_lines):
    """Each encoding thread takes a cache slot; a single-threaded call takes the
    warmest free one, so after a 2-thread call (two slots, each warmed on half the
    documents) a 1-thread call on the same documents finds every chunk cached."""
    import pickle

    tok = pickle.loads(pickle.dumps(utf8_tok))
    lines = multilingual_lines[:3000]
    encoder, _ = tok._kernel()

    def misses():
        return sum(encoder.cache_stats(s)["misses"] for s in range(encoder.num_slots))

    for _ in range(3):
        tok.encode_ordinary_batch(lines, num_threads=1)
        tok.encode_ordinary_batch(lines, num_threads=2)
        seen = misses()
        tok.encode_ordinary_batch(lines, num_threads=1)
        assert misses() == seen


def test_batch_input_is_joined_in_one_buffer(utf8_tok):
    """utf8_join: the documents' UTF-8 back to back with n + 1 offsets (str subclasses,
    empty documents, non-ASCII); a lone surrogate or a non-str is named by encode_batch."""
    from ube_stream import _encode

    class Text(str):
        pass

    texts = ["", "abc", Text("Дебиан"), "", "的😀", "\x00"]
    data, offsets = _encode.utf8_join(texts)
    assert bytes(data) == b"".join(t.encode() for t in texts)
    assert offsets.tolist() == np.cumsum([0] + [len(t.encode()) for t in texts]).tolist()
    assert _encode.utf8_join([])[1].tolist() == [0]
    got = utf8_tok.encode_ordinary_batch(texts)
    assert [g.tolist() for g in got] == [utf8_tok.encode_ordinary(str(t)).tolist() for t in texts]
    with pytest.raises(TypeError, match="document 2 is a bytes"):
        utf8_tok.encode_ordinary_batch(["a", "b", b"c"])
    with pytest.raises(InvalidTextError) as info:
        utf8_tok.encode_ordinary_batch(["a", "b", "c\udfff"])
    assert info.value.document == 2 and info.value.offset == 1


@pytest.mark.parametrize("substrate", ["ube", "utf8", "utf16"])
def test_texts_read_in_place_equal_the_joined_buffer(tokenizers_by_substrate, real_texts, substrate):
    """encode_batch reads each str's UTF-8 in place (Encoder.encode_texts); the ids and
    token offsets equal encode_utf8_batch on the joined buffer, with BOS/EOS, for any
    thread count, and stay equal while a slot's kept buffers change size between calls:
    a huge chunk (past what a slot keeps), a document of several slices, then small
    documents again."""
    from ube_stream import _encode
    from ube_stream._reference import encode_reference

    tok = tokenizers_by_substrate[substrate]
    huge_chunk = "的" * 70_000  # one chunk of 140k-210k symbols
    several_slices = " ".join(real_texts) * (1 + (3 * tok.slice_bytes) // max(1, len(" ".join(real_texts))))
    batches = [real_texts, [huge_chunk, "abc"], [several_slices[: 3 * tok.slice_bytes]], real_texts[:50],
               ["", "x", ""], []]
    encoder, slots = tok._kernel()
    for texts in batches:
        data, offsets = _encode.utf8_join(texts)
        ids, token_offsets = tok.encode_utf8_batch(data, offsets, eos_id=0, bos_id=1)
        slot = slots.get()
        try:
            status, in_place, in_place_offsets = encoder.encode_texts(texts, 0, -1, slot, None, 1, 0)
        finally:
            slots.put(slot)
        assert status == 0
        assert np.array_equal(in_place, ids) and np.array_equal(in_place_offsets, token_offsets)
        for threads in (1, 2, 3):
            got = tok.encode_ordinary_batch(texts, num_threads=threads)
            assert len(got) == len(texts)
            want = tok.encode_utf8_batch(data, offsets)
            assert np.array_equal(np.concatenate(got) if got else np.zeros(0, np.uint32), want[0])
    for text in real_texts[:20] + ["abc 的的 x"]:
        assert tok.encode_ordinary_batch([text])[0].tolist() == encode_reference(tok, text)
    slot = slots.get()
    try:
        status, sub, sub_offsets = encoder.encode_texts(real_texts, 3, 7, slot)
        assert np.array_equal(sub, np.concatenate(tok.encode_ordinary_batch(real_texts[3:7])))
        assert sub_offsets.shape == (5,)
        with pytest.raises(ValueError, match="not a range"):
            encoder.encode_texts(real_texts, 5, 2, slot)
        with pytest.raises(TypeError, match="document 1 is a bytes"):
            encoder.encode_texts(["a", b"b"], 0, -1, slot)
        with pytest.raises(UnicodeEncodeError):
            encoder.encode_texts(["a", "\udc00"], 0, -1, slot)
    finally:
        slots.put(slot)
    with pytest.raises(InvalidTextError) as info:  # the public call names the document, with threads too
        tok.encode_ordinary_batch(["a", "b", "cd\ud800"], num_threads=2)
    assert info.value.document == 2 and info.value.offset == 2
