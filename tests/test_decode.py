"""The decode kernels (ube_stream._decode) behind Tokenizer.decode and
Tokenizer.decode_bytes, against independent truth: the readable twin
(_reference.decode_reference), tiktoken's decode_bytes with the same ranks,
Python's codecs (utf-8 / utf-16-le with "replace"), and the stream decoder.
"""
from __future__ import annotations

from array import array

import numpy as np
import pytest
from _helpers import openai_ranks, slow_after
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ube_stream import Tokenizer, _decode, train
from ube_stream._reference import decode_reference
from ube_stream.errors import STATUS_BAD_ID, STATUS_INVALID_SYMBOLS, SymbolDecodeError, err_buffer
from ube_stream.substrate import SUBSTRATES, as_id_array, decode_symbols

SPECIALS = ("<|endoftext|>", "<|pad|>")


@pytest.fixture(scope="module")
def toks(docs_rows, unicode_rows):
    texts = [r["text"] for r in docs_rows[:60]] + [r["text"] for r in unicode_rows[:200]]
    return {s: train(iter(texts), vocab_size=900 if s == "ube" else 700, substrate=s, special_tokens=SPECIALS,
                     workers=1, show_progress=False) for s in SUBSTRATES}


@pytest.fixture(scope="module")
def sample_texts(docs_rows, parallel_rows, unicode_rows):
    return ([r["text"] for r in docs_rows[::7]] + [r["text"] for r in parallel_rows[::50]]
            + [r["text"] for r in unicode_rows[::5]])


def _reference_or_none(tok, ids, errors="strict"):
    try:
        return decode_reference(tok, ids, errors=errors)
    except (UnicodeDecodeError, SymbolDecodeError):
        return None


# --------------------------------------------------------------------------- valid ids

@pytest.mark.parametrize("substrate", slow_after(SUBSTRATES))
def test_decode_and_decode_bytes_round_trip_real_text(toks, sample_texts, substrate):
    tok = toks[substrate]
    for text in sample_texts:
        ids = tok.encode(text + "<|pad|>" + text[:5], allowed_special="all")
        expected = text + "<|pad|>" + text[:5]
        assert tok.decode(ids) == expected
        assert tok.decode(ids.tolist()) == expected
        assert tok.decode_bytes(ids) == expected.encode("utf-8")  # utf16 too: UTF-8 of the text
        assert tok.decode_bytes(ids.tolist()) == expected.encode("utf-8")
        assert tok.decode_bytes(tuple(ids.tolist())) == expected.encode("utf-8")
        assert tok.decode_bytes(iter(ids.tolist())) == expected.encode("utf-8")
        assert tok.decode_bytes(ids.astype(np.int64)) == expected.encode("utf-8")


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_empty_input(toks, substrate):
    tok = toks[substrate]
    for empty in ([], (), np.zeros(0, np.uint32), np.zeros(0, np.int64), np.zeros((0, 3), np.int64), iter([])):
        assert tok.decode_bytes(empty) == b""
    assert tok.decode([]) == ""


def test_every_token_alone_equals_the_reference(toks):
    """Each token by itself: the table's bytes and kinds (raw, partial, symbols)."""
    for substrate, tok in toks.items():
        for token_id in range(tok.vocab_size):
            expected = _reference_or_none(tok, [token_id])
            if expected is None:
                with pytest.raises(SymbolDecodeError):
                    tok.decode_bytes([token_id])
            else:
                assert tok.decode_bytes([token_id]) == expected.encode("utf-8"), (substrate, token_id)
            replaced = decode_reference(tok, [token_id], errors="replace")
            assert tok.decode_bytes([token_id], errors="replace") == replaced.encode("utf-8")


# --------------------------------------------------------------------------- invalid ids

@pytest.mark.parametrize("substrate", slow_after(SUBSTRATES))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_arbitrary_ids_agree_with_the_reference(toks, substrate, data):
    """Arbitrary ids (partial characters, UTF-16 halves, lone surrogates, alphabet
    switches, specials in between): strict equals the twin or raises at a position
    inside the ids; replace equals the twin (Python's codecs on each buffer)."""
    tok = toks[substrate]
    small = st.integers(0, tok.base_size - 1)  # base symbols: the most partial characters
    ids = data.draw(st.lists(st.one_of(small, st.integers(0, tok.vocab_size - 1)), max_size=24))
    expected = _reference_or_none(tok, ids)
    if expected is None:
        for call in (tok.decode, tok.decode_bytes):
            with pytest.raises(SymbolDecodeError) as info:
                call(ids)
            assert 0 <= info.value.position < len(ids)
    else:
        assert tok.decode(ids) == expected
        assert tok.decode_bytes(np.asarray(ids, np.uint32)) == expected.encode("utf-8")
    replaced = decode_reference(tok, ids, errors="replace")
    assert tok.decode(ids, errors="replace") == replaced
    assert tok.decode_bytes(ids, errors="replace") == replaced.encode("utf-8")


def test_partial_characters_and_lone_surrogates_hand_worked(toks):
    utf8, ube, utf16 = toks["utf8"], toks["ube"], toks["utf16"]
    # utf8: 'é' is C3 A9; a lone lead byte, a stray continuation byte, a cut before a special
    assert utf8.decode_bytes([0xC3, 0xA9]) == "é".encode()
    for ids in ([0xC3], [0xA9], [0xC3, utf8.special_tokens["<|pad|>"], 0xA9], [0xE4, 0xB8]):
        with pytest.raises(SymbolDecodeError):
            utf8.decode_bytes(ids)
        raw = b"".join(bytes(utf8.token_expansion(i)) if i < 256 else b"<|pad|>" for i in ids)
        assert utf8.decode_bytes(ids, errors="replace") == raw.decode("utf-8", "replace").encode()
    # utf16: U+1F600 is D83D DE00, little-endian bytes 3D D8 00 DE
    assert utf16.decode_bytes([0x3D, 0xD8, 0x00, 0xDE]) == "😀".encode()
    for units in ([0x3D, 0xD8], [0x00, 0xDE], [0x3D, 0xD8, 0x41, 0x00], [0x41]):  # lone halves, odd byte
        with pytest.raises(SymbolDecodeError):
            utf16.decode_bytes(units)
        assert utf16.decode(units, errors="replace") == bytes(units).decode("utf-16-le", "replace")
        assert utf16.decode_bytes(units, errors="replace") == bytes(units).decode("utf-16-le", "replace").encode()
    # ube: 性 U+6027 is the UTF-16 ids 256+0x27, 256+0x60; a switch to UTF-8 in between cuts it
    assert ube.decode_bytes([256 + 0x27, 256 + 0x60]) == "性".encode()
    assert ube.decode_bytes([256 + 0x3D, 256 + 0xD8, 256 + 0x00, 256 + 0xDE, 0x41]) == "😀A".encode()
    for ids in ([256 + 0x27], [256 + 0x27, 0x41, 256 + 0x60], [256 + 0x3D, 256 + 0xD8],
                [256 + 0x00, 256 + 0xDE], [256 + 0x27, ube.special_tokens["<|pad|>"], 256 + 0x60]):
        with pytest.raises(SymbolDecodeError):
            ube.decode_bytes(ids)
        assert ube.decode(ids, errors="replace") == decode_reference(ube, ids, errors="replace")


def test_bad_ids_name_their_position(toks):
    tok = toks["ube"]
    for ids, position in (([5, tok.vocab_size], 1), ([-1], 0), ([3, 4, 1 << 40], 2),
                          (np.array([7, -3], np.int64), 1), (np.array([1, tok.vocab_size], np.uint32), 1)):
        for call in (tok.decode, tok.decode_bytes):
            with pytest.raises(SymbolDecodeError, match=f"position {position}") as info:
                call(ids)
            assert info.value.position == position
    with pytest.raises(TypeError, match="item 1"):
        tok.decode_bytes([1, "2"])
    with pytest.raises(TypeError, match="integers"):
        tok.decode_bytes(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="1-D"):
        tok.decode_bytes(np.ones((2, 2), np.int64))
    with pytest.raises(ValueError, match="errors"):
        tok.decode_bytes([1], errors="ignore")
    assert tok.decode_bytes([np.int64(72), True]) == tok.decode([72, 1]).encode()  # ints of any kind


class _Id(int):
    """An int subclass: not read straight from the object, converted the general way."""


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_list_edges_decode_as_the_array_does(toks, substrate):
    """Lists and tuples decode like the uint32 array of the same ids, whatever their
    items: exact ints, bools, int subclasses, numpy ints; and name the same position for
    negative ints, ints at or past 2**30 and 2**32 (outside the vocabulary) and items
    that are not integers; empty sequences give empty text."""
    tok = toks[substrate]
    ids = tok.encode_ordinary("Grüße, 世界! 😀 text")
    plain = ids.tolist()
    for call in (tok.decode, tok.decode_bytes):
        want = call(ids)
        assert call(plain) == call(tuple(plain)) == want
        mixed = [_Id(plain[0]), np.int32(plain[1])] + plain[2:]
        assert call(mixed) == want
        assert call([]) == call(()) == call(np.zeros(0, np.uint32)) == want[:0]
        assert call([True, False]) == call(np.array([1, 0], np.uint32))
        for bad, position in (([plain[0], -1], 1), ([1 << 30], 0), ([plain[0], 1 << 31], 1),
                              ([plain[0], plain[1], 1 << 32], 2), ([_Id(tok.vocab_size)], 0),
                              ((plain[0], tok.vocab_size + 5), 1)):
            with pytest.raises(SymbolDecodeError, match=f"position {position}") as info:
                call(bad)
            assert info.value.position == position
        for bad, position in (([plain[0], 2.5], 1), ([None], 0), ((plain[0], plain[1], "3"), 2)):
            with pytest.raises(TypeError, match=f"item {position}"):
                call(bad)


# --------------------------------------------------------------------------- decode from a list

@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_list_tuple_and_array_agree_on_real_text(toks, sample_texts, substrate):
    """A list or tuple (decode_sequence, one pass) gives what the uint32 array gives
    and what Python's codec gives for the text, for one long multilingual document
    (many 256-id blocks) and each document alone; ``errors="replace"`` on ids that do
    not decode gives the reference twin's text either way."""
    tok = toks[substrate]
    texts = sample_texts[:40]
    whole = "<|pad|>".join(texts)
    for text in [whole] + texts:
        ids = tok.encode(text, allowed_special="all")
        plain = ids.tolist()
        want = text.encode("utf-8")  # the codec's bytes of the text: independent of the decoder
        assert tok.decode_bytes(plain) == tok.decode_bytes(tuple(plain)) == tok.decode_bytes(ids) == want
        assert tok.decode(plain) == tok.decode(tuple(plain)) == tok.decode(ids) == text
    rng = np.random.default_rng(11)
    for _ in range(40):
        ids = rng.integers(0, tok.vocab_size, size=int(rng.integers(1, 600))).tolist()
        truth = _reference_or_none(tok, ids, errors="replace")
        assert tok.decode(ids, errors="replace") == tok.decode(np.asarray(ids, np.uint32), errors="replace") == truth
        assert tok.decode_bytes(tuple(ids), errors="replace") == truth.encode("utf-8")


@pytest.mark.parametrize("substrate", ["ube", "utf16"])
def test_utf16_sequences_across_list_blocks(toks, substrate):
    """A character spelt by several base-symbol tokens decodes the same wherever the
    list's 256-id blocks cut it: the open UTF-16 sequence is carried from block to
    block (hand-worked: U+1F600 is D83D DE00, U+4E16 is 4E16)."""
    tok = toks[substrate]
    high = 256 if substrate == "ube" else 0
    ascii_a = tok.encode_ordinary("a").tolist()
    assert len(ascii_a) == 1 and tok.decode(ascii_a) == "a"
    emoji = [high + 0x3D, high + 0xD8, high + 0x00, high + 0xDE]  # UTF-16LE bytes of U+1F600
    if substrate == "utf16":
        ascii_a = [ord("a"), 0]  # utf16: the base symbols are the UTF-16LE bytes
    for pad in range(250, 262):
        ids = ascii_a * (pad // len(ascii_a)) + emoji + [high + 0x16, high + 0x4E] + ascii_a
        text = "a" * (pad // len(ascii_a)) + "\U0001F600\u4e16a"
        assert tok.decode(ids) == tok.decode(tuple(ids)) == tok.decode(np.asarray(ids, np.uint32)) == text
        cut = ids[:len(ids) - len(ascii_a) - 4]  # ends after the high surrogate
        with pytest.raises(SymbolDecodeError) as info:
            tok.decode(cut)
        with pytest.raises(SymbolDecodeError) as array_info:
            tok.decode(np.asarray(cut, np.uint32))
        assert str(info.value) == str(array_info.value)
        assert (info.value.position, info.value.offset) == (array_info.value.position, array_info.value.offset)


def _raised(call, ids):
    try:
        call(ids)
    except Exception as exc:  # noqa: BLE001 (the exception is the result)
        return type(exc), str(exc), getattr(exc, "position", None)
    raise AssertionError(f"{ids[:3]}... decoded")


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_list_errors_name_what_the_array_path_names(toks, substrate):
    """Every bad list (an id outside the vocabulary first / in the middle / last,
    across 256-id blocks; negative; >= 2**32; a float, None, a str; an int subclass
    outside the vocabulary) raises the exception of the general conversion + array
    decode, with its message and position, whatever comes after it; the texts are
    the documented ones (hand-written here).  Bools are ints (True is id 1), as for
    numpy; int subclasses and numpy ints decode as their value."""
    tok = toks[substrate]
    limit = tok.vocab_size
    plain = tok.encode_ordinary(" ".join(["Grüße, 世界! 😀 text"] * 60)).tolist()[:600]
    assert len(plain) == 600

    def via_array(ids):  # the general conversion, then the array decode
        return tok.decode_bytes(as_id_array(ids, tok._outside_vocabulary, what="token ids"))

    for call in (tok.decode, tok.decode_bytes):
        for position in (0, 255, 256, 300, 599):
            for value in (limit, limit + 7, -1, 2 ** 32, 2 ** 40, _Id(limit)):
                bad = plain[:position] + [value] + plain[position + 1:]
                want = (SymbolDecodeError, f"token id {int(value)} at position {position} is outside the "
                                           f"vocabulary (0..{limit - 1})", position)
                assert _raised(call, bad) == _raised(call, tuple(bad)) == _raised(via_array, bad) == want
            for value in (2.5, None, "7"):
                bad = plain[:position] + [value] + plain[position + 1:]
                want = (TypeError, f"token ids must be integers; item {position} is {type(value).__name__} "
                                   f"{value!r}", None)
                assert _raised(call, bad) == _raised(call, tuple(bad)) == want
        # the conversion's error comes first, as before: a float after an id outside the vocabulary
        bad = plain[:5] + [limit] + plain[6:400] + [1.0] + plain[401:]
        assert _raised(call, bad)[:2] == (TypeError, "token ids must be integers; item 400 is float 1.0")
        ok = call(plain)
        assert call([True] + plain, errors="replace") == call([1] + plain, errors="replace")
        assert call(plain[:300] + [_Id(plain[300]), np.uint32(plain[301]), np.int64(plain[302])] + plain[303:]) == ok
        assert call([]) == call(()) == ok[:0]


# --------------------------------------------------------------------------- tiktoken

def test_decode_bytes_equals_tiktoken(sample_texts):
    """cl100k's first 20,000 ranks: the same bytes as tiktoken's decode_bytes for
    real text, and for arbitrary ids where those bytes are UTF-8 (tiktoken returns
    any bytes; ours refuses, or replaces as Python's codec does)."""
    tiktoken = pytest.importorskip("tiktoken")
    from ube_stream.pretokenizer import CL100K_PATTERN

    ranks = openai_ranks("cl100k_base", 20_000)
    tok = Tokenizer.from_tiktoken(ranks, "cl100k", special_tokens={"<|endoftext|>": 20_000})
    enc = tiktoken.Encoding("cl100k_20k", pat_str=CL100K_PATTERN, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": 20_000})
    for text in sample_texts:
        ids = enc.encode(text + "<|endoftext|>", allowed_special="all")
        assert tok.decode_bytes(ids) == enc.decode_bytes(ids) == (text + "<|endoftext|>").encode()
        assert tok.decode(np.asarray(ids, np.uint32)) == enc.decode(ids)
    joined = enc.encode("".join(sample_texts))  # a list of many 256-id blocks (decode_sequence)
    assert len(joined) > 2000
    assert tok.decode_bytes(joined) == tok.decode_bytes(tuple(joined)) == enc.decode_bytes(joined)
    assert tok.decode(joined) == enc.decode(joined)
    rng = np.random.default_rng(7)
    refused = 0
    for _ in range(300):
        ids = rng.integers(0, 20_001, size=rng.integers(1, 10)).tolist()
        truth = enc.decode_bytes(ids)
        try:
            truth.decode("utf-8")
        except UnicodeDecodeError:
            refused += 1
            with pytest.raises(SymbolDecodeError):
                tok.decode_bytes(ids)
        else:
            assert tok.decode_bytes(ids) == truth
        assert tok.decode_bytes(ids, errors="replace") == truth.decode("utf-8", "replace").encode()
        assert tok.decode(ids, errors="replace") == enc.decode(ids, errors="replace")
    assert refused > 10


# --------------------------------------------------------------------------- stream decoder

@pytest.mark.parametrize("substrate", [pytest.param("ube"), pytest.param("utf8", marks=pytest.mark.slow), pytest.param("utf16", marks=pytest.mark.slow)])  # utf8/utf16 with the slow tests
def test_stream_decoder_agrees_with_decode_bytes(toks, sample_texts, substrate):
    tok = toks[substrate]
    rng = np.random.default_rng(3)
    for text in sample_texts[:12]:
        ids = tok.encode(text).tolist()
        decoder = tok.stream_decoder()
        assert "".join(decoder.feed(i) for i in ids).encode() + decoder.flush().encode() == tok.decode_bytes(ids)
    for _ in range(100):
        ids = rng.integers(0, tok.vocab_size, size=rng.integers(1, 10)).tolist()
        decoder = tok.stream_decoder(errors="replace")
        streamed = "".join(decoder.feed(i) for i in ids) + decoder.flush()
        assert streamed.encode() == tok.decode_bytes(ids, errors="replace")


# --------------------------------------------------------------------------- kernels

def test_decode_kernels_return_status_and_write_err(toks):
    tok = toks["utf8"]
    tables = tok._decode_tables()
    token_bytes, entries, symbols, offsets, id_map, special_bytes, special_offsets, code, fast = tables
    err = err_buffer()
    ids = tok.encode("hello world").tolist()
    ids.insert(2, 0xE4)  # a lone UTF-8 lead byte
    internal = np.asarray(ids, np.uint32)
    assert _decode.decode_tokens(fast, internal, True, err) == (STATUS_INVALID_SYMBOLS, None)
    assert list(err) == [-1, -1]  # no position: decode_exact gives it
    err[:] = array("q", [0, 0])
    assert _decode.decode_sequence(fast, ids, True, err) == (STATUS_INVALID_SYMBOLS, None)
    assert list(err) == [-1, -1]
    assert _decode.decode_exact(internal, symbols, offsets, special_bytes, special_offsets, code, err) \
        == (STATUS_INVALID_SYMBOLS, None)
    assert list(err) == [len(tok.token_expansion(ids[0])) + len(tok.token_expansion(ids[1])), 2]
    beyond = np.array([5, 1 << 30], np.uint32)
    assert _decode.decode_tokens(fast, beyond, False, err) == (STATUS_BAD_ID, None) and list(err) == [-1, 1]
    assert _decode.decode_exact(beyond, symbols, offsets, special_bytes, special_offsets, code, err) \
        == (STATUS_BAD_ID, None) and list(err) == [-1, 1]
    assert _decode.decode_tokens(fast, internal[:2], False) == (0, tok.decode(ids[:2]))
    assert _decode.decode_sequence(fast, tuple(ids[:2]), False) == (0, tok.decode(ids[:2]))
    with pytest.raises(ValueError, match="padding"):
        _decode.DecodeTables(token_bytes[:3], entries, symbols, offsets, id_map, code)
    with pytest.raises(ValueError, match="substrate"):
        _decode.DecodeTables(token_bytes, entries, symbols, offsets, id_map, 99)
    with pytest.raises(TypeError, match="list or tuple"):
        _decode.decode_sequence(fast, 5, True)


@pytest.mark.parametrize("length", [0, 1, 255, 256, 257, 600])
def test_decode_sequence_reads_blocks_and_names_the_first_bad_item(toks, length):
    """decode_sequence reads SEQ_BLOCK (256) ids at a time: lists around a block's
    size decode as the array does, and the first item it cannot take (an id outside
    the vocabulary, an item that is not an exact int below 2**30) is named wherever
    it is, before or after a block boundary, also when a later one is bad too."""
    tok = toks["ube"]
    fast = tok._decode_tables()[8]
    ids = tok.encode_ordinary(" ".join(["Grüße 世界 😀 text"] * 200)).tolist()[:length]
    assert len(ids) == length
    for as_bytes in (False, True):
        assert _decode.decode_sequence(fast, ids, as_bytes) == \
            _decode.decode_tokens(fast, np.asarray(ids, np.uint32), as_bytes)
    err = err_buffer()
    for where in sorted({0, length // 2, max(0, length - 1), 255, 256} & set(range(length))):
        for item in (tok.vocab_size, 1 << 30, -1, True, _Id(3), np.uint32(3), 2.0):
            bad = ids[:where] + [item] + ids[where + 1:] + [tok.vocab_size + 1]
            assert _decode.decode_sequence(fast, bad, True, err) == (STATUS_BAD_ID, None)
            assert list(err) == [-1, where]


def test_ids_from_sequence_reads_ints_and_names_the_bad_item():
    out = np.empty(4, np.uint32)
    err = err_buffer()
    assert _decode.ids_from_sequence([0, 1, 2 ** 32 - 1, np.uint16(7)], out, err) == 0
    assert out.tolist() == [0, 1, 2 ** 32 - 1, 7]
    for bad, position in (([1, -1], 1), ([2 ** 32], 0), ([1, 2, "x"], 2), ([1, 2.5], 1), ((3, None), 1)):
        assert _decode.ids_from_sequence(bad, out, err) == STATUS_BAD_ID and list(err) == [-1, position]
    with pytest.raises(ValueError, match="entries"):
        _decode.ids_from_sequence([1, 2, 3, 4, 5], out)


def test_ids_from_sequence_survives_an_index_that_changes_the_list():
    """An item whose __index__ empties the list and refills it (its item array is freed
    and reallocated) while the ids are read: the rest of the ids are read as they
    were when the first such item was met, never from freed memory."""
    class Rewrites:
        def __init__(self, value, target):
            self.value, self.target = value, target

        def __index__(self):
            self.target.clear()
            self.target.extend(range(5000, 105000))
            return self.value

    ids = [1, 2]
    ids += [Rewrites(3, ids), 4, 5, Rewrites(6, ids), 7]
    out = np.empty(7, np.uint32)
    assert _decode.ids_from_sequence(ids, out, err_buffer()) == 0
    assert out.tolist() == [1, 2, 3, 4, 5, 6, 7]
    assert len(ids) == 100000


def test_one_id_check_for_symbols_and_tokens():
    """substrate.decode_symbols and Tokenizer.decode share as_id_array."""
    def on_bad(ids, position):
        return ValueError(f"bad at {position}")

    assert as_id_array([1, 2], on_bad).dtype == np.uint32
    assert as_id_array(np.array([1, 2], np.uint8), on_bad).tolist() == [1, 2]
    with pytest.raises(ValueError, match="bad at 1"):
        as_id_array(np.array([1, -2]), on_bad)
    with pytest.raises(ValueError, match="bad at 0"):
        as_id_array([2 ** 33], on_bad)
    with pytest.raises(SymbolDecodeError, match="offset 1"):
        decode_symbols([65, 600], "ube")
    with pytest.raises(SymbolDecodeError, match="offset 2"):
        decode_symbols([65, 66, -1], "utf8")
    assert decode_symbols((72, 105), "utf8") == "Hi"


@pytest.mark.parametrize("substrate", ["ube", "utf8"])
def test_a_tokenizer_pickles_after_it_has_encoded_and_decoded(toks, sample_texts, substrate):
    """Its compiled encode and decode tables stay behind (kernel objects do not pickle);
    the copy rebuilds them and gives the same ids and text (a tokenizer sent to workers
    after use, as Ray and process pools do)."""
    import pickle

    tok = toks[substrate]
    ids = tok.encode(sample_texts[0])
    assert tok.decode(ids.tolist()) == sample_texts[0]
    copy = pickle.loads(pickle.dumps(tok))
    assert copy.encode(sample_texts[0]).tolist() == ids.tolist()
    assert copy.decode(ids.tolist()) == copy.decode(ids) == sample_texts[0]
