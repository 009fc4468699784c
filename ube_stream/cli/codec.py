"""CLI: ``ube explain``, ``ube encode-text``, ``ube decode-ids`` and ``ube convert``.

    ube encode-text --tokenizer tok.json "Debian 性能"      # ids, space-separated
    echo "Debian 性能" | ube encode-text --tokenizer tok.json -
    ube decode-ids --tokenizer tok.json 35 1021 77          # text (also "35, 1021" or [35, 1021])
    ube encode-text --tokenizer tok.json - | ube decode-ids --tokenizer tok.json -
    ube convert cl100k_base -o cl100k.json                  # any tokenizer -> our file

``--tokenizer`` takes whatever :func:`~ube_stream.tokenizer.as_tokenizer`
reads (see :mod:`ube_stream.cli.options`).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import List

from ..errors import SpecialTokenError
from .options import add_tokenizer_options, load_tokenizer


def explain_tokens(tokenizer, text: str) -> str:
    """One line per token of ``text``: position, id, symbol string, and its text.

    The text column shows what the token decodes to on its own; a token that
    holds only part of a character (a UTF-8 or UTF-16 byte sequence cut between
    tokens) shows its bytes as ``<..>`` instead.
    """
    from ..substrate import decode_symbols

    ids = tokenizer.encode(text, allowed_special="all").tolist()
    specials = {i: t for t, i in tokenizer.special_tokens.items()}
    lines = [f"tokens ({tokenizer.substrate}, vocab {tokenizer.vocab_size}): {len(ids)}",
             f"  {'#':>4}  {'id':>7}  {'symbols':<24}  text"]
    for position, token in enumerate(ids):
        if token in specials:
            symbols, shown = specials[token], f"{specials[token]} (special)"
        else:
            expansion = tokenizer.token_expansion(token)
            # UTF-16 byte symbols (U+E100..U+E1FF) are invisible in a terminal: name them
            symbols = "".join(c if not 0xE100 <= ord(c) <= 0xE1FF else f"<U+{ord(c):04X}>"
                              for c in tokenizer.token_symbols(token))
            try:
                shown = repr(decode_symbols(expansion, tokenizer.substrate))
            except ValueError:
                shown = "<" + " ".join(f"{s:02X}" if s < 256 else f"U{s - 256:02X}" for s in expansion) + ">"
        lines.append(f"  {position:>4}  {token:>7}  {symbols:<24}  {shown}")
    return "\n".join(lines) + "\n"


def _cmd_encode_text(args: argparse.Namespace) -> int:
    tokenizer = load_tokenizer(args)
    text = sys.stdin.read() if args.text == "-" else args.text
    if args.text == "-" and args.strip_newline and text.endswith("\n"):
        text = text[:-1]
    try:
        if args.allow_special:
            ids = tokenizer.encode(text, allowed_special="all")
        elif args.special_as_text:
            ids = tokenizer.encode_ordinary(text)
        else:
            ids = tokenizer.encode(text)
    except SpecialTokenError as exc:
        raise SpecialTokenError(
            f"the text holds the special token {exc.token!r} at character offset {exc.offset} (UTF-8 byte "
            f"offset {exc.byte_offset}); pass --allow-special to encode it as the special token, or "
            "--special-as-text to encode it as plain text", token=exc.token, offset=exc.offset,
            byte_offset=exc.byte_offset) from None
    if args.json:
        sys.stdout.write(json.dumps(ids.tolist()) + "\n")
    else:
        sys.stdout.write(" ".join(map(str, ids.tolist())) + "\n")
    return 0


def parse_ids(text: str) -> List[int]:
    """Token ids from text: whitespace- or comma-separated, quoted or not, or a JSON
    list (or an object with an ``"ids"`` list); ValueError names a bad entry."""
    stripped = text.strip()
    if stripped[:1] in "[{":
        try:
            doc = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise ValueError(f"token ids: not valid JSON ({exc})") from None
        if isinstance(doc, dict):
            doc = doc.get("ids")
        if not isinstance(doc, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in doc):
            raise ValueError("token ids: JSON must be a list of integers (or an object with an \"ids\" list)")
        return list(doc)
    words = stripped.replace(",", " ").replace('"', " ").replace("'", " ").split()
    ids = []
    for position, word in enumerate(words):
        try:
            ids.append(int(word))
        except ValueError:
            raise ValueError(f"token ids must be integers: entry {position} is {word!r}") from None
    return ids


def _cmd_decode_ids(args: argparse.Namespace) -> int:
    tokenizer = load_tokenizer(args)
    text = sys.stdin.read() if args.ids in ([], ["-"]) else " ".join(args.ids)
    ids = parse_ids(text)
    sys.stdout.write(tokenizer.decode(ids, errors=args.errors) + "\n")
    return 0


def _cmd_convert(args: argparse.Namespace) -> int:
    args.tokenizer = args.source
    tokenizer = load_tokenizer(args)
    tokenizer.save(args.output)
    print(f"wrote {args.output}: {tokenizer!r}", file=sys.stderr)
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from ..pretokenizer import pretokenize
    from ..substrate import SUBSTRATES, encode_symbols, symbol_string

    text = sys.stdin.read() if args.text == "-" else args.text
    if args.tokenizer:
        sys.stdout.write(explain_tokens(load_tokenizer(args), text))
        return 0
    args.pattern = args.pattern or "gpt2"
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


def register(subparsers) -> None:
    """Add ``explain``, ``encode-text`` and ``decode-ids`` to the ``ube`` command."""
    p = subparsers.add_parser("explain", help="show the chunks, base symbols and floor costs of a text")
    p.add_argument("text", help="the text to explain ('-' reads standard input)")
    p.add_argument("--pattern", default=None,
                   help="pre-tokenization pattern: gpt2 (default), cl100k, o200k, llama3, script or regex:EXPR (with --tokenizer: "
                        "the pattern of a tiktoken rank file)")
    add_tokenizer_options(p, required=False, with_pattern=False,
                          help="show the tokens of TEXT under this tokenizer: an ube-stream file, a HF "
                               "tokenizer.json or folder, a tiktoken rank file or a known name (cl100k_base)")
    p.set_defaults(func=cmd_explain)

    p = subparsers.add_parser("encode-text", help="print the token ids of a text (space-separated)")
    add_tokenizer_options(p)
    p.add_argument("text", nargs="?", default="-", help="the text ('-' or nothing reads standard input)")
    special = p.add_mutually_exclusive_group()
    special.add_argument("--allow-special", action="store_true",
                         help="encode special tokens written in the text as the special tokens")
    special.add_argument("--special-as-text", action="store_true",
                         help="encode special tokens written in the text as plain text (default: such text "
                              "is an error, as in tiktoken)")
    p.add_argument("--json", action="store_true", help="print the ids as a JSON list")
    p.add_argument("--keep-newline", dest="strip_newline", action="store_false",
                   help="keep the final newline of standard input (default: drop one)")
    p.set_defaults(func=_cmd_encode_text)

    p = subparsers.add_parser("decode-ids", help="print the text of token ids")
    add_tokenizer_options(p)
    p.add_argument("ids", nargs="*",
                   help="token ids: separated by spaces or commas, quoted or not, or a JSON list ('-' or nothing "
                        "reads them from standard input)")
    p.add_argument("--errors", choices=("strict", "replace"), default="strict",
                   help="invalid byte sequences: fail (default) or write U+FFFD")
    p.set_defaults(func=_cmd_decode_ids)

    p = subparsers.add_parser("convert", help="write any tokenizer as an ube-stream tokenizer file",
                              description="Read a HF tokenizer.json or folder, a tiktoken rank file or known name, "
                                          "or an ube-stream file, and write it in ube-stream's format (ids kept); "
                                          "loading that file is much faster than converting rank files each time.")
    p.add_argument("source", metavar="SRC", help="the tokenizer to convert (as for --tokenizer)")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the ube-stream tokenizer file to write")
    p.add_argument("--pattern", default=None, metavar="P",
                   help="tiktoken rank files: the pre-tokenization pattern (gpt2, cl100k, o200k, llama3 or regex:EXPR)")
    p.add_argument("--special-token", action="append", default=None, metavar="TEXT[=ID]",
                   help="tiktoken rank files: a special token with its id (default: after the largest rank)")
    p.set_defaults(func=_cmd_convert)
