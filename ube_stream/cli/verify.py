"""``ube verify``: offline round-trip checks (exit status 0 only when everything matched).

    ube verify --unicode [--tokenizer T] [--substrate S ...]
    ube verify --corpus INPUT... --tokenizer T [--column C --format F --split S --text-mode M --on-error E --workers N]
    ube verify --shards DIR [--tokenizer T] [--workers N] [--sample N] [--keep-going]
"""
from __future__ import annotations

import argparse
import json
import sys


def _cmd_verify(args: argparse.Namespace) -> int:
    from .. import verification

    chosen = [name for name in ("unicode", "corpus", "shards") if getattr(args, name)]
    if len(chosen) != 1:
        print("ube verify: error: choose one of --unicode, --corpus INPUT..., --shards DIR", file=sys.stderr)
        return 2
    show_progress = not args.quiet
    if args.tokenizer:
        from .options import load_tokenizer

        args.tokenizer = load_tokenizer(args)
    if args.unicode:
        report = verification.verify_unicode(args.tokenizer, substrates=args.substrate or ("ube", "utf8", "utf16"),
                                             workers=args.workers, show_progress=show_progress,
                                             max_examples=args.max_examples)
    elif args.corpus:
        if not args.tokenizer:
            print("ube verify: error: --corpus needs --tokenizer T (the tokenizer file to round-trip with)",
                  file=sys.stderr)
            return 2
        report = verification.verify_corpus(args.corpus, args.tokenizer, column=args.column,
                                            text_mode=args.text_mode, on_error=args.on_error,
                                            format=args.format, split=args.split,
                                            max_document_bytes=args.max_document_bytes,
                                            unit_rows=args.unit_rows, workers=args.workers,
                                            show_progress=show_progress, max_examples=args.max_examples,
                                            executor=args.executor, ray_address=args.ray_address)
    else:
        report = verification.verify_shards(args.shards, tokenizer=args.tokenizer, workers=args.workers,
                                            sample=args.sample, show_progress=show_progress,
                                            max_examples=args.max_examples, keep_going=args.keep_going,
                                            executor=args.executor, ray_address=args.ray_address)
    sys.stdout.write(report.format())
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report.to_dict(), f, ensure_ascii=False, indent=1)
            f.write("\n")
    return 0 if report.ok else 1


def register(subparsers: "argparse._SubParsersAction") -> None:
    p = subparsers.add_parser(
        "verify", help="check exact round trips: all of Unicode, a corpus, or a shard directory",
        description="Offline verification. --unicode: every Unicode scalar value (alone and in runs), its "
                    "normal forms, every emoji sequence, mixed-script strings and the bundled Unicode audit "
                    "strings through each substrate (and --tokenizer). --corpus: decode(encode(doc)) == doc for "
                    "every document. --shards: headers, checksums, row accounting, and every stored document "
                    "against its source row (decode and re-encode). Exit status 0 only when everything matched; "
                    "on a mismatch the first examples show source, row, the character offset of the first "
                    "difference and both texts around it.")
    mode = p.add_argument_group("what to verify (one)")
    mode.add_argument("--unicode", action="store_true", help="the Unicode audit")
    mode.add_argument("--corpus", nargs="+", metavar="INPUT",
                      help="files, directories or globs (formats as for `ube train`)")
    mode.add_argument("--shards", metavar="DIR", help="a finished shard directory (with MANIFEST.json)")
    from .options import TOKENIZER_HELP, add_executor_options, add_input_options, add_tokenizer_options

    add_tokenizer_options(p, required=False,
                          help=TOKENIZER_HELP + " (--unicode: also encode -> decode; --corpus: required; "
                                                "--shards: instead of DIR/tokenizer.json)")
    p.add_argument("--substrate", action="append", choices=("ube", "utf8", "utf16"),
                   help="--unicode: substrates to check (repeat; default all three)")
    add_input_options(p, positional=False, prefix="--corpus: ")
    add_executor_options(p, " (--corpus, --shards; the inputs, DIR and the tokenizer file must be paths every "
                            "node sees)")
    p.add_argument("--sample", type=int, default=None, metavar="N",
                   help="--shards: compare the content of a deterministic sample of N documents "
                        "(headers, checksums and accounting are still checked in full)")
    p.add_argument("--keep-going", action="store_true",
                   help="--shards: compare every document even when the tokenizer is not the one the shards "
                        "were encoded with (by default the check stops at that mismatch)")
    p.add_argument("--max-examples", type=int, default=10, help="mismatches to show (default 10)")
    p.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_verify)
