"""First-sample time of a shard directory on S3, read where it lives, against
copying it whole first (what ube-stream did before the lazy reader).

    python benchmarks/remote_first_sample.py [--mb 200] [--shards 4] [--limit 64MiB] [--samples 200]

A local S3 server (moto's server mode on 127.0.0.1, as the tests use) holds a
synthetic shard directory of ``--mb`` MB of tokens (``--shards`` shards,
documents of 1..4000 tokens, written with the format's own index writer).
Each measurement starts from an empty cache in a fresh cache folder:

* ``open_s``: ``TokenDataset(url, seq_len)`` (manifest, tokenizer and index
  files fetched, every name and size checked);
* ``first_sample_s``: ``ds[0]`` (a shuffled window: one 16 MiB ranged GET);
* ``random_samples_s`` / ``cache_bytes_max``: ``--samples`` more shuffled
  samples under ``--limit`` (the cache size after each must stay at or under it);
* ``whole_copy_s``: ``cached_directory(url)``, the whole directory copied
  before any sample (the previous behaviour), with no limit.

Records the numbers and the settings (``_record.py``, with the machine's
load).  The server runs in this process: on a real store, latency per GET is
higher and bandwidth lower, so both columns grow.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import socket
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from ube_stream import Tokenizer  # noqa: E402
from ube_stream.shards import index_format as fmt  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from _record import peer_versions, write_record  # noqa: E402


def write_directory(path: str, total_bytes: int, n_shards: int, seed: int = 0) -> int:
    """A finished shard directory of random token ids (utf8 tokenizer, no merges)."""
    tok = Tokenizer(substrate="utf8", merges=[], special_tokens=["<|endoftext|>"])
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.join(path, fmt.SHARDS_DIR))
    per_shard = total_bytes // fmt.TOKEN_WIDTH // n_shards
    records, row = [], 0
    for k in range(n_shards):
        lengths = rng.integers(1, 4000, size=per_shard // 2000 + 2)
        lengths = lengths[np.cumsum(lengths) <= per_shard]
        tokens = rng.integers(0, tok.vocab_size, size=int(lengths.sum()), dtype=np.uint32).astype("<u4")
        name = f"00000-{k:012d}-0000"
        tokens_file, index_file = f"{fmt.SHARDS_DIR}/{name}.tokens", f"{fmt.SHARDS_DIR}/{name}.idx"
        raw = tokens.tobytes()
        with open(os.path.join(path, tokens_file), "wb") as f:
            f.write(raw)
        digest = hashlib.sha256(raw).digest()
        header = fmt.IndexHeader(len(lengths), tokens.size, digest, fmt.fingerprint_bytes(tok.fingerprint),
                                 token_bound=int(tokens.max()) + 1)
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype("<u8")
        fmt.write_index(os.path.join(path, index_file), header, offsets,
                        np.arange(row, row + len(lengths), dtype="<u8"), np.zeros(len(lengths), "<u4"))
        row += len(lengths)
        records.append({"name": name, "unit_id": f"00000-{k:012d}", "tokens_file": tokens_file,
                        "index_file": index_file, "documents": len(lengths), "tokens": int(tokens.size),
                        "sha256": digest.hex()})
    tok.save(os.path.join(path, fmt.TOKENIZER_NAME))
    manifest = {"format": fmt.MANIFEST_FORMAT, "version": fmt.MANIFEST_VERSION, "dtype": "uint32",
                "tokenizer": {"file": fmt.TOKENIZER_NAME, "fingerprint": tok.fingerprint, "substrate": "utf8",
                              "vocab_size": tok.vocab_size},
                "special_ids": {"eos": None, "bos": None}, "options": {"eos_token": None, "bos_token": None},
                "sources": [{"source_id": 0, "path": "synthetic", "size": 0, "format": "jsonl", "rows_read": row,
                             "documents": row, "skipped": {}}],
                "shards": records,
                "totals": {"documents": row, "tokens": sum(r["tokens"] for r in records), "shards": n_shards}}
    with open(os.path.join(path, fmt.MANIFEST_NAME), "w") as f:
        json.dump(manifest, f)
    return sum(4 * r["tokens"] for r in records)


def cache_bytes(root: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(root) for f in files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=200, help="token bytes of the directory, in MB")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--limit", default="64MiB", help="cache limit for the lazy reads")
    parser.add_argument("--samples", type=int, default=200, help="shuffled samples read after the first")
    parser.add_argument("--seq-len", type=int, default=2048)
    args = parser.parse_args()

    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_DEFAULT_REGION": "us-east-1", "FSSPEC_S3_ENDPOINT_URL": f"http://127.0.0.1:{port}"})
    import fsspec
    import fsspec.config

    fsspec.config.set_conf_env(fsspec.config.conf)
    work = tempfile.mkdtemp(prefix="ube-bench-remote-")
    try:
        fs = fsspec.filesystem("s3")
        fs.mkdir("bench")
        local = os.path.join(work, "dir")
        token_bytes = write_directory(local, int(args.mb * 1e6), args.shards)
        fs.put(local, "bench/dir", recursive=True)
        url = "s3://bench/dir"

        from ube_stream.loader import TokenDataset
        from ube_stream.shards.remote import cached_directory
        from ube_stream.storage import resolve_cache_limit

        limit = resolve_cache_limit(args.limit)
        os.environ["UBE_STREAM_CACHE"] = os.path.join(work, "cache-lazy")
        t0 = time.perf_counter()
        ds = TokenDataset(url, args.seq_len, seed=1, cache_limit=limit)
        t1 = time.perf_counter()
        first = ds[0]
        t2 = time.perf_counter()
        after_first = cache_bytes(os.environ["UBE_STREAM_CACHE"])
        peak = after_first
        order = np.random.default_rng(2).integers(0, len(ds), size=args.samples)
        t3 = time.perf_counter()
        for k in order:
            ds[int(k)]
            peak = max(peak, cache_bytes(os.environ["UBE_STREAM_CACHE"]))
        t4 = time.perf_counter()
        reference = TokenDataset(local, args.seq_len, seed=1)
        identical = bool(np.array_equal(first, reference[0])) and all(
            np.array_equal(ds[int(k)], reference[int(k)]) for k in order[:20])

        os.environ["UBE_STREAM_CACHE"] = os.path.join(work, "cache-whole")
        t5 = time.perf_counter()
        cached_directory(url, cache_limit=10 * token_bytes)
        t6 = time.perf_counter()
        result = {
            "benchmark": "remote_first_sample", "store": "moto S3 server on 127.0.0.1 (in this process)",
            "token_bytes": token_bytes, "shards": args.shards, "seq_len": args.seq_len,
            "cache_limit": limit, "open_s": round(t1 - t0, 4), "first_sample_s": round(t2 - t1, 4),
            "open_plus_first_sample_s": round(t2 - t0, 4), "cache_bytes_after_first_sample": after_first,
            "random_samples": args.samples, "random_samples_s": round(t4 - t3, 4), "cache_bytes_max": peak,
            "cache_bytes_max_within_limit": peak <= limit, "samples_identical_to_local": identical,
            "whole_copy_s": round(t6 - t5, 4),
        }
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=1))
    keys = ("open_s", "first_sample_s", "open_plus_first_sample_s", "cache_bytes_after_first_sample",
            "random_samples_s", "cache_bytes_max", "cache_bytes_max_within_limit", "samples_identical_to_local",
            "whole_copy_s")
    write_record("remote_first_sample", title="First sample of a shard directory on S3, read lazily vs copied whole",
                 columns=["what", "value"], rows=[[k, result[k]] for k in keys],
                 headline=f"first sample after {result['open_plus_first_sample_s']:.2f} s, whole copy "
                          f"{result['whole_copy_s']:.2f} s",
                 peers=peer_versions("moto", "fsspec", "s3fs"),
                 notes=[f"{token_bytes / 1e6:.0f} MB of tokens in {args.shards} shards on {result['store']}; "
                        f"seq_len {args.seq_len}, cache limit {args.limit}, {args.samples} shuffled samples"],
                 data=result)


if __name__ == "__main__":
    main()
