"""GPT-2 pre-tokenizer kernel == regex.findall(GPT2_PATTERN) (the independent truth).

The kernel is checked on every Unicode scalar value, on every pair and triple
of class representatives, on hypothesis text and on the real multilingual
fixtures; its batch entry against per-document calls; its errors against
Python's own codecs; cl100k/o200k/custom patterns against ``regex``.
"""
from __future__ import annotations

import hashlib
import itertools
import os
from pathlib import Path

import numpy as np
import pytest
import regex
from _helpers import read_jsonl_zst
from hypothesis import given, settings
from hypothesis import strategies as st

from ube_stream import _pretok, _reference
from ube_stream.errors import InvalidTextError
from ube_stream.pretokenizer import (
    CL100K_PATTERN,
    GPT2_PATTERN,
    O200K_PATTERN,
    SPLIT_GPT2,
    chunk_bounds,
    chunk_bounds_batch,
    gpt2_class_table,
    pretokenize,
)

GPT2 = regex.compile(GPT2_PATTERN)

LETTERS = ["a", "Z", "é", "ж", "α", "ǅ", "中", "あ", "ก", "क", "𝐀", "ß"]
MARKS = ["\u0301", "\u0e31", "\u093f", "\u200d", "\ufe0f"]          # \p{M} / Cf: not letters
DIGITS = ["0", "7", "٣", "५", "Ⅻ", "½", "𝟘"]
SPACES = [" ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f",
          "\x85", "\xa0", "\u2009", "\u2028", "\u3000"]
CONTRACTION_LETTERS = list("strevmld") + list("STREVMLD")
APOSTROPHES = ["'", "\u2019"]
PUNCTUATION = ["!", ".", "-", "¿", "、", "\x00", "😀"]
REPRESENTATIVES = LETTERS + MARKS + DIGITS + SPACES + CONTRACTION_LETTERS + APOSTROPHES + PUNCTUATION


def byte_ends(chunks):
    """Chunk strings -> cumulative end byte offsets (what chunk_bounds returns)."""
    return np.cumsum([len(chunk.encode("utf-8")) for chunk in chunks], dtype=np.int64)


def split_batch(texts):
    data = "".join(texts).encode("utf-8")
    offsets = np.concatenate([[0], np.cumsum([len(t.encode("utf-8")) for t in texts])]).astype(np.int64)
    return data, offsets, chunk_bounds_batch(data, offsets)


def assert_batch_matches_regex(texts):
    data, offsets, (ends, doc_chunk_offsets) = split_batch(texts)
    expected_ends = []
    expected_counts = []
    for text, start in zip(texts, offsets[:-1].tolist()):
        chunks = GPT2.findall(text)
        expected_counts.append(len(chunks))
        position = start
        for chunk in chunks:
            position += len(chunk.encode("utf-8"))
            expected_ends.append(position)
    assert np.array_equal(np.diff(doc_chunk_offsets), expected_counts)
    if not np.array_equal(ends, expected_ends):
        mismatch = next(d for d in range(len(texts))
                        if not np.array_equal(ends[doc_chunk_offsets[d]:doc_chunk_offsets[d + 1]],
                                              np.asarray(expected_ends[sum(expected_counts[:d]):
                                                                       sum(expected_counts[:d + 1])])))
        text = texts[mismatch]
        pytest.fail(f"{text!r}: kernel {pretokenize(text)!r} != regex {GPT2.findall(text)!r}")


# --------------------------------------------------------------------------- worked examples

@pytest.mark.parametrize("text, expected", [
    ("'sam", ["'s", "am"]),
    ("a\n\nb", ["a", "\n", "\n", "b"]),
    ("  a", [" ", " a"]),
    ("hello world  ", ["hello", " world", "  "]),
    (" 's", [" '", "s"]),
    ("I'M we'll", ["I", "'", "M", " we", "'ll"]),
    ("it\u2019s", ["it", "\u2019", "s"]),
    ("\u00a0a", ["\u00a0", "a"]),
    ("x \n y", ["x", " \n", " y"]),
    ("café\u0301!", ["café", "\u0301!"]),
    ("", []),
])
def test_worked_examples(text, expected):
    assert regex.findall(GPT2_PATTERN, text) == expected  # the examples themselves are right
    assert pretokenize(text) == expected


# --------------------------------------------------------------------------- class table

def test_class_table_matches_regex_per_character():
    table = gpt2_class_table()
    assert table.shape == (0x110000,) and table.dtype == np.uint8
    assert not table[0xD800:0xE000].any()
    sample = list(range(0, 0x110000, 251)) + [ord(c) for c in "".join(REPRESENTATIVES)]
    for cp in sample:
        if 0xD800 <= cp <= 0xDFFF:
            continue
        assert table[cp] == _reference.char_class(chr(cp)), f"U+{cp:04X}"


@pytest.mark.slow
def test_class_table_equals_a_probe_of_every_scalar_value():
    # the table is built from a few regex passes over the assigned characters; the
    # straightforward probe asks the twin (regex.match, one character at a time) about
    # every one of the 0x110000 code points, unassigned and private-use ones included
    # (the probe itself: gpt2_class_table() may come from the table cache)
    from ube_stream.pretokenizer import _probe_gpt2_classes

    table = _probe_gpt2_classes()
    assert np.array_equal(table, gpt2_class_table())
    want = np.zeros(0x110000, dtype=np.uint8)
    for cp in itertools.chain(range(0xD800), range(0xE000, 0x110000)):
        want[cp] = _reference.char_class(chr(cp))
    mismatched = np.flatnonzero(table != want)
    assert mismatched.size == 0, [f"U+{int(cp):04X}" for cp in mismatched[:10]]


# --------------------------------------------------------------------------- (a) every scalar value

@pytest.mark.parametrize("separator", ["a", "1", "!", " "])
def test_every_scalar_value(separator):
    # each scalar value between separators of each class: a wrong class for any
    # code point changes where the chunks end (it merges with, or splits from,
    # the separator run), and the optional space is exercised by " ".
    codepoints = np.arange(0x110000, dtype=np.uint32)
    codepoints = codepoints[(codepoints < 0xD800) | (codepoints > 0xDFFF)]
    assert codepoints.shape[0] == 1_112_064
    interleaved = np.empty(2 * codepoints.shape[0], dtype="<u4")
    interleaved[0::2] = codepoints
    interleaved[1::2] = ord(separator)
    text = interleaved.tobytes().decode("utf-32-le")
    assert pretokenize(text) == GPT2.findall(text)


# --------------------------------------------------------------------------- (b) pairs and triples

def test_every_pair_of_representatives():
    texts = [a + b for a, b in itertools.product(REPRESENTATIVES, repeat=2)]
    assert_batch_matches_regex(texts)
    for text in texts[::7]:
        assert pretokenize(text) == _reference.pretokenize_gpt2(text)


def test_every_triple_of_representatives():
    texts = ["".join(triple) for triple in itertools.product(REPRESENTATIVES, repeat=3)]
    assert len(texts) > 200_000
    assert_batch_matches_regex(texts)


# --------------------------------------------------------------------------- (c) hypothesis

interesting_text = st.lists(
    st.one_of(st.sampled_from(REPRESENTATIVES), st.characters(blacklist_categories=("Cs",))),
    max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(interesting_text)
def test_hypothesis_text_matches_regex_and_reference(text):
    chunks = pretokenize(text)
    assert chunks == GPT2.findall(text)
    assert chunks == _reference.pretokenize_gpt2(text)
    assert np.array_equal(chunk_bounds(text.encode("utf-8")), byte_ends(chunks))


@settings(max_examples=100, deadline=None)
@given(st.lists(interesting_text, max_size=8))
def test_batch_equals_per_document(texts):
    data, offsets, (ends, doc_chunk_offsets) = split_batch(texts)
    assert doc_chunk_offsets.shape == (len(texts) + 1,)
    for d in range(len(texts)):
        own = chunk_bounds(data[offsets[d]:offsets[d + 1]])
        assert np.array_equal(ends[doc_chunk_offsets[d]:doc_chunk_offsets[d + 1]] - offsets[d], own)


# --------------------------------------------------------------------------- (d) real text

@pytest.mark.parametrize("name", ["docs_sample.jsonl.zst", "parallel_sample.jsonl.zst"])
def test_real_multilingual_text(name):
    texts = [row["text"] for row in read_jsonl_zst(name)]
    assert texts
    assert_batch_matches_regex(texts)
    for text in texts[::13]:
        assert pretokenize(text) == GPT2.findall(text)
    joined = "\n".join(texts[:50])
    assert pretokenize(joined[:20_000]) == _reference.pretokenize_gpt2(joined[:20_000])


# --------------------------------------------------------------------------- list[str] from the kernel

@pytest.mark.parametrize("name", ["gpt2", "cl100k", "llama3", "o200k"])
@pytest.mark.parametrize("kind", ["ascii", "latin1", "bmp", "astral"])
def test_split_text_is_findall_for_every_string_kind(name, kind):
    """split_text slices the str itself at character offsets: the four storage
    kinds of a CPython str (ASCII, 1-, 2-, 4-byte) each get it right, including
    chunks after a character of another width."""
    extra = {"ascii": "", "latin1": "é ß¿", "bmp": "é 中文 ж", "astral": "é 中 🙂𝐀 x"}[kind]
    text = f"Hello,  world! It's 12345 ok\n\n  {extra} tail'S  \r\n end {extra}  "
    compiled = regex.compile(pretokenizer_pattern(name))
    assert pretokenize(text, name) == compiled.findall(text)
    for cut in range(len(text)):  # every prefix: the cache and the offsets never run past the data
        assert pretokenize(text[:cut], name) == compiled.findall(text[:cut])


def pretokenizer_pattern(name):
    from ube_stream.pretokenizer import ALIASES, PATTERNS

    return PATTERNS.get(name) or ALIASES[name]


def test_split_text_cache_hands_out_equal_chunks_only():
    """Many distinct short chunks (far more than the string cache has slots, so
    slots collide and are replaced) and repeated ones: every chunk is the right
    text, and equal chunks may share one object."""
    words = [f"w{i:05d}" for i in range(20_000)]
    text = " ".join(words + words[::-1] + ["é"] * 3)
    chunks = pretokenize(text)
    assert chunks == GPT2.findall(text)
    assert "".join(chunks) == text


def test_split_text_entry_checks_arguments():
    from ube_stream.pretokenizer import tiktoken_class_table

    status, chunks = _pretok.split_text("a b", gpt2_class_table(), SPLIT_GPT2)
    assert (status, chunks) == (0, ["a", " b"])
    assert _pretok.split_text("", gpt2_class_table(), SPLIT_GPT2) == (0, [])
    with pytest.raises(ValueError, match="gpt2_class_table"):
        _pretok.split_text("a b", tiktoken_class_table(), SPLIT_GPT2)
    with pytest.raises(TypeError):
        _pretok.split_text(b"a b", gpt2_class_table(), SPLIT_GPT2)
    with pytest.raises(UnicodeEncodeError):
        _pretok.split_text("a \udc80", gpt2_class_table(), SPLIT_GPT2)


# --------------------------------------------------------------------------- inputs

def test_chunk_bounds_accepts_bytes_memoryview_and_arrays():
    text = "Grüße, 世界! It's 2024.\n"
    expected = byte_ends(GPT2.findall(text))
    data = text.encode("utf-8")
    for form in (data, bytearray(data), memoryview(data), np.frombuffer(data, np.uint8)):
        assert np.array_equal(chunk_bounds(form), expected)
    padded = np.frombuffer(b"xx" + data, np.uint8)[2:]
    assert np.array_equal(chunk_bounds(padded), expected)
    with pytest.raises(TypeError):
        chunk_bounds(text)
    with pytest.raises(TypeError):
        chunk_bounds(np.zeros(3, np.int32))


def test_kernel_checks_buffer_sizes():
    kernel = _pretok
    table = gpt2_class_table()
    with pytest.raises(ValueError):
        kernel.split(b"abc def", table, np.empty(3, np.int64), SPLIT_GPT2)
    with pytest.raises(ValueError):
        kernel.split(b"abc", table[:10], np.empty(3, np.int64), SPLIT_GPT2)
    with pytest.raises(ValueError):
        kernel.split_batch(b"abc", np.array([0, 2, 1, 3]), table, np.empty(3, np.int64),
                           np.empty(4, np.int64), SPLIT_GPT2)
    with pytest.raises(ValueError):
        kernel.split_batch(b"abc", np.array([0, 4]), table, np.empty(4, np.int64),
                           np.empty(2, np.int64), SPLIT_GPT2)


def test_empty_documents_have_no_chunks():
    ends, doc_chunk_offsets = chunk_bounds_batch(b"ab", [0, 0, 2, 2])
    assert ends.tolist() == [2]
    assert doc_chunk_offsets.tolist() == [0, 0, 1, 1]
    assert chunk_bounds(b"").shape == (0,)
    ends, doc_chunk_offsets = chunk_bounds_batch(b"", [0])
    assert ends.shape == (0,) and doc_chunk_offsets.tolist() == [0]


# --------------------------------------------------------------------------- errors

@pytest.mark.parametrize("pattern", ["gpt2", "cl100k", "script", r"regex:\w+"])
def test_lone_surrogate_names_character_offset(pattern):
    text = "héllo 世界 \ud83d tail"
    with pytest.raises(InvalidTextError) as info:
        pretokenize(text, pattern)
    assert info.value.offset == 9 and info.value.unit == "char"
    assert "U+D83D" in str(info.value) and "character offset 9" in str(info.value)


INVALID_UTF8 = [b"\xff", b"\x80", b"\xc0\x80", b"\xc3", b"\xe4\xb8", b"\xed\xa0\x80",
                b"\xf4\x90\x80\x80", b"\xf0\x9f\x98", b"\xe4\x41\x41", b"\xf8\x88\x80\x80\x80"]


@pytest.mark.parametrize("bad", INVALID_UTF8)
@pytest.mark.parametrize("prefix", [b"", b"ab", b"a ", b" ", b"\xc3\xa9 ", b"'", b"  \n", b"12"])
def test_invalid_utf8_names_byte_offset(prefix, bad):
    data = prefix + bad + b" ok"
    with pytest.raises(UnicodeDecodeError) as truth:
        data.decode("utf-8")
    for pattern in ("gpt2", "o200k"):
        with pytest.raises(InvalidTextError) as info:
            chunk_bounds(data, pattern)
        assert info.value.offset == truth.value.start == len(prefix)
        assert info.value.unit == "byte"
        assert f"byte offset {len(prefix)}" in str(info.value)


@settings(max_examples=200, deadline=None)
@given(interesting_text, st.integers(0, 255), st.data())
def test_invalid_utf8_offset_matches_python_codec(text, byte, data):
    encoded = text.encode("utf-8")
    where = data.draw(st.integers(0, len(encoded)))
    corrupted = encoded[:where] + bytes([byte]) + encoded[where:]
    try:
        corrupted.decode("utf-8")
    except UnicodeDecodeError as exc:
        with pytest.raises(InvalidTextError) as info:
            chunk_bounds(corrupted)
        assert info.value.offset == exc.start
    else:
        assert np.array_equal(chunk_bounds(corrupted), byte_ends(GPT2.findall(corrupted.decode())))


@pytest.mark.parametrize("pattern", ["gpt2", "cl100k"])
def test_batch_error_names_document_and_offset(pattern):
    documents = ["first document", "", "zweites Dokument ", "third"]
    encoded = [d.encode("utf-8") for d in documents]
    encoded[2] = encoded[2][:7] + b"\xe2\x82" + encoded[2][7:]
    offsets = np.concatenate([[0], np.cumsum([len(e) for e in encoded])])
    with pytest.raises(InvalidTextError) as info:
        chunk_bounds_batch(b"".join(encoded), offsets, pattern)
    assert info.value.offset == 7 and info.value.document == 2
    assert "document 2" in str(info.value) and f"byte {offsets[2] + 7} of the batch" in str(info.value)


# --------------------------------------------------------------------------- other patterns

@pytest.mark.parametrize("name, pattern", [("cl100k", CL100K_PATTERN), ("o200k", O200K_PATTERN)])
def test_tiktoken_patterns_equal_regex(name, pattern):
    import tiktoken_ext.openai_public as openai_public  # the text we copied must stay tiktoken's

    source = Path(openai_public.__file__).read_text()
    pieces = pattern.split("|") if name == "cl100k" else O200K_PATTERN.split("|")
    assert all(piece in source for piece in pieces)
    texts = [row["text"] for row in read_jsonl_zst("parallel_sample.jsonl.zst")][:400]
    texts += ["".join(t) for t in itertools.product(REPRESENTATIVES[::3], repeat=2)]
    for text in texts:
        expected = regex.findall(pattern, text)
        assert pretokenize(text, name) == expected
        assert pretokenize(text, pattern) == expected
        assert np.array_equal(chunk_bounds(text.encode("utf-8"), name), byte_ends(expected))
    data, offsets, _ = split_batch(texts[:50])
    ends, doc_chunk_offsets = chunk_bounds_batch(data, offsets, name)
    for d, text in enumerate(texts[:50]):
        assert np.array_equal(ends[doc_chunk_offsets[d]:doc_chunk_offsets[d + 1]] - offsets[d],
                              byte_ends(regex.findall(pattern, text)))


def test_custom_pattern_keeps_unmatched_characters():
    assert pretokenize("ab!!cd 12", r"regex:\p{L}+") == ["ab", "!", "!", "cd", " ", "1", "2"]
    # empty matches are dropped; groups do not change what a chunk is
    assert pretokenize("x1y", r"regex:(\d)*") == ["x", "1", "y"]
    assert np.array_equal(chunk_bounds("é!ü".encode(), r"regex:\p{L}"), [2, 3, 5])


@settings(max_examples=100, deadline=None)
@given(interesting_text, st.sampled_from([r"\p{L}+", r"\d+|\s", r"(?:ab)+", r"[^\p{L}]{2}", r"x*"]))
def test_custom_pattern_loses_no_text(text, pattern):
    chunks = pretokenize(text, "regex:" + pattern)
    assert "".join(chunks) == text and all(chunks)
    # every non-empty match is a chunk at its own place; every other chunk is one character
    ends = np.cumsum([len(c) for c in chunks]).tolist()
    spans = set(zip([0] + ends[:-1], ends))
    match_spans = {m.span() for m in regex.finditer(pattern, text) if m.end() > m.start()}
    assert match_spans <= spans
    assert all(end - start == 1 for start, end in spans - match_spans)
    assert np.array_equal(chunk_bounds(text.encode("utf-8"), "regex:" + pattern), byte_ends(chunks))


def test_threads_share_the_kernel():
    # the kernel releases the GIL; concurrent calls must not interfere
    from concurrent.futures import ThreadPoolExecutor

    texts = [row["text"] for row in read_jsonl_zst("docs_sample.jsonl.zst")][:8]
    expected = [byte_ends(GPT2.findall(text)) for text in texts]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda t: chunk_bounds(t.encode("utf-8")), texts * 3))
    for result, truth in zip(results, expected * 3):
        assert np.array_equal(result, truth)


# ------------------------------------------------------------------ the kernel's status convention

def test_split_kernels_return_status_and_write_err():
    from ube_stream import _pretok as kernel
    from ube_stream.errors import STATUS_INVALID_UTF8, err_buffer

    table = gpt2_class_table()
    err = err_buffer()
    ends = np.empty(16, np.int64)
    assert kernel.split(b"ab cd", table, ends, SPLIT_GPT2, err) == (0, 2) and ends[:2].tolist() == [2, 5]
    assert kernel.split(b"ab \xffcd", table, ends, SPLIT_GPT2, err) == (STATUS_INVALID_UTF8, None)
    assert list(err) == [3, -1]
    assert kernel.split(b"", table, ends, SPLIT_GPT2) == (0, 0)
    data = b"first" + b"" + b"zw\xe2\x82ei" + b"x"
    offsets = np.array([0, 5, 5, 11, 12], np.int64)
    doc_chunks = np.zeros(5, np.int64)
    status, total = kernel.split_batch(data, offsets, table, ends, doc_chunks, SPLIT_GPT2, err)
    assert (status, total, list(err)) == (STATUS_INVALID_UTF8, None, [7, 2])  # absolute byte, document
    status, total = kernel.split_batch(b"ab cd", np.array([0, 2, 5], np.int64), table, ends, doc_chunks[:3],
                                       SPLIT_GPT2)
    assert (status, total, doc_chunks[:3].tolist()) == (0, 2, [0, 1, 2])
    with pytest.raises(ValueError, match="err needs 2 int64 entries"):
        kernel.split(b"ab", table, ends, SPLIT_GPT2, np.zeros(1, np.int64))


# --------------------------------------------------------------------------- the class-table cache

CACHED = """
import hashlib, sys
from ube_stream import pretokenizer as p
tables = (p.gpt2_class_table(), p.tiktoken_class_table())
print("regex" in sys.modules, *[hashlib.sha256(t.tobytes()).hexdigest() for t in tables])
"""


def _run_cached(env):
    import os
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", CACHED], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, **env))
    assert out.returncode == 0, out.stderr[-2000:]
    regex_loaded, *hashes = out.stdout.split()
    return regex_loaded == "True", hashes


def test_class_tables_are_kept_in_the_cache_and_read_without_regex(tmp_path):
    """The first process probes the installed regex and writes both tables; the next
    one reads them (equal bytes) and never imports regex."""
    from ube_stream.pretokenizer import _probe_gpt2_classes, _probe_tiktoken_classes

    cache = tmp_path / "cache"
    loaded, first = _run_cached({"UBE_STREAM_CACHE": str(cache)})
    files = sorted(p.name for p in cache.iterdir())
    assert loaded and len(files) == 2 and files[0].startswith("classes-gpt2-") and files[1].startswith("classes-tik")
    for name, probe in zip(files, (_probe_gpt2_classes, _probe_tiktoken_classes)):   # the table, then its sha256
        raw = probe().tobytes()
        assert (cache / name).read_bytes() == raw + hashlib.sha256(raw).digest()
    loaded, second = _run_cached({"UBE_STREAM_CACHE": str(cache)})
    assert not loaded and second == first


def test_a_damaged_or_unwritable_cache_is_rebuilt_or_skipped(tmp_path, monkeypatch):
    from ube_stream import pretokenizer as p

    monkeypatch.setenv("UBE_STREAM_CACHE", str(tmp_path))
    path = p._table_cache_path("gpt2")
    assert path.startswith(str(tmp_path))
    with open(path, "wb") as f:   # a partial write of another process, say
        f.write(b"\x01" * 1000)
    with open(os.path.join(tmp_path, "classes-gpt2-0123456789ab.u8"), "wb") as f:   # an older key's table
        f.write(b"\x00")
    table = p._cached_table("gpt2", p._probe_gpt2_classes)
    assert np.array_equal(table, p._probe_gpt2_classes()) and not table.flags.writeable
    assert os.listdir(tmp_path) == [os.path.basename(path)] and os.path.getsize(path) == 0x110000 + 32
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("UBE_STREAM_CACHE", str(blocked))
    assert np.array_equal(p._cached_table("gpt2", p._probe_gpt2_classes), table)
