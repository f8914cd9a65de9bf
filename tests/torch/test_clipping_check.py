"""check(trainer=...) warns when a framework clips the global gradient norm of a model in the
hook-free form (--absorb-multipliers) instead of the config's exact clip_grad_norm_ (issue 36).

The carriers hold alpha * W, so their gradients are the hooked ones / alpha and the norm a
framework clips is another than the hooked model's (tests/engine/test_absorb.py measures the
runs apart and the exact clip equal). Hugging Face's TrainingArguments and Trainer,
Lightning's Trainer and a torchtitan-shaped config are read; nothing is trained.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from spectral.codegen import load_generated  # noqa: E402
from spectral.errors import ConfigError  # noqa: E402
from spectral.torch.check.clipping import clipping_problems, framework_clip  # noqa: E402

WIDTH, DEPTH = 64, 2


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clipping")
    hooked = load_generated("adamw", None, 2, base_width=64, base_depth=2, folder=folder)
    free = load_generated("adamw", None, 2, base_width=64, base_depth=2, folder=folder, absorb=True)
    return hooked, free


@pytest.fixture(scope="module")
def llama():
    return transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            vocab_size=64,
            hidden_size=WIDTH,
            intermediate_size=2 * WIDTH,
            num_hidden_layers=DEPTH,
            num_attention_heads=4,
            num_key_value_heads=4,
            head_dim=16,
            tie_word_embeddings=False,
        )
    )


def _args(tmp_path, max_grad_norm):
    return transformers.TrainingArguments(
        output_dir=str(tmp_path), max_grad_norm=max_grad_norm, report_to=[], use_cpu=True
    )


@pytest.mark.slow  # a Trainer built: accelerate's set-up
def test_hf_trainer_clipping_an_absorbed_model_is_named(configs, llama, tmp_path):
    _, free = configs
    free.init_(llama, WIDTH, DEPTH, init_std=0.02)
    args = _args(tmp_path, 1.0)  # Hugging Face's default
    trainer = transformers.Trainer(model=llama, args=args)
    expected = [
        "TrainingArguments.max_grad_norm is 1: the framework clips the global gradient "
        "norm of the hook-free model, whose carriers hold alpha * W and get the hooked "
        "gradients / alpha, so it clips another norm than the hooked model's and a binding "
        "clip trains another run; set max_grad_norm=0 and clip with the config's "
        "clip_grad_norm_(model, width, depth, max_norm) after backward instead"
    ]
    for given in (args, trainer):
        problems = free.check(llama, WIDTH, DEPTH, measure=False, trainer=given)
        assert problems == expected


def test_exact_clip_or_no_clip_is_not_named(configs, llama, tmp_path):
    """max_grad_norm=0 (the exact clip called in a callback instead), or the hooked form,
    whose gradients are the hooked ones: nothing to say."""
    hooked, free = configs
    assert clipping_problems(free.CONFIG, _args(tmp_path, 0.0)) == []
    assert clipping_problems(hooked.CONFIG, _args(tmp_path, 1.0)) == []
    assert clipping_problems(free.CONFIG, None) == []


def test_torchtitan_clip_is_read(configs):
    _, free = configs
    titan = SimpleNamespace(training=SimpleNamespace(max_norm=1.0, steps=10))
    [line] = clipping_problems(free.CONFIG, titan)
    assert line.startswith("torchtitan's training.max_norm is 1: ")
    assert "set training.max_norm=inf and clip with" in line
    titan.training.max_norm = math.inf
    assert clipping_problems(free.CONFIG, titan) == []
    with pytest.raises(ConfigError, match="^trainer must be a Hugging Face Trainer"):
        clipping_problems(free.CONFIG, object())


@pytest.mark.slow  # importing lightning
def test_lightning_clip_is_read():
    lightning = pytest.importorskip("lightning")
    clipped = lightning.Trainer(gradient_clip_val=0.5, logger=False, enable_checkpointing=False)
    assert framework_clip(clipped) == (
        "Trainer(gradient_clip_val=...)",
        0.5,
        "gradient_clip_val=None",
    )
    assert framework_clip(lightning.Trainer(logger=False))[1] is None


def test_fold_multipliers_on_an_absorbed_config_says_there_is_nothing_to_fold(configs, llama):
    _, free = configs
    with pytest.raises(ConfigError, match="^this config absorbs the block multipliers"):
        free.fold_multipliers(llama, WIDTH, DEPTH)


def test_sweep_trains_models_whose_gradients_are_the_hooked_ones(tmp_path):
    """spectral sweep clips with torch's clip_grad_norm_: exact, since its GPT applies the
    multipliers in its forward pass (a config generated without --absorb-multipliers)."""
    from spectral.sweep.recipe import generated_module

    module = generated_module("adamw", 2, 64, 2, tmp_path)
    assert module.CONFIG.absorbed is None
