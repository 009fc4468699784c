"""The kernels' status convention and its one translator, ube_stream.errors.check_status.

Every status code must become the right exception with its fields set; the
kernel side (which entry returns which code, with which err) is tested with
each kernel (test_substrate, test_pretokenizer, test_encoder, test_count,
test_merge).
"""
import pickle
import re
from pathlib import Path

import numpy as np
import pytest

from ube_stream import errors
from ube_stream.errors import (
    ERR_SIZE,
    STATUS_BAD_ID,
    STATUS_INVALID_SYMBOLS,
    STATUS_INVALID_UTF8,
    STATUS_NO_MEMORY,
    STATUS_OK,
    InvalidTextError,
    SymbolDecodeError,
    UbeError,
    check_status,
    err_buffer,
)

STATUS_HEADER = Path(__file__).parents[1] / "cython_src" / "_status.pxd"


@pytest.mark.skipif(not STATUS_HEADER.exists(), reason="needs the source tree")
def test_codes_mirror_the_kernel_header():
    header = dict(re.findall(r"^\s+((?:STATUS_\w+|ERR_SIZE)) = (-?\d+)", STATUS_HEADER.read_text(), re.M))
    assert header == {name: str(getattr(errors, name)) for name in header}
    assert set(header) == {"STATUS_OK", "STATUS_INVALID_UTF8", "STATUS_INVALID_SYMBOLS", "STATUS_BAD_ID",
                           "STATUS_NO_MEMORY", "STATUS_NOT_BPE", "STATUS_TOO_LARGE", "ERR_SIZE"}
    assert STATUS_OK == 0 and all(getattr(errors, n) < 0 for n in header if n not in ("STATUS_OK", "ERR_SIZE"))


def test_err_buffer_is_fresh_int64():
    a, b = err_buffer(), err_buffer()
    assert list(a) == [-1] * ERR_SIZE and memoryview(a).format == "q" and memoryview(a).itemsize == 8
    a[0] = 5
    assert list(b) == [-1] * ERR_SIZE


def test_ok_returns_none():
    assert check_status(STATUS_OK, None, what="anything") is None
    assert check_status(STATUS_OK, (3, 4), what="routing") is None


# ----------------------------------------------------------------------------- invalid UTF-8

def test_invalid_utf8_routing_single_and_batch():
    with pytest.raises(InvalidTextError) as info:
        check_status(STATUS_INVALID_UTF8, (5, -1), what="routing")
    e = info.value
    assert (e.offset, e.unit, e.item, e.document) == (5, "byte", None, None)
    assert str(e).startswith("invalid UTF-8 at byte offset 5: routing needs well-formed UTF-8")
    with pytest.raises(InvalidTextError) as info:
        check_status(STATUS_INVALID_UTF8, (7, 2), what="routing", offsets=np.array([0, 2, 6, 9]))
    e = info.value
    assert (e.offset, e.unit, e.item, e.document) == (7, "byte", 2, 2)  # offset: in the whole buffer
    assert "byte offset 7 (item 2, byte 1 of the item)" in str(e)


def test_invalid_utf8_documents_single_and_batch():
    data = np.frombuffer(b"abc\xffdef", np.uint8)
    with pytest.raises(InvalidTextError) as info:
        check_status(STATUS_INVALID_UTF8, (3, -1), what="pre-tokenization", data=data)
    e = info.value
    assert (e.offset, e.unit, e.document) == (3, "byte", None)
    assert "byte offset 3: bytes b'\\xffdef' do not start" in str(e) and "on_error='skip'" in str(e)
    data = np.frombuffer(b"okfine\xffxy", np.uint8)
    with pytest.raises(InvalidTextError) as info:
        check_status(STATUS_INVALID_UTF8, (6, 1), what="encoding", data=data,
                     offsets=np.array([0, 2, 8, 10]), first_item=10)
    e = info.value
    assert (e.offset, e.unit, e.document, e.item) == (4, "byte", 11, 11)  # offset: in the document
    assert "document 11, byte offset 4 (byte 6 of the batch): bytes b'\\xffx'" in str(e)  # the document's bytes


# ----------------------------------------------------------------------------- decoding

def test_symbols_that_do_not_decode():
    ids = np.array([65, 0xE4, 66, 67, 68], np.uint16)
    with pytest.raises(SymbolDecodeError) as info:
        check_status(STATUS_INVALID_SYMBOLS, (1, -1), what="decoding symbols", ids=ids, substrate="utf8",
                     limit=256, detail="invalid continuation byte (utf-8 buffer starting at symbol 0)")
    e = info.value
    assert (e.offset, e.position) == (1, None)
    assert str(e) == ("symbol ids do not decode to text under utf8: invalid continuation byte (utf-8 buffer "
                      "starting at symbol 0) at symbol offset 1, ids [228, 66, 67, 68]; pass errors='replace' "
                      "to get U+FFFD")


def test_symbol_outside_the_alphabet():
    with pytest.raises(SymbolDecodeError) as info:
        check_status(STATUS_BAD_ID, (2, -1), what="decoding symbols", ids=np.array([1, 2, 300]),
                     substrate="utf8", limit=256)
    assert (info.value.offset, info.value.position) == (2, None)
    assert "symbol id 300 at offset 2 is outside the utf8 alphabet 0..255" in str(info.value)


def test_tokens_that_do_not_decode():
    ids = np.array([10, 20, 30])
    with pytest.raises(SymbolDecodeError) as info:
        check_status(STATUS_INVALID_SYMBOLS, (4, 2), what="decoding tokens", ids=ids, substrate="ube", limit=99)
    e = info.value
    assert (e.offset, e.position) == (4, 2)
    assert "token 30 at position 2 hold an invalid byte sequence (base-symbol offset 4)" in str(e)
    with pytest.raises(SymbolDecodeError) as info:
        check_status(STATUS_BAD_ID, (-1, 1), what="decoding tokens", ids=ids, substrate="ube", limit=15)
    e = info.value
    assert (e.offset, e.position) == (-1, 1)
    assert str(e) == "token id 20 at position 1 is outside the vocabulary (0..14)"


# ----------------------------------------------------------------------------- memory, unknown

def test_no_memory_is_a_memory_error():
    with pytest.raises(MemoryError) as info:
        check_status(STATUS_NO_MEMORY, (4096, -1), what="counting chunks", hint="the table keeps its chunks")
    assert str(info.value) == ("out of memory while counting chunks: could not allocate 4096 bytes; "
                               "the table keeps its chunks")
    assert not isinstance(info.value, UbeError)
    with pytest.raises(MemoryError, match=r"^out of memory while encoding$"):
        check_status(STATUS_NO_MEMORY, (-1, -1), what="encoding")
    with pytest.raises(MemoryError, match=r"^out of memory while encoding$"):
        check_status(STATUS_NO_MEMORY, None, what="encoding")


def test_unknown_status_names_a_build_mismatch():
    with pytest.raises(UbeError, match="unknown status -99.*rebuild"):
        check_status(-99, (0, 0), what="routing")


def test_data_errors_are_ube_and_value_errors():
    cases = [(STATUS_INVALID_UTF8, dict(what="routing")),
             (STATUS_INVALID_UTF8, dict(what="pre-tokenization", data=b"\xff")),
             (STATUS_INVALID_SYMBOLS, dict(what="decoding symbols", ids=np.zeros(1), substrate="ube", limit=512)),
             (STATUS_BAD_ID, dict(what="decoding symbols", ids=np.zeros(1), substrate="ube", limit=512)),
             (STATUS_BAD_ID, dict(what="decoding tokens", ids=np.zeros(1), substrate="ube", limit=1))]
    for status, context in cases:
        with pytest.raises(UbeError) as info:
            check_status(status, (0, -1) if context["what"] != "decoding tokens" else (-1, 0), **context)
        assert isinstance(info.value, ValueError)


# ----------------------------------------------------------------------------- the fields

def test_position_and_item_are_constructor_fields():
    e = InvalidTextError("m", offset=3, unit="byte", item=4)
    assert (e.offset, e.unit, e.item, e.document) == (3, "byte", 4, 4)
    e = InvalidTextError("m", offset=3, document=5)  # the older name still works
    assert (e.item, e.document) == (5, 5)
    e.document += 10
    assert (e.item, e.document) == (15, 15)
    assert InvalidTextError("m").item is None
    s = SymbolDecodeError("m", offset=7, position=2)
    assert (s.offset, s.position) == (7, 2)
    assert SymbolDecodeError("m").position is None and SymbolDecodeError("m").offset == -1


def test_fields_survive_pickling():
    e = pickle.loads(pickle.dumps(InvalidTextError("m", offset=3, unit="byte", item=4)))
    assert (str(e), e.offset, e.unit, e.item, e.document) == ("m", 3, "byte", 4, 4)
    s = pickle.loads(pickle.dumps(SymbolDecodeError("m", offset=7, position=2)))
    assert (str(s), s.offset, s.position) == ("m", 7, 2)
