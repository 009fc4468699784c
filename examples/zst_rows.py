"""The JSON Lines + zstd reader and writer of the data-cutting scripts here
(make_sample.py, make_test_data.py): rows in, rows out, deterministic bytes."""
import io
import json
import os

import zstandard


def read_rows(path):
    with open(path, "rb") as f:
        reader = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(f), encoding="utf-8")
        for line in reader:
            yield json.loads(line)


def write_rows(path, rows):
    raw = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
    with open(path, "wb") as f:
        f.write(zstandard.ZstdCompressor(level=19).compress(raw))
    print(f"{path}: {len(rows)} rows, {len(raw):,} bytes raw, {os.path.getsize(path):,} compressed")
