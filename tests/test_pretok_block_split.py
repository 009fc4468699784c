"""The 64-byte block path of the split kernels (``block_split`` in ``_utf8.pxd``) at its
edges, against ``regex.findall``.

With 64 bytes left and an ASCII byte at the chunk start, the kernels classify the
block into bit masks (letters, [a-z], /, digits, U+0020, \\n, and what the masks leave
to the state machine: bytes >= 0x80, other controls, DEL, the apostrophe), work out
where chunks start from shifts of those masks, and resume the state machine at the
last start they decided.  These tests put each thing the masks do not decide (a
contraction, \\r\\n, \\t, a space run after \\n, o200k's [\\r\\n/]* tail, 2-, 3- and
4-byte characters, a case change, long digit runs) at every offset 0..79 of ASCII
texts of different shapes (words, one long run, digits, punctuation, space runs,
lines), with the text going on after it and with the buffer ending right after it,
so it falls at, before and after the end of a block, of the second block and of the
data.  The first invalid UTF-8 byte at every offset must be reported where Python's
codec finds it.  A hypothesis property checks ASCII-heavy text of many shapes.
"""
from __future__ import annotations

import pytest
from _helpers import SPLIT_PATTERN_NAMES, assert_split_matches_regex, slow_after
from hypothesis import given, settings
from hypothesis import strategies as st

from ube_stream.errors import InvalidTextError
from ube_stream.pretokenizer import chunk_bounds

PATTERNS = SPLIT_PATTERN_NAMES

BASES = [
    "the quick brown fox jumps over the lazy dog, " * 4,
    "ab " * 50,
    "x" * 150,
    "Hello World camelCase HTTPServer ABCdef " * 4,
    "1234567 89 0 " * 12,
    ".,;:!?" * 25,
    "a.b (c) [d] {e}: f-g ~/x " * 7,
    "a  b   c    d     e " * 8,
    "line one\nline two.\n\n  indented\n" * 5,
    " " * 150,
]
PROBES = ["", "'s", "'t", "'re", "'ll", "'ve", "'x", "'", " '", "'S", "\r\n", "\r", "\n", "\n\n", " \n",
          "\n  ", "\n  x", "\n \n", ".\n/", "/\n/x", ".\n\n", "\t", "\tx", "  ", "   ", "1234",
          "é", "中", "ſ", "\u212a", "\u0301", "\xa0", "\u3000", "😀", "Ab", "aB", "AB", "\x7f", "\x00", "\x1c"]
POSITIONS = range(80)
INVALID = [b"\xff", b"\x80", b"\xc3", b"\xe4\xb8", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"]


@pytest.mark.parametrize("name", PATTERNS)
@pytest.mark.parametrize("base", slow_after(BASES, keep=4), ids=lambda b: repr(b[:12]))
def test_probe_at_every_offset(name, base):
    texts = []
    for probe in PROBES:
        for p in POSITIONS:
            texts.append(base[:p] + probe + base[p:])   # the text goes on after it
            texts.append(base[:p] + probe)              # the buffer ends right after it
    assert_split_matches_regex(texts, name)


@pytest.mark.parametrize("name", PATTERNS)
def test_runs_ending_at_every_offset(name):
    # one run of each class from 0 to every length up to 140 (the run ends at, before and
    # after the block's end and the second block's), then every kind of follower
    texts = []
    for run in ["a", "A", "1", ".", " ", "\n", "/"]:
        for length in range(1, 141):
            for follower in ["", "x", " x", "  x", ".", "1", "\n", "'s", "é", "\t"]:
                texts.append(run * length + follower)
    assert_split_matches_regex(texts, name)


@pytest.mark.parametrize("name", PATTERNS)
def test_invalid_utf8_after_a_block(name):
    # the first invalid byte at every offset after ASCII text: the offset is Python's
    for base in BASES[:4] + BASES[6:]:
        raw = base.encode()
        for p in range(0, 100):
            for bad in INVALID:
                for data in (raw[:p] + bad + raw[p:], raw[:p] + bad):
                    with pytest.raises(UnicodeDecodeError) as truth:
                        data.decode("utf-8")
                    with pytest.raises(InvalidTextError) as info:
                        chunk_bounds(data, name)
                    assert info.value.offset == truth.value.start, (name, base[:12], p, bad)


# ASCII-heavy text: words of both cases, digits, the spaces and newlines between them,
# punctuation, contractions, and now and then \r, \t, a non-ASCII letter, space or mark
PIECES = ["the", "a", "I", "Word", "HTTP", "camelCase", "x" * 70, "don", "'t", "'s", "'LL", "'re", "'",
          " ", " ", " ", "  ", "    ", "\n", "\n\n", "\r\n", "\t", " \n", "\n  ",
          "0", "42", "1234567", ".", ",", "...", "(", ")", "/", ":/", "-", '"', "~",
          "é", "ß", "中文", "\u0301", "\xa0", "\u2019", "😀", "ſ"]


@pytest.mark.parametrize("name", PATTERNS)
@settings(max_examples=150, deadline=None)
@given(pieces=st.lists(st.sampled_from(PIECES), min_size=10, max_size=120))
def test_ascii_heavy_text_matches_regex(name, pieces):
    assert_split_matches_regex(["".join(pieces)], name)
