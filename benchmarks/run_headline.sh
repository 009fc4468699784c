#!/usr/bin/env bash
# The runs behind the README's headline table, in one go: run it on a quiet
# machine (load average ~0, nothing else running), then commit
# benchmarks/records/, benchmarks/RESULTS.md and README.md.
#
#     benchmarks/run_headline.sh            # the real runs (about 45-55 min on 2 idle cores: an estimate
#                                           # from the smoke runs' per-MB rates, not timed end to end)
#     benchmarks/run_headline.sh --smoke    # every run at its smallest size (~3 min), records marked smoke
#
# Sizes and repeats (real runs):
#   encode_corpus_scale.py  one pass of 300 MB of mixed text per encoder (ube-stream, gigatoken, fastokens;
#                           cl100k, o200k, a trained 32K), 5 fresh processes each; per-language sets 2 MB
#   side_by_side_e2e.py     100 MB of the large corpus in 4 files, 1 and 2 workers, ube encode vs dolma,
#                           datatrove and a plain gigatoken/fastokens script, 5 interleaved rounds
#   compressed_scaling.py   500 MB per file (the size issue 24 names): .jsonl.zst, .jsonl.gz, .txt.zst, 4 MB-frame .jsonl.zst;
#                           ube encode and ube train, 1 and 2 workers, 1 round
#   verify_vs_encode.py     200,000 documents of real running text, 1 worker, 3 repeats
#   side_by_side_train.py   50 MB of the large corpus, vocabulary 32,000, one thread: ube-stream (utf8, ube),
#                           gigatoken, rustbpe, HF tokenizers, 3 interleaved rounds (~1.5 min each)
#   scale.py                100 MB and 1000 MB prefixes of the large corpus, 1 and 2 workers, 3 rounds
# side_by_side_e2e.py, compressed_scaling.py and scale.py run with --pin: W workers on W cores (the
# process tree's CPU affinity), so "2 workers vs 1" is per core, the form of issue 24's targets.
# The peers: pip install ".[bench]" (gigatoken, fastokens); dolma and datatrove in their own
# virtual environments (see side_by_side_e2e.py --help: UBE_BENCH_DOLMA, UBE_BENCH_PEER_PYTHON).
# UBE_BENCH_SHARED names the shared data folder (docs/parallel/unicode_audit .jsonl.zst).
set -euo pipefail
cd "$(dirname "$0")/.."
SMOKE=0
if [ "${1:-}" = "--smoke" ]; then SMOKE=1; export UBE_BENCH_SMOKE=1; fi
SHARED="${UBE_BENCH_SHARED:-}"
if [ -z "$SHARED" ]; then
    for d in ../shared/data ../../shared/data /work/shared/data; do
        if [ -d "$d" ]; then SHARED="$d"; break; fi
    done
fi
[ -n "$SHARED" ] || { echo "no shared data folder: set UBE_BENCH_SHARED" >&2; exit 2; }

if [ "$SMOKE" = 1 ]; then
    WORK="$(mktemp -d)"; trap 'rm -rf "$WORK"' EXIT
    LARGE="$WORK/large"; LARGE_SIZE=12MB
    ECS=(--mb 2 --side-mb 0.1 --rounds 1 --vocab 600 --train-mb 0.3 --only cl100k)
    E2E=(--size 2MB --files 2 --workers 1,2 --repeat 1 --vocab-size 1000 --train-size 1MB --work-dir "$WORK/e2e" --pin)
    CS=(--mb 2 --kinds jsonl.zst,jsonl.zst-frames --workers 1,2 --rounds 1 --pin)
    VE=(--docs 3000 --repeats 1)
    ST=(--mb 0.5 --vocab-size 800 --repeat 1)
    SC=(--sizes 1MB,2MB --workers 1,2 --repeat 1 --vocab-size 1000 --work-dir "$WORK/scale" --pin)
else
    LARGE=benchmarks/data/large; LARGE_SIZE=1000MB
    ECS=(--mb 300 --side-mb 2 --rounds 5)
    E2E=(--size 100MB --files 4 --workers 1,2 --repeat 5 --pin)
    CS=(--mb 500 --workers 1,2 --rounds 1 --pin)
    VE=(--docs 200000 --repeats 3)
    ST=(--mb 50 --vocab-size 32000 --repeat 3)
    SC=(--sizes 100MB,1000MB --workers 1,2 --repeat 3 --pin)
fi

started=$(date +%s)
echo "start: $(uptime)"
if [ ! -f "$LARGE/large.jsonl" ]; then
    python benchmarks/make_large_corpus.py --size "$LARGE_SIZE" --shared "$SHARED" -o "$LARGE" --no-zst
fi
step() { echo "== $* ($(uptime))"; local s; s=$(date +%s); "$@"; echo "== took $(( $(date +%s) - s )) s"; }
step python benchmarks/encode_corpus_scale.py --shared "$SHARED" "${ECS[@]}"
step python benchmarks/side_by_side_e2e.py --corpus "$LARGE/large.jsonl" "${E2E[@]}"
step python benchmarks/compressed_scaling.py --data "$SHARED" "${CS[@]}"
step python benchmarks/verify_vs_encode.py "${VE[@]}"
step python benchmarks/side_by_side_train.py "$LARGE/large.jsonl" "${ST[@]}"
step python benchmarks/scale.py --corpus "$LARGE/large.jsonl" "${SC[@]}"
python benchmarks/render_results.py
echo "done in $(( $(date +%s) - started )) s; end: $(uptime)"
