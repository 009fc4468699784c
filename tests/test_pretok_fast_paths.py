"""The ASCII fast paths of the split kernels at their edges, against ``regex.findall``.

The kernels take ASCII words (``word_end`` in ``_utf8.pxd``: one 16-byte SSE2 load
or 8-byte SWAR words, then bytes), ASCII letter case runs (o200k) and runs of
U+0020 (``ascii_run``) many bytes at a time, and fall back to the per-character
state machine when a byte >= 0x80 follows or fewer than 16 bytes are left.  These
tests put every length of run from 1 to 40 before every kind of follower
(ASCII punctuation, an ASCII letter of the other case, a contraction, a mark, a
2-, 3- and 4-byte letter, a non-ASCII space, the end of the buffer, invalid
UTF-8) with 0 to 18 bytes after it, so each run ends at, before and after an
8- and a 16-byte step and at the end of the data.  The truth is the ``regex``
module's ``findall`` with each pattern, and Python's UTF-8 codec for the offset
of the first invalid byte.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from _helpers import SPLIT_PATTERN_NAMES, assert_split_matches_regex, compiled_split_pattern

from ube_stream.errors import InvalidTextError
from ube_stream.pretokenizer import chunk_bounds

PATTERNS = SPLIT_PATTERN_NAMES

PREFIXES = ["", " ", "(", "'", "\t", "\n", "\r", "é", "1", "\x00", "\x7f"]
FOLLOWERS = ["", " ", ".", ",x", "'s", "'S", "'ll", "'x", "1", "\n", "\r\n", "  x", "A", "a",
             "\u0301", "é", "ж", "中", "𝐀", "ǅ", "\u3000", "\xa0", "😀"]
LENGTHS = list(range(1, 41))
TAILS = ["", " ", "xy", " " * 7, "z" * 18]


def words(length: int) -> list[str]:
    """ASCII letter runs of ``length``: one case, the other, and both mixed (o200k
    splits by case: [A-Z]*[a-z]+ and [A-Z]+)."""
    lower = "".join(chr(0x61 + (i * 7) % 26) for i in range(length))
    shapes = {lower, lower.upper(), lower[:1].upper() + lower[1:], lower[:-1].upper() + lower[-1:],
              lower[: length // 2].upper() + lower[length // 2:], lower[: length // 2] + lower[length // 2:].upper()}
    return sorted(shapes)


@pytest.mark.parametrize("name", list(PATTERNS))
def test_word_runs_at_every_length_and_follower(name):
    # every (length, shape, follower) with three of the prefixes and one tail, in rotation
    # (every prefix and tail meets every length and follower across the shapes)
    texts = []
    for k, (length, follower) in enumerate(itertools.product(LENGTHS, FOLLOWERS)):
        for j, word in enumerate(words(length)):
            for i in range(3):
                prefix = PREFIXES[(k + 3 * j + i) % len(PREFIXES)]
                texts.append(prefix + word + follower + TAILS[(k + j + i) % len(TAILS)])
    assert_split_matches_regex(texts, name)


@pytest.mark.parametrize("name", list(PATTERNS))
def test_word_runs_near_the_end_of_the_buffer(name):
    # a word starting 0..20 bytes before the end: the 16-byte load is not taken, the
    # SWAR and byte loops are; each text is one document, so its end is the buffer's
    texts = [lead + prefix + word + tail
             for lead in ["", "x.", "  ", "ab cd "]
             for length in range(1, 21) for word in words(length)
             for prefix in ["", " ", "(", "'"] for tail in ["", "é", "'s", ".", " "]]
    assert_split_matches_regex(texts, name)
    for text in texts[:: 37]:          # and alone, through chunk_bounds
        expected = np.cumsum([len(c.encode("utf-8")) for c in compiled_split_pattern(name).findall(text)], dtype=np.int64)
        assert np.array_equal(chunk_bounds(text.encode("utf-8"), name), expected), text


@pytest.mark.parametrize("name", list(PATTERNS))
def test_space_runs_at_every_length(name):
    texts = [before + " " * k + after + tail
             for k in range(0, 41)
             for before in ["", "\n", "x", "\t", "\r\n", "\u3000", "."]
             for after in ["", "x", "\n", "\t", "é", "\u3000", ".", "\r\n", "1", "\xa0", " \n"]
             for tail in ["", " ", "y" * 17]]
    assert_split_matches_regex(texts, name)


INVALID = [b"\xff", b"\x80", b"\xc0\x80", b"\xc3", b"\xe4\xb8", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
           b"\xf0\x9f\x98", b"\xe4\x41\x41"]


@pytest.mark.parametrize("name", list(PATTERNS))
@pytest.mark.parametrize("bad", INVALID)
def test_invalid_utf8_right_after_a_fast_run(name, bad):
    # invalid bytes as the follower of an ASCII word, a U+0020 run or an o200k case run,
    # with or without 16 bytes after: the offset is the first invalid byte, as Python says
    for run, tail in itertools.product(
            [w for length in (1, 7, 8, 9, 15, 16, 17, 31, 33) for w in words(length)]
            + [" " + w for w in words(5)] + [" " * k for k in (1, 2, 15, 16, 17)] + ["é" * 3, "ab中"],
            [b"", b" ok", b"x" * 20]):
        data = run.encode("utf-8") + bad + tail
        with pytest.raises(UnicodeDecodeError) as truth:
            data.decode("utf-8")
        with pytest.raises(InvalidTextError) as info:
            chunk_bounds(data, name)
        assert info.value.offset == truth.value.start, (run, bad, tail)
