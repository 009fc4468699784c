"""``ube eval`` and ``ube compare``: the paper's evaluation from the command line.

``ube eval --tokenizer A.json [--tokenizer B.json ...] --parallel FILE``
    token premium per language, Gini, wins; ``--json``/``--csv``/``--plot``.
``ube compare CORPUS... --parallel FILE --vocab-size 8000 [32000 ...] [--pattern gpt2 script]``
    trains ``ube``, ``utf8`` (BBPE) and ``utf16`` (BBPE16) tokenizers on the
    same corpus for each configuration (pattern x vocabulary size) and
    evaluates them (the main table and the ablations), split into languages
    SEEN in the corpus and UNSEEN ones (from the corpus's ``lang`` field or
    ``--seen-langs``), then prints the paper's table: one line per
    configuration and substrate with Gini, mean tokens per item, English
    tokens, and wins/losses against BBPE (``utf8``) of the same configuration.
    ``--superbpe-transition T [T ...]`` adds SuperBPE configurations beside the
    plain ones: each T is a vocabulary size (an integer >= 1) or, below 1, a
    fraction of each vocabulary size (``0.8`` -> T = 0.8 * vocab, rounded);
    ``--superbpe-max-words W`` (default 4); ``--superbpe-spans {v1,liu}`` the
    span rule of every SuperBPE configuration (default v1; ``liu``: Liu et al.'s
    stage-2 boundaries, labelled ``+superbpe24000-liu``).

``--parallel`` defaults to the bundled sample (:func:`ube_stream.sample.sample_paths`).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from typing import Any, Dict, List, Optional, Tuple

from .options import add_format_options, add_workers_option, positive_int

__all__ = ["register"]

_SUBSTRATES = ("ube", "utf8", "utf16")


def _add_eval_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--parallel", default=None, metavar="FILE",
                   help="parallel JSONL file (plain or .zst) with lang, key, text[, script]; "
                        "default: the bundled sample")
    p.add_argument("--reference-lang", default="en", metavar="TAG",
                   help="premiums are relative to this language (default: en)")
    p.add_argument("--eval-langs", nargs="+", default=None, metavar="TAGS",
                   help="evaluate only these languages (tags, comma-separated lists, or files with "
                        "tags); compared by primary subtag (and script for Chinese) when not exact")
    p.add_argument("--json", default=None, metavar="OUT", help="write the whole table as JSON")
    p.add_argument("--csv", default=None, metavar="OUT", help="write one row per language as CSV")
    p.add_argument("--plot", default=None, metavar="PREFIX|DIR/",
                   help="write the plots (PNG, grouped by script): PREFIX-premiums.png and PREFIX-context.png "
                        "(a trailing .png is dropped from PREFIX), or premiums.png and context.png inside DIR "
                        "(a path ending in / or an existing folder); compare adds the configuration "
                        "(PREFIX-8000-premiums.png); every file written is printed "
                        '(needs matplotlib: pip install "ube-stream[plot]")')
    p.add_argument("--max-rows", type=int, default=None, metavar="N",
                   help="print at most N language rows (all by default)")
    p.add_argument("--context", type=positive_int, default=2048, metavar="TOKENS",
                   help="context capacity: the characters and bytes of each language that fit in a window of "
                        "this many tokens, and the gain of each tokenizer over the others (default 2048)")


def register(subparsers) -> None:
    """Add ``eval`` and ``compare`` to an argparse sub-parser collection."""
    p = subparsers.add_parser(
        "eval", help="token premium, Gini and wins of tokenizers on a parallel file",
        description="Evaluate tokenizers on a parallel file (the same messages in many languages: JSON Lines "
                    "with lang, key, text and optionally script): per language the tokens per item and the token "
                    "premium against --reference-lang, per tokenizer the Gini coefficient of the premiums, per "
                    "pair the languages won, lost and tied, and the text that fits in a --context window. "
                    "Without a script field each language's script is inferred from its text. Example: "
                    "ube eval --tokenizer ube.json --tokenizer bbpe.json --plot plots/")
    from .options import add_tokenizer_options

    add_tokenizer_options(p, repeat=True)
    p.add_argument("--seen-langs", nargs="+", default=None, metavar="TAGS",
                   help="languages of the training corpus: splits the summary into seen / unseen")
    _add_eval_options(p)
    p.set_defaults(func=_cmd_eval)

    p = subparsers.add_parser(
        "compare", help="train ube / utf8 / utf16 on one corpus and evaluate them",
        description="Train ube, utf8 (BBPE) and utf16 (BBPE16) tokenizers on the same corpus for each "
                    "configuration (--vocab-size x --pattern [x --superbpe-transition]) and evaluate them as "
                    "`ube eval` does, in two regimes: languages seen in training and languages unseen (withheld "
                    "with --holdout-langs, or absent from the corpus). Prints the paper's table: Gini, tokens per "
                    "item and wins against utf8, overall and per regime. Example: ube compare corpus.jsonl.zst "
                    "--vocab-size 8000 32000 --out cmp/")
    p.add_argument("inputs", nargs="+", metavar="CORPUS", help="training corpus: files, directories or globs")
    p.add_argument("--vocab-size", type=positive_int, nargs="+", action="extend", default=None, metavar="N",
                   help="vocabulary sizes, e.g. --vocab-size 8000 32000 (an ablation; default 8000)")
    p.add_argument("--substrates", nargs="+", action="extend", default=None, metavar="S",
                   help="substrates to train, e.g. --substrates ube utf8 (default: ube utf8 utf16; "
                        "commas also separate)")
    p.add_argument("--pattern", nargs="+", action="extend", default=None, metavar="P",
                   help="pre-tokenization patterns to compare, e.g. --pattern gpt2 script (default: gpt2; "
                        "names or regex:EXPR)")
    p.add_argument("--superbpe-transition", type=_transition, nargs="+", action="extend", default=None,
                   metavar="T", help="also train SuperBPE at these transitions: a vocabulary size (e.g. 24000) "
                                     "or, below 1, a fraction of each --vocab-size (e.g. 0.75)")
    p.add_argument("--superbpe-max-words", type=positive_int, default=4, metavar="W",
                   help="SuperBPE: at most W chunks (words) per token (default 4)")
    p.add_argument("--superbpe-spans", choices=("v1", "liu"), default=None,
                   help="SuperBPE span rule of every SuperBPE configuration (default v1): 'liu' is Liu et al.'s "
                        "stage-2 rule, for the paper's comparison with the original (docs/training.md)")
    add_format_options(p)
    p.add_argument("--lang-field", default="lang",
                   help="corpus field naming each document's language, for the seen/unseen split "
                        "(default: lang; ignored when --seen-langs is given)")
    split = p.add_mutually_exclusive_group()
    split.add_argument("--holdout-langs", default=None, metavar="N|TAGS",
                       help="withhold languages of the corpus (--lang-field) from training so that both regimes "
                            "are measured in one run: seen (trained on) and unseen (withheld). N: that many of "
                            "the corpus's evaluated languages, in a fixed order; TAGS: these (comma-separated); "
                            "0: none. Default: a third of them when every evaluated language is in the corpus "
                            "(else none: the unseen group is already there)")
    split.add_argument("--seen-langs", nargs="+", default=None, metavar="TAGS",
                       help="languages counted as seen in training (overrides --lang-field; trains on the "
                            "whole corpus)")
    split.add_argument("--no-split", action="store_true", help="no seen / unseen split")
    p.add_argument("--min-frequency", type=int, default=2,
                   help="merge a pair only when it occurs at least this often")
    p.add_argument("--max-bytes", type=int, default=None, help="train on about this many bytes of the corpus")
    add_workers_option(p)
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write tokenizers (<substrate>-<vocab>.json), compare.json, compare-<vocab>.csv "
                        "and, with matplotlib, compare-<vocab>.png here")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    _add_eval_options(p)
    p.set_defaults(func=_cmd_compare)


def _transition(text: str) -> float:
    """A --superbpe-transition value: a vocabulary size (int >= 1) or a fraction in (0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a vocabulary size nor a fraction") from None
    if not (0 < value < 1 or (value >= 1 and value == int(value))):
        raise argparse.ArgumentTypeError(f"{text!r}: give a vocabulary size (an integer >= 1) or a fraction "
                                         "in (0, 1) of each vocabulary size")
    return value


def transition_size(value: float, vocab: int) -> int:
    """The transition vocabulary size of a --superbpe-transition value at ``vocab``."""
    return int(round(value * vocab)) if value < 1 else int(value)


def _parallel_path(args) -> str:
    if args.parallel:
        return args.parallel
    from ..sample import sample_paths

    return sample_paths()["parallel"]


def plot_paths(plot: str, label: Optional[str] = None) -> Dict[str, str]:
    """The files ``--plot PLOT`` names: ``{"premiums": ..., "context": ...}``.

    A folder (``DIR/`` or an existing directory) holds ``premiums.png`` and
    ``context.png``; anything else is a prefix (a trailing ``.png`` dropped).
    ``label`` (a compare configuration, e.g. ``8000``) comes before the kind.

    >>> plot_paths("cmp.png", "8000")["premiums"], plot_paths("plots/")["context"]
    ('cmp-8000-premiums.png', 'plots/context.png')
    """
    tail = f"{label}-" if label else ""
    if plot.endswith(("/", os.sep)) or os.path.isdir(plot):
        return {kind: os.path.join(plot, f"{tail}{kind}.png") for kind in ("premiums", "context")}
    prefix = plot[:-4] if plot.lower().endswith(".png") else plot
    return {kind: f"{prefix}-{tail}{kind}.png" for kind in ("premiums", "context")}


def _write_outputs(table: dict, *, json_path: Optional[str], csv_path: Optional[str],
                   plot: Optional[Dict[str, str]], title: Optional[str] = None) -> List[str]:
    """Write what was asked; returns the files written, in order."""
    from ..evaluation.output import plot_context_gain
    from ..evaluation.parallel_text import plot_premiums, write_csv, write_json

    written = []
    if json_path:
        write_json(table, json_path)
        written.append(json_path)
    if csv_path:
        write_csv(table, csv_path)
        written.append(csv_path)
    if plot:
        folder = os.path.dirname(plot["premiums"])
        if folder:
            os.makedirs(folder, exist_ok=True)
        plot_premiums(table, plot["premiums"], title=title)
        written.append(plot["premiums"])
        if table.get("context", {}).get("gains"):
            plot_context_gain(table, plot["context"])
            written.append(plot["context"])
    return written


def _print_written(paths: List[str]) -> None:
    for path in paths:
        print(f"wrote {path}")


def _plot_missing(args, command: str) -> bool:
    """Fail fast (before any work) when --plot is asked for without matplotlib."""
    if not args.plot:
        return False
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        from ..evaluation.output import PLOT_HINT

        print(f"ube {command}: error: --plot needs matplotlib, which is not installed: {PLOT_HINT}",
              file=sys.stderr)
        return True
    return False


def _cmd_eval(args: argparse.Namespace) -> int:
    from ..evaluation.parallel_text import _tokenizer_names, evaluate, format_table, read_language_list
    from .options import load_tokenizer

    if _plot_missing(args, "eval"):
        return 1
    loaded = [load_tokenizer(args, source) for source in args.tokenizer]
    names = _tokenizer_names(list(zip(loaded, args.tokenizer)), None)
    table = evaluate(loaded, _parallel_path(args), names=names, reference=args.reference_lang,
                     eval_langs=read_language_list(args.eval_langs),
                     seen_langs=read_language_list(args.seen_langs), context=args.context)
    sys.stdout.write(format_table(table, max_rows=args.max_rows))
    _print_written(_write_outputs(table, json_path=args.json, csv_path=args.csv,
                                  plot=plot_paths(args.plot) if args.plot else None))
    return 0


def _configuration(pattern: str, vocab: int, multi_pattern: bool, transition: Optional[int] = None,
                   spans: str = "v1") -> str:
    """The label of one configuration: ``32000``, or ``script/32000`` when patterns
    vary; ``+superbpe24000`` appended for a SuperBPE one (``+superbpe24000-liu``
    with span rule ``liu``)."""
    label = f"{pattern}/{vocab}" if multi_pattern else str(vocab)
    if transition is None:
        return label
    return f"{label}+superbpe{transition}" + ("" if spans == "v1" else f"-{spans}")


def _wlt(pair: Optional[dict], name: str, group: Optional[str] = None) -> str:
    """``won/lost/tied`` of ``name`` against the other side of ``pair`` (in a group)."""
    if pair is None:
        return "-"
    counts = pair if group is None else pair["groups"].get(group)
    if counts is None:
        return "-"
    won, lost = (counts["won"], counts["lost"]) if pair["a"] == name else (counts["lost"], counts["won"])
    return f"{won}/{lost}/{counts['tied']}"


def _paper_lines(results: dict, spans: str = "v1") -> List[str]:
    """The paper's table: per configuration and substrate, Gini (all, seen, unseen),
    mean tokens per item (all, seen, unseen), English tokens, and wins/losses/ties
    against BBPE (utf8) of the same configuration (all, seen, unseen)."""
    lines = [f"{'pattern':<10} {'vocab':>7} {'superbpe':>8} {'tokenizer':<10} {'Gini':>7} {'Gini seen':>9} "
             f"{'Gini unseen':>11} {'tok/item':>8} {'tok seen':>8} {'tok unseen':>10} {'en tokens':>10} "
             f"{'vs utf8 W/L/T':>14} {'seen W/L/T':>11} {'unseen W/L/T':>12}"]
    for (pattern, vocab, transition), table in results.items():
        for name in table["tokenizers"]:
            s = table["summary"][name]
            group = _group_value(s["groups"])
            pair = next((p for p in table["pairs"] if {p["a"], p["b"]} == {name, "utf8"} and name != "utf8"), None)
            sbpe = "-" if transition is None else str(transition) + ("" if spans == "v1" else f"-{spans}")
            lines.append(f"{pattern:<10} {vocab:>7} {sbpe:>8} {name:<10} {s['gini']:>7.4f} "
                         f"{group('seen', 'gini', 4):>9} {group('unseen', 'gini', 4):>11} "
                         f"{s['mean_tokens']:>8.2f} {group('seen', 'mean_tokens', 2):>8} "
                         f"{group('unseen', 'mean_tokens', 2):>10} {s['english_tokens']:>10} "
                         f"{_wlt(pair, name):>14} {_wlt(pair, name, 'seen'):>11} {_wlt(pair, name, 'unseen'):>12}")
    return lines


def _group_value(groups: dict):
    def value(g: str, field: str, digits: int) -> str:
        return f"{groups[g][field]:.{digits}f}" if g in groups and field in groups[g] else "-"
    return value


HOLDOUT_SHARE = 3   # the default holdout: a third of the corpus's languages


def _holdout_choice(spec: Optional[str], corpus_langs: Optional[List[str]], parallel, eval_langs,
                    reference: str) -> Tuple[List[str], str]:
    """The languages to withhold from training and why: ``--holdout-langs N``
    (the first N of the corpus's evaluated languages in a fixed hashed order),
    ``--holdout-langs TAGS``, or by default a third of them when no evaluated
    language would otherwise be unseen (``0`` withholds none)."""
    import hashlib

    from ..evaluation.metrics import language_key
    from ..evaluation.parallel_text import read_language_list, select_languages

    evaluated = {language_key(lang) for lang in select_languages(parallel, eval_langs, reference=reference).languages}
    ref_key = language_key(reference)
    candidates = [lang for lang in (corpus_langs or [])
                  if language_key(lang) in evaluated and language_key(lang) != ref_key]
    candidates = list(dict.fromkeys(candidates))
    ordered = sorted(candidates, key=lambda t: hashlib.sha256(t.encode("utf-8")).hexdigest())
    if spec is not None and not spec.strip().isdigit():
        tags = read_language_list([spec]) or []
        known = {language_key(t) for t in corpus_langs or []}
        missing = [t for t in tags if language_key(t) not in known]
        if corpus_langs is not None and missing:
            raise ValueError(f"--holdout-langs: {', '.join(missing)} is not a language of the corpus "
                             f"(it has {', '.join(corpus_langs[:20])}{', ...' if len(corpus_langs) > 20 else ''})")
        return tags, "--holdout-langs"
    if corpus_langs is None:
        return [], "no language field"
    if spec is not None:
        n = int(spec)
        if n > len(ordered):
            raise ValueError(f"--holdout-langs {n}: the corpus has only {len(ordered)} languages that are "
                             "evaluated too (other than the reference)")
        return ordered[:n], f"--holdout-langs {n}"
    unseen_left = evaluated - {language_key(lang) for lang in corpus_langs}
    if unseen_left or len(ordered) < 2:
        return [], "default: unseen languages already evaluated"
    n = max(1, len(ordered) // HOLDOUT_SHARE)
    return ordered[:n], f"default: a third of the corpus's evaluated languages ({n} of {len(ordered)})"


def _cmd_compare(args: argparse.Namespace) -> int:
    from ..evaluation.parallel_text import (
        corpus_languages,
        read_language_list,
        read_parallel,
        unlabelled_inputs,
        withhold_languages,
    )

    if _plot_missing(args, "compare"):
        return 1
    if args.superbpe_spans is not None and not args.superbpe_transition:
        from ..errors import OptionError

        raise OptionError(f"--superbpe-spans {args.superbpe_spans} needs --superbpe-transition T [T ...]: the span "
                          "rule applies only to SuperBPE configurations (add e.g. --superbpe-transition 0.8, or "
                          "drop --superbpe-spans)", option="superbpe_spans")
    args.superbpe_spans = args.superbpe_spans or "v1"
    substrates = [s.strip() for item in (args.substrates or _SUBSTRATES) for s in item.split(",") if s.strip()]
    for s in substrates:
        if s not in _SUBSTRATES:
            raise ValueError(f"--substrates: unknown substrate {s!r}; choose from {', '.join(_SUBSTRATES)}")
    vocab_sizes = sorted(set(args.vocab_size or [8000]))
    parallel = read_parallel(_parallel_path(args))
    eval_langs = read_language_list(args.eval_langs)
    from ..pretokenizer import resolve_pattern

    patterns = list(dict.fromkeys(args.pattern or ["gpt2"]))
    for pattern in patterns:
        resolve_pattern(pattern)   # an unknown name fails before any training
    corpus_langs = None if args.seen_langs else corpus_languages(args.inputs, field=args.lang_field,
                                                                 format=args.format, split=args.split)
    if not args.seen_langs:
        lacking = unlabelled_inputs(args.inputs, field=args.lang_field, format=args.format, split=args.split)
        if lacking and not args.quiet:
            print(f"ube compare: {len(lacking)} of {len(args.inputs)} inputs have no {args.lang_field!r} field "
                  f"({', '.join(map(str, lacking[:3]))}{', ...' if len(lacking) > 3 else ''}): their documents "
                  "train every tokenizer and name no language"
                  + ("" if corpus_langs else "; no seen/unseen split (pass --seen-langs to get one)"),
                  file=sys.stderr)
    holdout: List[str] = []
    why = "--no-split" if args.no_split else "--seen-langs" if args.seen_langs else ""
    if not args.no_split and not args.seen_langs:
        holdout, why = _holdout_choice(args.holdout_langs, corpus_langs, parallel, eval_langs, args.reference_lang)
    if args.no_split:
        seen = None
    elif args.seen_langs:
        seen = read_language_list(args.seen_langs)
    else:
        from ..evaluation.metrics import language_key

        withheld = {language_key(t) for t in holdout}
        seen = None if corpus_langs is None else [t for t in corpus_langs if language_key(t) not in withheld]
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    multi_pattern = len(patterns) > 1
    transitions = list(dict.fromkeys(args.superbpe_transition or []))
    results: dict = {}
    # phase 1 (the chunk and span counts) depends on the pattern and on whether
    # spans are counted, not on the vocabulary size, substrate or transition:
    # each such key keeps its tables in its own work directory, counted once
    work_root = tempfile.mkdtemp(prefix="ube-compare-")
    try:
        inputs, column, fmt = args.inputs, args.column, args.format
        regime: Dict[str, Any] = {"holdout_langs": holdout, "holdout_reason": why, "seen_langs": seen}
        if holdout:
            inputs, column, fmt = [os.path.join(work_root, "train-without-holdout.jsonl")], "text", "jsonl"
            regime["documents"] = withhold_languages(args.inputs, inputs[0], holdout, field=args.lang_field,
                                                     column=args.column, format=args.format, split=args.split)
        if not args.quiet:
            if seen is not None:
                print(f"seen languages (trained on): {', '.join(seen)}", file=sys.stderr)
            if holdout:
                print(f"withheld from training ({why}; unseen): {', '.join(holdout)} - "
                      f"{regime['documents']['withheld']:,} documents", file=sys.stderr)
        _compare_all(args, inputs, column, fmt, patterns, transitions, vocab_sizes, substrates, parallel,
                     eval_langs, seen, multi_pattern, results, work_root)
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    print("== configurations (the paper's table) ==")
    print("\n".join(_paper_lines(results, args.superbpe_spans)))
    print("(seen: languages trained on; unseen: withheld or absent; each group's Gini includes the reference. "
          "W/L/T: languages where the tokenizer needs fewer / more / the same tokens as utf8"
          + (f"; superbpe T-{args.superbpe_spans}: transition T, span rule {args.superbpe_spans}"
             if args.superbpe_spans != "v1" else "") + ")")
    _print_written(_write_compare_outputs(args, results, multi_pattern, regime))
    return 0


def _compare_all(args, inputs, column, fmt, patterns, transitions, vocab_sizes, substrates, parallel, eval_langs,
                 seen, multi_pattern: bool, results: dict, work_root: str) -> None:
    from ..evaluation.parallel_text import evaluate, format_table
    from ..training.trainer import train

    for pattern in patterns:
        for vocab, transition in ((v, t) for v in vocab_sizes
                                  for t in [None] + [transition_size(x, v) for x in transitions]):
            label = _configuration(pattern, vocab, multi_pattern, transition, args.superbpe_spans)
            tokenizers = []
            for substrate in substrates:
                superbpe = {} if transition is None else dict(superbpe_transition=transition,
                                                             superbpe_max_words=args.superbpe_max_words,
                                                             superbpe_spans=args.superbpe_spans)
                work_dir = os.path.join(work_root, f"p{patterns.index(pattern)}-{'spans' if superbpe else 'chunks'}")
                tok = train(inputs, vocab_size=vocab, substrate=substrate, pattern=pattern,
                            column=column, format=fmt, split=args.split if fmt == args.format else None,
                            min_frequency=args.min_frequency, max_bytes=args.max_bytes, workers=args.workers,
                            show_progress=not args.quiet, work_dir=work_dir, keep_work=True, **superbpe)
                if args.out:
                    tok.save(os.path.join(args.out, f"{substrate}-{label.replace('/', '-')}.json"))
                tokenizers.append(tok)
            table = evaluate(tokenizers, parallel, reference=args.reference_lang, eval_langs=eval_langs,
                             seen_langs=seen, names=substrates, context=args.context)
            table["vocab_size"] = vocab
            table["pattern"] = tokenizers[0].pattern_name if tokenizers else pattern
            if transition is not None:
                table["superbpe"] = {"transition": transition, "max_words": args.superbpe_max_words,
                                     **({"spans": args.superbpe_spans} if args.superbpe_spans != "v1" else {})}
            results[pattern, vocab, transition] = table
            print(f"== {'pattern ' + pattern + ', ' if multi_pattern else ''}vocab size {vocab}"
                  f"{'' if transition is None else f', SuperBPE transition {transition}'}"
                  f"{'' if transition is None or args.superbpe_spans == 'v1' else f', span rule {args.superbpe_spans}'} ==")
            sys.stdout.write(format_table(table, max_rows=args.max_rows))
            print()


def _write_compare_outputs(args, results: dict, multi_pattern: bool, regime: dict) -> List[str]:
    """CSV and plots per configuration, then ``compare.json``: always
    ``{"regime": {...}, "configurations": {"gpt2/8000": table, ...}}``."""
    from ..evaluation.parallel_text import write_json

    written: List[str] = []
    single = len(results) == 1
    for (pattern, vocab, transition), table in results.items():
        label = _configuration(pattern, vocab, multi_pattern, transition, args.superbpe_spans).replace("/", "-")
        suffix = "" if single else f"-{label}"
        title = f"Token premium per language, vocab {vocab}"
        plot = plot_paths(args.plot, None if single else label) if args.plot else None
        written += _write_outputs(table, json_path=None,
                                  csv_path=_suffixed(args.csv, suffix) or (args.out and os.path.join(args.out, f"compare-{label}.csv")),
                                  plot=plot, title=title)
        if args.out and not args.plot:
            try:
                written += _write_outputs(table, json_path=None, csv_path=None,
                                          plot=plot_paths(os.path.join(args.out, "compare"), label), title=title)
            except ImportError:
                pass  # the plot in --out is a bonus; --plot asks for it explicitly
    combined = {"regime": regime, "superbpe_spans": args.superbpe_spans,
                "configurations": {_configuration(p, v, True, t, args.superbpe_spans): table
                                   for (p, v, t), table in results.items()}}
    for path in (args.json, args.out and os.path.join(args.out, "compare.json")):
        if path:
            write_json(combined, path)
            written.append(path)
    return written


def _suffixed(path: Optional[str], suffix: str) -> Optional[str]:
    if not path or not suffix:
        return path
    stem, ext = os.path.splitext(path)
    return f"{stem}{suffix}{ext}"
