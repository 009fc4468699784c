"""The substrate: routing text to base symbols and back (ube_stream.substrate, _route kernel).

Truth comes from outside the kernel: Python's utf-8 / utf-16-le codecs, the
readable twin in ``_reference``, and the real text of tests/data.
"""
import io
import json
from pathlib import Path

import numpy as np
import pytest
import zstandard
from _helpers import slow_after
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ube_stream import _reference, _route
from ube_stream.errors import InvalidTextError, SymbolDecodeError, err_buffer
from ube_stream.substrate import (
    SUBSTRATES,
    base_size,
    decode_symbols,
    encode_symbols,
    floor_cost,
    parse_symbol_string,
    route_bytes,
    substrate_code,
    symbol_string,
)

DATA = Path(__file__).parent / "data"
CODEC = {"utf8": "utf-8", "utf16": "utf-16-le"}


# ----------------------------------------------------------------- helpers (independent truth)

def all_scalar_values() -> np.ndarray:
    cps = np.arange(0x110000, dtype=np.uint32)
    return cps[(cps < 0xD800) | (cps > 0xDFFF)]


def as_text(cps: np.ndarray) -> str:
    return cps.astype("<u4").tobytes().decode("utf-32-le")


def codec_ids(text: str, substrate: str) -> np.ndarray:
    """Expected ids built from Python's codecs, char by char but vectorised."""
    if substrate != "ube":
        return np.frombuffer(text.encode(CODEC[substrate]), dtype=np.uint8).astype(np.uint16)
    cps = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
    u8 = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.uint16)
    u16 = np.frombuffer(text.encode("utf-16-le"), dtype=np.uint8).astype(np.uint16) + 256
    len8 = 1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)
    len16 = 2 + 2 * (cps >= 0x10000)
    start8 = np.concatenate(([0], np.cumsum(len8)[:-1]))
    start16 = np.concatenate(([0], np.cumsum(len16)[:-1]))
    use8 = len8 <= 2
    length = np.where(use8, len8, len16)
    char = np.repeat(np.arange(cps.size), length)
    pos = np.arange(char.size) - np.repeat(np.cumsum(length) - length, length)
    from8 = u8[np.minimum(start8[char] + pos, u8.size - 1)]
    from16 = u16[np.minimum(start16[char] + pos, u16.size - 1)]
    return np.where(use8[char], from8, from16).astype(np.uint16)


def read_rows(name):
    raw = zstandard.ZstdDecompressor().stream_reader(open(DATA / f"{name}.jsonl.zst", "rb")).read()
    return [json.loads(line) for line in io.StringIO(raw.decode("utf-8"))]


# ------------------------------------------------- kernel entries (status convention folded)

def route_batch(data, offsets, code):
    """``_route.route_batch`` with its status raised by the package's one translator."""
    from ube_stream.errors import check_status, err_buffer

    err = err_buffer()
    status, symbols, symbol_offsets = _route.route_batch(data, offsets, code, err)
    check_status(status, err, what="routing", offsets=offsets)
    return symbols, symbol_offsets


def decode_text(ids, code):
    """``_route.decode_text`` as ``(text, -1)`` or ``(None, symbol offset of the error)``."""
    from ube_stream.errors import err_buffer

    err = err_buffer()
    status, text = _route.decode_text(ids, code, err)
    return (text, -1) if status == 0 else (None, err[0])


def decode_bytes(ids, code):
    """``_route.decode_bytes`` as ``(data, -1)`` or ``(None, symbol offset of the error)``."""
    from ube_stream.errors import err_buffer

    err = err_buffer()
    status, data = _route.decode_bytes(ids, code, err)
    return (data, -1) if status == 0 else (None, err[0])


@pytest.fixture(scope="module")
def real_texts():
    return [row["text"] for name in ("docs_sample", "parallel_sample") for row in read_rows(name)]


@pytest.fixture(scope="module")
def every_char():
    return as_text(all_scalar_values())


# --------------------------------------------------------------------------- every scalar value

def test_all_scalar_values_count(every_char):
    assert len(every_char) == 1_112_064


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_every_scalar_value_routes_like_the_codecs(every_char, substrate):
    ids = encode_symbols(every_char, substrate)
    assert ids.dtype == np.uint16
    np.testing.assert_array_equal(ids, codec_ids(every_char, substrate))
    assert floor_cost(every_char, substrate) == ids.size
    assert decode_symbols(ids, substrate) == every_char


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_every_scalar_value_one_by_one_through_the_batch_entry(every_char, substrate):
    data = every_char.encode("utf-8")
    cps = all_scalar_values()
    len8 = 1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)
    offsets = np.concatenate(([0], np.cumsum(len8))).astype(np.int64)
    symbols, symbol_offsets = route_batch(data, offsets, substrate_code(substrate))
    if substrate == "utf8":
        expected_len = len8
    elif substrate == "utf16":
        expected_len = 2 + 2 * (cps >= 0x10000)
    else:
        expected_len = np.where(len8 <= 2, len8, 2 + 2 * (cps >= 0x10000))
    np.testing.assert_array_equal(np.diff(symbol_offsets), expected_len)
    np.testing.assert_array_equal(symbols, codec_ids(every_char, substrate))


@pytest.mark.parametrize("substrate", slow_after(SUBSTRATES))
def test_every_scalar_value_alone_decodes_to_itself(every_char, substrate):
    """1,112,064 kernel calls per substrate, each decoding one char's symbols (~1.5 s)."""
    data = every_char.encode("utf-8")
    cps = all_scalar_values()
    len8 = 1 + (cps >= 0x80) + (cps >= 0x800) + (cps >= 0x10000)
    offsets = np.concatenate(([0], np.cumsum(len8))).astype(np.int64)
    symbols, symbol_offsets = route_batch(data, offsets, substrate_code(substrate))
    code = substrate_code(substrate)
    bounds = symbol_offsets.tolist()
    # the kernel entry itself, one err buffer and memoryview slices: the cheapest call per char
    err, view = err_buffer(), memoryview(symbols)
    got = [_route.decode_text(view[a:b], code, err) for a, b in zip(bounds, bounds[1:])]
    expected = [(0, char) for char in every_char]   # (status ok, the char itself)
    if got != expected:
        k = next(k for k, (a, b) in enumerate(zip(got, expected)) if a != b)
        pytest.fail(f"U+{int(cps[k]):04X} alone decodes to {got[k]!r} (status, text), not {expected[k]!r}")


def test_ube_matches_the_reference_twin(every_char):
    rng = np.random.default_rng(1)
    sample = "".join(every_char[i] for i in rng.integers(0, len(every_char), 5000))
    sample += "\x00\x7f\x80\u07ff\u0800\ud7ff\ue000\uffff\U00010000\U0010ffff"
    for substrate in SUBSTRATES:
        assert encode_symbols(sample, substrate).tolist() == _reference.route_symbols(sample, substrate)


# -------------------------------------------------------------------------------- paper example

def test_paper_example():
    ube = encode_symbols("GPU性能", "ube")
    assert ube.tolist() == [71, 80, 85, 0x127, 0x160, 0x1FD, 0x180]
    assert symbol_string(ube)[3:] == "\ue127\ue160\ue1fd\ue180"
    assert symbol_string(ube)[:3] == "GPU"
    assert encode_symbols("GPU性能", "utf8").size == 9
    assert encode_symbols("GPU性能", "utf16").size == 10
    assert [floor_cost("GPU性能", s) for s in SUBSTRATES] == [7, 9, 10]


def test_substrate_names():
    assert SUBSTRATES == ("ube", "utf8", "utf16")
    assert [substrate_code(s) for s in SUBSTRATES] == [0, 1, 2]
    assert [base_size(s) for s in SUBSTRATES] == [512, 256, 256]
    with pytest.raises(ValueError, match="'ube', 'utf8', 'utf16'"):
        substrate_code("utf-8")
    with pytest.raises(ValueError, match="expected one of"):
        encode_symbols("a", "bbpe")


# ---------------------------------------------------------------------------- hypothesis: text

SPECIAL = ["e\u0301", "\u0915\u094d\u0937", "👨\u200d👩\u200d👧", "🇫🇷", "😀", "性能", "𠀀", "\U0010fffd",
           "\ufeff", "\u2028", "\x00", "Ω", "ß", "\ue100", "\ufffd", "\u0300\u0301\u0302"]
text_strategy = st.lists(
    st.one_of(st.characters(codec="utf-8"), st.characters(codec="utf-8", max_codepoint=0x7FF),
              st.characters(min_codepoint=0x10000),
              st.sampled_from(SPECIAL)), max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=text_strategy)
def test_random_text_round_trips(text):
    for substrate in SUBSTRATES:
        ids = encode_symbols(text, substrate)
        assert ids.tolist() == _reference.route_symbols(text, substrate)
        assert decode_symbols(ids, substrate) == text
        assert decode_symbols(ids, substrate, errors="replace") == text
        assert floor_cost(text, substrate) == ids.size
        assert parse_symbol_string(symbol_string(ids, substrate), substrate).tolist() == ids.tolist()
        assert route_bytes(text.encode("utf-8"), substrate).tolist() == ids.tolist()
        data, error_at = decode_bytes(ids, substrate_code(substrate))
        assert (data, error_at) == (text.encode("utf-8"), -1)


# 100 examples in the default suite, the original 200 with the slow tests
@pytest.mark.parametrize("examples", slow_after([100, 200]))
def test_route_batch_equals_routing_each_item(examples):
    @settings(max_examples=examples, deadline=None)
    @given(texts=st.lists(text_strategy, max_size=8), lead=st.binary(max_size=5), tail=st.binary(max_size=5))
    def check(texts, lead, tail):
        data = lead + b"".join(t.encode("utf-8") for t in texts) + tail
        lengths = [len(t.encode("utf-8")) for t in texts]
        offsets = np.array([len(lead)] + list(np.cumsum(lengths) + len(lead)), dtype=np.int64)
        for substrate in SUBSTRATES:
            symbols, symbol_offsets = route_batch(data, offsets, substrate_code(substrate))
            assert symbol_offsets[0] == 0 and symbol_offsets.size == len(texts) + 1
            for k, text in enumerate(texts):
                got = symbols[symbol_offsets[k]:symbol_offsets[k + 1]]
                assert got.tolist() == _reference.route_symbols(text, substrate)
            assert symbols.size == symbol_offsets[-1]

    check()


# ---------------------------------------------------------------------- hypothesis: ids and bytes

def ids_strategy(substrate):
    limit = base_size(substrate)
    # bias towards the bytes that make sequences: continuations, leads, surrogates
    tricky = [0x80, 0xBF, 0xC2, 0xDF, 0xE0, 0xED, 0xF0, 0xF4, 0xF5, 0xD8, 0xDB, 0xDC, 0xDF, 0x00, 0x41]
    if substrate == "ube":
        tricky += [b + 256 for b in tricky]
    return st.lists(st.one_of(st.integers(0, limit - 1), st.sampled_from(tricky)), max_size=40)


@pytest.mark.parametrize("substrate", slow_after(SUBSTRATES))
def test_random_ids_decode_like_the_reference(substrate):
    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(ids=ids_strategy(substrate))
    def check(ids):
        assert decode_symbols(ids, substrate, errors="replace") == \
            _reference.decode_symbols(ids, substrate, errors="replace")
        expected_offset = _reference.decode_symbols_offset(ids, substrate)
        if expected_offset < 0:
            assert decode_symbols(ids, substrate) == _reference.decode_symbols(ids, substrate)
        else:
            with pytest.raises(SymbolDecodeError) as info:
                decode_symbols(ids, substrate)
            assert info.value.offset == expected_offset
            assert f"offset {expected_offset}" in str(info.value)
            assert decode_text(np.array(ids, dtype=np.uint16), substrate_code(substrate)) == \
                (None, expected_offset)
    check()


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=40))
def test_single_codec_decode_is_python_codec(data):
    """utf8 and utf16 are one buffer: decode is exactly bytes.decode, errors included."""
    ids = np.frombuffer(data, dtype=np.uint8).astype(np.uint16)
    for substrate in ("utf8", "utf16"):
        assert decode_symbols(ids, substrate, errors="replace") == data.decode(CODEC[substrate], "replace")
        try:
            expected = data.decode(CODEC[substrate])
        except UnicodeDecodeError as exc:
            with pytest.raises(SymbolDecodeError) as info:
                decode_symbols(ids, substrate)
            assert info.value.offset == exc.start
        else:
            assert decode_symbols(ids, substrate) == expected


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=40))
def test_invalid_utf8_bytes_are_reported_where_python_reports_them(data):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        for substrate in SUBSTRATES:
            with pytest.raises(InvalidTextError) as info:
                route_bytes(data, substrate)
            assert (info.value.offset, info.value.unit) == (exc.start, "byte")
            with pytest.raises(InvalidTextError):
                floor_cost(data, substrate)
    else:
        for substrate in SUBSTRATES:
            assert route_bytes(data, substrate).tolist() == _reference.route_symbols(text, substrate)


def test_batch_error_names_item_and_byte():
    data = "ab".encode() + "çé".encode() + b"x\xe6\x80" + b"ok"
    offsets = np.array([0, 2, 6, 9, 11], dtype=np.int64)
    with pytest.raises(InvalidTextError) as info:
        route_batch(data, offsets, 0)
    assert (info.value.offset, info.value.item) == (7, 2)
    with pytest.raises(ValueError, match="non-decreasing"):
        route_batch(data, np.array([0, 5, 3], dtype=np.int64), 0)
    with pytest.raises(ValueError, match="within"):
        route_batch(data, np.array([0, 99], dtype=np.int64), 0)
    symbols, symbol_offsets = route_batch(b"", np.zeros(1, dtype=np.int64), 0)
    assert symbols.size == 0 and symbol_offsets.tolist() == [0]


def test_out_of_range_ids_are_errors_in_both_modes():
    for substrate, bad in (("ube", 512), ("utf8", 256), ("utf16", 300)):
        for errors in ("strict", "replace"):
            with pytest.raises(SymbolDecodeError) as info:
                decode_symbols([65, 0xE4, bad, 65], substrate, errors=errors)
            assert info.value.offset == 2
    with pytest.raises(SymbolDecodeError):
        decode_symbols([-1], "ube")
    with pytest.raises(SymbolDecodeError) as info:
        decode_symbols(np.array([65, 70000], dtype=np.int64), "ube")
    assert info.value.offset == 1
    with pytest.raises(SymbolDecodeError) as info:  # uint16 input skips the Python range check
        decode_symbols(np.array([0xE4, 65, 300], dtype=np.uint16), "utf8", errors="replace")
    assert info.value.offset == 2
    # the kernel checks the alphabet before decoding (as the reference does)
    assert decode_text(np.array([0xE4, 65, 600], dtype=np.uint16), 0) == (None, 2)


def test_decode_errors_argument():
    with pytest.raises(ValueError, match="'strict' or 'replace'"):
        decode_symbols([65], errors="ignore")
    assert decode_symbols([], "ube") == ""
    assert decode_symbols(np.array([], dtype=np.uint16), "utf16") == ""


def test_dual_buffer_flush_cuts_sequences():
    # 性 as UTF-16 ids, but the second byte comes after a switch to the UTF-8 alphabet
    with pytest.raises(SymbolDecodeError) as info:
        decode_symbols([65, 0x127, 0x41, 0x160], "ube")
    assert info.value.offset == 1
    # é as UTF-8 bytes cut by a UTF-16 buffer
    with pytest.raises(SymbolDecodeError) as info:
        decode_symbols([0xC3, 0x127, 0x160, 0xA9], "ube")
    assert info.value.offset == 0
    # decoding accepts any valid sequence in a buffer: 性 written as UTF-8 bytes is fine
    assert decode_symbols(list("性".encode()), "ube") == "性"


def test_decode_output_bound_is_tight():
    # 2 ids -> 3 UTF-8 bytes is the worst case: the output fills the n + n // 2 bytes exactly
    for text in ("性" * 1000, "性" * 999 + "é"):
        for substrate in ("utf16", "ube"):
            ids = encode_symbols(text, substrate)
            data, error_at = decode_bytes(ids, substrate_code(substrate))
            assert error_at == -1 and data == text.encode("utf-8")
    assert len(("性" * 1000).encode("utf-8")) == 2000 + 2000 // 2


# -------------------------------------------------------------------------------- symbol strings

def test_symbol_string_alphabet():
    table = _reference.bytes_to_unicode()
    assert symbol_string(range(256), "utf8") == "".join(table[b] for b in range(256))
    assert symbol_string([32, 10, 256, 511]) == "ĠĊ\ue100\ue1ff"
    assert symbol_string(range(512)) == _reference.symbol_string(range(512))
    assert parse_symbol_string(symbol_string(range(512))).tolist() == list(range(512))
    with pytest.raises(SymbolDecodeError):
        symbol_string([256], "utf8")


@pytest.mark.parametrize("substrate, s, offset", [
    ("ube", "ab c", 2),          # a space is not a symbol char (it is written Ġ)
    ("utf8", "ĠĊ\ue100", 2),     # U+E100 belongs to ube only
    ("ube", "Ġ\ue200", 1),
    ("ube", "Ġ\ud800", 1),       # a lone surrogate
    ("ube", "ab性", 2),
])
def test_parse_symbol_string_names_the_bad_character(substrate, s, offset):
    with pytest.raises(InvalidTextError) as info:
        parse_symbol_string(s, substrate)
    assert info.value.offset == offset and f"offset {offset}" in str(info.value)


# -------------------------------------------------------------------------------- invalid input

@pytest.mark.parametrize("text, offset", [("\ud800", 0), ("ab\udfff", 2), ("性能\ud83dx", 2),
                                          ("😀\udc00", 1)])
def test_lone_surrogate_names_its_offset(text, offset):
    for substrate in SUBSTRATES:
        with pytest.raises(InvalidTextError) as info:
            encode_symbols(text, substrate)
        assert (info.value.offset, info.value.unit) == (offset, "char")
        assert f"offset {offset}" in str(info.value)
        with pytest.raises(InvalidTextError):
            floor_cost(text, substrate)


# ------------------------------------------------------------------------------------ real text

def test_real_text_round_trips_and_ube_is_never_longer(real_texts):
    assert len(real_texts) > 1000
    for text in real_texts:
        costs = {}
        for substrate in SUBSTRATES:
            ids = encode_symbols(text, substrate)
            assert decode_symbols(ids, substrate) == text
            costs[substrate] = floor_cost(text, substrate)
            assert costs[substrate] == ids.size
        assert costs["utf8"] == len(text.encode("utf-8"))
        assert costs["utf16"] == len(text.encode("utf-16-le"))
        assert costs["ube"] <= costs["utf8"]


# ------------------------------------------------------------------ the kernel's status convention

def test_route_kernels_return_status_and_write_err():
    from ube_stream.errors import STATUS_BAD_ID, STATUS_INVALID_SYMBOLS, STATUS_INVALID_UTF8, err_buffer

    err = err_buffer()
    status, symbols = _route.route(b"GPU\xe6\x80", 0, err)
    assert (status, symbols, list(err)) == (STATUS_INVALID_UTF8, None, [3, -1])
    assert _route.count(b"ab\xff", 1, err) == (STATUS_INVALID_UTF8, None) and list(err) == [2, -1]
    status, symbols = _route.route(b"GPU", 0, err)
    assert status == 0 and symbols.tolist() == [71, 80, 85] and list(err) == [2, -1]  # err untouched on success
    assert _route.count(b"GPU", 2) == (0, 6)  # err is optional
    data = "ab".encode() + "çé".encode() + b"x\xe6\x80" + b"ok"
    status, symbols, symbol_offsets = _route.route_batch(data, np.array([0, 2, 6, 9, 11], np.int64), 0, err)
    assert (status, symbols, symbol_offsets, list(err)) == (STATUS_INVALID_UTF8, None, None, [7, 2])
    assert _route.decode_text(np.array([0xE4, 65, 600], np.uint16), 0, err) == (STATUS_BAD_ID, None)
    assert list(err) == [2, -1]
    assert _route.decode_bytes(np.array([65, 0xE4, 65], np.uint16), 1, err) == (STATUS_INVALID_SYMBOLS, None)
    assert list(err) == [1, -1]
    assert _route.decode_text(np.array([65], np.uint16), 1, err) == (0, "A")


def test_route_kernels_refuse_a_short_err():
    for call in (lambda e: _route.route(b"a", 0, e), lambda e: _route.decode_text(np.zeros(1, np.uint16), 0, e),
                 lambda e: _route.route_batch(b"a", np.array([0, 1], np.int64), 0, e)):
        with pytest.raises(ValueError, match="err needs 2 int64 entries"):
            call(np.zeros(1, np.int64))


def test_route_module_is_free_of_the_package():
    assert not hasattr(_route, "_NAMES") and not hasattr(_route, "InvalidTextError")
    assert not hasattr(_route, "_invalid_utf8") and not hasattr(_route, "_shrink")
