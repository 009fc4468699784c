"""Evaluation metrics of the paper: token premium, Gini coefficient, wins.

Pure functions over token counts (no I/O, no tokenizer): the counts come from
:mod:`ube_stream.evaluation`, which reads a parallel file and encodes it.

Definitions (docs/DESIGN.md, Evaluation)

token premium
    of a language ``L`` against the reference ``R`` (English):
    ``sum(tokens[L][k] for k in K) / sum(tokens[R][k] for k in K)`` where ``K``
    is the set of keys both ``L`` and ``R`` have: a ratio of sums, not a mean of
    ratios.  The reference's own premium is 1.
Gini coefficient
    of non-negative values ``x_1..x_n`` (premiums of all evaluated languages,
    the reference included with premium 1): the mean absolute difference over
    all ordered pairs divided by twice the mean,
    ``G = sum_i sum_j |x_i - x_j| / (2 * n**2 * mean(x))``.  0 when every
    language pays the same; it approaches 1 when one language pays for all.
win / loss / tie
    tokenizer A *wins* a language against B when A's token total on the keys
    both evaluations have for that language is smaller, *loses* when larger,
    and *ties* when the totals are equal.

Language tags are compared by :func:`language_key`: the primary subtag, plus
the script for Chinese (``zh-CN`` ~ ``zh-Hans``, ``zh-TW`` ~ ``zh-Hant``).

Worked example::

    >>> totals = {"en": {"a": 10, "b": 10}, "hi": {"a": 30, "b": 20, "c": 99}}
    >>> token_premiums(totals)          # c is not in English: left out
    {'en': 1.0, 'hi': 2.5}
    >>> round(gini([1.0, 2.5]), 4)      # |1-2.5| * 2 / (2 * 4 * 1.75)
    0.2143
"""
from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

__all__ = [
    "language_key",
    "resolve_language",
    "token_premiums",
    "gini",
    "win_loss",
    "evaluation_table",
]

KeyTotals = Mapping[str, Mapping[str, int]]   # language -> key -> tokens

# Chinese languages: their key keeps the script; region subtags imply one.
_CHINESE_DEFAULT_SCRIPT = {"zh": "Hans", "yue": "Hant"}
_REGION_SCRIPT = {"CN": "Hans", "SG": "Hans", "MY": "Hans",
                  "TW": "Hant", "HK": "Hant", "MO": "Hant"}


def language_key(tag: str, script: Optional[str] = None) -> str:
    """The comparison key of a BCP 47-ish language tag.

    The primary subtag, lower-cased (``en-US`` -> ``en``, ``sr-Latn`` -> ``sr``),
    except for Chinese (``zh``, and Cantonese ``yue``) whose key keeps the
    script: an explicit script subtag wins, then the region (``CN``/``SG``/``MY``
    -> ``Hans``; ``TW``/``HK``/``MO`` -> ``Hant``), then ``script`` (the parallel
    file's ``script`` field), then the language's default (``zh`` -> ``Hans``,
    ``yue`` -> ``Hant``).  ``_`` separates subtags too.

    >>> language_key("en-US"), language_key("zh-CN"), language_key("zh_TW"), language_key("zh", "Hant")
    ('en', 'zh-Hans', 'zh-Hant', 'zh-Hant')
    """
    if not isinstance(tag, str) or not tag.strip():
        raise ValueError(f"a language tag must be a non-empty string, got {tag!r}")
    subtags = tag.strip().replace("_", "-").split("-")
    primary = subtags[0].lower()
    if primary not in _CHINESE_DEFAULT_SCRIPT:
        return primary
    chosen = None
    for sub in subtags[1:]:
        if len(sub) == 4 and sub.isalpha():
            chosen = sub.title()
            break
    if chosen is None:
        for sub in subtags[1:]:
            if sub.upper() in _REGION_SCRIPT:
                chosen = _REGION_SCRIPT[sub.upper()]
                break
    if chosen is None and script:
        chosen = script.strip().title()
    return f"{primary}-{chosen or _CHINESE_DEFAULT_SCRIPT[primary]}"


def resolve_language(tag: str, available: Iterable[str]) -> List[str]:
    """The tags of ``available`` that ``tag`` names: the tag itself when present
    (case-insensitive), otherwise every tag with the same :func:`language_key`.

    ``resolve_language("en", ["en", "en-GB"])`` is ``["en"]``;
    ``resolve_language("zh-CN", ["zh", "zh-Hant"])`` is ``["zh"]``.
    """
    available = list(available)
    exact = [a for a in available if a.lower() == tag.strip().lower()]
    if exact:
        return exact
    key = language_key(tag)
    return [a for a in available if language_key(a) == key]


def _reference_tag(reference: str, langs: Iterable[str]) -> str:
    langs = list(langs)
    found = resolve_language(reference, langs)
    if len(found) == 1:
        return found[0]
    if not found:
        raise ValueError(f"the reference language {reference!r} is not among the evaluated languages "
                         f"({', '.join(sorted(langs)[:12])}{', ...' if len(langs) > 12 else ''}); "
                         "pass the tag your data uses for English as reference")
    raise ValueError(f"the reference language {reference!r} matches several tags {sorted(found)}; "
                     "pass the exact tag")


def _shared_sums(totals: KeyTotals, lang: str, ref: str):
    """(language total, reference total, number of keys) on the keys both have."""
    mine, theirs = totals[lang], totals[ref]
    keys = mine.keys() & theirs.keys()
    return sum(mine[k] for k in keys), sum(theirs[k] for k in keys), len(keys)


def token_premiums(totals_by_lang_and_key: KeyTotals, reference: str = "en") -> Dict[str, float]:
    """Token premium of every language against ``reference`` (see the module doc).

    ``totals_by_lang_and_key[lang][key]`` is the token count of item ``key`` in
    language ``lang``.  The reference is found with :func:`resolve_language`.
    A language that shares no key with the reference (or whose shared
    reference items have zero tokens) is left out of the result.
    """
    ref = _reference_tag(reference, totals_by_lang_and_key)
    premiums: Dict[str, float] = {}
    for lang in totals_by_lang_and_key:
        mine, theirs, n = _shared_sums(totals_by_lang_and_key, lang, ref)
        if lang == ref:
            premiums[lang] = 1.0
        elif n and theirs > 0:
            premiums[lang] = mine / theirs
    return premiums


def gini(values: Iterable[float]) -> float:
    """Gini coefficient of non-negative values.

    ``G = sum_i sum_j |x_i - x_j| / (2 * n**2 * mean)`` (all ordered pairs,
    ``i == j`` included), computed in O(n log n) from the sorted values
    ``x_(1) <= ... <= x_(n)`` as ``G = 2 * sum_i i * x_(i) / (n * sum(x)) - (n + 1) / n``.
    All-zero values give 0.  Example: ``[1, 2, 3, 4]`` has pair differences
    summing to 20 over the 16 ordered pairs, mean 2.5, so ``G = 20 / (2 * 16 * 2.5) = 0.25``.
    """
    xs = sorted(float(v) for v in values)
    if not xs:
        raise ValueError("the Gini coefficient needs at least one value, got none")
    if any(math.isnan(v) or v < 0 or math.isinf(v) for v in xs):
        raise ValueError(f"the Gini coefficient needs finite non-negative values, got {xs[:5]}...")
    total = sum(xs)
    if total == 0:
        return 0.0
    n = len(xs)
    weighted = sum(i * x for i, x in enumerate(xs, start=1))
    return max(0.0, 2.0 * weighted / (n * total) - (n + 1) / n)


TotalsLike = Union[Mapping[str, Mapping[str, int]], Mapping[str, float]]


def win_loss(totals_a: TotalsLike, totals_b: TotalsLike) -> Dict[str, str]:
    """Outcome for tokenizer A against B per language: ``"won"`` (A needs fewer
    tokens), ``"lost"`` or ``"tied"`` (equal token totals).

    Pass per-key counts (``lang -> key -> tokens``, compared on the keys both
    have for that language) or per-language totals (``lang -> tokens``).  Only
    languages present in both are judged.
    """
    outcome: Dict[str, str] = {}
    for lang in totals_a:
        if lang not in totals_b:
            continue
        side_a, side_b = totals_a[lang], totals_b[lang]
        if isinstance(side_a, Mapping) != isinstance(side_b, Mapping):
            raise TypeError(f"language {lang!r}: one side gives per-key counts, the other a total; "
                            "pass the same kind for both tokenizers")
        if isinstance(side_a, Mapping) and isinstance(side_b, Mapping):
            keys = side_a.keys() & side_b.keys()
            if not keys:
                continue
            a: float = sum(side_a[k] for k in keys)
            b: float = sum(side_b[k] for k in keys)
        else:
            a, b = side_a, side_b  # type: ignore[assignment]  # totals: numbers
        outcome[lang] = "won" if a < b else "lost" if a > b else "tied"
    return outcome


def _count_outcomes(outcomes: Mapping[str, str], langs: Optional[Iterable[str]] = None) -> Dict[str, int]:
    chosen = outcomes if langs is None else {lang: outcomes[lang] for lang in langs if lang in outcomes}
    counts = {"won": 0, "lost": 0, "tied": 0}
    for result in chosen.values():
        counts[result] += 1
    return counts


def evaluation_table(token_counts: Mapping[str, KeyTotals], *, characters: KeyTotals,
                     floor_costs: Optional[Mapping[str, KeyTotals]] = None,
                     scripts: Optional[Mapping[str, str]] = None,
                     groups: Optional[Mapping[str, str]] = None,
                     reference: str = "en") -> dict:
    """The per-language table for one or several tokenizers.

    ``token_counts[name][lang][key]``: tokens of each item under tokenizer
    ``name``; ``characters[lang][key]``: characters of each item;
    ``floor_costs[name][lang][key]`` (optional): base symbols of each item under
    that tokenizer's substrate; ``scripts[lang]``: a label; ``groups[lang]``: a
    regime label (e.g. ``"seen"`` / ``"unseen"``) for per-group summaries.

    Returns a JSON-ready dict::

        {"reference": "en", "tokenizers": [names...],
         "languages": [{"lang", "script", "group", "items", "characters", "shared_keys",
                        "tokenizers": {name: {"tokens", "mean_tokens", "premium",
                                              "floor", "floor_mean"}}}, ...],
         "summary": {name: {"gini", "mean_tokens", "mean_premium", "english_tokens",
                            "languages", "groups": {group: {"gini", "mean_premium", "mean_tokens",
                                                               "languages"}}}},
         "pairs": [{"a", "b", "won", "lost", "tied", "groups": {group: {...}},
                    "outcomes": {lang: "won"|"lost"|"tied"}}]}

    ``tokens``/``floor`` are totals on the keys the language shares with the
    reference; ``mean_tokens`` and ``floor_mean`` divide them by ``shared_keys``.
    Per tokenizer, ``gini`` is over every language with a premium (the
    reference included, premium 1), ``mean_tokens`` the mean over those
    languages of their ``mean_tokens``, ``english_tokens`` the reference's
    total.  A group's Gini includes the reference too (premiums are relative to
    it).  Pairs compare each tokenizer with each later one (A vs B) on token
    totals over each language's items.
    """
    names = list(token_counts)
    if not names:
        raise ValueError("evaluation_table needs the counts of at least one tokenizer")
    langs = list(characters)
    ref = _reference_tag(reference, langs)
    scripts = scripts or {}
    groups = groups or {}
    rows = []
    premiums = {name: token_premiums(token_counts[name], ref) for name in names}
    for lang in langs:
        shared = sorted(characters[lang].keys() & characters[ref].keys())
        row: Dict[str, Any] = {"lang": lang, "script": scripts.get(lang), "group": groups.get(lang),
               "items": len(characters[lang]), "characters": sum(characters[lang].values()),
               "shared_keys": len(shared), "tokenizers": {}}
        for name in names:
            counts = token_counts[name].get(lang, {})
            tokens = sum(counts[k] for k in shared)
            entry: Dict[str, Any] = {"tokens": tokens, "mean_tokens": tokens / len(shared) if shared else None,
                     "premium": premiums[name].get(lang)}
            if floor_costs is not None:
                floor = sum(floor_costs[name][lang][k] for k in shared)
                entry["floor"] = floor
                entry["floor_mean"] = floor / len(shared) if shared else None
            row["tokenizers"][name] = entry
        rows.append(row)

    group_names = sorted({g for g in groups.values() if g is not None})
    summary: Dict[str, Any] = {}
    for name in names:
        prem = premiums[name]
        means = [r["tokenizers"][name]["mean_tokens"] for r in rows if r["lang"] in prem]
        per_group = {}
        for g in group_names:
            members = [lang for lang in prem if groups.get(lang) == g or lang == ref]
            values = [prem[lang] for lang in members]
            group_means = [r["tokenizers"][name]["mean_tokens"] for r in rows if r["lang"] in members]
            per_group[g] = {"gini": gini(values), "mean_premium": sum(values) / len(values),
                            "mean_tokens": sum(group_means) / len(group_means), "languages": len(members)}
        summary[name] = {
            "gini": gini(prem.values()),
            "mean_tokens": sum(means) / len(means),
            "mean_premium": sum(prem.values()) / len(prem),
            "english_tokens": sum(token_counts[name][ref].values()),
            "languages": len(prem),
            "groups": per_group,
        }
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            outcomes = win_loss(token_counts[a], token_counts[b])
            pair: Dict[str, Any] = {"a": a, "b": b, **_count_outcomes(outcomes)}
            pair["groups"] = {g: _count_outcomes(outcomes, [lang for lang in langs if groups.get(lang) == g])
                              for g in group_names}
            pair["outcomes"] = outcomes
            pairs.append(pair)
    return {"reference": ref, "tokenizers": names, "languages": rows, "summary": summary, "pairs": pairs}


def add_context(table: dict, capacities: Mapping[Tuple[str, str], Mapping[str, int]], window: int) -> None:
    """Put context capacities (``capacities[name, lang]``, as
    :func:`~ube_stream.evaluation.parallel_text.context_capacity` returns them) into
    an :func:`evaluation_table`: ``context_chars`` / ``context_bytes`` per language
    and tokenizer, and ``table["context"] = {"window", "gains": [{"a", "b",
    "languages": {lang: gain}, "median", "mean", "max", "max_lang"}]}``: the gain
    of A over B in characters that fit, ``chars_A / chars_B - 1`` (+0.53: A fits
    53% more text), for each pair of the table, over languages where B fits any."""
    for row in table["languages"]:
        for name, entry in row["tokenizers"].items():
            capacity = capacities[name, row["lang"]]
            entry["context_chars"], entry["context_bytes"] = capacity["characters"], capacity["bytes"]
    gains = []
    for pair in table["pairs"]:
        a, b = pair["a"], pair["b"]
        per_lang = {row["lang"]: row["tokenizers"][a]["context_chars"] / row["tokenizers"][b]["context_chars"] - 1
                    for row in table["languages"] if row["tokenizers"][b]["context_chars"] > 0}
        values = sorted(per_lang.values())
        gain: Dict[str, Any] = {"a": a, "b": b, "languages": per_lang}
        if values:
            middle = len(values) // 2
            gain["median"] = values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2
            gain["mean"] = sum(values) / len(values)
            gain["max_lang"] = max(per_lang, key=lambda lang: (per_lang[lang], lang))
            gain["max"] = per_lang[gain["max_lang"]]
        gains.append(gain)
    table["context"] = {"window": window, "gains": gains}
