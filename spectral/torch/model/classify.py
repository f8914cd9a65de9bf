"""A model's parameters classified: its family found, each parameter's role, ties decided.

The families are data (:mod:`spectral.families`); this module applies them. It finds
a model's family by its module names and types (:data:`ADAPTERS`, tried in order) or checks
the one a user gives (:func:`as_adapter`), refuses the config flags the family's rules do
not cover (:func:`refusals`), and gives every parameter its role (:func:`classify`, the
first pattern that matches, :func:`spectral.patterns.role_of`; :func:`classify_parameters` for a
whole model, with tied embeddings decided by the rules). It also reads what the hooks and
init need from a module: fans, norms, lookup tables. No rule, no number here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from torch import nn

from spectral.errors import ConfigError, ConfigTypeError, UnsupportedModelError
from spectral.families import ADAPTERS, DEFAULT_PATTERNS, Adapter
from spectral.patterns import (
    Patterns,
    checked_pattern,
    role_of,
    role_pairs,
    unplaced_error,
)
from spectral.scaling import unknown_role
from spectral.torch.model.norm_offset import measured_norm_offset
from spectral.torch.model.shapes import fused_blocks, shaped_role, width_dims
from spectral.engine.ties import tie_problem
from spectral.torch.model.trace_read import NO_ADAPTER_HELPS, UNTRACEABLE
from spectral.torch.model.trace import (
    structure_adapter,
    structure_disagreements,
    traced_structure,
)

AdapterLike = Adapter | Mapping[str, Any] | str


def _checked(family: Adapter) -> Adapter:
    """Every pattern of a user's adapter compiles (names the field that does not)."""
    for key in ("input", "branches", "output", "embeddings", "aliases"):
        for pattern in getattr(family, key):
            checked_pattern(pattern, f"adapter {key}")
    for key in ("detect", "final"):
        checked_pattern(getattr(family, key), f"adapter {key}")
    for pattern, _ in family.roles:
        checked_pattern(pattern, "adapter roles")
    return family


def as_adapter(
    given: AdapterLike | None, model: nn.Module | None = None, example: Any = None
) -> Adapter | None:
    """An Adapter from an Adapter, a family name, a dict of its fields, or the model (its
    names and its structure traced on ``example``, built from the model when None)."""
    if isinstance(given, Adapter):
        return given if given in ADAPTERS else _checked(given)
    if isinstance(given, str):
        for known in ADAPTERS:
            if known.name == given:
                return known
        raise ConfigError(
            f"no adapter {given!r}; known: {', '.join(a.name for a in ADAPTERS)}"
        )
    if isinstance(given, Mapping):
        fields = dict(given)
        fields.setdefault("name", "custom")
        fields.setdefault("detect", "")
        for key in ("roles", "refuse"):
            pairs = fields.get(key, ())
            pairs = pairs.items() if isinstance(pairs, Mapping) else pairs
            fields[key] = tuple(tuple(pair) for pair in pairs)
        for key in (
            "input",
            "branches",
            "output",
            "embeddings",
            "aliases",
            "input_scale",
        ):
            value = fields.get(key, ())
            fields[key] = (value,) if isinstance(value, str) else tuple(value)
        fields["input_scale_sqrt"] = tuple(fields.get("input_scale_sqrt", ()))
        try:
            return _checked(Adapter(**fields))
        except TypeError as exc:
            raise ConfigError(f"adapter: {exc}") from None
    if given is not None:
        raise ConfigTypeError(
            f"adapter must be an Adapter, a name or a dict, got {type(given)}"
        )
    if model is None:
        return None
    names = [name for name, _ in model.named_modules()]
    types = {type(module).__name__ for module in model.modules()}
    found = None
    for known in ADAPTERS:
        if any(re.search(known.detect, name) for name in names) and (
            not known.detect_type or any(re.search(known.detect_type, t) for t in types)
        ):
            found = known
            break
    missing = _unnamed(found, model) if found is not None else []
    return _traced_or(found, missing, model, example)


_ANNOTATIONS = (
    "input_scale",
    "input_scale_sqrt",
    "norm_offset",
    "refuse",
    "config_scales",
    "own_width_exponents",
)
"""A family's fields that say what its forward pass does, not where its sites are: kept
on top of a traced structure that places the sites instead."""


def _traced_or(
    found: Adapter | None, missing: list[str], model: nn.Module, example: Any = None
) -> Adapter | None:
    """The one arbiter between a family's names and the model's structure from one traced
    forward pass (a user's adapter or patterns come before both). Where the trace agrees
    with the family, the family, with the trace's roles for ``missing`` parameters (GPT-OSS's
    sinks under the moe family); where it does not (Starcoder2's mlp.c_proj under Llama's
    names, Jamba's and Llama4's blocks), the traced structure with the family's
    annotations on top (norm offsets, built-in scales, refusals); no family: the traced
    structure. When the trace cannot run or refuses the model, the family (its errors
    name what it misses; traced_refusal says why)."""
    if (
        found is not None
        and not missing
        and (_not_traceable(model) or not _too_few_branch_ends(model, found))
    ):
        # every parameter named and as many branch ends per layer as the family says (or
        # sharded, or on the meta device): the names, without a forward pass
        return _measured(found, model) or found
    try:
        structure = traced_structure(model, example)
    except UnsupportedModelError:
        return _measured(found, model)
    if found is None:
        return _measured(structure_adapter(structure), model)
    if missing:
        differ = bool(structure_disagreements(model, found, structure))
    else:
        # every parameter named: the names lose only where they miss branch ends the
        # trace finds (Starcoder2's mlp.c_proj), not where they put a site elsewhere
        differ = _fewer_branch_ends(model, found, structure)
    if differ:
        traced = structure_adapter(structure, name=f"{found.name}, traced")
        traced = traced._replace(**{k: getattr(found, k) for k in _ANNOTATIONS})
        return _measured(traced, model)
    found = _measured(found, model) or found
    if not missing:
        return found
    extra = tuple(
        (f"^{re.escape(name)}$", role)
        for name, role in structure.roles
        if name in missing
    )
    return found._replace(roles=found.roles + extra)


def _not_traceable(model: nn.Module) -> bool:
    """Sharded (DTensor) or meta-device parameters: a traced forward pass would gather
    shards or compute nothing, so the family's names stand (the arbiter's fallback)."""
    return any(
        type(p).__name__ == "DTensor" or p.device.type == "meta"
        for p in model.parameters()
    )


def _too_few_branch_ends(model: nn.Module, family: Adapter) -> bool:
    """Whether the family's branch patterns hook fewer modules than its branches_per_layer
    times the layers they are found in (Starcoder2 under Llama's names: `self_attn.o_proj`
    in 2 layers, but its MLP ends in `mlp.c_proj`): read from the names alone."""
    hooked = [
        name
        for name, _ in model.named_modules()
        if any(re.search(p, name) for p in family.branches)
    ]
    layers = {m.group() for name in hooked if (m := re.search(r"\d+", name))}
    return len(hooked) < family.branches_per_layer * len(layers)


def _fewer_branch_ends(model: nn.Module, family: Adapter, structure: Any) -> bool:
    """Whether the family's names hook fewer branch ends than the trace finds (and
    disagree with it where they do)."""
    names = [name for name, _ in model.named_modules()]
    hooked = [n for n in names if any(re.search(p, n) for p in family.branches)]
    return len(hooked) < len(structure.branches) and bool(
        structure_disagreements(model, family, structure, ("alpha_hidden",))
    )


def _measured(family: Adapter | None, model: nn.Module) -> Adapter | None:
    """``family`` with the norm offset measured on the model where it can be (Nemotron's
    norms compute x_hat * (1 + w) under Llama's names; spectral.torch.model.norm_offset)."""
    if family is None:
        return None
    offset = measured_norm_offset(model)
    if offset is None or offset == family.norm_offset:
        return family
    return family._replace(norm_offset=offset)


def _unnamed(family: Adapter, model: nn.Module) -> list[str]:
    """The parameters neither the family's role patterns nor any family's name."""
    patterns = [p for p, _ in (*family.roles, *DEFAULT_PATTERNS)]
    return [
        name
        for name, _ in model.named_parameters(remove_duplicate=False)
        if not any(re.search(p, name) for p in patterns)
    ]


def traced_refusal(model: nn.Module) -> str | None:
    """The trace's one line refusing the model (what the rules do not cover, and
    where), or None when its structure was traced."""
    try:
        traced_structure(model)
    except UnsupportedModelError as exc:
        return str(exc)
    return None


def untraced_reason(model: nn.Module) -> str:
    """Why a model no family claims has no traced structure either."""
    return traced_refusal(model) or "its traced structure places no module"


def unplaced_message(model: nn.Module, advice: str) -> str:
    """The one line for a model that neither a family nor the trace places: the trace's
    reason, then ``advice`` (how to pass an adapter) unless no adapter can help."""
    reason = untraced_reason(model)
    if reason.endswith(NO_ADAPTER_HELPS):
        return reason
    return f"{reason} (no family adapter claims the model either: {advice})"


_MODEL_WRAPPERS = 8
"""Most model wrappers that unwrap_model goes through."""


def unwrap_model(model: nn.Module) -> nn.Module:
    """The model inside wrappers that register it twice. Fabric's ``fabric.setup(model)``
    holds it as ``_forward_module`` and again as ``_original_module`` (one module under two
    names: every parameter is listed twice, which is no tie). DDP's ``module.`` and
    torch.compile's ``_orig_mod.`` register it once and stay (the names carry the prefix)."""
    for _ in range(_MODEL_WRAPPERS):
        original = getattr(model, "_original_module", None)
        if not isinstance(original, nn.Module) or not isinstance(
            getattr(model, "_forward_module", None), nn.Module
        ):
            return model
        model = original
    return model


def model_config(model: nn.Module) -> Any:
    """The model's configuration object (Hugging Face's ``config``), or None."""
    for module in model.modules():  # under DDP or torch.compile the model is inside
        config = getattr(module, "config", None)
        if config is not None and not isinstance(config, nn.Module):
            return config
    return None


def refusals(model: nn.Module, family: Adapter | None) -> list[str]:
    """One line per config flag of the family's `refuse` that the model's config sets."""
    config = model_config(model) if family is not None and family.refuse else None
    if config is None or family is None:
        return []
    found = []
    for flag, why in family.refuse:
        value = getattr(config, flag, None)
        if value is not None and value is not False and value != 0:
            off = False if isinstance(value, bool) else None
            found.append(
                f"{family.name}: {flag}={value!r} {why}; set {flag}={off} in the model's "
                "config"
            )
    return found


def classify(
    name: str,
    param: Any = None,
    patterns: Patterns | None = None,
    adapter: AdapterLike | None = None,
) -> str:
    """The role of the parameter called `name`.

    `patterns` (a dict or pairs of regular expression -> role, searched in order) is
    tried first, then the adapter's roles, then every known family's (DEFAULT_PATTERNS);
    a dict whose keys are exact parameter names works too. A name nothing matches is an
    error that names it: there is no silent default.
    """
    pairs = role_pairs(patterns)
    for pattern, _ in pairs:
        checked_pattern(pattern, "patterns")
    family = as_adapter(adapter)
    if family is not None:
        pairs += family.roles
    return role_of(name, (*pairs, *DEFAULT_PATTERNS), param)


def normed_sources(model: nn.Module, family: Adapter | None) -> set[int]:
    """id() of every module whose output a norm reads, by the family's ``normed`` pairs
    (the trace's, or a family's annotation: DeepSeek-V3's q_a_layernorm on q_a_proj)."""
    if family is None or not family.normed:
        return set()
    modules = list(model.named_modules())
    out = set()
    for norm_pattern, source_pattern in family.normed:
        if any(re.search(norm_pattern, name) for name, _ in modules):
            out |= {id(m) for name, m in modules if re.search(source_pattern, name)}
    return out


def classify_parameters(
    model: nn.Module,
    pairs: list[tuple[str, str]],
    family: Adapter | None,
    rules: Any = None,
) -> list[tuple[str, nn.Parameter, str, nn.Module]]:
    """(name, parameter, role, owning module) for every parameter of ``model`` (already
    unwrapped, its family found); one error names every parameter that no pattern places.
    A tied input/output embedding is one entry (role input_weight) where ``rules`` (the
    config) allow it; any other tie is refused. :func:`spectral.torch.model.placement.place`
    calls it once per model and keeps the result."""
    for pattern, _ in pairs:
        checked_pattern(pattern, "patterns")
    for pattern, role in (*pairs, *(family.roles if family is not None else ())):
        problem = unknown_role(pattern, role)  # a typo, not "matches no role pattern"
        if problem is not None:
            raise ConfigError(problem)
    refused = refusals(model, family)
    if refused:
        raise UnsupportedModelError("; ".join(refused))
    owners: dict[int, nn.Module] = {}
    for module in model.modules():
        for p in module.parameters(recurse=False):
            owners.setdefault(id(p), module)
    seen: dict[int, tuple[str, str, int]] = {}
    out: list[tuple[str, nn.Parameter, str, nn.Module]] = []
    unplaced = []
    dims = width_dims(model)  # which dims grow, from a twin at another width
    read_by_norm = normed_sources(model, family)
    fused = fused_blocks(model)
    if fused:
        names = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}
        first_id = next(iter(fused))
        more = f" (and {len(fused) - 1} more)" if len(fused) > 1 else ""
        raise UnsupportedModelError(
            f"{names[first_id]}{more}: {fused[first_id]}: a fused matrix whose blocks grow "
            "differently (multi-query or grouped key/value heads of a fixed count beside "
            "the queries); one matrix cannot follow both blocks' rules: split it into "
            "separate projections (GPTBigCode: multi_query=False)"
        )
    for name, p in model.named_parameters(remove_duplicate=False):
        try:
            role = classify(name, p, pairs, family)
        except ValueError:
            unplaced.append(f"{name} {tuple(p.shape)}")
            continue
        if id(p) not in seen:  # names place it, its shape says which dims grow
            module = model.get_submodule(name.rpartition(".")[0])
            normed = id(module) in read_by_norm
            role = shaped_role(name, p, module, role, dims.get(id(p)), rules, normed)
        if id(p) in seen:
            first, first_role, index = seen[id(p)]
            if model.get_submodule(first.rpartition(".")[0]) is model.get_submodule(
                name.rpartition(".")[0]
            ) or _alias(family, first, name):
                continue  # one parameter under two names, used in one place
            problem = tie_problem(first, first_role, name, role, rules)
            if problem is not None:
                raise UnsupportedModelError(problem)
            # an allowed input/output tie: one entry, the embedding's (a table)
            embedding = first if first_role == "input_weight" else name
            module = model.get_submodule(embedding.rpartition(".")[0])
            out[index] = (embedding, p, "input_weight", module)
            continue
        seen[id(p)] = (name, role, len(out))
        out.append((name, p, role, owners[id(p)]))
    if unplaced:
        raise _unplaced(
            model, unplaced, family, bool(pairs)
        )  # pairs: the patterns given
    return out


def _unplaced(
    model: nn.Module, unplaced: list[str], family: Adapter | None, paired: bool
) -> UnsupportedModelError:
    """The error for parameters nothing places (``paired``: patterns were given). With no
    patterns and no family's names, a structure the trace refused is the reason (a model
    with no residual, a block run twice), not a list of parameters; a model the trace
    could not run at all (no forward, an input it cannot build) gets the list. With a
    family's names, the list and why no traced structure stood in."""
    error = unplaced_error(unplaced)
    why = traced_refusal(model) if family is not None or not paired else None
    if why is None:
        return error
    if family is None:
        if why.startswith(UNTRACEABLE):
            return error
        return UnsupportedModelError(
            unplaced_message(
                model, "pass adapter=... or patterns={'<regex>': '<role>'}"
            )
        )
    return UnsupportedModelError(
        f"{error} The model has the {family.name} family's names; its traced "
        f"structure was refused: {why}"
    )


def _alias(family: Adapter | None, first: str, name: str) -> bool:
    """Whether one of two names of a parameter is under a module the forward pass never
    calls (the family's aliases: T5's shared.weight)."""
    aliases = family.aliases if family is not None else ()
    return any(re.search(a, n) for a in aliases for n in (first, name))


def is_table(name: str, module: nn.Module, family: Adapter | None) -> bool:
    """A lookup table (one-hot input): drawn with init_std, not init_std / sqrt(fan_in)."""
    if isinstance(module, nn.Embedding):
        return True
    return family is not None and any(re.search(e, name) for e in family.embeddings)
