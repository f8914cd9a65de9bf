"""``spectral codegen``: a standalone PyTorch config module from derived rules.

The module is rendered from ``templates/torch_config.py.j2``. It imports only the standard
library and torch (pytorch-optimizer lazily, inside the factories that need it), never
``spectral`` or ``sympy``, and holds plain numbers. Its contract: ``BASE_WIDTH``,
``BASE_DEPTH``, ``K``, ``OPTIMIZERS``, ``RULES``, ``hparams``, ``multipliers``,
``classify``, ``init_``, ``param_groups``, ``build_optimizers``.

Each optimizer implementation was checked against the idealised update its declaration
assumes; the differences (and the compensations) are written as comments above its factory
in the generated file — see :data:`IMPLEMENTATIONS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
import textwrap

from .io import write_atomic
from .text import for_docstring
from .result import Exponent
from .spec import OptimizerSpec
from .transfer import DEFAULT_EPS, Plan, eps_place, plan

__all__ = ["FRAMEWORKS", "IMPLEMENTATIONS", "Implementation", "load_generated", "render", "write"]

FRAMEWORKS = ("torch", "jax")
"""What ``render(framework=...)`` writes a module for."""


@dataclass(frozen=True)
class Implementation:
    """How the generated module builds one catalog optimizer, and why it matches."""

    factory: tuple[str, ...]
    """Body of ``make_<name>(groups, **kwargs)`` (4-space indented in the output)."""
    notes: tuple[str, ...] = field(default=())
    """Comment lines: the idealised update vs the implementation's defaults."""


IMPLEMENTATIONS: dict[str, Implementation] = {
    "sgd": Implementation(
        factory=("return torch.optim.SGD(groups, **kwargs)",),
        notes=(
            "SGD: torch.optim.SGD. Idealised: dW = -eta (grad + lambda W). torch's",
            "weight_decay is coupled (added to the gradient before momentum); with the",
            "default momentum=0 the step is exactly the idealised one, and with momentum mu",
            "both terms grow by about 1/(1 - mu) alike, so the rules still hold.",
        ),
    ),
    "adamw": Implementation(
        factory=("return torch.optim.AdamW(groups, **kwargs)",),
        notes=(
            "AdamW: torch.optim.AdamW. Idealised (beta1 = beta2 = 0, eps = 0): sign(grad),",
            "dW = -eta (A + lambda W). torch decays decoupled, theta *= 1 - lr * wd, as",
            "assumed; eps is added to sqrt(v_hat), the declared place, and is scaled per",
            "role (group key 'eps'; base default 1e-8). Momentum and bias correction keep",
            "the entries of the step Theta(1), so they do not change the scaling. torch's",
            "default weight_decay=0.01 is replaced by each group's value.",
        ),
    ),
    "muon-kimi": Implementation(
        factory=(
            'kwargs = _fixed(kwargs, adjust_lr_fn="match_rms_adamw")',
            "return torch.optim.Muon(groups, **kwargs)",
        ),
        notes=(
            "Muon-Kimi: torch.optim.Muon(adjust_lr_fn='match_rms_adamw'), which steps by",
            "lr * 0.2 * sqrt(max(A, B)) * NS(momentum) and decays theta *= 1 - lr * wd with",
            "the unadjusted lr: exactly dW = -eta (0.2 sqrt(max(n_in, n_out)) U V^T +",
            "lambda W). Differences that do not change the scaling: Newton-Schulz (5",
            "steps, bfloat16) returns U S' V^T with S' in about (0.5, 1.5) rather than",
            "U V^T, and the step uses Nesterov momentum 0.95. torch's default",
            "weight_decay=0.1 is replaced by each group's value.",
        ),
    ),
    "muon": Implementation(
        factory=(
            'kwargs = _fixed(kwargs, adjust_lr_fn="original")',
            "return torch.optim.Muon(groups, **kwargs)",
        ),
        notes=(
            "Muon: torch.optim.Muon(adjust_lr_fn='original'). It multiplies lr by",
            "sqrt(max(1, A/B)) (A, B = weight.shape), while the idealised Muon steps by",
            "U V^T alone, and no adjust_lr_fn of torch.optim.Muon leaves lr unchanged. So",
            "each group's lr is divided by that factor and its weight_decay multiplied by",
            "it (torch decays with the unadjusted lr), which restores dW = -eta (U V^T +",
            "lambda W) exactly (see _compensation). Square hidden matrices have factor 1.",
            "Newton-Schulz gives U S' V^T, S' in about (0.5, 1.5); Nesterov momentum 0.95.",
            "torch's default weight_decay=0.1 is replaced by each group's value.",
        ),
    ),
    "shampoo": Implementation(
        factory=(
            "from pytorch_optimizer import Shampoo",
            "",
            "kwargs = _fixed(kwargs, weight_decouple=True)",
            "return Shampoo(groups, **kwargs)",
        ),
        notes=(
            "Shampoo: pytorch_optimizer.Shampoo. It steps by L^(-1/4) G R^(-1/4) with",
            "L = eps I + sum_t G G^T and R = eps I + sum_t G^T G: no grafting, as the",
            "declaration assumes, and eps ('matrix_eps', scaled per role; base default",
            "1e-6) is added to L and R, the declared place. Its default weight_decouple=",
            "False would add lambda W to the gradient before preconditioning (coupled);",
            "the declaration assumes decoupled dW = -eta (A + lambda W), so",
            "weight_decouple=True is fixed here. The statistics are summed over all steps",
            "(no EMA), so the step shrinks like 1/sqrt(t) at every width alike. The",
            "inverse roots are recomputed every step (preconditioning_compute_steps=1):",
            "raise it for large models.",
        ),
    ),
    "soap": Implementation(
        factory=(
            "from pytorch_optimizer import SOAP",
            "",
            "return SOAP(groups, **kwargs)",
        ),
        notes=(
            "SOAP: pytorch_optimizer.SOAP, Adam in the eigenbasis of Shampoo's L and R.",
            "Decoupled weight decay (lr * wd), as assumed. Its first step only sets up the",
            "eigenbasis (no update). Adam's eps (default 1e-8) is not scaled: the paper",
            "tabulates none for SOAP. A dimension above max_precondition_dim (10000) is",
            "not rotated, and the step there is Adam's, not Muon's scale: keep large",
            "embedding tables with --others. Default weight_decay=0.01 is replaced.",
        ),
    ),
    "lion": Implementation(
        factory=(
            "from pytorch_optimizer import Lion",
            "",
            "kwargs = _fixed(kwargs, weight_decouple=True)",
            "return Lion(groups, **kwargs)",
        ),
        notes=(
            "Lion: pytorch_optimizer.Lion, sign(beta1 m + (1 - beta1) g) with decoupled",
            "weight decay (lr * wd; weight_decouple=True, its default): the idealised",
            "sign step. Lion has no eps.",
        ),
    ),
    "sophia": Implementation(
        factory=(
            "from pytorch_optimizer import SophiaH",
            "",
            "return SophiaH(groups, **kwargs)",
        ),
        notes=(
            "Sophia: pytorch_optimizer.SophiaH, clip(m / max(h, eps), p) with Hutchinson",
            "Hessian estimates: call loss.backward(create_graph=True) before step().",
            "Fused attention kernels may lack a double backward: run the forward and",
            "backward under torch.nn.attention.sdpa_kernel(SDPBackend.MATH).",
            "The clip threshold p (default 0.01) bounds each entry by p rather than 1 as",
            "in the idealised clip(., 1): a constant factor on the step at every width,",
            "absorbed by the base lr (keep p fixed when transferring). Decoupled weight",
            "decay (lr * wd), as assumed. eps (1e-12) is not scaled: the paper tabulates",
            "none for Sophia.",
        ),
    ),
    "sso": Implementation(
        factory=(
            "from pytorch_optimizer import SpectralSphere",
            "",
            "return SpectralSphere(groups, **kwargs)",
        ),
        notes=(
            "SSO: pytorch_optimizer.SpectralSphere steps by lr * msign(m + mu theta)",
            "(Polar-Express Newton-Schulz), whose spectral norm is 1: its RMS->RMS norm is",
            "sqrt(n_in / n_out), while the declaration idealises a unit RMS->RMS step. No",
            "option rescales it, so each group's lr is multiplied by sqrt(n_out / n_in) and",
            "its weight_decay divided by it (decay is decoupled, lr * wd): see",
            "_compensation; (n_out, n_in) come from the owning module (nn.Linear stores",
            "(out, in), nn.Embedding and HF Conv1D (in, out)). It does not retract the",
            "weights onto a sphere, matching the declaration's plain step. Default",
            "weight_decay=0.01 is replaced by each group's value.",
        ),
    ),
    "adam": Implementation(
        factory=(
            "kwargs = _fixed(kwargs, decoupled_weight_decay=True)",
            "return torch.optim.Adam(groups, **kwargs)",
        ),
        notes=(
            "Adam: torch.optim.Adam. Idealised (beta1 = beta2 = 0, eps = 0): sign(grad).",
            "eps is added to sqrt(v_hat), the declared place, scaled per role (group key",
            "'eps'; base default 1e-8). torch's weight_decay is L2 by default (added to the",
            "gradient before the normalisation, so not the -eta lambda W the rules assume);",
            "decoupled_weight_decay=True is fixed here, so with the default base weight",
            "decay 0 this is plain Adam and a non-zero one is decoupled (AdamW).",
        ),
    ),
    "nadam": Implementation(
        factory=(
            "kwargs = _fixed(kwargs, decoupled_weight_decay=True)",
            "return torch.optim.NAdam(groups, **kwargs)",
        ),
        notes=(
            "NAdam: torch.optim.NAdam, Adam with Nesterov momentum (width-independent",
            "momentum schedule); idealised as sign(grad). eps is added to sqrt(v_hat) and",
            "scaled per role (base default 1e-8). Coupled L2 decay would be divided by",
            "sqrt(v_hat): decoupled_weight_decay=True is fixed here.",
        ),
    ),
    "radam": Implementation(
        factory=(
            "kwargs = _fixed(kwargs, decoupled_weight_decay=True)",
            "return torch.optim.RAdam(groups, **kwargs)",
        ),
        notes=(
            "RAdam: torch.optim.RAdam. From step 6 (rho_t > 5 at beta2 = 0.999) the step is",
            "Adam's times a rectification factor that tends to 1: the declared sign-like",
            "step. Steps 1-5 are un-normalised momentum (SGD-like, not declared): with",
            "Adam's lr rules they shrink with width, a slower start at large width. eps",
            "(base default 1e-8) is scaled per role; decoupled_weight_decay=True is fixed.",
        ),
    ),
    "adafactor": Implementation(
        factory=(
            "# eps2 = 1: alpha_t = max(eps2, RMS(W)) * rho_t is rho_t while RMS(W) <= 1",
            'kwargs = {"eps": (None, 1.0), **kwargs}',
            "return torch.optim.Adafactor(groups, **kwargs)",
        ),
        notes=(
            "Adafactor: torch.optim.Adafactor. Idealised: grad / sqrt(factored v_hat),",
            "which is sign(grad) for a rank-1 gradient. eps1 = eps[0] floors sqrt(v_hat)",
            "and is scaled per role (base default 1.19e-7, torch's float32 machine eps for",
            "eps1=None); build_optimizers writes it into the tuple. torch scales each step",
            "by max(eps2, RMS(W)) (relative step size), a dependence on the weights that the",
            "rules cannot follow; eps2 = 1 is the default here, which turns it off for",
            "weights of RMS <= 1. Pass optimizer_kwargs={'adafactor': {'eps': (None,",
            "1e-3)}} for torch's default, and the step is then lr * RMS(W) * ... instead.",
            "The step is also capped by min(lr, 1/sqrt(t)) (width-independent). Decay is",
            "decoupled, W *= 1 - lr * wd.",
        ),
    ),
    "adopt": Implementation(
        factory=(
            "from pytorch_optimizer import ADOPT",
            "",
            "kwargs = _fixed(kwargs, weight_decouple=True)",
            "return ADOPT(groups, **kwargs)",
        ),
        notes=(
            "ADOPT: pytorch_optimizer.ADOPT, momentum of grad / max(sqrt(v_prev), eps):",
            "sign-like. Its first step only initialises v. eps floors sqrt(v) and is scaled",
            "per role (base default 1e-6). Its default weight_decouple=False adds lambda W",
            "to the gradient before the normalisation; weight_decouple=True is fixed here.",
        ),
    ),
    "adan": Implementation(
        factory=(
            "from pytorch_optimizer import Adan",
            "",
            "return Adan(groups, **kwargs)",
        ),
        notes=(
            "Adan: pytorch_optimizer.Adan, (m + beta2 d) / (sqrt(v) + eps) with d the",
            "averaged gradient difference: sign-like at a steady gradient. eps is added to",
            "sqrt(v) and scaled per role (base default 1e-8). Decay is the paper's proximal",
            "W / (1 + lr * wd) (weight_decouple=False), = (1 - lr * wd) W to first order.",
        ),
    ),
    "mars": Implementation(
        factory=(
            "from pytorch_optimizer import MARS",
            "",
            'kwargs = _fixed(kwargs, mars_type="adamw")',
            "return MARS(groups, **kwargs)",
        ),
        notes=(
            "MARS: pytorch_optimizer.MARS(mars_type='adamw'), AdamW on the variance-reduced",
            "gradient g_t + gamma beta1/(1 - beta1) (g_t - g_(t-1)): sign-like. eps (base",
            "default 1e-8) is added to sqrt(v_hat), scaled per role. Matrices only: it",
            "steps 1-D parameters with its own AdamW at lr_1d (ignoring the group lr), so",
            "biases and norm gains need another optimizer (--others adamw).",
        ),
    ),
    "schedulefree-adamw": Implementation(
        factory=(
            "from pytorch_optimizer import ScheduleFreeAdamW",
            "",
            "return ScheduleFreeAdamW(groups, **kwargs)",
        ),
        notes=(
            "Schedule-Free AdamW: pytorch_optimizer.ScheduleFreeAdamW. The lr is the step of",
            "z (AdamW's sign-like step, eps added to sqrt(v_hat), scaled per role, base",
            "default 1e-8); the model holds y = (1 - beta1) z + beta1 x, x the running",
            "average of z: a width-independent mix of steps of that size, but iterate",
            "averaging is outside the rules' assumptions. Call",
            'opt.parts["schedulefree-adamw"].eval() before evaluating and .train() after.',
            "Decay acts at y with the lr (decoupled).",
        ),
    ),
    "lamb": Implementation(
        factory=(
            "from pytorch_optimizer import Lamb",
            "",
            "return Lamb(groups, **kwargs)",
        ),
        notes=(
            "LAMB: pytorch_optimizer.Lamb steps by lr * min(|W|_F, 10) * u / |u|_F, u",
            "Adam's step. The declaration takes the trust-ratio numerator as 1: the rules",
            "set lr in units of min(|W|_F, 10), which depends on the weights (at muP init",
            "|W|_F grows like sqrt(n) on hidden and input weights) and is outside the",
            "framework; divide each role's lr by its |W|_F at init to follow them",
            "literally. eps (base default 1e-6) is Adam's, scaled per role. Decoupled decay.",
        ),
    ),
    "signsgd": Implementation(
        factory=(
            "from pytorch_optimizer import SignSGD",
            "",
            "kwargs = _fixed(kwargs, weight_decouple=True)",
            "return SignSGD(groups, **kwargs)",
        ),
        notes=(
            "SignSGD: pytorch_optimizer.SignSGD, sign of momentum 0.9 (Signum; momentum=0",
            "gives SignSGD): the idealised sign step, as Lion's. No eps. Decoupled weight",
            "decay (weight_decouple=True, its default, fixed here).",
        ),
    ),
    "scion": Implementation(
        factory=(
            "from pytorch_optimizer import SCION",
            "",
            "kwargs = _fixed(kwargs, constraint=False)",
            "return SCION(groups, **kwargs)",
        ),
        notes=(
            "Scion: pytorch_optimizer.SCION (norm_type AUTO): sqrt(n_out / n_in) NS(m) for",
            "matrices and m / RMS(m) for vectors, RMS->RMS norm 1 as declared (scale=1).",
            "The unconstrained form decays W *= 1 - lr * wd, as assumed; constraint=True",
            "would replace that by W *= 1 - lr, so constraint=False is fixed here. No eps.",
        ),
    ),
    "normuon": Implementation(
        factory=(
            "from pytorch_optimizer import NorMuon",
            "",
            "for group in groups:  # groups without use_muon go to its own AdamW",
            '    group["use_muon"] = True',
            "return NorMuon(groups, **kwargs)",
        ),
        notes=(
            "NorMuon: pytorch_optimizer.NorMuon (update_scale='preserve_norm'): NS(m) with",
            "its rows normalised, rescaled to |NS(m)|_F; RMS->RMS norm sqrt(max(n_in,",
            "n_out) / n_out): Muon's on wide matrices, 1 on tall ones. use_muon=True is set",
            "on every group (without it NorMuon uses adamw_lr and ignores the group lr).",
            "Matrices only. Its eps (1e-10) guards a division and is not scaled. Decoupled",
            "weight decay.",
        ),
    ),
}
"""Catalog optimizer → how the generated module builds it and how it was checked."""

_ASCII_HP = {"multiplier": "alpha", "init_var": "sigma^2", "lr": "lr", "weight_decay": "wd"}


def _ascii_power(sym: str, e: Fraction) -> str:
    if e == 1:
        return sym
    text = str(e)
    return f"{sym}^{text}" if e.denominator == 1 and e > 0 else f"{sym}^({text})"


def _comment(hp: str, e: Exponent) -> str:
    base = _ASCII_HP.get(hp, hp)
    parts = [_ascii_power(s, x) for s, x in (("r_n", e.r_n), ("r_L", e.r_L)) if x != 0]
    base += "_base"
    return base if not parts else f"{base} * " + " * ".join(parts)


def _version() -> str:
    try:
        return version("spectral")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"


def _environment():
    import templates
    from jinja2 import Environment, FileSystemLoader, StrictUndefined

    return Environment(
        loader=FileSystemLoader(Path(templates.__file__).parent),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


_MARKER = "# ---- generated module body starts here"


def _scaling_source() -> str:
    """The body of :mod:`spectral.scaling`, copied verbatim into the generated module."""
    text = (Path(__file__).parent / "scaling.py").read_text(encoding="utf-8")
    return text[text.index("\n", text.index(_MARKER)) + 1 :].lstrip("\n")


def _title(p: Plan) -> str:
    if p.others is None:
        return p.hidden
    return f"{p.hidden} (hidden weights) + {p.others} (the rest)"


def _assignment(p: Plan) -> str:
    by_opt: dict[str, list[str]] = {}
    for r, o in p.optimizers.items():
        by_opt.setdefault(o, []).append(r)
    text = "Roles: " + "; ".join(f"{o} trains {', '.join(rs)}" for o, rs in by_opt.items())
    return "\n".join(textwrap.wrap(text + ".", 88))


def render(
    hidden: str | OptimizerSpec | Plan,
    others: str | OptimizerSpec | None = None,
    k: int = 2,
    *,
    base_width: int,
    base_depth: int,
    catalog: Mapping[str, OptimizerSpec] | None = None,
    command: str | None = None,
    framework: str = "torch",
) -> str:
    """The source of the config module (deterministic: same inputs, same bytes).

    ``hidden`` may be a :class:`~spectral.transfer.Plan` already derived (the CLI derives
    once); its own ``others``, ``k`` and catalog then apply.

    ``framework="jax"`` renders the JAX / optax module (:mod:`spectral.codegen_jax`) from
    the same rules and numbers; ``"torch"`` (the default) the PyTorch one.
    """
    for what, v in (("base width", base_width), ("base depth", base_depth)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            from .errors import SpecError

            raise SpecError(f"{what} must be a positive integer, got {v!r}")
    if framework not in FRAMEWORKS:
        from .errors import SpecError

        raise SpecError(f"framework must be one of {', '.join(FRAMEWORKS)}, got {framework!r}")
    if isinstance(hidden, Plan):  # already derived (the CLI derives once)
        p, k = hidden, hidden.k
    else:
        p = plan(hidden, others, k, catalog=catalog)
    if command is None:
        command = f"spectral codegen {p.hidden}"
        if p.others:
            command += f" --others {p.others}"
        command += f" --k {k} --base-width {base_width} --base-depth {base_depth}"
        if framework != "torch":
            command += f" --framework {framework}"
    rules = []
    for r, hps in p.rules.items():
        rules.append(
            {
                "name": r,
                "optimizer": p.optimizers[r],
                "hps": [
                    {
                        "name": hp,
                        "a": repr(float(e.r_n)),
                        "b": repr(float(e.r_L)),
                        "comment": _comment(hp, e),
                    }
                    for hp, e in hps.items()
                ],
            }
        )
    kinds = []
    for name in dict.fromkeys(p.optimizers.values()):
        spec = p.derivations[name].spec
        impl = IMPLEMENTATIONS.get(name) if p.is_builtin(name) else None
        if impl is None:
            notes = (
                f"{name}: a user declaration (update_norm = {spec.update_norm}); no",
                "implementation is known. Pass build_optimizers(...,",
                f"factories={{'{name}': fn}}), fn(groups, **kwargs) -> torch optimizer, whose",
                "step is the declared one: dW = -lr * (A + weight_decay * W).",
            )
            factory: tuple[str, ...] = ()
        else:
            notes, factory = impl.notes, impl.factory
        kinds.append(
            {
                "name": name,
                "matrix_only": not spec.applies_to_biases,
                "has_eps": spec.has_eps,
                "eps_key": eps_place(spec)[0],
                "eps_index": eps_place(spec)[1],
                "default_eps": repr(DEFAULT_EPS[name])
                if spec.has_eps and name in DEFAULT_EPS and impl is not None
                else None,
                "notes": notes,
                "factory": factory,
                "factory_name": "make_"
                + name.replace("-", "_").replace("+", "_").replace(".", "_"),
            }
        )
    uncovered_note = ""
    if p.uncovered:
        who = f"--others {p.others}" if p.others else f"{p.hidden} (and no --others)"
        uncovered_note = (
            f"{who} trains matrices only, so no optimizer trains\n"
            f"{', '.join(p.uncovered)}: the model must have no biases and no norm\n"
            "parameters (init_ and param_groups raise otherwise, naming the parameter)."
        )
    env = _environment()
    context = dict(
        title=_title(p),
        command=for_docstring(command),  # holds user paths: keep the docstring closed
        version=_version(),
        k=k,
        base_width=base_width,
        base_depth=base_depth,
        optimizers=list(p.optimizers.items()),
        rules=rules,
        kinds=kinds,
        kind_names=[kd["name"] for kd in kinds],
        assignment=_assignment(p),
        uncovered=p.uncovered,
        uncovered_note=uncovered_note,
        scaling=_scaling_source(),
    )
    if framework == "jax":
        from .codegen_jax import render_jax

        return render_jax(env, context, p)
    return env.get_template("torch_config.py.j2").render(**context)


def write(path: str | Path, source: str, *, force: bool = False) -> Path:
    """Write the module atomically; an existing file is kept unless ``force``."""
    return write_atomic(path, source, force=force)


_LOADED: dict[tuple, object] = {}


def load_generated(
    hidden: str | OptimizerSpec,
    others: str | OptimizerSpec | None = None,
    k: int = 2,
    *,
    base_width: int,
    base_depth: int,
    folder: str | Path,
    name: str | None = None,
):
    """Render the config module, write it to ``folder/<name>.py`` and import it.

    ``hidden`` and ``others`` are catalog names or declarations (a user's spec: its module
    has no built-in factory, so pass ``build_optimizers(..., factories={spec.name: fn})``).
    The file is rewritten only when its bytes differ; the imported module is cached per
    (inputs, folder), so the sweep and the coordinate check build every point from the same
    module object. Imports torch (the generated module does).
    """
    import hashlib
    import importlib.util
    import sys

    from .catalog import catalog

    key = (hidden, others, k, base_width, base_depth, str(folder), name)
    if key in _LOADED:
        return _LOADED[key]
    labels = [x if isinstance(x, str) else x.name for x in (hidden, others) if x is not None]
    same = len(labels) == 2 and labels[0] == labels[1]
    source = render(hidden, None if same else others, k,
                    base_width=base_width, base_depth=base_depth)
    if name is None:
        name = "config_" + "_".join(labels) + f"_k{k}"
        user = [x for x in (hidden, others) if isinstance(x, OptimizerSpec)]
        if any(catalog().get(x.name) != x for x in user):
            # a user's declaration may share a catalog name: never share its file
            name += "_" + hashlib.sha256(source.encode()).hexdigest()[:10]
    name = name.replace("+", "_").replace("-", "_").replace(".", "_")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    if not path.is_file() or path.read_text(encoding="utf-8") != source:
        write_atomic(path, source, force=True)
    spec = importlib.util.spec_from_file_location(f"spectral_generated_{name}", path)
    module = importlib.util.module_from_spec(spec)
    # registered like an import: torch.compile looks hook functions' modules up by name
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    _LOADED[key] = module
    return module
