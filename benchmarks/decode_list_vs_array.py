"""Decode from a list vs from a ``uint32`` array (not a timed test).

    python benchmarks/decode_list_vs_array.py [--repo PATH] [--mb 4] [--repeat 15]

cl100k_base's real ranks (``bpe-openai``), about ``--mb`` MB of the real text in
tests/data/docs_sample.jsonl.zst (repeated) encoded once; ``decode`` and ``decode_bytes`` from the array and from
``array.tolist()``, plus ``ids_from_sequence`` alone (the list's general
conversion), timed round-robin (each round runs every row once; medians of CPU
time, ``time.process_time``).  Then the cost of one short call (per-document
decoding): ``decode_bytes`` of the first 1, 10, 100 and 1000 ids as a list and
as an array, and tiktoken's ``decode_bytes`` of the list (the best of
``--repeat`` timings of many calls).  ``--repo`` picks the checkout whose build
is imported, to compare branches in one command line.
"""
import argparse
import os
import statistics
import sys
import time

from _record import write_record  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def cl100k_ranks():
    """The real cl100k ranks bpe-openai ships, through ube-stream's rank-file reader
    (imported after --repo is on sys.path)."""
    from ube_stream.tokenizer.pretrained import find_tiktoken_file, load_tiktoken_ranks

    return load_tiktoken_ranks(find_tiktoken_file("cl100k_base"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", default=os.path.dirname(HERE))
    parser.add_argument("--mb", type=float, default=4.0)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)
    sys.path.insert(0, args.repo)
    import numpy as np

    from ube_stream import Tokenizer, _decode

    sys.path.insert(1, os.path.join(os.path.dirname(HERE), "tests"))
    from _helpers import read_jsonl_zst

    unit = "\n".join(r["text"] for r in read_jsonl_zst("docs_sample.jsonl.zst"))  # real multilingual text
    text = unit * max(1, round(args.mb * 1e6 / len(unit.encode("utf-8"))))
    size = len(text.encode("utf-8"))
    tok = Tokenizer.from_tiktoken(cl100k_ranks(), "cl100k")
    array = tok.encode_ordinary(text)
    ids = array.tolist()
    out = np.empty(len(ids), np.uint32)
    assert tok.decode(ids) == tok.decode(array) == text
    rows = {"decode (array -> str)": lambda: tok.decode(array), "decode (list -> str)": lambda: tok.decode(ids),
            "decode_bytes (array -> bytes)": lambda: tok.decode_bytes(array),
            "decode_bytes (list -> bytes)": lambda: tok.decode_bytes(ids),
            "ids_from_sequence (list -> uint32)": lambda: _decode.ids_from_sequence(ids, out)}
    times = {name: [] for name in rows}
    for _ in range(args.repeat):
        for name, fn in rows.items():
            started = time.process_time()
            fn()
            times[name].append(time.process_time() - started)
    med = {name: statistics.median(t) for name, t in times.items()}
    print(f"{os.path.dirname(_decode.__file__)}: {len(ids):,} ids, {size / 1e6:.1f} MB of text; medians of {args.repeat} rounds")
    for name, t in med.items():
        print(f"  {name:<36} {t * 1e3:7.2f} ms  {size / 1e6 / t:7.0f} MB/s")
    for what in ("decode", "decode_bytes"):
        arr_t, list_t = med[f"{what} (array -> {'str' if what == 'decode' else 'bytes'})"], \
            med[f"{what} (list -> {'str' if what == 'decode' else 'bytes'})"]
        print(f"  {what}: list speed / array speed = {arr_t / list_t:.2f}")
    short = short_calls(tok, ids, args.repeat)
    sys.path.insert(0, HERE)
    write_record("decode_list_vs_array", title="Decode from a list vs from a uint32 array (cl100k, real text)",
                 columns=["case", "ms (median CPU)", "MB/s", "us per call (best)"],
                 rows=[(name, round(t * 1e3, 2), round(size / 1e6 / t), None) for name, t in med.items()]
                 + [(f"one call, {n} ids, {k}", None, None, round(v, 2)) for n, best in short.items()
                    for k, v in best.items()],
                 notes=[f"{len(ids):,} ids, {size / 1e6:.1f} MB of text (tests/data/docs_sample.jsonl.zst repeated); "
                        f"medians of {args.repeat} round-robin rounds; one-call rows: best of {args.repeat}"])


def short_calls(tok, ids, repeat):
    """Microseconds per ``decode_bytes`` call on a short list / array (and tiktoken's):
    ``{n_ids: {"list": us, "array": us, "tiktoken list": us}}``."""
    import timeit

    import numpy as np

    try:
        import tiktoken

        from ube_stream.pretokenizer import CL100K_PATTERN

        enc = tiktoken.Encoding("cl100k", pat_str=CL100K_PATTERN, mergeable_ranks=cl100k_ranks(), special_tokens={})
    except ImportError:
        enc = None
    print("  one short call, us (best of %d):" % repeat)
    results = {}
    for n in (1, 10, 100, 1000):
        short = ids[:n]
        arr = np.asarray(short, np.uint32)
        assert tok.decode_bytes(short) == tok.decode_bytes(arr)
        calls = {"list": lambda: tok.decode_bytes(short), "array": lambda: tok.decode_bytes(arr)}
        if enc is not None:
            assert enc.decode_bytes(short) == tok.decode_bytes(short)
            calls["tiktoken list"] = lambda: enc.decode_bytes(short)
        number = max(200, 20_000 // n)
        best = {k: min(timeit.repeat(f, number=number, repeat=repeat)) / number * 1e6 for k, f in calls.items()}
        print(f"    {n:>5} ids: " + "  ".join(f"{k} {v:6.2f}" for k, v in best.items()))
        results[n] = best
    return results


if __name__ == "__main__":
    main()
