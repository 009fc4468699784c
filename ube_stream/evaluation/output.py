"""Writers for evaluation tables (see :mod:`ube_stream.evaluation`): a
terminal table, JSON, CSV and a PNG plot of premiums (matplotlib, optional)."""
from __future__ import annotations

import csv
import json
import math
from typing import Any, List, Optional

from ..storage import atomic_open

__all__ = ["format_table", "write_json", "write_csv", "plot_premiums", "script_groups", "tokenizer_labels",
           "plot_context_gain", "context_groups"]

PLOT_HINT = 'pip install "ube-stream[plot]"'


def _num(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def format_table(table: dict, *, max_rows: Optional[int] = None) -> str:
    """A readable fixed-width table: one line per language (sorted by the first
    tokenizer's premium), then per tokenizer Gini / mean tokens / English
    tokens (per group too), then wins for each pair."""
    names: List[str] = table["tokenizers"]
    rows = sorted(table["languages"], key=lambda r: (
        r["tokenizers"][names[0]]["premium"] is None, r["tokenizers"][names[0]]["premium"] or 0, r["lang"]))
    has_groups = any(r["group"] for r in rows)
    has_floor = "floor" in rows[0]["tokenizers"][names[0]] if rows else False
    head = f"{'lang':<12} {'script':<6} " + (f"{'group':<7}" if has_groups else "") + f"{'items':>6} {'chars':>8}"
    sub = "  tok/item premium" + ("  floor" if has_floor else "")
    width = len(sub)
    head += "".join(f"  {n[:width - 2]:>{width - 2}}" for n in names)
    lines = [head, " " * (len(head) - width * len(names)) + sub * len(names)]
    shown = rows if max_rows is None else rows[:max_rows]
    for r in shown:
        line = f"{r['lang']:<12} {(r['script'] or '-'):<6} " + (f"{(r['group'] or '-'):<7}" if has_groups else "")
        line += f"{r['items']:>6} {r['characters']:>8}"
        for n in names:
            t = r["tokenizers"][n]
            line += f"  {_num(t['mean_tokens']):>8} {_num(t['premium'], 3):>7}"
            if has_floor:
                line += f"  {_num(t['floor_mean'], 1):>5}"
        lines.append(line)
    if len(shown) < len(rows):
        lines.append(f"... {len(rows) - len(shown)} more languages (see the JSON / CSV output)")
    inferred = sum(1 for source in table.get("script_source", {}).values() if source == "inferred")
    if inferred:
        lines.append(f"scripts of {inferred} languages inferred from their text (no 'script' field): "
                     f"{table.get('script_inference', '')}")
    lines.append("")
    ref = table["reference"]
    lines.append(f"{'tokenizer':<16} {'languages':>9} {'Gini':>7} {'mean prem':>9} {'tok/item':>8} "
                 f"{ref + ' tokens':>12}")
    for n in names:
        s = table["summary"][n]
        lines.append(f"{n:<16} {s['languages']:>9} {s['gini']:>7.4f} {s['mean_premium']:>9.3f} "
                     f"{s['mean_tokens']:>8.2f} {s['english_tokens']:>12}")
        for g, gs in sorted(s["groups"].items()):
            mean_tokens = f"{gs['mean_tokens']:>8.2f}" if "mean_tokens" in gs else ""
            lines.append(f"  {g + f' (+{ref})':<14} {gs['languages']:>9} {gs['gini']:>7.4f} "
                         f"{gs['mean_premium']:>9.3f} {mean_tokens}".rstrip())
    for p in table["pairs"]:
        line = f"{p['a']} vs {p['b']}: won {p['won']}, lost {p['lost']}, tied {p['tied']}"
        for g, c in sorted(p["groups"].items()):
            line += f"; {g}: {c['won']}/{c['lost']}/{c['tied']}"
        lines.append(line)
    lines.extend(_context_lines(table))
    return "\n".join(lines) + "\n"


def _context_lines(table: dict) -> List[str]:
    """Context capacity: per tokenizer the characters of the reference language in the
    window, per pair the gain in characters (median, mean, largest and where)."""
    context = table.get("context")
    if not context:
        return []
    ref = table["reference"]
    ref_row = next((r for r in table["languages"] if r["lang"] == ref), None)
    lines = [f"context capacity, {context['window']} tokens (characters that fit; gain = A/B - 1):"]
    if ref_row is not None:
        lines.append("  " + ", ".join(f"{n} {ref_row['tokenizers'][n]['context_chars']} chars "
                                      f"({ref_row['tokenizers'][n]['context_bytes']} bytes)"
                                      for n in table["tokenizers"]) + f" of {ref}")
    for g in context["gains"]:
        if "median" in g:
            lines.append(f"  {g['a']} vs {g['b']}: median {g['median']:+.1%}, mean {g['mean']:+.1%}, "
                         f"max {g['max']:+.1%} ({g['max_lang']})")
    return lines


def write_json(table: dict, path) -> None:
    """The whole table as JSON (UTF-8, indented)."""
    with atomic_open(path, "w") as f:
        json.dump(table, f, ensure_ascii=False, indent=1)
        f.write("\n")


CSV_FIELDS = ("tokens", "mean_tokens", "premium", "floor", "floor_mean", "context_chars", "context_bytes")


def write_csv(table: dict, path) -> None:
    """One row per language: lang, script, group, items, characters,
    shared_keys, then ``<tokenizer>_<field>`` for tokens, mean_tokens,
    premium, floor, floor_mean, context_chars, context_bytes (empty without
    ``--context``)."""
    names = table["tokenizers"]

    with atomic_open(path, "w") as f:
        w = csv.writer(f)
        w.writerow(["lang", "script", "group", "items", "characters", "shared_keys"]
                   + [f"{n}_{field}" for n in names for field in CSV_FIELDS])
        for r in table["languages"]:
            w.writerow([r["lang"], r["script"] or "", r["group"] or "", r["items"], r["characters"],
                        r["shared_keys"]]
                       + ["" if r["tokenizers"][n].get(field) is None else r["tokenizers"][n][field]
                          for n in names for field in CSV_FIELDS])


# ISO 15924 names of the scripts in the bundled sample (others are shown by their code)
SCRIPT_NAMES = {
    "Adlm": "Adlam", "Arab": "Arabic", "Armn": "Armenian", "Beng": "Bengali", "Cakm": "Chakma",
    "Cans": "Canadian Syllabics", "Cher": "Cherokee", "Copt": "Coptic", "Cyrl": "Cyrillic", "Deva": "Devanagari",
    "Ethi": "Ethiopic", "Geor": "Georgian", "Grek": "Greek", "Gujr": "Gujarati", "Guru": "Gurmukhi",
    "Hang": "Hangul", "Hani": "Han", "Hans": "Han (Simplified)", "Hant": "Han (Traditional)", "Hebr": "Hebrew", "Hmnp": "Nyiakeng Puachue Hmong",
    "Jpan": "Japanese", "Khmr": "Khmer", "Knda": "Kannada", "Kore": "Korean", "Laoo": "Lao", "Latn": "Latin",
    "Mlym": "Malayalam", "Mymr": "Myanmar", "Nkoo": "N'Ko", "Olck": "Ol Chiki", "Orya": "Odia", "Osge": "Osage",
    "Sinh": "Sinhala", "Sunu": "Sunuwar", "Syrc": "Syriac", "Taml": "Tamil", "Telu": "Telugu", "Tfng": "Tifinagh",
    "Thaa": "Thaana", "Thai": "Thai", "Tibt": "Tibetan", "Vaii": "Vai", "Yiii": "Yi",
}
SUBSTRATE_LABELS = {"ube": "UBE", "utf8": "BBPE", "utf16": "BBPE16"}
_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


def tokenizer_labels(table: dict) -> List[str]:
    """Display names: ``UBE`` / ``BBPE`` / ``BBPE16`` for tokenizers named by
    their substrate (as ``ube demo`` and ``ube compare`` name them), else the name."""
    info = table.get("tokenizer_info", {})
    labels = []
    for name in table["tokenizers"]:
        substrate = info.get(name, {}).get("substrate")
        labels.append(SUBSTRATE_LABELS.get(name, name) if name == substrate or substrate is None else name)
    return labels


def _quartiles(values: List[float]):
    import numpy as np

    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return float(q1), float(median), float(q3)


def script_groups(table: dict) -> List[dict]:
    """Languages grouped by script, for the plot: per script its languages'
    premiums per tokenizer and the token ratio of the first tokenizer to each
    other one (``tokens_first / tokens_other`` per language: below 1, the
    first needs fewer tokens), sorted by the median ratio to the second
    tokenizer.  Languages without a script are grouped under ``"?"``."""
    names = table["tokenizers"]
    groups: dict = {}
    for r in table["languages"]:
        t = r["tokenizers"]
        if any(t[n]["premium"] is None or not t[n]["tokens"] for n in names):
            continue
        g = groups.setdefault(r["script"] or "?", {"script": r["script"] or "?", "langs": [],
                                                     "premium": {n: [] for n in names},
                                                     "ratio": {n: [] for n in names[1:]}})
        g["langs"].append(r["lang"])
        for n in names:
            g["premium"][n].append(t[n]["premium"])
        for n in names[1:]:
            g["ratio"][n].append(t[names[0]]["tokens"] / t[n]["tokens"])
    out = list(groups.values())
    if len(names) > 1:
        out.sort(key=lambda g: (_quartiles(g["ratio"][names[1]])[1], -len(g["langs"]), g["script"]))
    else:
        out.sort(key=lambda g: (-_quartiles(g["premium"][names[0]])[1], g["script"]))
    return out


def plot_premiums(table: dict, path, *, title: Optional[str] = None) -> None:
    """PNG of the evaluation grouped by script: one row per script (``Latin
    (229)``: its name and number of languages), sorted by how much the first
    tokenizer saves over the second.  Left: the token premium vs the
    reference language of each tokenizer (median marker, bar from the 25th
    to the 75th percentile of the script's languages).  Right: the token
    ratio first/other per language (e.g. UBE/BBPE and UBE/BBPE16; below 1 the
    first tokenizer needs fewer tokens), median and the full range.  The
    title line counts the languages each pair won, lost and tied.

    Needs matplotlib (the ``[plot]`` extra); without it, ImportError says how
    to install it.  Uses the Agg canvas directly, so no GUI backend and no
    global pyplot state is touched.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(f"plotting needs matplotlib, which is not installed: {PLOT_HINT}") from exc
    names = table["tokenizers"]
    labels = dict(zip(names, tokenizer_labels(table)))
    groups = script_groups(table)
    if not groups:
        raise ValueError("nothing to plot: no language has a premium")
    n_rows = len(groups)
    two = len(names) > 1
    fig = Figure(figsize=(13.0 if two else 8.0, 2.2 + 0.27 * n_rows), dpi=110)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": [1.25, 1]}) if two else [fig.subplots()]
    ys = list(range(n_rows))[::-1]          # the first group at the top
    ytick = [f"{SCRIPT_NAMES.get(g['script'], g['script'])} ({len(g['langs'])})" for g in groups]
    band = 0.26

    ax = axes[0]
    for k, n in enumerate(names):
        offset = band * (k - (len(names) - 1) / 2)
        stats = [_quartiles(g["premium"][n]) for g in groups]
        ax.hlines([y - offset for y in ys], [s[0] for s in stats], [s[2] for s in stats],
                  color=_COLORS[k % len(_COLORS)], linewidth=2.2, alpha=0.55)
        ax.plot([s[1] for s in stats], [y - offset for y in ys], "o", markersize=4.5,
                color=_COLORS[k % len(_COLORS)],
                label=f"{labels[n]} (Gini {table['summary'][n]['gini']:.3f})")
    ax.axvline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_yticks(ys)
    ax.set_yticklabels(ytick, fontsize=9)
    ax.set_ylim(-0.7, n_rows - 0.3)
    ax.set_xlabel(f"token premium vs {table['reference']} (tokens / {table['reference']} tokens; median, "
                  "bar: middle half of the languages)", fontsize=9)
    ax.set_title("Premium per script", fontsize=11)
    ax.grid(axis="x", linewidth=0.4, alpha=0.5)

    if two:
        ax = axes[1]
        others = names[1:]
        for k, n in enumerate(others, start=1):
            offset = band * ((k - 1) - (len(others) - 1) / 2)
            values = [g["ratio"][n] for g in groups]
            ax.hlines([y - offset for y in ys], [min(v) for v in values], [max(v) for v in values],
                      color=_COLORS[k % len(_COLORS)], linewidth=1.2, alpha=0.5)
            ax.plot([_quartiles(v)[1] for v in values], [y - offset for y in ys], "D", markersize=4.5,
                    color=_COLORS[k % len(_COLORS)], label=f"{labels[names[0]]} / {labels[n]}")
        ax.axvline(1.0, color="black", linewidth=0.9)
        ax.set_xlabel(f"tokens of {labels[names[0]]} / tokens of the other, per language "
                      "(median, bar: all languages)", fontsize=9)
        ax.set_title(f"< 1: {labels[names[0]]} needs fewer tokens      > 1: it needs more", fontsize=11)
        ax.grid(axis="x", linewidth=0.4, alpha=0.5)
        ax.tick_params(axis="y", length=0)
    for ax in axes:
        ax.tick_params(axis="x", labelsize=9)
    pairs = [p for p in table.get("pairs", []) if p["a"] == names[0]]
    score = "; ".join(f"{labels[p['a']]} vs {labels[p['b']]}: fewer tokens in {p['won']}, more in {p['lost']}, "
                      f"tied {p['tied']} of {p['won'] + p['lost'] + p['tied']} languages" for p in pairs)
    inferred = "inferred" in table.get("script_source", {}).values()
    fig.suptitle((title or "Token premium by script") + (" (scripts inferred from the text)" if inferred else "")
                 + (f"\n{score}" if score else ""), fontsize=11)
    handles: List[Any] = []
    names_shown: List[str] = []
    for ax in axes:
        h, lbl = ax.get_legend_handles_labels()
        handles += h
        names_shown += lbl
    fig.legend(handles=handles, labels=names_shown, loc="lower center", ncol=len(handles), fontsize=9, frameon=False)
    height = fig.get_figheight()
    fig.tight_layout(rect=(0, 0.45 / height, 1, 1))
    with atomic_open(path, "wb") as f:
        fig.savefig(f, format="png")


def context_groups(table: dict) -> List[dict]:
    """The rows of :func:`plot_context_gain`: per script (``"?"`` without one) its
    languages and the context gain of each of them for the first pair
    (``gains``, fractions), sorted by the median gain, largest first."""
    gains = table["context"]["gains"][0]["languages"]
    scripts = {r["lang"]: r["script"] or "?" for r in table["languages"]}
    groups: dict = {}
    for lang, gain in gains.items():
        g = groups.setdefault(scripts.get(lang, "?"), {"script": scripts.get(lang, "?"), "langs": [], "gains": []})
        g["langs"].append(lang)
        if gain is not None:
            g["gains"].append(gain)
    return sorted(groups.values(), key=lambda g: (-_quartiles(g["gains"] or [0.0])[1], g["script"]))


def plot_context_gain(table: dict, path, *, title: Optional[str] = None) -> None:
    """PNG of the context-capacity gain (``table["context"]``: characters that fit
    in the window, ``A/B - 1``) grouped by script like :func:`plot_premiums`: one
    row per script (``Latin (229)``), per pair the median gain of its languages
    and a bar over all of them, so the labels stay readable at any number of
    languages (the per-language values are in the JSON / CSV).  Needs matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(f"plotting needs matplotlib, which is not installed: {PLOT_HINT}") from exc
    context = table.get("context")
    if not context or not context["gains"] or not context["gains"][0]["languages"]:
        raise ValueError("nothing to plot: the table has no context capacities (evaluate with context=...)")
    gains = context["gains"]
    groups = context_groups(table)
    by_script = {g["script"]: g["langs"] for g in groups}
    order = [g["script"] for g in groups]

    def values(gain: dict, langs: List[str]) -> List[float]:
        return [100 * gain["languages"][lang] for lang in langs if gain["languages"].get(lang) is not None]

    n_rows = len(order)
    fig = Figure(figsize=(9.0, 2.0 + 0.27 * n_rows), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ys = list(range(n_rows))[::-1]
    band = 0.26
    for k, gain in enumerate(gains):
        offset = band * (k - (len(gains) - 1) / 2)
        rows = [(y - offset, values(gain, by_script[sc])) for y, sc in zip(ys, order)]
        rows = [(y, v) for y, v in rows if v]
        color = _COLORS[k % len(_COLORS)]
        ax.hlines([y for y, _ in rows], [min(v) for _, v in rows], [max(v) for _, v in rows],
                  color=color, linewidth=1.2, alpha=0.5)
        ax.plot([_quartiles(v)[1] for _, v in rows], [y for y, _ in rows], "D", markersize=4.5, color=color,
                label=f"{gain['a']} vs {gain['b']} (median {100 * gain['median']:+.1f}%)"
                if gain.get("median") is not None else f"{gain['a']} vs {gain['b']}")
    ax.axvline(0.0, color="black", linewidth=0.9)
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{SCRIPT_NAMES.get(sc, sc)} ({len(by_script[sc])})" for sc in order], fontsize=9)
    ax.set_ylim(-0.7, n_rows - 0.3)
    ax.set_xlabel(f"more characters in {context['window']} tokens, A vs B (%; median, bar: all languages "
                  "of the script)", fontsize=9)
    ax.set_title(title or f"Context capacity gain by script ({context['window']}-token window)", fontsize=11)
    ax.grid(axis="x", linewidth=0.4, alpha=0.5)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    with atomic_open(path, "wb") as f:
        fig.savefig(f, format="png")
