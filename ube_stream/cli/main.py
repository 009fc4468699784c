"""The ``ube`` command line (also ``python -m ube_stream``)."""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from .._version import __version__
from .options import in_flag_terms


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ube",
        description="ube-stream: Universal Byte-Level Encoding for multilingual LLM corpora.",
    )
    parser.add_argument("--version", action="version", version=f"ube-stream {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    from . import codec, evaluate, loader, shards, train, verify

    codec.register(sub)
    train.register(sub)
    shards.register(sub)
    verify.register(sub)
    evaluate.register(sub)
    loader.register(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from ..errors import UbeError
    from ..executors import start_method

    try:
        with start_method("fork"):   # our __main__ is guarded and starts no threads: workers fork (where safe)
            return args.func(args)
    except (UbeError, ValueError, FileNotFoundError, ImportError) as exc:
        print(f"ube {args.command}: error: {in_flag_terms(str(exc))}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `ube ... | head`
        return 0
