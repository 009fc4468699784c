"""Peak memory of encoding one huge document and of decoding many ids (not a timed test).

    python benchmarks/encode_memory.py [--doc-mb 200] [--ids 10000000] [--vocab cl100k|trained] [--cases ...]

Each case runs in its own subprocess, which loads the tokenizer, builds its input
(one document of ``--doc-mb`` MB: real multilingual text from tests/data repeated,
or ``--ids`` token ids: real text's, with a lone continuation byte every
1000 tokens for the ``*_replace`` decode cases), reads its resident set size, runs the step once and reads
its peak RSS (``resource.getrusage``).  Printed: the input's size and the peak
over the RSS before the step, in MB and as a multiple of the input.  The encoder
splits a document ``Tokenizer.slice_bytes`` at a time, so its memory on top of the
input is the ids (4 bytes per token) plus a slice of chunk ends, not 8 bytes per
input byte.  Targets (issue 14): encode under ~3x the document on top of it,
``decode(errors="replace")`` of 10^7 ids under 300 MB.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from _record import write_record  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def sample_text():
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from _helpers import read_jsonl_zst

    return "\n".join(r["text"] for r in read_jsonl_zst("docs_sample.jsonl.zst"))


def child(case, tokenizer_path, doc_mb, n_ids):
    import numpy as np

    from ube_stream import Tokenizer

    tok = Tokenizer.load(tokenizer_path, trust_pattern=True)
    text = sample_text()
    if case.startswith("decode"):
        ids = tok.encode_ordinary(text)
        ids = np.tile(ids, n_ids // ids.size + 1)[:n_ids].copy()
        errors = "replace" if case.endswith("_replace") else "strict"
        if errors == "replace":
            ids[::1000] = 0xA0  # a lone continuation byte every 1000 tokens: replacement work
        call = tok.decode_bytes if case.startswith("decode_bytes") else tok.decode
        size = ids.nbytes / 1e6
        what = f"{call.__name__}(errors={errors!r}) of {n_ids:,} ids ({size:.0f} MB of uint32)"
        before = rss_mb()
        started = time.perf_counter()
        out = call(ids, errors=errors)
        result = f"{len(out):,} {'bytes' if isinstance(out, bytes) else 'characters'}"
    else:
        unit = text.encode("utf-8")
        data = unit * (int(doc_mb * 1e6) // len(unit) + 1)
        size = len(data) / 1e6
        tok.encode_ordinary(text[:1000])  # compiled tables built before the measurement
        if case == "encode_utf8_batch":
            arr = np.frombuffer(data, np.uint8)
            what = f"encode_utf8_batch of one {size:.0f} MB document (bytes in)"
            before = rss_mb()
            started = time.perf_counter()
            ids, _ = tok.encode_utf8_batch(arr, np.array([0, arr.size], dtype=np.int64))
        else:
            doc = data.decode("utf-8")
            del data
            what = f"encode_ordinary of one {size:.0f} MB document (str in)"
            before = rss_mb()
            started = time.perf_counter()
            ids = tok.encode_ordinary(doc)
        result = f"{ids.size:,} tokens"
    seconds = time.perf_counter() - started
    over = peak_mb() - before
    print(json.dumps({"case": what, "input_mb": size, "over_mb": over, "seconds": seconds, "result": result}))


CASES = ("encode_ordinary", "encode_utf8_batch", "decode_replace", "decode_bytes_replace", "decode",
         "decode_bytes")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--doc-mb", type=float, default=200.0)
    parser.add_argument("--ids", type=int, default=10_000_000)
    parser.add_argument("--vocab", choices=["trained", "cl100k"], default="trained")
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        case, path, doc_mb, n_ids = args.child
        return child(case, path, float(doc_mb), int(n_ids))

    from ube_stream import Tokenizer, train

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tokenizer.json")
        if args.vocab == "cl100k":
            sys.path.insert(0, HERE)
            from side_by_side_encode import rank_file

            tok = Tokenizer.from_tiktoken(rank_file("cl100k_base", tmp)[1], "cl100k")
        else:
            tok = train(iter(sample_text().split("\n")), vocab_size=8000, substrate="utf8", workers=1,
                        show_progress=False)
        tok.save(path)
        print(f"tokenizer: {args.vocab} ({tok.vocab_size} ids); peak RSS over the RSS before the step:")
        rows, failed = [], []
        for case in args.cases:
            proc = subprocess.run([sys.executable, __file__, "--child", case, path, str(args.doc_mb),
                                   str(args.ids)], capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"  {case}: failed\n{proc.stderr[-2000:]}")
                failed.append(f"{case} failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ''}")
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            print(f"  {r['case']:<60} +{r['over_mb']:7.0f} MB = {r['over_mb'] / r['input_mb']:.2f}x the input "
                  f"({r['result']}, {r['seconds']:.1f} s)", flush=True)
            rows.append([r["case"], r["input_mb"], r["over_mb"], r["over_mb"] / r["input_mb"], str(r["result"]),
                         r["seconds"]])
    sys.path.insert(0, HERE)
    write_record("encode_memory", title="Peak memory of encoding one huge document and of decoding many ids",
                 columns=["case", "input (MB)", "peak RSS over before (MB)", "x the input", "result", "seconds"],
                 rows=rows, notes=[f"tokenizer {args.vocab} ({tok.vocab_size} ids); each case in a fresh process",
                                   *failed], argv=argv)


if __name__ == "__main__":
    main()
