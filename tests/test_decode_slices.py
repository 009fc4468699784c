"""decode(errors="replace") in slices of ids (Tokenizer.decode_slice_ids) and the
one replace decoder under it (substrate.ReplaceDecoder), against independent
truth: the readable twins (_reference.decode_reference / decode_symbols, one
pass over all the ids), Python's codecs on hand-worked bytes, and tiktoken.
Tiny slices put partial characters, halves of surrogate pairs, alphabet
switches and special tokens at every slice end.
"""
from __future__ import annotations

import numpy as np
import pytest
from _helpers import openai_ranks, slow_after
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ube_stream import Tokenizer, train
from ube_stream import _reference as ref
from ube_stream.errors import SymbolDecodeError
from ube_stream.substrate import SUBSTRATES, ReplaceDecoder, decode_symbols

SPECIALS = ("<|endoftext|>", "<|pad|>")


@pytest.fixture(scope="module")
def toks(docs_rows, unicode_rows):
    texts = [r["text"] for r in docs_rows[:20]] + [r["text"] for r in unicode_rows[:120]]
    return {s: train(iter(texts), vocab_size=700 if s == "ube" else 500, substrate=s, special_tokens=SPECIALS,
                     workers=1, show_progress=False) for s in SUBSTRATES}


def _sliced(tok, step):
    tok.decode_slice_ids = step
    return tok


@pytest.fixture(autouse=True)
def _restore_slice(toks):
    yield
    for tok in toks.values():
        tok.__dict__.pop("decode_slice_ids", None)


# --------------------------------------------------------------------------- the symbol decoder

@pytest.mark.parametrize("substrate", slow_after(SUBSTRATES))
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_replace_decoder_is_the_one_pass_twin_however_cut(substrate, data):
    """Symbols cut anywhere (inside a character, between surrogate halves, at an
    alphabet switch) decode to the twin's one pass over all of them."""
    limit = 512 if substrate == "ube" else 256
    # bytes that make partial characters and surrogates likely, and any symbol
    likely = st.sampled_from([0x41, 0xC3, 0xA9, 0xE4, 0xB8, 0x80, 0xF0, 0x9F, 0xD8, 0x3D, 0xDE, 0x00, 0xDC])
    symbol = st.one_of(likely, likely.map(lambda b: b + 256 if substrate == "ube" else b), st.integers(0, limit - 1))
    symbols = data.draw(st.lists(symbol, max_size=40))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(symbols)), max_size=8)))
    decoder = ReplaceDecoder(substrate)
    arr = np.asarray(symbols, np.uint16)
    bounds = [0] + cuts + [len(symbols)]
    text = "".join(decoder.feed(arr[a:b]) for a, b in zip(bounds[:-1], bounds[1:])) + decoder.flush()
    assert text == ref.decode_symbols(symbols, substrate, "replace")
    if symbols:
        assert decode_symbols(symbols, substrate, "replace") == text


def test_replace_decoder_hand_worked_cuts():
    """Each byte fed alone: the codec's own one-pass answer."""
    for substrate, codec, raw in (("utf8", "utf-8", "é€😀".encode() + b"\xe4\xb8" + b"A\xa9\xf0\x9f"),
                                  ("utf16", "utf-16-le", "😀性".encode("utf-16-le") + b"\x3d\xd8A\x00\x00\xde\x41")):
        decoder = ReplaceDecoder(substrate)
        text = "".join(decoder.feed(np.array([b], np.uint16)) for b in raw) + decoder.flush()
        assert text == raw.decode(codec, "replace")
    # ube: 😀 as UTF-16 ids, then a lone high surrogate cut by a UTF-8 'A', then 'é' split
    ids = [256 + b for b in "😀".encode("utf-16-le")] + [256 + 0x3D, 256 + 0xD8, 0x41, 0xC3, 0xA9]
    decoder = ReplaceDecoder("ube")
    text = "".join(decoder.feed(np.array([i], np.uint16)) for i in ids) + decoder.flush()
    assert text == "😀\ufffdAé"
    with pytest.raises(ValueError, match="substrate"):
        ReplaceDecoder("latin1")


# --------------------------------------------------------------------------- tokenizer slices

@pytest.mark.parametrize("substrate", SUBSTRATES)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_sliced_replace_decode_equals_one_pass_twin(toks, substrate, data):
    """Arbitrary ids (base symbols: the most partial characters; specials between)
    with slices of 1..5 ids equal the twin's one pass, as str and as bytes."""
    tok = toks[substrate]
    specials = st.sampled_from(sorted(tok.special_tokens.values()))
    ids = data.draw(st.lists(st.one_of(st.integers(0, tok.base_size - 1), st.integers(0, tok.vocab_size - 1),
                                       specials), max_size=30))
    expected = ref.decode_reference(tok, ids, errors="replace")
    _sliced(tok, data.draw(st.integers(1, 5)))
    assert tok.decode(ids, errors="replace") == expected
    assert tok.decode_bytes(np.asarray(ids, np.uint32), errors="replace") == expected.encode("utf-8")


def test_sliced_replace_hand_worked_partial_characters(toks):
    """A character split across a slice end is one character, not two U+FFFD."""
    utf8, utf16, ube = (_sliced(toks[s], 1) for s in ("utf8", "utf16", "ube"))
    pad = utf8.special_tokens["<|pad|>"]
    # utf8: 'é' = C3 A9 across the end, then a stray A9 (one U+FFFD), a lead cut by a special
    assert utf8.decode([0xC3, 0xA9, 0xA9, 0xE4, pad, 0xB8], errors="replace") == "é\ufffd\ufffd<|pad|>\ufffd"
    # utf16: 😀 = 3D D8 00 DE one byte a slice; a lone high surrogate before 'A'; an odd last byte
    assert utf16.decode([0x3D, 0xD8, 0x00, 0xDE, 0x3D, 0xD8, 0x41, 0x00, 0x41], errors="replace") == \
        bytes([0x3D, 0xD8, 0x00, 0xDE, 0x3D, 0xD8, 0x41, 0x00, 0x41]).decode("utf-16-le", "replace") == \
        "😀\ufffdA\ufffd"
    # ube: 性 = 256+27, 256+60 across the end; a lone low surrogate; a switch to UTF-8 cuts 性
    ids = [256 + 0x27, 256 + 0x60, 256 + 0x00, 256 + 0xDE, 0x41, 256 + 0x27, 0x41, 256 + 0x60]
    assert ube.decode(ids, errors="replace") == "性\ufffdA\ufffdA\ufffd" == \
        ref.decode_reference(ube, ids, errors="replace")
    assert ube.decode_bytes(ids, errors="replace") == "性\ufffdA\ufffdA\ufffd".encode()


@pytest.mark.slow  # hand-worked slice cases and hypothesis cover it in the default suite
def test_sliced_replace_real_text_with_injected_bytes(toks, docs_rows, unicode_rows):
    """Real text's ids with a lone continuation byte every 50 tokens: every slice
    size gives the one-pass answer (the twin, and a single slice)."""
    text = "\n".join(r["text"] for r in docs_rows[20:24]) + "".join(r["text"] for r in unicode_rows[120:160])
    for substrate, tok in toks.items():
        ids = np.asarray(tok.encode(text), np.uint32).copy()
        ids[::50] = 0xA9
        expected = ref.decode_reference(tok, ids.tolist(), errors="replace")
        for step in (1, 7, 64, 1 << 16):
            _sliced(tok, step)
            assert tok.decode(ids, errors="replace") == expected, (substrate, step)


def test_bad_id_after_a_cut_utf16_run_is_named_under_replace(toks):
    """The fast path stops at the cut UTF-16 run; the sliced replace decode still
    names the id outside the vocabulary, as strict does."""
    for substrate in ("ube", "utf16"):
        tok = _sliced(toks[substrate], 2)
        half = 256 + 0x27 if substrate == "ube" else 0x27
        ids = [half, tok.special_tokens["<|pad|>"], 5, 6, tok.vocab_size]
        with pytest.raises(SymbolDecodeError) as info:
            tok.decode(ids, errors="replace")
        assert info.value.position == 4


def test_sliced_replace_with_an_id_map_equals_tiktoken():
    """cl100k's first 3,000 ranks (model ids != internal ids): arbitrary ids in
    slices of 1..3 replace as tiktoken's decode(errors="replace") does."""
    tiktoken = pytest.importorskip("tiktoken")
    from ube_stream.pretokenizer import CL100K_PATTERN

    ranks = openai_ranks("cl100k_base", 3_000)
    tok = Tokenizer.from_tiktoken(ranks, "cl100k", special_tokens={"<|endoftext|>": 3_000})
    assert tok.id_map is not None
    enc = tiktoken.Encoding("cl100k_3k", pat_str=CL100K_PATTERN, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": 3_000})
    rng = np.random.default_rng(11)
    for trial in range(200):
        ids = rng.integers(0, 3_001, size=rng.integers(1, 12)).tolist()
        tok.decode_slice_ids = 1 + trial % 3
        truth = enc.decode_bytes(ids).decode("utf-8", "replace")
        assert tok.decode(ids, errors="replace") == truth
        assert tok.decode_bytes(ids, errors="replace") == truth.encode()


# --------------------------------------------------------------------------- reading a list

@settings(max_examples=200, deadline=None)
@given(items=st.lists(st.one_of(st.sampled_from([0, 1, 255, 256, 2**30 - 1, 2**30, 2**30 + 1, 2**31, 2**32 - 1]),
                                st.integers(0, 2**32 - 1), st.booleans()), max_size=30),
       bad=st.sampled_from([None, -1, -(2**30), 2**32, 2**62, 2**90]), where=st.integers(0, 30))
def test_ids_from_sequence_reads_every_int_width(items, bad, where):
    """One-digit ints (read from the object) and wider ones (the general
    conversion) give the values numpy gives; the first int outside 0..2**32-1 is
    named, wherever it is."""
    from ube_stream import _decode
    from ube_stream.errors import STATUS_BAD_ID, STATUS_OK, err_buffer

    seq = list(items)
    if bad is not None:
        seq.insert(min(where, len(seq)), bad)
    out = np.zeros(len(seq), np.uint32)
    err = err_buffer()
    status = _decode.ids_from_sequence(seq, out, err)
    if bad is None:
        assert status == STATUS_OK
        assert out.tolist() == np.array([int(i) for i in seq], np.uint64).tolist()
    else:
        assert status == STATUS_BAD_ID and int(err[1]) == min(where, len(items))
