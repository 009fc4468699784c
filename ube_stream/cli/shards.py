"""``ube encode`` and ``ube inspect``: the command line of :mod:`ube_stream.shards`."""
from __future__ import annotations

import argparse
import sys
from typing import List

import numpy as np

from .options import add_executor_options, add_input_options, add_tokenizer_options, in_flag_terms, positive_int


def register(subparsers) -> None:
    """Add the ``encode`` and ``inspect`` sub-commands."""
    from ..shards.encode import DEFAULT_SHARD_TOKENS

    p = subparsers.add_parser("encode", help="encode a corpus into uint32 token shards (resumable)",
                              description="Encode documents into a token shard directory: uint32 token files "
                                          "with a memory-mapped index and MANIFEST.json. Rerun the same command "
                                          "after a crash to resume.")
    add_input_options(p, workers_help="worker processes (default: the cores this process may use; with "
                                      "--executor ray: the CPUs of a Ray started here); the output does not "
                                      "depend on it")
    add_tokenizer_options(p)
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="shard directory to write (or resume)")
    add_executor_options(p, " writing straight to --output, which must be shared storage every node sees")
    p.add_argument("--eos", dest="eos", action="store_true", default=True,
                   help="append the EOS token to every document (default)")
    p.add_argument("--no-eos", dest="eos", action="store_false", help="do not append EOS")
    p.add_argument("--eos-token", default=None, metavar="TOK",
                   help="special token used as EOS (default: <|endoftext|>)")
    p.add_argument("--bos", action="store_true", help="prepend a BOS token to every document (needs --bos-token)")
    p.add_argument("--bos-token", default=None, metavar="TOK", help="special token used as BOS")
    p.add_argument("--shard-tokens", type=positive_int, default=DEFAULT_SHARD_TOKENS, metavar="N",
                   help=f"start a new shard once one holds N tokens (default {DEFAULT_SHARD_TOKENS:,}); "
                        f"documents are never split")
    p.add_argument("--rank", type=int, default=None, metavar="R",
                   help="encode only units with index %% N == R (with --world-size N)")
    p.add_argument("--world-size", type=positive_int, default=None, metavar="N", help="number of ranks")
    p.add_argument("--finalize", action="store_true",
                   help="with --rank: write MANIFEST.json once every unit of every rank is committed")
    p.add_argument("--cache-mb", type=float, default=None, metavar="MB",
                   help="chunk-cache memory per encoding thread, in MiB (default 128; 0: no cache); it keeps "
                        "the chunks hit most, and the token ids never depend on it")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")
    p.set_defaults(func=cmd_encode)

    p = subparsers.add_parser("inspect", help="summarise a token shard directory",
                              description="Documents, tokens, shards, tokens-per-document histogram, sources and "
                                          "tokenizer of a shard directory (checks headers).")
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--verify", choices=("none", "header", "full"), default="header",
                   help="how much to check before reporting (full: sha256 of every token file)")
    p.set_defaults(func=cmd_inspect)


def cmd_encode(args: argparse.Namespace) -> int:
    from ..shards.encode import EncodeSummary, encode_corpus

    if args.ray_address and args.executor != "ray":
        print("ube encode: error: --ray-address needs --executor ray", file=sys.stderr)
        return 2
    if args.executor == "ray":
        from ..executors import import_ray

        try:
            import_ray()
        except ImportError as exc:
            print(f"ube encode: error: {exc}", file=sys.stderr)
            return 1
    from .options import load_tokenizer

    summary = EncodeSummary()
    encode_corpus(args.inputs, tokenizer=load_tokenizer(args), output=args.output, workers=args.workers, eos=args.eos,
                  bos=args.bos, eos_token=args.eos_token, bos_token=args.bos_token, shard_tokens=args.shard_tokens,
                  unit_rows=args.unit_rows, column=args.column, text_mode=args.text_mode, on_error=args.on_error,
                  format=args.format, split=args.split, max_document_bytes=args.max_document_bytes,
                  show_progress=not args.quiet, rank=args.rank, world_size=args.world_size,
                  finalize=args.finalize, summary=summary, executor=args.executor,
                  ray_address=args.ray_address,
                  cache_bytes=None if args.cache_mb is None else int(args.cache_mb * (1 << 20)))
    if not args.quiet and not summary.already_complete:   # encode_corpus already said "nothing to do"
        print(f"{args.output}:", file=sys.stderr)
        print(in_flag_terms(summary.format()), file=sys.stderr)
    return 0


def histogram_lines(lengths: np.ndarray, width: int = 40) -> List[str]:
    """Text histogram of tokens per document over power-of-two buckets."""
    if len(lengths) == 0:
        return ["  (no documents)"]
    lengths = np.asarray(lengths, dtype=np.int64)
    top = int(lengths.max())
    edges = [0, 1] + [1 << k for k in range(1, max(top, 1).bit_length() + 1)]
    counts = []
    for lo, hi in zip(edges, edges[1:]):
        counts.append((lo, hi - 1, int(np.count_nonzero((lengths >= lo) & (lengths < hi)))))
    counts = [c for c in counts if c[2]] or counts[:1]
    peak = max(c for _, _, c in counts)
    lines = []
    for lo, hi, count in counts:
        label = f"{lo}" if lo == hi else f"{lo}-{hi}"
        bar = "#" * max(1 if count else 0, round(width * count / peak))
        lines.append(f"  {label:>15} {count:>10,}  {bar}")
    return lines


def cmd_inspect(args: argparse.Namespace) -> int:
    from ..shards.encode import TokenShards

    ds = TokenShards(args.directory, verify=args.verify)
    m = ds.manifest
    out = sys.stdout
    lengths = ds.doc_lengths()
    totals = m["totals"]
    out.write(f"{ds.location}\n")
    out.write(f"documents   {len(ds):,}\n")
    out.write(f"tokens      {ds.num_tokens:,}\n")
    out.write(f"shards      {len(ds.shards):,}\n")
    if len(lengths):
        out.write(f"tokens/doc  mean {lengths.mean():,.1f}, median {int(np.median(lengths)):,}, "
                  f"max {int(lengths.max()):,}\n")
    tok = m["tokenizer"]
    out.write(f"tokenizer   {tok['file']} ({tok['substrate']}, vocab {tok['vocab_size']:,}, {tok['fingerprint']})\n")
    out.write(f"special     eos={m['special_ids']['eos']} bos={m['special_ids']['bos']}\n")
    out.write("options     " + ", ".join(f"{k}={v}" for k, v in m["options"].items()) + "\n")
    out.write("tokens per document (EOS/BOS included):\n")
    for line in histogram_lines(lengths):
        out.write(line + "\n")
    out.write(f"sources ({len(ds.sources)}; rows read = documents + skipped):\n")
    for s in ds.sources:
        skipped = ", ".join(f"{k}: {v:,}" for k, v in s["skipped"].items()) or "none"
        out.write(f"  [{s['source_id']}] {s['path']} ({s['format']}, {s['size']:,} bytes): rows read "
                  f"{s['rows_read']:,}, documents {s['documents']:,}, skipped {skipped}\n")
    skipped = ", ".join(f"{k}: {v:,}" for k, v in totals["skipped"].items()) or "none"
    out.write(f"total       rows read {totals['rows_read']:,}, documents {totals['documents']:,}, "
              f"skipped {skipped}\n")
    special = ", ".join(f"{t} {n:,}" for t, n in totals.get("special_text", {}).items()) or "none"
    out.write(f"special text in documents (encoded as plain text): {special}\n")
    from ..readers import skipped_files_lines

    for line in skipped_files_lines(m.get("skipped_files", [])):
        out.write(line + "\n")
    return 0
