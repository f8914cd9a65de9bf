"""A model is placed once: every entry point reads the one Placement kept with the model.

``place`` reads a model's family, roles and ties and keeps the result with the model; the
entry points (apply_multipliers, init_, param_groups, build_optimizers, check, the check
across widths, fold_multipliers) all go through it. These tests count the classifications
(calls of ``classify_parameters``, the one function that reads every parameter's role)
per model object.
"""

from __future__ import annotations

from collections import Counter

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pytorch_optimizer")
transformers = pytest.importorskip("transformers")

import spectral.torch.model.placement as placement_module  # noqa: E402
from spectral.codegen import load_generated  # noqa: E402
from spectral.torch.model.placement import Placement, place  # noqa: E402

BASE = {"lr": 3e-3, "weight_decay": 0.1}


def llama(width: int = 64) -> torch.nn.Module:
    """A tiny Hugging Face Llama (no multipliers of its own: spectral's hooks apply them)."""
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=width, intermediate_size=2 * width, num_hidden_layers=2,
        num_attention_heads=width // 16, num_key_value_heads=width // 16, head_dim=16,
        tie_word_embeddings=False, use_cache=False,
    )
    return transformers.LlamaForCausalLM(config)


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    return load_generated(
        "muon-kimi", "adamw", base_width=32, base_depth=2,
        folder=tmp_path_factory.mktemp("cfg"),
    )


@pytest.fixture
def counted(monkeypatch):
    """id(model) -> how many times its parameters were classified."""
    counts: Counter[int] = Counter()
    real = placement_module.classify_parameters

    def counting(model, *args, **kwargs):
        counts[id(model)] += 1
        return real(model, *args, **kwargs)

    monkeypatch.setattr(placement_module, "classify_parameters", counting)
    return counts


def test_one_classification_through_apply_init_build_check(cfg, counted):
    model = llama()
    cfg.apply_multipliers(model, 64, 2)
    cfg.init_(model, 64, 2)
    opt = cfg.build_optimizers(model, 64, 2, **BASE)
    cfg.param_groups(model, 64, 2, **BASE)
    assert cfg.check(model, 64, 2, opt, **BASE) == []
    assert dict(counted) == {id(model): 1}


@pytest.fixture(scope="module")
def free(tmp_path_factory):  # the hook-free form
    return load_generated(
        "muon-kimi", "adamw", base_width=32, base_depth=2,
        folder=tmp_path_factory.mktemp("free"), absorb=True,
    )


@pytest.mark.parametrize("form", ["hooked", "free"])
@pytest.mark.parametrize("build", ["llama", "tinylm"])
def test_one_placement_through_apply_init_build_check(cfg, free, counted, monkeypatch, form, build):
    """One Placement made and one classification per model, in both forms, on a Hugging
    Face Llama and on the README's TinyLM (default PyTorch init, traced structure); the
    hook-free init_ used to place the model a second time (the family passed back)."""
    from tests.torch.test_own_law import TinyLM

    made: list[int] = []
    real_init = Placement.__init__

    def counting_init(self, *args, **kwargs):
        made.append(1)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(Placement, "__init__", counting_init)
    config = cfg if form == "hooked" else free
    model = llama() if build == "llama" else TinyLM(64, 2)
    if form == "hooked":
        config.apply_multipliers(model, 64, 2)
    config.init_(model, 64, 2)
    opt = config.build_optimizers(model, 64, 2, **BASE)
    config.param_groups(model, 64, 2, **BASE)
    assert config.check(model, 64, 2, opt, **BASE) == []
    assert dict(counted) == {id(model): 1}
    assert len(made) == 1


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_one_classification_per_twin_in_the_width_check(cfg, counted):
    model = llama()
    cfg.apply_multipliers(model, 64, 2)
    cfg.init_(model, 64, 2)
    opt = cfg.build_optimizers(model, 64, 2, **BASE)
    twins = []
    real_init = transformers.LlamaForCausalLM.__init__

    def recording_init(self, config):  # the check rebuilds twins from the model's config
        real_init(self, config)
        twins.append(self)

    transformers.LlamaForCausalLM.__init__ = recording_init
    try:
        report = cfg.check(model, 64, 2, opt, widths=[64, 128, 256], **BASE)
    finally:
        transformers.LlamaForCausalLM.__init__ = real_init
    assert report == []
    measured = [t for t in twins if counted[id(t)]]  # meta-device readings are not placed
    assert len(measured) == 4  # the twin at the model's own width (the anchor), and three
    assert counted[id(model)] == 1
    assert [counted[id(t)] for t in measured] == [1, 1, 1, 1]
    assert sum(counted.values()) == 5


def test_patterns_given_once_are_kept_for_the_model(cfg):
    model = llama()
    pairs = {r"(^|\.)lm_head\.weight$": "output_weight"}
    first = place(model, cfg.CONFIG, patterns=pairs)
    again = place(model, cfg.CONFIG)  # no patterns: the ones given before
    assert again is first and again.patterns == tuple(pairs.items())


def test_a_changed_model_is_placed_again(cfg, counted):
    model = llama()
    first = place(model, cfg.CONFIG)
    assert isinstance(first, Placement) and first.roles()["lm_head.weight"] == "output_weight"
    model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone())
    second = place(model, cfg.CONFIG)
    assert second is not first
    second.roles()
    assert counted[id(model)] == 2


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_a_placement_does_not_keep_its_model_alive(cfg):
    import gc
    import weakref

    model = llama()
    place(model, cfg.CONFIG).roles()
    ref = weakref.ref(model)
    del model
    gc.collect()
    assert ref() is None


def test_not_a_module_is_one_clear_error(cfg):
    with pytest.raises(TypeError, match="expected an nn.Module, got int"):
        place(42, cfg.CONFIG)


def test_the_public_names_stay_where_users_import_them():
    """The runtime's folders moved (model/, apply/, optim/, check/); what users import from
    spectral.torch is still there, and the names docs point to inside the folders are the
    same objects."""
    import spectral.torch as runtime
    from spectral.torch.config import check_widths, parameter_hparams
    from spectral.torch.optim.torchtitan import param_group_configs

    for name in runtime.__all__:
        assert getattr(runtime, name) is not None, name
    assert runtime.check_widths is check_widths
    assert runtime.parameter_hparams is parameter_hparams
    assert runtime.param_group_configs is param_group_configs
    assert {"Config", "ADAPTERS", "Adapter", "classify", "unwrap_optimizer"} <= set(runtime.__all__)
