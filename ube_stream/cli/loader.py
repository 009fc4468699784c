"""``ube export-megatron DIR PREFIX``: a shard directory as Megatron-LM's PREFIX.bin / PREFIX.idx."""
from __future__ import annotations

import argparse
import sys


def _cmd_export_megatron(args: argparse.Namespace) -> int:
    from ..loader.megatron import export_megatron

    try:
        summary = export_megatron(args.directory, args.prefix, dtype=args.dtype, overwrite=args.overwrite)
    except FileExistsError as exc:
        print(f"ube export-megatron: error: {str(exc).replace('overwrite=True', '--overwrite')}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(f"wrote {summary['bin']} and {summary['idx']}: {summary['documents']} documents, "
              f"{summary['tokens']} tokens ({summary['dtype']}) from {summary['shards']} shards", file=sys.stderr)
    return 0


def register(subparsers: "argparse._SubParsersAction") -> None:
    p = subparsers.add_parser(
        "export-megatron", help="write a shard directory as Megatron-LM PREFIX.bin / PREFIX.idx",
        description="Write every document of a finished shard directory (manifest order) as one Megatron-LM "
                    "sequence: PREFIX.bin holds the tokens (uint16 for vocabularies below 65,500 ids, else int32: "
                    "Megatron's own rule), PREFIX.idx the MMIDIDX index. "
                    "Point Megatron's "
                    "--data-path at PREFIX.")
    p.add_argument("directory", metavar="DIR", help="finished shard directory (with MANIFEST.json)")
    p.add_argument("prefix", metavar="PREFIX", help="output path prefix: writes PREFIX.bin and PREFIX.idx")
    p.add_argument("--dtype", choices=("auto", "int32", "uint16"), default="auto",
                   help="token type in PREFIX.bin: auto (default: Megatron's rule, uint16 when the vocabulary "
                        "has fewer than 65,500 ids, else int32), int32, or uint16 (half the size)")
    p.add_argument("--overwrite", action="store_true", help="replace existing PREFIX.bin / PREFIX.idx")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary line")
    p.set_defaults(func=_cmd_export_megatron)
