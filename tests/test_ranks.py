"""The rank-file kernel (``_ranks.merges_from_ranks``) against its readable twin
and tiktoken: rank vocabularies -> merge lists."""
import random

import numpy as np
import pytest
from _helpers import openai_ranks
from hypothesis import given, settings
from hypothesis import strategies as st

from ube_stream import _ranks
from ube_stream._reference import merges_from_ranks_reference
from ube_stream.errors import STATUS_NOT_BPE, STATUS_OK, TokenizerFormatError, err_buffer
from ube_stream.tokenizer import Tokenizer
from ube_stream.training import train


def kernel(tokens):
    offsets = np.zeros(len(tokens) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in tokens], out=offsets[1:])
    err = err_buffer()
    status, merges = _ranks.merges_from_ranks(b"".join(tokens), offsets, err)
    if status == STATUS_OK:
        return [tuple(m) for m in merges.tolist()]
    assert status == STATUS_NOT_BPE and merges is None
    return ("not bpe", int(err[1]), int(err[0]))


def twin(tokens):
    try:
        return merges_from_ranks_reference(tokens)
    except ValueError as exc:            # "token k (...) leaves n parts"
        words = str(exc).split()
        return ("not bpe", int(words[1]), int(words[-2]))


def vocab_of(merges):
    """Token bytes of a merge list (a valid rank vocabulary, in rank order)."""
    table = [bytes([b]) for b in range(256)]
    for left, right in merges:
        table.append(table[left] + table[right])
    return table[256:]


@pytest.fixture(scope="module")
def utf8_tok(docs_rows):
    return train(iter([r["text"] for r in docs_rows]), vocab_size=2000, substrate="utf8", workers=1,
                 show_progress=False)


@pytest.fixture(scope="module")
def trained_vocab(utf8_tok):
    return vocab_of(utf8_tok.merges)


def test_trained_vocabulary_round_trips(utf8_tok, trained_vocab):
    """The byte strings of a BPE we trained, in merge order, give back its merges
    (a merge list whose tokens are all distinct is its own rank vocabulary)."""
    assert kernel(trained_vocab) == twin(trained_vocab) == [tuple(m) for m in utf8_tok.merges]


@settings(max_examples=200, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 60), st.sampled_from([b"ab", b"abc", b"a b\xc3\xa9"]))
def test_kernel_equals_twin_on_shuffled_vocabularies(rnd, n, alphabet):
    """Random byte strings in random rank order: valid or not, kernel and twin agree
    on the merges, or on the first token that is not a merge and its parts."""
    seen, tokens = set(), []
    while len(tokens) < n:
        token = bytes(rnd.choice(alphabet) for _ in range(rnd.randint(2, 6)))
        if token not in seen:
            seen.add(token)
            tokens.append(token)
    assert kernel(tokens) == twin(tokens)


def test_tie_breaks_by_lowest_rank_then_leftmost():
    # "aaa": pairs "aa"+"a" and "a"+"aa" concatenate to the same rank: leftmost wins
    assert kernel([b"aa", b"aaa"]) == twin([b"aa", b"aaa"]) == [(97, 97), (256, 97)]
    # "abc" with "bc" ranked below "ab": BPE merges "bc" first
    assert kernel([b"bc", b"ab", b"abc"]) == [(98, 99), (97, 98), (97, 256)]


def test_not_bpe_is_a_clear_error():
    ranks = {bytes([b]): b for b in range(256)}
    ranks[b"abc"] = 256                      # no "ab" or "bc" below it: BPE leaves 3 parts
    with pytest.raises(TokenizerFormatError, match=r"token b'abc' \(rank 256\) is not the merge of two "
                                                   r"lower-ranked tokens .* leaves 3 parts"):
        Tokenizer.from_tiktoken(ranks, "gpt2")


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="at least 2 bytes"):
        _ranks.merges_from_ranks(b"abc", np.array([0, 1, 3], dtype=np.int64))
    with pytest.raises(ValueError, match="repeats the bytes"):
        _ranks.merges_from_ranks(b"abab", np.array([0, 2, 4], dtype=np.int64))
    status, merges = _ranks.merges_from_ranks(b"", np.array([0], dtype=np.int64))
    assert status == STATUS_OK and merges.shape == (0, 2)


def test_real_rank_file_prefix_matches_twin():
    """The first 20,000 multi-byte tokens of cl100k_base (real, with its own byte
    order): kernel == twin."""
    ranks = openai_ranks("cl100k_base")     # bpe-openai is a test dependency: no skip
    tokens = [t for t, _ in sorted(ranks.items(), key=lambda kv: kv[1]) if len(t) > 1][:20000]
    random.Random(0).shuffle(tokens[-50:])  # and a tail in a wrong order: same verdict both ways
    assert kernel(tokens) == twin(tokens)


# --------------------------------------------------------------------------- merges -> tokens (expand_merges)

@st.composite
def merge_lists(draw):
    """Merge lists over a small alphabet, valid up to an optional bad merge: repeated
    expansions ((a, bc) after (ab, c)) and repeated pairs included."""
    base = draw(st.integers(1, 6))
    merges, ntok = [], base
    for _ in range(draw(st.integers(0, 40))):
        merges.append((draw(st.integers(0, ntok - 1)), draw(st.integers(0, ntok - 1))))
        ntok += 1   # at most: a repeated expansion makes no token, so later ids may be undefined
    return base, merges


@settings(max_examples=300, deadline=None)
@given(merge_lists())
def test_expand_merges_equals_its_twin(case):
    from ube_stream._reference import derive_tokens_reference
    from ube_stream.tokenizer.core import MAX_TOKEN_SYMBOLS, MAX_TOTAL_SYMBOLS, derive_tokens

    base, merges = case
    want = derive_tokens_reference(merges, base)
    pairs = np.array(merges, dtype=np.int64).reshape(-1, 2)
    err = err_buffer()
    status, results, symbols, offsets = _ranks.expand_merges(pairs, base, MAX_TOKEN_SYMBOLS, MAX_TOTAL_SYMBOLS, err)
    if want is None:   # the first merge joining an id not defined at its rank, named with the count
        assert status == STATUS_NOT_BPE and results is None
        rank = int(err[1])
        assert derive_tokens_reference(merges[:rank], base) is not None
        assert derive_tokens_reference(merges[:rank + 1], base) is None
        assert int(err[0]) == len(derive_tokens_reference(merges[:rank], base)[1])
        with pytest.raises(TokenizerFormatError, match=f"merge {rank} joins ids .* only ids 0..{int(err[0]) - 1} "):
            derive_tokens(merges, base)
        return
    assert status == STATUS_OK
    assert results.tolist() == want[0]
    assert _ranks.expansion_tuples(symbols, offsets) == want[1] == derive_tokens(merges, base)[1]
    assert symbols.dtype == np.uint16 and offsets[-1] == len(symbols)


def test_expand_merges_refuses_oversized_tokens_before_building_them():
    from ube_stream.errors import STATUS_TOO_LARGE
    from ube_stream.tokenizer.core import MAX_TOKEN_SYMBOLS, derive_tokens

    bomb = np.array([[97, 97]] + [[512 + i, 512 + i] for i in range(39)], dtype=np.int64)
    err = err_buffer()
    status, *rest = _ranks.expand_merges(bomb, 512, MAX_TOKEN_SYMBOLS, 1 << 26, err)
    assert status == STATUS_TOO_LARGE and rest == [None, None, None] and err.tolist() == [131072, 16]
    status, *_ = _ranks.expand_merges(bomb[:12], 512, MAX_TOKEN_SYMBOLS, 3000, err)
    assert status == STATUS_TOO_LARGE and err.tolist()[1] == 10   # 512 + 2 + 4 + ... + 1024 > 3000 at rank 10
    with pytest.raises(TokenizerFormatError, match="merge 16 .* makes a token of 131072 base symbols"):
        derive_tokens(bomb.tolist(), 512)
    with pytest.raises(TokenizerFormatError, match=r"merge 0 joins ids \(-1, 3\)"):
        derive_tokens([(-1, 3)], 512)
    with pytest.raises(ValueError, match="n x 2"):
        _ranks.expand_merges(np.zeros((2, 3), np.int64), 512, 10, 10)


def test_expansion_tuples_checks_its_offsets():
    symbols = np.array([1, 2, 3], np.uint16)
    assert _ranks.expansion_tuples(symbols, np.array([0, 1, 3])) == [(1,), (2, 3)]
    assert _ranks.expansion_tuples(symbols, np.array([0])) == []
    with pytest.raises(ValueError):
        _ranks.expansion_tuples(symbols, np.array([0, 4]))
    with pytest.raises(ValueError):
        _ranks.expansion_tuples(symbols, np.array([0, 2, 1]))
