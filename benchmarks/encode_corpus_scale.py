"""What users meet: one pass of a large corpus in a fresh process, and small per-language sets.

    python benchmarks/encode_corpus_scale.py [--mb 300] [--side-mb 2] [--rounds 5]
    python benchmarks/encode_corpus_scale.py --mb 20 --side-mb 0.3 --rounds 1 --vocab 4000   # a quick check

Encoders (each loaded, then warmed on one tiny call, untimed: lazy set-up is not timed as
encoding): ube-stream (``Tokenizer.encode_ordinary_batch(num_threads=1)``), gigatoken
(``encode_batch(parallel=False)``) and fastokens (``encode_batch_flat``), one thread each
(``RAYON_NUM_THREADS=1``), figures in MB/s of UTF-8 input per CPU second (``time.process_time``).

Vocabularies: ``cl100k`` and ``o200k`` (the ranks ``bpe-openai`` ships: ours ``from_tiktoken``,
gigatoken ``from_tiktoken`` on the same file, fastokens our ``export_hf``), and a ``--vocab``
``ube`` tokenizer trained here on ``--train-mb`` MB of the corpus: ours encodes with it and with
its ``utf8`` twin (trained on the same text), gigatoken (ranks as a .tiktoken file,
``pretokenizer="gpt2"``) and fastokens (its ``export_hf``) with the twin.  Every encoder's ids
are checked identical to ours on the first documents of every corpus before any timing; one
that differs is left out and reported.

Headline (``one_pass``): ``--mb`` MB of mixed text, each encoder in a process of its own that
loads the vocabulary (load time reported apart) and reads the corpus from disk one batch of
``--batch-mb`` MB at a time (the corpus pages are not in its RSS), timed per batch: MB/s over
the first 10 MB, the steady state (everything after the first 10 MB, and the last quarter),
the whole pass, and the process's peak RSS.  The mixed corpus interleaves, by bytes, every
page of ``docs.jsonl.zst`` (running text, 26 languages), every item of
``parallel.jsonl.zst`` (400 languages, 200 items a document), every string of
``unicode_audit.jsonl.zst`` and, to fill the size, this Python's library ``.py`` files
(code); it reports how much is distinct and, when the sources run out, repeats them
(``repeated_mb``).  ``--rounds`` fresh processes per encoder, interleaved; medians.

Per-language sets (``sets``): ``english`` (docs in English and the ``en`` items), ``indic``
(items in Devanagari, Bengali, Tamil, Gurmukhi, Kannada, Oriya, Gujarati, Telugu, Malayalam,
Sinhala, 200 a document) and ``cjk`` (the ja/ko/zh pages and the Hans/Hant/Jpan/Kore items),
``--side-mb`` MB each: per round a fresh process and instance of each encoder (built untimed),
its first pass (``fresh``) and its second (``second``) timed, encoders interleaved; medians
of the rounds (a process per pass pair: fastokens keeps state across its instances in one
process, so a later instance's first pass was not cold).  Ratios: ours over the best of
gigatoken and fastokens.  The record
(``benchmarks/records/encode_corpus_scale/``, ``_record.py``) holds the table, with
the load at the start and the end; its ``data`` holds everything.
"""
import argparse
import base64
import glob
import json
import os
import resource
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # gigatoken's and fastokens' pools: one thread
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the repository (a built, not installed, checkout)
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
from _record import peer_versions, write_record  # noqa: E402
from side_by_side_encode import mb_of, rank_file, read_jsonl, take  # noqa: E402

CHECK_DOCS = 200
ENCODERS = ("ube-stream", "gigatoken", "fastokens")
INDIC = {"Deva", "Beng", "Taml", "Guru", "Knda", "Orya", "Gujr", "Telu", "Mlym", "Sinh"}


# --------------------------------------------------------------------------- corpora

def grouped(rows, keep, size=200):
    """Texts of ``rows`` passing ``keep``, joined ``size`` to a document."""
    block = []
    for row in rows:
        if keep(row):
            block.append(row["text"])
            if len(block) == size:
                yield "\n".join(block)
                block = []
    if block:
        yield "\n".join(block)


def code_files():
    root = sysconfig.get_paths()["stdlib"]
    for path in sorted(glob.glob(os.path.join(root, "**", "*.py"), recursive=True)):
        try:
            with open(path, encoding="utf-8") as f:
                yield f.read()
        except (UnicodeDecodeError, OSError):
            continue


def mixed_corpus(shared, mb):
    """``(texts, report)``: about ``mb`` MB interleaved by bytes from the sources (module doc)."""
    natural = {
        "docs": [r["text"] for r in read_jsonl(os.path.join(shared, "docs.jsonl.zst")) if r["text"]],
        "parallel": list(grouped(read_jsonl(os.path.join(shared, "parallel.jsonl.zst")), lambda r: bool(r["text"]))),
        "unicode": list(grouped(read_jsonl(os.path.join(shared, "unicode_audit.jsonl.zst")),
                                lambda r: bool(r.get("text")))),
    }
    sizes = {k: sum(len(t.encode()) for t in v) for k, v in natural.items()}
    need_code = max(mb * 1e6 - sum(sizes.values()), 0)
    code, code_bytes = [], 0
    for text in code_files():
        if code_bytes >= need_code:
            break
        if text:
            code.append(text)
            code_bytes += len(text.encode())
    sources = dict(natural, code=code)
    sizes["code"] = code_bytes
    # interleave by bytes: take next from the source furthest behind its share
    done = {k: 0 for k in sources}
    index = {k: 0 for k in sources}
    out, total, repeated = [], 0, 0
    distinct = sum(sizes.values())
    while total < mb * 1e6:
        live = [k for k in sources if sources[k]]
        k = min(live, key=lambda s: done[s] / sizes[s])
        text = sources[k][index[k] % len(sources[k])]
        if index[k] >= len(sources[k]):
            repeated += len(text.encode())
        index[k] += 1
        n = len(text.encode())
        done[k] += n
        total += n
        out.append(text)
    report = {"mb": total / 1e6, "distinct_mb": min(total, distinct) / 1e6, "repeated_mb": repeated / 1e6,
              "source_mb": {k: round(v / 1e6, 2) for k, v in done.items()}, "documents": len(out)}
    return out, report


def language_sets(shared, side_mb):
    docs = list(read_jsonl(os.path.join(shared, "docs.jsonl.zst")))
    parallel = os.path.join(shared, "parallel.jsonl.zst")

    def english():
        yield from (r["text"] for r in docs if r["lang"].split("-")[0] == "en")   # en-US
        yield from grouped(read_jsonl(parallel), lambda r: r["lang"] == "en")

    def cjk():
        yield from (r["text"] for r in docs if r["lang"].split("-")[0] in ("ja", "ko", "zh"))   # ja-JP, zh-CN, ...
        yield from grouped(read_jsonl(parallel), lambda r: r["script"] in ("Hans", "Hant", "Jpan", "Kore"))

    return {"english": take(english(), side_mb), "indic": take(grouped(read_jsonl(parallel),
                                                                        lambda r: r["script"] in INDIC), side_mb),
            "cjk": take(cjk(), side_mb)}


def write_corpus(texts, path):
    """The corpus as one UTF-8 file plus ``path + '.offsets.npy'``."""
    offsets = [0]
    with open(path, "wb") as f:
        for text in texts:
            b = text.encode()
            f.write(b)
            offsets.append(offsets[-1] + len(b))
    np.save(path + ".offsets.npy", np.asarray(offsets, dtype=np.int64))


# --------------------------------------------------------------------------- encoders

def make_encoder(name, spec):
    """``encode(texts)`` and ``ids(texts)`` of encoder ``name`` on vocabulary ``spec``
    (``{"ours": tokenizer JSON, "tiktoken": file, "giga_pretokenizer": None | "gpt2", "hf": file}``),
    loaded and warmed on one tiny call (whatever an encoder initialises lazily is done, its cache
    holds one chunk): what "fresh" measures is text seen for the first time."""
    encode, ids = _make_encoder(name, spec)
    encode(["a"])
    return encode, ids


def _make_encoder(name, spec):
    if name == "ube-stream":
        from ube_stream import Tokenizer

        tok = Tokenizer.load(spec["ours"], cache_bytes=spec.get("cache_bytes"))
        return (lambda texts: tok.encode_ordinary_batch(texts, num_threads=1),
                lambda texts: [a.tolist() for a in tok.encode_ordinary_batch(texts, num_threads=1)])
    if name == "gigatoken":
        import gigatoken

        kw = {"pretokenizer": spec["giga_pretokenizer"]} if spec.get("giga_pretokenizer") else {}
        g = gigatoken.Tokenizer.from_tiktoken(spec["tiktoken"], **kw)
        return (lambda texts: g.encode_batch(texts, parallel=False),
                lambda texts: [list(x) for x in g.encode_batch_list(texts, parallel=False)])
    if name == "fastokens":
        import fastokens

        f = fastokens.Tokenizer.from_file(spec["hf"])
        return (lambda texts: f.encode_batch_flat(texts),
                lambda texts: [e.ids for e in f.encode_batch(texts)])
    raise ValueError(name)


def vocabularies(args, tmp, train_texts):
    """``(label, {encoder: spec})`` per vocabulary, files written under ``tmp``."""
    from ube_stream import Tokenizer, train

    out = []
    for name, pattern in (("cl100k_base", "cl100k"), ("o200k_base", "o200k")):
        path, ranks = rank_file(name, tmp)
        tok = Tokenizer.from_tiktoken(ranks, pattern)
        spec = {"ours": os.path.join(tmp, f"{pattern}.ube.json"), "tiktoken": path,
                "hf": os.path.join(tmp, f"{pattern}.hf.json")}
        tok.save(spec["ours"])
        tok.export_hf(spec["hf"])
        out.append((pattern, {e: spec for e in ENCODERS}))
    started = time.perf_counter()
    twins = {s: train(iter(train_texts), vocab_size=args.vocab, substrate=s, workers=1, show_progress=False)
             for s in ("ube", "utf8")}
    print(f"trained ube and utf8, vocab {args.vocab}, on {mb_of(train_texts):.1f} MB in "
          f"{time.perf_counter() - started:.0f} s", flush=True)
    label = f"ube-{args.vocab // 1000}k"
    utf8 = twins["utf8"]
    spec = {"ours": os.path.join(tmp, "trained.utf8.json"), "hf": os.path.join(tmp, "trained.hf.json"),
            "tiktoken": os.path.join(tmp, "trained.tiktoken"), "giga_pretokenizer": "gpt2"}
    utf8.save(spec["ours"])
    utf8.export_hf(spec["hf"])
    n = utf8.vocab_size - len(utf8.special_tokens)
    with open(spec["tiktoken"], "wb") as f:
        f.writelines(base64.b64encode(bytes(utf8.token_expansion(i))) + b" %d\n" % i for i in range(n))
    ube_spec = {"ours": os.path.join(tmp, "trained.ube.json")}
    twins["ube"].save(ube_spec["ours"])
    # ours on the ube tokenizer itself, the others on its utf8 twin (ids checked against ours on the twin)
    out.append((label, {"ube-stream": ube_spec, "ube-stream utf8": spec, "gigatoken": spec, "fastokens": spec}))
    return out


def engine(key):
    return "ube-stream" if key.startswith("ube-stream") else key


def checked(specs, corpora):
    """The encoders whose ids equal ours (on the utf8 twin where there is one) on the first
    CHECK_DOCS documents of every corpus; the others are reported and left out."""
    ref_key = "ube-stream utf8" if "ube-stream utf8" in specs else "ube-stream"
    _, ref_ids = make_encoder("ube-stream", specs[ref_key])
    keep, report = [], {}
    for key, spec in specs.items():
        if engine(key) == "ube-stream":
            keep.append(key)
            continue
        try:
            _, ids = make_encoder(key, spec)
        except Exception as exc:   # a competitor that cannot load this vocabulary is reported
            report[key] = f"unavailable: {type(exc).__name__}: {str(exc)[:200]}"
            continue
        bad = []
        for label, texts in corpora.items():
            ours, theirs = ref_ids(texts[:CHECK_DOCS]), ids(texts[:CHECK_DOCS])
            bad += [f"{label} document {i}" for i, (a, b) in enumerate(zip(ours, theirs)) if a != b]
        if bad:
            report[key] = f"ids differ on {len(bad)} documents (first: {bad[0]}): left out"
        else:
            keep.append(key)
            report[key] = "ids identical"
    return keep, report


# --------------------------------------------------------------------------- one pass, fresh process

def child_main(argv):
    """``--child KEY SPEC_JSON CORPUS BATCH_MB``: one pass, JSON on stdout."""
    key, spec, corpus, batch_mb = argv[0], json.loads(argv[1]), argv[2], float(argv[3])
    wall, cpu = time.perf_counter(), time.process_time()
    encode, _ = make_encoder(engine(key), spec)
    load = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}
    offsets = np.load(corpus + ".offsets.npy")
    points, done, spent = [], 0, 0.0
    with open(corpus, "rb") as f:
        d = 0
        nd = len(offsets) - 1
        while d < nd:
            e = int(np.searchsorted(offsets, offsets[d] + batch_mb * 1e6, side="left"))
            e = min(max(e, d + 1), nd)
            f.seek(int(offsets[d]))
            blob = f.read(int(offsets[e] - offsets[d]))
            texts = [blob[a - offsets[d]:b - offsets[d]].decode() for a, b in zip(offsets[d:e], offsets[d + 1:e + 1])]
            del blob
            started = time.process_time()
            encode(texts)
            spent += time.process_time() - started
            done += int(offsets[e] - offsets[d])
            points.append((done, spent))
            d = e
    print(json.dumps({"load": load, "points": points, "peak_rss_mb": peak_rss_mb()}))


def peak_rss_mb():
    """This process's peak RSS (``VmHWM``: Linux's ``ru_maxrss`` of a child started by fork and
    exec keeps the parent's peak); ``ru_maxrss`` elsewhere."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def summarize_pass(points):
    """MB/s over the first 10 MB, after it (steady state), over the last quarter and overall."""
    def rate(a, b):
        (b0, t0), (b1, t1) = a, b
        return (b1 - b0) / 1e6 / (t1 - t0) if t1 > t0 else float("nan")

    start = (0, 0.0)
    first = next((p for p in points if p[0] >= 10e6), points[-1])
    quarter = next((p for p in points if p[0] >= 0.75 * points[-1][0]), points[-1])
    return {"first_10mb": rate(start, first), "steady": rate(first, points[-1]) if first != points[-1] else None,
            "last_quarter": rate(quarter, points[-1]) if quarter != points[-1] else None,
            "overall": rate(start, points[-1])}


def run_child(mode, key, *args):
    """This script run as ``mode`` (``--child`` or ``--child-set``) for encoder ``key`` in a fresh
    process: the JSON of its last line of output."""
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), mode, key, *args], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{key}: {mode} child failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def one_pass(keys, specs, corpus, args):
    runs = {k: [] for k in keys}
    for r in range(args.rounds):
        order = keys[r % len(keys):] + keys[:r % len(keys)]
        for key in order:
            got = run_child("--child", key, json.dumps(specs[key]), corpus, str(args.batch_mb))
            runs[key].append(dict(summarize_pass(got["points"]), load_s=got["load"]["cpu_s"],
                                  peak_rss_mb=got["peak_rss_mb"]))
            print(f"  one pass {key}: {runs[key][-1]}", flush=True)
    return {k: {m: median([x[m] for x in v]) for m in v[0]} for k, v in runs.items()}


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


# --------------------------------------------------------------------------- per-language sets

def set_child_main(argv):
    """``--child-set KEY SPEC_JSON SETS_PICKLE LABEL``: a fresh instance's first and second
    pass over one set, JSON on stdout."""
    import pickle

    key, spec, sets_path, label = argv[0], json.loads(argv[1]), argv[2], argv[3]
    with open(sets_path, "rb") as f:
        texts = pickle.load(f)[label]
    mb = mb_of(texts)
    encode, _ = make_encoder(engine(key), spec)   # built untimed
    out = {}
    for phase in ("fresh", "second"):
        started = time.process_time()
        encode(texts)
        out[phase] = mb / (time.process_time() - started)
    print(json.dumps(out))


def language_passes(keys, specs, sets, rounds, tmp):
    """Per set and round, each encoder in a process of its own: a fresh instance's first
    pass (``fresh``) and its second.  A process per pass pair, because an encoder may keep
    state across its instances in one process: fastokens read 45-52 MB/s on the CJK set
    with o200k as the first instance of a process and 89-101 from the third on (2026-12-04),
    so in-process "fresh" passes were not cold for it."""
    import pickle

    sets_path = os.path.join(tmp, "sets.pkl")
    with open(sets_path, "wb") as f:
        pickle.dump(sets, f)
    out = {}
    for label, texts in sets.items():
        mb = mb_of(texts)
        times = {k: {"fresh": [], "second": []} for k in keys}
        for r in range(rounds):
            order = keys[r % len(keys):] + keys[:r % len(keys)]
            for key in order:
                got = run_child("--child-set", key, json.dumps(specs[key]), sets_path, label)
                for phase in ("fresh", "second"):
                    times[key][phase].append(got[phase])
        out[label] = {"mb": mb, "mb_per_s": {k: {p: statistics.median(v) for p, v in t.items()}
                                             for k, t in times.items()}}
        print(f"  {label} ({mb:.1f} MB): {out[label]['mb_per_s']}", flush=True)
    return out


def ratios(table, metric_paths):
    """Ours over the best competitor for each metric present."""
    out = {}
    for path in metric_paths:
        def get(key):
            v = table.get(key)
            for p in path:
                v = v.get(p) if isinstance(v, dict) else None
            return v
        competitors = [get(k) for k in ("gigatoken", "fastokens") if get(k)]
        for ours in ("ube-stream", "ube-stream utf8"):
            if get(ours) and competitors:
                out["/".join((ours,) + path)] = round(get(ours) / max(competitors), 3)
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return child_main(argv[1:])
    if argv and argv[0] == "--child-set":
        return set_child_main(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shared", default=next(
        (d for d in (os.path.join(HERE, "..", "..", "shared", "data"), os.path.join(HERE, "..", "..", "..", "shared",
                                                                                      "data")) if os.path.isdir(d)),
        "shared/data"), help="the folder of docs/parallel/unicode_audit .jsonl.zst")
    parser.add_argument("--mb", type=float, default=300.0, help="MB of the one-pass corpus (the headline)")
    parser.add_argument("--side-mb", type=float, default=2.0, help="MB of each per-language set")
    parser.add_argument("--batch-mb", type=float, default=1.0, help="MB per call in the one pass")
    parser.add_argument("--train-mb", type=float, default=4.0)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default="", help="comma-separated vocabularies (cl100k,o200k,ube-32k)")
    parser.add_argument("--skip-one-pass", action="store_true")
    args = parser.parse_args(argv)
    result = {"args": vars(args)}
    with tempfile.TemporaryDirectory() as tmp:
        texts, result["corpus"] = mixed_corpus(args.shared, args.mb)
        print(f"mixed corpus: {result['corpus']}", flush=True)
        corpus = os.path.join(tmp, "mixed.bin")
        write_corpus(texts, corpus)
        sets = language_sets(args.shared, args.side_mb)
        train_texts = take(iter(texts), args.train_mb)
        check = dict(sets, mixed=texts[:CHECK_DOCS])
        del texts
        only = set(filter(None, args.only.split(",")))
        result["vocabularies"] = {}
        for label, specs in vocabularies(args, tmp, train_texts):
            if only and label not in only:
                continue
            keys, report = checked(specs, check)
            print(f"[{label}] {report}", flush=True)
            entry = {"check": report}
            if not args.skip_one_pass:
                entry["one_pass"] = one_pass(keys, specs, corpus, args)
            entry["sets"] = language_passes(keys, specs, sets, args.rounds, tmp)
            metrics = [("one_pass", m) for m in ("first_10mb", "steady", "overall")] if not args.skip_one_pass else []
            flat = {k: {"one_pass": entry.get("one_pass", {}).get(k, {}),
                        **{s: entry["sets"][s]["mb_per_s"].get(k, {}) for s in sets}} for k in keys}
            metrics += [(s, p) for s in sets for p in ("fresh", "second")]
            entry["ratio_to_best_competitor"] = ratios(flat, metrics)
            print(f"[{label}] ratios: {entry['ratio_to_best_competitor']}", flush=True)
            result["vocabularies"][label] = entry
    record(result, list(sets), argv)


def record(result, set_names, argv):
    """The result as a record: one row per vocabulary and encoder, MB/s per CPU second."""
    columns = ["vocabulary", "encoder", "one pass: first 10 MB (MB/s)", "one pass: steady (MB/s)",
               "one pass: overall (MB/s)", "one pass: peak RSS (MB)", "load (CPU s)"]
    columns += [f"{s} {phase} (MB/s)" for s in set_names for phase in ("fresh", "second")]
    rows, headline = [], []
    for label, entry in result["vocabularies"].items():
        for key in entry["sets"][set_names[0]]["mb_per_s"] if set_names else entry.get("one_pass", {}):
            one = entry.get("one_pass", {}).get(key, {})
            rows.append([label, key, one.get("first_10mb"), one.get("steady"), one.get("overall"),
                         one.get("peak_rss_mb"), one.get("load_s"),
                         *(entry["sets"][s]["mb_per_s"].get(key, {}).get(phase) for s in set_names
                           for phase in ("fresh", "second"))])
        ratio = entry["ratio_to_best_competitor"].get("ube-stream/one_pass/overall")
        if ratio is not None:
            headline.append(f"{label} {ratio:.2f}x")
    write_record("encode_corpus_scale", title="Encode one pass of a mixed corpus, fresh process, vs gigatoken and "
                 "fastokens (one thread, MB/s per CPU second)", columns=columns, rows=rows,
                 headline=("ube over the best peer, whole pass: " + ", ".join(headline)) if headline else None,
                 peers=peer_versions("gigatoken", "fastokens"), argv=argv,
                 notes=[f"one pass: {result['args']['mb']:g} MB of mixed text ({result['corpus']['distinct_mb']:.1f} MB "
                        f"distinct, {result['corpus']['repeated_mb']:.1f} MB repeated), batches of "
                        f"{result['args']['batch_mb']:g} MB, medians of {result['args']['rounds']} fresh processes "
                        f"per encoder; sets: {result['args']['side_mb']:g} MB each",
                        *(f"{label}: ids check {entry['check']}" for label, entry in result["vocabularies"].items())],
                 data=result)


if __name__ == "__main__":
    main()
