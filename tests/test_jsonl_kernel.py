"""The JSON Lines field kernel (``_jsonl.scan_lines``) against its twin
``_reference.jsonl_field`` (``json.loads`` per line): every line the kernel
takes gives json.loads's text, and it takes every simple line."""
import json
import os

import numpy as np
import pytest
import zstandard
from _helpers import slow_after
from hypothesis import given, settings
from hypothesis import strategies as st

from ube_stream import _jsonl
from ube_stream._reference import jsonl_field
from ube_stream.readers import SkipCounter
from ube_stream.readers import compression as _compression

DATA = os.path.join(os.path.dirname(__file__), "data")


def scan(block: bytes, key: str = "text", cap: int | None = None):
    """[(ok, text bytes, end)] of every line of ``block``."""
    n = block.count(b"\n") + 1 if cap is None else cap
    out = np.empty(len(block), np.uint8)
    ends, offsets, ok = np.empty(n, np.int64), np.empty(n + 1, np.int64), np.empty(n, np.uint8)
    got = _jsonl.scan_lines(np.frombuffer(block, np.uint8), 0, len(block), np.frombuffer(key.encode(), np.uint8),
                            out, ends, offsets, ok)
    return [(bool(ok[k]), out[offsets[k]:offsets[k + 1]].tobytes(), int(ends[k])) for k in range(got)]


def check(line: bytes, key: str = "text") -> bool:
    """The kernel on one line agrees with the twin; returns whether it took the line."""
    (taken, text, end), = scan(line, key)
    assert end == len(line)
    if taken:
        assert text == jsonl_field(line, key), line
    else:
        assert text == b""
    return taken


HAND = [  # (line, taken, text)
    (b'{"text": "hi"}', True, b"hi"),
    (b'{"text":"hi"}\n', True, b"hi"),
    (b' \t{"a": 1, "text": "x"} \r\n', True, b"x"),
    (b'{"text": "\\u00e9\\ud83d\\ude00\\n\\t\\"\\\\\\/\\b\\f\\r"}', True,
     "é😀\n\t\"\\/\b\f\r".encode()),
    (b'{"text": "\\u0000"}', True, b"\x00"),
    (b'{"text": "a", "text": "b"}', True, b"b"),                 # json.loads keeps the last
    (b'{"text": 1, "text": "b"}', False, b""),                # a non-string under key: handed back
    (b'{"text": "b", "text": 1}', False, b""),                  # not a string: json.loads reports it
    (b'{"nested": {"text": "no"}, "text": "yes"}', True, b"yes"),
    (b'{"nested": {"text": "no"}}', False, b""),                 # missing at the top level
    (b'{"b": [1, -2.5e+10, 0, true, false, null, [], {}], "text": "\xc3\xa9"}', True, "é".encode()),
    (b'{"text": "\\ud800"}', False, b""),                       # lone high surrogate
    (b'{"text": "\\udc00x"}', False, b""),                      # lone low surrogate
    (b'{"text": "\\ud800\\u0041"}', False, b""),
    (b'{"other": "\\ud800", "text": "ok"}', True, b"ok"),        # elsewhere a lone surrogate is fine
    (b'{"text": "\xed\xa0\x80"}', False, b""),                   # a UTF-8-encoded surrogate
    (b'{"text": "\xc0\xaf"}', False, b""),                       # overlong
    (b'{"x": "\xff", "text": "a"}', False, b""),                 # invalid UTF-8 anywhere in the line
    (b'{"text": "a\tb"}', False, b""),                          # raw control character
    (b'{"text": "a",}', False, b""),
    (b'{"text": "a"} x', False, b""),
    (b'{"text": "a"}{}', False, b""),
    (b'{"x": 01, "text": "a"}', False, b""),
    (b'{"x": 1., "text": "a"}', False, b""),
    (b'{"x": -, "text": "a"}', False, b""),
    (b'{"x": NaN, "text": "a"}', False, b""),                    # json.loads takes it; the kernel hands it back
    (b'{"x": tru, "text": "a"}', False, b""),
    (b'{"t\\u0065xt": "a"}', False, b""),                        # an escaped top-level key
    (b'{"x": [1, 2}, "text": "a"}', False, b""),
    (b'{"text": "unterminated}', False, b""),
    (b'{"text": "\\x"}', False, b""),
    (b'{"text": "\\u12g4"}', False, b""),
    (b'["text", "a"]', False, b""),
    (b'', False, b""),
    (b'   \n', False, b""),
    (b'{}', False, b""),
]


@pytest.mark.parametrize("line,taken,text", HAND)
def test_hand_worked_lines(line, taken, text):
    (got_taken, got_text, _), = scan(line) if line else [(False, b"", 0)]
    assert (got_taken, got_text) == (taken, text)
    if line:
        check(line)


def test_lines_and_capacity():
    block = b'{"text": "a"}\n{"text": 2}\n\n{"text": "c"}'
    assert scan(block) == [(True, b"a", 14), (False, b"", 26), (False, b"", 27), (True, b"c", 40)]
    assert scan(block, cap=2) == [(True, b"a", 14), (False, b"", 26)]
    with pytest.raises(ValueError):
        _jsonl.scan_lines(np.frombuffer(block, np.uint8), 0, len(block), np.frombuffer(b"text", np.uint8),
                          np.empty(3, np.uint8), np.empty(4, np.int64), np.empty(5, np.int64), np.empty(4, np.uint8))


def test_deep_nesting_is_handed_back():
    deep = b'{"x": ' + b"[" * 300 + b"]" * 300 + b', "text": "a"}'
    shallow = b'{"x": ' + b"[" * 200 + b"]" * 200 + b', "text": "a"}'
    assert not check(deep) and check(shallow)


_scalars = (st.none() | st.booleans() | st.integers(-10**30, 10**30)
            | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8))
_values = st.recursive(_scalars, lambda kids: st.lists(kids, max_size=4)
                       | st.dictionaries(st.text(max_size=5), kids, max_size=4), max_leaves=12)
# any code point, lone surrogates included (json.dumps escapes them with ensure_ascii)
_texts = st.text(st.characters(blacklist_categories=()), max_size=40)


# 50 examples in the default suite, the original 100 with the slow tests
@pytest.mark.parametrize("examples", slow_after([50, 100]))
def test_hypothesis_objects(examples):
    @settings(max_examples=examples, deadline=None)
    @given(st.dictionaries(st.text(max_size=6), _values, max_size=5), _texts | _values, st.booleans(),
           st.sampled_from([None, (",", ":"), (" , ", " : ")]), st.integers(0, 5))
    def objects(record, text, ensure_ascii, separators, where):
        items = list(record.items())
        items.insert(min(where, len(items)), ("text", text))
        body = ", ".join(f"{json.dumps(k, ensure_ascii=ensure_ascii)}: {json.dumps(v, ensure_ascii=ensure_ascii)}"
                         for k, v in items) if separators is None else json.dumps(
                             dict(items), ensure_ascii=ensure_ascii, separators=separators)
        line = ("{" + body + "}" if separators is None else body).encode("utf-8", "surrogatepass")
        taken = check(line)
        ref = jsonl_field(line, "text")
        simple_keys = all("\\" not in json.dumps(k, ensure_ascii=ensure_ascii) for k, _ in items)
        if ref is not None and simple_keys:
            assert taken, line   # every simple line is the kernel's

    objects()


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=4), _values, max_size=3), _texts, st.booleans(),
       st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255), st.sampled_from(["set", "insert", "delete"])),
                min_size=1, max_size=3))
def test_hypothesis_damaged_lines(record, text, ensure_ascii, edits):
    """Whatever bytes a line holds, a line the kernel takes reads as json.loads reads it."""
    line = bytearray(json.dumps(dict(record, text=text), ensure_ascii=ensure_ascii).encode("utf-8", "surrogatepass"))
    for at, byte, how in edits:
        at = at % (len(line) + 1)
        if how == "insert":
            line[at:at] = bytes([byte])
        elif at < len(line):
            if how == "set":
                line[at] = byte
            else:
                del line[at]
    line = bytes(line).replace(b"\n", b" ")
    if line:
        check(line)


def test_numbers_like_json_loads():
    for number in ["0", "-0", "12", "-12.5", "1e5", "1E-5", "1.5e+07", "0.0", "-0.0e0", "9" * 900]:
        assert check(b'{"x": %s, "text": "t"}' % number.encode()), number
    for number in ["00", "+1", ".5", "5.", "1e", "1e+", "-", "0x1", "1.2.3", "Infinity", "-Infinity", "9" * 1001]:
        line = b'{"x": %s, "text": "t"}' % number.encode()
        assert not check(line), number


@pytest.mark.parametrize("name", ["docs_sample.jsonl.zst", "parallel_sample.jsonl.zst", "unicode_sample.jsonl.zst"])
def test_real_corpora_are_all_taken(name):
    with open(f"{DATA}/{name}", "rb") as f:
        raw = zstandard.ZstdDecompressor().stream_reader(f).read()
    lines = raw.split(b"\n")
    if not lines[-1]:
        lines.pop()
    got = scan(raw)
    assert [t for _, t, _ in got] == [json.loads(line)["text"].encode() for line in lines]
    assert all(ok for ok, _, _ in got)
    for ascii_only in (True, False):   # the same records written the other way
        for line in lines[:300]:
            assert check(json.dumps(json.loads(line), ensure_ascii=ascii_only).encode())


@pytest.mark.parametrize("block_bytes,kernel_lines,unit_rows", [(37, 4096, None), (1 << 20, 3, None),
                                                                (50, 2, 4), (1 << 20, 4096, 3)])
def test_reader_mixes_kernel_and_fallback_lines(tmp_path, monkeypatch, block_bytes, kernel_lines, unit_rows):
    """Lines the kernel hands back (NaN, escaped keys, bad rows) keep their place
    among the kernel's, across read blocks, kernel calls, units and batches."""
    from ube_stream.readers import jsonl, plan_units, read_unit, resolve_inputs

    monkeypatch.setattr(_compression, "BLOCK_BYTES", block_bytes)   # lines cut across blocks
    monkeypatch.setattr(jsonl, "_KERNEL_LINES", kernel_lines)
    lines = [b'{"text": "a\\u00e9"}', b'{"x": NaN, "text": "b"}', b'{"t\\u0065xt": "c"}', b'not json',
             b'', b'{"text": null}', b'{"text": "\\ud800"}', b'{"text": "' + "长".encode() * 30 + b'"}',
             b'{"text": 5}', b'{"other": 1}', b'{"text": "last"}']
    path = tmp_path / "m.jsonl"
    path.write_bytes(b"\n".join(lines))
    skips = SkipCounter()
    units = plan_units(resolve_inputs(str(path), on_error="skip"), unit_rows=unit_rows)
    assert len(units) == (1 if unit_rows is None else -(-len(lines) // unit_rows))
    batches = [b for u in units for b in read_unit(u, on_error="skip", skips=skips, batch_rows=2)]
    texts = [t for b in batches for t in b.to_pylist()]
    rows = [int(r) for b in batches for r in b.rows]
    assert texts == ["aé", "b", "c", "长" * 30, "last"] and rows == [0, 1, 2, 7, 10]
    assert all(len(b) <= 2 for b in batches)
    assert b"".join(b.utf8()[0].tobytes() for b in batches) == "".join(texts).encode()
    assert skips.counts == {"blank_line": 1, "invalid_json": 1, "invalid_text": 1, "missing_field": 1,
                            "not_string": 1, "null": 1}


def test_a_line_longer_than_many_blocks(tmp_path, monkeypatch):
    """A line spread over many read blocks is joined once (and read whole)."""
    monkeypatch.setattr(_compression, "BLOCK_BYTES", 64)
    from ube_stream.readers import iter_texts

    long = "长é\n" * 5000
    path = tmp_path / "long.jsonl"
    path.write_text('{"text": "a"}\n' + json.dumps({"text": long}, ensure_ascii=False) + '\n{"text": "z"}',
                    encoding="utf-8")
    assert list(iter_texts(str(path))) == ["a", long, "z"]


PIECES = [b'\\"', b"\\\\", b"\\n", b"\\u00e9", b"\\ud83d\\ude00", b"\x7f", b" ", "é".encode(), "中".encode(),
          "😀".encode(), b"\x01", b"\x1f", b'"', b"\xff", b"\x80", b"\xc0\xaf", b"\xc2", b"\xed\xa0\x80",
          b"\xe4\xb8", b"\xe0\x9f\xbf", b"\xf0\x9f\x98", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80"]


@pytest.mark.parametrize("tail", [3, 24])
@pytest.mark.parametrize("filler", ["a", "é", "中", "a中", "😀", "a😀é中"])
def test_every_piece_at_every_offset_of_a_16_byte_step(filler, tail):
    """A piece (an escape, a control byte, a stray quote, well-formed and
    ill-formed UTF-8) at each offset 0..40 of a string of ASCII, 2-, 3- or
    4-byte text, followed by a few characters or by more than 16 bytes: the
    kernel takes the line exactly when it is valid JSON in valid UTF-8, with
    json.loads's text (the 16-byte ASCII steps, the 16-byte UTF-8 blocks with
    their carry into the next block, the byte loop and its 3-byte path meet
    every piece at every alignment)."""
    fill = filler.encode()
    for piece in PIECES:
        for before in range(41):
            head = (fill * before)[:before] if len(fill) == 1 else fill * (before // len(fill))
            line = b'{"text": "' + head + piece + fill * tail + b'"}'
            try:
                valid = isinstance(json.loads(line.decode("utf-8")), dict)
            except ValueError:
                valid = False
            assert check(line) == valid, (piece, before, line)


@pytest.mark.parametrize("cut", [b"\xc3", b"\xe4", b"\xe4\xb8", b"\xf0", b"\xf0\x9f", b"\xf0\x9f\x98", b"\\", b"\\u00"])
@pytest.mark.parametrize("newline", [b"", b"\n"])
def test_input_that_ends_inside_a_sequence(cut, newline):
    """The block ends (or the line does) right after a lead byte, part of a
    UTF-8 sequence or part of an escape, at each offset 0..40 of the string:
    the kernel hands the line back and reports its end as the input's (the twin,
    json.loads, refuses these lines too)."""
    for before in range(41):
        line = b'{"text": "' + b"a" * before + cut + newline
        with pytest.raises(ValueError):
            json.loads(line.decode("utf-8", "surrogateescape"))
        assert check(line) is False, line
