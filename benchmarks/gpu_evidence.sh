#!/usr/bin/env bash
# Issue 28's evidence in one call of the lent device (one H100/H200 and 16 CPU cores), in at
# most 8 minutes: the GPU settles the μP-vs-SP gap with SP tuned as μP is; the CPU cores, idle
# otherwise, add seeds to the committed CPU exponent fits and measure the router's η exponent.
# Every part writes its runs.jsonl as it goes (a sweep resumes), each under `timeout` so the
# whole ends within BUDGET seconds; reports are rendered afterwards, on a CPU, with
# --report-only (docs/sweep/gap/gpu/README.md has the commands).
#
# GPU, in order of priority (one stream; what finishes is useful):
#   (a) gpu-8min, --multiplier output=1, seeds 0 and 1, widths 128 and 1024: init.hidden_weight
#       ∈ {1, 2, 4} × log2 η ∈ {-7, -6, -5} tuned at the base 128; SP re-tuned at 1024 over the
#       same grid (--sp-retune, stage 3 of --tune). Seeded with docs/sweep/gpu's raw runs: its SP and μP runs
#       at init.hidden_weight = 1 have the same keys and are not trained again.
#   (b) SP re-tuned at 1024 below that grid: --base-width 1024, init.hidden_weight ∈ {0.5, 1, 2}
#       × log2 η ∈ {-9, -8, -7}.
# CPU (--threads 1 each, the CPU preset, CPU_DATA = the 4 MiB of Python 3.11.7 stdlib the
# committed CPU sweeps used, so their runs and these share keys and combine):
#   router: --experts 4 --fit-exponent lr.router_weight, widths 32-256, AdamW and
#           Muon-Kimi+AdamW, seeds 0 and 1 (one worker each);
#   exponents: the η width rows of docs/sweep/exponents that are not informative yet, one
#           (optimizer, key, seed) per job, seeds 2 and up, in the order of the seeds they
#           need (spectral.sweep.power, docs/sweep/exponents/power.md).
# Every fit trains one width at a time (32, then 64, …), so a job cut off still has whole
# factor curves at its smaller widths.
#
# The estimate (docs/sweep/gap/gpu/estimate.md): GPU ≈ 4.6 min on an H200 at
# docs/sweep/gpu/estimate.txt's step times; CPU jobs are cut at BUDGET.
#
#   usage (device):  OUT=… CPU_DATA=… bash benchmarks/gpu_evidence.sh
#   smoke test (CPU, seconds): SMALL=1 BUDGET=120 CPU_DATA=… bash benchmarks/gpu_evidence.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/gpu-evidence-out}
R=${RESULTS:-/tmp/gpu-evidence}
BUDGET=${BUDGET:-400}            # seconds of compute (≈ 7 min with the install and the tar)
CPU_WORKERS=${CPU_WORKERS:-14}   # of 16 cores: the GPU stream keeps one
DATA=${CPU_DATA:?set CPU_DATA to the committed CPU sweeps\' 4 MiB stdlib bytes}
mkdir -p "$OUT" "$R/logs"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
T0=$(date +%s)
END=$((T0 + BUDGET))
left() { echo $((END - $(date +%s))); }
SW=(python3 -m spectral sweep --no-progress)

if [ "${SMALL:-0}" = 1 ]; then  # the same commands, tiny, on the CPU: checks the script
    GPU=(--device cpu --steps 2 --eval-batches 1 --batch-size 2 --block-size 32 --n-bytes 200000 --threads 1)
    WA=128,256 WB=256
    CPUX=(--steps 2 --eval-batches 1 --batch-size 2 --n-bytes 200000)
else
    GPU=(--device cuda)
    WA=128,1024 WB=1024
    CPUX=()
fi

run() {  # run LOG SECONDS-AT-LEAST CMD…: CMD under the time left, logged; skipped when too little is left
    local log=$1 least=$2; shift 2
    local t; t=$(left)
    if [ "$t" -lt "$least" ]; then echo "skipped (${t}s left): $*" >>"$log"; return 0; fi
    echo "+ $* (${t}s left)" >>"$log"
    timeout "$t" "$@" >>"$log" 2>&1
    echo "exit $? at $(( $(date +%s) - T0 ))s" >>"$log"
}

gpu_stream() {
    local log=$R/logs/gpu.txt
    { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
      python3 -c "import torch; print('torch', torch.__version__)"; } >>"$log" 2>&1
    mkdir -p "$R/a/muon-kimi+adamw"
    cp "$ROOT/docs/sweep/gpu/muon-kimi+adamw/runs.jsonl" "$R/a/muon-kimi+adamw/runs.jsonl"
    run "$log" 30 "${SW[@]}" --preset gpu-8min --out "$R/a" --multiplier output=1 --seeds 0,1 --widths "$WA" \
        --depths 2 --tune init.hidden_weight=1,2,4 --log2-lrs=-7,-6,-5 --sp-retune "${GPU[@]}"
    run "$log" 30 "${SW[@]}" --preset gpu-8min --out "$R/b" --param sp --multiplier output=1 --seeds 0,1 \
        --base-width "$WB" --widths "$WB" --width "$WB" --depths 2 --tune init.hidden_weight=0.5,1,2 \
        --log2-lrs=-9,-8,-7 "${GPU[@]}"
}

mult() { [ "$1" = adamw ] && echo output=16 || echo output=4; }   # the committed base α_out
base_lr() { [ "$1" = adamw ] && echo -7 || echo -5; }             # the committed base log2 η
others() { [ "$1" = adamw ] && echo -8,-6 || echo -6,-4; }        # the rest of the committed η grid

fit_by_width() {  # fit_by_width LOG DIR OPT SEED ARGS…: the fit over 32, then 32-64, … (resumed each time)
    local log=$1 dir=$2 opt=$3 seed=$4; shift 4
    local widths=32 n  # local: bash scopes dynamically, and worker's n is its stride
    for n in 64 128 256; do
        widths=$widths,$n
        run "$log" 20 "${SW[@]}" --out "$dir" -O "$opt" --multiplier "$(mult "$opt")" --log2-lrs="$(base_lr "$opt")" \
            --threads 1 --widths "$widths" --depths 2 --seeds "$seed" --device cpu --data "$DATA" "${CPUX[@]}" "$@"
    done
}

exponent_job() {  # OPT KEY SEED: one more seed of a committed width row
    local opt=$1 key=$2 seed=$3 dir=$R/exp/$1-${2#lr.}-s$3
    local log=$R/logs/exp-$1-${2#lr.}-s$3.txt
    # the base grid's other η, so that the combined render picks the base η as the committed one did
    run "$log" 20 "${SW[@]}" --out "$dir" -O "$opt" --param sp --multiplier "$(mult "$opt")" --log2-lrs="$(others "$opt")" \
        --threads 1 --widths 32 --width 32 --depths 2 --seed "$seed" --device cpu --data "$DATA" "${CPUX[@]}"
    fit_by_width "$log" "$dir" "$opt" "$seed" --fit-exponent "$key" --log2-factors=-3,-2,-1,0,1,2,3,4
}

router_job() {  # OPT SEED: the router's η exponent on the 4-expert MoE
    fit_by_width "$R/logs/router-$1-s$2.txt" "$R/router/$1-s$2" "$1" "$2" --experts 4 --top-k 2 \
        --fit-exponent lr.router_weight --log2-factors=-3,-2,-1,0,1,2,3
}

# the exponent jobs, most needed first (seeds 0 and 1 are committed)
JOBS=()
for s in 2 3; do JOBS+=("adamw lr.hidden_weight $s"); done
for s in 2 3 4; do JOBS+=("muon-kimi+adamw lr.input_weight $s"); done
for s in 2 3 4 5; do JOBS+=("muon-kimi+adamw lr.output_weight $s"); done
JOBS+=("adamw lr.input_weight 2")
for s in 6 7; do JOBS+=("muon-kimi+adamw lr.output_weight $s"); done
for s in 3 4 5 6 7 8; do JOBS+=("adamw lr.input_weight $s"); done

worker() {  # worker I N: jobs I, I+N, I+2N, …
    local i=$1 n=$2 j
    for ((j = i; j < ${#JOBS[@]}; j += n)); do
        # shellcheck disable=SC2086
        exponent_job ${JOBS[$j]}
    done
}

pids=()
gpu_stream & pids+=($!)
for o in adamw muon-kimi+adamw; do for s in 0 1; do router_job "$o" "$s" & pids+=($!); done; done
N=$((CPU_WORKERS - 4))
for ((i = 0; i < N; i++)); do worker "$i" "$N" & pids+=($!); done  # N ≤ 0: no exponent jobs
wait "${pids[@]}"
echo "all done at $(( $(date +%s) - T0 ))s" >>"$R/logs/gpu.txt"

# at most 8 files come back: the GPU folders, the CPU folders, the logs (generated/ is re-made by --report-only)
tar czf "$OUT/gap.tar.gz" -C "$R" --exclude=generated a b 2>/dev/null
tar czf "$OUT/cpu.tar.gz" -C "$R" --exclude=generated exp router 2>/dev/null
tar czf "$OUT/logs.tar.gz" -C "$R" logs
ls -la "$OUT"
tail -n 5 "$R"/logs/gpu.txt
