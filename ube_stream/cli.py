"""The ``ube`` command line (also ``python -m ube_stream``)."""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from . import __version__


def _cmd_explain(args: argparse.Namespace) -> int:
    from .pretokenizer import pretokenize
    from .substrate import SUBSTRATES, encode_symbols, symbol_string

    text = sys.stdin.read() if args.text == "-" else args.text
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ube",
        description="ube-stream: Universal Byte-Level Encoding for multilingual LLM corpora.",
    )
    parser.add_argument("--version", action="version", version=f"ube-stream {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("explain", help="show the chunks, base symbols and floor costs of a text")
    p.add_argument("text", help="the text to explain ('-' reads standard input)")
    p.add_argument("--pattern", default="gpt2", help="pre-tokenization pattern: gpt2 (default), cl100k, o200k or a regex")
    p.set_defaults(func=_cmd_explain)
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
    except UbeError as exc:
        print(f"ube {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `ube ... | head`
        return 0
