#!/usr/bin/env bash
# The 16-core scaling curve (issue 24, "Scale, measured"), in one go on a machine
# with 16 idle cores: build the kernels, build the large corpus, then time
# `ube encode` and `ube train` with 1/2/4/8/16 workers, W workers pinned on W
# cores (scale.py --pin), and one compressed file with 1/4/16 workers.
#
#     benchmarks/run_scaling_curve.sh SHARED_DATA_DIR [OUT_DIR]
#     UBE_SCALING_SMOKE=1 benchmarks/run_scaling_curve.sh ...   # 30 MB corpus, workers 1,2: checks the script
#
# SHARED_DATA_DIR holds docs/parallel/unicode_audit .jsonl.zst (../shared/data);
# OUT_DIR (default: a temporary folder) receives scaling.tar.gz: the logs, the
# corpus report and the records these runs wrote (benchmarks/records/scale/).  Each step is bounded by
# `timeout`, so a slow machine skips the later steps instead of losing all of
# them.  Sizes and rounds (about 6-8 minutes on 16 cores):
#   encode   100 MB and 1000 MB prefixes, workers 1,2,4,8,16, 3 rounds
#   train    the 1000 MB prefix, workers 1,2,4,8,16, 1 round
#   encode   the 100 and 1000 MB prefixes as ONE .jsonl.zst file each, workers 1,4,16, 1 round
#   one_file the 1000 MB file again in one process, 1,4,16 encoder threads: each pipeline thread's CPU
# UBE_SCALING_DEADLINE=S: no step runs past S seconds from the start (the device tool's
# limit per command is 600 s); the archive is written whatever was reached.
# UBE_SCALING_STEPS=encode,encode_zst: only those timed steps (default encode,train,encode_zst,one_file).
set -uo pipefail
cd "$(dirname "$0")/.."
SHARED=${1:?usage: run_scaling_curve.sh SHARED_DATA_DIR [OUT_DIR]}
OUT=${2:-$(mktemp -d)}
mkdir -p "$OUT"
LOGS=$(mktemp -d)
start=$(date +%s)
touch "$LOGS/.start"
if [ "${UBE_SCALING_SMOKE:-0}" = 1 ]; then
    export UBE_BENCH_SMOKE=1   # records marked smoke (render_results.py skips them)
    CORPUS=30MB SMALL=10MB LARGE=20MB W=1,2 WZ=1,2 ROUNDS=1 WORK=$(mktemp -d)
else
    CORPUS=1GB SMALL=100MB LARGE=1000MB W=1,2,4,8,16 WZ=1,4,16 ROUNDS=3 WORK=benchmarks/data/scale-work
fi
finish() {   # whatever was reached, archived
    find benchmarks/records/scale benchmarks/records/one_file_threads -name '*.json' -newer "$LOGS/.start" \
        -exec cp {} "$LOGS/" \; 2>/dev/null
    tar -czf "$OUT/scaling.tar.gz" -C "$LOGS" . && tar -tzvf "$OUT/scaling.tar.gz"
}
trap finish EXIT
STEPS=build,corpus,${UBE_SCALING_STEPS:-encode,train,encode_zst,one_file}   # which timed steps run
DEADLINE=${UBE_SCALING_DEADLINE:-3600}   # seconds from the start; no step runs past it
step() {   # step NAME SECONDS CMD...: run CMD (at most SECONDS, never past DEADLINE), output in NAME.log
    local name=$1 limit=$2 left
    shift 2
    case ",$STEPS," in *",$name,"*) ;; *) echo "== $name skipped (UBE_SCALING_STEPS)"; return 0 ;; esac
    left=$(( DEADLINE - ($(date +%s) - start) ))
    if [ "$left" -lt 20 ]; then echo "== $name skipped: ${left}s left before the deadline"; return 124; fi
    [ "$left" -lt "$limit" ] && limit=$left
    echo "== $name (limit ${limit}s, at $(( $(date +%s) - start ))s)"
    timeout "$limit" "$@" > "$LOGS/$name.log" 2>&1
    local rc=$?
    echo "== $name rc=$rc at $(( $(date +%s) - start ))s"
    tail -n 4 "$LOGS/$name.log"
    return $rc
}
{ nproc; python3 -V; python3 -c "import Cython, numpy; print('Cython', Cython.__version__, 'numpy', numpy.__version__)"
  grep -m1 "model name" /proc/cpuinfo; free -g | head -2
  lscpu 2>/dev/null | grep -Ei "^(cpu\(s\)|thread|core|socket|numa node\(s\)|l3)"   # SMT: threads per core
  cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null; } 2>&1 | tee "$LOGS/machine.txt"
step build 150 env UBE_BUILD_JOBS="$(nproc)" python3 setup.py -q build_ext --inplace || exit 1
step corpus 150 python3 benchmarks/make_large_corpus.py --shared "$SHARED" --size "$CORPUS" --no-zst \
    -o "$WORK/large" || exit 1
cp "$WORK/large/large.json" "$LOGS/large_corpus.json"
scale=(python3 benchmarks/scale.py --corpus "$WORK/large/large.jsonl" --work-dir "$WORK" --pin)
step encode 260 "${scale[@]}" --tasks encode --sizes "$SMALL,$LARGE" --workers "$W" --repeat "$ROUNDS"
step train 200 "${scale[@]}" --tasks train --sizes "$LARGE" --workers "$W" --repeat 1
# the same tokenizer as above (trained on the small prefix); each prefix as one .jsonl.zst file
step encode_zst 150 "${scale[@]}" --tasks encode --sizes "$SMALL,$LARGE" --workers "$WZ" --repeat 1 --input jsonl.zst
# the same file in one process, the CPU of each pipeline thread (which stage is the serial limit)
step one_file 150 python3 benchmarks/one_file_threads.py --corpus "$WORK/large/large.jsonl" --mb "${LARGE%MB}" \
    --threads "$WZ" --repeat 1 --work-dir "$WORK/one-file"
