"""A generated config trains the reference GPT as the runtime it imports does, and as it
did before: on every machine, not only the one that wrote the record.

Two checks, each of what holds everywhere:

* **The two forms are one computation.** The importing module (``from spectral.torch
  import ...``) and the --vendor module (one standalone file) are built in this process and
  each trains five steps of :class:`spectral.models.GPT` on CPU in float32, one thread, a
  fixed seed, through the config's API (multipliers, init, optimizers, check). Same process,
  same kernels: every loss and every parameter must be bit for bit equal.
* **The numbers are the recorded ones, to float32 rounding.** ``tests/golden/training-*.json``
  keeps the five losses and every parameter's float64 L2 norm after the last step. They must
  agree within :data:`LOSS_RTOL` and :data:`PARAM_RTOL` (relative), not bit for bit: the
  float32 kernels of another CPU (AVX2, AVX-512, none) sum in another order.

Why these tolerances. float32 keeps 24 bits (unit roundoff 2**-24 ~ 6e-8); a reduction of
n terms reordered by another vector width moves its sum by up to ~n ulps, and five steps
carry that forward. Measured on this repository's AVX2 build machine against the same run
with torch's scalar kernels (``ATEN_CPU_CAPABILITY=default``): losses 1.6e-6 (muon-kimi +
adamw) and 1.7e-7 (adamw) apart, the AVX2 and AVX-512 records this file replaces 1.8e-6 and
1.7e-7. Parameter norms move more, up to 1.1e-4 (a bias AdamW trains: its first steps are
about lr * sign(g), so an element whose gradient rounds across zero moves by 2 lr; Muon's
Newton-Schulz runs in bfloat16, whose 8 bits turn one float32 ulp into 2**-8 now and then).
LOSS_RTOL = 2e-5 and PARAM_RTOL = 1e-3 are about 10x those. A change of the rules is far
outside them: the smallest factor a rule exponent makes here (sqrt 2, an exponent 1/2 at
r_n = 2), put on AdamW's lr, moves the step-4 loss by 3.2e-3 (160x LOSS_RTOL) and parameter
norms by up to 0.31. Rewrite the records only when a change of the numbers is meant::

    SPECTRAL_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/codegen/test_config_golden.py
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pytorch_optimizer")
import torch.nn.functional as F  # noqa: E402

from spectral.codegen import load_generated  # noqa: E402
from spectral.models import GPT  # noqa: E402

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
UPDATE = os.environ.get("SPECTRAL_UPDATE_GOLDEN") == "1"
BASE_WIDTH, BASE_DEPTH = 64, 2
WIDTH, DEPTH = 128, 4  # r_n = r_L = 2: every exponent of every rule counts
STEPS = 5
BASE = {"lr": 3e-3, "weight_decay": 0.1, "init_std": 0.02}
CONFIGS = [("muon-kimi", "adamw"), ("adamw", None)]
LOSS_RTOL = 2e-5
"""Relative tolerance of each recorded loss: ~10x the spread between CPU instruction sets."""
PARAM_RTOL = 1e-3
"""Relative tolerance of each parameter's recorded norm: ~10x the spread between CPUs."""


def _train(cfg) -> tuple[list[float], dict[str, torch.Tensor]]:
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
            losses.append(loss.item())
        params = {name: p.detach().clone() for name, p in model.named_parameters()}
    finally:
        torch.set_num_threads(threads)
    return losses, params


# Both forms in one test, so the --vendor pass (SPECTRAL_TEST_VENDOR=1, "generated and not
# slow") need not run it again; slow: ten Muon steps in bfloat16 on a CPU without bf16 units.
@pytest.mark.generated
@pytest.mark.slow
@pytest.mark.parametrize("hidden,others", CONFIGS, ids=[f"{h}+{o}" for h, o in CONFIGS])
def test_regenerated_config_trains_as_recorded(hidden, others, tmp_path):
    forms = {
        vendor: load_generated(
            hidden, others, base_width=BASE_WIDTH, base_depth=BASE_DEPTH,
            folder=tmp_path / ("vendored" if vendor else "importing"), vendor=vendor,
        )
        for vendor in (False, True)
    }
    assert forms[True].__file__ != forms[False].__file__
    losses, params = _train(forms[False])
    vendored_losses, vendored_params = _train(forms[True])
    # one process, one set of kernels: the two forms are one computation, to the bit
    assert [x.hex() for x in vendored_losses] == [x.hex() for x in losses]
    assert vendored_params.keys() == params.keys()
    differ = sorted(n for n in params if not torch.equal(params[n], vendored_params[n]))
    assert not differ, differ

    got = {
        "losses": losses,
        "parameter_norms": {n: p.double().norm().item() for n, p in params.items()},
    }
    path = GOLDEN / f"training-{hidden}{'+' + others if others else ''}.json"
    if UPDATE:
        path.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    want = json.loads(path.read_text(encoding="utf-8"))
    assert len(got["losses"]) == len(want["losses"]) == STEPS
    off = [
        (step, g, w) for step, (g, w) in enumerate(zip(got["losses"], want["losses"], strict=True))
        if not math.isclose(g, w, rel_tol=LOSS_RTOL, abs_tol=0.0)
    ]
    assert not off, f"losses off the record by more than {LOSS_RTOL:g}: {off}"
    assert got["parameter_norms"].keys() == want["parameter_norms"].keys()
    off = [
        (n, g, want["parameter_norms"][n]) for n, g in got["parameter_norms"].items()
        if not math.isclose(g, want["parameter_norms"][n], rel_tol=PARAM_RTOL, abs_tol=0.0)
    ]
    assert not off, f"parameter norms off the record by more than {PARAM_RTOL:g}: {off}"
