#!/usr/bin/env bash
# Issue 28's second device call (one H100/H200 and 16 CPU cores), at most BUDGET seconds:
#   GPU: a third seed (2) of docs/sweep/gap/gpu's (a) and (b), whose two seeds left μP and
#        re-tuned SP within 2× their seed spread. The folders are seeded with the committed
#        runs.jsonl, so seeds 0 and 1 are reused by key and only seed 2 trains.
#   CPU: the SP runs docs/sweep/tuned lacks to be "SP re-tuned at every size": every --tune
#        candidate but the base winner × the whole η grid × seeds 0, 1, at every size but the
#        base, one (optimizer, candidate, seed, size) per job, costliest first, 15 workers of
#        `--threads 1`, the committed CPU sweeps' data bytes (same data hash, so same keys).
#        Plus a machine check: the winner's SP runs at n = 128, seed 0, trained again here, to
#        compare with the committed ones (trained on the development machine).
# Every job writes runs.jsonl as it goes; what is cut off is resumed by the same command
# elsewhere. Reports are rendered afterwards with --report-only on a CPU.
#
#   usage (device):  OUT=… CPU_DATA=… bash benchmarks/device_retune.sh
#   smoke test (CPU): SMALL=1 BUDGET=60 CPU_WORKERS=2 CPU_DATA=… bash benchmarks/device_retune.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/device-retune-out}
R=${RESULTS:-/tmp/device-retune}
BUDGET=${BUDGET:-520}
CPU_WORKERS=${CPU_WORKERS:-15}
DATA=${CPU_DATA:?set CPU_DATA to the committed CPU sweeps\' 4 MiB stdlib bytes}
mkdir -p "$OUT" "$R/logs" "$R/tuned" "$R/same"
T0=$(date +%s)
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 R DATA ROOT T0
export END=$((T0 + BUDGET))
SW="python3 -m spectral sweep --no-progress"
if [ "${SMALL:-0}" = 1 ]; then
    GPU="--device cpu --steps 2 --eval-batches 1 --batch-size 2 --block-size 32 --n-bytes 200000 --threads 1"
    WA=128,256 WB=256 CPUX="--steps 2 --eval-batches 1"
else
    GPU="--device cuda" WA=128,1024 WB=1024 CPUX=""
fi
export SW CPUX

gpu_stream() {
    local log=$R/logs/gpu.txt t
    { nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
      python3 -c "import torch; print('torch', torch.__version__)"; } >>"$log" 2>&1
    for p in a b; do
        mkdir -p "$R/gap/$p/muon-kimi+adamw"
        cp "$ROOT/docs/sweep/gap/gpu/$p/muon-kimi+adamw/runs.jsonl" "$R/gap/$p/muon-kimi+adamw/"
    done
    t=$((END - $(date +%s)))
    # shellcheck disable=SC2086
    timeout "$t" $SW --preset gpu-8min --out "$R/gap/a" --multiplier output=1 --seeds 0,1,2 --widths "$WA" \
        --depths 2 --tune init.hidden_weight=1,2,4 --log2-lrs=-7,-6,-5 --sp-retune $GPU >>"$log" 2>&1
    echo "(a) exit $? at $(( $(date +%s) - T0 ))s" >>"$log"
    t=$((END - $(date +%s)))
    # shellcheck disable=SC2086
    timeout "$t" $SW --preset gpu-8min --out "$R/gap/b" --param sp --multiplier output=1 --seeds 0,1,2 \
        --base-width "$WB" --widths "$WB" --width "$WB" --depths 2 --tune init.hidden_weight=0.5,1,2 \
        --log2-lrs=-9,-8,-7 $GPU >>"$log" 2>&1
    echo "(b) exit $? at $(( $(date +%s) - T0 ))s" >>"$log"
}

# one CPU job: OPT CAND SEED AXIS SIZE DIR  (the committed grid of docs/sweep/tuned)
cpu_job() {
    local opt=$1 cand=$2 seed=$3 axis=$4 size=$5 dir=$6 lrs sizes t
    if [ "$opt" = adamw ]; then lrs=-13,-12,-11,-10,-9,-8,-7,-6,-5; else lrs=-9,-8,-7,-6,-5,-4,-3; fi
    if [ "$axis" = width ]; then sizes="--widths $size --depths 2"; else sizes="--widths 32 --depths $size"; fi
    t=$((END - $(date +%s)))
    [ "$t" -gt 15 ] || { echo "skipped: $*"; return 0; }
    mkdir -p "$dir/$opt"
    [ -e "$dir/$opt/runs.jsonl" ] || cp "$ROOT/docs/sweep/tuned/$opt/runs.jsonl" "$dir/$opt/"
    echo "+ $* (${t}s left)"
    # shellcheck disable=SC2086
    timeout "$t" $SW --out "$dir" --threads 1 -O "$opt" --param sp $sizes --width 32 --depth 2 --base-width 32 \
        --base-depth 2 --log2-lrs="$lrs" --seeds "$seed" --multiplier "output=$cand" --device cpu --data "$DATA" $CPUX
    echo "exit $? at $(( $(date +%s) - T0 ))s: $*"
}
export -f cpu_job

jobs_file=$R/jobs.txt
python3 - "$jobs_file" "$R" <<'EOF'
import sys
# local single-thread seconds a run (docs/sweep/tuned's medians), for costliest-first order
per_run = {("adamw", "width", 64): 3.5, ("adamw", "width", 128): 6.8, ("adamw", "width", 256): 14.3,
           ("adamw", "depth", 4): 1.3, ("adamw", "depth", 8): 2.5, ("adamw", "depth", 16): 4.7,
           ("muon-kimi+adamw", "width", 64): 2.1, ("muon-kimi+adamw", "width", 128): 10.9,
           ("muon-kimi+adamw", "width", 256): 17.1, ("muon-kimi+adamw", "depth", 4): 2.3,
           ("muon-kimi+adamw", "depth", 8): 3.6, ("muon-kimi+adamw", "depth", 16): 6.5}
grid = {"adamw": 9, "muon-kimi+adamw": 7}
others = {"adamw": (1, 4, 32, 64), "muon-kimi+adamw": (1, 16, 32, 64)}  # the base winners: 16 and 4
jobs = []
for (opt, axis, size), s in per_run.items():
    for cand in others[opt]:
        for seed in (0, 1):
            jobs.append((s * grid[opt], f"{opt} {cand} {seed} {axis} {size}"))
jobs.sort(key=lambda j: -j[0])
with open(sys.argv[1], "w") as f:
    for _, line in jobs:
        opt, cand, seed, axis, size = line.split()
        f.write(f"{line} {sys.argv[2]}/tuned/{opt}-{cand}-s{seed}-{axis}{size}\n")
EOF
# the machine check first (2 jobs), then the re-tune
{ echo "adamw 16 0 width 128 $R/same/adamw"; echo "muon-kimi+adamw 4 0 width 128 $R/same/muon"; cat "$jobs_file"; } >"$R/queue.txt"
# machine check: fresh folders (not seeded), so the winner's runs are trained again here
mkdir -p "$R/same/adamw/adamw" "$R/same/muon/muon-kimi+adamw"
: >"$R/same/adamw/adamw/runs.jsonl"; : >"$R/same/muon/muon-kimi+adamw/runs.jsonl"

gpu_stream &
gpid=$!
# shellcheck disable=SC2016
xargs -P "$CPU_WORKERS" -L 1 bash -c 'cpu_job "$@" >>"$R/logs/cpu-$(basename "$6").txt" 2>&1' _ <"$R/queue.txt"
wait "$gpid"
echo "all done at $(( $(date +%s) - T0 ))s" >>"$R/logs/gpu.txt"

# the shards' runs, seeded lines included (merged by key at home)
for opt in adamw muon-kimi+adamw; do
    cat "$R"/tuned/"$opt"-*/"$opt"/runs.jsonl 2>/dev/null | sort -u >"$R/tuned-$opt.jsonl"
done
cat "$R/same/adamw/adamw/runs.jsonl" "$R/same/muon/muon-kimi+adamw/runs.jsonl" >"$R/same.jsonl"
tar czf "$OUT/gap.tar.gz" -C "$R" --exclude=generated gap 2>/dev/null
gzip -c "$R/tuned-adamw.jsonl" >"$OUT/tuned-adamw.jsonl.gz"
gzip -c "$R/tuned-muon-kimi+adamw.jsonl" >"$OUT/tuned-muon.jsonl.gz"
cp "$R/same.jsonl" "$OUT/"
tar czf "$OUT/logs.tar.gz" -C "$R" logs queue.txt
ls -la "$OUT"
tail -n 4 "$R"/logs/gpu.txt
