"""The generated JAX module applies the rules along the horizon and the batch (issue 49):
``optimizer(..., steps=, batch=)`` steps each role by the lr ``hparams`` gives that run."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("optax")
import jax.numpy as jnp  # noqa: E402

from spectral.codegen import render  # noqa: E402
from spectral.transfer import hparams, plan  # noqa: E402

pytestmark = pytest.mark.generated  # also run on the --vendor form


def _load(tmp_path, source: str):
    path = tmp_path / "along_jax_sgd.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("along_jax_sgd", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow  # jit of the optax update: seconds on the shared CPU
def test_jax_optimizer_applies_the_run(tmp_path):
    base_run = {"base_steps": 1000, "base_batch": 32}
    cfg = _load(tmp_path, render("sgd", base_width=16, base_depth=1, framework="jax",
                                 base_run=base_run))  # fmt: skip
    ones = lambda *s: jnp.zeros(s, jnp.float32)  # noqa: E731
    params = {
        "input": {"kernel": ones(3, 32), "bias": ones(32)},
        "blocks": {"0": {"layers": {str(i): {"kernel": ones(32, 32)} for i in range(2)}}},
        "output": {"kernel": ones(32, 2)},
    }
    grads = jax.tree.map(jnp.ones_like, params)
    run = {"steps": 3000, "batch": 64}
    moved = cfg.hparams(32, 2, lr=0.1, **run)
    assert moved == hparams(plan("sgd"), 16, 1, 32, 2, lr=0.1, **run, **base_run)
    assert cfg.hparams(32, 2, lr=0.1, steps=1000, batch=32) == cfg.hparams(32, 2, lr=0.1)
    roles = dict(jax.tree_util.tree_flatten_with_path(cfg.labels(params))[0])
    tx = cfg.optimizer(params, 32, 2, lr=0.1, **run)
    updates, _ = tx.update(grads, tx.init(params), params)
    flat = jax.tree_util.tree_flatten_with_path(updates)[0]
    assert flat
    for path, u in flat:  # SGD from zero weights, unit gradients: exactly -lr of the role
        want = -moved[roles[path]]["lr"]
        np.testing.assert_allclose(np.asarray(u), want, rtol=1e-6, err_msg=str(path))
    # SGD's lr is linear in the batch: 6x the tokens at 2x the batch
    assert moved["hidden_weight"]["lr"] == pytest.approx(
        cfg.hparams(32, 2, lr=0.1)["hidden_weight"]["lr"] * 6**-0.32 * 2, rel=1e-12
    )


def test_jax_optimizer_moves_the_betas_by_the_batch_rule(tmp_path):
    # Adam's square-root rule: 1 - b1 and 1 - b2 times r_B (2 here), from the implementation's
    # defaults or optimizer_kwargs; the base run passes nothing extra
    import optax

    base_run = {"base_steps": 1000, "base_batch": 32}
    path = tmp_path / "along_jax_adamw.py"
    path.write_text(render("adamw", base_width=16, base_depth=1, framework="jax", base_run=base_run))
    spec = importlib.util.spec_from_file_location("along_jax_adamw", path)
    cfg = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = cfg
    spec.loader.exec_module(cfg)
    seen = []

    def adamw(*, learning_rate, weight_decay, eps=1e-8, b1=0.9, b2=0.999, **kw):
        seen.append({"b1": b1, "b2": b2} | kw)
        return optax.adamw(learning_rate, b1=b1, b2=b2, eps=eps, weight_decay=weight_decay)

    params = {"input": {"kernel": jnp.zeros((3, 32))}, "output": {"kernel": jnp.zeros((32, 2))}}
    cfg.optimizer(params, 32, 2, lr=0.1, transforms={"adamw": adamw})
    cfg.optimizer(params, 32, 2, lr=0.1, steps=1000, batch=32, transforms={"adamw": adamw})
    assert seen and all(s == {"b1": 0.9, "b2": 0.999} for s in seen)  # nothing passed: the defaults
    seen.clear()
    cfg.optimizer(params, 32, 2, lr=0.1, steps=500, batch=64, transforms={"adamw": adamw})
    assert seen and all(s["b1"] == pytest.approx(0.8) and s["b2"] == pytest.approx(0.998) for s in seen)
    seen.clear()
    cfg.optimizer(params, 32, 2, lr=0.1, steps=500, batch=64, transforms={"adamw": adamw},
                  optimizer_kwargs={"adamw": {"b2": 0.95}})
    assert seen and all(s["b2"] == pytest.approx(0.9) for s in seen)
    with pytest.raises(ValueError, match="b1: the batch rule moves 1 - beta = 0.1 by 16"):
        cfg.optimizer(params, 32, 2, lr=0.1, steps=62.5, batch=512, transforms={"adamw": adamw})
