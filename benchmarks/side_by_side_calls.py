"""The public calls side by side: pretokenize, chunk_bounds_batch, decode, the
JSON Lines reader and end-to-end `ube encode`, in one process run.

    python benchmarks/side_by_side_calls.py [corpus.jsonl] [--mb 10] [--e2e-mb 50] [--threads-mb 20] [--repeat 3]

Rows (each a median of ``--repeat`` rounds; the rounds interleave the rows, so a
busy machine slows every row alike; results are checked equal before timing):

- ``pretokenize`` ``list[str]`` vs ``regex.findall`` (gpt2, cl100k, o200k), on one
  ``--mb`` string and per document;
- ``chunk_bounds`` per document vs one ``chunk_bounds_batch`` call;
- decode from a ``uint32`` array and from a list, to ``str`` and ``bytes``, vs
  tiktoken, gigatoken and HF tokenizers (where they have the call), with the real
  cl100k_base ranks that ``bpe-openai`` ships;
- ``ube`` vs ``utf8`` decode, two tokenizers trained on the same text;
- the JSON Lines reader (``readers.jsonl.read_jsonl`` + ``TextBatch.utf8()``) vs
  ``json.loads`` per line + UTF-8;
- ``encode_utf8_batch(num_threads=1|2)``: wall and CPU time of one batch;
- ``ube encode`` (read, encode, write, MANIFEST) with 1 and 2 workers vs the
  single-thread kernel rate (``Tokenizer.encode_utf8_batch`` on the same text),
  wall clock and CPU time of the process and its workers; shards checked equal.

Times are CPU seconds of this process (``time.process_time``) for the
in-process rows, so that other users of a shared machine count less; the
threads and end-to-end rows give wall clock and CPU time side by side.  MB = 10**6 bytes
of UTF-8 text.
"""
import argparse
import base64
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the repository (a built, not installed, checkout)

import numpy as np  # noqa: E402
import regex  # noqa: E402
from _record import peer_versions, write_record  # noqa: E402

from ube_stream import Tokenizer, pretokenizer, train  # noqa: E402


def load_corpus(path, mb):
    texts, size = [], 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            texts.append(text)
            size += len(text.encode("utf-8"))
            if size >= mb * 1e6:
                break
    return texts, size


def cl100k_ranks():
    """The real cl100k ranks bpe-openai ships, through ube-stream's rank-file reader."""
    from ube_stream.tokenizer.pretrained import find_tiktoken_file, load_tiktoken_ranks

    return load_tiktoken_ranks(find_tiktoken_file("cl100k_base"))


RECORDED = []   # [section, row, MB/s, CPU s, ratio]: every table printed, for the record


class Table:
    """Rows timed round-robin: ``add(group, name, fn, nbytes)``, then ``run(repeat)``."""

    def __init__(self):
        self.rows = []

    def add(self, group, name, fn, nbytes, base=None):
        self.rows.append({"group": group, "name": name, "fn": fn, "bytes": nbytes, "base": base, "times": []})

    def run(self, repeat):
        for _ in range(repeat):
            for row in self.rows:
                start = time.process_time()
                row["fn"]()
                row["times"].append(time.process_time() - start)

    def print(self):
        by_name = {(r["group"], r["name"]): r for r in self.rows}
        group = None
        print("| row | MB/s | ratio |\n|---|---:|---:|")
        for r in self.rows:
            if r["group"] != group:
                group = r["group"]
                print(f"| **{group}** | | |")
            rate = r["bytes"] / statistics.median(r["times"]) / 1e6
            ratio = ""
            if r["base"]:
                base = by_name[(r["group"], r["base"])]
                ratio = f"{statistics.median(base['times']) / statistics.median(r['times']):.2f}x {r['base']}"
            print(f"| {r['name']} | {rate:,.0f} | {ratio} |")
            RECORDED.append([f"calls: {group} (MB/s of CPU time)", r["name"], rate, None, ratio or None])


def pretokenize_rows(table, texts, size):
    big = "".join(texts)
    for name in ("gpt2", "cl100k", "o200k"):
        compiled = regex.compile(pretokenizer.PATTERNS[name])
        assert pretokenizer.pretokenize(big, name) == compiled.findall(big)
        group = f"pretokenize {name}"
        table.add(group, "regex.findall, one string", lambda c=compiled: c.findall(big), size)
        table.add(group, "pretokenize, one string", lambda n=name: pretokenizer.pretokenize(big, n), size,
                  base="regex.findall, one string")
        table.add(group, "regex.findall, per document", lambda c=compiled: [c.findall(t) for t in texts], size)
        table.add(group, "pretokenize, per document",
                  lambda n=name: [pretokenizer.pretokenize(t, n) for t in texts], size,
                  base="regex.findall, per document")


def chunk_bounds_rows(table, texts, size, label):
    encoded = [t.encode("utf-8") for t in texts]
    data = np.frombuffer(b"".join(encoded), np.uint8)
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    views = [data[offsets[d]:offsets[d + 1]] for d in range(len(encoded))]
    for name in ("gpt2", "cl100k"):
        group = f"chunk bounds {name}, {label}"
        table.add(group, "chunk_bounds per document",
                  lambda n=name: [pretokenizer.chunk_bounds(v, n) for v in views], size)
        table.add(group, "chunk_bounds_batch", lambda n=name: pretokenizer.chunk_bounds_batch(data, offsets, n),
                  size, base="chunk_bounds per document")


def decode_rows(table, texts, size):
    import tiktoken

    ranks = cl100k_ranks()
    tok = Tokenizer.from_tiktoken(ranks, "cl100k")
    enc = tiktoken.Encoding("cl100k_ranks", pat_str=pretokenizer.CL100K_PATTERN, mergeable_ranks=ranks,
                            special_tokens={})
    text = "".join(texts)
    ids = enc.encode_ordinary(text)
    array = np.asarray(ids, np.uint32)
    assert tok.decode(array) == text and tok.decode_bytes(ids) == text.encode("utf-8")
    group = "decode, cl100k ranks"
    table.add(group, "tiktoken decode (list -> str)", lambda: enc.decode(ids), size)
    table.add(group, "tiktoken decode_bytes (list -> bytes)", lambda: enc.decode_bytes(ids), size)
    table.add(group, "ube-stream decode (array -> str)", lambda: tok.decode(array), size,
              base="tiktoken decode (list -> str)")
    table.add(group, "ube-stream decode (list -> str)", lambda: tok.decode(ids), size,
              base="tiktoken decode (list -> str)")
    table.add(group, "ube-stream decode_bytes (array -> bytes)", lambda: tok.decode_bytes(array), size,
              base="tiktoken decode_bytes (list -> bytes)")
    table.add(group, "ube-stream decode_bytes (list -> bytes)", lambda: tok.decode_bytes(ids), size,
              base="tiktoken decode_bytes (list -> bytes)")
    try:  # gigatoken reads a plain .tiktoken file; its decode returns bytes
        import gigatoken

        with tempfile.TemporaryDirectory() as tmp:
            rank_file = os.path.join(tmp, "cl100k_base.tiktoken")
            with open(rank_file, "wb") as f:
                f.writelines(base64.b64encode(t) + b" %d\n" % r for t, r in ranks.items())
            giga = gigatoken.Tokenizer.from_tiktoken(rank_file, "cl100k")
        assert giga.decode(ids) == text.encode("utf-8")
        table.add(group, "gigatoken decode (list -> bytes)", lambda: giga.decode(ids), size)
        table.add(group, "gigatoken decode (array -> bytes)", lambda: giga.decode(array), size)
    except Exception as exc:  # noqa: BLE001 - a missing competitor is reported, not fatal
        print(f"gigatoken decode rows skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
    return tok


def ube_vs_utf8_rows(table, texts, size, train_texts, vocab):
    toks = {s: train(iter(train_texts), vocab_size=vocab + (256 if s == "ube" else 0), substrate=s,
                     workers=1, show_progress=False) for s in ("utf8", "ube")}
    text = "".join(texts)
    group = f"ube vs utf8 decode (vocab {vocab}, trained on the same text)"
    for substrate, tok in toks.items():
        array = tok.encode_ordinary(text)
        assert tok.decode(array) == text
        table.add(group, f"{substrate} decode (array -> str)", lambda t=tok, a=array: t.decode(a), size,
                  base=None if substrate == "utf8" else "utf8 decode (array -> str)")
        table.add(group, f"{substrate} decode_bytes (array -> bytes)", lambda t=tok, a=array: t.decode_bytes(a),
                  size, base=None if substrate == "utf8" else "utf8 decode_bytes (array -> bytes)")
        if substrate == "utf8":
            try:
                from tokenizers import Tokenizer as HFTokenizer

                with tempfile.TemporaryDirectory() as tmp:
                    hf = HFTokenizer.from_file(tok.export_hf(os.path.join(tmp, "tokenizer.json")))
                ids = array.tolist()
                assert hf.decode(ids) == text
                table.add(group, "HF tokenizers decode (list -> str)", lambda h=hf, i=ids: h.decode(i), size)
            except Exception as exc:  # noqa: BLE001
                print(f"HF decode row skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
    return toks["utf8"]


def jsonl_rows(table, path, mb):
    from ube_stream.readers import iter_batches

    with open(path, "rb") as f:
        lines = []
        size = 0
        for line in f:
            lines.append(line)
            size += len(line)
            if size >= mb * 1e6:
                break
    with tempfile.NamedTemporaryFile("wb", suffix=".jsonl", delete=False) as out:
        out.write(b"".join(lines))
        sample = out.name

    def loads():
        return [json.loads(line)["text"].encode("utf-8") for line in lines]

    def reader():
        return [batch.utf8() for batch in iter_batches(sample, column="text")]

    expected = b"".join(loads())
    assert b"".join(data.tobytes() for data, _ in reader()) == expected
    group = "JSON Lines reader (UTF-8 text out)"
    table.add(group, "json.loads per line + str.encode", loads, len(expected))
    table.add(group, "iter_batches + TextBatch.utf8()", reader, len(expected),
              base="json.loads per line + str.encode")
    return sample


def batch_of(texts):
    encoded = [t.encode("utf-8") for t in texts]
    data = np.frombuffer(b"".join(encoded), np.uint8)
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    return data, offsets


def threads_rows(tok, texts, size, repeat):
    """``encode_utf8_batch(num_threads=1|2)`` on one batch: wall and CPU time
    (all threads), interleaved, medians; ids checked equal first."""
    data, offsets = batch_of(texts)
    one = tok.encode_utf8_batch(data, offsets, num_threads=1)
    two = tok.encode_utf8_batch(data, offsets, num_threads=2)   # also warms the second thread's cache slot
    assert np.array_equal(one[0], two[0]) and np.array_equal(one[1], two[1])
    times = {1: ([], []), 2: ([], [])}
    for _ in range(repeat):
        for k, (walls, cpus) in times.items():
            wall, cpu = time.perf_counter(), time.process_time()
            tok.encode_utf8_batch(data, offsets, num_threads=k)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
    print(f"\n**encode_utf8_batch threads** ({size / 1e6:.1f} MB, {len(texts)} documents, medians of {repeat} "
          f"interleaved rounds):\n")
    print("| threads | MB/s (wall) | wall speed-up | CPU s | CPU s vs 1 thread |\n|---|---:|---:|---:|---:|")
    w1, c1 = statistics.median(times[1][0]), statistics.median(times[1][1])
    for k, (walls, cpus) in times.items():
        w, c = statistics.median(walls), statistics.median(cpus)
        print(f"| {k} | {size / w / 1e6:,.0f} | {w1 / w:.2f}x | {c:.2f} | {c / c1:.2f}x |")
        RECORDED.append(["encode_utf8_batch threads (MB/s wall)", f"{k} thread(s)", size / w / 1e6, c,
                         f"{w1 / w:.2f}x wall"])


def end_to_end(path, mb, tok_path, tok, repeat, compare=None):
    """`ube encode` with 1 and 2 workers vs the single-thread kernel rate, wall
    clock and CPU time (the `ube` process and its workers), interleaved, medians.
    ``compare``: another checkout (built) whose `ube encode` runs in the same rounds."""
    import resource

    from ube_stream.shards import index_format as fmt

    texts, size = load_corpus(path, mb)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}   # as installed: .pyc cached
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.jsonl")
        with open(corpus, "w", encoding="utf-8") as f:
            for text in texts:
                f.write(json.dumps({"text": text}) + "\n")
        data, offsets = batch_of(texts)
        tok.encode_utf8_batch(data, offsets, num_threads=1)  # warm the caches as a worker would

        def kernel():
            tok.encode_utf8_batch(data, offsets, num_threads=1)

        def kernel_fresh():   # what a worker meets: the tokenizer loaded, its cache empty
            Tokenizer.load(tok_path).encode_utf8_batch(data, offsets, num_threads=1)

        small = os.path.join(tmp, "small.jsonl")   # 20 documents: the start-up cost of a run
        with open(corpus, encoding="utf-8") as f, open(small, "w", encoding="utf-8") as g:
            g.writelines(next(f) for _ in range(min(20, len(texts))))

        def encode(workers, source=corpus, repo=os.path.dirname(HERE)):
            out = os.path.join(tmp, f"shards{workers}" + ("" if source == corpus else "-small")
                               + ("" if repo == os.path.dirname(HERE) else "-other"))
            shutil.rmtree(out, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "ube_stream", "encode", source, "--tokenizer", tok_path,
                            "-o", out, "--workers", str(workers), "-q"], check=True, env=env,
                           stdout=subprocess.DEVNULL, cwd=repo)

        def children_cpu():
            r = resource.getrusage(resource.RUSAGE_CHILDREN)
            return r.ru_utime + r.ru_stime

        encode(1)   # writes the .pyc files once, as an install would
        runs = {"kernel": kernel, "fresh": kernel_fresh, 1: lambda: encode(1), 2: lambda: encode(2), "start": lambda: encode(1, small)}
        if compare:
            encode(1, repo=compare)
            runs.update({"other 1": lambda: encode(1, repo=compare), "other 2": lambda: encode(2, repo=compare),
                         "other start": lambda: encode(1, small, repo=compare)})
        times = {name: ([], []) for name in runs}
        for _ in range(repeat):
            for name, fn in runs.items():
                wall, cpu, child = time.perf_counter(), time.process_time(), children_cpu()
                fn()
                times[name][0].append(time.perf_counter() - wall)
                times[name][1].append(time.process_time() - cpu + children_cpu() - child)
        def files(workers):
            top = os.path.join(tmp, f"shards{workers}")
            names = [fmt.MANIFEST_NAME] + [os.path.join("shards", n) for n in sorted(os.listdir(f"{top}/shards"))]
            return {n: open(os.path.join(top, n), "rb").read() for n in names}

        assert files(1) == files(2), "the shard directories of 1 and 2 workers differ"
        kw, kc = (statistics.median(v) for v in times["kernel"])
        print(f"\n**End to end** ({size / 1e6:.1f} MB of JSON Lines text, {len(texts)} documents, tokenizer "
              f"{os.path.basename(tok_path)}; medians of {repeat} interleaved rounds; CPU = the process and "
              f"its workers):\n")
        print("| run | MB/s (wall) | wall vs kernel, per worker | CPU s | MB per CPU s | vs kernel |")
        print("|---|---:|---:|---:|---:|---:|")
        print(f"| kernel, encode_utf8_batch, 1 thread | {size / kw / 1e6:,.0f} | 1.00x | {kc:.2f} | "
              f"{size / kc / 1e6:,.0f} | 1.00x |")
        section = f"end to end, {size / 1e6:.1f} MB (MB/s wall)"
        RECORDED.append([section, "kernel, encode_utf8_batch, 1 thread", size / kw / 1e6, kc, "1.00x kernel CPU"])
        fw, fc = (statistics.median(v) for v in times["fresh"])
        print(f"| kernel, a freshly loaded tokenizer (load + cold cache), 1 thread | {size / fw / 1e6:,.0f} | "
              f"{kw / fw:.2f}x | {fc:.2f} | {size / fc / 1e6:,.0f} | {kc / fc:.2f}x |")
        RECORDED.append([section, "kernel, freshly loaded tokenizer", size / fw / 1e6, fc, f"{kc / fc:.2f}x kernel CPU"])
        for workers in (1, 2):
            w, c = (statistics.median(v) for v in times[workers])
            print(f"| ube encode --workers {workers} | {size / w / 1e6:,.0f} | {kw / w / workers:.2f}x | {c:.2f} | "
                  f"{size / c / 1e6:,.0f} | {kc / c:.2f}x |")
            RECORDED.append([section, f"ube encode --workers {workers}", size / w / 1e6, c,
                             f"{kc / c:.2f}x kernel CPU"])
        sw, sc = (statistics.median(v) for v in times["start"])
        print(f"| ube encode --workers 1, 20 documents (start-up) | | | {sc:.2f} (wall {sw:.2f} s) | | |")
        RECORDED.append([section, "ube encode --workers 1, 20 documents (start-up)", None, sc, f"wall {sw:.2f} s"])
        if compare:
            for workers in (1, 2):
                w, c = (statistics.median(v) for v in times[f"other {workers}"])
                print(f"| {compare}: ube encode --workers {workers} | {size / w / 1e6:,.0f} | {kw / w / workers:.2f}x | "
                      f"{c:.2f} | {size / c / 1e6:,.0f} | {kc / c:.2f}x |")
            ow, oc = (statistics.median(v) for v in times["other start"])
            print(f"| {compare}: 20 documents (start-up) | | | {oc:.2f} (wall {ow:.2f} s) | | |")
            for workers in (1, 2):
                w, c = (statistics.median(v) for v in times[f"other {workers}"])
                RECORDED.append([section, f"{compare}: ube encode --workers {workers}", size / w / 1e6, c,
                                 f"{kc / c:.2f}x kernel CPU"])
            print(f"\n{compare}, 2 workers vs 1, wall: "
                  f"{statistics.median(times['other 1'][0]) / statistics.median(times['other 2'][0]):.2f}x")
        c1 = statistics.median(times[1][1])
        print(f"\n2 workers vs 1, wall: {statistics.median(times[1][0]) / statistics.median(times[2][0]):.2f}x; "
              f"1 worker without its start-up: {size / (c1 - sc) / 1e6:,.0f} MB per CPU s, "
              f"{kc / (c1 - sc):.2f}x the kernel")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="?", default=os.path.join(HERE, "data", "mixed.jsonl"))
    parser.add_argument("--mb", type=float, default=10.0, help="MB of text for the in-process rows")
    parser.add_argument("--decode-mb", type=float, default=4.0, help="MB of text for the decode rows")
    parser.add_argument("--e2e-mb", type=float, default=50.0, help="MB of text for `ube encode` (0: skip)")
    parser.add_argument("--threads-mb", type=float, default=20.0, help="MB for the num_threads rows (0: skip)")
    parser.add_argument("--train-mb", type=float, default=2.0)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compare-repo", metavar="PATH",
                        help="another built checkout whose `ube encode` joins the end-to-end rounds")
    parser.add_argument("--only-e2e", action="store_true",
                        help="only the end-to-end rows (the utf8 tokenizer trained on --train-mb as usual)")
    args = parser.parse_args(argv)
    if not os.path.exists(args.corpus):
        sys.exit(f"{args.corpus}: no corpus; build one with benchmarks/make_corpus.py")
    if args.only_e2e:
        train_texts, _ = load_corpus(args.corpus, args.train_mb)
        utf8_tok = train(iter(train_texts), vocab_size=args.vocab, substrate="utf8", workers=1, show_progress=False)
        with tempfile.TemporaryDirectory() as tmp:
            tok_path = os.path.join(tmp, "utf8.json")
            utf8_tok.save(tok_path)
            print(f"load average before: {os.getloadavg()}")
            end_to_end(args.corpus, args.e2e_mb, tok_path, utf8_tok, args.repeat, args.compare_repo)
        print(f"load average at the end: {os.getloadavg()}")
        record(args, argv)
        return
    texts, size = load_corpus(args.corpus, args.mb)
    dec_texts, dec_size = load_corpus(args.corpus, args.decode_mb)
    train_texts, _ = load_corpus(args.corpus, args.train_mb)
    table = Table()
    pretokenize_rows(table, texts, size)
    chunk_bounds_rows(table, texts, size, "mixed")
    english = [t for t in texts if t.isascii()] or texts
    chunk_bounds_rows(table, english, sum(len(t) for t in english), "ASCII documents")
    decode_rows(table, dec_texts, dec_size)
    utf8_tok = ube_vs_utf8_rows(table, dec_texts, dec_size, train_texts, args.vocab)
    sample = jsonl_rows(table, args.corpus, args.mb)
    try:
        table.run(args.repeat)
    finally:
        os.unlink(sample)
    print(f"{size / 1e6:.1f} MB of {os.path.basename(args.corpus)} ({len(texts)} documents), decode on "
          f"{dec_size / 1e6:.1f} MB; CPU-time medians of {args.repeat} interleaved rounds\n")
    table.print()
    print(f"\nload average before the end-to-end rows: {os.getloadavg()}")
    if args.threads_mb > 0:
        threads_rows(utf8_tok, *load_corpus(args.corpus, args.threads_mb), args.repeat)
    if args.e2e_mb > 0:
        with tempfile.TemporaryDirectory() as tmp:
            tok_path = os.path.join(tmp, "utf8.json")
            utf8_tok.save(tok_path)
            end_to_end(args.corpus, args.e2e_mb, tok_path, utf8_tok, args.repeat, args.compare_repo)
    print(f"load average at the end: {os.getloadavg()}")
    record(args, argv)


def record(args, argv):
    write_record("side_by_side_calls", title="The public calls side by side: pretokenize, chunk_bounds_batch, "
                 "decode, the JSON Lines reader, ube encode", columns=["section", "row", "MB/s", "CPU s", "ratio"],
                 rows=RECORDED, peers=peer_versions("regex", "tiktoken", "gigatoken", "tokenizers"), argv=argv,
                 notes=[f"{os.path.basename(args.corpus)}; medians of {args.repeat} interleaved rounds; results "
                        "checked equal before timing"])


if __name__ == "__main__":
    main()
