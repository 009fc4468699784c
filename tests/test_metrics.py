"""Metrics on small hand-checked tables: Gini, token premium, win/loss,
language keys, and the per-language table."""
import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ube_stream.evaluation.metrics import (
    evaluation_table,
    gini,
    language_key,
    resolve_language,
    token_premiums,
    win_loss,
)


def brute_gini(values):
    """Definition, literally: mean |x_i - x_j| over all ordered pairs / (2 * mean)."""
    n = len(values)
    mean = sum(values) / n
    if mean == 0:
        return 0.0
    mad = sum(abs(a - b) for a, b in itertools.product(values, repeat=2)) / n ** 2
    return mad / (2 * mean)


# ---------------------------------------------------------------- Gini
def test_gini_hand_computed():
    # [1, 2, 3, 4]: |differences| of the 16 ordered pairs: 6 unordered pairs
    # (1,2,3,1,2,1 -> 10) counted twice = 20; mean absolute difference 20/16 = 1.25;
    # mean 2.5; G = 1.25 / (2 * 2.5) = 0.25.
    assert gini([1, 2, 3, 4]) == pytest.approx(0.25)
    # [0, 0, 1]: 4 ordered pairs differ by 1 -> MAD 4/9; mean 1/3; G = (4/9) / (2/3) = 2/3
    assert gini([0, 0, 1]) == pytest.approx(2 / 3)
    # premiums 1 (English) and 2.5: MAD = 2 * 1.5 / 4 = 0.75, mean 1.75 -> 0.75 / 3.5 = 0.2142857
    assert gini([1.0, 2.5]) == pytest.approx(0.75 / 3.5)
    assert gini([3, 3, 3]) == 0.0
    assert gini([0, 0]) == 0.0
    assert gini([7]) == 0.0


def test_gini_order_and_scale_free():
    values = [1.0, 1.3, 2.9, 4.2, 1.1]
    assert gini(values) == pytest.approx(gini(list(reversed(values))))
    assert gini(values) == pytest.approx(gini([10 * v for v in values]))


@settings(max_examples=200, deadline=None)
# zero or normal floats: with subnormals (e.g. [0, 5e-324]) the literal O(n^2)
# formula underflows to 0 while the true Gini is 0.5
@given(st.lists(st.one_of(st.just(0.0), st.floats(min_value=1e-9, max_value=1e6)), min_size=1, max_size=30))
def test_gini_matches_definition(values):
    assert gini(values) == pytest.approx(brute_gini(values), abs=1e-9)


@pytest.mark.parametrize("bad", [[], [1, -1], [1, float("nan")], [float("inf"), 1]])
def test_gini_rejects(bad):
    with pytest.raises(ValueError):
        gini(bad)


# ---------------------------------------------------------------- premiums
TOTALS = {
    "en": {"a": 10, "b": 30, "x": 5},          # x: only English has it
    "hi": {"a": 40, "b": 40, "c": 99},         # c: not in English, ignored
    "fr": {"a": 12},                            # one shared key
    "tlh": {"z": 3},                            # shares nothing with English
}


def test_premium_is_ratio_of_sums_on_shared_keys():
    prem = token_premiums(TOTALS)
    assert prem["en"] == 1.0
    # hi: (40 + 40) / (10 + 30) = 2.0 -- the mean of ratios would be (4 + 4/3) / 2 = 2.667
    assert prem["hi"] == pytest.approx(2.0)
    assert prem["fr"] == pytest.approx(12 / 10)
    assert "tlh" not in prem


def test_premium_reference_by_language_key():
    totals = {"en-US": {"a": 4}, "de-DE": {"a": 6}}
    assert token_premiums(totals, "en") == {"en-US": 1.0, "de-DE": 1.5}
    # exact tag wins over a key match
    both = {"en": {"a": 4}, "en-GB": {"a": 5}, "de": {"a": 8}}
    assert token_premiums(both, "en")["de"] == 2.0
    with pytest.raises(ValueError, match="several tags"):
        token_premiums({"en-US": {"a": 1}, "en-GB": {"a": 1}}, "en")
    with pytest.raises(ValueError, match="not among"):
        token_premiums({"de": {"a": 1}}, "en")


# ---------------------------------------------------------------- wins
def test_win_loss_on_common_keys():
    a = {"en": {"k1": 5, "k2": 5}, "hi": {"k1": 10, "k2": 10}, "th": {"k1": 7}, "ja": {"k1": 3}}
    b = {"en": {"k1": 4, "k2": 6}, "hi": {"k1": 12, "k2": 9, "k3": 100}, "th": {"k1": 6}, "ko": {"k1": 1}}
    out = win_loss(a, b)
    # en 10 vs 10: tie; hi on k1,k2: 20 vs 21 (k3 ignored): won; th 7 vs 6: lost; ja/ko: not in both
    assert out == {"en": "tied", "hi": "won", "th": "lost"}
    assert win_loss(b, a) == {"en": "tied", "hi": "lost", "th": "won"}


def test_win_loss_on_totals_and_mixed_kinds():
    assert win_loss({"en": 3, "hi": 9}, {"en": 3, "hi": 8.5}) == {"en": "tied", "hi": "lost"}
    with pytest.raises(TypeError):
        win_loss({"en": 3}, {"en": {"a": 3}})


# ---------------------------------------------------------------- language keys
@pytest.mark.parametrize("tag,script,key", [
    ("en", None, "en"), ("en-US", None, "en"), ("EN_gb", None, "en"), ("sr-Latn", None, "sr"),
    ("zh", None, "zh-Hans"), ("zh-CN", None, "zh-Hans"), ("zh-SG", None, "zh-Hans"),
    ("zh-TW", None, "zh-Hant"), ("zh-HK", None, "zh-Hant"), ("zh_TW", None, "zh-Hant"),
    ("zh-Hant", None, "zh-Hant"), ("zh-hans", None, "zh-Hans"), ("zh-Hant-CN", None, "zh-Hant"),
    ("zh", "Hant", "zh-Hant"), ("zh-CN", "Hant", "zh-Hans"),   # the tag's region beats the field
    ("yue", None, "yue-Hant"), ("yue-Hans", None, "yue-Hans"), ("ZH-tw", None, "zh-Hant"),
])
def test_language_key(tag, script, key):
    assert language_key(tag, script) == key


def test_language_key_rejects_empty():
    with pytest.raises(ValueError):
        language_key("")


def test_resolve_language():
    langs = ["en", "en-GB", "zh", "zh-Hant", "yue-Hans", "sr", "sr-Latn"]
    assert resolve_language("en", langs) == ["en"]
    assert resolve_language("EN-gb", langs) == ["en-GB"]
    assert resolve_language("zh-CN", langs) == ["zh"]
    assert resolve_language("zh-TW", langs) == ["zh-Hant"]
    assert resolve_language("sr-Cyrl", langs) == ["sr", "sr-Latn"]
    assert resolve_language("de", langs) == []


# ---------------------------------------------------------------- the table
def test_evaluation_table_hand_checked():
    chars = {"en": {"a": 5, "b": 5}, "hi": {"a": 4, "b": 4, "c": 1}, "fr": {"a": 6}}
    counts = {
        "A": {"en": {"a": 2, "b": 2}, "hi": {"a": 4, "b": 4, "c": 3}, "fr": {"a": 3}},
        "B": {"en": {"a": 2, "b": 3}, "hi": {"a": 6, "b": 6, "c": 3}, "fr": {"a": 3}},
    }
    floors = {name: {"en": {"a": 5, "b": 5}, "hi": {"a": 12, "b": 12, "c": 3}, "fr": {"a": 7}}
              for name in counts}
    table = evaluation_table(counts, characters=chars, floor_costs=floors,
                             scripts={"en": "Latn", "hi": "Deva", "fr": "Latn"},
                             groups={"en": "seen", "fr": "seen", "hi": "unseen"})
    rows = {r["lang"]: r for r in table["languages"]}
    hi = rows["hi"]
    assert (hi["items"], hi["characters"], hi["shared_keys"], hi["script"], hi["group"]) == (3, 9, 2, "Deva", "unseen")
    assert hi["tokenizers"]["A"] == {"tokens": 8, "mean_tokens": 4.0, "premium": 2.0, "floor": 24, "floor_mean": 12.0}
    assert hi["tokenizers"]["B"]["premium"] == pytest.approx(12 / 5)
    assert rows["fr"]["tokenizers"]["A"]["premium"] == pytest.approx(3 / 2)
    a = table["summary"]["A"]
    assert a["english_tokens"] == 4 and a["languages"] == 3
    assert a["gini"] == pytest.approx(brute_gini([1.0, 2.0, 1.5]))
    assert a["mean_tokens"] == pytest.approx((2 + 4 + 3) / 3)
    assert a["groups"]["unseen"]["gini"] == pytest.approx(brute_gini([1.0, 2.0]))   # English included
    assert a["groups"]["seen"]["languages"] == 2
    (pair,) = table["pairs"]
    # en 4 vs 5 won, hi 11 vs 15 won, fr 3 vs 3 tied
    assert (pair["a"], pair["b"], pair["won"], pair["lost"], pair["tied"]) == ("A", "B", 2, 0, 1)
    assert pair["groups"] == {"seen": {"won": 1, "lost": 0, "tied": 1}, "unseen": {"won": 1, "lost": 0, "tied": 0}}
    assert not math.isnan(table["summary"]["B"]["gini"])
