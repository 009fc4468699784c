"""The ``ube`` command line (also ``python -m ube_stream``)."""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from . import __version__


def _cmd_explain(args: argparse.Namespace) -> int:
    from .pretokenizer import pretokenize
    from .substrate import SUBSTRATES, encode_symbols, symbol_string

    text = sys.stdin.read() if args.text == "-" else args.text
    if args.tokenizer:
        from ._cli_codec import explain_tokens, load_tokenizer

        sys.stdout.write(explain_tokens(load_tokenizer(args.tokenizer), text))
        return 0
    chunks = pretokenize(text, args.pattern)
    out = sys.stdout
    out.write(f"text: {text!r}  ({len(text)} characters, {len(text.encode('utf-8'))} UTF-8 bytes)\n")
    out.write(f"chunks ({args.pattern}): {len(chunks)}\n")
    header = f"  {'chunk':<20}" + "".join(f"{s:>8}" for s in SUBSTRATES)
    out.write(header + "\n")
    totals = dict.fromkeys(SUBSTRATES, 0)
    for chunk in chunks:
        costs = {s: len(encode_symbols(chunk, s)) for s in SUBSTRATES}
        for s in SUBSTRATES:
            totals[s] += costs[s]
        out.write(f"  {chunk!r:<20}" + "".join(f"{costs[s]:>8}" for s in SUBSTRATES) + "\n")
    out.write(f"  {'floor cost':<20}" + "".join(f"{totals[s]:>8}" for s in SUBSTRATES) + "\n")
    out.write("symbols:\n")
    for s in SUBSTRATES:
        ids = encode_symbols(text, s)
        shown = " ".join(
            f"{symbol_string([i], s)}" if i < 256 else f"U+{0xE100 + i - 256:04X}" for i in ids.tolist()
        )
        out.write(f"  {s:<6} {len(ids):>4}  {shown}\n")
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from .trainer import TrainSummary, train

    summary = TrainSummary()
    tokenizer = train(
        args.inputs, vocab_size=args.vocab_size, substrate=args.substrate, pattern=args.pattern,
        special_tokens=args.special_token or ("<|endoftext|>",), min_frequency=args.min_frequency,
        max_token_length=args.max_token_length, max_bytes=args.max_bytes, workers=args.workers,
        show_progress=not args.quiet, column=args.column, text_mode=args.text_mode,
        unit_rows=args.unit_rows, on_error=args.on_error, executor=args.executor,
        ray_address=args.ray_address, work_dir=args.work_dir, summary=summary)
    tokenizer.save(args.output)
    if not args.quiet:
        print(f"wrote {args.output}: {tokenizer!r}", file=sys.stderr)
        print(summary.format(), file=sys.stderr)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .pipeline import run_demo

    result = run_demo(args.out, vocab_size=args.vocab_size, workers=args.workers, plot=not args.no_plot,
                      show_progress=not args.quiet)
    text = result.table_text
    if args.max_rows is not None:
        from ._eval_output import format_table

        text = format_table(result.table, max_rows=args.max_rows)
    sys.stdout.write(text)
    timing = ", ".join(f"{k} {v:.1f} s" for k, v in result.seconds.items())
    print(f"\nwrote {', '.join(result.outputs)}; tokenizers and shards in {result.out_dir}/ ({timing})")
    if not result.ok:
        print("ube demo: shard verification FAILED (see above)", file=sys.stderr)
        return 1
    return 0


def _size(text: str) -> int:
    """Parse a byte size: 1000000, 1e9, 500MB, 1GiB, 2G."""
    units = {"": 1, "B": 1, "K": 10**3, "KB": 10**3, "KIB": 2**10, "M": 10**6, "MB": 10**6, "MIB": 2**20,
             "G": 10**9, "GB": 10**9, "GIB": 2**30, "T": 10**12, "TB": 10**12, "TIB": 2**40}
    raw = text.strip().upper()
    number = raw.rstrip("BIKMGT")
    suffix = raw[len(number):]
    try:
        value = float(number) * units[suffix]
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (examples: 1000000, 500MB, 1GiB)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"size must be positive: {text!r}")
    return int(value)


def _add_input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="files, directories or globs: Parquet, Arrow IPC/Feather, JSONL, text "
                        "(plain, .zst or .gz), HF datasets save_to_disk directories")
    p.add_argument("--column", default="text", help="text column / JSON field (default: text)")
    p.add_argument("--text-mode", choices=("line", "file"), default="line",
                   help="plain text: one document per line (default) or per file")
    p.add_argument("--unit-rows", type=int, default=None,
                   help="rows per work unit (default: the readers' default); fixes the unit plan")
    p.add_argument("--on-error", choices=("raise", "skip"), default="raise",
                   help="bad documents: stop with an error naming file and offset (default), or skip and count them")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="worker processes (default: all cores)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars or summary")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ube",
        description="ube-stream: Universal Byte-Level Encoding for multilingual LLM corpora.",
    )
    parser.add_argument("--version", action="version", version=f"ube-stream {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("explain", help="show the chunks, base symbols and floor costs of a text")
    p.add_argument("text", help="the text to explain ('-' reads standard input)")
    p.add_argument("--pattern", default="gpt2", help="pre-tokenization pattern: gpt2 (default), cl100k, o200k, llama3 or a regex")
    p.add_argument("--tokenizer", default=None,
                   help="show the tokens of TEXT under this tokenizer (ube-stream file or HF tokenizer.json)")
    p.set_defaults(func=_cmd_explain)

    p = sub.add_parser("train", help="train a UBE / BBPE / BBPE16 tokenizer on a corpus")
    _add_input_options(p)
    p.add_argument("--vocab-size", type=int, required=True,
                   help="base symbols (512 ube, 256 utf8/utf16) + merges + special tokens")
    p.add_argument("--substrate", choices=("ube", "utf8", "utf16"), default="ube")
    p.add_argument("--pattern", default="gpt2", help="pre-tokenization: gpt2 (default), cl100k, o200k, llama3 or a regex")
    p.add_argument("--special-token", action="append", metavar="TOK",
                   help="a special token (repeat; replaces the default <|endoftext|>)")
    p.add_argument("--min-frequency", type=int, default=2)
    p.add_argument("--max-token-length", type=int, default=None, help="longest token, in base symbols")
    p.add_argument("--max-bytes", type=_size, default=None,
                   help="train on a deterministic sample of about this many bytes (e.g. 1GB)")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local process pool (default) or a Ray cluster (pip install \"ube-stream[ray]\")")
    p.add_argument("--ray-address", default=None, help="Ray cluster address (e.g. auto); default: start a local one")
    p.add_argument("--work-dir", default=None,
                   help="directory for intermediate count tables (on a multi-node Ray cluster: shared storage)")
    p.add_argument("-o", "--output", required=True, help="tokenizer file to write (JSON)")
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser("demo", help="the whole job on the bundled sample: train ube/utf8/utf16, encode to shards, "
                                    "verify, evaluate on ~350 languages, print the table, write the plot")
    p.add_argument("--out", default="ube-demo", help="output directory (default: ube-demo)")
    p.add_argument("--vocab-size", type=int, default=8000)
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    p.add_argument("--no-plot", action="store_true", help="skip the PNG plot (needs matplotlib)")
    p.add_argument("--max-rows", type=int, default=40, help="language rows shown in the table (default 40)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_cmd_demo)

    from . import _cli_codec, _cli_eval, _cli_loader, _cli_shards, _cli_verify

    _cli_codec.register(sub)
    _cli_shards.register(sub)
    _cli_verify.register(sub)
    _cli_eval.register(sub)
    _cli_loader.register(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from .errors import UbeError

    try:
        return args.func(args)
    except (UbeError, ValueError, FileNotFoundError, ImportError) as exc:
        print(f"ube {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `ube ... | head`
        return 0
