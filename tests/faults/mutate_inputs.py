"""Fault injection child (run by tests/test_faults.py): write a clean file of one
format, mutate random bytes (fixed seed), read every mutant with on_error="skip"
and "raise", print a JSON tally of how each read ended.  A crash kills this
process, which is what the test looks for.

    python tests/faults/mutate_inputs.py FORMAT CASES SEED WORKDIR
"""
import faulthandler
import gzip
import json
import os
import random
import sys
from pathlib import Path

from ube_stream import readers
from ube_stream.errors import InputError

faulthandler.enable()
fmt, n_cases, seed, workdir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
texts = [f"doc {i} h\u00e9llo \u4e16\u754c " * (1 + i % 7) for i in range(60)]
SUFFIXES = {"parquet": ".parquet", "feather": ".feather", "arrow": ".arrow", "arrows": ".arrows"}


def make(path):
    import pyarrow as pa
    from pyarrow import feather, ipc
    from pyarrow import parquet as pq

    table = pa.table({"text": texts, "n": list(range(len(texts)))})
    if fmt == "parquet":   # page checksums (CRC-32), so damaged pages are detected, not decoded into text
        pq.write_table(table, path, row_group_size=16, write_page_checksum=True)
    elif fmt == "feather":
        feather.write_feather(table, path, compression="uncompressed", chunksize=16)
    elif fmt in ("arrow", "arrows"):
        new = ipc.new_file if fmt == "arrow" else ipc.new_stream
        with new(path, table.schema) as w:
            for b in table.to_batches(max_chunksize=16):
                w.write_batch(b)
    else:
        data = "".join(json.dumps({"text": t}) + "\n" for t in texts).encode()
        if fmt == "jsonl.gz":
            data = gzip.compress(data)
        elif fmt == "jsonl.zst":   # with a content checksum, as the zstd CLI writes by default
            import zstandard

            data = zstandard.ZstdCompressor(write_checksum=True).compress(data)
        Path(path).write_bytes(data)


suffix = SUFFIXES.get(fmt, "." + fmt)
clean = os.path.join(workdir, "clean" + suffix)
make(clean)
raw = Path(clean).read_bytes()
rng = random.Random(seed)
tally: dict = {}
bad = []
for case in range(n_cases):
    data = bytearray(raw)
    for _ in range(rng.choice([1, 1, 2, 4, 16])):
        data[rng.randrange(len(data))] = rng.randrange(256)
    if rng.random() < 0.1:
        data = data[:rng.randrange(len(data))]
    path = os.path.join(workdir, f"case{case}" + suffix)
    Path(path).write_bytes(bytes(data))
    for on_error in ("skip", "raise"):
        skips = readers.SkipCounter()
        try:
            got = list(readers.iter_texts(path, on_error=on_error, skips=skips))
            # ok_changed: no error and nothing counted, but other text than written (damage that still
            # decodes: Arrow IPC/Feather have no checksums); a finding to report, not a crash
            kind = ("ok_skipped" if skips.total else "ok_clean" if got == texts else "ok_changed")
            # a compressed stream that fails its checksum is discarded whole: never mangled documents
            if fmt in ("jsonl.gz", "jsonl.zst") and on_error == "skip" and got and got != texts:
                bad.append((case, on_error, "mangled documents kept", len(got)))
            # Parquet: a damaged row group is dropped whole and counted by its rows; the others are kept as written
            if fmt == "parquet" and on_error == "skip" and "corrupt_file" not in skips.counts:
                if len(got) + skips.total != len(texts):
                    bad.append((case, on_error, "rows kept + counted != rows", len(got), dict(skips.counts)))
                elif not set(got) <= set(texts):
                    bad.append((case, on_error, "mangled rows kept", sorted(set(got) - set(texts))[:2]))
        except InputError as exc:
            kind = "input_error:" + exc.reason
            if path not in str(exc):
                bad.append((case, on_error, "message lacks the path", str(exc)[:200]))
        except Exception as exc:  # noqa: BLE001 - anything else is a finding
            kind = "OTHER:" + type(exc).__name__
            bad.append((case, on_error, repr(exc)[:300]))
        key = f"{on_error}/{kind}"
        tally[key] = tally.get(key, 0) + 1
    os.unlink(path)
print(json.dumps({"tally": dict(sorted(tally.items())), "bad": bad[:20], "n_bad": len(bad)}))
