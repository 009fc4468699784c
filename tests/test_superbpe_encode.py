"""SuperBPE encoding (stage 1 inside chunks, stage 2 across the chunks of a span),
checked against the readable twins in ``_reference`` (``superbpe_stage2_reference``,
``encode_superbpe_reference``), hand-worked cases, hypothesis and real text."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ube_stream import _superword
from ube_stream._reference import encode_chunk_reference, superbpe_stage2_reference

HYPO = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _kernel_span(merges, tokens, starts, max_words, n_ids=64):
    stage2 = _superword.Stage2(np.array([m[:2] for m in merges], dtype=np.uint32).reshape(-1, 2),
                               np.array([m[2] for m in merges], dtype=np.uint32), max_words, n_ids)
    return stage2.merge_span(np.array(tokens, dtype=np.uint32), np.array(starts, dtype=np.uint8)).tolist()


# --------------------------------------------------------------------------- hand-worked stage 2

# stage-1 ids: 1 " of", 2 " the", 3 " world", 4 " in", 5 "s"
OF_THE = [(1, 2, 10), (10, 3, 11), (4, 10, 12), (3, 5, 13)]


@pytest.mark.parametrize("tokens, starts, max_words, expected", [
    # " of the world": rank 0 joins " of"+" the" (2 words), rank 1 adds " world" (3 words)
    ([1, 2, 3], [1, 1, 1], 4, [11]),
    ([1, 2, 3], [1, 1, 1], 3, [11]),
    ([1, 2, 3], [1, 1, 1], 2, [10, 3]),          # " of the world" would cover 3 words
    ([1, 2, 3], [1, 1, 1], 1, [1, 2, 3]),        # no token may cross a chunk start
    # " in of the": rank 0 first (" of the"), then " in"+" of the" at rank 2
    ([4, 1, 2], [1, 1, 1], 4, [12]),
    ([4, 1, 2], [1, 1, 1], 2, [4, 10]),
    # " world"+"s" inside one chunk (starts 1, 0): a subword merge, allowed even at max_words 1
    ([3, 5], [1, 0], 1, [13]),
    # rank 1 (" of the"+" world") comes before rank 3 (" world"+"s"): " of the world" + "s"
    ([1, 2, 3, 5], [1, 1, 1, 0], 4, [11, 5]),
    # with max_words 2 rank 1 is not allowed, so rank 3 takes " world"+"s"
    ([1, 2, 3, 5], [1, 1, 1, 0], 2, [10, 13]),
    # " of the of the": two occurrences of rank 0, both merged; (10, 10) has no rank
    ([1, 2, 1, 2], [1, 1, 1, 1], 4, [10, 10]),
    # " the" with no merge partner stays
    ([2, 2, 2], [1, 1, 1], 4, [2, 2, 2]),
])
def test_stage2_golden(tokens, starts, max_words, expected):
    assert superbpe_stage2_reference(tokens, starts, OF_THE, max_words) == expected
    assert _kernel_span(OF_THE, tokens, starts, max_words) == expected


def test_stage2_overlapping_and_disallowed_occurrences():
    """a a a with merge (a, a): leftmost first, non-overlapping; an occurrence the
    max_words rule forbids is skipped and the next one (overlapping it) may merge."""
    merges = [(7, 7, 20)]
    assert _kernel_span(merges, [7, 7, 7], [1, 0, 0], 1) == [20, 7]
    # chunk starts at 0 and 1: (0, 1) crosses a chunk start (not allowed at max_words 1),
    # (1, 2) lies inside the second chunk
    assert superbpe_stage2_reference([7, 7, 7], [1, 1, 0], merges, 1) == [7, 20]
    assert _kernel_span(merges, [7, 7, 7], [1, 1, 0], 1) == [7, 20]
    # a merged token carries its inner chunk starts: (20, 20) would hold 3 chunk starts inside
    merges = [(7, 7, 20), (20, 20, 21)]
    assert _kernel_span(merges, [7, 7, 7, 7], [1, 1, 1, 1], 3) == [20, 20]
    assert _kernel_span(merges, [7, 7, 7, 7], [1, 1, 1, 1], 4) == [21]


# --------------------------------------------------------------------------- kernel == twin

@st.composite
def _spans(draw):
    n_base = draw(st.integers(2, 6))
    n_merges = draw(st.integers(0, 12))
    merges, next_id = [], n_base
    for _ in range(n_merges):
        left = draw(st.integers(0, next_id - 1))
        right = draw(st.integers(0, next_id - 1))
        merges.append((left, right, next_id))
        next_id += 1
    if merges and draw(st.booleans()):  # a repeated pair: the first rank wins
        merges.append(merges[draw(st.integers(0, len(merges) - 1))][:2] + (next_id,))
        next_id += 1
    # long spans take the heap path (> 64 tokens)
    n = draw(st.one_of(st.integers(1, 12), st.integers(60, 120)))
    tokens = draw(st.lists(st.integers(0, n_base - 1), min_size=n, max_size=n))
    starts = [1] + draw(st.lists(st.integers(0, 1), min_size=n - 1, max_size=n - 1))
    return merges, tokens, starts, draw(st.integers(1, 4)), next_id


@HYPO
@given(_spans())
def test_stage2_kernel_equals_twin(case):
    merges, tokens, starts, max_words, n_ids = case
    assert _kernel_span(merges, tokens, starts, max_words, n_ids) == \
        superbpe_stage2_reference(tokens, starts, merges, max_words)


def test_stage2_short_and_heap_paths_agree():
    """One merge table, spans of 64 (min-scan) and 65+ tokens (heap): the same rule."""
    rng = np.random.default_rng(7)
    merges, next_id = [], 4
    for _ in range(40):
        merges.append((int(rng.integers(0, next_id)), int(rng.integers(0, next_id)), next_id))
        next_id += 1
    for n in (63, 64, 65, 66, 300, 1000):
        for max_words in (1, 2, 4):
            tokens = rng.integers(0, 4, n).tolist()
            starts = [1] + rng.integers(0, 2, n - 1).tolist()
            assert _kernel_span(merges, tokens, starts, max_words, next_id) == \
                superbpe_stage2_reference(tokens, starts, merges, max_words)


def test_stage2_bad_input():
    stage2 = _superword.Stage2(np.array([[1, 2]], np.uint32), np.array([3], np.uint32), 4, 4)
    with pytest.raises(ValueError, match="outside 0..3"):
        stage2.merge_span(np.array([1, 9], np.uint32), np.array([1, 1], np.uint8))
    with pytest.raises(ValueError, match="max_words"):
        _superword.Stage2(np.zeros((0, 2), np.uint32), np.zeros(0, np.uint32), 0, 4)
    with pytest.raises(ValueError, match="outside"):
        _superword.Stage2(np.array([[1, 7]], np.uint32), np.array([3], np.uint32), 4, 4)
    err = np.zeros(2, np.int64)
    status, ids, offsets = stage2.encode_spans(np.array([1, 2, 9], np.uint32), np.array([0, 1, 2, 3]),
                                               np.array([2, 3]), np.array([0, 2, 3]), err)
    assert (status, ids, offsets) == (-3, None, None) and err.tolist() == [2, 1]  # STATUS_BAD_ID
    with pytest.raises(ValueError, match="inside a span"):
        stage2.encode_spans(np.array([1, 2, 2], np.uint32), np.array([0, 1, 2, 3]), np.array([3]),
                            np.array([0, 2, 3]))


def test_encode_spans_documents():
    """Spans of several documents: each span merged on its own, offsets per document."""
    stage2 = _superword.Stage2(np.array([[1, 2]], np.uint32), np.array([3], np.uint32), 4, 4)
    # doc 0: chunks [1] [2] one span -> [3]; doc 1: empty; doc 2: chunks [1] | [2] two spans
    status, ids, offsets = stage2.encode_spans(
        np.array([1, 2, 1, 2], np.uint32), np.array([0, 1, 2, 3, 4]), np.array([2, 3, 4]),
        np.array([0, 2, 2, 4]))
    assert status == 0 and ids.tolist() == [3, 1, 2] and offsets.tolist() == [0, 1, 1, 3]


def test_whole_span_bpe_is_plain_bpe_over_the_span():
    """Liu et al.'s encoding (benchmarks/superbpe_rules.py, difference 4): Stage2 holding every
    merge, given a span as one chunk, is plain BPE over the span's base symbols (the twin
    encode_chunk_reference); ours keeps stage 1 inside the chunks.  Hand-worked, "a b" with
    base ids 1 "a", 2 "b", 3 " " and chunks "a" | " b": stage 1 makes 11 "a " (rank 0) and
    10 " b" (rank 1), stage 2 makes 12 "a"+" b"."""
    merges = [(1, 3, 11), (3, 2, 10), (1, 10, 12)]
    # whole span: rank 0 takes "a"+" " across the chunk boundary, then (11, 2) has no rank
    assert encode_chunk_reference([1, 3, 2], merges) == [11, 2]
    assert _kernel_span(merges, [1, 3, 2], [1, 0, 0], 1) == [11, 2]
    # ours: "a" -> [1], " b" -> [10] by stage 1 alone, then stage 2 joins them
    assert [encode_chunk_reference(c, merges[:2]) for c in ([1], [3, 2])] == [[1], [10]]
    assert superbpe_stage2_reference([1, 10], [1, 1], merges[2:], 4) == [12]


@HYPO
@given(_spans())
def test_whole_span_bpe_equals_twin(case):
    """The same on drawn merges and spans (short and heap paths): one chunk start, any max_words."""
    merges, tokens, _, max_words, n_ids = case
    assert _kernel_span(merges, tokens, [1] + [0] * (len(tokens) - 1), max_words, n_ids) == \
        encode_chunk_reference(tokens, merges)


# --------------------------------------------------------------------------- Tokenizer.encode == twin

from _helpers import slow_after, superbpe_from_plain  # noqa: E402

from ube_stream import Tokenizer, train  # noqa: E402
from ube_stream._reference import decode_reference, encode_reference, encode_superbpe_reference  # noqa: E402

SUBSTRATES = ("ube", "utf8", "utf16")
SPECIALS = ["<|endoftext|>", "<|pad|>"]


@pytest.fixture(scope="module")
def plain_by_substrate(docs_rows):
    text = [r["text"] for r in docs_rows][:40]
    return {s: train(iter(text), vocab_size=1200, substrate=s, special_tokens=SPECIALS, workers=1,
                     show_progress=False) for s in SUBSTRATES}


@pytest.fixture(scope="module")
def sample_texts(docs_rows, parallel_rows, unicode_rows):
    """Real multilingual text, kept small for the slow twin: running text (26 languages)
    cut to 600 characters, every 25th parallel item, every 3rd Unicode test string."""
    texts = [r["text"][:600] for r in docs_rows]
    texts += [r["text"] for r in parallel_rows[::25]]
    texts += [r["text"] for r in unicode_rows[::3]]
    return [t for t in texts if t]


@pytest.fixture(scope="module")
def more_texts(docs_rows, parallel_rows, unicode_rows):
    """The slow variant's text: running text cut to 4000 characters, every 5th parallel
    item, every Unicode test string."""
    texts = [r["text"][:4000] for r in docs_rows]
    texts += [r["text"] for r in parallel_rows[::5]]
    texts += [r["text"] for r in unicode_rows]
    return [t for t in texts if t]


@pytest.fixture(scope="module")
def superbpe_by_substrate(plain_by_substrate, docs_rows):
    text = [r["text"][:20000] for r in docs_rows]
    return {s: superbpe_from_plain(plain_by_substrate[s], text) for s in SUBSTRATES}


def _with_max_words(tok, max_words, spans="v1"):
    """``tok`` with another max_words (and span rule ``spans``: the same merges, encoded by that rule)."""
    superbpe = {"stage1_merges": tok.superbpe["stage1_merges"], "max_words": max_words,
                **({"spans": spans} if spans != "v1" else {})}
    return Tokenizer(substrate=tok.substrate, merges=tok.merges, special_tokens=tok._special_internal,
                     pattern=tok.pattern_name, superbpe=superbpe)


def test_hand_built_tokenizer_has_superwords(superbpe_by_substrate):
    """The fixture is what the tests need: stage-2 merges that cross chunks, and text
    where they apply (" of the" as one token in English)."""
    tok = superbpe_by_substrate["utf8"]
    assert len(tok.merges) > tok.superbpe["stage1_merges"] + 40
    pieces = [tok.decode([i]) for i in tok.encode("The name of the game is in the details of the text.")]
    assert " of the" in pieces, pieces


def _check_twin(tok, texts):
    for text, ids in zip(texts, tok.encode_ordinary_batch(texts)):
        assert ids.tolist() == encode_superbpe_reference(tok, text), text[:80]


@pytest.mark.parametrize("substrate", slow_after(SUBSTRATES, keep=0))
def test_superbpe_encode_equals_twin_real_text(superbpe_by_substrate, sample_texts, substrate):
    _check_twin(superbpe_by_substrate[substrate], sample_texts)


@pytest.mark.slow
@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_superbpe_encode_equals_twin_more_real_text(superbpe_by_substrate, more_texts, substrate):
    _check_twin(superbpe_by_substrate[substrate], more_texts)


@pytest.mark.parametrize("max_words", [1, 2, 3])
@pytest.mark.parametrize("substrate", slow_after(SUBSTRATES))
def test_superbpe_max_words_real_text(superbpe_by_substrate, parallel_rows, substrate, max_words):
    tok = _with_max_words(superbpe_by_substrate[substrate], max_words)
    texts = [r["text"] for r in parallel_rows[::40]]
    for text, ids in zip(texts, tok.encode_ordinary_batch(texts)):
        assert ids.tolist() == encode_superbpe_reference(tok, text), text[:80]
        # no token covers more than max_words chunks: each token decodes inside one span
        assert all(tok.decode([i], errors="replace").count(" ") <= max_words for i in ids.tolist())


_WORDS = ["of", "the", "in", "The", "it", "is", "a", "and", "to", "don't", "l’eau", "Straße", "的", "мир",
          "नमस्ते", "e\u0301", "x"]
_GLUE = [" ", "  ", ", ", ".", "\n", "\n\n", "'", "’", "42", " 7", "!?", "\t", "🙂", "\u00a0", "-", ": ", ":",
         "\r\n", "½"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(_WORDS).map(lambda w: " " + w), st.sampled_from(_WORDS),
                          st.sampled_from(_GLUE), st.text(max_size=3)), max_size=30).map("".join),
       st.sampled_from(SUBSTRATES), st.integers(1, 4), st.sampled_from(["v1", "liu"]))
def test_superbpe_encode_equals_twin_generated(superbpe_by_substrate, text, substrate, max_words, spans):
    tok = superbpe_by_substrate[substrate]
    if max_words != tok.superbpe["max_words"] or spans != "v1":
        tok = _with_max_words(tok, max_words, spans)
    try:
        expected = encode_superbpe_reference(tok, text)
    except UnicodeEncodeError:  # a lone surrogate: the encoder raises too
        with pytest.raises(Exception, match="surrogate"):
            tok.encode_ordinary(text)
        return
    assert tok.encode_ordinary(text).tolist() == expected
    assert tok.decode(expected) == text == decode_reference(tok, expected)


def test_encode_reference_dispatches(superbpe_by_substrate):
    tok = superbpe_by_substrate["ube"]
    text = "It is one of the best of the kind, in the end."
    assert encode_reference(tok, text) == encode_superbpe_reference(tok, text) == tok.encode(text).tolist()


def test_stage1_uses_only_stage1_merges(plain_by_substrate):
    """merges[k:] never apply inside stage 1: a stage-2 merge that would outrank
    nothing still waits for stage 2, where the max_words rule governs it."""
    plain = plain_by_substrate["utf8"]
    k = len(plain.merges)
    of, the = int(plain.encode(" of")[0]), int(plain.encode(" the")[0])
    sb = Tokenizer(substrate="utf8", merges=list(plain.merges) + [(of, the)], special_tokens=SPECIALS,
                   superbpe={"stage1_merges": k, "max_words": 1})
    assert sb.encode(" of the").tolist() == [of, the]  # max_words 1: no token crosses a chunk start
    sb2 = _with_max_words(sb, 2)
    assert sb2.encode(" of the").tolist() == [k + 256]
    assert sb2.decode(sb2.encode(" of the, of the")) == " of the, of the"
    assert sb2.encode(" of the, of the").tolist() == [k + 256, int(plain.encode(",")[0]), k + 256]
    # the same merges as a plain tokenizer join nothing across chunks either (stage 1 only)
    flat = Tokenizer(substrate="utf8", merges=sb.merges, special_tokens=SPECIALS)
    assert flat.encode(" of the").tolist() == [of, the]


@pytest.mark.parametrize("substrate", SUBSTRATES)
def test_superbpe_every_entry_agrees(superbpe_by_substrate, sample_texts, substrate):
    """encode, encode_ordinary, encode_batch (1 and 3 threads), encode_utf8_batch,
    specials and a tiny cache: the same ids."""
    tok = superbpe_by_substrate[substrate]
    texts = sample_texts[:60]
    one = [ids.tolist() for ids in tok.encode_ordinary_batch(texts)]
    assert [ids.tolist() for ids in tok.encode_batch(texts, num_threads=3)] == one
    assert [tok.encode(t, disallowed_special=()).tolist() for t in texts] == one
    data = b"".join(t.encode("utf-8") for t in texts)
    offsets = np.cumsum([0] + [len(t.encode("utf-8")) for t in texts])
    for threads in (1, 2):
        ids, token_offsets = tok.encode_utf8_batch(np.frombuffer(data, np.uint8), offsets, num_threads=threads)
        assert [ids[a:b].tolist() for a, b in zip(token_offsets[:-1], token_offsets[1:])] == one
    small = Tokenizer.from_json(tok.to_json())
    small.set_cache(entries=3, bytes=64)
    assert [ids.tolist() for ids in small.encode_ordinary_batch(texts)] == one
    # a special token ends a span: " of<|endoftext|> the" cannot join across it
    text = "one of the<|endoftext|> of the end<|pad|>"
    got = tok.encode(text, allowed_special="all").tolist()
    assert got == encode_superbpe_reference(tok, text, allowed_special="all")
    eot = tok.special_tokens["<|endoftext|>"]
    cut = got.index(eot)
    assert got[:cut] == tok.encode("one of the").tolist()
    assert got[cut + 1:-1] == tok.encode(" of the end").tolist()
    assert tok.decode(got) == text


def test_superbpe_invalid_utf8_names_document(superbpe_by_substrate):
    from ube_stream.errors import InvalidTextError

    tok = superbpe_by_substrate["utf8"]
    data = np.frombuffer(b"of the" + b" ok \xff here", np.uint8)
    with pytest.raises(InvalidTextError) as info:
        tok.encode_utf8_batch(data, np.array([0, 6, len(data)]))
    assert info.value.document == 1


def test_superbpe_file_round_trip_encodes_the_same(superbpe_by_substrate, tmp_path, sample_texts):
    tok = superbpe_by_substrate["ube"]
    path = tmp_path / "sb.json"
    tok.save(path)
    loaded = Tokenizer.load(path)
    assert loaded.superbpe == tok.superbpe
    texts = sample_texts[:30]
    assert [a.tolist() for a in loaded.encode_ordinary_batch(texts)] == \
        [a.tolist() for a in tok.encode_ordinary_batch(texts)]


# --------------------------------------------------------------------------- trained SuperBPE tokenizers

from ube_stream._reference import (  # noqa: E402
    _chunks_reference,
    _merge_pair_training,
    route_symbols,
    superword_span_ends_reference,
)


@pytest.fixture(scope="module")
def training_texts(docs_rows):
    return [r["text"] for r in docs_rows][:40]


@pytest.fixture(scope="module")
def trained_by_substrate(training_texts):
    return {s: train(iter(training_texts), vocab_size=1600, superbpe_transition=1100, substrate=s,
                     special_tokens=SPECIALS, workers=1, show_progress=False) for s in SUBSTRATES}


def _training_segmentation(tok, text):
    """The trainer's final segmentation of ``text``'s spans: each span's chunks encoded
    with the stage-1 merges, then every stage-2 merge replayed in rank order over the
    span as training rewrote its words (``_merge_pair_training``: left to right, no
    overlap, only where at most max_words chunks would be covered)."""
    k, max_words = tok.superbpe["stage1_merges"], tok.superbpe["max_words"]
    merges = [(a, b, r) for (a, b), r in zip(tok.merges, tok.merge_results)]
    chunks = _chunks_reference(text, tok.pattern)
    out, first = [], 0
    for stop in superword_span_ends_reference(chunks, tok.superbpe_spans):
        symbols, flags = [], []
        for chunk in chunks[first:stop]:
            ids = encode_chunk_reference(route_symbols(chunk, tok.substrate), merges[:k])
            symbols += ids
            flags += [1] + [0] * (len(ids) - 1)
        # token starts in base symbols and chunk flags per base symbol, as the trainer keeps them
        starts, chunk_flags = [], []
        for token, flag in zip(symbols, flags):
            starts.append(len(chunk_flags))
            chunk_flags += [flag] + [0] * (len(tok.token_expansion(token)) - 1)
        for left, right, result in merges[k:]:
            if any(a == left and b == right for a, b in zip(symbols, symbols[1:])):
                symbols, starts = _merge_pair_training(symbols, (left, right), result, starts, None,
                                                       chunk_flags + [1], max_words)
        out += symbols
        first = stop
    return out


@pytest.mark.parametrize("substrate", slow_after(("utf8", "ube", "utf16")))
def test_encoding_gives_the_trainers_segmentation(trained_by_substrate, training_texts, substrate):
    """Encoding (lowest stage-2 rank first) equals training's merge-by-merge rewrite
    of every training span (the consistency SuperBPE needs: a model sees at inference
    the tokens it was trained on)."""
    tok = trained_by_substrate[substrate]
    assert len(tok.merges) > tok.superbpe["stage1_merges"] > 0
    for text in training_texts[:4]:
        text = text[:1500]
        assert tok.encode_ordinary(text).tolist() == _training_segmentation(tok, text)


@pytest.mark.parametrize("substrate", slow_after(("utf16", "ube", "utf8")))
def test_trained_superbpe_equals_twin_and_decodes(trained_by_substrate, sample_texts, substrate):
    """Trained SuperBPE: encode == twin; decode, decode_bytes, decode(errors="replace") on
    slices and the stream decoder give the text back."""
    tok = trained_by_substrate[substrate]
    texts = sample_texts[::8]   # ~2,000 texts: the twin rebuilds its rank tables for each one
    for text, ids in zip(texts, tok.encode_ordinary_batch(texts)):
        ids = ids.tolist()
        assert ids == encode_superbpe_reference(tok, text), text[:80]
        assert tok.decode(ids) == text == decode_reference(tok, ids)
        assert tok.decode_bytes(ids) == text.encode("utf-8")
        dec = tok.stream_decoder()
        assert "".join(dec.feed(i) for i in ids) + dec.flush() == text
        half = len(ids) // 2
        assert tok.decode(ids[:half], errors="replace") == decode_reference(tok, ids[:half], errors="replace")


def test_trained_superbpe_makes_superwords_and_fewer_tokens(trained_by_substrate, training_texts):
    """The sample's English text needs fewer tokens under SuperBPE than under the
    same tokenizer without stage 2 (its stage-1 merges alone)."""
    tok = trained_by_substrate["utf8"]
    k = tok.superbpe["stage1_merges"]
    stage1 = Tokenizer(substrate="utf8", merges=tok.merges[:k], special_tokens=SPECIALS)
    text = training_texts[0][:5000]
    assert len(tok.encode(text)) < len(stage1.encode(text))
    pieces = [tok.decode([i], errors="replace") for i in tok.encode(text)]
    assert any(" " in p.strip(" ") for p in pieces)  # some token holds two words


@pytest.mark.parametrize("substrate", slow_after(SUBSTRATES))
def test_trained_superbpe_unicode_audit_round_trips(trained_by_substrate, substrate):
    from ube_stream.verification import verify_unicode

    report = verify_unicode(trained_by_substrate[substrate], substrates=(), item_sets=("audit", "mixed", "emoji"),
                            workers=1, show_progress=False)
    assert report.ok, report.format()
    assert report.checked["audit/alone/tokenizer"] > 100_000


@pytest.mark.slow
def test_trained_superbpe_every_scalar_value(trained_by_substrate, tmp_path):
    """verify --unicode --tokenizer: all 1,112,064 scalar values round-trip."""
    from ube_stream.cli.main import main

    path = tmp_path / "sb.json"
    trained_by_substrate["ube"].save(path)
    assert main(["verify", "--unicode", "--tokenizer", str(path), "--workers", "2", "-q"]) == 0
    from ube_stream.verification import verify_unicode

    report = verify_unicode(trained_by_substrate["utf16"], substrates=(), item_sets=("scalar",), workers=1,
                            show_progress=False)
    assert report.ok and report.checked["scalar/alone/tokenizer"] == 1_112_064


def test_ube_encode_shards_one_and_two_workers(trained_by_substrate, training_texts, tmp_path):
    """Shards of a trained SuperBPE tokenizer: 1 and 2 workers write the same bytes, and
    the shards hold the tokenizer's ids of each document."""
    from _helpers import tree

    from ube_stream.shards import encode_corpus
    from ube_stream.verification import verify_shards

    tok = trained_by_substrate["ube"]
    corpus = tmp_path / "corpus.jsonl"
    import json

    with open(corpus, "w", encoding="utf-8") as f:
        for text in training_texts[:12]:
            f.write(json.dumps({"text": text[:4000]}) + "\n")
    outs = []
    for workers in (1, 2):
        out = tmp_path / f"shards{workers}"
        encode_corpus([str(corpus)], tokenizer=tok, output=str(out), workers=workers, show_progress=False,
                      shard_tokens=4096, unit_rows=3)
        outs.append(out)
    assert tree(outs[0]) == tree(outs[1])
    report = verify_shards(str(outs[0]), workers=1, show_progress=False)
    assert report.ok, report.format()


@pytest.mark.slow  # importing torch and transformers takes ~20 s on the shared machine
def test_transformers_class_encodes_with_stage_2(trained_by_substrate, training_texts):
    """UbeTokenizer (the transformers class) gives Tokenizer.encode's SuperBPE ids, and a
    GPT-2 model built from a config takes them."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from ube_stream.hf import UbeTokenizer

    tok = trained_by_substrate["utf8"]
    hf = UbeTokenizer(tokenizer=tok)
    text = training_texts[1][:800]
    assert hf(text)["input_ids"] == tok.encode(text).tolist()
    assert hf.decode(hf(text)["input_ids"]) == text
    config = transformers.GPT2Config(vocab_size=tok.vocab_size, n_positions=512, n_embd=32, n_layer=1, n_head=2)
    model = transformers.GPT2LMHeadModel(config)
    batch = hf([text[:300], text[300:500]], return_tensors="pt", padding=True)
    with torch.no_grad():
        logits = model(**batch).logits
    assert logits.shape[:2] == batch["input_ids"].shape and logits.shape[2] == tok.vocab_size


def test_export_hf_refuses_superbpe(trained_by_substrate, tmp_path):
    """HF's BPE model cannot express stage 1 inside chunks + stage 2 across them (nor
    max_words): the export is refused with the reason, and nothing is written."""
    tok = trained_by_substrate["utf8"]
    for call in (lambda: tok.export_hf(tmp_path / "tokenizer.json"), tok.to_hf_dict,
                 lambda: tok.export_hf(tmp_path / "folder")):
        with pytest.raises(ValueError, match="SuperBPE tokenizer.*cannot express it exactly.*UbeTokenizer"):
            call()
    assert not list(tmp_path.iterdir())
    # the same merges without stage 2 export as before
    plain = Tokenizer(substrate="utf8", merges=tok.merges, special_tokens=SPECIALS)
    assert plain.to_hf_dict()["model"]["type"] == "BPE"


@pytest.mark.parametrize("pattern, substrate", [("cl100k", "utf8"), ("o200k", "ube"), ("script", "utf16"),
                                                ("regex:\\p{L}+| ?[^\\p{L}]", "ube")])
def test_superbpe_every_pattern_equals_twin(docs_rows, parallel_rows, pattern, substrate):
    """Chunks from each pattern (compiled splits, SCRIPT, a custom regex): the spans and
    stage 2 follow them, kernel == twin."""
    text = [r["text"][:3000] for r in docs_rows[:30]]
    plain = train(iter(text), vocab_size=700, substrate=substrate, pattern=pattern, special_tokens=SPECIALS,
                  workers=1, show_progress=False)
    tok = superbpe_from_plain(plain, text, rounds=1, per_round=80)
    texts = [r["text"] for r in parallel_rows[::60]] + [t[:500] for t in text[:10]]
    _check_twin(tok, texts)


def test_superbpe_with_an_id_map(superbpe_by_substrate, sample_texts):
    """A model numbering of its own (id_map): stage 2 merges internal ids and writes
    the model's; decode takes them back."""
    tok = superbpe_by_substrate["utf8"]
    n = tok.vocab_size
    id_map = np.random.default_rng(3).permutation(n)
    mapped = Tokenizer(substrate="utf8", merges=tok.merges, special_tokens=list(tok._special_internal),
                       superbpe=tok.superbpe, id_map=id_map)
    texts = sample_texts[:40]
    for text, ids, plain_ids in zip(texts, mapped.encode_ordinary_batch(texts), tok.encode_ordinary_batch(texts)):
        assert ids.tolist() == id_map[plain_ids].tolist() == encode_superbpe_reference(mapped, text)
        assert mapped.decode(ids) == text


def test_encode_chunks_writes_where_each_chunk_starts(plain_by_substrate, sample_texts):
    """Encoder.encode_chunks(chunk_tokens=): chunk c's ids are ids[chunk_tokens[c]:chunk_tokens[c+1]],
    each the twin's encoding of that chunk alone; the ids are those of a call without it."""
    from ube_stream.errors import err_buffer
    from ube_stream.pretokenizer import chunk_bounds_batch

    tok = plain_by_substrate["ube"]
    texts = sample_texts[:20]
    data = np.frombuffer(b"".join(t.encode("utf-8") for t in texts), np.uint8)
    offsets = np.cumsum([0] + [len(t.encode("utf-8")) for t in texts]).astype(np.int64)
    ends, doc_chunks = chunk_bounds_batch(data, offsets, "gpt2")
    encoder, _ = tok._kernel()
    chunk_tokens = np.full(ends.size + 1, -1, dtype=np.int64)
    status, ids, token_offsets = encoder.encode_chunks(data, offsets, ends, doc_chunks, 0, err_buffer(), chunk_tokens)
    assert status == 0
    plain_ids = encoder.encode_chunks(data, offsets, ends, doc_chunks, 0, err_buffer())[1]
    assert ids.tolist() == plain_ids.tolist()
    assert chunk_tokens[0] == 0 and chunk_tokens[-1] == ids.size and (np.diff(chunk_tokens) > 0).all()
    assert token_offsets.tolist() == chunk_tokens[doc_chunks].tolist()
    starts = np.concatenate([[offsets[0]], ends[:-1]])
    for c in range(0, ends.size, 37):
        chunk = bytes(data[starts[c]:ends[c]]).decode("utf-8")
        assert ids[chunk_tokens[c]:chunk_tokens[c + 1]].tolist() == encode_reference(tok, chunk)
    with pytest.raises(ValueError, match="chunk_tokens needs"):
        encoder.encode_chunks(data, offsets, ends, doc_chunks, 0, None, np.zeros(ends.size, np.int64))


# --------------------------------------------------------------------------- span rule "liu"

@pytest.fixture(scope="module")
def liu_by_substrate(training_texts):
    return {s: train(iter(training_texts), vocab_size=1600, superbpe_transition=1100, substrate=s,
                     superbpe_spans="liu", special_tokens=SPECIALS, workers=1, show_progress=False)
            for s in ("utf8", "ube")}


@pytest.mark.parametrize("substrate", slow_after(("utf8", "ube")))
def test_liu_encode_equals_twin_and_the_trainers_segmentation(liu_by_substrate, training_texts, sample_texts,
                                                              substrate):
    """A tokenizer trained with span rule liu encodes by that rule: kernel == twin on real
    multilingual text (the twin reads the rule from ``tok.superbpe``), and == training's
    merge-by-merge rewrite of its training spans; decode gives the text back."""
    tok = liu_by_substrate[substrate]
    assert tok.superbpe_spans == "liu" and tok.superbpe["spans"] == "liu"
    for text in training_texts[:3]:
        text = text[:1500]
        assert tok.encode_ordinary(text).tolist() == _training_segmentation(tok, text)
    texts = sample_texts[::16]
    for text, ids in zip(texts, tok.encode_ordinary_batch(texts)):
        assert ids.tolist() == encode_superbpe_reference(tok, text), text[:80]
        assert tok.decode(ids.tolist()) == text


def test_liu_superwords_cross_punctuation_never_colon_space_or_numbers(liu_by_substrate, training_texts):
    """What the rule changes, on the trained tokenizer: some stage-2 token crosses
    punctuation (", " or ". " inside: impossible under v1), none holds ": " (no GPT-2
    chunk holds it, so only a stage-2 merge could) or a number beside other text."""
    import regex

    tok = liu_by_substrate["utf8"]
    k = tok.superbpe["stage1_merges"]
    made = [tok.decode_bytes([tok._model_id(r)], errors="replace") for r in tok.merge_results[k:]]
    assert any(b", " in t or b". " in t for t in made)
    for t in made:
        assert b": " not in t, t
        text = t.decode("utf-8", "replace")
        assert not (regex.search(r"\p{N}", text) and regex.search(r"[^\p{N} ]", text.strip())), t
    v1 = Tokenizer(substrate="utf8", merges=tok.merges, special_tokens=SPECIALS,
                   superbpe={"stage1_merges": k, "max_words": tok.superbpe["max_words"]})
    text = training_texts[0][:3000]
    assert tok.encode(text).tolist() != v1.encode(text).tolist()   # the encoder follows the recorded rule


def test_liu_file_round_trip_and_unknown_rule(liu_by_substrate, tmp_path):
    import json

    from ube_stream.errors import TokenizerFormatError

    tok = liu_by_substrate["utf8"]
    path = tmp_path / "liu.json"
    tok.save(path)
    doc = json.loads(path.read_text())
    assert doc["superbpe"]["spans"] == "liu" and doc["training"]["superbpe_spans"] == "liu"
    loaded = Tokenizer.load(path)
    assert loaded.superbpe == tok.superbpe
    text = "Note: the end of the line.\nAnd 42, then: more, of the rest"
    assert loaded.encode(text).tolist() == tok.encode(text).tolist()
    from ube_stream.tokenizer.export import export_vocab_merges

    _, merges_path = export_vocab_merges(tok, tmp_path / "vm")
    with open(merges_path, encoding="utf-8") as f:
        assert f.readline().rstrip("\n").endswith(f"superbpe_max_words={tok.superbpe['max_words']} superbpe_spans=liu")
    for rule in ("v2", "v1", 1):
        doc["superbpe"]["spans"] = rule
        path.write_text(json.dumps(doc))
        with pytest.raises(TokenizerFormatError, match="span rule"):
            Tokenizer.load(path)
    with pytest.raises(ValueError, match="'v1', 'liu'"):
        Tokenizer(substrate="utf8", merges=tok.merges, special_tokens=SPECIALS,
                  superbpe={**tok.superbpe, "spans": "LIU"})
