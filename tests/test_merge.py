"""BPE merge training: the Cython kernel ``ube_stream._merge.train_merges``
against its quadratic twin ``_reference.train_bpe_reference`` and against
results worked out by hand from docs/DESIGN.md's training rules."""
import collections
import json
import pathlib
import random

import numpy as np
import pytest
import zstandard
from _helpers import slow_after
from hypothesis import given, settings
from hypothesis import strategies as st

from ube_stream import _reference as ref
from ube_stream._merge import train_merges

DATA = pathlib.Path(__file__).parent / "data"
A, B, C, D, E, F, G = (ord(ch) for ch in "abcdefg")


def as_words(text_by_count):
    """{"abc": 3} -> {(97, 98, 99): 3} (ASCII, so ids are the byte values)."""
    return {tuple(word.encode()): count for word, count in text_by_count.items()}


def pack(words):
    """[(word, count), ...] -> the kernel's (symbols, word_offsets, word_counts)."""
    symbols = np.array([s for word, _ in words for s in word], dtype=np.uint16)
    offsets = np.zeros(len(words) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(word) for word, _ in words])
    counts = np.array([count for _, count in words], dtype=np.int64)
    return symbols, offsets, counts


# ``long_word`` thresholds that put every word on one path: linked lists of
# positions (2) or in-place rewriting (the kernel before long words had a path)
ALL_LONG, ALL_SHORT = 2, 2**62


def kernel(word_counts, *, n_base, max_vocab, min_frequency=2, max_token_length=None,
           progress=None, long_word=None):
    words = list(word_counts.items()) if isinstance(word_counts, dict) else list(word_counts)
    extra = {} if long_word is None else {"long_word": long_word}
    status, merges = train_merges(*pack(words), n_base, max_vocab, min_frequency,
                                  -1 if max_token_length is None else max_token_length, progress,
                                  **extra)
    assert status == 0
    assert merges.dtype == np.int32 and merges.ndim == 2 and merges.shape[1] == 3
    return [tuple(row) for row in merges.tolist()]


def both(word_counts, **options):
    """Kernel (default threshold, and every word on either path) and reference
    must give the same merges; return them."""
    expected = ref.train_bpe_reference(word_counts, **options)
    for long_word in (None, ALL_LONG, ALL_SHORT):
        assert kernel(word_counts, long_word=long_word, **options) == expected, long_word
    return expected


# ------------------------------------------------------------------ worked by hand

def test_minbpe_golden_example():
    # "aaabdaaabac", one word, count 1.  Pairs at every position:
    #   aa aa ab bd da aa aa ab ba ac -> (a,a)=4, (a,b)=2, the rest 1
    # 1. (a,a) -> 256; left to right without overlap: Z a b d Z a b a c
    #    pairs: (256,a)=2, (a,b)=2, (b,d)=(d,256)=(b,a)=(a,c)=1
    # 2. tie at 2: (97,98) < (256,97) -> (a,b) -> 257: Z Y d Z Y a c
    #    pairs: (256,257)=2, the rest 1
    # 3. (256,257) -> 258: X d X a c
    word = as_words({"aaabdaaabac": 1})
    merges = both(word, n_base=256, max_vocab=259, min_frequency=1)
    assert merges == [(A, A, 256), (A, B, 257), (256, 257, 258)]
    assert ref.encode_chunk_reference(list(b"aaabdaaabac"), merges) == [258, D, 258, A, C]
    # min_frequency 2 gives the same three (each had count >= 2), then stops
    assert both(word, n_base=256, max_vocab=1000, min_frequency=2) == merges


def test_two_paths_to_one_expansion_create_it_once():
    # "ab" x10, "bc" x8, "abc" x5: (a,b)=15 > (b,c)=13 -> (a,b) -> 256 first, so
    # every "abc" becomes [ab, c]; then (b,c)=8 -> 257 (only in "bc"), then
    # (256,c)=5 -> 258 = "abc".  "a"+"bc" never meets: [a, bc] would need (b,c)
    # merged before (a,b) in the same word, and one merge order rules all words.
    words = as_words({"ab": 10, "bc": 8, "abc": 5})
    merges = both(words, n_base=256, max_vocab=300, min_frequency=1)
    assert merges == [(A, B, 256), (B, C, 257), (256, C, 258)]


def test_id_reuse_cannot_arise_from_words():
    # Why the "reuse an existing id" rule never fires when training from base
    # symbols: a substring whose two ends are token boundaries is rewritten by
    # a merge the same way wherever it stands (the left-to-right scan starts
    # fresh at its left boundary, and the boundaries survive), so all aligned
    # occurrences of a string share one segmentation.  When (X, Y) makes
    # expansion E, every aligned E is then [X, Y] and becomes one token, so no
    # later pair (X', Y') can spell E again.  Checked here on random corpora
    # that favour repeats and runs (where overlaps make the scan matter).
    rng = random.Random(7)
    for _ in range(300):
        n_base = rng.randint(1, 3)
        words = {}
        for _ in range(rng.randint(1, 5)):
            word = tuple(rng.randrange(n_base) for _ in range(rng.randint(2, 12)))
            words[word] = rng.randint(1, 9)
        merges = kernel(words, n_base=n_base, max_vocab=n_base + 40, min_frequency=1)
        assert [r for _, _, r in merges] == list(range(n_base, n_base + len(merges)))
        expansions = ref.token_expansions(merges, n_base)
        assert len(set(expansions.values())) == len(expansions)


def test_ties_go_to_smallest_left_then_right():
    # every pair occurs once: (a,b) < (a,c) < (b,a) < (c,d), whatever the word order
    words = as_words({"cd": 1, "ba": 1, "ac": 1, "ab": 1})
    assert both(words, n_base=256, max_vocab=300, min_frequency=1) == [
        (A, B, 256), (A, C, 257), (B, A, 258), (C, D, 259)]
    # a higher count beats smaller ids
    words = as_words({"ab": 2, "gf": 3})
    assert both(words, n_base=256, max_vocab=300, min_frequency=1) == [(G, F, 256), (A, B, 257)]
    # a new token's pairs tie with base pairs and lose on the id: "abab" x1 ->
    # (a,b)=2 -> 256; then (256,256)=1 and (c,d)=1 tie -> (c,d) first
    words = as_words({"abab": 1, "cd": 1})
    assert both(words, n_base=256, max_vocab=300, min_frequency=1) == [
        (A, B, 256), (C, D, 257), (256, 256, 258)]


def test_overlapping_pairs_count_twice_and_merge_left_to_right():
    # "aaa" x1 holds (a,a) twice: it beats (b,c) x1 ... and after the merge the
    # word is [aa, a], so (256, a) follows
    words = as_words({"aaa": 1, "bc": 1})
    assert both(words, n_base=256, max_vocab=300, min_frequency=1) == [
        (A, A, 256), (B, C, 257), (256, A, 258)]


def test_min_frequency_stops_early_without_error():
    # (a,b)=5 -> 256; then (256,c)=3 -> 257; then only (c,d)=2 < 3 is left: stop
    words = as_words({"abc": 3, "ab": 2, "cd": 2})
    merges = both(words, n_base=256, max_vocab=10_000, min_frequency=3)
    assert merges == [(A, B, 256), (256, C, 257)]
    # min_frequency 0 or 1: every pair that occurs at all may merge
    assert both(words, n_base=256, max_vocab=10_000, min_frequency=0) == \
        both(words, n_base=256, max_vocab=10_000, min_frequency=1)


def test_max_vocab_counts_base_symbols():
    words = as_words({"aaabdaaabac": 1})
    assert both(words, n_base=256, max_vocab=257, min_frequency=1) == [(A, A, 256)]
    assert both(words, n_base=256, max_vocab=256, min_frequency=1) == []
    assert both(words, n_base=256, max_vocab=10, min_frequency=1) == []


def test_max_token_length_counts_base_symbols():
    # seven a's: (a,a)=6 -> 256: [aa aa aa a]; pairs (256,256)=2, (256,a)=1
    word = as_words({"aaaaaaa": 1})
    # no limit: (256,256) -> 257 = aaaa: [aaaa aa a]; (257,256)=(256,a)=1, tie
    # -> (256,97) -> 258 = aaa: [aaaa aaa]; then (257,258) -> 259
    assert both(word, n_base=256, max_vocab=300, min_frequency=1) == [
        (A, A, 256), (256, 256, 257), (256, A, 258), (257, 258, 259)]
    # limit 3: (256,256) would be 4 long, so (256,a) -> 257 = aaa: [aa aa aaa];
    # (256,256) and (256,257) are too long: stop
    assert both(word, n_base=256, max_vocab=300, min_frequency=1, max_token_length=3) == [
        (A, A, 256), (256, A, 257)]
    assert both(word, n_base=256, max_vocab=300, min_frequency=1, max_token_length=1) == []


def test_counts_past_int32_do_not_wrap():
    # (e,f) = 3e9 + 3e9 = 6e9 (int32 or uint32 would wrap it below 2e9);
    # then (a,b) = 3e9 ties with (256,g) = 3e9 and wins on ids; then (256,g);
    # then (c,d) = 2e9
    words = as_words({"ab": 3_000_000_000, "ef": 3_000_000_000, "efg": 3_000_000_000,
                      "cd": 2_000_000_000, "xyxyz": 1})
    merges = both(words, n_base=256, max_vocab=260, min_frequency=2)
    assert merges == [(E, F, 256), (A, B, 257), (256, G, 258), (C, D, 259)]
    # a single word whose count exceeds 2**31 still merges first
    words = as_words({"zz": 3_000_000_000, "ab": 2_999_999_999})
    assert kernel(words, n_base=256, max_vocab=258) == [(ord("z"), ord("z"), 256), (A, B, 257)]


def test_long_words_worked_by_hand():
    # 70 symbols, so a long word (linked list of positions) at the default threshold.
    # "ab" * 35: (a,b)=35 > (b,a)=34 -> X=256, word X^35
    #   (X,X)=34 -> 257: 17 of them then X     (left to right, no overlap)
    #   (257,257)=16 -> 258: 258^8 257 X
    #   (258,258)=7 -> 259: 259^4 257 X
    #   (259,259)=3 -> 260: 260 260 257 X;  then every pair once: below 2, stop
    expected = [(A, B, 256), (256, 256, 257), (257, 257, 258), (258, 258, 259), (259, 259, 260)]
    assert both(as_words({"ab" * 35: 1}), n_base=256, max_vocab=300) == expected
    # "a" * 67, overlapping pairs: (a,a)=66 -> Z: Z^33 a;  (Z,Z)=32 -> Y: Y^16 Z a;
    # (Y,Y)=15 -> X^8 Y a... the run halves, leaving one of each level: T T Z a
    expected = [(A, A, 256), (256, 256, 257), (257, 257, 258), (258, 258, 259), (259, 259, 260)]
    assert both(as_words({"a" * 67: 1}), n_base=256, max_vocab=300) == expected
    # beside a short word that holds the same pair, counts add up across both paths:
    # (a,b) = 35 + 40 = 75 -> X; then the short word's (X,c) 40 beats the long word's (X,X) 34
    words = as_words({"ab" * 35: 1, "abc": 40})
    merges = both(words, n_base=256, max_vocab=258)
    assert merges == [(A, B, 256), (256, C, 257)]


# ------------------------------------------------------------------ generated corpora

small_words = st.dictionaries(
    keys=st.lists(st.integers(0, 4), min_size=0, max_size=12).map(tuple),
    values=st.one_of(st.integers(1, 40), st.integers(1, 2**40)),
    max_size=14,
)


# 150 examples in the default suite, the original 300 with the slow tests
@pytest.mark.parametrize("examples", slow_after([150, 300]))
def test_kernel_matches_reference_on_generated_corpora(examples):
    @settings(max_examples=examples, deadline=None)
    @given(words=small_words, n_base_extra=st.integers(0, 2), new_tokens=st.integers(0, 40),
           min_frequency=st.integers(0, 5),
           max_token_length=st.one_of(st.none(), st.integers(1, 6)))
    def check(words, n_base_extra, new_tokens, min_frequency, max_token_length):
        n_base = 5 + n_base_extra
        merges = both(words, n_base=n_base, max_vocab=n_base + new_tokens,
                      min_frequency=min_frequency, max_token_length=max_token_length)
        assert len(merges) <= new_tokens
        lengths = {t: len(e) for t, e in ref.token_expansions(merges, n_base).items()}
        if max_token_length is not None:
            assert max(lengths.values()) <= max(max_token_length, 1)

    check()


# long words from a tiny alphabet: runs such as 'aaaa' (overlapping pairs), repeats,
# pairs shared with short words, counts past int32
long_words = st.dictionaries(
    keys=st.one_of(st.lists(st.integers(0, 2), min_size=0, max_size=12),
                   st.lists(st.sampled_from([0, 0, 0, 1, 1, 2, 3]), min_size=60, max_size=300),
                   st.lists(st.integers(0, 1), min_size=2, max_size=6).flatmap(
                       lambda unit: st.integers(10, 60).map(lambda n: unit * n))).map(tuple),
    values=st.one_of(st.integers(1, 5), st.integers(1, 2**40)),
    min_size=1, max_size=6,
)


@settings(max_examples=60, deadline=None)
@given(words=long_words, new_tokens=st.integers(1, 60), min_frequency=st.integers(0, 3),
       max_token_length=st.one_of(st.none(), st.integers(2, 9)))
def test_long_words_match_reference_on_generated_corpora(words, new_tokens, min_frequency,
                                                         max_token_length):
    both(words, n_base=4, max_vocab=4 + new_tokens, min_frequency=min_frequency,
         max_token_length=max_token_length)


@settings(max_examples=100, deadline=None)
@given(words=small_words, seed=st.integers(0, 2**32 - 1), min_frequency=st.integers(0, 3))
def test_word_order_and_split_counts_do_not_matter(words, seed, min_frequency):
    rng = random.Random(seed)
    expected = kernel(words, n_base=5, max_vocab=40, min_frequency=min_frequency)
    # shuffled, and with some words given as two entries whose counts add up
    entries = []
    for word, count in words.items():
        if count > 1 and rng.random() < 0.5:
            part = rng.randint(1, count - 1)
            entries += [(word, part), (word, count - part)]
        else:
            entries.append((word, count))
    rng.shuffle(entries)
    assert kernel(entries, n_base=5, max_vocab=40, min_frequency=min_frequency) == expected


# ------------------------------------------------------------------ real text

def docs_sample_rows():
    raw = zstandard.ZstdDecompressor().decompress(
        (DATA / "docs_sample.jsonl.zst").read_bytes(), max_output_size=1 << 30)
    return [json.loads(line) for line in raw.splitlines()]


@pytest.fixture(scope="module")
def chunk_counts():
    # the first 700 characters of each of the 67 rows (26 languages)
    counts = collections.Counter()
    for row in docs_sample_rows():
        counts.update(ref.pretokenize(row["text"][:700]))
    return counts


# the reference recounts every pair at every merge: 150 merges on ube in the default suite,
# 300 on every substrate with the slow tests
@pytest.mark.parametrize("substrate, n_base, n_merges", slow_after(
    [("ube", 512, 150), ("ube", 512, 300), ("utf8", 256, 300), ("utf16", 256, 300)], several=True))
def test_kernel_matches_reference_on_real_text(chunk_counts, substrate, n_base, n_merges):
    words = collections.Counter()
    for chunk, count in chunk_counts.items():
        words[tuple(ref.route_symbols(chunk, substrate))] += count
    merges = both(dict(words), n_base=n_base, max_vocab=n_base + n_merges, min_frequency=2)
    assert len(merges) == n_merges
    # every learned token spells a run of symbols found inside one word
    as_text = lambda ids: "".join(chr(0x1000 + s) for s in ids)  # noqa: E731
    corpus = "\n".join(as_text(word) for word in words)
    expansions = ref.token_expansions(merges, n_base)
    for token in range(n_base, n_base + n_merges):
        assert len(expansions[token]) >= 2 and as_text(expansions[token]) in corpus
    # under utf8, a token that decodes is a piece of the text (UTF-8 resynchronises)
    if substrate == "utf8":
        text = "\n".join(chunk_counts)
        pieces = []
        for token in range(n_base, n_base + n_merges):
            try:
                pieces.append(ref.decode_symbols(expansions[token], substrate))
            except UnicodeDecodeError:
                continue  # part of a character's bytes
        assert len(pieces) > 100 and all(piece in text for piece in pieces)


@pytest.mark.parametrize("substrate, n_base", [("ube", 512), ("utf8", 256), ("utf16", 256)])
def test_whole_pages_as_one_chunk_match_on_every_substrate(substrate, n_base):
    """Real text not pre-tokenized: each page of 26 languages is one word of
    hundreds to thousands of symbols.  Small: kernel == reference; large (1500
    merges over 67 pages): the linked-list path == in-place rewriting, merge for merge."""
    rows = docs_sample_rows()
    small = collections.Counter(tuple(ref.route_symbols(row["text"][:400], substrate)) for row in rows[:3])
    both(dict(small), n_base=n_base, max_vocab=n_base + 60, min_frequency=2)
    pages = collections.Counter(tuple(ref.route_symbols(row["text"][:3000], substrate)) for row in rows)
    assert min(map(len, pages)) >= 64         # every page is a long word
    linked = kernel(pages, n_base=n_base, max_vocab=n_base + 1500, long_word=ALL_LONG)
    assert len(linked) == 1500
    assert kernel(pages, n_base=n_base, max_vocab=n_base + 1500, long_word=ALL_SHORT) == linked


# ------------------------------------------------------------------ the call itself

def test_progress_is_called_with_merges_done():
    rng = random.Random(3)
    words = {tuple(rng.randrange(60) for _ in range(rng.randint(2, 30))): rng.randint(1, 5)
             for _ in range(3000)}
    calls = []
    merges = kernel(words, n_base=60, max_vocab=60 + 5000, min_frequency=1, progress=calls.append)
    assert len(merges) > 2048
    assert calls == sorted(calls) and calls[-1] == len(merges) and calls[0] == 2048
    assert kernel(words, n_base=60, max_vocab=60 + 5000, min_frequency=1) == merges


def test_bad_input_is_refused_with_a_message():
    symbols, offsets, counts = pack([((1, 2, 3), 2), ((2, 3), 1)])
    with pytest.raises(ValueError, match="word_offsets has 2 entries for 2 words"):
        train_merges(symbols, offsets[:2], counts, 8, 20, 1, -1)
    with pytest.raises(ValueError, match="word 1 has count 0"):
        train_merges(symbols, offsets, np.array([2, 0], dtype=np.int64), 8, 20, 1, -1)
    with pytest.raises(ValueError, match=r"symbols\[2\] = 3 is not a base id 0..2"):
        train_merges(symbols, offsets, counts, 3, 20, 1, -1)
    with pytest.raises(ValueError, match="not a non-decreasing range"):
        train_merges(symbols, np.array([0, 4, 3], dtype=np.int64), counts, 8, 20, 1, -1)
    with pytest.raises(ValueError, match="counts must be >= 1"):
        ref.train_bpe_reference({(1, 2): 0}, n_base=8, max_vocab=20)


def test_empty_and_single_symbol_words():
    assert kernel({}, n_base=256, max_vocab=300) == []
    assert both({(1,): 5, (): 3}, n_base=256, max_vocab=300, min_frequency=1) == []


# ----------------------------------------------------------------------------- status convention

OUT_OF_MEMORY = """
import resource, numpy as np
from ube_stream._merge import train_merges
from ube_stream.errors import STATUS_NO_MEMORY, check_status, err_buffer
rng = np.random.default_rng(0)
n_words, length = 400_000, 24                                     # 9.6 M symbols: > 64 MB of state
symbols = rng.integers(0, 512, n_words * length).astype(np.uint16)
offsets = np.arange(0, n_words * length + 1, length, dtype=np.int64)
counts = np.ones(n_words, np.int64)
assert train_merges(symbols[:48], offsets[:3], counts[:2], 512, 600, 1, -1)[0] == 0   # warm up
with open("/proc/self/statm") as f:
    virtual = int(f.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (virtual + 64 * 2**20, resource.getrlimit(resource.RLIMIT_AS)[1]))
err = err_buffer()
status, merges = train_merges(symbols, offsets, counts, 512, 5000, 1, -1, None, err)
assert (status, merges) == (STATUS_NO_MEMORY, None), status
assert err[1] == -1 and (err[0] > 0 or err[0] == -1), list(err)
try:
    check_status(status, err, what="training BPE merges")
except MemoryError as exc:
    assert str(exc).startswith("out of memory while training BPE merges"), exc
status, merges = train_merges(symbols[:48], offsets[:3], counts[:2], 512, 600, 1, -1)
assert status == 0 and len(merges) == 46
print("clean status")
"""


@pytest.mark.skipif(not pathlib.Path("/proc/self/statm").exists(), reason="needs Linux RLIMIT_AS")
def test_out_of_memory_is_a_status_not_an_exception():
    """Training state that cannot grow (address-space limit) ends the call with
    STATUS_NO_MEMORY, which check_status turns into MemoryError; training works after."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", OUT_OF_MEMORY], capture_output=True, text=True,
                         cwd=pathlib.Path(__file__).parents[1], timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "clean status"


def test_train_merges_returns_ok_and_refuses_a_short_err():
    symbols, offsets, counts = pack([((1, 2, 3), 2), ((2, 3), 1)])
    status, merges = train_merges(symbols, offsets, counts, 8, 20, 1, -1, None, np.zeros(2, np.int64))
    assert status == 0 and merges.shape == (2, 3)
    with pytest.raises(ValueError, match="err needs 2 int64 entries"):
        train_merges(symbols, offsets, counts, 8, 20, 1, -1, None, np.zeros(1, np.int64))


def test_prepare_then_run_is_train_merges_and_frees_the_inputs_in_between(chunk_counts):
    """The two halves give train_merges' merges (on real text, both word paths); the
    prepared state holds no reference to the inputs (the trainer frees them before the
    merge loop); a state runs once."""
    import gc
    import weakref

    from ube_stream._merge import prepare_merges, run_merges

    words = collections.Counter()
    for chunk, count in chunk_counts.items():
        words[tuple(ref.route_symbols(chunk, "ube"))] += count
    inputs = pack(list(words.items()))
    for long_word in (ALL_LONG, ALL_SHORT):
        _, expected = train_merges(*inputs, 512, 812, 2, -1, long_word=long_word)
        arrays = [a.copy() for a in inputs]
        alive = [weakref.ref(a) for a in arrays]
        status, state = prepare_merges(*arrays, 512, 812, 2, -1, long_word=long_word)
        assert status == 0 and state is not None
        del arrays
        gc.collect()
        assert [r() for r in alive] == [None, None, None]
        seen = []
        status, merges = run_merges(state, seen.append)
        assert status == 0 and np.array_equal(merges, expected) and len(merges) == 300
        assert seen[-1] == 300
        with pytest.raises(ValueError, match="has run already"):
            run_merges(state)
    with pytest.raises(ValueError, match="word_offsets has 1 entries"):
        prepare_merges(inputs[0], inputs[1][:1], inputs[2], 512, 812, 2, -1)
