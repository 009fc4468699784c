"""SuperBPE spans (rule v1): the kernel (``_pretok.span_ends`` over ``_spans.pxd``)
== the readable twin ``superword_span_ends_reference`` over the twin's own
chunks, on hand-worked cases, hypothesis text for every built-in pattern and
the real multilingual fixtures; span keys == the chunks joined by 0xFF;
document boundaries; the class table against ``regex``; errors."""
from __future__ import annotations

import numpy as np
import pytest
import regex
from _helpers import read_jsonl_zst
from hypothesis import given, settings
from hypothesis import strategies as st

from ube_stream import _pretok
from ube_stream._reference import (
    pretokenize,
    pretokenize_script,
    superword_joinable_reference,
    superword_span_ends_reference,
)
from ube_stream.errors import InvalidTextError
from ube_stream.pretokenizer import (
    CL100K_PATTERN,
    GPT2_PATTERN,
    LLAMA3_PATTERN,
    O200K_PATTERN,
    SPAN_GLUE,
    SPAN_JOIN,
    SPAN_LETTER,
    SPAN_OTHER,
    chunk_bounds,
    chunk_bounds_batch,
    span_class_table,
    span_ends,
    span_keys,
    superword_spans,
)

PATTERNS = {"gpt2": GPT2_PATTERN, "cl100k": CL100K_PATTERN, "llama3": LLAMA3_PATTERN, "o200k": O200K_PATTERN}


def reference_chunks(text: str, pattern: str):
    return pretokenize_script(text) if pattern == "script" else pretokenize(text, PATTERNS[pattern])


def reference_spans(text: str, pattern: str):
    chunks = reference_chunks(text, pattern)
    spans, first = [], 0
    for stop in superword_span_ends_reference(chunks):
        spans.append(chunks[first:stop])
        first = stop
    return spans


# ------------------------------------------------------------------ hand-worked

GOLDEN = [
    # (text, pattern, spans worked out by hand from rule v1)
    ("Hello world", "gpt2", [["Hello", " world"]]),
    ("Hello, world!", "gpt2", [["Hello"], [","], [" world"], ["!"]]),             # punctuation ends a span
    ("it's a dog", "gpt2", [["it", "'s", " a", " dog"]]),                          # contraction glue joins
    ("rock ’n’ roll", "gpt2", [["rock"], [" ’"], ["n"], ["’"], [" roll"]]),      # glue alone holds no letter
    ("it’s ok", "cl100k", [["it", "’s", " ok"]]),                                  # U+2019 with a letter is glue
    ("by the way\nof course", "gpt2", [["by", " the", " way"], ["\n"], ["of", " course"]]),
    ("a  b", "gpt2", [["a"], [" "], [" b"]]),                                     # a lone space chunk: no letter
    ("in 2024 we", "gpt2", [["in"], [" 2024"], [" we"]]),                          # digits end a span
    ("café ä", "gpt2", [["café", " ä"]]),
    ("e\u0301t\u00e9", "gpt2", [["e", "\u0301", "t\u00e9"]]),                     # GPT-2 cuts at the mark; a mark is a letter here
    ("I'm HERE", "cl100k", [["I", "'m", " HERE"]]),
    ("the cat's 3 hats", "cl100k", [["the", " cat", "'s"], [" "], ["3"], [" hats"]]),
    ("HelloWorld test", "o200k", [["Hello", "World", " test"]]),
    ("Hello 😀 there", "gpt2", [["Hello"], [" 😀"], [" there"]]),                  # emoji: a symbol
    ("Hello world 日本です", "script", [["Hello", " world"], [" "], ["日本です"]]),
    ("नमस्ते दुनिया", "gpt2", [["नमस", "्", "त", "े", " द", "ु", "न", "ि", "य", "ा"]]),  # Devanagari marks join
    ("", "gpt2", []),
]


@pytest.mark.parametrize("text,pattern,expected", GOLDEN)
def test_golden_spans(text, pattern, expected):
    assert superword_spans(text, pattern) == expected
    assert reference_spans(text, pattern) == expected


def test_joinable_rule_by_hand():
    for chunk in ["a", " a", "'s", " don't", "l’", "\u0301", " é"]:
        assert superword_joinable_reference(chunk), chunk
    for chunk in ["", " ", "'", "’", ",", " 42", "a1", "\n", " a\n", "\ta", "😀", "a-b", "\u00a0a"]:
        assert not superword_joinable_reference(chunk), chunk


# ------------------------------------------------------------------ kernel == twin

ALPHABET = st.sampled_from(list("aZé ' ’,.!?-1239\n\t\r") + ["\u0301", "\u00a0", "ж", "日", "本", "😀", "ने",
                                                           "\u2019s", " the", "'ll", "ー", "\u200d", "ß"])
TEXTS = st.lists(ALPHABET, max_size=40).map("".join)


@settings(max_examples=150, deadline=None)
@given(TEXTS, st.sampled_from(["gpt2", "cl100k", "llama3", "o200k", "script"]))
def test_kernel_matches_twin_hypothesis(text, pattern):
    assert superword_spans(text, pattern) == reference_spans(text, pattern)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30), st.sampled_from(["gpt2", "o200k"]))
def test_kernel_matches_twin_any_text(text, pattern):
    text = regex.sub(r"[\ud800-\udfff]", "x", text)
    assert superword_spans(text, pattern) == reference_spans(text, pattern)


def test_kernel_matches_twin_real_text():
    rows = read_jsonl_zst("parallel_sample.jsonl.zst")[::7]
    for pattern in ("gpt2", "cl100k", "script"):
        for row in rows:
            assert superword_spans(row["text"], pattern) == reference_spans(row["text"], pattern), (
                pattern, row["key"], row["lang"])


def test_class_table_against_regex():
    table = span_class_table()
    rng = np.random.default_rng(13)
    sample = set(rng.integers(0, 0x110000, 20000).tolist()) | set(range(0x3000)) | {0x20, 0x27, 0x2019}
    for cp in sorted(sample):
        if 0xD800 <= cp < 0xE000:
            assert table[cp] == SPAN_OTHER
            continue
        char = chr(cp)
        want = (SPAN_GLUE if char in (" ", "'", "\u2019") else
                SPAN_LETTER if regex.match(r"[\p{L}\p{M}]", char) else SPAN_OTHER)
        assert table[cp] == want, hex(cp)


# ------------------------------------------------------------------ batch, keys, errors

def test_spans_never_cross_documents():
    docs = ["the end", " of it", "", "x y"]
    data = "".join(docs).encode()
    offsets = np.cumsum([0] + [len(d.encode()) for d in docs])
    ends, doc_chunks = chunk_bounds_batch(data, offsets)
    assert span_ends(data, ends).tolist() == [6]                    # one run without the boundaries
    assert span_ends(data, ends, doc_chunk_offsets=doc_chunks).tolist() == [2, 4, 6]


def test_span_keys_join_chunks_with_ff():
    text = "Hello world, it's me\n\nok"
    data = text.encode()
    ends = chunk_bounds(data)
    spans = span_ends(data, ends)
    keys, key_ends = span_keys(data, ends, spans)
    got = [keys[a:b].tobytes() for a, b in zip([0] + key_ends[:-1].tolist(), key_ends.tolist())]
    want = [bytes([SPAN_JOIN]).join(c.encode() for c in span) for span in reference_spans(text, "gpt2")]
    assert got == want
    assert got[0] == b"Hello\xff world" and SPAN_JOIN == 0xFF


def test_span_keys_with_start_offset():
    data = b"xx" + b"ab cd"
    ends = np.array([4, 7], np.int64)          # chunks "ab", " cd" after a 2-byte prefix
    spans = span_ends(data, ends, start=2)
    assert spans.tolist() == [2]
    keys, key_ends = span_keys(data, ends, spans, start=2)
    assert keys.tobytes() == b"ab\xff cd" and key_ends.tolist() == [6]


def test_invalid_utf8_is_a_status_with_its_offset():
    data = np.frombuffer(b"ab \xc3(", np.uint8)
    out = np.empty(2, np.int64)
    err = np.zeros(2, np.int64)
    status, count = _pretok.span_ends(data, np.array([2, 5], np.int64), span_class_table(), out, 0, None, err)
    assert status < 0 and count is None and err[0] == 3
    with pytest.raises(InvalidTextError):
        span_ends(data, np.array([2, 5], np.int64))


def test_shape_errors_are_value_errors():
    data = b"ab"
    with pytest.raises(ValueError, match="span_class_table"):
        _pretok.span_ends(np.frombuffer(data, np.uint8), np.array([2], np.int64),
                          np.zeros(0x110000, np.uint8), np.empty(1, np.int64))
    with pytest.raises(ValueError, match="non-decreasing"):
        span_ends(data, np.array([2, 1], np.int64))
    with pytest.raises(ValueError, match="last span"):
        span_keys(data, np.array([1, 2], np.int64), np.array([1], np.int64))
