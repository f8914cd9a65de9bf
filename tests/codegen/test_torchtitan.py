"""``spectral codegen --framework torchtitan`` against the installed torchtitan 0.3.0.

Its Llama3 debug model (256 wide, 6 layers) is built on CPU, the optimizers container from
the emitted ``param_groups``, and every parameter's lr, weight decay, eps and init std is
compared with the config's numbers: ``hparams`` for a parameter no multiplier scaled, and
``hparams`` moved by the symmetry (computed here from ``folded_multipliers`` and ``ABSORBED``)
for the embedding, the branch ends and the head. Then the container takes steps. torchtitan
0.3.0 cannot train its Llama3 on CPU (docs/torchtitan.md): FlexAttention has no CPU
backward, so the steps use gradients drawn at random, and the forward pass runs without
autograd.
"""

from __future__ import annotations

import importlib.util
import math
import re
import sys

import pytest

torch = pytest.importorskip("torch")
llama3 = pytest.importorskip("torchtitan.models.llama3")  # needs triton importable
titan_optim = pytest.importorskip("torchtitan.components.optimizer")

from spectral.codegen import render  # noqa: E402
from spectral.codegen.torchtitan import LLAMA3_PARAMETERS, group_patterns  # noqa: E402

WIDTH, DEPTH = 256, 6  # the debug model; base 128 x 4: r_n = 2, r_L = 1.5
BASE = {"lr": 3e-3, "weight_decay": 0.1, "eps": 1e-8}


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    source = render("adamw", base_width=128, base_depth=4, framework="torchtitan")
    path = tmp_path_factory.mktemp("titan") / "titan_config.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("titan_config", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _model():
    torch.manual_seed(0)
    return llama3.model_registry("debugmodel").model.build()


def test_parameter_names_are_the_packages() -> None:
    names = {re.sub(r"layers\.\d+\.", "layers.0.", n) for n, _ in _model().named_parameters()}
    assert names == set(LLAMA3_PARAMETERS)


def _container(cfg, model):
    config = titan_optim.OptimizersContainer.Config(
        param_groups=cfg.param_groups(WIDTH, DEPTH, **BASE), implementation="for-loop"
    )
    return config.build(model_parts=[model])


def _expected(cfg, role: str, layer: str | None) -> dict[str, float]:
    hp = cfg.hparams(WIDTH, DEPTH, init_std=0.02, **BASE)[role]
    if layer is None:
        return hp
    s = cfg.CONFIG.folded_multipliers(WIDTH, DEPTH)[layer]
    p, q = cfg.ABSORBED[cfg.OPTIMIZERS[role]]
    return {
        "lr": hp["lr"] * s ** (1 + p),
        "weight_decay": hp["weight_decay"] / s ** (1 + p),
        "eps": hp["eps"] / s**q,
        "init_std": hp["init_std"] * s,
    }


def test_every_parameter_gets_its_numbers(cfg) -> None:
    model = _model()
    cfg.init_(model, WIDTH, DEPTH, init_std=0.02)
    container = _container(cfg, model)
    groups = {}
    for opt in container.optimizers:
        for group in opt.param_groups:
            for p in group["params"]:
                assert id(p) not in groups  # matched exactly once
                groups[id(p)] = group
    named = dict(model.named_parameters())
    assert set(groups) == {id(p) for p in named.values()}
    carried = {name: layer for name, layer in _carriers(model)}
    assert sorted(set(carried.values())) == ["hidden", "input", "output"]
    per_param = cfg.parameter_hparams(model, WIDTH, DEPTH, init_std=0.02, **BASE)
    alpha = cfg.CONFIG.folded_multipliers(WIDTH, DEPTH)
    assert alpha["hidden"] == pytest.approx(1 / 1.5) and alpha["output"] == pytest.approx(0.5)
    for name, p in named.items():
        role = per_param[name]["role"]
        want = _expected(cfg, role, carried.get(name))
        group = groups[id(p)]
        for hp in ("lr", "weight_decay", "eps"):
            assert group[hp] == pytest.approx(want[hp], rel=1e-12), (name, hp)
            assert per_param[name][hp] == pytest.approx(want[hp], rel=1e-12), (name, hp)
        if p.ndim == 2:  # drawn N(0, std^2): 65k+ entries, std within 2%
            assert p.detach().std().item() == pytest.approx(want["init_std"], rel=0.02), name
        else:  # norm gains start at 1 (no multiplier scales a norm here)
            assert torch.all(p == 1.0), name


def _carriers(model):
    for pattern, _, layer in group_patterns():
        for name, _ in model.named_parameters():
            if layer is not None and re.search(pattern, name):
                yield name, layer


@pytest.mark.slow  # builds and steps the 6-layer debug model
def test_container_steps(cfg) -> None:
    model = _model()
    cfg.init_(model, WIDTH, DEPTH, init_std=0.02)
    container = _container(cfg, model)
    positions = torch.arange(16).unsqueeze(0).expand(2, 16)
    tokens = torch.randint(0, 2048, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = model(
            tokens, positions=positions, attention_masks=model.get_attention_masks(positions)
        )
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), tokens.flatten())
    assert math.isfinite(loss.item()) and abs(loss.item() - math.log(2048)) < 1.0
    per_param = cfg.parameter_hparams(model, WIDTH, DEPTH, init_std=0.02, **BASE)
    named = dict(model.named_parameters())
    g = torch.Generator().manual_seed(1)
    for step in range(3):
        before = {n: p.detach().clone() for n, p in named.items()}
        for p in named.values():
            p.grad = torch.randn(p.shape, generator=g)
        container.step()
        container.zero_grad()
        if step == 0:  # AdamW's first step: -lr * (sign(g) + wd * W), lr per parameter
            for n, p in named.items():
                lr, wd = per_param[n]["lr"], per_param[n]["weight_decay"]
                move = (before[n] - p.detach()) / lr - wd * before[n]
                assert move.abs().median().item() == pytest.approx(1.0, rel=1e-3), n
        assert all(not torch.equal(before[n], p) for n, p in named.items())


@pytest.mark.slow  # builds the 6-layer debug model
def test_backward_stops_on_cpu() -> None:
    """Where torchtitan 0.3.0 stops on CPU (docs/torchtitan.md): FlexAttention's backward."""
    model = _model()
    positions = torch.arange(8).unsqueeze(0)
    tokens = torch.zeros(1, 8, dtype=torch.long)
    masks = model.get_attention_masks(positions)
    with pytest.raises(NotImplementedError, match="FlexAttention does not support backward on CPU"):
        model(
            tokens, positions=positions, attention_masks=masks
        )  # raised by the forward, with grads on


# ------------------------------------------------------------------------------------
# init_ keeps torchtitan's own initialisation as the base (issue 35)
# ------------------------------------------------------------------------------------

SMALL_W, SMALL_D = 64, 2  # the base of the config below: every ratio 1


@pytest.fixture(scope="module")
def small_cfg(tmp_path_factory):
    source = render("adamw", base_width=SMALL_W, base_depth=SMALL_D, framework="torchtitan")
    path = tmp_path_factory.mktemp("titan_small") / "titan_small.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("titan_small", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _small(width: int, depth: int, seed: int = 0, vocab: int = 128, head_dim: int = 16):
    """torchtitan's Llama3 with its own init (embedding std 1, lm_head width^-1/2, output
    projections scaled by depth), built as torchtitan builds it (meta, to_empty,
    init_weights), with its SDPA attention module, which backpropagates on CPU."""
    from torchtitan.models.common import (
        ComplexRoPE,
        Embedding,
        Linear,
        RMSNorm,
        compute_ffn_hidden_dim,
    )
    from torchtitan.models.common.attention import ScaledDotProductAttention

    config = llama3.Llama3Model.Config(
        dim=width,
        vocab_size=vocab,
        tok_embeddings=Embedding.Config(
            num_embeddings=vocab, embedding_dim=width, param_init=llama3._EMBEDDING_INIT
        ),
        norm=RMSNorm.Config(normalized_shape=width, param_init=llama3._NORM_INIT),
        lm_head=Linear.Config(
            in_features=width, out_features=vocab, param_init=llama3._output_linear_init(width)
        ),
        layers=llama3._build_llama3_layers(
            n_layers=depth,
            dim=width,
            n_heads=width // head_dim,
            hidden_dim=compute_ffn_hidden_dim(width, multiple_of=16),
            rope=ComplexRoPE.Config(dim=head_dim, max_seq_len=32, theta=500000, scaling="llama"),
            attn_backend="flex",
        ),
    )
    for layer in config.layers:
        layer.attention.inner_attention = ScaledDotProductAttention.Config()
    torch.manual_seed(seed)
    with torch.device("meta"):
        model = config.build()
    model.to_empty(device="cpu")
    with torch.no_grad():
        model.init_weights(buffer_device=None)
    return model


def _titan_losses(model, container, steps: int = 3) -> list[float]:
    tokens = torch.randint(0, 128, (4, 17), generator=torch.Generator().manual_seed(1))
    positions = torch.arange(16).unsqueeze(0).expand(4, 16)
    losses = []
    for _ in range(steps):
        logits = model(tokens[:, :-1], positions=positions, attention_masks=None)
        loss = torch.nn.functional.cross_entropy(
            logits.flatten(0, 1).float(), tokens[:, 1:].flatten()
        )
        loss.backward()
        container.step()
        container.zero_grad()
        losses.append(loss.item())
    return losses


@pytest.fixture
def one_thread():  # two threads on a loaded two-core machine: the first steps take 20x as long
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_base_trains_as_torchtitans_own_setup(small_cfg, one_thread) -> None:
    """At the base the μP config is torchtitan's model: its own init kept, and its default
    AdamW (lr, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on every parameter) matched by
    the config's groups, which give the norm gains the same decay by naming their roles
    and take torchtitan's betas (no rule moves them): the same losses, bit for bit."""
    lr = 3e-3
    user = _small(SMALL_W, SMALL_D)
    user_opt = titan_optim.default_adamw(lr=lr).build(model_parts=[user])
    want = _titan_losses(user, user_opt)
    model = _small(SMALL_W, SMALL_D)
    own = {n: p.detach().clone() for n, p in model.named_parameters()}
    small_cfg.init_(model, SMALL_W, SMALL_D)
    assert all(torch.equal(own[n], p) for n, p in model.named_parameters())
    wd = {"default": 0.1, "input_bias": 0.1, "hidden_bias": 0.1}
    groups = small_cfg.param_groups(SMALL_W, SMALL_D, lr=lr, weight_decay=wd, eps=1e-8)
    for group in groups:
        group.optimizer_kwargs["betas"] = (0.9, 0.95)
    container = titan_optim.OptimizersContainer.Config(param_groups=groups).build(
        model_parts=[model]
    )
    assert _titan_losses(model, container) == want
    assert all(
        torch.equal(p, q) for p, q in zip(user.parameters(), model.parameters(), strict=True)
    )


def test_away_from_the_base_torchtitans_init_times_the_ratio(small_cfg, one_thread) -> None:
    """At 2x the width and depth: each parameter is torchtitan's own value times the rule's
    std ratio (hidden matrices r_n^-1/2) times the multiplier it carries (branch ends
    alpha_hidden = 1/r_L, lm_head alpha_out = 1/r_n), exactly; lm_head also times
    r_n^1/2, which divides out the dim^-1/2 of torchtitan's own std for it."""
    width, depth = 2 * SMALL_W, 2 * SMALL_D
    model = _small(width, depth)
    own = {n: p.detach().clone() for n, p in model.named_parameters()}
    small_cfg.init_(model, width, depth)
    hidden = 2**-0.5
    for name, p in model.named_parameters():
        if name.endswith(("wo.weight", "w2.weight")):
            f = hidden * 0.5
        elif name.endswith(("wqkv.weight", "w1.weight", "w3.weight")):
            f = hidden
        elif name == "lm_head.weight":
            f = 0.5 * 2**0.5
        else:  # the embedding (alpha_in = 1) and the norm gains
            f = 1.0
        assert torch.equal(p, own[name] * f), name
