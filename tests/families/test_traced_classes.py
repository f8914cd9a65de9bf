"""Issue 38's model classes with no adapter: accepted by their traced structure, or refused
in one line naming what the rules do not cover.

The builders are tests/families/traced_classes.py's (transformers classes from tiny
configs, and a ResNet-style conv net). Accepted: T5 (two streams: the decoder's branches
read the encoder's), RWKV, Jamba (Mamba + attention + MoE), Llama4, GPT-OSS and the ResNet
— apply_multipliers, init_, build_optimizers and check with no adapter and no patterns=,
and (slow) each class's width slopes within ±0.15 of the Llama control, measured as
tests/families/test_model_class_slopes.py does (T5, RWKV, Llama4 and GPT-OSS are; Jamba's
Mamba branch and the ResNet's dlogits are not yet: OFF_CONTROL). Refused: Whisper (its h_0 is
gelu(conv2(...)) plus positions: no module's output to scale).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from float32_muon import newton_schulz_float32  # noqa: E402
from spectral.codegen import load_generated  # noqa: E402
from test_model_classes import (  # noqa: E402
    TOLERANCE,
    llama,
    measured_slopes,
    off_control,
    token_batch,
)
from traced_classes import TRACED_CLASSES  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

ACCEPTED = ("t5", "rwkv", "jamba", "llama4", "gpt_oss", "resnet")
PER_LAYER = {"t5": 5, "resnet": 1}
"""Branch ends per layer where not 2: T5's encoder 2 and decoder 3 (depth counts the layers
of each stack), the ResNet's one per block."""
CONV = ("resnet",)
"""Classes with conv kernels (4-D): AdamW on every role, as Muon takes 2-D matrices only."""
REFUSED = {
    "whisper": (
        "The model has the opt family's names; its traced structure was refused: h_0 of "
        "the stream at `model.encoder.layers.0` is made by `gelu`, not by a module's "
        "output: no place for alpha_in"
    ),
}


@pytest.fixture(scope="module")
def cfgs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("traced_classes")
    return {
        "muon": load_generated(
            "muon-kimi",
            "adamw",
            base_width=64,
            base_depth=2,
            folder=folder,
            all_roles=True,
        ),
        "adamw": load_generated(
            "adamw", base_width=64, base_depth=2, folder=folder, all_roles=True
        ),
    }


def _cfg(cfgs, name: str):
    return cfgs["adamw" if name in CONV else "muon"]


@pytest.mark.parametrize("name", ACCEPTED)
def test_accepted_with_no_adapter(cfgs, name):
    cfg, (build, batch) = _cfg(cfgs, name), TRACED_CLASSES[name]
    width, depth = 64, 2
    torch.manual_seed(0)
    model = build(width, depth)
    handle = cfg.apply_multipliers(model, width, depth)
    per_layer = PER_LAYER.get(name, 2)
    assert {k: len(v) for k, v in handle.modules.items()} == {
        "input": 2 if name == "t5" else 1,  # T5: the encoder's table and the decoder's
        "hidden": per_layer * depth,
        "output": 1,
    }
    cfg.init_(model, width, depth, init_std=0.02)
    opt = cfg.build_optimizers(model, width, depth, lr=1e-3, weight_decay=0.1)
    assert cfg.check(model, width, depth, opt, example_input=batch()) == []


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_naming_the_construct(cfgs, name):
    cfg, (build, _) = cfgs["muon"], TRACED_CLASSES[name]
    with pytest.raises(ValueError) as info:
        cfg.apply_multipliers(build(64, 2), 64, 2)
    assert REFUSED[name] in str(info.value)
    assert "\n" not in str(info.value)


@pytest.fixture(scope="module")
def _float32_newton_schulz():
    """Muon's Newton-Schulz in float32, as tests/families/test_model_class_slopes.py."""
    import torch.optim._muon as muon

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(muon, "_zeropower_via_newtonschulz", newton_schulz_float32)
        yield


@pytest.fixture(scope="module")
def controls(cfgs, _float32_newton_schulz):
    """The Llama control's slopes under each config, measured once when first asked."""
    found: dict[str, dict] = {}

    def control(key: str) -> dict:
        if key not in found:
            found[key] = measured_slopes(cfgs[key], llama, token_batch())[0]
        return found[key]

    return control


OFF_CONTROL = {
    "jamba": "its Mamba mixer's branch: slope -0.142 against the control's, 0.189 off",
    "resnet": "its dlogits: slope -0.125, 0.223 off the control's under AdamW",
}
"""Accepted, but a slope measured outside the tolerance (not yet explained): strict xfails,
so that a fix shows."""


@pytest.mark.slow  # eight twins per width, as the per-class test
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(reason=OFF_CONTROL[n], strict=True))
        if n in OFF_CONTROL
        else n
        for n in ACCEPTED
    ],
)
def test_width_slopes_match_the_llama_control(cfgs, controls, name):
    key = "adamw" if name in CONV else "muon"
    build, batch = TRACED_CLASSES[name]
    slopes, problems = measured_slopes(cfgs[key], build, batch())
    assert {"h0", "logits", "dlogits"} < set(slopes) and len(slopes) > 3, problems
    assert None not in slopes.values(), f"{name}: a quantity is 0 at some width {slopes}"
    off = off_control(slopes, controls(key))
    bad = {k: round(v, 3) for k, v in off.items() if abs(v) > TOLERANCE}
    assert not bad, f"{name}: slopes off the Llama control {bad}; slopes {slopes}; {problems}"
