"""The peers' side of `side_by_side_e2e.py`: run in the peers' own Python
(a virtual environment holding `datatrove`, `gigatoken`, `fastokens`; never
ube-stream), one subcommand per job:

    python e2e_peers.py choose TOKENIZER.json SAMPLE.jsonl [--gigatoken-tokenizer SAME_IN_GPT2_LAYOUT.json]
        check gigatoken's and fastokens' ids equal HF `tokenizers`' (on TOKENIZER.json) on the
        sample, time each (CPU seconds, one thread, a fresh instance per pass,
        interleaved, median of 3)
        and print {"fastest": NAME, "mb_per_cpu_s": {...}} as JSON
    python e2e_peers.py plain --lib NAME --tokenizer T.json --eos-id N --workers W -o DIR FILE...
        the plain script: W processes, one input file at a time each; read
        JSON Lines, encode the `text` field in batches of 1,000 documents,
        append EOS, write DIR/<file>.tokens (uint32) and DIR/<file>.lengths
        (uint64 tokens per document, EOS included), in input order
    python e2e_peers.py datatrove --tokenizer T.json --eos-token TOK --workers W -o DIR INPUT_DIR
        datatrove's JsonlReader -> DocumentTokenizer pipeline on the
        LocalPipelineExecutor, one task per input file, documents not shuffled
"""
import argparse
import glob
import json
import os
import sys
import time

BATCH = 1000


def load(lib, path):
    if lib == "gigatoken":
        import gigatoken

        return gigatoken.Tokenizer(path)
    if lib == "fastokens":
        import fastokens

        return fastokens.Tokenizer.from_file(path)
    if lib == "tokenizers":
        import tokenizers

        return tokenizers.Tokenizer.from_file(path)
    raise SystemExit(f"unknown library {lib!r}")


def encode_flat(lib, tok, texts):
    """(ids uint32, tokens per text int64) of a batch, no special tokens added."""
    import numpy as np

    if lib == "gigatoken":
        import awkward as ak

        arr = tok.encode_batch(texts, parallel=False)
        return ak.to_numpy(ak.flatten(arr)).astype(np.uint32, copy=False), ak.to_numpy(ak.num(arr)).astype(np.int64)
    if lib == "fastokens":
        ids, offsets = tok.encode_batch_flat(texts)
        return np.frombuffer(ids, np.uint32), np.diff(np.frombuffer(offsets, np.uint64)).astype(np.int64)
    encs = tok.encode_batch(texts, add_special_tokens=False)
    return (np.fromiter((i for e in encs for i in e.ids), np.uint32),
            np.array([len(e.ids) for e in encs], np.int64))


def read_texts(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def choose(args):
    texts = read_texts(args.sample)
    size = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    ref = load("tokenizers", args.tokenizer)
    want_ids, want_lens = encode_flat("tokenizers", ref, texts)
    rates, checked = {}, {}
    libs = ["gigatoken", "fastokens"]
    toks = {}
    for lib in libs:
        try:
            toks[lib] = load(lib, args.gigatoken_tokenizer if lib == "gigatoken" and args.gigatoken_tokenizer
                             else args.tokenizer)
            ids, lens = encode_flat(lib, toks[lib], texts)
            checked[lib] = bool((ids.shape == want_ids.shape) and (ids == want_ids).all() and (lens == want_lens).all())
        except Exception as exc:   # a peer that cannot load the tokenizer is reported, not fatal
            checked[lib] = f"{type(exc).__name__}: {exc}"
    times = {lib: [] for lib in toks}
    for _ in range(3):
        for lib in toks:   # a fresh instance each time: a cache warmed by the last pass would flatter it
            tok = load(lib, args.gigatoken_tokenizer if lib == "gigatoken" and args.gigatoken_tokenizer
                       else args.tokenizer)
            t = time.process_time()
            encode_flat(lib, tok, texts)
            times[lib].append(time.process_time() - t)
    for lib, ts in times.items():
        rates[lib] = round(size / sorted(ts)[1], 2)
    ok = [lib for lib in rates if checked.get(lib) is True]
    print(json.dumps({"fastest": max(ok, key=rates.get) if ok else None, "mb_per_cpu_s": rates,
                      "ids_equal_hf_tokenizers": checked, "sample_mb": round(size, 3)}))


_STATE = {}


def _plain_init(lib, path):
    _STATE["lib"], _STATE["tok"] = lib, load(lib, path)


def _plain_file(job):
    import numpy as np

    path, out, eos = job
    stem = os.path.join(out, os.path.basename(path))
    with open(path, encoding="utf-8") as f, open(stem + ".tokens", "wb") as tokens_out, \
            open(stem + ".lengths", "wb") as lengths_out:
        while True:
            texts = [json.loads(line)["text"] for _, line in zip(range(BATCH), f)]
            if not texts:
                break
            ids, lens = encode_flat(_STATE["lib"], _STATE["tok"], texts)
            lens = lens + 1
            ends = np.cumsum(lens)
            buf = np.empty(int(ends[-1]), np.uint32)
            keep = np.ones(len(buf), bool)
            keep[ends - 1] = False
            buf[keep] = ids
            buf[ends - 1] = eos
            tokens_out.write(buf.tobytes())
            lengths_out.write(lens.astype(np.uint64).tobytes())
    return path


def plain(args):
    import multiprocessing

    os.makedirs(args.output, exist_ok=True)
    jobs = [(path, args.output, args.eos_id) for path in args.files]
    if args.workers == 1:
        _plain_init(args.lib, args.tokenizer)
        for job in jobs:
            _plain_file(job)
        return
    ctx = multiprocessing.get_context("spawn")   # gigatoken warns against pools forked from a threaded parent
    with ctx.Pool(args.workers, initializer=_plain_init, initargs=(args.lib, args.tokenizer)) as pool:
        for _ in pool.imap(_plain_file, jobs):
            pass


def datatrove(args):
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.tokens import DocumentTokenizer

    files = sorted(glob.glob(os.path.join(args.input_dir, "*.jsonl")))
    if not files:
        raise SystemExit(f"no *.jsonl under {args.input_dir}")
    executor = LocalPipelineExecutor(
        pipeline=[
            JsonlReader(args.input_dir, glob_pattern="*.jsonl", text_key="text", id_key="id"),
            DocumentTokenizer(output_folder=os.path.join(args.output, "tokens"),
                              tokenizer_name_or_path=args.tokenizer, eos_token=args.eos_token,
                              shuffle_documents=False, save_filename="docs"),
        ],
        tasks=len(files), workers=args.workers, logging_dir=os.path.join(args.output, "logs"),
        skip_completed=False,
    )
    executor.run()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("choose")
    p.add_argument("tokenizer")
    p.add_argument("sample")
    p.add_argument("--gigatoken-tokenizer", help="an equivalent tokenizer.json in a layout gigatoken loads")
    p = sub.add_parser("plain")
    p.add_argument("--lib", required=True)
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--eos-id", type=int, required=True)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("-o", "--output", required=True)
    p.add_argument("files", nargs="+")
    p = sub.add_parser("datatrove")
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--eos-token", required=True)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("-o", "--output", required=True)
    p.add_argument("input_dir")
    args = parser.parse_args(argv)
    {"choose": choose, "plain": plain, "datatrove": datatrove}[args.command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
