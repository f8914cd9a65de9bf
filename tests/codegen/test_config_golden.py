"""A generated config trains the reference GPT bit for bit as the committed record says.

The record (``tests/golden/training-*.json``) was written by the generated config of
commit dc3f2db, before the config's text changed (keyword arguments to ``Config``, a shorter
re-export block): five steps of :class:`spectral.models.GPT` on CPU in float32, one
thread, a fixed seed, through the config's API (multipliers, init, optimizers, check). Every
loss is kept as ``float.hex`` and every parameter after the last step as the SHA-256 of its
bytes, so a regenerated config that differs in any bit of any number fails here. Runs on
the importing form and (``SPECTRAL_TEST_VENDOR=1``) the --vendor form; both must match the
one record. Rewrite the records only when a change of the numbers is meant::

    SPECTRAL_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/codegen/test_config_golden.py
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pytorch_optimizer")
import torch.nn.functional as F  # noqa: E402

from spectral.codegen import load_generated  # noqa: E402
from spectral.models import GPT  # noqa: E402

pytestmark = pytest.mark.generated  # also run on the --vendor form

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
UPDATE = os.environ.get("SPECTRAL_UPDATE_GOLDEN") == "1"
BASE_WIDTH, BASE_DEPTH = 64, 2
WIDTH, DEPTH = 128, 4  # r_n = r_L = 2: every exponent of every rule counts
STEPS = 5
BASE = {"lr": 3e-3, "weight_decay": 0.1, "init_std": 0.02}
CONFIGS = [("muon-kimi", "adamw"), ("adamw", None)]


def _train(cfg) -> dict:
    """Five steps of the GPT through the config; the losses and the final parameters."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one summation order for every reduction
    try:
        torch.manual_seed(0)
        model = GPT(WIDTH, DEPTH, block_size=16, multipliers=cfg)  # the config's alphas
        cfg.init_(model, WIDTH, DEPTH, BASE["init_std"])
        opt = cfg.build_optimizers(model, WIDTH, DEPTH, **BASE)
        assert cfg.check(model, WIDTH, DEPTH, opt, **BASE) == []
        gen = torch.Generator().manual_seed(0)
        losses = []
        for _ in range(STEPS):
            tokens = torch.randint(0, model.vocab_size, (4, 17), generator=gen)
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item().hex())
        params = {
            name: hashlib.sha256(p.detach().contiguous().numpy().tobytes()).hexdigest()
            for name, p in model.named_parameters()
        }
    finally:
        torch.set_num_threads(threads)
    return {"losses": losses, "parameters": params}


@pytest.mark.parametrize("hidden,others", CONFIGS, ids=[f"{h}+{o}" for h, o in CONFIGS])
def test_regenerated_config_trains_bit_identically(hidden, others, tmp_path):
    cfg = load_generated(
        hidden, others, base_width=BASE_WIDTH, base_depth=BASE_DEPTH, folder=tmp_path
    )
    got = _train(cfg)
    # float32 kernels differ in the last bits between CPU instruction sets (AVX2, AVX-512):
    # one record per capability, each written by the same code
    capability = torch.backends.cpu.get_cpu_capability()
    path = GOLDEN / f"training-{hidden}{'+' + others if others else ''}.{capability}.json"
    if not UPDATE and not path.exists():
        pytest.fail(f"no golden training record for this CPU ({capability}): {path.name}")
    if UPDATE:
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    want = json.loads(path.read_text(encoding="utf-8"))
    assert got["losses"] == want["losses"]
    changed = sorted(n for n in want["parameters"] if got["parameters"].get(n) != want["parameters"][n])
    assert not changed and got["parameters"].keys() == want["parameters"].keys(), changed
