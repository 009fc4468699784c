"""Writers for evaluation tables (see :mod:`ube_stream.evaluation`): a
terminal table, JSON, CSV and a PNG plot of premiums (matplotlib, optional)."""
from __future__ import annotations

import csv
import json
import math
from typing import List, Optional

from ..storage import atomic_open

__all__ = ["format_table", "write_json", "write_csv", "plot_premiums"]

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
    lines.append("")
    ref = table["reference"]
    lines.append(f"{'tokenizer':<16} {'languages':>9} {'Gini':>7} {'mean prem':>9} {'tok/item':>8} "
                 f"{ref + ' tokens':>12}")
    for n in names:
        s = table["summary"][n]
        lines.append(f"{n:<16} {s['languages']:>9} {s['gini']:>7.4f} {s['mean_premium']:>9.3f} "
                     f"{s['mean_tokens']:>8.2f} {s['english_tokens']:>12}")
        for g, gs in sorted(s["groups"].items()):
            lines.append(f"  {g + f' (+{ref})':<14} {gs['languages']:>9} {gs['gini']:>7.4f} "
                         f"{gs['mean_premium']:>9.3f}")
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


def plot_premiums(table: dict, path, *, title: Optional[str] = None) -> None:
    """PNG of the token premium per language (sorted by the first tokenizer's
    premium), one series per tokenizer, x labels ``lang (Script)``.

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
    rows = [r for r in table["languages"] if r["tokenizers"][names[0]]["premium"] is not None]
    rows.sort(key=lambda r: (r["tokenizers"][names[0]]["premium"], r["lang"]))
    if not rows:
        raise ValueError("nothing to plot: no language has a premium")
    fig = Figure(figsize=(max(8.0, 0.12 * len(rows) + 2), 5.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    xs = range(len(rows))
    for n in names:
        ys = [r["tokenizers"][n]["premium"] for r in rows]
        ax.plot(xs, [math.nan if y is None else y for y in ys], marker="o", markersize=2.5, linewidth=0.8,
                label=f"{n} (Gini {table['summary'][n]['gini']:.3f})")
    ax.axhline(1.0, color="grey", linewidth=0.6, linestyle="--")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{r['lang']} ({r['script']})" if r["script"] else r["lang"] for r in rows],
                       rotation=90, fontsize=5 if len(rows) > 60 else 8)
    ax.set_xlim(-1, len(rows))
    ax.set_ylabel(f"token premium vs {table['reference']}")
    ax.set_title(title or "Token premium per language (sorted)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_open(path, "wb") as f:
        fig.savefig(f, format="png")


def plot_context_gain(table: dict, path, *, title: Optional[str] = None) -> None:
    """PNG of the context-capacity gain per language (``table["context"]``: characters
    that fit in the window, ``A/B - 1``), one series per pair, sorted by the first
    pair's gain.  A panel of its own beside :func:`plot_premiums`; needs matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(f"plotting needs matplotlib, which is not installed: {PLOT_HINT}") from exc
    context = table.get("context")
    if not context or not context["gains"] or not context["gains"][0]["languages"]:
        raise ValueError("nothing to plot: the table has no context capacities (evaluate with context=...)")
    gains = context["gains"]
    first = gains[0]["languages"]
    langs = sorted(first, key=lambda lang: (first[lang], lang))
    scripts = {r["lang"]: r["script"] for r in table["languages"]}
    fig = Figure(figsize=(max(8.0, 0.12 * len(langs) + 2), 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    xs = range(len(langs))
    for gain in gains:
        ys = [100 * gain["languages"].get(lang, math.nan) for lang in langs]
        ax.plot(xs, ys, marker="o", markersize=2.5, linewidth=0.8, label=f"{gain['a']} vs {gain['b']}")
    ax.axhline(0.0, color="grey", linewidth=0.6, linestyle="--")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([f"{lang} ({scripts[lang]})" if scripts.get(lang) else lang for lang in langs],
                       rotation=90, fontsize=5 if len(langs) > 60 else 8)
    ax.set_xlim(-1, len(langs))
    ax.set_ylabel(f"more text in {context['window']} tokens (%)")
    ax.set_title(title or f"Context capacity gain per language ({context['window']}-token window)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_open(path, "wb") as f:
        fig.savefig(f, format="png")
