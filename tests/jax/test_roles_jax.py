"""The roles placed by their dimensions in the JAX runtime (docs/roles.md): a leaf mapped
to one by patterns= gets its init std and numbers; a per-channel vector keeps its values."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("optax")
import jax.numpy as jnp  # noqa: E402

from spectral.codegen import render  # noqa: E402

BW, WIDTH, RANK, VOCAB = 64, 256, 8, 512

PATTERNS = {
    r"^emb$": "input_weight",
    r"\.down$": "rank_down_weight",
    r"\.up$": "rank_up_weight",
    r"\.a_log$": "hidden_vector",
    r"^pooler\.w$": "outer_weight",
    r"^pooler\.b$": "outer_bias",
    r"^head\.w$": "output_weight",
    r"^head\.b$": "output_bias",
}


def _config(tmp_path, all_roles: bool):
    path = tmp_path / f"jax_roles_{int(all_roles)}.py"
    path.write_text(
        render("adamw", base_width=BW, base_depth=2, framework="jax", all_roles=all_roles)
    )
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _params():
    return {
        "emb": jnp.ones((VOCAB, WIDTH)),
        "blocks": [{"down": jnp.ones((WIDTH, RANK)), "up": jnp.ones((RANK, WIDTH)),
                    "a_log": jnp.log(jnp.arange(1.0, WIDTH + 1))}],
        "pooler": {"w": jnp.ones((WIDTH, WIDTH)), "b": jnp.ones(WIDTH)},
        "head": {"w": jnp.ones((WIDTH, VOCAB)), "b": jnp.ones(VOCAB)},
    }


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_init_and_numbers_for_the_new_roles(tmp_path):
    cfg = _config(tmp_path, all_roles=True)
    params = _params()
    new = cfg.init(params, jax.random.key(0), WIDTH, 2, init_std=0.02, patterns=PATTERNS)
    block = new["blocks"][0]
    assert np.array_equal(np.asarray(block["a_log"]), np.asarray(params["blocks"][0]["a_log"]))
    assert float(np.asarray(block["down"]).std()) == pytest.approx(0.02 / 4, rel=0.1)  # 1/r_n
    assert float(np.asarray(block["up"]).std()) == pytest.approx(0.02, rel=0.1)
    assert float(np.asarray(new["pooler"]["w"]).std()) == pytest.approx(0.01, rel=0.1)  # 1/√r_n
    assert not np.any(np.asarray(new["head"]["b"])) and not np.any(np.asarray(new["pooler"]["b"]))
    named = cfg.init(params, jax.random.key(0), WIDTH, 2, patterns=PATTERNS,
                     init_std={"default": 0.02, "output_bias": 0.02})
    assert float(np.asarray(named["head"]["b"]).std()) == pytest.approx(0.08, rel=0.15)  # ×r_n
    hp = cfg.hparams(WIDTH, 2, lr=0.01)
    assert hp["output_bias"]["lr"] == pytest.approx(0.04) and hp["rank_down_weight"]["lr"] == 0.0025
    labels = jax.tree_util.tree_leaves(cfg.labels(params, patterns=PATTERNS))
    assert sorted(set(labels)) == sorted(set(PATTERNS.values()))


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_a_default_config_refuses_them_in_one_line(tmp_path):
    cfg = _config(tmp_path, all_roles=False)
    with pytest.raises(ValueError, match=r"has role \w+, a role placed by its dimensions, .*--all-roles"):
        cfg.init(_params(), jax.random.key(0), WIDTH, 2, patterns=PATTERNS)
