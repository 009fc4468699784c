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
    ``--superbpe-max-words W`` (default 4).

``--parallel`` defaults to the bundled sample (:func:`ube_stream.sample.sample_paths`).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from typing import List, Optional

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
    p.add_argument("--plot", default=None, metavar="OUT.png",
                   help='plot premiums per language, and the context gain as OUT-context.png '
                        '(needs matplotlib: pip install "ube-stream[plot]")')
    p.add_argument("--max-rows", type=int, default=None, metavar="N",
                   help="print at most N language rows (all by default)")
    p.add_argument("--context", type=positive_int, default=2048, metavar="TOKENS",
                   help="context capacity: the characters and bytes of each language that fit in a window of "
                        "this many tokens, and the gain of each tokenizer over the others (default 2048)")


def register(subparsers) -> None:
    """Add ``eval`` and ``compare`` to an argparse sub-parser collection."""
    p = subparsers.add_parser("eval", help="token premium, Gini and wins of tokenizers on a parallel file")
    from .options import add_tokenizer_options

    add_tokenizer_options(p, repeat=True)
    p.add_argument("--seen-langs", nargs="+", default=None, metavar="TAGS",
                   help="languages of the training corpus: splits the summary into seen / unseen")
    _add_eval_options(p)
    p.set_defaults(func=_cmd_eval)

    p = subparsers.add_parser("compare", help="train ube / utf8 / utf16 on one corpus and evaluate them")
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
    add_format_options(p)
    p.add_argument("--lang-field", default="lang",
                   help="corpus field naming each document's language, for the seen/unseen split "
                        "(default: lang; ignored when --seen-langs is given)")
    split = p.add_mutually_exclusive_group()
    split.add_argument("--seen-langs", nargs="+", default=None, metavar="TAGS",
                       help="languages counted as seen in training (overrides --lang-field)")
    split.add_argument("--no-split", action="store_true", help="no seen / unseen split")
    p.add_argument("--min-frequency", type=int, default=2)
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


def _write_outputs(table: dict, *, json_path: Optional[str], csv_path: Optional[str],
                   plot_path: Optional[str], title: Optional[str] = None) -> None:
    from ..evaluation.output import plot_context_gain
    from ..evaluation.parallel_text import plot_premiums, write_csv, write_json

    if json_path:
        write_json(table, json_path)
    if csv_path:
        write_csv(table, csv_path)
    if plot_path:
        plot_premiums(table, plot_path, title=title)
        if table.get("context", {}).get("gains"):   # its own panel: <plot>-context.png
            plot_context_gain(table, _suffixed(plot_path, "-context"))


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
    _write_outputs(table, json_path=args.json, csv_path=args.csv, plot_path=args.plot)
    return 0


def _configuration(pattern: str, vocab: int, multi_pattern: bool, transition: Optional[int] = None) -> str:
    """The label of one configuration: ``32000``, or ``script/32000`` when patterns
    vary; ``+superbpe24000`` appended for a SuperBPE one."""
    label = f"{pattern}/{vocab}" if multi_pattern else str(vocab)
    return label if transition is None else f"{label}+superbpe{transition}"


def _paper_lines(results: dict) -> List[str]:
    """The paper's table: per configuration and substrate, Gini, mean tokens per item,
    English tokens, and wins/losses against BBPE (utf8) of the same configuration."""
    lines = [f"{'pattern':<10} {'vocab':>7} {'superbpe':>8} {'tokenizer':<10} {'Gini':>7} {'Gini seen':>9} "
             f"{'Gini unseen':>11} {'tok/item':>8} {'en tokens':>10} {'vs utf8 W/L/T':>14}"]
    for (pattern, vocab, transition), table in results.items():
        for name in table["tokenizers"]:
            s = table["summary"][name]
            groups = s["groups"]
            seen = f"{groups['seen']['gini']:.4f}" if "seen" in groups else "-"
            unseen = f"{groups['unseen']['gini']:.4f}" if "unseen" in groups else "-"
            vs = "-"
            for p in table["pairs"]:
                if {p["a"], p["b"]} == {name, "utf8"}:
                    won, lost = (p["won"], p["lost"]) if p["a"] == name else (p["lost"], p["won"])
                    vs = f"{won}/{lost}/{p['tied']}"
            sbpe = "-" if transition is None else str(transition)
            lines.append(f"{pattern:<10} {vocab:>7} {sbpe:>8} {name:<10} {s['gini']:>7.4f} {seen:>9} {unseen:>11} "
                         f"{s['mean_tokens']:>8.2f} {s['english_tokens']:>10} {vs:>14}")
    return lines


def _cmd_compare(args: argparse.Namespace) -> int:
    from ..evaluation.parallel_text import corpus_languages, read_language_list, read_parallel

    if _plot_missing(args, "compare"):
        return 1
    substrates = [s.strip() for item in (args.substrates or _SUBSTRATES) for s in item.split(",") if s.strip()]
    for s in substrates:
        if s not in _SUBSTRATES:
            raise ValueError(f"--substrates: unknown substrate {s!r}; choose from {', '.join(_SUBSTRATES)}")
    vocab_sizes = sorted(set(args.vocab_size or [8000]))
    if args.no_split:
        seen = None
    elif args.seen_langs:
        seen = read_language_list(args.seen_langs)
    else:
        seen = corpus_languages(args.inputs, field=args.lang_field, format=args.format, split=args.split)
        if seen is None:
            print(f"ube compare: the corpus has no {args.lang_field!r} field: no seen/unseen split "
                  "(pass --seen-langs to get one)", file=sys.stderr)
    if seen is not None and not args.quiet:
        print(f"seen languages (from {'--seen-langs' if args.seen_langs else 'the corpus'}): "
              f"{', '.join(seen)}", file=sys.stderr)
    parallel = read_parallel(_parallel_path(args))
    eval_langs = read_language_list(args.eval_langs)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    from ..pretokenizer import resolve_pattern

    patterns = list(dict.fromkeys(args.pattern or ["gpt2"]))
    for pattern in patterns:
        resolve_pattern(pattern)   # an unknown name fails before any training
    multi_pattern = len(patterns) > 1
    transitions = list(dict.fromkeys(args.superbpe_transition or []))
    results: dict = {}
    # phase 1 (the chunk and span counts) depends on the pattern and on whether
    # spans are counted, not on the vocabulary size, substrate or transition:
    # each such key keeps its tables in its own work directory, counted once
    work_root = tempfile.mkdtemp(prefix="ube-compare-")
    try:
        _compare_all(args, patterns, transitions, vocab_sizes, substrates, parallel, eval_langs, seen,
                     multi_pattern, results, work_root)
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    print("== configurations (the paper's table) ==")
    print("\n".join(_paper_lines(results)))
    _write_compare_outputs(args, results, multi_pattern)
    return 0


def _compare_all(args, patterns, transitions, vocab_sizes, substrates, parallel, eval_langs, seen,
                 multi_pattern: bool, results: dict, work_root: str) -> None:
    from ..evaluation.parallel_text import evaluate, format_table
    from ..training.trainer import train

    for pattern in patterns:
        for vocab, transition in ((v, t) for v in vocab_sizes
                                  for t in [None] + [transition_size(x, v) for x in transitions]):
            label = _configuration(pattern, vocab, multi_pattern, transition)
            tokenizers = []
            for substrate in substrates:
                superbpe = {} if transition is None else dict(superbpe_transition=transition,
                                                             superbpe_max_words=args.superbpe_max_words)
                work_dir = os.path.join(work_root, f"p{patterns.index(pattern)}-{'spans' if superbpe else 'chunks'}")
                tok = train(args.inputs, vocab_size=vocab, substrate=substrate, pattern=pattern,
                            column=args.column, format=args.format, split=args.split,
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
                table["superbpe"] = {"transition": transition, "max_words": args.superbpe_max_words}
            results[pattern, vocab, transition] = table
            print(f"== {'pattern ' + pattern + ', ' if multi_pattern else ''}vocab size {vocab}"
                  f"{'' if transition is None else f', SuperBPE transition {transition}'} ==")
            sys.stdout.write(format_table(table, max_rows=args.max_rows))
            print()


def _write_compare_outputs(args, results: dict, multi_pattern: bool) -> None:
    from ..evaluation.parallel_text import write_json

    single = len(results) == 1
    for (pattern, vocab, transition), table in results.items():
        label = _configuration(pattern, vocab, multi_pattern, transition).replace("/", "-")
        suffix = "" if single else f"-{label}"
        _write_outputs(table, json_path=None,
                       csv_path=_suffixed(args.csv, suffix) or (args.out and os.path.join(args.out, f"compare-{label}.csv")),
                       plot_path=_suffixed(args.plot, suffix), title=f"Token premium per language, vocab {vocab}")
        if args.out and not args.plot:
            try:
                _write_outputs(table, json_path=None, csv_path=None,
                               plot_path=os.path.join(args.out, f"compare-{label}.png"),
                               title=f"Token premium per language, vocab {vocab}")
            except ImportError:
                pass  # the plot in --out is a bonus; --plot asks for it explicitly
    if not multi_pattern and all(t is None for _, _, t in results):
        combined: dict = {"vocab_sizes": {str(v): table for (_, v, _), table in results.items()}}
    else:
        combined = {"configurations": {_configuration(p, v, True, t): table for (p, v, t), table in results.items()}}
    if args.json:
        write_json(combined, args.json)
    if args.out:
        write_json(combined, os.path.join(args.out, "compare.json"))


def _suffixed(path: Optional[str], suffix: str) -> Optional[str]:
    if not path or not suffix:
        return path
    stem, ext = os.path.splitext(path)
    return f"{stem}{suffix}{ext}"
