"""cl100k / llama3 / o200k pre-tokenizer kernels == regex.findall(pattern) (the independent truth).

The state machines of ``cython_src/_pretok_tiktoken.pxd`` are checked on every
Unicode scalar value (alone and between separators of every kind), on every
pair and triple of ~60 class representatives, on hypothesis text and on the
real multilingual fixtures; their batch entry against per-document calls,
their errors against Python's codecs; the dispatch (which patterns take the
kernel); and encoding with the real cl100k_base / o200k_base ranks against
tiktoken's ``encode_ordinary``.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import regex
from _helpers import openai_ranks, read_jsonl_zst, slow_after
from hypothesis import given, settings
from hypothesis import strategies as st

from ube_stream import Tokenizer, _pretok, pretokenizer
from ube_stream.errors import InvalidTextError
from ube_stream.pretokenizer import (
    CL100K_PATTERN,
    GPT2_PATTERN,
    LLAMA3_PATTERN,
    O200K_PATTERN,
    SPLIT_CL100K,
    SPLIT_GPT2,
    SPLIT_LLAMA3,
    SPLIT_O200K,
    SPLIT_SCRIPT,
    TT_C_E,
    TT_C_L,
    TT_C_RV,
    TT_C_SDMT,
    TT_CONTRACTION_SHIFT,
    TT_HEAD,
    TT_LETTER,
    TT_NUMBER,
    TT_SPACE,
    TT_TAIL,
    chunk_bounds,
    chunk_bounds_batch,
    gpt2_class_table,
    kernel_split,
    pretokenize,
    resolve_pattern,
    tiktoken_class_table,
)

PATTERNS = {"cl100k": CL100K_PATTERN, "llama3": LLAMA3_PATTERN, "o200k": O200K_PATTERN}
COMPILED = {name: regex.compile(text) for name, text in PATTERNS.items()}
NAMES = list(PATTERNS)

LETTERS = ["a", "z", "é", "ж", "ß", "ʼn",                         # Ll
           "A", "Z", "Ж", "Ω", "𝐀",                               # Lu
           "ǅ", "ᾈ",                                               # Lt
           "ʰ", "ー", "ᵃ",                                         # Lm
           "中", "あ", "ก", "क", "א", "ب"]                          # Lo
MARKS = ["\u0301", "\u0e31", "\ufe0f",                            # Mn
         "\u0903", "\u093f",                                      # Mc
         "\u20dd"]                                                # Me
DIGITS = ["0", "7", "٣", "५", "𝟘", "Ⅻ", "〇", "½", "²"]           # Nd, Nl, No
SPACES = [" ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u2009", "\u2028",
          "\u3000"]
APOSTROPHES = ["'", "\u2019"]
CONTRACTIONS = ["s", "S", "t", "T", "re", "RE", "rE", "ve", "ll", "LL", "m", "d", "D", "r", "e", "l",
                "\u017f", "\u212a"]                               # ſ folds to s; KELVIN SIGN to k
OTHER = ["!", ".", "-", "/", "$", "€", "+", "¿", "、", "\x00", "\u200d", "😀", "🏽"]
REPRESENTATIVES = LETTERS + MARKS + DIGITS + SPACES + APOSTROPHES + CONTRACTIONS + OTHER


INVALID_UTF8 = [b"\xff", b"\x80", b"\xc0\x80", b"\xc3", b"\xe4\xb8", b"\xed\xa0\x80",
                b"\xf4\x90\x80\x80", b"\xf0\x9f\x98", b"\xe4\x41\x41", b"\xf8\x88\x80\x80\x80"]


def byte_ends(chunks):
    """Chunk strings -> cumulative end byte offsets (what chunk_bounds returns)."""
    return np.cumsum([len(chunk.encode("utf-8")) for chunk in chunks], dtype=np.int64)


def findall(name, text):
    return COMPILED[name].findall(text)


def split_batch(texts, name):
    data = "".join(texts).encode("utf-8")
    offsets = np.concatenate([[0], np.cumsum([len(t.encode("utf-8")) for t in texts])]).astype(np.int64)
    return data, offsets, chunk_bounds_batch(data, offsets, name)


def assert_batch_matches_regex(texts, name):
    """chunk_bounds_batch == regex.findall per document, naming the first text that differs."""
    _, offsets, (ends, doc_chunk_offsets) = split_batch(texts, name)
    compiled = COMPILED[name]
    expected, counts = [], []
    for text, start in zip(texts, offsets[:-1].tolist()):
        chunks = compiled.findall(text)
        counts.append(len(chunks))
        for chunk in chunks:
            start += len(chunk.encode("utf-8"))
            expected.append(start)
    if np.array_equal(np.diff(doc_chunk_offsets), counts) and np.array_equal(ends, expected):
        return
    for text in texts:
        ours = pretokenize(text, name)
        if ours != compiled.findall(text):
            pytest.fail(f"{name} {text!r}: kernel {ours!r} != regex {compiled.findall(text)!r}")
    pytest.fail(f"{name}: the batch differs from per-document splits")


def scalar_values() -> np.ndarray:
    codepoints = np.arange(0x110000, dtype=np.uint32)
    return codepoints[(codepoints < 0xD800) | (codepoints > 0xDFFF)]


# --------------------------------------------------------------------------- patterns and dispatch

def test_patterns_are_tiktokens(monkeypatch):
    import tiktoken_ext.openai_public as openai_public

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *args, **kwargs: {})
    assert openai_public.cl100k_base()["pat_str"] == CL100K_PATTERN
    assert openai_public.o200k_base()["pat_str"] == O200K_PATTERN


def test_dispatch_by_name_alias_and_exact_text():
    assert kernel_split("gpt2") == kernel_split(GPT2_PATTERN) == SPLIT_GPT2
    assert kernel_split("cl100k") == kernel_split(CL100K_PATTERN) == SPLIT_CL100K
    assert kernel_split("llama3") == kernel_split(LLAMA3_PATTERN) == SPLIT_LLAMA3
    assert kernel_split("o200k") == kernel_split(O200K_PATTERN) == SPLIT_O200K
    for other in (r"\p{L}+", CL100K_PATTERN + "|x", "(?:" + O200K_PATTERN + ")", "custom", None, b"gpt2"):
        assert kernel_split(other) is None
    assert _pretok.SPLIT_CODES == {"gpt2": SPLIT_GPT2, "cl100k": SPLIT_CL100K,
                                           "llama3": SPLIT_LLAMA3, "o200k": SPLIT_O200K, "script": SPLIT_SCRIPT}
    # llama3 is a name for a regex that tokenizer files record as custom (as from_hf writes it)
    assert resolve_pattern("llama3") == resolve_pattern(LLAMA3_PATTERN) == ("custom", LLAMA3_PATTERN)
    assert resolve_pattern(CL100K_PATTERN) == ("cl100k", CL100K_PATTERN)


@pytest.mark.parametrize("name, text, expected", [
    ("cl100k", "a\n  ", ["a", "\n  "]),                 # \s++$: the whole run at the end
    ("llama3", "a\n  ", ["a", "\n", "  "]),             # cut after the last newline first
    ("o200k", "a\n  ", ["a", "\n", "  "]),
    ("cl100k", "x  \n y", ["x", "  \n", " y"]),
    ("cl100k", "   abc", ["  ", " abc"]),              # \s+(?!\S) leaves one space
    ("cl100k", "\tabc !!\n\nx", ["\tabc", " !!\n\n", "x"]),
    ("cl100k", "I'M 'ſ 'Ll 'LL", ["I", "'M", " '", "ſ", " '", "Ll", " '", "LL"]),
    ("llama3", "'Re'VE", ["'Re", "'VE"]),
    ("cl100k", "12345678", ["123", "456", "78"]),
    ("o200k", "DON'T don'tſ'ſ", ["DON'T", " don't", "ſ'ſ"]),
    ("o200k", "HelloWorld ABCdef", ["Hello", "World", " ABCdef"]),
    ("o200k", "\u0301AB", ["\u0301", "AB"]),            # A1 without its X prefix wins over A2
    ("o200k", "!\u0301a", ["!\u0301a"]),                # a mark after X is HEAD*TAIL+
    ("o200k", "a/b!!/\n/x", ["a", "/b", "!!/\n/", "x"]),
    ("o200k", "'sa ' s", ["'sa", " '", " s"]),
    ("cl100k", "", []),
])
def test_worked_examples(name, text, expected):
    assert findall(name, text) == expected  # the examples themselves are right
    assert pretokenize(text, name) == expected


# --------------------------------------------------------------------------- class table

def test_class_table_matches_regex():
    table = tiktoken_class_table()
    assert table.shape == (0x110000,) and table.dtype == np.uint8 and not table.flags.writeable
    assert not table[0xD800:0xE000].any()
    sample = list(range(0, 0x110000, 97)) + [ord(c) for c in "".join(REPRESENTATIVES)]
    probes = [(TT_LETTER, r"\p{L}"), (TT_NUMBER, r"\p{N}"), (TT_SPACE, r"\s"),
              (TT_HEAD, r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"), (TT_TAIL, r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]")]
    letters = [(TT_C_SDMT, "sdmt"), (TT_C_RV, "rv"), (TT_C_L, "l"), (TT_C_E, "e")]
    for cp in sample:
        if 0xD800 <= cp <= 0xDFFF:
            continue
        char = chr(cp)
        for bit, probe in probes:
            assert bool(table[cp] & bit) == bool(regex.fullmatch(probe, char)), (f"U+{cp:04X}", probe)
        code = next((c for c, group in letters if regex.fullmatch(f"(?i:[{group}])", char)), 0)
        assert table[cp] >> TT_CONTRACTION_SHIFT == code, f"U+{cp:04X}"
    assert table[0x17F] >> TT_CONTRACTION_SHIFT == TT_C_SDMT        # ſ matches (?i:s)
    assert table[0x212A] >> TT_CONTRACTION_SHIFT == 0               # KELVIN SIGN is a k
    assert tiktoken_class_table() is table                          # cached


@pytest.mark.slow
def test_class_table_equals_a_probe_of_every_scalar_value():
    # the straightforward probe: each of the 0x110000 code points alone against each
    # class and contraction letter (regex.fullmatch), the unassigned and private-use
    # ones included, which the table's build never scans after its first pass (the
    # probe itself: tiktoken_class_table() may come from the table cache)
    from ube_stream.pretokenizer import _probe_tiktoken_classes

    table = _probe_tiktoken_classes()
    assert np.array_equal(table, tiktoken_class_table())
    probes = [(TT_LETTER, r"\p{L}"), (TT_NUMBER, r"\p{N}"), (TT_SPACE, r"\s"),
              (TT_HEAD, r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"), (TT_TAIL, r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]")]
    probes += [(code << TT_CONTRACTION_SHIFT, f"(?i:[{group}])")
               for code, group in [(TT_C_SDMT, "sdmt"), (TT_C_RV, "rv"), (TT_C_L, "l"), (TT_C_E, "e")]]
    chars = scalar_values().astype("<u4").tobytes().decode("utf-32-le")
    want = np.zeros(0x110000, dtype=np.uint8)
    for bits, probe in probes:
        fullmatch = regex.compile(probe).fullmatch
        want[[ord(c) for c in chars if fullmatch(c)]] |= bits
    mismatched = np.flatnonzero(table != want)
    assert mismatched.size == 0, [f"U+{int(cp):04X}" for cp in mismatched[:10]]


# --------------------------------------------------------------------------- (a) every scalar value

@pytest.mark.parametrize("name", [n for n in NAMES if n != "llama3"] + slow_after(["llama3"], keep=0))
def test_every_scalar_value_alone(name):
    # each scalar value as a text of its own: regex matches it whole (one chunk), and so
    # does the kernel: one document per scalar value in one batch
    scalars = scalar_values()
    text = scalars.astype("<u4").tobytes().decode("utf-32-le")
    compiled = COMPILED[name]
    assert all(compiled.fullmatch(char) for char in text)
    data = text.encode("utf-8")
    lengths = 1 + (scalars >= 0x80) + (scalars >= 0x800) + (scalars >= 0x10000)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    ends, doc_chunk_offsets = chunk_bounds_batch(data, offsets, name)
    assert np.array_equal(ends, offsets[1:]) and np.array_equal(doc_chunk_offsets, np.arange(len(offsets)))


def _assert_between_separators(name, separators):
    chars = scalar_values().astype("<u4").tobytes().decode("utf-32-le")
    for separator in separators:
        text = separator.join(chars)
        assert pretokenize(text, name) == findall(name, text), f"separator {separator!r}"


# separators around every scalar value: a letter of each of o200k's classes (runs that
# merge or not), the space (optional space, X prefix, whitespace runs) and the apostrophe
# (every scalar after it as a contraction's first letter; after a letter-scalar as
# o200k's suffix)
@pytest.mark.parametrize("name", slow_after(NAMES, keep=0))   # each scalar alone, pairs, triples: default
def test_every_scalar_value_between_separators(name):
    _assert_between_separators(name, ["a", "A", " ", "'"])


# more: a contraction's second letter ("'r", "'l"), o200k's suffix after each kind of
# word ("a'", "A'"), numbers, "other", newlines, marks (alone and after X)
@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_scalar_value_between_more_separators(name):
    _assert_between_separators(name, ["'r", "'l", "a'", "A'", "1", "!", "\n", " \u0301", "\u0301"])


# --------------------------------------------------------------------------- (b) pairs and triples

@pytest.mark.parametrize("name", NAMES)
def test_every_pair_of_representatives(name):
    assert len(REPRESENTATIVES) >= 60
    texts = ["".join(pair) for pair in itertools.product(REPRESENTATIVES, repeat=2)]
    assert_batch_matches_regex(texts, name)
    for text in texts[::11]:
        assert pretokenize(text, name) == findall(name, text)


@pytest.mark.parametrize("name", [n for n in NAMES if n != "llama3"] + slow_after(["llama3"], keep=0))
def test_every_triple_of_representatives(name):
    texts = ["".join(triple) for triple in itertools.product(REPRESENTATIVES, repeat=3)]
    assert len(texts) > 200_000
    assert_batch_matches_regex(texts, name)


# --------------------------------------------------------------------------- (c) hypothesis

interesting_text = st.lists(
    st.one_of(st.sampled_from(REPRESENTATIVES), st.characters(blacklist_categories=("Cs",))),
    max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(interesting_text, st.sampled_from(NAMES))
def test_hypothesis_text_matches_regex(text, name):
    chunks = pretokenize(text, name)
    assert chunks == findall(name, text)
    assert np.array_equal(chunk_bounds(text.encode("utf-8"), name), byte_ends(chunks))


@settings(max_examples=100, deadline=None)
@given(st.lists(interesting_text, max_size=8), st.sampled_from(NAMES))
def test_batch_equals_per_document(texts, name):
    data, offsets, (ends, doc_chunk_offsets) = split_batch(texts, name)
    assert doc_chunk_offsets.shape == (len(texts) + 1,)
    for d in range(len(texts)):
        own = chunk_bounds(data[offsets[d]:offsets[d + 1]], name)
        assert np.array_equal(ends[doc_chunk_offsets[d]:doc_chunk_offsets[d + 1]] - offsets[d], own)


# --------------------------------------------------------------------------- (d) real text

@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("fixture", ["docs_sample.jsonl.zst", "parallel_sample.jsonl.zst",
                                     "unicode_sample.jsonl.zst"])
def test_real_multilingual_text(name, fixture):
    texts = [row["text"] for row in read_jsonl_zst(fixture)]
    assert texts
    assert_batch_matches_regex(texts, name)
    joined = "\n".join(texts)
    assert pretokenize(joined, name) == findall(name, joined)


# --------------------------------------------------------------------------- errors and arguments

@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("bad", INVALID_UTF8)
@pytest.mark.parametrize("prefix", [b"", b"ab", b"a ", b" ", b"'", b"'r", b"A'", b"  \n", b"12", b"!!",
                                    b"\xcc\x81"])
def test_invalid_utf8_names_byte_offset(name, prefix, bad):
    data = prefix + bad + b" ok"
    with pytest.raises(UnicodeDecodeError) as truth:
        data.decode("utf-8")
    with pytest.raises(InvalidTextError) as info:
        chunk_bounds(data, name)
    assert info.value.offset == truth.value.start == len(prefix) and info.value.unit == "byte"


@settings(max_examples=200, deadline=None)
@given(interesting_text, st.integers(0, 255), st.data(), st.sampled_from(NAMES))
def test_invalid_utf8_offset_matches_python_codec(text, byte, data, name):
    encoded = text.encode("utf-8")
    where = data.draw(st.integers(0, len(encoded)))
    corrupted = encoded[:where] + bytes([byte]) + encoded[where:]
    try:
        decoded = corrupted.decode("utf-8")
    except UnicodeDecodeError as exc:
        with pytest.raises(InvalidTextError) as info:
            chunk_bounds(corrupted, name)
        assert info.value.offset == exc.start
        documents = [b"fine", corrupted, b"after"]
        offsets = np.cumsum([0] + [len(d) for d in documents])
        with pytest.raises(InvalidTextError) as info:
            chunk_bounds_batch(b"".join(documents), offsets, name)
        assert info.value.document == 1 and info.value.offset == exc.start
    else:
        assert np.array_equal(chunk_bounds(corrupted, name), byte_ends(findall(name, decoded)))


def test_kernel_checks_arguments():
    kernel = _pretok
    table = tiktoken_class_table()
    with pytest.raises(ValueError, match="ends"):
        kernel.split(b"abc def", table, np.empty(3, np.int64), SPLIT_CL100K)
    with pytest.raises(ValueError, match="tiktoken_class_table"):
        kernel.split(b"abc", gpt2_class_table(), np.empty(3, np.int64), SPLIT_O200K)
    with pytest.raises(ValueError, match="tiktoken_class_table"):
        kernel.split(b"abc", table[:10], np.empty(3, np.int64), SPLIT_O200K)
    for kind in (max(_pretok.SPLIT_CODES.values()) + 1, -1):  # no splitter has these codes
        with pytest.raises(ValueError, match="kind"):
            kernel.split(b"abc", table, np.empty(3, np.int64), kind)
    with pytest.raises(ValueError, match="gpt2_class_table"):
        kernel.split(b"abc", table, np.empty(3, np.int64), SPLIT_GPT2)
    with pytest.raises(ValueError):
        kernel.split_batch(b"abc", np.array([0, 2, 1, 3]), table, np.empty(3, np.int64),
                           np.empty(4, np.int64), SPLIT_LLAMA3)
    with pytest.raises(ValueError):
        kernel.split_batch(b"abc", np.array([0, 4]), table, np.empty(4, np.int64),
                           np.empty(2, np.int64), SPLIT_LLAMA3)
    assert kernel.split(b"", table, np.empty(0, np.int64), SPLIT_O200K) == (0, 0)
    ends, doc_chunk_offsets = chunk_bounds_batch(b"ab", [0, 0, 2, 2], "o200k")
    assert ends.tolist() == [2] and doc_chunk_offsets.tolist() == [0, 0, 1, 1]


def test_threads_share_the_kernel():
    from concurrent.futures import ThreadPoolExecutor

    texts = [row["text"] for row in read_jsonl_zst("docs_sample.jsonl.zst")][:8]
    jobs = [(text, name) for name in NAMES for text in texts] * 2
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda job: chunk_bounds(job[0].encode("utf-8"), job[1]), jobs))
    for (text, name), result in zip(jobs, results):
        assert np.array_equal(result, byte_ends(findall(name, text)))


# --------------------------------------------------------------------------- encoding with real ranks

@pytest.fixture(scope="module")
def encode_texts(docs_rows, parallel_rows, unicode_rows):
    texts = [r["text"] for r in docs_rows] + [r["text"] for r in parallel_rows[::3]]
    texts += [r["text"] for r in unicode_rows[::3]]
    texts += ["trailing space  ", "line\n  ", "x\r\n\r\n", "it's DON'T ſ'S", "1234567 ½²", "   \t\n"]
    return [t for t in texts if t]


def _assert_encodes_like_tiktoken(tok, pattern, ranks, texts, monkeypatch):
    import tiktoken
    encoding = tiktoken.Encoding("ube-test", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    encoder, _ = tok._kernel()
    assert encoder.split == kernel_split(pattern)

    def no_regex_split(*args, **kwargs):
        raise AssertionError("the encoder should split in the kernel, not through chunk_bounds_batch")

    monkeypatch.setattr(pretokenizer, "chunk_bounds_batch", no_regex_split)
    ours = tok.encode_batch(texts, num_threads=1)
    theirs = [encoding.encode_ordinary(t) for t in texts]
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert a.tolist() == b, f"text {i} {texts[i][:60]!r} differs"
    assert sum(len(a) for a in ours) > 100_000
    threaded = tok.encode_batch(texts, num_threads=3)
    assert all(np.array_equal(a, b) for a, b in zip(ours, threaded))


@pytest.mark.parametrize("rank_file, name", [("cl100k_base", "cl100k"), ("o200k_base", "o200k")])
def test_from_tiktoken_encodes_like_tiktoken(rank_file, name, encode_texts, monkeypatch):
    ranks = openai_ranks(rank_file)
    tok = Tokenizer.from_tiktoken(ranks, name)
    assert tok.pattern_name == name
    _assert_encodes_like_tiktoken(tok, PATTERNS[name], ranks, encode_texts, monkeypatch)
    # the pattern given as its regex text takes the kernel too
    assert Tokenizer.from_tiktoken({bytes([b]): b for b in range(256)}, PATTERNS[name])._kernel()[0].split \
        == kernel_split(name)


def test_from_hf_llama3_pattern_takes_the_kernel(encode_texts, tmp_path, monkeypatch):
    # a HF tokenizer.json whose Split regex is Llama 3's, with cl100k's first 20,000 ranks
    # (a BPE vocabulary too: each token joins two of lower rank) to keep the file small
    ranks = openai_ranks("cl100k_base", 20_000)
    path = tmp_path / "tokenizer.json"
    Tokenizer.from_tiktoken(ranks, "llama3").export_hf(path)
    tok = Tokenizer.from_hf(path)
    assert tok.pattern == LLAMA3_PATTERN and tok.pattern_name == "custom"
    _assert_encodes_like_tiktoken(tok, LLAMA3_PATTERN, ranks, encode_texts[::2], monkeypatch)


@pytest.mark.parametrize("pattern, expected", [
    (r"\p{N}{1,3}+", r"(?>\p{N}{1,3})"),
    (r"a{2}+b(x|[)])\d{1,3}+c{2,}d+", r"(?>a{2})b(x|[)])(?>\d{1,3})c{2,}d+"),
    (r"(ab){2,4}+|[^\]{]{1}+", r"(?>(ab){2,4})|(?>[^\]{]{1})"),
    (r"\p{L}++x?+\s*+", r"\p{L}++x?+\s*+"),      # possessive ?+ *+ ++ mean the same in both engines
])
def test_hf_regex_spells_possessive_intervals_for_oniguruma(pattern, expected):
    from ube_stream.tokenizer.export import hf_regex

    assert hf_regex(pattern) == expected
    # the same matches in the regex module: the rewrite keeps the meaning
    for text in ["1234567", "aaaab", "abababab]]]", "xx  ", "a{2}"]:
        assert regex.findall(pattern, text) == regex.findall(expected, text)


@pytest.mark.parametrize("rank_file, name, limit", [
    ("cl100k_base", "cl100k", 20_000),     # the ranks' first 20,000 (a BPE vocabulary too): fast
    pytest.param("cl100k_base", "cl100k", None, marks=pytest.mark.slow),
    pytest.param("o200k_base", "o200k", None, marks=pytest.mark.slow)])
def test_hf_tokenizers_loads_our_export_and_gives_tiktokens_ids(rank_file, name, limit, encode_texts, tmp_path):
    """HF's Oniguruma reads cl100k's possessive ``\\p{N}{1,3}+`` as ``(?:\\p{N}{1,3})+`` (whole digit
    runs); export_hf writes the atomic-group spelling, so HF gives the same ids as tiktoken, and
    from_hf reads the file back as the known pattern (the compiled split)."""
    import tiktoken
    from tokenizers import Tokenizer as HFTokenizer

    ranks = openai_ranks(rank_file, limit)
    path = str(tmp_path / "tokenizer.json")
    Tokenizer.from_tiktoken(ranks, name).export_hf(path)
    hf = HFTokenizer.from_file(path)
    encoding = tiktoken.Encoding("ube-test", pat_str=PATTERNS[name], mergeable_ranks=ranks, special_tokens={})
    texts = encode_texts[::8] + ["year 2024, 1234567", "x1234y 3.14159 ٣٤٥٦٧"]
    for i, text in enumerate(texts):
        assert hf.encode(text, add_special_tokens=False).ids == encoding.encode_ordinary(text), \
            f"text {i} {text[:60]!r} differs"
    back = Tokenizer.from_hf(path)
    assert back.pattern_name == name


@pytest.mark.parametrize("rank_file, name", slow_after([("cl100k_base", "cl100k"), ("o200k_base", "o200k")],
                                                       several=True))
def test_chunks_across_the_min_scan_limit_encode_like_tiktoken(rank_file, name, docs_rows, parallel_rows):
    """One chunk of every length from 1 symbol to 150 (the encoder merges up to 32 by
    min-scan, longer ones with a heap), cut from real Chinese, Japanese, Korean, Hindi,
    Russian and English runs, cache on and off, gives tiktoken's ids."""
    import tiktoken
    ranks = openai_ranks(rank_file)
    encoding = tiktoken.Encoding("ube-test", pat_str=PATTERNS[name], mergeable_ranks=ranks, special_tokens={})
    scripts = {"Han": 4, "Hiragana": 2, "Hangul": 2, "Devanagari": 2, "Cyrillic": 2, "Latin": 4}
    runs = []
    for script, want in scripts.items():
        found = [m.group() for r in docs_rows + parallel_rows
                 for m in regex.finditer(rf"[\p{{{script}}}\p{{M}}]{{4,}}", r["text"])]
        assert len(found) >= want, script
        runs += sorted(found, key=len)[-want:]
    texts = [run[:k] for run in runs for k in range(1, len(run) + 1) if len(run[:k].encode()) <= 150]
    assert max(len(t.encode()) for t in texts) > 100
    cached = Tokenizer.from_tiktoken(ranks, name)
    uncached = Tokenizer.from_tiktoken(ranks, name)
    uncached.set_cache(bytes=0)
    theirs = [encoding.encode_ordinary(t) for t in texts]
    for tok in (cached, uncached):
        for text, ours, want in zip(texts, tok.encode_batch(texts, num_threads=1), theirs):
            assert ours.tolist() == want, text
