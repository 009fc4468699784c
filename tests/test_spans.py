"""SuperBPE spans (rules v1 and liu): the kernel (``_pretok.span_ends`` over ``_spans.pxd``)
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


def reference_spans(text: str, pattern: str, rule: str = "v1"):
    chunks = reference_chunks(text, pattern)
    spans, first = [], 0
    for stop in superword_span_ends_reference(chunks, rule):
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


LIU_GOLDEN = [
    # (text, pattern, spans worked out by hand from rule liu: Liu et al.'s stage-2 pre-tokens at chunk
    # granularity: a chunk with a number is a span of its own; cuts after a line feed and between ':' and ' ')
    ("Hello, world!", "gpt2", [["Hello", ",", " world", "!"]]),                    # punctuation joins
    ("by the way, it's 42.", "gpt2", [["by", " the", " way", ",", " it", "'s"], [" 42"], ["."]]),
    ("Note: see it", "gpt2", [["Note", ":"], [" see", " it"]]),                    # no token holds ": "
    ("a:b c", "gpt2", [["a", ":", "b", " c"]]),                                    # ':' then no space joins
    ("x :  y", "gpt2", [["x", " :"], [" ", " y"]]),                                 # ': ' between chunks cuts
    ("one\ntwo\n\nthree", "gpt2", [["one", "\n"], ["two", "\n"], ["\n"], ["three"]]),
    ("end.\r\nNext", "gpt2", [["end", ".", "\r", "\n"], ["Next"]]),                 # cut after the line feed
    ("a  b 😀 c", "gpt2", [["a", " ", " b", " 😀", " c"]]),                          # spaces, emoji join
    ("in 2024 we", "cl100k", [["in", " "], ["202"], ["4"], [" we"]]),              # digit chunks stand alone
    ("x½y", "gpt2", [["x"], ["½"], ["y"]]),                                         # \p{No} is a number
    ("ⅫⅠ test", "gpt2", [["ⅫⅠ"], [" test"]]),                                    # \p{Nl} too
    ("", "gpt2", []),
]


@pytest.mark.parametrize("text,pattern,expected", GOLDEN)
def test_golden_spans(text, pattern, expected):
    assert superword_spans(text, pattern) == expected
    assert reference_spans(text, pattern) == expected


@pytest.mark.parametrize("text,pattern,expected", LIU_GOLDEN)
def test_golden_spans_liu(text, pattern, expected):
    assert superword_spans(text, pattern, rule="liu") == expected
    assert reference_spans(text, pattern, "liu") == expected


def test_joinable_rule_liu_by_hand():
    for chunk in ["a", " ", ",", "\n", ":", " 😀", "\t", "\u00a0a"]:
        assert superword_joinable_reference(chunk, "liu"), chunk
    for chunk in [" 42", "a1", "½", "٣", "Ⅻ"]:
        assert not superword_joinable_reference(chunk, "liu"), chunk


def test_joinable_rule_by_hand():
    for chunk in ["a", " a", "'s", " don't", "l’", "\u0301", " é"]:
        assert superword_joinable_reference(chunk), chunk
    for chunk in ["", " ", "'", "’", ",", " 42", "a1", "\n", " a\n", "\ta", "😀", "a-b", "\u00a0a"]:
        assert not superword_joinable_reference(chunk), chunk


# ------------------------------------------------------------------ kernel == twin

ALPHABET = st.sampled_from(list("aZé ' ’,.!?-1239\n\t\r") + ["\u0301", "\u00a0", "ж", "日", "本", "😀", "ने",
                                                           "\u2019s", " the", "'ll", "ー", "\u200d", "ß"])
TEXTS = st.lists(ALPHABET, max_size=40).map("".join)


RULES = st.sampled_from(["v1", "liu"])


@settings(max_examples=200, deadline=None)
@given(TEXTS, st.sampled_from(["gpt2", "cl100k", "llama3", "o200k", "script"]), RULES)
def test_kernel_matches_twin_hypothesis(text, pattern, rule):
    assert superword_spans(text, pattern, rule=rule) == reference_spans(text, pattern, rule)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30), st.sampled_from(["gpt2", "o200k"]), RULES)
def test_kernel_matches_twin_any_text(text, pattern, rule):
    text = regex.sub(r"[\ud800-\udfff]", "x", text)
    assert superword_spans(text, pattern, rule=rule) == reference_spans(text, pattern, rule)


@pytest.mark.parametrize("rule", ["v1", "liu"])
def test_kernel_matches_twin_real_text(rule):
    rows = read_jsonl_zst("parallel_sample.jsonl.zst")[::7] + read_jsonl_zst("docs_sample.jsonl.zst")[::5]
    for pattern in ("gpt2", "cl100k", "script"):
        for row in rows:
            assert superword_spans(row["text"], pattern, rule=rule) == reference_spans(row["text"], pattern, rule), (
                pattern, row.get("key"), row.get("lang"))


def test_liu_spans_are_longer_on_real_text():
    # the point of the rule: fewer, longer spans than v1 (every v1 span lies inside one liu span)
    text = "\n".join(row["text"] for row in read_jsonl_zst("parallel_sample.jsonl.zst")[:50])
    v1, liu = superword_spans(text, rule="v1"), superword_spans(text, rule="liu")
    assert sum(map(len, v1)) == sum(map(len, liu))
    assert len(liu) < len(v1) / 2
    ends_v1, ends_liu = np.cumsum([len(s) for s in v1]), set(np.cumsum([len(s) for s in liu]).tolist())
    assert ends_liu <= set(ends_v1.tolist())


def test_class_table_liu_against_regex():
    table = span_class_table("liu")
    rng = np.random.default_rng(17)
    sample = set(rng.integers(0, 0x110000, 20000).tolist()) | set(range(0x3000))
    for cp in sorted(sample):
        if 0xD800 <= cp < 0xE000:
            assert table[cp] == SPAN_OTHER
            continue
        want = SPAN_OTHER if regex.match(r"\p{N}", chr(cp)) else SPAN_LETTER
        assert table[cp] == want, hex(cp)


def test_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="'v1', 'liu'"):
        span_class_table("v2")
    with pytest.raises(ValueError, match="superbpe_spans"):
        superword_spans("a b", rule="LIU")


def test_cuts_skip_empty_chunks():
    # chunk ends straight into the kernel may hold empty chunks: the cut test never reads outside them
    data = np.frombuffer(b"a:\n b", np.uint8)
    for rule in ("v1", "liu"):
        out = np.empty(5, np.int64)
        err = np.zeros(2, np.int64)
        status, count = _pretok.span_ends(data, np.array([0, 0, 2, 3, 5], np.int64), span_class_table(rule),
                                          out, 0, None, err)
        assert status == 0
        # chunks "", "", "a:", "\n", " b": empty chunks are not joinable; liu cuts after "\n"
        assert out[:count].tolist() == ([1, 2, 3, 4, 5] if rule == "v1" else [1, 2, 4, 5])


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

@pytest.mark.parametrize("rule", ["v1", "liu"])
def test_spans_never_cross_documents(rule):
    docs = ["the end", " of it", "", "x y"]
    data = "".join(docs).encode()
    offsets = np.cumsum([0] + [len(d.encode()) for d in docs])
    ends, doc_chunks = chunk_bounds_batch(data, offsets)
    assert span_ends(data, ends, rule=rule).tolist() == [6]                    # one run without the boundaries
    assert span_ends(data, ends, doc_chunk_offsets=doc_chunks, rule=rule).tolist() == [2, 4, 6]


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
