"""Fault injection child (run by tests/test_faults.py): write a clean file of one
format, mutate random bytes (fixed seed), read every mutant with on_error="skip"
and "raise", print a JSON tally of how each read ended.  A crash kills this
process, which is what the test looks for."""
import json, os, random, sys, gzip, io
import numpy as np

import faulthandler; faulthandler.enable()
fmt, n_cases, seed, workdir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
from ube_stream import readers
from ube_stream.errors import InputError

texts = [f"doc {i} h\u00e9llo \u4e16\u754c " * (1 + i % 7) for i in range(60)]

def make(path):
    import pyarrow as pa, pyarrow.parquet as pq, pyarrow.feather as feather, pyarrow.ipc as ipc
    table = pa.table({"text": texts, "n": list(range(len(texts)))})
    if fmt == "parquet":
        pq.write_table(table, path, row_group_size=16)
    elif fmt == "feather":
        feather.write_feather(table, path, compression="uncompressed", chunksize=16)
    elif fmt == "arrow":
        with ipc.new_file(path, table.schema) as w:
            for b in table.to_batches(max_chunksize=16): w.write_batch(b)
    elif fmt == "arrows":
        with ipc.new_stream(path, table.schema) as w:
            for b in table.to_batches(max_chunksize=16): w.write_batch(b)
    else:
        data = "".join(json.dumps({"text": t}) + "\n" for t in texts).encode()
        if fmt == "jsonl.gz":
            data = gzip.compress(data)
        elif fmt == "jsonl.zst":
            import zstandard; data = zstandard.ZstdCompressor(write_checksum=True).compress(data)
        open(path, "wb").write(data)

suffix = {"parquet": ".parquet", "feather": ".feather", "arrow": ".arrow", "arrows": ".arrows"}.get(fmt, "." + fmt)
clean = os.path.join(workdir, "clean" + suffix)
make(clean)
raw = open(clean, "rb").read()
rng = random.Random(seed)
tally = {}
bad = []
for case in range(n_cases):
    data = bytearray(raw)
    for _ in range(rng.choice([1, 1, 2, 4, 16])):
        pos = rng.randrange(len(data))
        data[pos] = rng.randrange(256)
    if rng.random() < 0.1:
        data = data[:rng.randrange(len(data))]
    path = os.path.join(workdir, f"case{case}" + suffix)
    open(path, "wb").write(bytes(data))
    for on_error in ("skip", "raise"):
        skips = readers.SkipCounter()
        try:
            got = list(readers.iter_texts(path, on_error=on_error, skips=skips))
            kind = "ok_clean" if got == texts and skips.total == 0 else "ok_skipped"
            if fmt in ("jsonl.gz", "jsonl.zst") and on_error == "skip":
                # a stream that fails its checksum is discarded whole: never mangled documents
                if got != texts and got:
                    bad.append((case, on_error, "mangled documents kept", len(got)))
        except InputError as exc:
            kind = "input_error:" + exc.reason
            if path not in str(exc):
                bad.append((case, on_error, "message lacks the path", str(exc)[:200]))
        except Exception as exc:
            kind = "OTHER:" + type(exc).__name__
            bad.append((case, on_error, repr(exc)[:300]))
        key = f"{on_error}/{kind}"
        tally[key] = tally.get(key, 0) + 1
    os.unlink(path)
print(json.dumps({"tally": dict(sorted(tally.items())), "bad": bad[:20], "n_bad": len(bad)}))
