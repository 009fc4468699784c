"""CLI: ``ube explain``, ``ube encode-text`` and ``ube decode-ids``.

    ube encode-text --tokenizer tok.json "Debian 性能"      # ids, space-separated
    echo "Debian 性能" | ube encode-text --tokenizer tok.json -
    ube decode-ids --tokenizer tok.json 35 1021 77          # text
    ube encode-text --tokenizer tok.json - | ube decode-ids --tokenizer tok.json -

``--tokenizer`` takes an ube-stream tokenizer file or a HF ``tokenizer.json``
(byte-level BPE; read with :meth:`Tokenizer.from_hf`).
"""
from __future__ import annotations

import argparse
import sys

from ..tokenizer import as_tokenizer


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
    tokenizer = as_tokenizer(args.tokenizer)
    text = sys.stdin.read() if args.text == "-" else args.text
    if args.text == "-" and args.strip_newline and text.endswith("\n"):
        text = text[:-1]
    allowed = "all" if args.allow_special else ()
    ids = tokenizer.encode(text, allowed_special=allowed)
    sys.stdout.write(" ".join(map(str, ids.tolist())) + "\n")
    return 0


def _cmd_decode_ids(args: argparse.Namespace) -> int:
    tokenizer = as_tokenizer(args.tokenizer)
    words = sys.stdin.read().split() if args.ids in ([], ["-"]) else args.ids
    try:
        ids = [int(w) for w in words]
    except ValueError as exc:
        raise ValueError(f"token ids must be integers: {exc}") from None
    sys.stdout.write(tokenizer.decode(ids, errors=args.errors) + "\n")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from ..pretokenizer import pretokenize
    from ..substrate import SUBSTRATES, encode_symbols, symbol_string

    text = sys.stdin.read() if args.text == "-" else args.text
    if args.tokenizer:
        sys.stdout.write(explain_tokens(as_tokenizer(args.tokenizer), text))
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


def register(subparsers) -> None:
    """Add ``explain``, ``encode-text`` and ``decode-ids`` to the ``ube`` command."""
    p = subparsers.add_parser("explain", help="show the chunks, base symbols and floor costs of a text")
    p.add_argument("text", help="the text to explain ('-' reads standard input)")
    p.add_argument("--pattern", default="gpt2", help="pre-tokenization pattern: gpt2 (default), cl100k, o200k or a regex")
    p.add_argument("--tokenizer", default=None,
                   help="show the tokens of TEXT under this tokenizer (ube-stream file or HF tokenizer.json)")
    p.set_defaults(func=cmd_explain)

    p = subparsers.add_parser("encode-text", help="print the token ids of a text (space-separated)")
    p.add_argument("--tokenizer", required=True, help="ube-stream tokenizer file or HF tokenizer.json")
    p.add_argument("text", nargs="?", default="-", help="the text ('-' or nothing reads standard input)")
    p.add_argument("--allow-special", action="store_true",
                   help="recognise special tokens in the text (default: encode them as plain text)")
    p.add_argument("--keep-newline", dest="strip_newline", action="store_false",
                   help="keep the final newline of standard input (default: drop one)")
    p.set_defaults(func=_cmd_encode_text)

    p = subparsers.add_parser("decode-ids", help="print the text of token ids")
    p.add_argument("--tokenizer", required=True, help="ube-stream tokenizer file or HF tokenizer.json")
    p.add_argument("ids", nargs="*", help="token ids ('-' or nothing reads them from standard input)")
    p.add_argument("--errors", choices=("strict", "replace"), default="strict",
                   help="invalid byte sequences: fail (default) or write U+FFFD")
    p.set_defaults(func=_cmd_decode_ids)
