"""``init_`` keeps the model's own initialisation as the base (issue 35, item 1).

At the base width and depth the μP config is the user's model: the reference GPT, a Hugging
Face Llama and GPT-2 (tiny, built from config objects) and torchtitan 0.3.0's Llama3 (its
SDPA attention module, which backpropagates on CPU) train loss for loss, bit for bit in
float32, with the same model and the user's own optimizer at the same lr. Away from the
base every parameter is the model's own value times the rule's std ratio, exactly, in the
hooked and the hook-free form; ``init_std=`` still replaces the model's values by draws.
"""

from __future__ import annotations

import dataclasses
import importlib
import math

import pytest

torch = pytest.importorskip("torch")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from spectral.codegen.torch import load_generated  # noqa: E402
from spectral.models import GPT, ResidualMLP  # noqa: E402
from spectral.models.torch import Llama  # noqa: E402
from spectral.torch.model.placement import place  # noqa: E402
from tests.models import VOCAB, hf_gpt2, hf_llama  # noqa: E402

# imported here, once, rather than by the first test that builds one (seconds each)
importlib.import_module("torch._dynamo")  # torch.optim's first optimizer imports it
from transformers import GPT2LMHeadModel, LlamaForCausalLM  # noqa: E402, F401

WIDTH, DEPTH = 64, 2  # the base: every ratio 1
LR, WD, STEPS = 3e-3, 0.1, 3


@pytest.fixture(autouse=True)
def one_thread():  # two threads on a loaded two-core machine: the first steps take 20x as long
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    return load_generated(
        "adamw", base_width=WIDTH, base_depth=DEPTH, folder=tmp_path_factory.mktemp("own")
    )


@pytest.fixture(scope="module")
def free(tmp_path_factory):  # the hook-free form
    folder = tmp_path_factory.mktemp("own_free")
    return load_generated("adamw", base_width=WIDTH, base_depth=DEPTH, folder=folder, absorb=True)


def _user_adamw(model):
    """The user's own optimizer, nanoGPT's: AdamW, weight decay on the matrices only."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": WD},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=LR)


def _logits(out):
    return out.logits if hasattr(out, "logits") else out


def _losses(model, opt, tokens):
    losses = []
    for _ in range(STEPS):
        logits = _logits(model(tokens[:, :-1]))
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def _tokens(vocab):
    return torch.randint(0, vocab, (4, 17), generator=torch.Generator().manual_seed(1))


BUILDERS = {
    "gpt": (lambda w, d, m=None: GPT(w, d, head_dim=16, block_size=32, multipliers=m), 256),
    # the sweep's torchtitan-like Llama (spectral sweep --model llama)
    "llama": (lambda w, d, m=None: Llama(w, d, head_dim=16, block_size=32, multipliers=m), 256),
    "hf_llama": (lambda w, d, m=None: hf_llama(w, d), VOCAB),
    "hf_gpt2": (lambda w, d, m=None: hf_gpt2(w, d), VOCAB),
}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_base_trains_as_the_users_model(cfg, name):
    """μP at the base = the user's model and optimizer: the same losses, bit for bit."""
    build, vocab = BUILDERS[name]
    torch.manual_seed(0)
    user = build(WIDTH, DEPTH)
    user_losses = _losses(user, _user_adamw(user), _tokens(vocab))
    torch.manual_seed(0)
    model = build(WIDTH, DEPTH, cfg)
    own = {n: p.detach().clone() for n, p in model.named_parameters()}
    if name not in ("gpt", "llama"):  # the reference models apply them themselves
        cfg.apply_multipliers(model, WIDTH, DEPTH)
    cfg.init_(model, WIDTH, DEPTH)
    assert all(torch.equal(own[n], p) for n, p in model.named_parameters())
    opt = cfg.build_optimizers(model, WIDTH, DEPTH, lr=LR, weight_decay=WD)
    assert _losses(model, opt, _tokens(vocab)) == user_losses
    assert all(
        torch.equal(p, q) for p, q in zip(user.parameters(), model.parameters(), strict=True)
    )


def test_init_std_still_draws(cfg):
    """init_std= given: the model's values are replaced by N(0, init_std_of(role)^2)."""
    torch.manual_seed(0)
    model = GPT(WIDTH, DEPTH, head_dim=16, block_size=32)
    cfg.init_(model, WIDTH, DEPTH, init_std=0.5)
    w = model.transformer.h[0].mlp.c_fc.weight
    assert w.std().item() == pytest.approx(0.5, rel=0.05)  # its own is 0.02
    assert torch.all(model.transformer.h[0].mlp.c_fc.bias == 0)


def _own(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def test_away_from_the_base_each_parameter_is_its_own_times_the_ratio(cfg):
    """At 4x the width and 2x the depth: hidden matrices x r_n^-1/2 = 0.5, the rest x 1."""
    torch.manual_seed(0)
    model = GPT(4 * WIDTH, 2 * DEPTH, head_dim=16, block_size=32)
    own = _own(model)
    cfg.init_(model, 4 * WIDTH, 2 * DEPTH)
    factors = cfg.CONFIG.init_factors(model, 4 * WIDTH, 2 * DEPTH)
    for name, p in model.named_parameters():
        hidden = ".h." in name and p.ndim == 2
        assert factors[name] == (0.5 if hidden else 1.0), name
        assert torch.equal(p, own[name] * factors[name]), name


def test_hook_free_carries_the_multiplier_on_its_own_init(free):
    """The hook-free form: a carrier is its own value x the ratio x its multiplier."""
    torch.manual_seed(0)
    width, depth = 4 * WIDTH, 2 * DEPTH  # r_n = 4, r_L = 2: alpha_hidden 1/2, alpha_out 1/4
    model = GPT(width, depth, head_dim=16, block_size=32, multipliers=free)
    own = _own(model)
    free.init_(model, width, depth)
    want = {"lm_head.weight": 0.25, "mlp.c_proj.weight": 0.25, "attn.c_proj.weight": 0.25}
    for name, p in model.named_parameters():
        f = next((v for k, v in want.items() if name.endswith(k)), None)
        if f is None:
            f = 0.5 if ".h." in name and p.ndim == 2 else 1.0  # a hidden matrix: r_n^-1/2
        if name.endswith("c_proj.bias"):
            f = 0.5  # a branch end's bias carries alpha_hidden
        assert torch.equal(p, own[name] * f), name
    torch.manual_seed(0)
    at_base = GPT(WIDTH, DEPTH, head_dim=16, block_size=32, multipliers=free)
    own = _own(at_base)
    free.init_(at_base, WIDTH, DEPTH)
    assert all(torch.equal(own[n], p) for n, p in at_base.named_parameters())


@settings(max_examples=25)
@given(
    seed=st.integers(0, 2**31 - 1),
    base_width=st.integers(2, 48),
    base_depth=st.integers(1, 4),
    width_factor=st.sampled_from([1, 2, 3, 8]),
    depth_factor=st.sampled_from([1, 2, 5]),
)
@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_init_is_the_own_init_times_the_rules_ratio(
    cfg, seed, base_width, base_depth, width_factor, depth_factor
):
    """For any base size and seed: init_ at the base is the identity, and at any size each
    parameter is its own value times sqrt(r_n^a r_L^b) of its role's variance rule, times
    r_n^1/2 where torch's default init drew it with std 1/sqrt(fan_in) and its fan-in
    grows (that move undone: spectral.torch.model.own_init)."""
    rules = dataclasses.replace(cfg.CONFIG, base_width=base_width, base_depth=base_depth)
    width, depth = base_width * width_factor, base_depth * depth_factor
    torch.manual_seed(seed)
    model = ResidualMLP(3, 5, width, depth)
    own = _own(model)
    placement = place(model, rules)
    own_law = dict(placement.own_exponents)  # read from the model's own values
    rules.init_(model, width, depth)
    roles = {name: role for name, _, role, _ in placement}
    for name, p in model.named_parameters():
        a, b = rules.rules[roles[name]]["init_var"]
        ratio = math.sqrt(float(width_factor) ** a * float(depth_factor) ** b)
        assert rules.init_ratio(roles[name], width, depth) == ratio
        law = float(width_factor) ** -own_law.get(name, 0.0)
        assert torch.equal(p, own[name] * (ratio * law)), name
        if width_factor == depth_factor == 1:
            assert torch.equal(p, own[name])
