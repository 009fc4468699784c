"""Argument types and the input options that ``train``, ``encode`` and ``verify`` share."""
from __future__ import annotations

import argparse
import re
from typing import Sequence

from ..executors import usable_cores

INPUTS_HELP = ("files, directories, globs or URLs (s3://, gs://, hf://, ...): Parquet, Arrow IPC/Feather, JSONL "
               "(.jsonl/.ndjson/.json), text (plain, .zst or .gz), HF datasets save_to_disk directories (a "
               "DatasetDict with --split); a name without a known suffix is recognised by its content")


def positive_int(text: str) -> int:
    """An integer >= 1: ``100000``, ``100_000`` or ``1e5``."""
    try:
        value = int(float(text)) if "e" in text.lower() else int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r} (examples: 100000, 1e8)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def byte_size(text: str) -> int:
    """A byte size: ``1000000``, ``1e9``, ``500MB``, ``1GiB``, ``2G``."""
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


def add_format_options(p: argparse.ArgumentParser, *, prefix: str = "", column: bool = True) -> None:
    """``--column``, ``--format`` and ``--split``: how every command that reads a
    corpus reads it (validated here, once, with the library's own choices)."""
    from ..readers.formats import FORMAT_CHOICES

    if column:
        p.add_argument("--column", default="text",
                       help=f"{prefix}text column / JSON field (default: text; an error on plain text)")
    p.add_argument("--format", choices=FORMAT_CHOICES, default=None,
                   help=f"{prefix}read every input as this format (default: from the file name, else the content; "
                        "arrow: IPC file or stream by its magic bytes)")
    p.add_argument("--split", default=None, metavar="NAME",
                   help=f"{prefix}the split of a HF DatasetDict folder to read (required for one: splits are "
                        "never mixed)")


def add_input_options(p: argparse.ArgumentParser, *, positional: bool = True, prefix: str = "",
                      workers_help: str = "worker processes (default: the cores this process may use)") -> None:
    """``INPUT...`` (when ``positional``), ``--column``, ``--format``, ``--split``, ``--text-mode``,
    ``--unit-rows``, ``--on-error``, ``--max-document-bytes`` and ``--workers``; ``prefix`` starts each help text (e.g. ``"--corpus: "``)."""
    if positional:
        p.add_argument("inputs", nargs="+", metavar="INPUT", help=INPUTS_HELP)
    add_format_options(p, prefix=prefix)
    p.add_argument("--text-mode", choices=("line", "file"), default="line",
                   help=f"{prefix}plain text: one document per line (default) or per file")
    p.add_argument("--unit-rows", type=positive_int, default=None, metavar="N",
                   help=f"{prefix}rows per work unit (default: the readers' default); fixes the unit plan")
    p.add_argument("--on-error", choices=("raise", "skip"), default="raise",
                   help=f"{prefix}bad rows: stop with an error naming file, row and offset (default), "
                        "or skip and count them")
    p.add_argument("--max-document-bytes", type=byte_size, default=None, metavar="SIZE",
                   help=f"{prefix}the largest document read (a JSONL/text line, a value; default 1GiB): a larger "
                        "one is an error, or skipped and counted with --on-error skip, before it is held in memory")
    add_workers_option(p, help=workers_help)


def add_workers_option(p: argparse.ArgumentParser, help: str = "worker processes (default: the cores this process may use)") -> None:
    p.add_argument("--workers", type=positive_int, default=usable_cores(), metavar="N", help=help)


def add_executor_options(p: argparse.ArgumentParser, where: str = "") -> None:
    """``--executor local|ray`` and ``--ray-address``; ``where`` says what every node must see."""
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local process pool (default) or a Ray cluster, each unit a Ray task" + where
                        + " (pip install \"ube-stream[ray]\")")
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="with --executor ray: the cluster to join (e.g. auto, or HOST:6379); default: start a "
                        "local Ray with --workers CPUs")


# Library messages name Python parameters; on the command line the same advice names the flags.
# (patterns, compiled by re's cache on the first error: not at every start of the command)
_FLAGS = [
    (r"on_error='skip'", "--on-error skip"),
    (r"special_tokens=\[('[^']*'|\"[^\"]*\")\]", r"--special-token \1"),
    (r"\bfinalize=True\b", "--finalize"),
    (r"\bbos=True\b", "--bos"),
    (r"\b(eos|bos)_token\b", r"--\1-token"),
    (r"\brank and world_size\b", "--rank and --world-size"),
    (r"\btheir rank\b", "their --rank"),
    (r"\beval_langs\b", "--eval-langs"),
    (r"\b(column|format|split)=(?=[\s,;.)]|$)", r"--\1"),
    (r"\bsplit=('[^']*')", r"--split \1"),
    (r"\bcolumn=('[^']*')", r"--column \1"),
    (r"\bformat=\"([a-z_]+)\"", r"--format \1"),
    (r"\bthe same call\b", "the same command"),
    (r"\bpattern and special_tokens\b", "--pattern and --special-token"),
    (r"\bpass pattern=", "pass --pattern"),
    (r"\boutput directory\b", "--output directory"),
]


def in_flag_terms(message: str) -> str:
    """``message`` with the Python parameter names the library uses replaced by the CLI's flags.

    >>> print(in_flag_terms("bad row; or read with on_error='skip' to skip and count it"))
    bad row; or read with --on-error skip to skip and count it
    >>> print(in_flag_terms("bos=True needs bos_token naming a special token"))
    --bos needs --bos-token naming a special token
    """
    for pattern, flag in _FLAGS:
        message = re.sub(pattern, flag, message)
    return message


def _flag(option: str) -> str:
    return "--" + option.replace("_", "-")


def render_error(exc: BaseException, argv: Sequence[str] = ()) -> str:
    """The one-line message of ``exc`` on the command line: a library error's
    :attr:`~ube_stream.errors.UbeError.option` named by its flag
    (``vocab_size`` -> ``--vocab-size``, ``split='train'`` -> ``--split train``,
    ``format=`` -> ``--format``), its Python-only ``api_hint`` left out, then
    :func:`in_flag_terms`; a failure to reach a remote path (:func:`remote_failure`)
    as one line naming the URL and the fix.

    >>> from ube_stream.errors import OptionError
    >>> print(render_error(OptionError("vocab_size 300 is below 513; pass vocab_size=513", option="vocab_size")))
    --vocab-size 300 is below 513; pass --vocab-size 513
    """
    from ..errors import UbeError

    if not isinstance(exc, UbeError):
        remote = remote_failure(exc, argv)
        if remote is not None:
            return remote
        return in_flag_terms(str(exc))
    message = exc.message
    if exc.option:
        flag = _flag(exc.option)
        name = re.escape(exc.option)
        message = re.sub(rf"\b{name}=(?:'([^']*)'|\"([^\"]*)\"|(\w+))",
                         lambda m: f"{flag} {m.group(1) or m.group(2) or m.group(3)}", message)
        message = re.sub(rf"\b{name}=(?=[\s,;.)]|$)", flag, message)
        if "_" in exc.option:   # an identifier (vocab_size) is never a plain word (split, format)
            message = re.sub(rf"(?<![\w-]){name}\b", flag, message)
    return in_flag_terms(message)


# exception modules of the remote file systems, and what fixes each
_REMOTE_FIXES = (
    (("botocore", "s3fs", "aiobotocore"),
     "set credentials for it (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or ~/.aws/credentials; "
     "AWS_ENDPOINT_URL for another S3 service)"),
    (("gcsfs", "google"), "set credentials for it (GOOGLE_APPLICATION_CREDENTIALS, or `gcloud auth application-default "
                          "login`)"),
    (("huggingface_hub", "requests", "urllib3", "httpx"),
     "check the network and the repository name (HF_TOKEN for a private or gated one; HF_HUB_OFFLINE=1 reads "
     "only what is cached)"),
    (("aiohttp", "fsspec", "adlfs", "azure"), "check the network, the address and its credentials"),
)


def remote_failure(exc: BaseException, argv: Sequence[str] = ()) -> str | None:
    """One line for a failure of a remote file system (no credentials, no network,
    hub offline): what failed, the URL(s) of the command line, and the fix;
    ``None`` when ``exc`` (or its cause) does not come from one.

    >>> class NoCredentialsError(Exception): pass
    >>> NoCredentialsError.__module__ = "botocore.exceptions"
    >>> print(remote_failure(NoCredentialsError("Unable to locate credentials"), ["encode", "s3://b/x.jsonl"]))
    cannot read s3://b/x.jsonl: NoCredentialsError: Unable to locate credentials; set credentials for it (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or ~/.aws/credentials; AWS_ENDPOINT_URL for another S3 service)
    """
    seen = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        module = type(cause).__module__.split(".")[0]
        for modules, fix in _REMOTE_FIXES:
            if module in modules:
                urls = [a for a in argv if "://" in a] or ["the remote path"]
                first = str(cause).strip().splitlines()[0] if str(cause).strip() else ""
                detail = f"{type(cause).__name__}: {first}" if first else type(cause).__name__
                return f"cannot read {', '.join(urls)}: {detail[:300]}; {fix}"
        cause = cause.__cause__ or cause.__context__
    return None


TOKENIZER_HELP = ("tokenizer: an ube-stream tokenizer file, a HF tokenizer.json or a folder holding one, a tiktoken "
                  "rank file (.tiktoken, plain or gzipped; with --pattern and --special-token, or named like "
                  "cl100k_base.tiktoken) or a known name (cl100k_base, o200k_base)")


def add_tokenizer_options(p: argparse.ArgumentParser, *, required: bool = True, repeat: bool = False,
                          with_pattern: bool = True, help: str = TOKENIZER_HELP) -> None:
    """``--tokenizer`` (read by :func:`load_tokenizer`) and, for tiktoken rank files,
    ``--pattern`` and ``--special-token`` (``with_pattern=False`` where the command
    already has its own ``--pattern``)."""
    p.add_argument("--tokenizer", required=required, metavar="T", action="append" if repeat else "store",
                   help=help + (" (repeat to compare several)" if repeat else ""))
    if with_pattern:
        p.add_argument("--pattern", default=None, metavar="P",
                       help="tiktoken rank files: the pre-tokenization pattern (gpt2, cl100k, o200k, llama3 or regex:EXPR)")
    p.add_argument("--special-token", action="append", default=None, metavar="TEXT[=ID]",
                   help="tiktoken rank files: a special token, with its id (default: after the largest rank); "
                        "repeat for several")


def _special_tokens(values):
    if not values:
        return None
    with_ids = [v.rpartition("=") for v in values]
    if all(sep and i.isdigit() for _, sep, i in with_ids):
        return {text: int(i) for text, _, i in with_ids}
    if any(sep and i.isdigit() for _, sep, i in with_ids):
        raise ValueError("--special-token: give every token an id (TEXT=ID) or none")
    return list(values)


def load_tokenizer(args: argparse.Namespace, source=None):
    """The tokenizer ``--tokenizer`` names (or ``source``), through the one
    :func:`~ube_stream.tokenizer.as_tokenizer` (``main`` words its errors in flags)."""
    from ..tokenizer import as_tokenizer

    return as_tokenizer(args.tokenizer if source is None else source, pattern=getattr(args, "pattern", None),
                        special_tokens=_special_tokens(getattr(args, "special_token", None)))
