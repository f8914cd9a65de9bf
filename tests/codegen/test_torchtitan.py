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
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
llama3 = pytest.importorskip("torchtitan.models.llama3")  # needs triton importable
titan_optim = pytest.importorskip("torchtitan.components.optimizer")

from spectral import errors as spectral_errors  # noqa: E402
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


# ------------------------------------------------------------------------------------
# No glue: torchtitan's ConfigManager, its stock Trainer, Muon-Kimi (issue 37)
# ------------------------------------------------------------------------------------

WORKER = Path(__file__).resolve().parent.parent / "titan_worker.py"
TRAIN_W, TRAIN_D = 128, 4  # tests/titan_worker.py's model; the config's base is 64 x 2
CLI = {"lr": 2e-3, "weight_decay": 0.05, "eps": 1e-9, "betas": (0.8, 0.9)}
TRUNC_3SIGMA = 0.986580  # the std of N(0, 1) truncated at +-3 (torchtitan's lm_head draw)


@pytest.fixture(scope="module")
def kimi(tmp_path_factory):
    """The Muon-Kimi + AdamW torchtitan module, base 64 x 2, importable as mup_titan."""
    folder = tmp_path_factory.mktemp("mup_titan")
    source = render("muon-kimi", "adamw", base_width=SMALL_W, base_depth=SMALL_D,
                    framework="torchtitan")  # fmt: skip
    (folder / "mup_titan.py").write_text(source)
    sys.path.insert(0, str(folder))
    sys.modules.pop("mup_titan", None)
    import mup_titan

    yield folder, mup_titan
    sys.path.remove(str(folder))
    sys.modules.pop("mup_titan", None)


@pytest.fixture(scope="module")
def trained(kimi):
    """torchtitan's stock Trainer, built by its ConfigManager from the registry function
    (the generated mup), trained 3 steps on CPU in a process of its own (its device is
    chosen when torchtitan is imported: tests/titan_worker.py)."""
    folder, _ = kimi
    out = folder / "trained.json"
    betas = [str(b) for b in CLI["betas"]]
    args = ["--module", "titan_worker", "--config", "tiny",
            "--optimizer.lr", str(CLI["lr"]), "--optimizer.weight-decay",
            str(CLI["weight_decay"]), "--optimizer.eps", str(CLI["eps"]),
            "--optimizer.betas", *betas, "--optimizer.implementation", "for-loop",
            "--training.max-norm", "inf", "--optimizer.max-norm", "1.0"]  # fmt: skip
    path = os.pathsep.join([str(folder), str(WORKER.parent)])
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    r = subprocess.run(
        [sys.executable, str(WORKER), str(out), *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(out.read_text())


def _cli_base(cfg) -> dict:
    biases = {r: CLI["weight_decay"] for r in ("input_bias", "hidden_bias")}
    wd = {"default": CLI["weight_decay"], **biases}
    return {"lr": CLI["lr"], "weight_decay": wd, "eps": CLI["eps"]}


@pytest.mark.slow  # one torchtitan Trainer process: 17-23 s here
def test_stock_trainer_groups_are_the_rules(kimi, trained) -> None:
    """Every parameter of the Trainer's model sits in one group whose lr, weight decay and
    eps are parameter_hparams' at 128 x 4 from the base values given on torchtitan's CLI;
    Muon (torch.optim.Muon, match_rms_adamw) trains the hidden matrices, AdamW the rest
    with the CLI's betas."""
    _, cfg = kimi
    assert trained["cli"]["lr"] == CLI["lr"] and trained["cli"]["betas"] == list(CLI["betas"])
    assert (trained["width"], trained["depth"]) == (TRAIN_W, TRAIN_D)  # read from the model
    model = _small(TRAIN_W, TRAIN_D)
    want = cfg.parameter_hparams(model, TRAIN_W, TRAIN_D, **_cli_base(cfg))
    groups = trained["groups"]
    assert set(groups) == set(want)  # every parameter, each in one group
    roles = set()
    for name, w in want.items():
        g = groups[name]
        roles.add((w["role"], g["optimizer"]))
        assert g["lr"] == pytest.approx(w["lr"], rel=1e-12), name
        assert g["weight_decay"] == pytest.approx(w["weight_decay"], rel=1e-12), name
        if w["role"] == "hidden_weight":
            assert g["optimizer"] == "Muon" and g["adjust_lr_fn"] == "match_rms_adamw", name
            assert g["momentum"] == 0.95 and "eps" not in w
        else:
            assert g["optimizer"] == "AdamW" and g["betas"] == list(CLI["betas"]), name
            assert g["eps"] == pytest.approx(w["eps"], rel=1e-12), name
    assert roles == {("hidden_weight", "Muon"), ("input_weight", "AdamW"),
                     ("output_weight", "AdamW"), ("hidden_bias", "AdamW"),
                     ("input_bias", "AdamW")}  # fmt: skip
    # anchors by hand (r_n = 2, r_L = 2): the embedding takes the CLI's lr as it is,
    # a hidden matrix lr / sqrt(r_n) and weight decay * sqrt(r_n) (Muon-Kimi's rule)
    assert groups["tok_embeddings.weight"]["lr"] == CLI["lr"]
    assert groups["layers.0.feed_forward.w1.weight"]["lr"] == pytest.approx(CLI["lr"] / 2**0.5)
    w1_wd = groups["layers.0.feed_forward.w1.weight"]["weight_decay"]
    assert w1_wd == pytest.approx(CLI["weight_decay"] * 2**0.5)


@pytest.mark.slow  # one torchtitan Trainer process: 17-23 s here
def test_check_reads_the_stock_trainers_container(trained) -> None:
    """check() on the stock Trainer's model and optimizer container (SpectralOptimizers):
    nothing to say, the init torchtitan's Trainer ran through the scaled param_init
    entries included; lm_head's group built at twice its lr is named."""
    assert trained["check"] == []
    wrong = trained["check_wrong_group"]
    # the group named with its numbers; then the groups' lrs, no longer one factor apart
    assert wrong[0] == "lm_head.weight (output_weight): lr is 0.002, the rule gives 0.001"
    assert len(wrong) == 2 and wrong[1].startswith("the param groups' learning rates no longer")


def _own_std(name: str, width: int) -> float:
    """torchtitan 0.3.0's own init std for Llama3's parameter ``name`` at ``width``."""
    if name == "tok_embeddings.weight":
        return 1.0
    if name == "lm_head.weight":
        return width**-0.5 * TRUNC_3SIGMA
    layer = int(name.split(".")[1])
    if name.endswith(("wo.weight", "w2.weight", "w3.weight")):  # _depth_init(layer_id)
        return 0.02 / (2 * (layer + 1)) ** 0.5
    return 0.02


@pytest.mark.slow  # one torchtitan Trainer process: 17-23 s here
def test_stock_trainer_inits_by_the_rule(kimi, trained) -> None:
    """Every matrix starts with torchtitan's own std at the *base* width times the rule's
    ratio (hidden r_n^-1/2) and the multiplier it carries (wo, w2: alpha_hidden = 1/r_L;
    lm_head: alpha_out = 1/r_n), within 2 %; the norm gains at 1."""
    _, cfg = kimi
    alpha = cfg.CONFIG.folded_multipliers(TRAIN_W, TRAIN_D)
    assert alpha["hidden"] == pytest.approx(0.5) and alpha["output"] == pytest.approx(0.5)
    hidden = cfg.CONFIG.init_ratio("hidden_weight", TRAIN_W, TRAIN_D)
    assert hidden == pytest.approx(2**-0.5)
    checked = 0
    for name, std in trained["init_std"].items():
        if "norm" in name:
            assert std == 0.0 and trained["init_mean_abs"][name] == 1.0, name
            continue
        want = _own_std(name, SMALL_W)  # the base width's own std
        if name.startswith("layers."):
            want *= hidden
        if name.endswith(("wo.weight", "w2.weight")):
            want *= alpha["hidden"]
        if name == "lm_head.weight":
            want *= alpha["output"]
        assert std == pytest.approx(want, rel=0.02), name
        checked += 1
    assert checked == 2 + 5 * TRAIN_D  # embedding, head, 5 matrices per layer


@pytest.mark.slow  # one torchtitan Trainer process: 17-23 s here
def test_stock_trainer_trains(trained) -> None:
    """Three real steps of torchtitan's train loop: every parameter moved, finite losses
    near ln(vocab) per token, spectral's exact clip on (--optimizer.max-norm)."""
    assert trained["steps"] == 3 and len(trained["losses"]) == 3
    assert all(trained["moved"].values())
    # the exact clip from the CLI, torchtitan's own off: the last step's hooked norm kept
    assert trained["cli"]["max_norm"] == math.inf and trained["cli"]["optimizer_max_norm"] == 1.0
    assert trained["hooked_norm"] is not None and trained["hooked_norm"] > 0
    tokens = 4 * 32  # the worker's batch x sequence; the loss is a sum over tokens
    assert all(abs(x / tokens - math.log(256)) < 1.0 for x in trained["losses"])


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_registry_answers_torchtitans_config_manager(kimi) -> None:
    """--module mup_titan --config llama3_debugmodel: torchtitan's own registry function
    through mup, the base lr from --optimizer.lr, the rest (betas, eps, weight decay) kept
    from its default_adamw; its model's param_init scaled; an unknown name refused."""
    from torchtitan.config import ConfigManager

    from spectral.frameworks.torchtitan import ScaledInit, SpectralOptimizers

    _, cfg = kimi
    config = ConfigManager().parse_args(
        ["--module", "mup_titan", "--config", "llama3_debugmodel", "--optimizer.lr", "1e-3"]
    )
    opt = config.optimizer
    assert isinstance(opt, SpectralOptimizers.Config)
    assert (opt.lr, opt.betas, opt.eps, opt.weight_decay) == (1e-3, (0.9, 0.95), 1e-8, 0.1)
    assert (opt.width, opt.depth) == (256, 6)  # torchtitan's debug model
    model = config.model_spec.model
    head = model.lm_head.param_init["weight"]
    assert isinstance(head, ScaledInit)  # lm_head: 1/r_n * sqrt(r_n) (its dim^-1/2 undone)
    assert head.factor == pytest.approx(0.25 * 4**0.5)
    assert not isinstance(model.tok_embeddings.param_init["weight"], ScaledInit)  # factor 1
    torch.manual_seed(0)
    with torch.device("meta"):
        built = model.build()
    built.to_empty(device="cpu")
    with torch.no_grad():
        built.init_weights(buffer_device=None)  # torchtitan's init, through the entries
    std = built.lm_head.weight.std().item()  # 64^-1/2 (the base's own) x alpha_out 1/4
    assert std == pytest.approx(64**-0.5 * TRUNC_3SIGMA / 4, rel=0.02)
    container = opt.build(model_parts=[built])
    kinds = {type(o).__name__: sum(len(g["params"]) for g in o.param_groups) for o in container}
    assert kinds == {"AdamW": 2 + 2 * 6 + 1, "Muon": 5 * 6}  # Muon: every hidden matrix
    with pytest.raises(AttributeError):
        _ = cfg.not_a_registry_function
    with pytest.raises(spectral_errors.ConfigError, match="already"):
        cfg.mup(config)


@pytest.mark.slow  # builds torchtitan's Llama3: seconds on the 2-core CPU
def test_tied_llama_is_refused_in_one_line(kimi) -> None:
    """torchtitan's Llama3 1B and 3B configs tie tok_embeddings and lm_head
    (enable_weight_tying=True): mup(config) refuses it before changing anything, and a
    container built for an untied config refuses tied model parts."""
    import importlib

    from spectral.frameworks.torchtitan import REGISTRY_MODULE

    _, cfg = kimi
    registry = importlib.import_module(REGISTRY_MODULE)
    config = registry.llama3_debugmodel()
    config.model_spec.model.enable_weight_tying = True
    message = r"^the model config has enable_weight_tying=True .* set enable_weight_tying=False in the model config$"
    with pytest.raises(spectral_errors.UnsupportedModelError, match=message):
        cfg.mup(config)
    assert type(config.optimizer).__name__ != "SpectralOptimizers.Config"
    assert "ScaledInit" not in repr(config.model_spec.model.lm_head.param_init)
    untied = cfg.mup(registry.llama3_debugmodel())
    model_config = untied.model_spec.model
    model_config.enable_weight_tying = True
    torch.manual_seed(0)
    tied = model_config.build()
    assert tied.tok_embeddings.weight is tied.lm_head.weight
    with pytest.raises(spectral_errors.UnsupportedModelError, match=message):
        untied.optimizer.build(model_parts=[tied])


@pytest.mark.slow  # torchtitan's own main in a process of its own: 40-80 s here
def test_cpu_example_runs_torchtitans_own_main(tmp_path) -> None:
    """examples/torchtitan_cpu, as its README says: the generated module in the working
    directory, then the launcher with torchrun's flags, which runs torchtitan.train.main
    (stock) on the CPU; one step of the tiny Llama trained, the process group closed."""
    root = Path(__file__).resolve().parents[2]
    spectral_cli = [sys.executable, "-m", "spectral", "codegen", "muon-kimi", "--others",
                    "adamw", "--base-width", "64", "--base-depth", "2", "--framework",
                    "torchtitan", "-o", "mup_titan.py"]  # fmt: skip
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "TITAN_STEPS": "1",
        "TITAN_WIDTH": "64",
        "TITAN_DEPTH": "2",
    }
    subprocess.run(spectral_cli, cwd=tmp_path, env=env, check=True, capture_output=True)
    launcher = root / "examples" / "torchtitan_cpu" / "cpu_launch.py"
    r = subprocess.run(
        [sys.executable, str(launcher), "--module", "tiny_llama", "--config", "tiny",
         "--optimizer.lr", "2e-3", "--training.max-norm", "inf"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    log = r.stdout + r.stderr
    assert re.search(r"step:\s+1\s.*loss:\s+\d", log), log[-2000:]
    assert "Training completed" in log and "Process group destroyed" in log


def test_install_init_at_the_base_changes_nothing(tmp_path) -> None:
    """At the base width and depth every factor is 1: torchtitan's param_init entries are
    kept as they are (the same callables), so the model starts bit for bit as its own."""
    from torchtitan.models.common import Linear

    from spectral.frameworks.torchtitan import TitanSetup, install_init

    source = render("muon-kimi", "adamw", base_width=256, base_depth=6, framework="torchtitan")
    path = tmp_path / "titan_base.py"
    path.write_text(source)
    spec_ = importlib.util.spec_from_file_location("titan_base", path)
    cfg = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(cfg)
    spec = llama3.model_registry("debugmodel")  # 256 wide, 6 layers: the base
    before = {fqn: dict(c.param_init) for fqn, c, _, _ in spec.model.traverse(Linear.Config)}
    setup = TitanSetup(cfg.CONFIG, cfg.GROUPS, cfg.OPTIMIZER_NAMES)
    factors = install_init(setup, spec.model, 256, 6)
    assert len(factors) == 2 + 6 * 7 + 1 and set(factors.values()) == {1.0}
    after = {fqn: c.param_init for fqn, c, _, _ in spec.model.traverse(Linear.Config)}
    assert after.keys() == before.keys()
    assert all(after[k][p] is before[k][p] for k in after for p in before[k])


@pytest.mark.slow  # seconds on the 2-core CPU: out of pytest -m "not slow"
def test_exact_clip_is_clip_by_hooked_norm(kimi, one_thread) -> None:
    """--optimizer.max-norm: the container clips as the hooked form would (the norm of the
    hooked gradients), the same gradients as the config's clip_grad_norm_
    (clip_by_hooked_norm) to float rounding, where torch's own clip of these gradients
    (torchtitan's training.max_norm) would differ."""
    from spectral.frameworks.torchtitan import SpectralOptimizers, TitanSetup

    _, cfg = kimi
    model = _small(TRAIN_W, TRAIN_D)
    setup = TitanSetup(cfg.CONFIG, cfg.GROUPS, cfg.OPTIMIZER_NAMES)
    container = SpectralOptimizers.Config(
        width=TRAIN_W, depth=TRAIN_D, setup=setup, max_norm=0.5, implementation="for-loop"
    ).build(model_parts=[model])
    assert set(container.carried.values()) == {1.0, 0.5}  # alpha_in 1; alpha_hidden = alpha_out
    g = torch.Generator().manual_seed(3)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=g) * 0.01
    raw = {n: p.grad.clone() for n, p in model.named_parameters()}
    torch_norm = torch.linalg.vector_norm(torch.stack([v.norm() for v in raw.values()]))
    want_norm = cfg.CONFIG.clip_grad_norm_(model, TRAIN_W, TRAIN_D, 0.5, adapter="torchtitan")
    want = {n: p.grad.clone() for n, p in model.named_parameters()}
    for n, p in model.named_parameters():
        p.grad.copy_(raw[n])
    norm = container.clip_hooked_norm(0.5)
    assert norm.item() == pytest.approx(want_norm.item(), rel=1e-6)
    assert norm.item() > 0.5 and abs(norm.item() / torch_norm.item() - 1) > 0.01  # binds
    for n, p in model.named_parameters():
        torch.testing.assert_close(p.grad, want[n], rtol=1e-6, atol=0)
    container.step()  # clips again (already within max_norm: unchanged) and steps
    assert container.hooked_norm.item() == pytest.approx(0.5, rel=1e-5)


@pytest.fixture(scope="module")
def along_titan(tmp_path_factory):
    """An AdamW torchtitan module with a base run (1000 steps x 8 sequences), importable as
    mup_titan_along."""
    folder = tmp_path_factory.mktemp("mup_titan_along")
    source = render("adamw", base_width=SMALL_W, base_depth=SMALL_D, framework="torchtitan",
                    base_run={"base_steps": 1000, "base_batch": 8})  # fmt: skip
    (folder / "mup_titan_along.py").write_text(source)
    sys.path.insert(0, str(folder))
    sys.modules.pop("mup_titan_along", None)
    import mup_titan_along

    yield mup_titan_along
    sys.path.remove(str(folder))
    sys.modules.pop("mup_titan_along", None)


@pytest.mark.slow  # builds torchtitan's debug model twice
def test_stock_trainer_config_reads_the_run(along_titan) -> None:
    """torchtitan's ConfigManager (the stock Trainer's path): --training.steps and
    --training.global-batch-size reach the container after the command line is read, and
    its groups are param_groups' at that run (lr, weight decay, eps, betas moved against
    BASE_RUN); the base run's flags give the groups of no run, bit for bit."""
    from torchtitan.config import ConfigManager

    from spectral.frameworks.torchtitan import SpectralOptimizers

    def groups(*flags: str) -> list:
        config = ConfigManager().parse_args(
            ["--module", "mup_titan_along", "--config", "llama3_debugmodel", "--optimizer.lr", "1e-3", *flags]
        )
        opt = config.optimizer
        assert isinstance(opt, SpectralOptimizers.Config)
        torch.manual_seed(0)
        with torch.device("meta"):
            built = config.model_spec.model.build()
        built.to_empty(device="cpu")
        container = opt.build(model_parts=[built])
        by_name = {}
        for o in container:
            for g in o.param_groups:
                for name in g["param_names"]:
                    by_name[name] = {k: g[k] for k in ("lr", "weight_decay", "eps", "betas")}
        return opt, by_name

    opt, moved = groups("--training.steps", "4000", "--training.global-batch-size", "32")
    assert (opt.steps, opt.batch) == (4000, 32)
    from spectral.scaling import BIAS_ROLES

    # debugmodel's default_adamw (its decay on every parameter, the norm gains too), --optimizer.lr
    wd = {"default": 0.1, **{r: 0.1 for r in along_titan.CONFIG.optimizers if r in BIAS_ROLES}}
    own = {"lr": 1e-3, "weight_decay": wd, "eps": 1e-8}
    want = along_titan.param_groups(256, 6, **own, options={"AdamW": {"betas": (0.9, 0.95)}}, steps=4000, batch=32)
    assert len({tuple(g.optimizer_kwargs["betas"]) for g in want}) == 1
    betas = want[0].optimizer_kwargs["betas"]
    assert betas == (pytest.approx(1 - 0.1 * 4), pytest.approx(1 - 0.05 * 4))  # r_B = 4
    by_pattern = {g.pattern: g.optimizer_kwargs for g in want}
    for name, got in moved.items():
        kwargs = next(kw for pattern, kw in by_pattern.items() if re.search(pattern, name))
        for key in ("lr", "weight_decay", "eps"):
            assert got[key] == pytest.approx(kwargs[key], rel=1e-12), (name, key)
        assert tuple(got["betas"]) == betas
    _, at_base = groups("--training.steps", "1000", "--training.global-batch-size", "8")
    _, plain = groups("--training.steps", "1000")  # batch unset: the base's (and a warning)
    assert at_base == plain
    unmoved = along_titan.param_groups(256, 6, **own, options={"AdamW": {"betas": (0.9, 0.95)}})
    by_pattern = {g.pattern: g.optimizer_kwargs for g in unmoved}
    for name, got in at_base.items():
        kwargs = next(kw for pattern, kw in by_pattern.items() if re.search(pattern, name))
        assert {k: got[k] for k in ("lr", "weight_decay", "eps")} == {k: kwargs[k] for k in ("lr", "weight_decay", "eps")}
        assert tuple(got["betas"]) == (0.9, 0.95)
