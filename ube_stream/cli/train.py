"""``ube train`` and ``ube demo``."""
from __future__ import annotations

import argparse
import sys

from .options import add_executor_options, add_input_options, add_workers_option, byte_size


def cmd_train(args: argparse.Namespace) -> int:
    from ..training.trainer import TrainSummary, train

    summary = TrainSummary()
    tokenizer = train(
        args.inputs, vocab_size=args.vocab_size, substrate=args.substrate, pattern=args.pattern,
        special_tokens=args.special_token or ("<|endoftext|>",), min_frequency=args.min_frequency,
        max_token_length=args.max_token_length, max_bytes=args.max_bytes, workers=args.workers,
        show_progress=not args.quiet, column=args.column, text_mode=args.text_mode,
        unit_rows=args.unit_rows, on_error=args.on_error, format=args.format, split=args.split, executor=args.executor,
        ray_address=args.ray_address, work_dir=args.work_dir, output=args.output, summary=summary,
        char_integrity=args.char_rule or args.char_integrity, superbpe_transition=args.superbpe_transition,
        superbpe_max_words=args.superbpe_max_words, superbpe_spans=args.superbpe_spans,
        max_document_bytes=args.max_document_bytes)
    if not args.quiet:
        print(f"wrote {args.output}: {tokenizer!r}", file=sys.stderr)
        print(summary.format(), file=sys.stderr)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from ..pipeline import run_demo

    result = run_demo(args.out, vocab_size=args.vocab_size, workers=args.workers, plot=not args.no_plot,
                      show_progress=not args.quiet)
    text = result.table_text
    if args.max_rows is not None and result.table is not None:
        from ..evaluation.output import format_table

        text = format_table(result.table, max_rows=args.max_rows)
    sys.stdout.write(text)
    timing = ", ".join(f"{k} {v:.1f} s" for k, v in result.seconds.items())
    print(f"\nwrote {', '.join(result.outputs)}; tokenizers and shards in {result.out_dir}/ ({timing})")
    if not result.ok:
        print("ube demo: shard verification FAILED (see above)", file=sys.stderr)
        return 1
    return 0


def register(sub) -> None:
    """Add the ``train`` and ``demo`` sub-commands."""
    p = sub.add_parser(
        "train", help="train a UBE / BBPE / BBPE16 tokenizer on a corpus",
        description="Train a byte-level BPE tokenizer on a corpus and write it as one JSON file. The substrate "
                    "is the alphabet merges start from: ube (512 symbols: UTF-8 bytes for characters of 1-2 "
                    "bytes, UTF-16 code units otherwise; the paper's UBE), utf8 (256 bytes: BBPE, as GPT-2) or "
                    "utf16 (BBPE16). Pass 1 counts the pre-tokenized chunks of the corpus on every core "
                    "(kept in --work-dir, so an interrupted run resumes); pass 2 learns the merges. Example: "
                    "ube train corpus.jsonl.zst --vocab-size 32000 -o ube-32k.json")
    add_input_options(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars or summary")
    p.add_argument("--vocab-size", type=int, required=True,
                   help="base symbols (512 ube, 256 utf8/utf16) + merges + special tokens")
    p.add_argument("--substrate", choices=("ube", "utf8", "utf16"), default="ube",
                   help="the base alphabet: ube (the paper's UBE), utf8 (BBPE) or utf16 (BBPE16)")
    p.add_argument("--pattern", default="gpt2", metavar="P",
                   help="pre-tokenization: gpt2 (default), cl100k, o200k, llama3, script (Land & Arnett's SCRIPT: "
                        "splits at Unicode script and category boundaries) or a custom regex marked regex:EXPR")
    p.add_argument("--special-token", action="append", metavar="TOK",
                   help="a special token (repeat; replaces the default <|endoftext|>)")
    p.add_argument("--min-frequency", type=int, default=2,
                   help="merge a pair only when it occurs at least this often")
    p.add_argument("--max-token-length", type=int, default=None, help="longest token, in base symbols")
    p.add_argument("--char-integrity", action="store_true",
                   help="no merge creates a token holding part of one character and anything of another: every "
                        "token is whole characters or pieces of one character (rule: --char-rule)")
    p.add_argument("--char-rule", choices=("pieces", "prefix"), default=None,
                   help="the character-integrity rule (implies --char-integrity): 'pieces' (the default) lets any "
                        "two pieces of one character merge; 'prefix' (SCRIPT's rule) merges inside a character "
                        "only its prefix and the next piece, left to right (docs/training.md)")
    p.add_argument("--superbpe-transition", type=int, default=None, metavar="T",
                   help="train SuperBPE: ordinary BPE inside chunks up to vocabulary size T, then superword "
                        "merges across the chunks of a span (--superbpe-spans) up to --vocab-size")
    p.add_argument("--superbpe-max-words", type=int, default=4, metavar="W",
                   help="SuperBPE: at most W chunks (words) per token (default 4)")
    p.add_argument("--superbpe-spans", choices=("v1", "liu"), default="v1",
                   help="SuperBPE span rule: 'v1' (the default) joins only word chunks (letters/marks with spaces "
                        "and apostrophes), never across punctuation, digits or line breaks; 'liu' is Liu et al.'s "
                        "stage-2 rule: any chunks join except numbers, across line ends and ': ' "
                        "(docs/training.md)")
    p.add_argument("--max-bytes", type=byte_size, default=None,
                   help="train on a deterministic sample of about this many bytes (e.g. 1GB)")
    add_executor_options(p)
    p.add_argument("--work-dir", default=None,
                   help="directory for the count tables (default: OUTPUT.ube-work beside the output; on a "
                        "multi-node Ray cluster: shared storage); kept when a run fails so a rerun resumes")
    p.add_argument("-o", "--output", required=True, help="tokenizer file to write (JSON)")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("demo", help="the whole job on the bundled sample: train ube/utf8/utf16, encode to shards, "
                                    "verify, evaluate on ~350 languages, print the table, write the plot")
    p.add_argument("--out", default="ube-demo", help="output directory (default: ube-demo)")
    p.add_argument("--vocab-size", type=int, default=8000, help="vocabulary size of each of the three tokenizers")
    add_workers_option(p)
    p.add_argument("--no-plot", action="store_true", help="skip the PNG plot (needs matplotlib)")
    p.add_argument("--max-rows", type=int, default=40, help="language rows shown in the table (default 40)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_demo)
