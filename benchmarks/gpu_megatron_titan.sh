#!/usr/bin/env bash
# Issue 48, item 5: Megatron-core's GPTModel and torchtitan's Llama3 trained through the
# generated modules on one GPU, at the base (64 x 2) and at 4x the width (256 x 2), a few
# steps each, asserting on the GPU every group's lr / weight decay / eps and the init stds,
# and at the base the loss of every step equal to the plain framework's (same seed, same
# batches). Not run yet: no GPU was lent to the session that wrote it (CPU smoke runs below).
#
# Megatron (benchmarks/megatron_gpu_worker.py, torchrun, nccl): GPTModel in bf16 wrapped in
# Megatron's Float16Module and DistributedDataParallel with the distributed optimizer, built by
# get_megatron_optimizer with the module's optimizer_overrides; every parameter's group
# checked against parameter_hparams (relative 1e-9) after the warmup, every matrix's std within
# 5 % of init_stds, check_overrides == []; then STEPS steps. Plain: TransformerConfig(
# init_method_std=0.02) and Megatron's default overrides.
# torchtitan (tests/titan_worker.py, torchrun): the example registry's Llama3 (tiny / tiny_plain)
# through the AdamW module (torchtitan's own optimizer, so the base compares with tiny_plain
# loss for loss); check() on the Trainer's model and container == [].
# On the CPU (tests/titan_worker.py as below, 64 x 2, 3 steps, --debug.seed 0, no torchrun)
# tiny and tiny_plain gave the same losses bit for bit (753.2539, 772.3464, 798.3573 summed
# over 128 tokens) and the same init, and check() [] (the Megatron forward needs CUDA).
#
# Estimate (printed first): 6 processes, each dominated by start-up (imports, NCCL init,
# torchtitan's Trainer build): about 25 s each on a GPU machine = 150 s, plus 2 x 10 + 4 x 10
# steps of models under 1 M parameters (< 1 s); about 3 minutes, under 5.
#
#   usage (device, repository root, megatron-core and torchtitan installed):
#       OUT=/tmp/gpu-out bash benchmarks/gpu_megatron_titan.sh
#   CPU smoke test of the Megatron checks (no training, no DDP): SMOKE=1 bash benchmarks/gpu_megatron_titan.sh
set -euo pipefail
OUT=${OUT:-/tmp/gpu-out}
PY=${PY:-python3}
STEPS=${STEPS:-10}
mkdir -p "$OUT"
ROOT=$(pwd)
echo "estimate: about 3 minutes (6 processes x ~25 s start-up, $STEPS steps each of < 1 M-parameter models)"
"$PY" -m spectral codegen adamw --base-width 64 --base-depth 2 --framework megatron \
    -o "$OUT/mup_megatron.py" --force
"$PY" -m spectral codegen adamw --base-width 64 --base-depth 2 \
    --framework torchtitan -o "$OUT/mup_titan.py" --force
start=$(date +%s)

if [[ -n ${SMOKE:-} ]]; then
    for W in 64 256; do
        "$PY" -W ignore benchmarks/megatron_gpu_worker.py "$OUT/megatron-$W.json" \
            --module-dir "$OUT" --width "$W" --smoke
    done
    "$PY" -W ignore benchmarks/megatron_gpu_worker.py "$OUT/megatron-plain.json" \
        --module-dir "$OUT" --width 64 --plain --smoke
    echo "smoke: Megatron init and override checks passed on the CPU ($(($(date +%s) - start)) s)"
    exit 0
fi

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
RUN="$PY -m torch.distributed.run --standalone --nproc_per_node 1"
for W in 64 256; do
    timeout 120 $RUN benchmarks/megatron_gpu_worker.py "$OUT/megatron-$W.json" \
        --module-dir "$OUT" --width "$W" --steps "$STEPS"
done
timeout 120 $RUN benchmarks/megatron_gpu_worker.py "$OUT/megatron-plain.json" \
    --module-dir "$OUT" --width 64 --plain --steps "$STEPS"

for CONFIG_W in "tiny 64" "tiny 256" "tiny_plain 64"; do
    read -r CONFIG W <<<"$CONFIG_W"
    (cd "$OUT" && TITAN_WIDTH=$W TITAN_DEPTH=2 TITAN_STEPS=$STEPS \
        PYTHONPATH="$OUT:$ROOT/tests:$ROOT/examples/torchtitan_cpu" timeout 150 \
        $RUN "$ROOT/tests/titan_worker.py" "$OUT/titan-$CONFIG-$W.json" \
        --module titan_worker --config "$CONFIG" --training.max-norm inf --debug.seed 0)
done

"$PY" - "$OUT" <<'PYEOF'
import json, sys
out = sys.argv[1]
load = lambda name: json.load(open(f"{out}/{name}.json"))
m = {k: load(f"megatron-{k}") for k in ("64", "256", "plain")}
for k in ("64", "256"):
    assert m[k]["groups_checked"] > 0, k
    print(f"megatron {k} x 2: {m[k]['groups_checked']} parameters' groups = parameter_hparams, "
          f"losses {m[k]['losses'][0]:.4f} -> {m[k]['losses'][-1]:.4f}")
gap = max(abs(a - b) for a, b in zip(m["64"]["losses"], m["plain"]["losses"]))
print(f"megatron base vs plain GPTModel: largest loss gap over {len(m['plain']['losses'])} steps {gap:.3g}")
assert gap == 0.0, "the base is not Megatron's own run"
t = {k: load(f"titan-{k}") for k in ("tiny-64", "tiny-256", "tiny_plain-64")}
for k in ("tiny-64", "tiny-256"):
    assert t[k]["check"] == [], t[k]["check"]
    assert t[k]["check_wrong_group"], "check() did not see a wrong group"
    print(f"torchtitan {k}: check() [] on the Trainer's model and container, "
          f"losses {t[k]['losses'][0]:.4f} -> {t[k]['losses'][-1]:.4f}, on {t[k]['device']}")
gap = max(abs(a - b) for a, b in zip(t["tiny-64"]["losses"], t["tiny_plain-64"]["losses"]))
print(f"torchtitan base vs plain: largest loss gap {gap:.3g}")
assert gap == 0.0, "the base is not torchtitan's own run"
PYEOF
echo "done in $(($(date +%s) - start)) s"
