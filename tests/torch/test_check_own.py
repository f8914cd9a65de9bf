"""check() looks at what the user runs (issue 36): their own parameters, hooks, compiled
graph and optimizer container, not only twins the library rebuilds.

Each case is a mistake the checks before issue 36 passed with ``[]``: ``init_`` forgotten
(Hugging Face's std 0.02, torchtitan's own init), a forward hook of the user's own on
``o_proj``, a compiled graph built for another instance without the hooks, carriers of the
hook-free form without their multiplier, torchtitan's ``OptimizersContainer``. Each test
asserts the line check gives, and the control (the same model set up right) gives ``[]``.
Models are tiny and built in code (nothing downloaded).
"""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from torch import nn  # noqa: E402

from spectral.codegen import load_generated  # noqa: E402
from spectral.torch.check.anchor import anchor_problems  # noqa: E402
from spectral.torch.model.placement import place  # noqa: E402

VOCAB = 256
BASE = {"lr": 3e-3, "weight_decay": 0.1}


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    return load_generated(
        "adamw", base_width=64, base_depth=2, folder=tmp_path_factory.mktemp("own")
    )


@pytest.fixture(scope="module")
def free(tmp_path_factory):  # the hook-free form
    folder = tmp_path_factory.mktemp("own_free")
    return load_generated("adamw", base_width=64, base_depth=2, folder=folder, absorb=True)


def llama(width: int, depth: int = 2) -> nn.Module:
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(
        transformers.LlamaConfig(
            vocab_size=VOCAB,
            hidden_size=width,
            intermediate_size=2 * width,
            num_hidden_layers=depth,
            num_attention_heads=width // 16,
            num_key_value_heads=width // 16,
            head_dim=16,
            tie_word_embeddings=False,
        )
    )


def _hooked(cfg, width: int = 128, depth: int = 2, init: bool = True):
    model = llama(width, depth)
    cfg.apply_multipliers(model, width, depth)
    if init:
        cfg.init_(model, width, depth)  # Hugging Face's own init, rescaled
    return model, cfg.build_optimizers(model, width, depth, **BASE)


# ---------------------------------------------------------------------------------------
# 1. the user's own parameters at this width
# ---------------------------------------------------------------------------------------


def test_forgot_init_on_hf_llama_is_named(cfg):
    model, opt = _hooked(cfg, init=False)  # Hugging Face's own std 0.02 at width 128
    problems = cfg.check(model, 128, 2, opt, measure=False)
    # one line: how many parameters, and the factors init_ would multiply them by
    assert problems == [
        "init_ has not run on this model: 14 parameter(s) hold the model's own init, where "
        "the rules at width 128, depth 2 multiply it (model.layers.N.self_attn.q_proj.weight "
        "(hidden_weight, 2 layers) x0.7071; model.layers.N.self_attn.k_proj.weight "
        "(hidden_weight, 2 layers) x0.7071; model.layers.N.self_attn.v_proj.weight "
        "(hidden_weight, 2 layers) x0.7071 and 4 more); call init_(model, width, depth) once, "
        "after the model's own init"
    ]
    cfg.init_(model, 128, 2)
    assert cfg.check(model, 128, 2, opt, measure=False) == []


def test_no_init_at_the_base_width_is_the_users_model(cfg):
    model, opt = _hooked(cfg, width=64, init=False)  # the base: init_'s factors are 1
    assert cfg.check(model, 64, 2, opt, measure=False) == []


def test_init_twice_scales_once(cfg):
    model, _ = _hooked(cfg)
    once = {n: p.detach().clone() for n, p in model.named_parameters()}
    cfg.init_(model, 128, 2)
    assert all(torch.equal(p, once[n]) for n, p in model.named_parameters())


def test_one_layer_off_is_named_alone(cfg):
    model, opt = _hooked(cfg, depth=4)
    with torch.no_grad():
        model.model.layers[2].mlp.down_proj.weight.mul_(1.5)
    problems = cfg.check(model, 128, 4, opt, measure=False)
    assert len(problems) == 1, problems
    assert re.fullmatch(
        r"model\.layers\.2\.mlp\.down_proj\.weight \(hidden_weight\): init std 0\.021\d+, "
        r"init_ left it at 0\.0141\d: it changed after init_ \(the model's own init run "
        r"again, weights loaded\?\); call init_ after the model's own init and before "
        r"anything else sets the weights",
        problems[0],
    ), problems


def test_init_for_another_size_is_named(cfg):
    model, opt = _hooked(cfg)
    assert cfg.check(model, 128, 4, opt, measure=False, widths=None)[-1] == (
        "init_ ran for width 128, depth 2; the model is checked at width 128, depth 4: "
        "call init_ with the size the model has, after the model's own init"
    )


def test_the_draws_are_judged_against_the_init_std_given(cfg):
    model = llama(128)
    cfg.apply_multipliers(model, 128, 2)
    cfg.init_(model, 128, 2, init_std=0.05)
    opt = cfg.build_optimizers(model, 128, 2, **BASE)
    assert cfg.check(model, 128, 2, opt, measure=False, init_std=0.05) == []
    assert cfg.check(model, 128, 2, opt, measure=False) == []  # as init_ left it
    problems = cfg.check(model, 128, 2, opt, measure=False, init_std=0.02)
    assert any("q_proj.weight (hidden_weight, 2 layers): init std 0.035" in p for p in problems)


def test_a_trained_model_is_not_judged_and_says_so(cfg):
    model, opt = _hooked(cfg, init=False)
    ids = torch.randint(0, VOCAB, (2, 8))
    model(ids, labels=ids).loss.backward()
    opt.step()
    found = cfg.check(model, 128, 2, opt, measure=False)
    assert found == []
    assert "init std not judged: the model is past its init (the optimizer has taken steps)" in (
        found.notes
    )


def test_a_small_parameter_is_not_judged_and_says_so(cfg):
    model = nn.Sequential()  # a tiny custom model with its adapter
    model.add_module("embed", nn.Embedding(VOCAB, 8))
    model.add_module("block", nn.Linear(8, 8))
    model.add_module("head", nn.Linear(8, VOCAB, bias=False))
    adapter = {"input": [r"^embed$"], "branches": [r"^block$"], "output": [r"^head$"],
               "branches_per_layer": 1}
    patterns = {r"^embed\.": "input_weight", r"^block\.weight$": "hidden_weight",
                r"^block\.bias$": "hidden_bias", r"^head\.": "output_weight"}
    cfg.apply_multipliers(model, 8, 1, adapter=adapter, patterns=patterns)
    found = cfg.check(
        model, 8, 1, measure=False, adapter=adapter, patterns=patterns, init_std=0.02
    )
    assert any("block.weight (hidden_weight): 64 entries, too few to judge" in n
               for n in found.notes), found.notes


def test_carriers_without_their_multiplier(free):
    model = llama(128)  # Hugging Face's init: the head lacks alpha_out = 1/2
    opt = free.build_optimizers(model, 128, 2, **BASE)
    problems = free.check(model, 128, 2, opt)
    assert problems == [
        "init_ has not run on this model: 15 parameter(s) hold the model's own init, where "
        "the rules at width 128, depth 2 multiply it (lm_head.weight (output_weight) x0.5; "
        "model.layers.N.self_attn.q_proj.weight (hidden_weight, 2 layers) x0.7071; "
        "model.layers.N.self_attn.k_proj.weight (hidden_weight, 2 layers) x0.7071 and 5 more, "
        "including the multipliers this hook-free config carries in the init); call "
        "init_(model, width, depth) once, after the model's own init"
    ]
    free.init_(model, 128, 2)
    assert free.check(model, 128, 2, opt) == []
    with torch.no_grad():
        model.lm_head.weight.mul_(1.5)  # a carrier 1.5x its std
    problems = free.check(model, 128, 2, opt)
    assert problems == [
        "lm_head.weight (output_weight): init std 0.01496, init_ left it at 0.009973: it "
        "changed after init_ (the model's own init run again, weights loaded?); call init_ "
        "after the model's own init and before anything else sets the weights"
    ]


# ---------------------------------------------------------------------------------------
# 2. the check across widths anchored on the user's model
# ---------------------------------------------------------------------------------------


def _shrink(module, args, out):  # the user's own hook: o_proj scaled by 64 / n
    return out * (64 / 128)


def _anchor(cfg, model, width=128, depth=2):
    twin = llama(width)
    placement = place(model, cfg.CONFIG)
    return anchor_problems(cfg.CONFIG, model, twin, (width, depth), placement, 1.0, None, BASE)


def test_an_instance_hook_is_named_against_the_twin(cfg):
    model, _ = _hooked(cfg, depth=4)
    assert _anchor(cfg, model, depth=4) == ([], [])
    for layer in model.model.layers:
        layer.self_attn.o_proj.register_forward_hook(_shrink)
    problems, notes = _anchor(cfg, model, depth=4)
    assert problems == [
        "your model's model.layers.N.self_attn.o_proj output is 0.5x the checked twin's on "
        "the same input and weights: a hook the twins do not have (_shrink); the check "
        "across widths certifies the twins, not this model"
    ]
    assert notes == []


def test_a_hook_on_one_layer_is_named_by_its_own_name(cfg):
    """One layer's hook is that layer's, not "layers.N" (issue 47 item 7)."""
    model, _ = _hooked(cfg, depth=4)
    model.model.layers[0].self_attn.o_proj.register_forward_hook(_shrink)
    problems, _ = _anchor(cfg, model, depth=4)
    assert problems == [
        "your model's model.layers.0.self_attn.o_proj output is 0.5x the checked twin's on "
        "the same input and weights: a hook the twins do not have (_shrink); the check "
        "across widths certifies the twins, not this model"
    ]


def test_a_hook_without_effect_is_listed_as_a_note(cfg):
    model, _ = _hooked(cfg)
    model.model.layers[1].mlp.register_forward_hook(lambda m, a, o: None)
    problems, notes = _anchor(cfg, model)
    assert problems == []
    assert notes == [
        "your model's model.layers.1.mlp has forward hooks that are not spectral's "
        "(test_a_hook_without_effect_is_listed_as_a_note.<locals>.<lambda>), which the "
        "twins do not have; the forward pass showed no effect of theirs"
    ]


def test_forgot_init_is_one_line_not_one_per_matrix_against_the_twin(cfg):
    """init_ never ran: the check at one width says so in one line; the anchor against the
    twin adds no line per matrix (21 lines with widths= before, issue 47 item 7). After
    init_, a matrix changed by hand is named against the twin."""
    model, _ = _hooked(cfg, init=False)
    problems, _ = _anchor(cfg, model)
    assert not any("init std" in p for p in problems), problems
    cfg.init_(model, 128, 2)
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight.mul_(2.0)
    problems, _ = _anchor(cfg, model)
    assert any(
        p.startswith("your model's model.layers.0.mlp.down_proj.weight has init std")
        and "the checked twin's (set up by the rules at width 128)" in p
        for p in problems
    ), problems


@pytest.mark.slow  # three twins and the anchor: about 15 s
def test_check_across_widths_names_the_instance_hook(cfg):
    model, opt = _hooked(cfg)
    assert cfg.check(model, 128, 2, opt, widths=[64, 128, 256]) == []
    for layer in model.model.layers:
        layer.self_attn.o_proj.register_forward_hook(_shrink)
    problems = cfg.check(model, 128, 2, opt, widths=[64, 128, 256], measure=False)
    assert (
        "your model's model.layers.N.self_attn.o_proj output is 0.5x the checked twin's on "
        "the same input and weights: a hook the twins do not have (_shrink); the check "
        "across widths certifies the twins, not this model"
    ) in problems


# ---------------------------------------------------------------------------------------
# 3. torch.compile: code compiled for another instance of the class
# ---------------------------------------------------------------------------------------


@pytest.mark.slow  # compiles three times (backend "eager": dynamo only)
def test_code_compiled_for_an_unhooked_instance_is_caught(cfg):
    from models import NanoGPT

    torch.compiler.reset()
    try:
        ids = torch.randint(0, 128, (4, 16))
        torch.manual_seed(0)
        first = torch.compile(NanoGPT(128, 2), backend="eager")
        first(ids)  # compiled without hooks, for the class
        model = NanoGPT(128, 2)  # a new instance, hooked before it is compiled
        cfg.apply_multipliers(model, 128, 2)
        cfg.init_(model, 128, 2)
        opt = cfg.build_optimizers(model, 128, 2, **BASE)
        compiled = torch.compile(model, backend="eager")
        # with gradients on, as first ran: a no_grad call would compile afresh
        ratio = (compiled(ids).std() / model(ids).std()).detach()
        assert float(ratio) == pytest.approx(2.0, rel=1e-3)  # 1 / alpha_out
        problems = cfg.check(compiled, 128, 2, opt)
        assert (
            "the compiled model's output is 2 x its eager module's on a 4x16 batch (the "
            "shape its cached code was compiled for): that code was compiled without the "
            "multiplier hooks; call torch.compiler.reset() before torch.compile(model)"
        ) in " ".join(problems), problems
        torch.compiler.reset()  # the fix named
        compiled = torch.compile(model, backend="eager")
        compiled(ids)
        assert cfg.check(compiled, 128, 2, opt) == []
    finally:
        torch.compiler.reset()


# ---------------------------------------------------------------------------------------
# torchtitan: its own init, its OptimizersContainer (5)
# ---------------------------------------------------------------------------------------

TITAN = {"lr": 3e-3, "weight_decay": 0.1, "eps": 1e-8}


@pytest.fixture(scope="module")
def titan(tmp_path_factory):
    pytest.importorskip("torchtitan.models.llama3")  # needs triton importable
    import importlib.util
    import sys

    from spectral.codegen import render

    source = render("adamw", base_width=128, base_depth=4, framework="torchtitan")
    path = tmp_path_factory.mktemp("own_titan") / "own_titan_config.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("own_titan_config", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _titan_model_and_container(titan):
    from torchtitan.components.optimizer import OptimizersContainer
    from torchtitan.models import llama3

    torch.manual_seed(0)
    model = llama3.model_registry("debugmodel").model.build()  # 256 wide, 6 layers
    config = OptimizersContainer.Config(
        param_groups=titan.param_groups(256, 6, **TITAN), implementation="for-loop"
    )
    return model, config.build(model_parts=[model])


def test_torchtitan_own_init_is_named_and_the_container_read(titan):
    model, container = _titan_model_and_container(titan)
    problems = titan.CONFIG.check(model, 256, 6, container, **TITAN)
    assert not any("lr is None" in p for p in problems), problems  # the real groups
    (line,) = [p for p in problems if p.startswith("init_ has not run")]
    # built without torchtitan's init_weights, its Linears (a subclass of nn.Linear) hold
    # torch's default draw, whose std already moves as width**-1/2: the hidden matrices'
    # r_n**-1/2 is in the draw, what is left is the depth factor (wo, w2) and the
    # readout's other r_n**-1/2 (before subclasses were read as torch's default: 31
    # parameters, the width factor counted twice)
    assert line.startswith(
        "init_ has not run on this model: 13 parameter(s) hold the model's own init, where "
        "the rules at width 256, depth 6 multiply it (layers.N.attention.wo.weight "
        "(hidden_weight, 6 layers) x0.6667; layers.N.feed_forward.w2.weight (hidden_weight, "
        "6 layers) x0.6667; lm_head.weight (output_weight) x0.7071"
    ), line
    assert "including the multipliers this hook-free config carries in the init" in line
    titan.init_(model, 256, 6)  # torchtitan's own init, rescaled by the rule
    assert titan.CONFIG.check(model, 256, 6, container, **TITAN) == []


def test_torchtitan_container_group_values_are_checked(titan):
    model, container = _titan_model_and_container(titan)
    titan.init_(model, 256, 6)
    for opt in container.optimizers:
        for group in opt.param_groups:
            if "lm_head.weight" in group.get("param_names", []):
                group["lr"] *= 2
    problems = titan.CONFIG.check(model, 256, 6, container, **TITAN)
    assert "lm_head.weight (output_weight): lr is 0.003, the rule gives 0.0015" in problems
