"""``spectral codegen --framework megatron`` against the installed megatron-core 0.16.1.

A tiny GPTModel (local spec: Megatron's own ColumnParallelLinear / RowParallelLinear /
VocabParallelEmbedding, learned positions, linear biases, untied head) is built on CPU in
one gloo process with the generated ``transformer_config`` values, and Megatron's own
``get_megatron_optimizer`` builds its optimizer with the generated ``config_overrides``;
Megatron's ``OptimizerParamScheduler`` then writes every group's lr and weight decay. Every
parameter's lr, weight decay and eps and every init std is compared with the config's
``parameter_hparams``. What needs CUDA (docs/megatron.md): ``FP32Optimizer.__init__`` puts
its loss scale on ``device='cuda'`` (replaced here by the same line on the CPU), Megatron's
DDP wrapper (``ddp_config`` is set on the bare model instead) and the forward pass
(DotProductAttention's buffer), so the step below uses gradients drawn at random.
"""

from __future__ import annotations

import importlib.util
import math
import re
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("megatron.core")

import torch.distributed as dist  # noqa: E402
from megatron.core import parallel_state  # noqa: E402
from megatron.core.distributed import DistributedDataParallelConfig  # noqa: E402
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec  # noqa: E402
from megatron.core.models.gpt.gpt_model import GPTModel  # noqa: E402
from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer  # noqa: E402
from megatron.core.optimizer.optimizer import FP32Optimizer, MegatronOptimizer  # noqa: E402
from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler  # noqa: E402
from megatron.core.transformer.transformer_config import TransformerConfig  # noqa: E402

from spectral.codegen import render  # noqa: E402
from spectral.codegen.megatron import GPT_PARAMETERS  # noqa: E402
from spectral.errors import ConfigError, SpecError  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")

BASE_WIDTH, BASE_DEPTH = 64, 2
WIDTH, DEPTH = 128, 3  # r_n = 2, r_L = 1.5: every multiplier differs from 1
HEAD_DIM, VOCAB, SEQ = 32, 512, 256
LR, MIN_LR, WD, EPS = 3e-3, 3e-4, 0.1, 1e-8


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    source = render("adamw", base_width=BASE_WIDTH, base_depth=BASE_DEPTH, framework="megatron")
    path = tmp_path_factory.mktemp("megatron") / "megatron_config.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("megatron_config", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def one_process():
    """torch.distributed with one gloo process (an in-memory store: no port) and
    Megatron's parallel state, as get_megatron_optimizer needs them."""
    started = not dist.is_initialized()
    if started:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    yield
    parallel_state.destroy_model_parallel()
    if started:
        dist.destroy_process_group()


def _model(
    cfg, width=WIDTH, depth=DEPTH, *, tied=False, plain=False, experts=0, shared=True, **extra
):
    """A GPTModel drawn from seed 0: with the generated init values, or Megatron's own
    defaults (``plain``: TransformerConfig(init_method_std=0.02) and nothing else).
    ``experts``: a mixture of that many SequentialMLP experts (top 2) in every layer, with a
    gated shared expert (which Megatron builds without biases only: add_bias_linear=False
    unless ``shared=False``), every expert's size twice the width."""
    torch.manual_seed(0)
    init = (
        {"init_method_std": 0.02} if plain else cfg.transformer_config(width, depth, init_std=0.02)
    )
    config = TransformerConfig(
        num_layers=depth,
        hidden_size=width,
        num_attention_heads=width // HEAD_DIM,
        kv_channels=HEAD_DIM,
        use_cpu_initialization=True,
        **{
            "add_bias_linear": not (experts and shared),
            **init,
            **(_moe(width, experts, shared) if experts else {}),
            **extra,
        },
    )
    model = GPTModel(
        config,
        get_gpt_layer_local_spec(num_experts=experts or None, qk_layernorm=config.qk_layernorm),
        vocab_size=VOCAB,
        max_sequence_length=SEQ,
        position_embedding_type="learned_absolute",
        share_embeddings_and_output_weights=tied,
    )
    model.ddp_config = DistributedDataParallelConfig()  # what Megatron's DDP (CUDA) holds
    return model


def _moe(width: int, experts: int, shared: bool) -> dict:
    return {
        "num_moe_experts": experts,
        "moe_router_topk": 2,
        "moe_ffn_hidden_size": 2 * width,
        "moe_shared_expert_intermediate_size": 2 * width if shared else None,
        "moe_shared_expert_gate": shared,
    }


@pytest.fixture(scope="module")
def model(cfg, one_process):
    m = _model(cfg)
    assert cfg.scale_output_layer_(m, WIDTH, DEPTH, init_std=0.02) == 1
    return m


def _cpu_fp32_init(self, optimizer, config, init_state_fn):
    """FP32Optimizer.__init__ with its loss scale on the CPU (Megatron's: device='cuda')."""
    MegatronOptimizer.__init__(self, optimizer, config, init_state_fn)
    self._scale = torch.tensor([1.0], dtype=torch.float)
    self.is_stub_optimizer = optimizer is None


def _names(model) -> set[str]:
    return {
        re.sub(r"(layers|local_experts)\.\d+\.", r"\1.0.", n) for n, _ in model.named_parameters()
    }


MOE = {n for n in GPT_PARAMETERS if re.search(r"\.mlp\.(router|experts|shared_experts)\.", n)}
GROUPED = {n for n in MOE if re.search(r"\.experts\.(weight\d|linear_fc\d\.weight0)$", n)}


def test_parameter_names_are_the_packages(cfg, model) -> None:
    fused = {n for n in GPT_PARAMETERS if "layer_norm_" in n}  # Transformer Engine's spec
    qk = {n for n in GPT_PARAMETERS if re.search(r"\.[qk]_layernorm\.", n)}
    assert _names(model) == set(GPT_PARAMETERS) - fused - qk - MOE
    assert _names(_model(cfg, qk_layernorm=True)) == set(GPT_PARAMETERS) - fused - MOE
    dense_mlp = {n for n in GPT_PARAMETERS if ".mlp.linear_fc" in n}
    moe = set(GPT_PARAMETERS) - fused - qk - GROUPED - dense_mlp
    shared = {n for n in moe if ".shared_experts." in n}
    linear_biases = {n for n in GPT_PARAMETERS if re.search(r"(linear_\w+|router)\.bias$", n)}
    assert _names(_model(cfg, experts=4)) == moe - linear_biases
    assert _names(_model(cfg, experts=4, shared=False)) == moe - shared


def _megatrons_groups(cfg, model, monkeypatch, **overrides):
    """name -> the param group Megatron's own get_megatron_optimizer and
    OptimizerParamScheduler (at the end of a warmup from 0) give each parameter."""
    monkeypatch.setattr(FP32Optimizer, "__init__", _cpu_fp32_init)
    optimizer = get_megatron_optimizer(
        OptimizerConfig(
            optimizer=cfg.MEGATRON_OPTIMIZER, lr=LR, min_lr=MIN_LR, weight_decay=WD,
            adam_eps=EPS, clip_grad=0.0,
        ),
        [model],
        config_overrides=cfg.config_overrides(
            WIDTH, DEPTH, lr=LR, min_lr=MIN_LR, weight_decay=WD, eps=EPS, **overrides
        ),
    )  # fmt: skip
    OptimizerParamScheduler(
        optimizer, init_lr=0.0, max_lr=LR, min_lr=MIN_LR, lr_warmup_steps=2,
        lr_decay_steps=10, lr_decay_style="cosine", start_wd=WD, end_wd=WD,
        wd_incr_steps=10, wd_incr_style="constant",
    ).step(2)  # fmt: skip
    group_of = {id(p): g for g in optimizer.param_groups for p in g["params"]}
    return {name: group_of[id(p)] for name, p in model.named_parameters()}


def test_qk_layernorm_gains_get_their_rule(cfg, one_process, monkeypatch) -> None:
    """qk_layernorm=True: the head-sized gains of q_layernorm / k_layernorm (and their
    biases) are hidden_bias, matched by one key each, and Megatron's optimizer gives them
    parameter_hparams' numbers (as every other parameter)."""
    model = _model(cfg, qk_layernorm=True)
    assert cfg.scale_output_layer_(model, WIDTH, DEPTH, init_std=0.02) == 1
    assert cfg.check_overrides(model, cfg.config_overrides(WIDTH, DEPTH, lr=LR)) == []
    want = cfg.parameter_hparams(model, WIDTH, DEPTH, lr=LR, weight_decay=WD, eps=EPS)
    groups = _megatrons_groups(cfg, model, monkeypatch)
    qk = [n for n in groups if re.search(r"\.[qk]_layernorm\.", n)]
    assert len(qk) == 4 * DEPTH
    assert {want[n]["role"] for n in qk} == {"hidden_bias"}
    for name, group in groups.items():
        for key in ("lr", "weight_decay", "eps"):
            assert group[key] == pytest.approx(want[name][key], rel=1e-12), (name, key)


EXPERTS = 4


def _carriers(model) -> dict[str, float]:
    return {n: v["carrier_factor"] for n, v in model.items() if v["carrier_factor"] != 1.0}


def test_megatrons_groups_get_the_betas_the_batch_rule_moves(cfg, one_process, monkeypatch) -> None:
    """Adam's square-root rule along the batch: 1 - beta1 and 1 - beta2 times r_B (4 here),
    from the OptimizerConfig's betas, in every group Megatron's own optimizer builds; at the
    base run the overrides carry no betas (as before, bit for bit)."""
    assert cfg.config_overrides(WIDTH, DEPTH, lr=LR, batch=32, base_batch=32) == cfg.config_overrides(
        WIDTH, DEPTH, lr=LR
    )
    assert all("betas" not in o for o in cfg.config_overrides(WIDTH, DEPTH, lr=LR).values())
    moved = cfg.config_overrides(WIDTH, DEPTH, lr=LR, batch=128, base_batch=32, betas=(0.9, 0.95))
    assert moved and all(o["betas"] == (pytest.approx(0.6), pytest.approx(0.8)) for o in moved.values())
    with pytest.raises(ConfigError, match=r"betas: the batch rule moves 1 - beta = 0.1 by 16"):
        cfg.config_overrides(WIDTH, DEPTH, lr=LR, batch=512, base_batch=32)
    with pytest.raises(ConfigError, match=r"betas must each be in \[0, 1\)"):
        cfg.config_overrides(WIDTH, DEPTH, lr=LR, betas=(0.9, 1.0))
    model = _model(cfg)
    cfg.scale_output_layer_(model, WIDTH, DEPTH, init_std=0.02)
    base = _megatrons_groups(cfg, model, monkeypatch)
    assert {tuple(g["betas"]) for g in base.values()} == {(0.9, 0.999)}  # OptimizerConfig's
    groups = _megatrons_groups(cfg, model, monkeypatch, batch=128, base_batch=32)
    assert groups.keys() == base.keys()
    for name, group in groups.items():
        assert tuple(group["betas"]) == (pytest.approx(0.6, rel=1e-12), pytest.approx(0.996, rel=1e-12)), name


def test_moe_groups_get_their_rule(cfg, one_process, monkeypatch) -> None:
    """A mixture of experts (SequentialMLP, 4 experts, a gated shared expert) at 128 x 3:
    the router and the shared experts' gate are router_weight, every expert's linear_fc2
    (the shared one's too) carries alpha_hidden, and Megatron's own optimizer (the expert
    parameters in its expert-parallel optimizer) gives every parameter exactly
    parameter_hparams' lr, weight decay and eps."""
    model = _model(cfg, experts=EXPERTS)
    assert cfg.scale_output_layer_(model, WIDTH, DEPTH, init_std=0.02) == 1
    overrides = cfg.config_overrides(WIDTH, DEPTH, lr=LR, min_lr=MIN_LR, weight_decay=WD)
    assert cfg.check_overrides(model, overrides) == []
    want = cfg.parameter_hparams(model, WIDTH, DEPTH, lr=LR, weight_decay=WD, eps=EPS)
    routers = {
        n for n in want if re.search(r"mlp\.(router\.weight|shared_experts\.gate_weight)$", n)
    }
    assert len(routers) == 2 * DEPTH
    assert {want[n]["role"] for n in routers} == {"router_weight"}
    folded = cfg.CONFIG.folded_multipliers(WIDTH, DEPTH)
    hidden = folded["hidden"]
    ends = {n for n in want if re.search(r"(linear_proj|linear_fc2)\.weight$", n)}
    assert len(ends) == DEPTH * (1 + EXPERTS + 1)
    assert folded["input"] == 1.0  # AdamW: the embeddings carry no factor
    assert _carriers(want) == {
        **dict.fromkeys(ends, hidden),
        "output_layer.weight": folded["output"],
    }
    groups = _megatrons_groups(cfg, model, monkeypatch)
    assert groups.keys() == want.keys()
    for name, group in groups.items():
        for key in ("lr", "weight_decay", "eps"):
            assert group[key] == pytest.approx(want[name][key], rel=1e-12), (name, key)
    hp = cfg.hparams(WIDTH, DEPTH, lr=LR, weight_decay=WD, eps=EPS)
    router = groups["decoder.layers.2.mlp.router.weight"]
    assert router["lr"] == pytest.approx(hp["router_weight"]["lr"], rel=1e-12)
    assert router["eps"] == pytest.approx(hp["router_weight"]["eps"], rel=1e-12)
    expert = groups["decoder.layers.0.mlp.experts.local_experts.3.linear_fc2.weight"]
    assert expert["lr"] == pytest.approx(hp["hidden_weight"]["lr"] * hidden, rel=1e-12)
    assert expert["eps"] == pytest.approx(hp["hidden_weight"]["eps"] / hidden, rel=1e-12)


def test_moe_init_follows_the_rules(cfg, one_process) -> None:
    """Megatron draws the router and the shared experts' gate with init_method (the hidden
    std, std / sqrt(r_n)); scale_output_layer_ multiplies them, exactly, to the router's
    std / r_n, once (check_overrides names them before); every expert matrix is at its
    rule's std (linear_fc2 at Megatron's branch-end base, as the dense branch ends)."""
    drawn = dict(_model(cfg, experts=EXPERTS).named_parameters())
    model = _model(cfg, experts=EXPERTS)
    overrides = cfg.config_overrides(WIDTH, DEPTH, lr=LR)
    unscaled = cfg.check_overrides(model, overrides)
    assert len(unscaled) == 2 * DEPTH + 1  # every router and gate, and the head
    assert unscaled[0] == (
        "decoder.layers.0.mlp.router.weight: scale_output_layer_ has not run (the router "
        "starts at the hidden matrices' std, not its rule's)"
    )
    cfg.scale_output_layer_(model, WIDTH, DEPTH, init_std=0.02)
    cfg.scale_output_layer_(model, WIDTH, DEPTH, init_std=0.02)  # once
    stds = cfg.init_stds(WIDTH, DEPTH, init_std=0.02)
    assert stds["router"] == pytest.approx(0.02 / 2)  # r_n = 2
    want = cfg.parameter_hparams(model, WIDTH, DEPTH, lr=LR, init_std=0.02)
    megatrons = 1 / math.sqrt(2 * BASE_DEPTH)
    for name, p in model.named_parameters():
        if want[name]["role"] == "router_weight":
            assert want[name]["init_std"] == stds["router"]
            assert torch.equal(p.detach(), drawn[name] * (stds["router"] / stds["init_method"]))
        elif ".experts." in name and p.dim() == 2:
            end = name.endswith("linear_fc2.weight")
            rule = want[name]["init_std"] * (megatrons if end else 1.0)
            assert p.detach().std().item() == pytest.approx(rule, rel=0.03), name
    with pytest.raises(ConfigError, match="already multiplied decoder.layers.0.mlp.router.weight"):
        cfg.scale_output_layer_(model, 2 * WIDTH, DEPTH, init_std=0.02)
    assert cfg.check_overrides(model, overrides) == []


def test_moe_base_is_megatrons_bit_for_bit(cfg, one_process) -> None:
    """At the base width and depth the MoE GPTModel from the generated values, after
    scale_output_layer_ (router factor 1), is Megatron's own drawn from the same seed."""
    plain = dict(
        _model(cfg, BASE_WIDTH, BASE_DEPTH, plain=True, experts=EXPERTS).named_parameters()
    )
    model = _model(cfg, BASE_WIDTH, BASE_DEPTH, experts=EXPERTS)
    assert cfg.scale_output_layer_(model, BASE_WIDTH, BASE_DEPTH, init_std=0.02) == 1
    ours = dict(model.named_parameters())
    assert ours.keys() == plain.keys()
    assert any(".mlp.router." in n for n in ours)
    assert [n for n in ours if not torch.equal(ours[n], plain[n])] == []


def _grouped_stand_in(width: int, depth: int, legacy: bool):
    """Megatron's MoE layer with grouped experts, names and class names only (TEGroupedMLP
    needs Transformer Engine, the legacy GroupedMLP the grouped_gemm package): weight0 ..
    weight{E-1} of TEColumnParallelGroupedLinear / TERowParallelGroupedLinear, or one
    weight1 / weight2 holding every expert."""
    from torch import nn

    gpt = _te_stand_in(width, depth)
    ffn = 2 * width
    for layer in gpt.decoder.layers:
        del layer.mlp
        mlp = type("MoELayer", (nn.Module,), {})()
        mlp.router = type("TopKRouter", (nn.Module,), {})()
        mlp.router.weight = nn.Parameter(torch.zeros(EXPERTS, width))
        if legacy:
            mlp.experts = type("GroupedMLP", (nn.Module,), {})()
            mlp.experts.weight1 = nn.Parameter(torch.zeros(width, EXPERTS * ffn))
            mlp.experts.weight2 = nn.Parameter(torch.zeros(EXPERTS * ffn, width))
        else:
            mlp.experts = type("TEGroupedMLP", (nn.Module,), {})()
            for fc, kind, shape in (
                ("linear_fc1", "TEColumnParallelGroupedLinear", (ffn, width)),
                ("linear_fc2", "TERowParallelGroupedLinear", (width, ffn)),
            ):
                linear = type(kind, (nn.Module,), {})()
                for e in range(EXPERTS):
                    setattr(linear, f"weight{e}", nn.Parameter(torch.zeros(shape)))
                setattr(mlp.experts, fc, linear)
        layer.mlp = mlp
    return gpt


@pytest.mark.parametrize("legacy", [False, True], ids=["TEGroupedMLP", "GroupedMLP"])
def test_grouped_experts_by_name(cfg, one_process, legacy) -> None:
    """Grouped experts' parameters: each matched by one key, whose numbers are those
    parameter_hparams gives the SequentialMLP expert in its place (linear_fc1 / weight1
    hidden, linear_fc2 / weight2 carrying alpha_hidden); parameter_hparams itself refuses
    them in one line (the torch runtime places a multiplier on a module)."""
    grouped = _grouped_stand_in(WIDTH, DEPTH, legacy)
    overrides = cfg.config_overrides(WIDTH, DEPTH, lr=LR, weight_decay=WD, eps=EPS)
    assert cfg.scale_output_layer_(grouped, WIDTH, DEPTH, init_std=0.02) == 0
    assert cfg.check_overrides(grouped, overrides) == []
    sequential = _model(cfg, experts=EXPERTS, shared=False, add_bias_linear=False)
    twin = cfg.parameter_hparams(sequential, WIDTH, DEPTH, lr=LR, weight_decay=WD, eps=EPS)
    expert = re.compile(r"\.experts\.(weight([12])|linear_fc([12])\.weight\d)$")
    checked = 0
    for name, p in grouped.named_parameters():
        found = expert.search(name)
        if not found:
            continue
        fc = found.group(2) or found.group(3)
        mine = name[: found.start()] + f".experts.local_experts.1.linear_fc{fc}.weight"
        (key,) = [k for k in overrides if k.matches(p, name)]
        got = overrides[key]
        assert got["max_lr"] == pytest.approx(twin[mine]["lr"], rel=1e-12), name
        assert got["wd_mult"] * WD == pytest.approx(twin[mine]["weight_decay"], rel=1e-12)
        assert got["eps"] == pytest.approx(twin[mine]["eps"], rel=1e-12), name
        checked += 1
    assert checked == DEPTH * (2 if legacy else 2 * EXPERTS)
    with pytest.raises(ConfigError, match=r"^parameter_hparams: decoder.layers.0.mlp.experts \("):
        cfg.parameter_hparams(grouped, WIDTH, DEPTH, lr=LR)


def test_router_multiplier_other_than_one_is_refused(cfg) -> None:
    with pytest.raises(ConfigError, match="router's base multiplier 2.0 is not absorbed"):
        cfg.config_overrides(WIDTH, DEPTH, lr=LR, multiplier={"default": 1.0, "router_weight": 2.0})


def _te_stand_in(width: int, depth: int):
    """A module tree with the parameter names and layer class names of megatron-core's
    Transformer Engine spec (get_gpt_layer_with_transformer_engine_spec: the norms fused
    into TELayerNormColumnParallelLinear, TERowParallelLinear branch ends, TENorm) around
    Megatron's own embedding and head, for what reads names and types only (TE cannot be
    installed here)."""
    from torch import nn

    def layer(kind: str, out: int, inp: int, norm: bool = False):
        module = type(kind, (nn.Module,), {})()
        module.weight = nn.Parameter(torch.zeros(out, inp))
        module.bias = nn.Parameter(torch.zeros(out))
        if norm:
            module.layer_norm_weight = nn.Parameter(torch.ones(inp))
            module.layer_norm_bias = nn.Parameter(torch.zeros(inp))
        return module

    def tree(**children):
        module = nn.Module()
        for name, child in children.items():
            setattr(module, name, child)
        return module

    blocks = nn.ModuleList(
        tree(
            self_attention=tree(
                linear_qkv=layer("TELayerNormColumnParallelLinear", 3 * width, width, True),
                linear_proj=layer("TERowParallelLinear", width, width),
            ),
            mlp=tree(
                linear_fc1=layer("TELayerNormColumnParallelLinear", 4 * width, width, True),
                linear_fc2=layer("TERowParallelLinear", width, 4 * width),
            ),
        )
        for _ in range(depth)
    )
    final = type("TENorm", (nn.Module,), {})()
    final.weight, final.bias = nn.Parameter(torch.ones(width)), nn.Parameter(torch.zeros(width))
    embedding = tree(
        word_embeddings=layer("VocabParallelEmbedding", VOCAB, width),
        position_embeddings=layer("VocabParallelEmbedding", SEQ, width),
    )
    for table in (embedding.word_embeddings, embedding.position_embeddings):
        del table.bias
    head = layer("ColumnParallelLinear", VOCAB, width)
    del head.bias
    return tree(
        embedding=embedding, decoder=tree(layers=blocks, final_layernorm=final), output_layer=head
    )


def test_transformer_engine_names(cfg, model) -> None:
    """The TE spec's names: every one matched by exactly one key, and parameter_hparams
    gives each the numbers of the local spec's parameter in its place (the fused
    layer_norm_weight / bias are input_layernorm's / pre_mlp_layernorm's)."""
    te = _te_stand_in(WIDTH, DEPTH)
    fused = {n for n in GPT_PARAMETERS if "layer_norm_" in n}
    assert _names(te) == fused | {
        n
        for n in set(GPT_PARAMETERS) - MOE
        if not re.search(r"(layernorm|_layernorm)\.|layer_norm_", n)
    } | {"decoder.final_layernorm.weight", "decoder.final_layernorm.bias"}
    overrides = cfg.config_overrides(WIDTH, DEPTH, lr=LR)
    assert cfg.check_overrides(te, overrides) == []
    want = cfg.parameter_hparams(te, WIDTH, DEPTH, lr=LR, weight_decay=WD, eps=EPS)
    local = cfg.parameter_hparams(model, WIDTH, DEPTH, lr=LR, weight_decay=WD, eps=EPS)
    place = {
        "self_attention.linear_qkv.layer_norm_": "input_layernorm.",
        "mlp.linear_fc1.layer_norm_": "pre_mlp_layernorm.",
    }
    assert want.keys() == {n for n, _ in te.named_parameters()}
    for name, values in want.items():
        twin = name
        for fused_name, own in place.items():
            twin = twin.replace(fused_name, own)
        assert values == local[twin], name


def test_every_parameter_matches_exactly_one_key(cfg, model) -> None:
    overrides = cfg.config_overrides(WIDTH, DEPTH, lr=LR, min_lr=MIN_LR, weight_decay=WD)
    assert len(overrides) == 8  # input, hidden weight / bias, the branch ends', norm, head, router
    assert cfg.check_overrides(model, overrides) == []
    # a missing key and a doubled one are named
    keys = list(overrides)
    fewer = {k: v for k, v in overrides.items() if k is not keys[-1]}
    assert cfg.check_overrides(model, fewer) == [
        "output_layer.weight: no override matches it (Megatron trains it with the global lr "
        "and weight decay, not its rule's)"
    ]
    doubled = {**overrides, type(keys[0])(name=("*output_layer.weight",)): {"max_lr": 1.0}}
    assert cfg.check_overrides(model, doubled) == [
        "output_layer.weight: 2 overrides match it, not one"
    ]


def test_megatron_optimizer_gives_every_parameter_its_numbers(cfg, model, monkeypatch) -> None:
    monkeypatch.setattr(FP32Optimizer, "__init__", _cpu_fp32_init)
    optimizer = get_megatron_optimizer(
        OptimizerConfig(
            optimizer=cfg.MEGATRON_OPTIMIZER, lr=LR, min_lr=MIN_LR, weight_decay=WD,
            adam_eps=EPS, clip_grad=0.0,
        ),
        [model],
        config_overrides=cfg.config_overrides(
            WIDTH, DEPTH, lr=LR, min_lr=MIN_LR, weight_decay=WD, eps=EPS
        ),
    )  # fmt: skip
    inner = optimizer.chained_optimizers[0].optimizer
    assert type(inner) is torch.optim.AdamW  # no TE / Apex here: Megatron's torch fallback
    scheduler = OptimizerParamScheduler(
        optimizer, init_lr=0.0, max_lr=LR, min_lr=MIN_LR, lr_warmup_steps=2,
        lr_decay_steps=10, lr_decay_style="cosine", start_wd=WD, end_wd=WD,
        wd_incr_steps=10, wd_incr_style="constant",
    )  # fmt: skip
    want = cfg.parameter_hparams(model, WIDTH, DEPTH, lr=LR, weight_decay=WD, eps=EPS)
    group_of = {id(p): g for g in optimizer.param_groups for p in g["params"]}
    named = dict(model.named_parameters())
    assert len(group_of) == len(named) == len(want)
    assert len({id(g) for g in group_of.values()}) == 7

    def compare(scale: float) -> None:
        for name, p in named.items():
            group, rule = group_of[id(p)], want[name]
            assert group["lr"] == pytest.approx(rule["lr"] * scale, rel=1e-12), name
            assert group["weight_decay"] == pytest.approx(rule["weight_decay"], rel=1e-12), name
            assert group["eps"] == pytest.approx(rule["eps"], rel=1e-12), name

    scheduler.step(2)  # the end of the warmup from 0: every group at its rule's lr
    compare(1.0)
    # the carriers moved by the symmetry (AdamW: lr * s, weight decay / s, eps / s)
    folded = cfg.CONFIG.folded_multipliers(WIDTH, DEPTH)
    hp = cfg.hparams(WIDTH, DEPTH, lr=LR, weight_decay=WD, eps=EPS)
    proj = want["decoder.layers.1.self_attention.linear_proj.weight"]
    assert proj["lr"] == pytest.approx(hp["hidden_weight"]["lr"] * folded["hidden"])
    assert proj["weight_decay"] == pytest.approx(
        hp["hidden_weight"]["weight_decay"] / folded["hidden"]
    )
    assert proj["eps"] == pytest.approx(hp["hidden_weight"]["eps"] / folded["hidden"])
    assert want["output_layer.weight"]["lr"] == pytest.approx(
        hp["output_weight"]["lr"] * folded["output"]
    )
    assert folded["hidden"] != 1.0 and folded["output"] != 1.0
    # Megatron's no-decay on 1-D parameters and biases, as the rules say it
    assert {n for n, p in named.items() if group_of[id(p)]["weight_decay"] == 0} == {
        n for n, p in named.items() if p.dim() == 1
    }
    # along the cosine schedule every ratio holds: one factor for all groups
    scheduler.step(4)
    factor = MIN_LR / LR + (1 - MIN_LR / LR) * 0.5 * (1 + math.cos(math.pi * 4 / 8))
    compare(factor)

    # one step of the AdamW Megatron built (gradients drawn: no CPU forward pass)
    scheduler.step(-4)  # back to the rule's lr
    before = {n: p.detach().clone() for n, p in named.items()}
    generator = torch.Generator().manual_seed(1)
    for p in named.values():
        p.grad = torch.randn(p.shape, generator=generator)
    inner.step()
    for name, p in named.items():
        rule = want[name]
        g, w = p.grad, before[name]
        step = w * (1 - rule["lr"] * rule["weight_decay"]) - rule["lr"] * g / (
            g.abs() + rule["eps"]
        )
        torch.testing.assert_close(p.detach(), step, rtol=1e-5, atol=1e-9, msg=name)


def test_transformer_config_values_give_the_rules_init(cfg, one_process) -> None:
    """Every matrix is drawn at its rule's std, the branch ends at Megatron's own
    init_std / sqrt(2 L) at the base, moved from there as the hidden matrices are."""
    model = _model(cfg)  # as drawn (the module's model has taken a step)
    cfg.scale_output_layer_(model, WIDTH, DEPTH, init_std=0.02)
    want = cfg.parameter_hparams(model, WIDTH, DEPTH, lr=LR, init_std=0.02)
    megatrons = 1 / math.sqrt(2 * BASE_DEPTH)  # the branch ends' base std over the rules'
    for name, p in model.named_parameters():
        if p.dim() == 1:  # biases 0, norm gains 1: Megatron's and the rules'
            assert torch.all(p == (1.0 if name.endswith("norm.weight") else 0.0)), name
            continue
        std = p.detach().std().item()
        end = re.search(r"linear_(proj|fc2)\.weight$", name) is not None
        rule = want[name]["init_std"] * (megatrons if end else 1.0)
        assert std == pytest.approx(rule, rel=0.02), name
    stds = cfg.init_stds(WIDTH, DEPTH, init_std=0.02)
    folded = cfg.CONFIG.folded_multipliers(WIDTH, DEPTH)
    assert stds["init_method"] == pytest.approx(0.02 * 2**-0.5)  # hidden: r_n^-1/2
    assert stds["output_layer_init_method"] == pytest.approx(
        0.02 / math.sqrt(2 * BASE_DEPTH) * 2**-0.5 * folded["hidden"]
    )
    assert stds["embedding_init_method"] == pytest.approx(0.02 * folded["input"])
    assert stds["output_layer"] == pytest.approx(0.02 * folded["output"])


def test_head_needs_its_scale(cfg, one_process) -> None:
    """GPTModel draws output_layer with init_method (the hidden std): without
    scale_output_layer_ the head starts at the hidden matrices' std."""
    m = _model(cfg)
    stds = cfg.init_stds(WIDTH, DEPTH, init_std=0.02)
    head = m.output_layer.weight.detach().std().item()
    assert head == pytest.approx(stds["init_method"], rel=0.02)
    assert abs(head / stds["output_layer"] - 1) > 0.1


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_base_is_megatrons_bit_for_bit(cfg, one_process, tied) -> None:
    """At the base width and depth the generated values build Megatron's own GPTModel: the
    same seed draws the same bits in every parameter (branch ends at Megatron's
    scaled_init_method_normal, the head at init_method), and scale_output_layer_ keeps
    them (factor 1; a tied head's forward multiplier 1)."""
    plain = dict(_model(cfg, BASE_WIDTH, BASE_DEPTH, tied=tied, plain=True).named_parameters())
    model = _model(cfg, BASE_WIDTH, BASE_DEPTH, tied=tied)
    assert cfg.scale_output_layer_(model, BASE_WIDTH, BASE_DEPTH, init_std=0.02) == 1
    ours = dict(model.named_parameters())
    assert ours.keys() == plain.keys()
    assert [n for n in ours if not torch.equal(ours[n], plain[n])] == []
    if tied:
        assert [h.factor for h in model.output_layer._forward_hooks.values()] == [1.0]


def test_base_size(cfg) -> None:
    """At the base width and depth every std is init_std (0.02) but the branch ends',
    Megatron's own init_std / sqrt(2 L) (or branch_end_std); away from it each moves by
    its rule; every group has the base lr, weight decay and eps."""
    stds = cfg.init_stds(BASE_WIDTH, BASE_DEPTH, init_std=0.02)
    own = 0.02 / math.sqrt(2.0 * BASE_DEPTH)  # Megatron's scaled_init_method_normal
    assert stds == {
        "init_method": 0.02,
        "output_layer_init_method": own,
        "embedding_init_method": 0.02,
        "output_layer": 0.02,
        "router": 0.02,
    }
    kept = cfg.init_stds(BASE_WIDTH, BASE_DEPTH, init_std=0.02, branch_end_std=0.01)
    assert kept["output_layer_init_method"] == 0.01
    moved = cfg.init_stds(WIDTH, DEPTH, init_std=0.02, branch_end_std=0.01)
    plain = cfg.init_stds(WIDTH, DEPTH, init_std=0.02)
    assert moved["output_layer_init_method"] == pytest.approx(
        plain["output_layer_init_method"] * 0.01 / own
    )
    overrides = cfg.config_overrides(BASE_WIDTH, BASE_DEPTH, lr=LR, weight_decay=WD, eps=EPS)
    values = {tuple(k.name)[0]: v for k, v in overrides.items()}
    assert values["decoder.layers.*.self_attention.linear_proj.weight"] == pytest.approx(
        {"max_lr": LR, "min_lr": 0.0, "wd_mult": 1.0, "eps": EPS}
    )


def test_tied_embedding_and_head(cfg, one_process, monkeypatch) -> None:
    """share_embeddings_and_output_weights=True (Megatron-LM's default): AdamW's input and
    output rules agree but for the multiplier (model/ties.py), so the shared matrix has the
    embedding's numbers (carrying alpha_in), and the head's forward multiplies the logits
    by alpha_out / alpha_in: alpha_out on the unscaled matrix, as the hooked form."""
    from spectral.torch.apply.absorb import absorbed_values
    from spectral.engine.ties import tie_differences

    assert tie_differences(cfg.CONFIG) == []
    model = _model(cfg, tied=True)
    assert model.output_layer.weight is None  # Megatron's tie: the head reads the embedding
    untied_overrides = cfg.config_overrides(WIDTH, DEPTH, lr=LR, weight_decay=WD, eps=EPS)
    assert cfg.check_overrides(model, untied_overrides) == [
        "output_layer: a tied head whose forward does not carry alpha_out / alpha_in: call "
        "scale_output_layer_(model, width, depth) once",
        "output_layer.weight: the embedding and head are tied "
        "(share_embeddings_and_output_weights=True) but the overrides give the head's name "
        "another key: build them with config_overrides(..., "
        "share_embeddings_and_output_weights=True), or untie them "
        "(--untie-embeddings-and-output-weights)",
    ]
    assert cfg.scale_output_layer_(model, WIDTH, DEPTH, init_std=0.02) == 1
    assert cfg.scale_output_layer_(model, WIDTH, DEPTH, init_std=0.02) == 1  # one hook
    folded = cfg.CONFIG.folded_multipliers(WIDTH, DEPTH)
    hooks = list(model.output_layer._forward_hooks.values())
    assert [h.factor for h in hooks] == [folded["output"] / folded["input"]]
    assert folded["output"] / folded["input"] != 1.0
    # the head's forward: logits = (alpha_out / alpha_in) h W'^T with W' = alpha_in W
    shared = model.embedding.word_embeddings.weight
    h = torch.randn(5, 2, WIDTH, generator=torch.Generator().manual_seed(2))
    logits, _ = model.output_layer(h, weight=model.shared_embedding_or_output_weight())
    unscaled = shared.detach() / folded["input"]  # the hooked form's W
    torch.testing.assert_close(
        logits.detach(), folded["output"] * h @ unscaled.T, rtol=1e-5, atol=1e-7
    )
    std = cfg.init_stds(WIDTH, DEPTH, init_std=0.02)["embedding_init_method"]
    assert shared.detach().std().item() == pytest.approx(std, rel=0.02)

    overrides = cfg.config_overrides(
        WIDTH, DEPTH, lr=LR, weight_decay=WD, eps=EPS, share_embeddings_and_output_weights=True
    )
    assert len(overrides) == len(untied_overrides) - 1  # the head's globs in the embeddings'
    assert cfg.check_overrides(model, overrides) == []
    monkeypatch.setattr(FP32Optimizer, "__init__", _cpu_fp32_init)
    optimizer = get_megatron_optimizer(
        OptimizerConfig(
            optimizer=cfg.MEGATRON_OPTIMIZER, lr=LR, weight_decay=WD, adam_eps=EPS, clip_grad=0.0
        ),
        [model],
        config_overrides=overrides,
    )
    OptimizerParamScheduler(
        optimizer, init_lr=0.0, max_lr=LR, min_lr=0.0, lr_warmup_steps=0, lr_decay_steps=10,
        lr_decay_style="constant", start_wd=WD, end_wd=WD, wd_incr_steps=10,
        wd_incr_style="constant",
    ).step(1)  # fmt: skip
    group = next(g for g in optimizer.param_groups if any(p is shared for p in g["params"]))
    hp = cfg.hparams(WIDTH, DEPTH, lr=LR, weight_decay=WD, eps=EPS)
    rule = absorbed_values(hp["input_weight"], folded["input"], cfg.ABSORBED["adamw"])
    untied = cfg.parameter_hparams(_model(cfg), WIDTH, DEPTH, lr=LR, weight_decay=WD, eps=EPS)
    for key in ("lr", "weight_decay", "eps"):
        assert group[key] == pytest.approx(rule[key], rel=1e-12), key
        assert rule[key] == pytest.approx(untied["embedding.word_embeddings.weight"][key])


def test_tie_the_rules_forbid_is_refused(cfg, one_process) -> None:
    """Rules whose input and output roles differ (here AdamW's with the head's lr moved,
    as SSO's or Scion's are) refuse a tie in one line naming Megatron-LM's flag."""
    import dataclasses

    from spectral.errors import ConfigError
    from spectral.torch.optim.megatron import megatron_overrides, megatron_scale_output_
    from spectral.torch.optim.megatron_setup import override_problems

    rules = {**cfg.CONFIG.rules, "output_weight": {**cfg.CONFIG.rules["output_weight"]}}
    rules["output_weight"]["lr"] = (-2.0, 0.0)
    bad = dataclasses.replace(cfg.CONFIG, rules=rules)
    model = _model(cfg, tied=True)
    with pytest.raises(
        ConfigError, match=r"differ in lr: .*\(--untie-embeddings-and-output-weights\)$"
    ):
        megatron_overrides(
            bad, cfg.GROUPS, WIDTH, DEPTH, lr=LR, share_embeddings_and_output_weights=True
        )
    with pytest.raises(ConfigError, match="untie-embeddings-and-output-weights"):
        megatron_scale_output_(bad, model, WIDTH, DEPTH)
    (line,) = override_problems(bad, model, cfg.config_overrides(WIDTH, DEPTH, lr=LR))
    assert line.startswith("embedding.word_embeddings.weight: share_embeddings_and_output_weights")
    assert line.endswith("(--untie-embeddings-and-output-weights)")
    assert model.output_layer._forward_hooks == {}  # refused before anything was changed


def test_scale_output_layer_refuses_bad_input_and_a_second_scale(cfg, one_process) -> None:
    """init_std 0 or NaN is a one-line ConfigError (not a ZeroDivisionError); a second
    call with the same arguments changes nothing, one with others is refused."""
    from spectral.errors import ConfigError

    model = _model(cfg)
    for bad in (0, 0.0, float("nan"), {"default": 0.02, "hidden_weight": 0.0}):
        with pytest.raises(ConfigError, match="finite number"):
            cfg.scale_output_layer_(model, WIDTH, DEPTH, init_std=bad)
        with pytest.raises(ConfigError, match="finite number"):
            cfg.transformer_config(WIDTH, DEPTH, init_std=bad)
    from spectral.errors import ConfigTypeError

    with pytest.raises(ConfigTypeError, match=r"init_std must be a number > 0 \(Megatron's init_method std\), got None"):
        cfg.scale_output_layer_(model, WIDTH, DEPTH, init_std=None)
    with pytest.raises(ConfigTypeError, match="expected a Megatron model .* got NoneType"):
        cfg.scale_output_layer_(None, WIDTH, DEPTH, init_std=0.02)
    drawn = model.output_layer.weight.detach().clone()
    assert cfg.check_overrides(model, cfg.config_overrides(WIDTH, DEPTH, lr=LR)) == [
        "output_layer.weight: scale_output_layer_ has not run (the head starts at the "
        "hidden matrices' std, not its rule's)"
    ]
    assert cfg.scale_output_layer_(model, WIDTH, DEPTH, init_std=0.02) == 1
    scaled = model.output_layer.weight.detach().clone()
    stds = cfg.init_stds(WIDTH, DEPTH, init_std=0.02)
    assert torch.equal(scaled, drawn * (stds["output_layer"] / stds["init_method"]))
    assert cfg.scale_output_layer_(model, WIDTH, DEPTH, init_std=0.02) == 1
    assert torch.equal(model.output_layer.weight.detach(), scaled)
    with pytest.raises(ConfigError, match="already multiplied output_layer.weight by .* compound"):
        cfg.scale_output_layer_(model, 2 * WIDTH, DEPTH, init_std=0.02)
    assert torch.equal(model.output_layer.weight.detach(), scaled)
    assert cfg.check_overrides(model, cfg.config_overrides(WIDTH, DEPTH, lr=LR)) == []


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_megatron_lm_hooks(cfg, one_process, tied) -> None:
    """The two lines a pretrain_gpt.py user adds (docs/megatron.md): configure_ on the
    TransformerConfig core_transformer_config_from_args built (init values at its own
    hidden_size / num_layers), and optimizer_overrides from the OptimizerConfig and the
    model chunks (width, depth and tie read from the model): the same as the explicit
    calls; the flags they replace refused in one line."""
    from spectral.errors import ConfigError

    config = TransformerConfig(
        num_layers=DEPTH, hidden_size=WIDTH, num_attention_heads=WIDTH // HEAD_DIM,
        kv_channels=HEAD_DIM, init_method_std=0.02,
    )  # fmt: skip
    assert cfg.configure_(config, 0.02) is config
    want = cfg.init_stds(WIDTH, DEPTH, init_std=0.02)
    assert config.init_method_std == want["init_method"]
    assert config.init_method.keywords["std"] == want["init_method"]
    assert config.output_layer_init_method.keywords["std"] == want["output_layer_init_method"]
    assert config.embedding_init_method.keywords["std"] == want["embedding_init_method"]
    model = _model(cfg, tied=tied)
    optimizer = OptimizerConfig(lr=LR, min_lr=MIN_LR, weight_decay=WD, adam_eps=EPS, clip_grad=0.0)
    got = cfg.optimizer_overrides(optimizer, [model])
    explicit = cfg.config_overrides(
        WIDTH, DEPTH, lr=LR, min_lr=MIN_LR, weight_decay=WD, eps=EPS,
        share_embeddings_and_output_weights=tied,
    )  # fmt: skip
    assert [(k.name, v) for k, v in got.items()] == [(k.name, v) for k, v in explicit.items()]
    for bad, message in (
        ({"clip_grad": 1.0}, r"^--clip-grad 1.0: .* pass --clip-grad 0$"),
        ({"decoupled_lr": 1e-3}, r"^--decoupled-lr: .*leave --decoupled-lr"),
        ({"optimizer": "sgd"}, r"^--optimizer sgd: "),
    ):
        wrong = OptimizerConfig(lr=LR, weight_decay=WD, **{"clip_grad": 0.0, **bad})
        with pytest.raises(ConfigError, match=message):
            cfg.optimizer_overrides(wrong, [model])


def test_refusals(cfg) -> None:
    with pytest.raises(
        SpecError, match="not muon-kimi: megatron-core 0.16.1.s get_megatron_muon_optimizer needs"
    ):
        render("muon-kimi", "adamw", base_width=64, base_depth=2, framework="megatron")
    with pytest.raises(SpecError, match="not sgd"):
        render("sgd", base_width=64, base_depth=2, framework="megatron")
    from spectral.errors import ConfigError

    with pytest.raises(ConfigError, match="lr must be a number"):
        cfg.config_overrides(WIDTH, DEPTH, lr={"default": 1e-3})
    with pytest.raises(ConfigError, match="min_lr must be at most lr"):
        cfg.config_overrides(WIDTH, DEPTH, lr=1e-3, min_lr=1e-2)


def test_module_is_linted_and_deterministic(tmp_path) -> None:
    """The generated module passes ruff (the project's rules and ruff's own defaults) and
    ruff format, and the same inputs write the same bytes."""
    import subprocess
    from pathlib import Path

    source = render("adamw", base_width=BASE_WIDTH, base_depth=BASE_DEPTH, framework="megatron")
    assert source == render(
        "adamw", base_width=BASE_WIDTH, base_depth=BASE_DEPTH, framework="megatron"
    )
    path = tmp_path / "mup_megatron.py"
    path.write_text(source)
    root = Path(__file__).resolve().parents[2]
    ruff = Path(sys.executable).parent / "ruff"
    for extra in (["--config", str(root / "pyproject.toml")], ["--isolated"]):
        done = subprocess.run(
            [str(ruff), "check", "--no-cache", *extra, str(path)], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run(
        [str(ruff), "format", "--check", "--isolated", str(path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
