"""The encoder's chunk cache at its edges: chunks whose cached key words agree but
whose lengths differ, chunks of exactly 8/9/15/16/17 bytes (the inline key is two
8-byte words holding up to 15 bytes and the length, longer keys live in an
arena), chunks of 1..6+ tokens (up to 4 ids live in the slot, more spill to an
arena), first ids past 2^24 (they spill too), caches that clear in the middle of a
batch, the model's own numbering (``model_ids``), every substrate.  Truth: the
readable twin (``_reference.encode_reference``) and tiktoken on the same ranks."""
import pickle
import random

import numpy as np
import pytest
from _helpers import openai_ranks, slow_after, superbpe_from_plain

from ube_stream import Tokenizer, train
from ube_stream._reference import encode_reference

SUBSTRATES = ("ube", "utf8", "utf16")
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _edge_chunks():
    """Chunks (GPT-2 / cl100k pieces) of 1..20 bytes that share their first 8 or 16
    bytes with a chunk of another length: letter runs with and without the leading
    space, NUL runs (zero bytes look like the zero padding of a short key), runs of
    a 2-byte letter, digits and punctuation."""
    out = []
    for n in range(1, 21):
        out += [" " + LETTERS[:n], LETTERS[:n], "\x00" * n, " " + "\x00" * n, " " + "é" * n,
                "!" * n, " " + "z" * n]
    out += [" abcdefgh", " abcdefghi", " abcdefghijklmno", " abcdefghijklmnop"]  # 9, 10, 16, 17 bytes
    return out


def _docs(seed, copies=3):
    """Documents of the edge chunks, each chunk several times, in a shuffled order."""
    rng = random.Random(seed)
    chunks = _edge_chunks() * copies
    rng.shuffle(chunks)
    docs = []
    for i in range(0, len(chunks), 37):
        docs.append(" ".join(chunks[i:i + 37]))
    return docs


@pytest.fixture(scope="module")
def toks(docs_rows):
    text = [r["text"] for r in docs_rows[:60]] + _docs(0) * 4
    return {s: train(iter(text), vocab_size=1200, substrate=s, workers=1, show_progress=False) for s in SUBSTRATES}


def test_edge_chunks_cross_the_key_word_boundaries():
    """The chunks really are the edge cases: 8, 9, 16 and 17 bytes, and pairs that
    agree on their first 8 (and 16) bytes with different lengths."""
    lengths = {len(c.encode()) for c in _edge_chunks()}
    assert {8, 9, 15, 16, 17} <= lengths
    by_prefix = {}
    for c in _edge_chunks():
        b = c.encode()
        if len(b) >= 8:
            by_prefix.setdefault(b[:8], set()).add(len(b))
    assert any({8, 9} <= ls for ls in by_prefix.values())
    assert any({16, 17} <= ls for ls in by_prefix.values())
    assert any({15, 16} <= ls for ls in by_prefix.values())


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_edge_chunks_cross_the_inline_id_count(toks, substrate):
    """The edge chunks encode to 1, 2, 3, 4, 5 and more ids (the inline value holds 4)."""
    tok = toks[substrate]
    counts = {len(encode_reference(tok, c)) for c in set(_edge_chunks())}
    assert {1, 2, 3, 4, 5} <= counts and max(counts) > 8


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_cached_ids_equal_the_reference(toks, substrate):
    """First pass (misses), second pass (every chunk a hit) and a pass in another
    order: every document's ids are the twin's."""
    tok = pickle.loads(pickle.dumps(toks[substrate]))  # empty caches of its own
    docs = _docs(1)
    expected = [encode_reference(tok, d) for d in docs]
    for order in (docs, docs, list(reversed(docs))):
        got = tok.encode_ordinary_batch(order)
        want = expected if order[0] is docs[0] else expected[::-1]
        assert [g.tolist() for g in got] == want
    encoder, _ = tok._kernel()
    (stats,) = [encoder.cache_stats(s) for s in range(encoder.num_slots) if encoder.cache_stats(s)["misses"]]
    assert stats["hits"] > 2 * stats["misses"] and stats["sweeps"] == 0


@pytest.mark.parametrize("substrate", SUBSTRATES)
@pytest.mark.parametrize("entries,nbytes", [(3, 1 << 20), (1 << 16, 40)])
def test_cache_that_clears_mid_batch_keeps_ids(toks, substrate, entries, nbytes):
    """A cache bounded to a few entries (or a few key bytes) clears many times inside
    one batch; ids stay the twin's, and a chunk longer than all the key bytes
    (not cached at all) too."""
    tok = pickle.loads(pickle.dumps(toks[substrate]))
    tok.set_cache(entries=entries, bytes=nbytes)
    docs = _docs(2) + [" " + "q" * 60 + " abcdefghijklmnop" * 3]
    expected = [encode_reference(tok, d) for d in docs]
    for _ in range(2):
        assert [g.tolist() for g in tok.encode_ordinary_batch(docs)] == expected
    encoder, _ = tok._kernel()
    assert max(encoder.cache_stats(s)["sweeps"] for s in range(encoder.num_slots)) > 20


def _renumbered(tok):
    """tiktoken ranks of a trained utf8 tokenizer with the 256 bytes numbered last and
    spread out (``from_tiktoken`` then carries an id map, the encoder's ``model_ids``,
    one-ASCII-byte chunks included)."""
    n = tok.vocab_size - len(tok.special_tokens)
    base = {bytes(tok.token_expansion(i)): i for i in range(n)}
    n_merged = len(base) - 256
    return {t: (i - 256 if i >= 256 else n_merged + 3 * i) for t, i in base.items()}


def test_model_ids_through_the_cache(toks):
    """A tokenizer with its own numbering: warm, cold and clearing caches give
    tiktoken's ids on the edge chunks."""
    import tiktoken

    from ube_stream._reference import GPT2_PATTERN

    ranks = _renumbered(toks["utf8"])
    docs = _docs(3) + ["a b c ! ? 1 2 3 x y z"]
    enc = tiktoken.Encoding("perm", pat_str=GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={})
    expected = [enc.encode_ordinary(d) for d in docs]
    ours = Tokenizer.from_tiktoken(ranks, "gpt2")
    assert ours._kernel()[0] is not None and ours.encode("a").tolist() != [ord("a")]  # a real id map
    for _ in range(2):
        assert [g.tolist() for g in ours.encode_ordinary_batch(docs)] == expected
    ours.set_cache(entries=3, bytes=1 << 20)
    assert [g.tolist() for g in ours.encode_ordinary_batch(docs)] == expected


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_first_ids_past_24_bits_spill_and_agree(toks, docs_rows, substrate):
    """An id map numbering every token past 2^24 (a slot holds a first id of 24 bits
    inline): cold, warm and clearing caches give the map of the plain encoder's ids."""
    from ube_stream import _encode
    from ube_stream.pretokenizer import gpt2_class_table
    from ube_stream.substrate import substrate_code

    tok = toks[substrate]
    args = (np.array(tok.merges, dtype=np.uint32).reshape(-1, 2), np.array(tok.merge_results, dtype=np.uint32),
            tok.base_size, substrate_code(substrate), gpt2_class_table())
    n = tok.base_size + len(tok.merges)
    id_map = (np.arange(n, dtype=np.uint64)[::-1] + (1 << 24) + 7).astype(np.uint32)
    plain = _encode.Encoder(*args)
    mapped = _encode.Encoder(*args, id_map=id_map, cache_entries=50)
    docs = _docs(5) + [r["text"] for r in docs_rows[:40]]
    data = "".join(docs).encode()
    offsets = np.cumsum([0] + [len(d.encode()) for d in docs]).astype(np.int64)
    _, want, want_off = plain.encode_utf8(np.frombuffer(data, np.uint8), offsets)
    for _ in range(3):
        _, got, got_off = mapped.encode_utf8(np.frombuffer(data, np.uint8), offsets)
        assert np.array_equal(got_off, want_off) and np.array_equal(got, id_map[want])
    assert mapped.cache_stats()["sweeps"] > 0 and got.min() >= 1 << 24


@pytest.mark.slow
def test_many_distinct_chunks_across_table_growth():
    """Thousands of distinct chunks of 1..20 bytes (the slot table doubles several
    times, probes collide inside and across slot pairs): a warm second pass and a
    cold one agree with tiktoken on cl100k's real ranks."""
    import tiktoken

    ranks = openai_ranks("cl100k_base")
    from ube_stream.pretokenizer import resolve_pattern

    enc = tiktoken.Encoding("cl100k", pat_str=resolve_pattern("cl100k")[1], mergeable_ranks=ranks, special_tokens={})
    rng = random.Random(4)
    words = ["".join(rng.choice(LETTERS) for _ in range(rng.randint(1, 19))) for _ in range(12000)]
    docs = [" ".join(words[i:i + 500]) for i in range(0, len(words), 500)]
    expected = [enc.encode_ordinary(d) for d in docs]
    tok = Tokenizer.from_tiktoken(ranks, "cl100k")
    for _ in range(2):
        assert [g.tolist() for g in tok.encode_ordinary_batch(docs)] == expected
    encoder, _ = tok._kernel()
    assert max(encoder.cache_stats(s)["entries"] for s in range(encoder.num_slots)) > 2 * 4096  # grown 3 times
    assert np.array_equal(np.concatenate(tok.encode_ordinary_batch(docs[::-1])),
                          np.concatenate([np.array(e, np.uint32) for e in expected[::-1]]))


M64 = (1 << 64) - 1


def _inline_hash_twin(chunk: bytes) -> int:
    """The hash of a chunk of 1..15 bytes, written out: the slot key is two
    little-endian words (bytes 0..7; bytes 8..14 and the length in the top byte),
    each xored with a constant, multiplied to 128 bits and the halves xored; odd."""
    k0 = int.from_bytes(chunk[:8].ljust(8, b"\0"), "little")
    k1 = int.from_bytes(chunk[8:].ljust(8, b"\0"), "little") | (len(chunk) << 56)
    r = (k0 ^ 0x9E3779B185EBCA87) * (k1 ^ 0xC2B2AE3D27D4EB4F)
    return ((r & M64) ^ (r >> 64)) | 1


def test_chunk_hash_is_its_twin():
    from ube_stream import _encode

    rng = random.Random(3)
    chunks = [bytes(rng.randrange(256) for _ in range(n)) for n in range(1, 16) for _ in range(20)]
    chunks += [c.encode() for c in _edge_chunks() if len(c.encode()) <= 15]
    for c in chunks:
        assert _encode.chunk_key_hash(np.frombuffer(c, np.uint8)) == _inline_hash_twin(c), c


def _colliding_words(want_pair, mask, count, seed=0):
    """``count`` GPT-2 chunks (" " + lower-case letters, 3..14 bytes) whose home slot
    pair in a table of ``mask + 1`` slots is ``want_pair`` (by the kernel's hash)."""
    from ube_stream import _encode

    rng = random.Random(seed)
    out = set()
    while len(out) < count:
        word = " " + "".join(rng.choice(LETTERS) for _ in range(rng.randrange(2, 14)))
        if _encode.chunk_key_hash(np.frombuffer(word.encode(), np.uint8)) & mask & ~1 == want_pair:
            out.add(word)
    return sorted(out)


@pytest.mark.parametrize("substrate", SUBSTRATES)
@pytest.mark.parametrize("entries", [8, 1 << 16])
def test_chunks_of_one_slot_pair_probe_past_it_and_wrap(toks, substrate, entries):
    """Twelve chunks whose home is the table's last slot pair (slots 4094/4095 of the
    first 4096-slot table, and 14/15 of the 16-slot table of an 8-entry cache, which
    is then full and clears): all but two sit past their pair, wrapped round to the
    table's start, and cold, warm and clearing passes give the reference ids."""
    words = _colliding_words(4094, 4095, 12)
    tok = pickle.loads(pickle.dumps(toks[substrate]))
    tok.set_cache(entries=entries, bytes=1 << 20)
    rng = random.Random(1)
    docs = ["".join(rng.choice(words) for _ in range(40)) for _ in range(6)] + ["".join(words)]
    expected = [encode_reference(tok, d) for d in docs]
    for _ in range(3):
        assert [g.tolist() for g in tok.encode_ordinary_batch(docs)] == expected
    for d, want in zip(docs, expected):
        assert tok.encode_ordinary(d).tolist() == want


def _expansion(merges, base, i):
    if i < base:
        return [i]
    left, right = merges[i - base]
    return _expansion(merges, base, left) + _expansion(merges, base, right)


@pytest.mark.parametrize("n_merges", [100, 256, 255, 600])
def test_dense_pair_table_edges(n_merges):
    """The dense rank table covers pairs of ids below min(DENSE_IDS = 512, base +
    merges); the hash table the rest.  Random merges over 256 base symbols, pairs of
    the ids either side of that edge among them, encoded from the symbols of
    token pairs (short and heap paths): the reference rule's ids."""
    from ube_stream import _encode
    from ube_stream._reference import encode_chunk_reference
    from ube_stream.pretokenizer import gpt2_class_table

    base = 256
    rng = random.Random(n_merges)
    dense = min(512, base + n_merges)
    edge = [i for i in (dense - 2, dense - 1, dense, dense + 1, base - 1, base) if i < base + n_merges]
    merges = []
    for r in range(n_merges):
        top = base + r          # ids available before merge r
        near = [i for i in edge if i < top]
        if near and rng.random() < 0.4:
            pair = (rng.choice(near), rng.choice(near + [rng.randrange(top)]))
            pair = pair if rng.random() < 0.5 else pair[::-1]
        else:
            pair = (rng.randrange(top), rng.randrange(top))
        merges.append(pair)
    results = [base + r for r in range(n_merges)]
    enc = _encode.Encoder(np.array(merges, np.uint32).reshape(-1, 2), np.array(results, np.uint32), base, 1,
                          gpt2_class_table())
    ranked = [(a, b, r) for (a, b), r in zip(merges, results)]
    cases = [_expansion(merges, base, a) + _expansion(merges, base, b) for a in edge for b in edge]
    cases += [sum((_expansion(merges, base, rng.choice(edge)) for _ in range(70)), []) for _ in range(5)]
    assert any(len(c) > 64 for c in cases)  # the heap path too
    for symbols in cases:
        got = enc.encode_chunk_symbols(np.array(symbols, np.uint16)).tolist()
        assert got == encode_chunk_reference(symbols, ranked), symbols[:20]


# --------------------------------------------------------------------------- bound and eviction

CACHE_BOUNDS = {"none": {"bytes": 0}, "tiny": {"bytes": 4096, "entries": 16}, "large": {}}


def _bounded(tok, bound):
    """A copy of ``tok`` (empty caches) whose chunk cache has ``bound`` (``{}``: the default)."""
    copy = pickle.loads(pickle.dumps(tok))
    if bound:
        copy.set_cache(**bound)
    return copy


def _slot_stats(tok):
    encoder, _ = tok._kernel()
    return [encoder.cache_stats(s) for s in range(encoder.num_slots)]


@pytest.fixture(scope="module")
def real_sample(docs_rows, parallel_rows, unicode_rows):
    """Real multilingual text small enough for the readable twin: running text of 26
    languages cut to 800 characters, every 40th parallel item (~270 languages),
    every 6th Unicode test string; each twice, so a second occurrence meets the cache."""
    texts = [r["text"][:800] for r in docs_rows]
    texts += [r["text"] for r in parallel_rows[::40]]
    texts += [r["text"] for r in unicode_rows[::6]]
    texts = [t for t in texts if t]
    return texts + texts[::-1]


@pytest.mark.parametrize("substrate", slow_after(SUBSTRATES))
def test_ids_identical_for_every_cache_size(toks, real_sample, substrate):
    """No cache (0 bytes), a tiny one that sweeps all the time, and the default give the
    readable twin's ids on real multilingual text, on a cold and a warm pass; the
    tiny one stays within its bound and the cacheless one holds nothing."""
    expected = [encode_reference(toks[substrate], t) for t in real_sample]
    for name, bound in CACHE_BOUNDS.items():
        tok = _bounded(toks[substrate], bound)
        for _ in range(2):
            assert [g.tolist() for g in tok.encode_ordinary_batch(real_sample)] == expected, name
        stats = _slot_stats(tok)
        if name == "none":
            assert all(s["entries"] == 0 and s["hits"] == 0 for s in stats)
            assert sum(s["misses"] for s in stats) > 1000
        elif name == "tiny":
            assert sum(s["sweeps"] for s in stats) > 100 and sum(s["hits"] for s in stats) > 0
            assert max(s["entries"] for s in stats) <= 16 and max(s["bytes"] for s in stats) <= 4096
        else:
            assert sum(s["sweeps"] for s in stats) == 0


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_ids_identical_for_every_cache_size_hypothesis(toks, docs_rows, substrate):
    """Arbitrary sequences of real words, edge chunks and random text, cut into
    documents: every cache bound gives the twin's ids."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    words = sorted({w for r in docs_rows[:40] for w in r["text"][:3000].split()})[:400] + _edge_chunks()
    pieces = st.one_of(st.sampled_from(words), st.text(max_size=6))
    tok = toks[substrate]
    bounded = {name: _bounded(tok, bound) for name, bound in CACHE_BOUNDS.items()}

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(docs=st.lists(st.lists(pieces, max_size=60).map(" ".join), min_size=1, max_size=6))
    def check(docs):
        expected = [encode_reference(tok, d) for d in docs]
        for name, t in bounded.items():
            assert [g.tolist() for g in t.encode_ordinary_batch(docs)] == expected, name

    check()


@pytest.mark.parametrize("substrate", slow_after(SUBSTRATES, keep=1))
def test_superbpe_ids_identical_for_every_cache_size(toks, real_sample, docs_rows, substrate):
    """SuperBPE (stage 1 through the chunk cache, stage 2 across chunks): its twin's
    ids with no cache, a sweeping one and the default."""
    from ube_stream._reference import encode_superbpe_reference

    sbpe = superbpe_from_plain(toks[substrate], [r["text"][:20000] for r in docs_rows[:30]])
    texts = real_sample[::3]
    expected = [encode_superbpe_reference(sbpe, t) for t in texts]
    for name, bound in CACHE_BOUNDS.items():
        tok = _bounded(sbpe, bound)
        for _ in range(2):
            assert [g.tolist() for g in tok.encode_ordinary_batch(texts)] == expected, name


def _cl100k_and_token_texts():
    """cl100k (its first 30,000 ranks) as tiktoken's Encoding and as ours (a fresh instance),
    its pattern, and the text of each of its tokens of 1-15 bytes that is well-formed UTF-8."""
    import tiktoken

    from ube_stream.pretokenizer import resolve_pattern

    ranks = openai_ranks("cl100k_base", limit=30000)
    pattern = resolve_pattern("cl100k")[1]
    enc = tiktoken.Encoding("cl100k", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    texts = []
    for token in ranks:
        if 1 <= len(token) <= 15:
            try:
                texts.append(token.decode("utf-8"))
            except UnicodeDecodeError:
                continue
    return enc, Tokenizer.from_tiktoken(ranks, "cl100k"), pattern, texts


def test_one_token_chunks_hit_on_first_sight():
    """The vocabulary's one-token chunks are seeds (gigatoken's seeding): a fresh cl100k
    tokenizer given the text of each token (up to 15 bytes, well-formed UTF-8) as a
    document finds every chunk that is one token among the seeds (a hit, no merge),
    and misses only the chunks that are several tokens (once each); ids: tiktoken's."""
    import regex

    enc, tok, pattern, texts = _cl100k_and_token_texts()
    assert [g.tolist() for g in tok.encode_ordinary_batch(texts, num_threads=1)] == [enc.encode_ordinary(t)
                                                                                       for t in texts]
    chunks = [c for t in texts for c in regex.findall(pattern, t)]
    several = {c for c in chunks if len(c.encode()) > 15 or len(enc.encode_ordinary(c)) > 1}
    (stats,) = [s for s in _slot_stats(tok) if s["hits"]]
    assert stats["misses"] == len(several) and stats["hits"] == len(chunks) - len(several)
    assert len(several) < len(chunks) // 100


def test_seeds_found_after_a_pass_of_hits(docs_rows):
    """A call whose blocks are all hits (a second pass) does not prefetch seed slots,
    and the call after it still finds new one-token chunks among the seeds: after two
    passes over real English text, the text of each token misses only the chunks that
    are several tokens and were not cached by the passes (once each), and every call
    gives tiktoken's ids; then any sequence of calls, repeated and new text (hypothesis),
    gives tiktoken's ids."""
    import regex
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    enc, tok, pattern, tokens = _cl100k_and_token_texts()
    english = [r["text"] for r in docs_rows if r["lang"].split("-")[0] == "en"][:20]
    assert sum(len(t) for t in english) > 20000
    for _ in range(2):
        assert [g.tolist() for g in tok.encode_ordinary_batch(english, num_threads=1)] == [
            enc.encode_ordinary(t) for t in english]
    (before,) = [s for s in _slot_stats(tok) if s["hits"]]
    assert [g.tolist() for g in tok.encode_ordinary_batch(tokens, num_threads=1)] == [
        enc.encode_ordinary(t) for t in tokens]
    (after,) = [s for s in _slot_stats(tok) if s["hits"]]
    cached = {c for t in english for c in regex.findall(pattern, t)}
    chunks = [c for t in tokens for c in regex.findall(pattern, t)]
    several = {c for c in chunks if c not in cached and (len(c.encode()) > 15 or len(enc.encode_ordinary(c)) > 1)}
    assert after["misses"] - before["misses"] == len(several)
    assert after["hits"] - before["hits"] == len(chunks) - len(several)

    words = sorted({w for t in english for w in t[:3000].split()})[:300]
    pieces = st.one_of(st.sampled_from(words), st.sampled_from(tokens[:2000]), st.text(max_size=6))

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(calls=st.lists(st.lists(st.lists(pieces, max_size=80).map(" ".join), min_size=1, max_size=4),
                          min_size=1, max_size=4), repeat=st.booleans())
    def check(calls, repeat):
        for docs in calls + (calls if repeat else []):
            assert [g.tolist() for g in tok.encode_ordinary_batch(docs, num_threads=1)] == [
                enc.encode_ordinary(d) for d in docs]

    check()


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_seeds_give_the_twins_ids(toks, substrate):
    """Seeds are what a miss of their chunk would cache, under every substrate and
    character integrity: each token's text (as one document, seeds on) encodes to the
    readable twin's ids, and is found among the seeds when it is one chunk of one token."""
    tok = _bounded(toks[substrate], {})
    texts = [t for t in (tok.decode([i], errors="replace") for i in range(tok.vocab_size))
             if "\ufffd" not in t and 1 <= len(t.encode()) <= 15]
    expected = [encode_reference(tok, t) for t in texts]
    assert [g.tolist() for g in tok.encode_ordinary_batch(texts, num_threads=1)] == expected
    encoder, _ = tok._kernel()
    (stats,) = [s for s in _slot_stats(tok) if s["hits"] or s["misses"]]
    assert encoder.num_seeds > len(texts) // 2 and stats["hits"] > len(texts) // 2


def test_sweeps_keep_the_frequent_chunks():
    """A stream of one-off words with a few frequent ones among them, through a cache of
    64 chunks: every sweep drops the one-offs and keeps the frequent words (they are
    hit between sweeps), so each distinct chunk misses exactly once: a clear-when-full
    cache would miss the frequent ones again after every clear.  Ids: tiktoken's."""
    import tiktoken

    from ube_stream.pretokenizer import resolve_pattern

    ranks = openai_ranks("cl100k_base", limit=20000)
    enc = tiktoken.Encoding("cl100k", pat_str=resolve_pattern("cl100k")[1], mergeable_ranks=ranks, special_tokens={})
    tok = Tokenizer.from_tiktoken(ranks, "cl100k")
    tok.set_cache(bytes=1 << 20, entries=64)
    hot = [" the", " of", " and", " to", " in", " is", " for", " on", " with", " as"]
    rng = random.Random(7)
    once = set()
    while len(once) < 3000:
        once.add(" q" + "".join(rng.choice(LETTERS) for _ in range(rng.randint(4, 9))))
    stream = []
    for i, word in enumerate(sorted(once)):
        stream += [word, hot[i % len(hot)]]
    docs = ["".join(stream[i:i + 400]) for i in range(0, len(stream), 400)]
    assert [g.tolist() for g in tok.encode_ordinary_batch(docs, num_threads=1)] == [enc.encode_ordinary(d)
                                                                                     for d in docs]
    (stats,) = [s for s in _slot_stats(tok) if s["misses"]]
    assert stats["sweeps"] > 50 and stats["evicted"] > 2500
    assert stats["misses"] == len(once) + len(hot)
    assert stats["hits"] == len(stream) - stats["misses"]


def test_cache_bound_is_checked():
    tok = Tokenizer.from_tiktoken(openai_ranks("cl100k_base", limit=3000), "cl100k")
    for bad in ({"bytes": -1}, {"bytes": 1 << 40}, {"bytes": 1 << 20, "entries": -2}):
        with pytest.raises(ValueError, match="chunk cache takes bytes"):
            tok.set_cache(**bad)


def test_the_threads_of_a_first_call_build_one_encoder(toks, real_sample, monkeypatch):
    """Four threads starting together on a fresh tokenizer build its encoder once (a lock): each
    used to build its own, all but the last thrown away with the chunks they had cached."""
    import threading

    from ube_stream import _encode

    tok = Tokenizer.from_json(toks["ube"].to_json())
    built, gate = [], threading.Barrier(4)
    real_encoder = _encode.Encoder

    def counted(*args, **kwargs):
        built.append(threading.get_ident())
        return real_encoder(*args, **kwargs)

    monkeypatch.setattr(_encode, "Encoder", counted)
    texts = real_sample[:8]

    def encode():
        gate.wait()
        return [list(ids) for ids in tok.encode_ordinary_batch(texts)]

    results = []
    threads = [threading.Thread(target=lambda: results.append(encode())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1
    expected = [encode_reference(toks["ube"], t) for t in texts]
    assert results == [expected] * 4


def test_sweeps_in_place_keep_wrapped_clusters_findable():
    """Sweeps re-place the kept entries in the same slot table.  Here the hot chunks
    and half of the one-off ones have the last slot pair of the 16-slot table of an
    8-entry cache as their home, so their cluster wraps round to the table's start,
    and the other one-offs live elsewhere (the chunk whose insert sweeps does not
    refill a hole the sweep left in the cluster): the hot words (hit between sweeps,
    so kept) must still be found after every sweep (each distinct chunk misses
    exactly once) and the ids are tiktoken's."""
    import tiktoken

    from ube_stream.pretokenizer import resolve_pattern

    ranks = openai_ranks("cl100k_base", limit=20000)
    enc = tiktoken.Encoding("cl100k", pat_str=resolve_pattern("cl100k")[1], mergeable_ranks=ranks, special_tokens={})
    tok = Tokenizer.from_tiktoken(ranks, "cl100k")
    tok.set_cache(bytes=1024, entries=8)   # the smallest table: 16 slots, 8 entries
    at_end, elsewhere = _colliding_words(14, 15, 40, seed=3), _colliding_words(4, 15, 40, seed=4)
    hot = at_end[:3]
    once = [w for pair in zip(at_end[3:], elsewhere) for w in pair]   # a sweep's trigger lands anywhere
    words = hot + once
    stream = []
    for i, word in enumerate(once):
        stream += [word, hot[i % 3], hot[(i + 1) % 3]]
    docs = ["".join(stream[i:i + 30]) for i in range(0, len(stream), 30)]
    assert [g.tolist() for g in tok.encode_ordinary_batch(docs, num_threads=1)] == [enc.encode_ordinary(d)
                                                                                     for d in docs]
    (stats,) = [s for s in _slot_stats(tok) if s["misses"]]
    assert stats["sweeps"] >= 10 and stats["bytes"] >= 16 * 32
    assert stats["misses"] == len(words)


@pytest.mark.slow
@pytest.mark.parametrize("entries", [512, 4096])
def test_sweeps_in_place_on_real_text_keep_ids(docs_rows, parallel_rows, entries):
    """Real multilingual text (running text of 26 languages, ~270 languages of parallel
    items) through cl100k with a cache bounded to ``entries`` chunks: the slot table
    grows, then sweeps again and again (each sweep re-places the kept chunks in the same
    table); ids equal tiktoken's and those of cache 0, twice over."""
    import tiktoken

    from ube_stream.pretokenizer import resolve_pattern

    ranks = openai_ranks("cl100k_base")
    enc = tiktoken.Encoding("cl100k", pat_str=resolve_pattern("cl100k")[1], mergeable_ranks=ranks, special_tokens={})
    texts = [r["text"] for r in docs_rows] + [r["text"] for r in parallel_rows[::3]]
    texts = [t for t in texts if t]
    expected = [enc.encode_ordinary(t) for t in texts]
    tok = Tokenizer.from_tiktoken(ranks, "cl100k")
    tok.set_cache(bytes=64 << 20, entries=entries)
    cold = Tokenizer.from_tiktoken(ranks, "cl100k")
    cold.set_cache(bytes=0)
    for _ in range(2):
        assert [g.tolist() for g in tok.encode_ordinary_batch(texts, num_threads=1)] == expected
    assert [g.tolist() for g in cold.encode_ordinary_batch(texts, num_threads=1)] == expected
    (stats,) = [s for s in _slot_stats(tok) if s["misses"]]
    assert stats["sweeps"] > 5


def test_table_growth_keeps_wrapped_and_colliding_clusters_findable():
    """The slot table doubles (4096 -> 8192 -> 16384 slots) while it holds a cluster of
    chunks whose home is the last slot pair of the 4096-slot table: in the 8192-slot
    table about half of them have the last pair as their home again, so their cluster
    runs past the end and wraps round to slot 0 (growth defers those to the end of its
    walk), the rest stay at slot 4094 and spill into the new half.  After each growth
    every chunk is still found from its home: a later pass misses nothing (each
    distinct chunk misses exactly once) and the ids are tiktoken's."""
    import tiktoken

    from ube_stream.pretokenizer import resolve_pattern

    ranks = openai_ranks("cl100k_base", limit=20000)
    enc = tiktoken.Encoding("cl100k", pat_str=resolve_pattern("cl100k")[1], mergeable_ranks=ranks, special_tokens={})
    tok = Tokenizer.from_tiktoken(ranks, "cl100k")
    tok.set_cache(bytes=64 << 20)
    at_end = _colliding_words(4094, 4095, 24, seed=5)
    rng = random.Random(6)
    fillers = sorted({" " + "".join(rng.choice(LETTERS) for _ in range(rng.randrange(5, 12)))
                      for _ in range(7000)} - set(at_end))
    # small calls: the table grows as entries arrive (a large call would size it at once)
    calls = [["".join(at_end)]] + [["".join(fillers[i:i + 100])] for i in range(0, len(fillers), 100)]
    calls.append(["".join(at_end)])
    for docs in calls:
        assert [g.tolist() for g in tok.encode_ordinary_batch(docs, num_threads=1)] == [enc.encode_ordinary(d)
                                                                                         for d in docs]
    (stats,) = [s for s in _slot_stats(tok) if s["misses"]]
    distinct = len(set(at_end) | set(fillers))
    assert stats["entries"] > 4096 and stats["bytes"] >= 16384 * 32   # doubled twice
    assert stats["misses"] == distinct and stats["sweeps"] == 0
    again = ["".join(fillers[::-1]), "".join(at_end[::-1])]
    assert [g.tolist() for g in tok.encode_ordinary_batch(again, num_threads=1)] == [enc.encode_ordinary(d)
                                                                                      for d in again]
    (stats,) = [s for s in _slot_stats(tok) if s["misses"]]
    assert stats["misses"] == distinct
