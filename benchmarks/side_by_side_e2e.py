"""Side by side, end to end: corpus files -> token files, the whole command as a
fresh process, `ube encode` against dolma's `tokens` command, datatrove's
`DocumentTokenizer` pipeline and a plain script over the fastest peer encoder
(gigatoken or fastokens), on the same text and the same `utf8` vocabulary.

    python benchmarks/make_large_corpus.py                       # once
    python benchmarks/side_by_side_e2e.py [--size 100MB] [--files 4] [--workers 1,2] [--repeat 5] [--pin]

The peers live in their own virtual environments: dolma pins `tokenizers`
<= 0.19.1, which clashes with datatrove's and transformers' needs, so
`--dolma` names dolma's program in a venv of its own (`pip install dolma`) and
`--peer-python` a Python with `pip install datatrove gigatoken fastokens
tokenizers` (defaults in --help); a tool whose program is missing is reported
and left out.

The same work for every tool:
- input: the first `--size` of text of the large corpus, cut into `--files`
  JSON Lines files of about equal size (`{"id", "text"}`); each text is
  `str.strip()`ped and empty ones dropped beforehand, because dolma encodes
  `text.strip()` and skips empty documents: so every tool encodes the same
  strings.  Several files, because dolma and datatrove run one file per
  process: with one file they use one core (`ube encode` cuts one file into
  units itself);
- vocabulary: a `utf8` tokenizer trained by `ube train` on the first
  `--train-size` of the corpus, exported with
  `ube_stream.Tokenizer.export_hf` as a HF `tokenizer.json`, which every
  tool loads (`ube encode --tokenizer tokenizer.json` included; dolma pins
  `tokenizers` <= 0.19, which reads merges only as "a b" strings, so it gets
  a copy with the merges in that form: the same vocabulary and merges);
- output: the ids of every document followed by the EOS `<|endoftext|>`, no
  BOS.  `ube encode`: uint32 shards + index + MANIFEST (EOS by default).
  dolma: `--dtype uint16` memmaps (`uint32` above 65,536 ids: dolma 1.2
  refuses uint32 for a smaller vocabulary) + per-document CSV (EOS by
  `--tokenizer.eos_token_id`; its shuffle ring reorders documents, so they are
  matched by id).  datatrove: `eos_token=`, unshuffled; it picks uint16 for a
  vocabulary of at most 65,536 ids (no option), so it writes half the bytes.
  plain script: uint32 tokens + uint64 lengths per input file.
- threads: the peers run with `RAYON_NUM_THREADS=1`, `OPENBLAS_NUM_THREADS=1`
  (as `ube encode` sets for itself: no tool here does linear algebra, and
  numpy's OpenBLAS pool otherwise spins ~0.1 CPU s per process after its
  import) and `TOKENIZERS_PARALLELISM=false`, so W workers use W cores (HF tokenizers and
  the Rust peers would otherwise add a thread pool per process).
- cores: with `--pin`, every tool's run with W workers is restricted to W
  cores (the first W of this process's CPU affinity, set in the child before
  exec, so its whole process tree inherits it: `ube encode`'s read-ahead and
  write-behind threads, dolma's Rust threads and datatrove's processes alike),
  so the ordering at each worker count is per core; the `cores` column shows
  the mask ("all N": unpinned).

Runs are interleaved (round r runs every tool at every worker count once);
figures are medians over `--repeat` rounds: wall seconds, CPU seconds of the
whole process tree (the larger of wait4's rusage and the sum of the polled
processes: a pool whose workers are not waited for drops out of rusage), MB of
text per wall second and per CPU second, peak RSS
(the largest process, and the sum over processes).  Every tool's output of
the first round is checked equal to `ube encode`'s, document by document
(sha1 of the uint32 ids, EOS included).  Output: a record in
benchmarks/records/side_by_side_e2e/ (`_record.py`; its `data` holds every run,
the token checks and the targets).
"""
import argparse
import glob
import gzip
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile

import measure
from _record import peer_versions, write_record

HERE = os.path.dirname(os.path.abspath(__file__))
EOS = "<|endoftext|>"
TOOLS = ("ube", "dolma", "datatrove", "plain")


def default_program(variable, usual, name):
    if os.environ.get(variable):
        return os.environ[variable]
    if os.path.exists(usual):
        return usual
    return (shutil.which(name) if name else sys.executable) or usual


def split_input(prefix, files, folder):
    """The prefix's documents, stripped, non-empty, in `files` files of about
    equal text bytes; returns (paths, ids per file, text bytes)."""
    marker = os.path.join(folder, "done.json")
    if os.path.exists(marker):
        with open(marker) as f:
            done = json.load(f)
        if done["prefix"] == [prefix, os.path.getmtime(prefix)]:
            return done["paths"], done["ids"], done["text_bytes"]
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    rows = []
    with open(prefix, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            text = row["text"].strip()
            if text:
                rows.append((row["id"], text, len(text.encode("utf-8"))))
    total = sum(size for _, _, size in rows)
    paths, ids, written, out = [], [], 0, None
    for doc_id, text, size in rows:
        if out is None or (written >= total * len(paths) / files and len(paths) < files):
            if out is not None:
                out.close()
            paths.append(os.path.join(folder, f"part-{len(paths):04d}.jsonl"))
            ids.append([])
            out = open(paths[-1], "w", encoding="utf-8")
        out.write(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n")
        ids[-1].append(doc_id)
        written += size
    out.close()
    with open(marker, "w") as f:
        json.dump({"prefix": [prefix, os.path.getmtime(prefix)], "paths": paths, "ids": ids, "text_bytes": total}, f)
    return paths, ids, total


def make_tokenizer(args, env):
    """(HF tokenizer.json path, EOS id): trained once, kept in the work folder."""
    sys.path.insert(0, measure.REPO)
    from ube_stream import Tokenizer

    prefix, _, _ = measure.cut_prefix(args.corpus, measure.parse_sizes(args.train_size)[0], args.work_dir)
    ube_file = os.path.join(args.work_dir, f"e2e-utf8-{args.vocab_size}.ube.json")
    hf_file = os.path.join(args.work_dir, f"e2e-utf8-{args.vocab_size}.tokenizer.json")
    if not os.path.exists(ube_file):
        measure.check(measure.run_measured(measure.ube_cmd(
            "train", prefix, "--substrate", "utf8", "--vocab-size", str(args.vocab_size), "-o", ube_file, "-q"),
            env=env), "training the tokenizer")
    tok = Tokenizer.load(ube_file)
    if not os.path.exists(hf_file):
        tok.export_hf(hf_file)
    return hf_file, tok.special_tokens[EOS]


GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


def gpt2_layout_copy(hf_file):
    """The same tokenizer.json with its pre-tokenizer in GPT-2's own layout
    (`ByteLevel(use_regex=True)`, whose built-in regex is GPT-2's) instead of
    `Split(GPT-2 regex) + ByteLevel(use_regex=False)`: the same chunks, and the
    layout gigatoken's loader knows (it rejects the Split form).  The file
    itself when it is already in that layout (as `export_hf` now writes a
    GPT-2-pattern tokenizer); None when the tokenizer's pattern is not GPT-2's.
    e2e_peers.py `choose` checks the ids equal HF tokenizers' on the original
    file before any timing."""
    with open(hf_file, encoding="utf-8") as f:
        data = json.load(f)
    pre = data.get("pre_tokenizer") or {}
    if pre.get("type") == "ByteLevel" and pre.get("use_regex", True):
        return hf_file
    steps = pre.get("pretokenizers", [])
    if not (len(steps) == 2 and steps[0].get("type") == "Split"
            and steps[0].get("pattern", {}).get("Regex") == GPT2_REGEX and steps[1].get("type") == "ByteLevel"):
        return None
    copy = hf_file.replace(".tokenizer.json", ".gpt2-layout.tokenizer.json")
    if not os.path.exists(copy):
        data["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                                 "use_regex": True}
        with open(copy + ".part", "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False)
        os.replace(copy + ".part", copy)
    return copy


def legacy_merges_copy(hf_file):
    """The same tokenizer.json with merges written as "a b" strings, the only
    form `tokenizers` <= 0.19 (which dolma pins) reads; exact when no merge
    part holds a space (byte-level symbols never do: a space is "Ġ")."""
    legacy = hf_file.replace(".tokenizer.json", ".legacy-merges.tokenizer.json")
    if not os.path.exists(legacy):
        with open(hf_file, encoding="utf-8") as f:
            data = json.load(f)
        merges = data["model"]["merges"]
        if any(" " in part for pair in merges if isinstance(pair, list) for part in pair):
            raise SystemExit(f"{hf_file}: a merge part holds a space: no legacy form for dolma's tokenizers")
        data["model"]["merges"] = [" ".join(pair) if isinstance(pair, list) else pair for pair in merges]
        with open(legacy + ".part", "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False)
        os.replace(legacy + ".part", legacy)
    return legacy


def doc_hashes(ids):
    return hashlib.sha1(ids.astype("<u4", copy=False).tobytes()).hexdigest()


def read_ube(out, ids):
    sys.path.insert(0, measure.REPO)
    from ube_stream import TokenShards

    shards = TokenShards(out)
    flat = [doc_id for file_ids in ids for doc_id in file_ids]
    if len(shards) != len(flat):
        return {"error": f"{len(shards)} documents, expected {len(flat)}"}
    return {doc_id: doc_hashes(shards.doc(i)) for i, doc_id in enumerate(flat)}


def read_dolma(out, ids, dtype="uint32"):
    import numpy as np

    got = {}
    for csv_path in sorted(glob.glob(os.path.join(out, "*.csv.gz"))):
        raw = csv_path[: -len(".csv.gz")] + ".npy"
        tokens = np.fromfile(raw, dtype=dtype).astype(np.uint32)   # the dtype dolma was given
        with gzip.open(csv_path, "rt", encoding="utf-8") as f:
            for line in f:
                start, end, doc_id = line.rstrip("\n").split(",")[:3]
                got[doc_id] = doc_hashes(tokens[int(start):int(end)])
    return got


def read_datatrove(out, ids):
    import numpy as np

    files = sorted(glob.glob(os.path.join(out, "tokens", "*.ds")))
    if len(files) != len(ids):
        return {"error": f"{len(files)} .ds files, expected {len(ids)}"}
    got = {}
    for path, file_ids in zip(files, ids):
        ends = np.fromfile(path + ".index", dtype=np.uint64)
        raw = np.fromfile(path, dtype=np.uint8)
        width = len(raw) // int(ends[-1]) if len(ends) else 4
        tokens = raw.view(np.uint16 if width == 2 else np.uint32).astype(np.uint32)
        starts = np.concatenate([[0], ends[:-1]])
        for doc_id, start, end in zip(file_ids, starts, ends):
            got[doc_id] = doc_hashes(tokens[int(start):int(end)])
    return got


def read_plain(out, ids, paths):
    import numpy as np

    got = {}
    for path, file_ids in zip(paths, ids):
        stem = os.path.join(out, os.path.basename(path))
        tokens = np.fromfile(stem + ".tokens", dtype=np.uint32)
        ends = np.cumsum(np.fromfile(stem + ".lengths", dtype=np.uint64))
        starts = np.concatenate([[0], ends[:-1]])
        for doc_id, start, end in zip(file_ids, starts, ends):
            got[doc_id] = doc_hashes(tokens[int(start):int(end)])
    return got


def compare(reference, got):
    if "error" in got:
        return {"equal": False, "detail": got["error"]}
    missing = [d for d in reference if d not in got]
    differ = [d for d in reference if d in got and got[d] != reference[d]]
    extra = [d for d in got if d not in reference]
    return {"equal": not (missing or differ or extra), "documents": len(reference), "missing": len(missing),
            "different": len(differ), "extra": len(extra), "first_different": (differ or missing or [None])[0]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=os.path.join(HERE, "data", "large", "large.jsonl"))
    parser.add_argument("--size", default="100MB", help="text bytes to encode (default 100MB)")
    parser.add_argument("--files", type=int, default=4, help="input files the text is cut into (default 4)")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds; figures are medians")
    parser.add_argument("--vocab-size", type=int, default=32768)
    parser.add_argument("--train-size", default="10MB", help="the tokenizer is trained on this prefix")
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--pin", action="store_true",
                        help="run every tool's W workers on W cores (the first W of this process's CPU affinity)")
    parser.add_argument("--dolma", default=default_program("UBE_BENCH_DOLMA", "/work/peers-venv/bin/dolma", "dolma"),
                        help="dolma's program ($UBE_BENCH_DOLMA, else /work/peers-venv/bin/dolma, else PATH)")
    parser.add_argument("--peer-python", default=default_program("UBE_BENCH_PEER_PYTHON",
                                                                 "/work/peers-dt-venv/bin/python", None),
                        help="a Python with datatrove, gigatoken, fastokens and tokenizers ($UBE_BENCH_PEER_PYTHON, "
                             "else /work/peers-dt-venv/bin/python, else this Python)")
    parser.add_argument("--work-dir", default=os.path.join(HERE, "data", "e2e-work"))
    args = parser.parse_args(argv)
    if not os.path.exists(args.corpus):
        raise SystemExit(f"{args.corpus} missing: run python benchmarks/make_large_corpus.py first")
    env = measure.ube_env()
    measure.compile_package()   # imported as an installed package is: from its bytecode
    # OPENBLAS_NUM_THREADS=1: what `ube encode` sets for itself (cli/main.py); numpy's OpenBLAS
    # otherwise starts a pool whose threads spin for ~0.1 CPU s per process after its import
    peer_env = {**os.environ, "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
                "OPENBLAS_NUM_THREADS": "1"}
    peer_env.pop("PYTHONPATH", None)
    size = measure.parse_sizes(args.size)[0]
    prefix, _, _ = measure.cut_prefix(args.corpus, size, args.work_dir)
    paths, ids, text_bytes = split_input(prefix, args.files, os.path.join(args.work_dir, f"e2e-{size // 10**6}MB-"
                                                                                          f"{args.files}files"))
    hf_file, eos_id = make_tokenizer(args, env)
    worker_counts = [int(w) for w in args.workers.split(",")]
    tools = [t for t in args.tools.split(",") if t]
    skipped = {}
    if "dolma" in tools and not os.path.exists(args.dolma):
        skipped["dolma"] = f"{args.dolma} missing (pip install dolma)"
    for tool in ("datatrove", "plain"):
        if tool in tools and not os.path.exists(args.peer_python):
            skipped[tool] = f"{args.peer_python} missing (pip install datatrove gigatoken fastokens)"
    tools = [t for t in tools if t not in skipped]
    peers_script = os.path.join(HERE, "e2e_peers.py")
    choice = None
    if "plain" in tools:
        sample = os.path.join(args.work_dir, "e2e-choose-sample.jsonl")
        with open(paths[0], encoding="utf-8") as src, open(sample, "w", encoding="utf-8") as dst:
            kept = 0
            for line in src:
                if kept >= 4_000_000:
                    break
                dst.write(line)
                kept += len(line)
        gpt2_layout = gpt2_layout_copy(hf_file)
        res = measure.run_measured([args.peer_python, peers_script, "choose", hf_file, sample,
                                    *(["--gigatoken-tokenizer", gpt2_layout] if gpt2_layout else [])], env=peer_env)
        try:
            choice = json.loads(res["output_tail"].strip().splitlines()[-1])
        except (ValueError, IndexError):
            choice = {"fastest": None, "error": res["output_tail"][-1000:]}
        if not choice.get("fastest"):
            skipped["plain"] = f"no peer encoder loads the tokenizer with ids equal to HF tokenizers: {choice}"
            tools.remove("plain")

    # dolma 1.2 refuses uint32 for a vocabulary that fits uint16 ("Numpy type mismatch")
    dolma_dtype = "uint16" if args.vocab_size <= 1 << 16 else "uint32"

    def command(tool, workers, out):
        if tool == "ube":
            return measure.ube_cmd("encode", *paths, "--tokenizer", hf_file, "-o", out, "--workers", str(workers),
                                   "-q"), env
        if tool == "dolma":
            return [args.dolma, "tokens", "--documents", *paths, "--destination", out,
                    "--tokenizer.name_or_path", legacy_merges_copy(hf_file), "--tokenizer.eos_token_id", str(eos_id),
                    "--tokenizer.pad_token_id", str(eos_id), "--processes", str(workers), "--dtype", dolma_dtype,
                    "--work_dir.input", out + ".work-in", "--work_dir.output", out + ".work-out"], peer_env
        if tool == "datatrove":
            return [args.peer_python, peers_script, "datatrove", "--tokenizer", hf_file, "--eos-token", EOS,
                    "--workers", str(workers), "-o", out, os.path.dirname(paths[0])], peer_env
        lib_file = (gpt2_layout_copy(hf_file) or hf_file) if choice["fastest"] == "gigatoken" else hf_file
        return [args.peer_python, peers_script, "plain", "--lib", choice["fastest"], "--tokenizer", lib_file,
                "--eos-id", str(eos_id), "--workers", str(workers), "-o", out, *paths], peer_env

    readers = {"ube": read_ube, "dolma": lambda out, ids: read_dolma(out, ids, dolma_dtype), "datatrove": read_datatrove,
               "plain": lambda out, ids: read_plain(out, ids, paths)}
    records, checks, reference = [], {}, None
    with tempfile.TemporaryDirectory(dir=args.work_dir) as tmp:
        for round_no in range(args.repeat):
            for workers in worker_counts:
                for tool in tools:
                    out = os.path.join(tmp, f"{tool}-{workers}")
                    for leftover in (out, out + ".work-in", out + ".work-out"):
                        shutil.rmtree(leftover, ignore_errors=True)
                    cmd, run_env = command(tool, workers, out)
                    load = os.getloadavg()[0]
                    cores = measure.pinned_cores(workers, args.pin)
                    run = measure.run_measured(cmd, env=run_env, cores=cores)
                    polled_cpu = sum(p.get("cpu_s", 0) for p in run["processes"])
                    if run["returncode"] != 0:
                        skipped[f"{tool} x{workers} round {round_no}"] = run["output_tail"][-2000:]
                        print(f"{tool} x{workers} failed:\n{run['output_tail'][-2000:]}", file=sys.stderr)
                        continue
                    rss = [p.get("peak_rss_mb", 0) for p in run["processes"]]
                    records.append({
                        "tool": tool, "workers": workers, "cores": measure.cores_label(cores), "round": round_no,
                        "load_1min": round(load, 2),
                        "wall_s": run["wall_s"], "cpu_s": max(run["cpu_s"], polled_cpu),
                        "cpu_s_rusage": run["cpu_s"], "cpu_s_polled": round(polled_cpu, 3),
                        "mb_per_s_wall": round(text_bytes / 1e6 / run["wall_s"], 2),
                        "mb_per_cpu_s": round(text_bytes / 1e6 / max(run["cpu_s"], polled_cpu), 2),
                        "peak_rss_mb_largest": round(max(rss, default=0), 1),
                        "peak_rss_mb_sum": round(sum(rss), 1), "processes": len(run["processes"]),
                        "output_mb": round(measure.dir_bytes(out) / 1e6, 3),
                    })
                    print(f"round {round_no} {tool} x{workers} (cores {records[-1]['cores']}): {run['wall_s']:.2f} s "
                          f"wall, {records[-1]['cpu_s']:.2f} CPU s, load {load:.2f}", file=sys.stderr)
                    if round_no == 0:
                        got = readers[tool](out, ids)
                        if tool == "ube" and reference is None:
                            reference = got
                        checks[f"{tool} x{workers}"] = compare(reference, got) if reference else {
                            "equal": None, "detail": "no ube encode output to compare with"}
    summary = summarize(records, tools, worker_counts)
    on_cores = lambda w: f" on {w} core{'s' if w != '1' else ''}" if args.pin else ""   # noqa: E731
    headline = "; ".join(
        f"{w} worker{'s' if w != '1' else ''}: ube {t['ube_vs_best_per_cpu_s']:.2f}x {t['best_peer_per_cpu_s']} per "
        f"CPU s, {t['ube_vs_best_wall']:.2f}x {t['best_peer_wall']} wall{on_cores(w)}"
        for w, t in summary["targets"].items()) or None
    notes = [f"{round(text_bytes / 1e6, 1)} MB of text of {os.path.relpath(args.corpus)} in {len(paths)} files, "
             f"{sum(len(i) for i in ids)} documents; utf8 tokenizer, {args.vocab_size} tokens, trained on "
             f"{args.train_size}; medians of {args.repeat} interleaved rounds",
             ("pinned (--pin): every tool's W workers ran on W cores (the `cores` column: the CPU affinity of its "
              "whole process tree)" if args.pin else "unpinned: every run could use every core (the `cores` column)"),
             "token checks (first round, document by document against ube encode): " + ", ".join(
                 f"{k} {'equal' if c.get('equal') else 'DIFFERENT' if c.get('equal') is False else 'unchecked'}"
                 for k, c in checks.items()),
             "what each tool adds: EOS after every document (all four, configured); no BOS; dolma and the plain "
             "script strip each text (done beforehand here, so all encode the same strings); datatrove and dolma "
             "write uint16 ids (vocabulary <= 65,536), the others uint32",
             *(f"skipped or failed: {k}: {v.splitlines()[-1] if v else v}" for k, v in skipped.items())]
    versions = {**peer_versions("dolma", python=os.path.join(os.path.dirname(args.dolma), "python")),
                **peer_versions("datatrove", "gigatoken", "fastokens", "tokenizers", python=args.peer_python)}
    write_record("side_by_side_e2e", title="Side by side, end to end: corpus files to token files",
                 columns=[f"{c} ({u})" if u else c for c, u in ((c["name"], c["unit"]) for c in summary["columns"])],
                 rows=summary["rows"], notes=notes, headline=headline, peers=versions,
                 argv=sys.argv[1:] if argv is None else argv,
                 data={"pinned": args.pin, "targets": summary["targets"],
                       "same_order_at_every_worker_count": summary["same_order_at_every_worker_count"],
                       "runs": records, "token_checks": checks, "skipped_or_failed": skipped,
                       "corpus": {"source": os.path.relpath(args.corpus), "text_mb": round(text_bytes / 1e6, 3),
                                  "files": len(paths), "documents": sum(len(i) for i in ids)},
                       "tokenizer": {"substrate": "utf8", "vocab_size": args.vocab_size,
                                     "trained_on": args.train_size, "eos_id": eos_id},
                       "plain_encoder_choice": choice})
    return 0


def summarize(records, tools, worker_counts):
    groups = {}
    for r in records:
        groups.setdefault((r["tool"], r["workers"]), []).append(r)
    keys = ["wall_s", "cpu_s", "mb_per_s_wall", "mb_per_cpu_s", "peak_rss_mb_largest", "peak_rss_mb_sum",
            "output_mb", "load_1min"]
    rows = []
    for workers in worker_counts:
        for tool in tools:
            rs = groups.get((tool, workers))
            if rs:
                rows.append({"tool": tool, "workers": workers, "cores": rs[0]["cores"], "runs": len(rs),
                             **{k: round(statistics.median(r[k] for r in rs), 3) for k in keys}})
    targets = {}
    for workers in worker_counts:
        here = [r for r in rows if r["workers"] == workers]
        ube = next((r for r in here if r["tool"] == "ube"), None)
        peers = [r for r in here if r["tool"] != "ube"]
        if ube and peers:
            best_core = max(peers, key=lambda r: r["mb_per_cpu_s"])
            best_wall = max(peers, key=lambda r: r["mb_per_s_wall"])
            targets[str(workers)] = {
                "best_peer_per_cpu_s": best_core["tool"],
                "ube_vs_best_per_cpu_s": round(ube["mb_per_cpu_s"] / best_core["mb_per_cpu_s"], 3),
                "best_peer_wall": best_wall["tool"],
                "ube_vs_best_wall": round(ube["mb_per_s_wall"] / best_wall["mb_per_s_wall"], 3),
                "order_by_mb_per_cpu_s": [r["tool"] for r in sorted(here, key=lambda r: -r["mb_per_cpu_s"])],
                "target": "ube >= 1.5x the best peer per CPU second",
                "met": ube["mb_per_cpu_s"] >= 1.5 * best_core["mb_per_cpu_s"],
            }
    orders = [t["order_by_mb_per_cpu_s"] for t in targets.values()]
    columns = [("tool", ""), ("workers", ""), ("cores", ""), ("wall_s", "s"), ("cpu_s", "s"), ("mb_per_s_wall", "MB/s"),
               ("mb_per_cpu_s", "MB/CPU s"), ("peak_rss_mb_largest", "MB"), ("peak_rss_mb_sum", "MB"),
               ("output_mb", "MB"), ("load_1min", "")]
    return {"columns": [{"name": c, "unit": u} for c, u in columns],
            "rows": [[r[c] for c, _ in columns] for r in rows], "summary": rows, "targets": targets,
            "same_order_at_every_worker_count": len({tuple(o) for o in orders}) <= 1 if orders else None}


if __name__ == "__main__":
    raise SystemExit(main())
