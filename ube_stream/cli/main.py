"""The ``ube`` command line (also ``python -m ube_stream``)."""
from __future__ import annotations

import argparse
import gc
import os
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
    # In a process of its own (`ube`, `python -m ube_stream`: numpy not yet imported, so
    # not a caller's process) start-up is imports: ~0.4 CPU s of Python and numpy.  The
    # collector would traverse those long-lived objects again and again (~5% of it): it
    # is off until the parser is built, then everything alive is frozen out of later
    # collections (which also keeps forked workers' pages shared).  ube-stream does no
    # linear algebra: OpenBLAS starts one thread, not a spinning pool per core.
    fresh = "numpy" not in sys.modules and gc.isenabled()
    if fresh:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
        gc.disable()
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
    finally:
        if fresh:
            gc.freeze()
            gc.enable()
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from ..errors import UbeError
    from ..executors import start_method

    try:
        with start_method("fork"):   # our __main__ is guarded and starts no threads: workers fork (where safe)
            return args.func(args)
    except (UbeError, ValueError, ImportError) as exc:
        print(f"ube {args.command}: error: {in_flag_terms(str(exc))}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `ube ... | head`
        return 0
    except OSError as exc:   # permission, read-only file system, too many open files...: one line, no traceback
        from ..storage import os_error_message

        print(f"ube {args.command}: error: {os_error_message(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:   # committed work is kept: the same command resumes it
        print(f"ube {args.command}: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130
