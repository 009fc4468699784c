"""Side by side, one thread: tiktoken's patterns (cl100k, llama3, o200k) in ube-stream vs the reference.

    python benchmarks/side_by_side_tiktoken_patterns.py [--repeat 5] [--skip-encode]

Split: ``chunk_bounds(data, name)`` with the compiled state machine, and
through the ``regex`` path (how these patterns ran before the kernels:
``kernel_split`` patched to answer None), vs ``regex.findall(pattern, text)``
on the mixed corpus of ``bench_pretokenize.py`` (a few MB: running text in 26
languages, parallel items in hundreds of languages, Python source), chunks
checked equal.

Encode: ``Tokenizer.from_tiktoken`` with the real cl100k_base / o200k_base
ranks shipped by ``bpe-openai``, ``encode_batch(num_threads=1)`` with the split
in the encoder kernel and (before) with chunk ends from the ``regex`` path, vs
tiktoken's own ``Encoding`` on the same ranks and pattern: ``encode_ordinary``
in a loop and ``encode_ordinary_batch(num_threads=1)``; ids checked identical.
MB/s of UTF-8 input, best of ``--repeat`` runs (our chunk cache stays warm
across runs).
"""
from __future__ import annotations

import argparse
import contextlib
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
import regex  # noqa: E402
from _record import peer_versions, write_record  # noqa: E402
from bench_pretokenize import load_corpus  # noqa: E402

from ube_stream import pretokenizer  # noqa: E402
from ube_stream.pretokenizer import chunk_bounds  # noqa: E402

PATTERN_TEXT = {
    "cl100k": pretokenizer.CL100K_PATTERN,
    "llama3": pretokenizer.LLAMA3_PATTERN,
    "o200k": pretokenizer.O200K_PATTERN,
}
KERNEL_SPLIT = pretokenizer.kernel_split


@contextlib.contextmanager
def regex_split():
    """The state before the cl100k/llama3/o200k kernels: only GPT-2 has one."""
    pretokenizer.kernel_split = lambda p: pretokenizer.SPLIT_GPT2 if KERNEL_SPLIT(p) == 0 else None
    try:
        yield
    finally:
        pretokenizer.kernel_split = KERNEL_SPLIT


def best(fn, repeat):
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def read_ranks(name: str) -> dict:
    """The real ranks bpe-openai ships, through ube-stream's rank-file reader."""
    from ube_stream.tokenizer.pretrained import find_tiktoken_file, load_tiktoken_ranks

    return load_tiktoken_ranks(find_tiktoken_file(name))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-encode", action="store_true")
    args = parser.parse_args(argv)

    documents, notes = load_corpus()
    print("\n".join(notes))
    text = "\n".join(documents)
    data = text.encode("utf-8")
    mb = len(data) / 1e6
    print(f"corpus: {mb:.1f} MB UTF-8, {len(text):,} characters, {len(documents):,} documents")

    rows = []
    print("\nsplit, 1 thread (MB/s of UTF-8 input)")
    for name, pattern in PATTERN_TEXT.items():
        compiled = regex.compile(pattern)
        seconds_ours, ends = best(lambda: chunk_bounds(data, pattern), args.repeat)
        with regex_split():
            seconds_before, before = best(lambda: chunk_bounds(data, pattern), max(2, args.repeat // 2))
        seconds_regex, chunks = best(lambda: compiled.findall(text), max(2, args.repeat // 2))
        expected = np.cumsum([len(c.encode("utf-8")) for c in chunks])
        assert np.array_equal(ends, expected), f"{name}: chunks differ from regex.findall"
        assert np.array_equal(before, expected)
        print(f"  {name:<7} chunk_bounds kernel {mb / seconds_ours:7.1f}   regex path (before) "
              f"{mb / seconds_before:5.1f}   regex.findall {mb / seconds_regex:5.1f}   "
              f"kernel/findall x{seconds_regex / seconds_ours:5.1f}   ({len(chunks):,} chunks)")
        rows.append([f"split {name}", mb / seconds_ours, mb / seconds_before, mb / seconds_regex,
                     seconds_regex / seconds_ours])

    def record():
        write_record("side_by_side_tiktoken_patterns", title="tiktoken patterns: our split kernel and encoder vs "
                     "the regex path, regex.findall and tiktoken (one thread, MB/s)",
                     columns=["what", "ours (MB/s)", "ours, regex split (MB/s)", "peer (MB/s)", "ours / peer (x)"],
                     rows=rows, peers=peer_versions("regex", "tiktoken"), argv=argv,
                     notes=[*notes, f"{mb:.1f} MB, {len(documents):,} documents; best of {args.repeat}; peer: "
                            "regex.findall for split rows, tiktoken's faster call for encode rows"])

    if args.skip_encode:
        record()
        return
    import tiktoken

    from ube_stream import Tokenizer

    print("\nencode, 1 thread (MB/s of UTF-8 input)")
    for name, pattern_name in (("cl100k_base", "cl100k"), ("o200k_base", "o200k")):
        ranks = read_ranks(name)
        started = time.perf_counter()
        tok = Tokenizer.from_tiktoken(ranks, pattern_name)
        built = time.perf_counter() - started
        enc = tiktoken.Encoding(name, pat_str=PATTERN_TEXT[pattern_name], mergeable_ranks=ranks,
                                special_tokens={})
        seconds_ours, ours = best(lambda: tok.encode_batch(documents, num_threads=1), args.repeat)
        assert tok._kernel()[0].split == KERNEL_SPLIT(pattern_name)
        with regex_split():
            tok.__dict__.pop("_kernel_state", None)  # an encoder without the split
            seconds_before, before = best(lambda: tok.encode_batch(documents, num_threads=1), args.repeat)
            assert tok._kernel()[0].split == 0
        tok.__dict__.pop("_kernel_state", None)
        seconds_loop, theirs = best(lambda: [enc.encode_ordinary(d) for d in documents], args.repeat)
        seconds_batch, _ = best(lambda: enc.encode_ordinary_batch(documents, num_threads=1), args.repeat)
        ours = [a.tolist() for a in ours]
        assert ours == theirs, f"{name}: ids differ from tiktoken"
        assert [a.tolist() for a in before] == theirs
        tik = mb / min(seconds_loop, seconds_batch)
        print(f"  {name:<12} ours: kernel split {mb / seconds_ours:6.1f}   regex split (before) "
              f"{mb / seconds_before:5.1f}   tiktoken: encode_ordinary {mb / seconds_loop:5.1f}   "
              f"encode_ordinary_batch {mb / seconds_batch:5.1f}   ours/tiktoken x{mb / seconds_ours / tik:4.2f} "
              f"(before x{mb / seconds_before / tik:4.2f})   ({sum(len(a) for a in ours):,} tokens; "
              f"from_tiktoken {built:.1f} s)")
        rows.append([f"encode {name}", mb / seconds_ours, mb / seconds_before, tik, mb / seconds_ours / tik])
    record()


if __name__ == "__main__":
    main()
