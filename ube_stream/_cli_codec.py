"""CLI: ``ube encode-text``, ``ube decode-ids``, and the token table of ``ube explain --tokenizer``.

    ube encode-text --tokenizer tok.json "Debian 性能"      # ids, space-separated
    echo "Debian 性能" | ube encode-text --tokenizer tok.json -
    ube decode-ids --tokenizer tok.json 35 1021 77          # text
    ube encode-text --tokenizer tok.json - | ube decode-ids --tokenizer tok.json -

``--tokenizer`` takes an ube-stream tokenizer file or a HF ``tokenizer.json``
(byte-level BPE; read with :meth:`Tokenizer.from_hf`).
"""
from __future__ import annotations

import argparse
import json
import sys


def load_tokenizer(path: str):
    """An ube-stream tokenizer file, or a HF tokenizer.json (byte-level BPE)."""
    from .tokenizer import FORMAT_NAME, Tokenizer

    try:
        with open(path, "r", encoding="utf-8") as f:
            head = json.load(f)
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such tokenizer file; train one with `ube train`") from None
    except json.JSONDecodeError:
        head = None
    if isinstance(head, dict) and head.get("format") != FORMAT_NAME and "model" in head:
        return Tokenizer.from_hf(path)
    return Tokenizer.load(path)


def explain_tokens(tokenizer, text: str) -> str:
    """One line per token of ``text``: position, id, symbol string, and its text.

    The text column shows what the token decodes to on its own; a token that
    holds only part of a character (a UTF-8 or UTF-16 byte sequence cut between
    tokens) shows its bytes as ``<..>`` instead.
    """
    from .substrate import decode_symbols

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
    tokenizer = load_tokenizer(args.tokenizer)
    text = sys.stdin.read() if args.text == "-" else args.text
    if args.text == "-" and args.strip_newline and text.endswith("\n"):
        text = text[:-1]
    allowed = "all" if args.allow_special else ()
    ids = tokenizer.encode(text, allowed_special=allowed)
    sys.stdout.write(" ".join(map(str, ids.tolist())) + "\n")
    return 0


def _cmd_decode_ids(args: argparse.Namespace) -> int:
    tokenizer = load_tokenizer(args.tokenizer)
    words = sys.stdin.read().split() if args.ids in ([], ["-"]) else args.ids
    try:
        ids = [int(w) for w in words]
    except ValueError as exc:
        raise ValueError(f"token ids must be integers: {exc}") from None
    sys.stdout.write(tokenizer.decode(ids, errors=args.errors) + "\n")
    return 0


def _cmd_explain_tokens(args: argparse.Namespace) -> int:
    tokenizer = load_tokenizer(args.tokenizer)
    text = sys.stdin.read() if args.text == "-" else args.text
    sys.stdout.write(explain_tokens(tokenizer, text))
    return 0


def register(subparsers) -> None:
    """Add ``encode-text`` and ``decode-ids`` to the ``ube`` command."""
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
