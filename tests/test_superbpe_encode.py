"""SuperBPE encoding (stage 1 inside chunks, stage 2 across the chunks of a span),
checked against the readable twins in ``_reference`` (``superbpe_stage2_reference``,
``encode_superbpe_reference``), hand-worked cases, hypothesis and real text."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ube_stream import _superword
from ube_stream._reference import superbpe_stage2_reference

HYPO = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


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
    n = draw(st.one_of(st.integers(1, 12), st.integers(60, 200)))
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
