"""The ``ube`` command line (also ``python -m ube_stream``)."""
from __future__ import annotations

import argparse
import difflib
import gc
import os
import re
import sys
from typing import List, Optional, Sequence

from .._version import __version__
from .options import render_error


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default (unless the help already says it)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (action.option_strings and default not in (None, False, argparse.SUPPRESS) and not action.required
                and "default" not in text.lower() and not isinstance(action, argparse._VersionAction)):
            shown = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else "%(default)s"
            text = f"{text} (default: {shown})" if text else f"default: {shown}"
        return text


class Parser(argparse.ArgumentParser):
    """argparse with suggestions: a mistyped command or option gets its closest
    matches, and the usual slips (``ube verify DIR``, ``--vocab-size 8000 32000``
    on a command that takes one value) get the command that was meant."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self._arg_strings: List[str] = []

    def parse_known_args(self, args=None, namespace=None):
        self._arg_strings = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        hints = self._hints(message)
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}" + "".join(f"\n  {hint}" for hint in hints) + "\n")

    # ---------------------------------------------------------------- suggestions
    def _hints(self, message: str) -> List[str]:
        hints: List[str] = []
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if choice:
            options = re.findall(r"'([^']*)'", choice.group(2))
            close = difflib.get_close_matches(choice.group(1), options, n=3, cutoff=0.5)
            if close:
                hints.append(f"did you mean {' or '.join(close)}?")
        hints += self._unknown_option_hints()
        extra = re.match(r"unrecognized arguments: (.*)", message)
        if extra:
            hints += self._extra_argument_hints(extra.group(1).split())
        return hints

    def _command_parser(self) -> "Parser":
        """The sub-command's parser named in the arguments (or this one)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for token in self._arg_strings:
                    if token in action.choices:
                        return action.choices[token]
        return self

    def _unknown_option_hints(self) -> List[str]:
        parser = self._command_parser()
        known = list(parser._option_string_actions)
        hints = []
        for token in parser._arg_strings or self._arg_strings:
            flag = token.split("=", 1)[0]
            if flag.startswith("--") and flag not in known:
                close = difflib.get_close_matches(flag, known, n=2, cutoff=0.6)
                hint = f"{flag} is not an option of `{parser.prog}`"
                hints.append(f"{hint}; did you mean {' or '.join(close)}?" if close else
                             f"{hint} (see `{parser.prog} --help`)")
        return hints

    def _extra_argument_hints(self, extras: Sequence[str]) -> List[str]:
        parser = self._command_parser()
        tokens = parser._arg_strings or self._arg_strings
        hints = []
        for value in extras:
            if value not in tokens:
                continue
            before = tokens[tokens.index(value) - 1] if tokens.index(value) > 0 else ""
            option = None
            for k in range(tokens.index(value) - 1, -1, -1):
                if tokens[k].startswith("-"):
                    option = parser._option_string_actions.get(tokens[k].split("=", 1)[0])
                    break
                if not re.fullmatch(r"[\d._eE]+", tokens[k]):
                    break
            if option is not None and option.nargs in (None, 1) and re.fullmatch(r"[\d._eE]+", value):
                hint = f"{option.option_strings[-1]} takes one value"
                if parser.prog.endswith((" train", " demo")) and "vocab" in option.dest:
                    hint += ("; a run trains one tokenizer: run once per size, or compare several with "
                             "`ube compare CORPUS --vocab-size 8000 32000`")
                hints.append(hint)
            elif parser.prog.endswith(" verify") and not before.startswith("-"):
                what = "--shards" if os.path.isdir(value) else "--corpus"
                hints.append(f"`ube verify` takes what to check as an option: did you mean "
                             f"`ube verify {what} {value}`? (or --unicode)")
            elif parser.prog.endswith((" inspect", " export-megatron")) and os.path.isdir(value):
                hints.append(f"{value} is a folder: give it once, as the command's first argument")
        return hints


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="ube",
        description="ube-stream: Universal Byte-Level Encoding for multilingual LLM corpora. Train a tokenizer "
                    "(ube train), encode a corpus to token shards (ube encode), check them (ube inspect, ube "
                    "verify), evaluate tokenizers across languages (ube eval, ube compare). `ube COMMAND --help` "
                    "describes each command and its options.",
    )
    parser.add_argument("--version", action="version", version=f"ube-stream {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    from . import codec, evaluate, loader, shards, train, verify

    codec.register(sub)
    train.register(sub)
    shards.register(sub)
    verify.register(sub)
    evaluate.register(sub)
    loader.register(sub)
    helps = {action.dest: action.help for action in sub._choices_actions}
    for name, command in sub.choices.items():
        command.formatter_class = HelpFormatter
        if not command.description:   # at least the one-line help, as a sentence
            text = helps.get(name) or ""
            command.description = text[:1].upper() + text[1:] + ("." if text and not text.endswith(".") else "")
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

    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        with start_method("fork"):   # our __main__ is guarded and starts no threads: workers fork (where safe)
            return args.func(args)
    except (UbeError, ValueError, FileNotFoundError, ImportError) as exc:
        print(f"ube {args.command}: error: {render_error(exc, arguments)}", file=sys.stderr)
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
    except Exception as exc:
        from .options import remote_failure

        line = remote_failure(exc, arguments)
        if line is None:
            raise
        print(f"ube {args.command}: error: {line}", file=sys.stderr)
        return 1
