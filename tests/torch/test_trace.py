"""The structure traced from one forward pass (spectral/torch/model/trace.py, issue 38).

A model no family adapter claims is placed by its traced structure: the residual stream,
the branch end of every addition, the input, the readout, the final module. What the
rules do not cover is refused in one line naming the construct and where it is.
"""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from spectral.codegen import load_generated  # noqa: E402
from spectral.errors import UnsupportedModelError  # noqa: E402
from spectral.torch.model.classify import as_adapter  # noqa: E402
from spectral.torch.model.trace import (  # noqa: E402
    structure_adapter,
    structure_disagreements,
    trace_structure,
)

pytestmark = pytest.mark.generated


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    return load_generated(
        "muon-kimi",
        "adamw",
        base_width=32,
        base_depth=2,
        folder=tmp_path_factory.mktemp("trace"),
        all_roles=True,
    )


@pytest.fixture(scope="module")
def adamw(tmp_path_factory):
    """AdamW on every role: Muon takes 2-D matrices only, a conv kernel is 4-D."""
    return load_generated(
        "adamw",
        base_width=32,
        base_depth=2,
        folder=tmp_path_factory.mktemp("trace_adamw"),
        all_roles=True,
    )


class TinyLM(nn.Module):
    """README's model: an embedding, residual MLP blocks, a final norm, a readout."""

    def __init__(self, width: int, depth: int, vocab: int = 64, scale: float = 1.0):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(
            nn.Sequential(
                nn.LayerNorm(width),
                nn.Linear(width, 4 * width),
                nn.GELU(),
                nn.Linear(4 * width, width),
            )
            for _ in range(depth)
        )
        self.norm = nn.LayerNorm(width)
        self.readout = nn.Linear(width, vocab, bias=False)
        self.scale = scale

    def forward(self, tokens):
        h = self.embed(tokens)
        for block in self.blocks:
            h = h + self.scale * block(h)
        return self.readout(self.norm(h))


class ResNet(nn.Module):
    """A ResNet-style conv net: a conv stem, blocks x + conv(relu(conv(x))), average
    pooling, a linear head."""

    def __init__(self, width: int, depth: int, classes: int = 10):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.blocks = nn.ModuleList(
            nn.Sequential(
                nn.BatchNorm2d(width),
                nn.ReLU(),
                nn.Conv2d(width, width, 3, padding=1),
                nn.ReLU(),
                nn.Conv2d(width, width, 3, padding=1),
            )
            for _ in range(depth)
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(width, classes)

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = x + block(x)
        return self.fc(self.pool(x).flatten(1))


class Gated(TinyLM):
    """The stream multiplied by a learned gate before each add."""

    def __init__(self, width: int, depth: int):
        super().__init__(width, depth)
        self.gate = nn.Parameter(torch.ones(width))

    def forward(self, tokens):
        h = self.embed(tokens)
        for block in self.blocks:
            h = h * self.gate + block(h)
        return self.readout(self.norm(h))


class OpEnd(TinyLM):
    """Each branch ends in a nonlinearity outside any module."""

    def forward(self, tokens):
        h = self.embed(tokens)
        for block in self.blocks:
            h = h + torch.tanh(block(h))
        return self.readout(self.norm(h))


class Stem(TinyLM):
    """h_0 made by a stem: the embedding, a GELU, a width -> width map, a GELU."""

    def __init__(self, width: int, depth: int):
        super().__init__(width, depth)
        self.up = nn.Linear(width, width)

    def forward(self, tokens):
        h = nn.functional.gelu(self.up(nn.functional.gelu(self.embed(tokens))))
        for block in self.blocks:
            h = h + block(h)
        return self.readout(self.norm(h))


class RawInput(TinyLM):
    """h_0 = embed(tokens) + the token ids themselves: a part of h_0 no input layer
    makes."""

    def forward(self, tokens):
        h = self.embed(tokens) + tokens.unsqueeze(-1).float()
        for block in self.blocks:
            h = h + block(h)
        return self.readout(self.norm(h))


class Bottleneck(nn.Module):
    """Each branch: a width -> 8 map, a LayerNorm on its output, 8 -> width."""

    def __init__(self, width: int, depth: int = 2, vocab: int = 64):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.downs = nn.ModuleList(nn.Linear(width, 8) for _ in range(depth))
        self.code_norms = nn.ModuleList(nn.LayerNorm(8) for _ in range(depth))
        self.ups = nn.ModuleList(nn.Linear(8, width) for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.readout = nn.Linear(width, vocab, bias=False)

    def forward(self, tokens):
        h = self.embed(tokens)
        for down, norm, up in zip(self.downs, self.code_norms, self.ups, strict=True):
            h = h + up(norm(down(h)))
        return self.readout(self.norm(h))


def test_a_stem_is_an_input_layer_and_outer_layers(cfg):
    """alpha_in on the module that reads the input; the maps after it on the way to h_0
    are outer layers (Whisper's conv2)."""
    structure = trace_structure(Stem(32, 2))
    assert structure.input == ("embed",)
    roles = dict(structure.roles)
    assert roles["embed.weight"] == "input_weight"
    assert (roles["up.weight"], roles["up.bias"]) == ("outer_weight", "outer_bias")
    model = Stem(64, 2)
    assert cfg.apply_multipliers(model, 64, 2).modules["input"] == ["embed"]
    cfg.init_(model, 64, 2, init_std=0.02)
    opt = cfg.build_optimizers(model, 64, 2, lr=3e-3, weight_decay=0.1)
    assert cfg.check(model, 64, 2, opt) == []


def test_a_rank_down_map_a_norm_reads_takes_the_normed_role(cfg):
    """The norm reads a width -> 8 map: the map takes the normed rank-down role (issue 47
    item 6), whose init keeps its output Theta(1), so every norm keeps its own epsilon
    (under the plain rank-down role the output shrank as n^-1/2 and the epsilon was scaled
    by 1/r_n to follow it)."""
    structure = trace_structure(Bottleneck(32, 2))
    assert structure.normed == (
        ("code_norms.0", "downs.0"),
        ("code_norms.1", "downs.1"),
    )
    model = Bottleneck(128, 2)
    cfg.set_base_shapes(model, factory=Bottleneck)  # which dimensions grow: 8 does not
    cfg.apply_multipliers(model, 128, 2)
    roles = model.spectral_placement.roles()  # the config's own runtime (both forms)
    assert roles["downs.0.weight"] == roles["downs.1.weight"] == "normed_rank_down_weight"
    cfg.init_(model, 128, 2, init_std=0.02)
    assert [n.eps for n in model.code_norms] == [1e-5, 1e-5]
    assert model.norm.eps == 1e-5
    x = torch.randn(64, 128)
    # variance init_std^2 / r_n (the role's 1/n): each output entry has std 0.02 * sqrt(32)
    assert float(model.downs[0](x).std()) == pytest.approx(0.02 * 32**0.5, rel=0.2)


def test_the_readme_model_is_traced(cfg):
    structure = trace_structure(TinyLM(32, 3))
    assert structure.input == ("embed",)
    assert structure.branches == ("blocks.0.3", "blocks.1.3", "blocks.2.3")
    assert structure.output == ("readout",)
    assert structure.final == "norm"
    assert structure.branches_per_layer == 1
    assert structure.scales == ()
    roles = dict(structure.roles)
    assert roles["embed.weight"] == "input_weight"
    assert roles["blocks.1.0.weight"] == roles["blocks.1.3.bias"] == "hidden_bias"
    assert roles["blocks.2.1.weight"] == roles["blocks.2.3.weight"] == "hidden_weight"
    assert roles["norm.weight"] == roles["norm.bias"] == "input_bias"
    assert roles["readout.weight"] == "output_weight"
    assert len(roles) == len(list(TinyLM(32, 3).named_parameters()))


def test_a_constant_on_the_branch_is_found(cfg):
    structure = trace_structure(TinyLM(32, 2, scale=0.5))
    assert structure.scales == (("blocks.0.3", 0.5), ("blocks.1.3", 0.5))


def test_no_adapter_needed_apply_init_build_check(cfg):
    width, depth = 64, 3
    torch.manual_seed(0)
    model = TinyLM(width, depth)
    handle = cfg.apply_multipliers(model, width, depth)
    assert handle.modules == {
        "input": ["embed"],
        "hidden": ["blocks.0.3", "blocks.1.3", "blocks.2.3"],
        "output": ["readout"],
    }
    cfg.init_(model, width, depth, init_std=0.02)
    opt = cfg.build_optimizers(model, width, depth, lr=3e-3, weight_decay=0.1)
    assert cfg.check(model, width, depth, opt) == []
    assert cfg.final_module(model) is model.norm


def test_a_resnet_is_accepted_with_no_adapter(adamw):
    cfg = adamw
    width, depth = 32, 2
    torch.manual_seed(0)
    model = ResNet(width, depth)
    structure = trace_structure(model)
    assert structure.input == ("stem",)
    assert structure.branches == ("blocks.0.4", "blocks.1.4")
    assert structure.output == ("fc",)
    assert structure.final == "pool"  # its input is h_L
    roles = dict(structure.roles)
    assert roles["stem.weight"] == "input_weight" and roles["stem.bias"] == "input_bias"
    assert roles["blocks.0.0.weight"] == "hidden_bias"  # the BatchNorm in the branch
    assert roles["blocks.1.2.weight"] == "hidden_weight"
    assert roles["fc.weight"] == "output_weight" and roles["fc.bias"] == "output_bias"
    handle = cfg.apply_multipliers(model, width, depth)
    assert handle.modules["hidden"] == ["blocks.0.4", "blocks.1.4"]
    cfg.init_(model, width, depth, init_std=0.02)
    opt = cfg.build_optimizers(model, width, depth, lr=3e-3, weight_decay=0.1)
    images = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    assert cfg.check(model, width, depth, opt, example_input=images) == []


def test_tracing_leaves_the_model_as_it_was():
    model = ResNet(16, 2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    state = torch.random.get_rng_state()
    trace_structure(model)
    assert torch.equal(torch.random.get_rng_state(), state)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # BatchNorm's stats too
    assert model.training


@pytest.mark.parametrize(
    ("model", "line"),
    [
        (
            Gated(32, 2),
            "the stream is multiplied by a learned gate before the add at `the model`: "
            "no rule for a multiplicative residual",
        ),
        (
            OpEnd(32, 2),
            "the branch added at `the model` ends in `tanh`, not in a module's output: no "
            "place for alpha_hidden (wrap the last step of the branch in a module)",
        ),
        (
            RawInput(32, 2),
            "h_0 of the stream at `the model` holds the model's input itself, through no "
            "input layer: no place for alpha_in",
        ),
        (
            nn.Sequential(nn.Embedding(64, 32), nn.Linear(32, 64)),
            "no residual stream found: the readout's input is computed from no addition "
            "h + f(h) (a model without residual branches has no alpha_hidden to place)",
        ),
    ],
)
def test_what_the_rules_do_not_cover_is_named(cfg, model, line):
    with pytest.raises(UnsupportedModelError) as info:
        trace_structure(model)
    assert str(info.value) == line
    with pytest.raises(ValueError) as info:  # the vendored form's UnsupportedModelError
        cfg.apply_multipliers(model, 32, 2)
    assert str(info.value).startswith(line + " (no family adapter claims the model either")


def test_an_adapter_that_disagrees_is_named_in_checks_notes(cfg):
    width, depth = 64, 2
    model = TinyLM(width, depth)
    wrong = {
        "name": "wrong",
        "input": [r"^embed$"],
        "branches": [r"^blocks\.\d+\.1$"],  # the first matrix, not the last
        "output": [r"^readout$"],
        "final": r"^norm$",
        "branches_per_layer": 1,
        "roles": dict(structure_adapter(trace_structure(model)).roles),
    }
    structure = trace_structure(model)
    assert structure_disagreements(model, as_adapter(wrong), structure) == [
        "wrong: the adapter puts alpha_hidden on `blocks.0.1`, `blocks.1.1`, the traced "
        "structure on `blocks.0.3`, `blocks.1.3`"
    ]
    cfg.apply_multipliers(model, width, depth, adapter=wrong)
    cfg.init_(model, width, depth, init_std=0.02, adapter=wrong)
    findings = cfg.check(model, width, depth, adapter=wrong)
    assert (
        "traced structure: wrong: the adapter puts alpha_hidden on `blocks.0.1`, "
        "`blocks.1.1`, the traced structure on `blocks.0.3`, `blocks.1.3`"
    ) in findings.notes


@pytest.mark.parametrize(
    ("field", "value", "line"),
    [
        (  # the branch ends on the first matrix of each MLP instead of the last
            "branches",
            (r"^blocks\.\d+\.1$",),
            "blocks.0.1: hooked as a branch end (alpha_hidden), but its output has 128 "
            "features at width 32, not the residual stream's 32: alpha_hidden belongs on "
            "the last module before the residual addition (the adapter's branches)",
        ),
        (  # the readout put on the final norm
            "output",
            (r"^norm$",),
            # the one-step slope's second digit depends on the twins' draws
            re.compile(
                r"norm \(readout\): output at init ~ n\^-1\.00 \(rules: n\^-0\.5\), "
                r"one-step change ~ n\^-1\.\d\d \(rules: n\^0\); role output_weight's "
                r"rules do not fit it: give it another role \(patterns=\{\.\.\.\}\)"
            ),
        ),
    ],
)
def test_a_wrong_override_of_the_traced_structure_is_named_across_widths(cfg, field, value, line):
    from spectral.torch import check_widths

    traced = structure_adapter(trace_structure(TinyLM(32, 2)))
    base = {"lr": 3e-3, "weight_decay": 0.1}
    report = check_widths(
        cfg.CONFIG,
        TinyLM(32, 2),
        [32, 64, 128],
        factory=lambda w: TinyLM(w, 2),
        adapter=traced._replace(**{field: value}),
        base=base,
        timeout=None,
    )
    if isinstance(line, str):
        assert line in report.problems
    else:
        assert any(line.fullmatch(found) for found in report.problems), report.problems
    right = check_widths(
        cfg.CONFIG,
        TinyLM(32, 2),
        [32, 64, 128],
        factory=lambda w: TinyLM(w, 2),
        adapter=traced,
        base=base,
        timeout=None,
    )
    assert right.problems == []
