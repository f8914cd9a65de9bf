"""Which leaf of a parameter pytree is which role: paths, model families, labels.

A leaf's path is its pytree keys joined by dots: ``blocks.0.layers.1.kernel`` in a flax
nnx state, ``params.blocks_0.layers_1.kernel`` in a flax linen params dict (linen names
list members ``name_N``); the ``.value`` an nnx Variable adds is dropped. Every pattern
starts at a dot or at the start of the path, and list indices may be written ``.N`` or
``_N``. Only paths, shapes and dtypes are read, so flax is never imported and abstract
trees (``jax.eval_shape``) work.

Parameters the paper does not cover get the roles the PyTorch runtime gives them: norm
gains and biases inside a block are ``hidden_bias``, the final norm is ``input_bias``,
position embeddings are ``input_weight``. A readout tied to the input table (flax
``Embed.attend``: an ``input_weight`` and no ``output_weight``) is allowed exactly where
torch allows it (spectral.engine.ties: the config's two rules agree but for the multiplier,
which the model's own forward applies); one array under two paths is refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import jax

from spectral.engine.ties import tie_differences
from spectral.errors import ConfigError, ConfigTypeError, UnsupportedModelError
from spectral.families.adapter import Adapter
from spectral.families.registry import FAMILIES, FAMILY_PATTERNS
from spectral.patterns import Patterns, role_of, role_pairs, unplaced_error
from spectral.scaling import BIAS_ROLES, unknown_role


_LEAF = r"(?:kernel|embedding|scale|weight)"
"""A weight leaf in flax (nnx and linen): a Linear's kernel, an Embed's embedding, a
norm's scale; ``weight`` where a model names it so."""


def path_dialect(pattern: str) -> str:
    """A torch family's parameter-name pattern as a pytree-path pattern: a list index
    ``.N`` may also be linen's ``_N``, and a ``weight`` leaf is flax's ``kernel``,
    ``embedding`` or ``scale`` (or ``weight``)."""
    out = pattern.replace(r"\.\d+", r"[._]\d+")
    out = out.replace(r"\.(weight|bias)$", rf"\.({_LEAF[3:-1]}|bias)$")
    return out.replace(r"\.weight$", rf"\.{_LEAF}$")


def _module_leaf(pattern: str) -> str:
    """A module-name pattern (a family's ``detect``) as the pattern of any of its leaves."""
    if not pattern:
        return pattern
    stem = pattern.removesuffix("$")
    return path_dialect(stem + r"\.weight$").replace(rf"\.{_LEAF}$", r"\.[^.]+$")


def jax_family(family: Adapter) -> Adapter:
    """A family of :mod:`spectral.families` read by pytree paths: its roles, detection and
    tables in the path dialect (:func:`path_dialect`); what only a torch model has (its
    multiplier sites, norm offsets) is left as it is and unused here."""
    return family._replace(
        detect=_module_leaf(family.detect),
        roles=tuple((path_dialect(p), role) for p, role in family.roles),
        embeddings=tuple(path_dialect(e) for e in family.embeddings),
    )


ADAPTERS: tuple[Adapter, ...] = tuple(
    jax_family(f) for f in FAMILIES if not f.detect_type
)
"""spectral.families' families in the path dialect, tried in their order (a family that
needs a module's class to be recognised, Gemma's, is left out: a pytree has no classes);
pass adapter= (or patterns=) for any other model."""

DEFAULT_PATTERNS: tuple[tuple[str, str], ...] = tuple(
    (path_dialect(p), role) for p, role in FAMILY_PATTERNS
)
"""Every family's (path pattern, role) pairs, in the path dialect; classify's fallback."""

AdapterLike = Adapter | Mapping[str, Any] | str

# a norm layer's module name: "*norm*" (Llama, nnx.LayerNorm fields) or "ln_*" (GPT-2)
_NORM_OWNER = re.compile(r"norm|(^|_)ln(_|\d|$)", re.IGNORECASE)


def path_name(keypath: Iterable[Any]) -> str:
    """The dotted name of a pytree key path ("blocks.0.layers.1.kernel")."""
    keys = list(keypath)
    last = keys[-1] if len(keys) > 1 else None
    if isinstance(last, jax.tree_util.GetAttrKey) and last.name == "value":
        keys = keys[:-1]  # an nnx Variable around the array
    parts = []
    for key in keys:
        for attr in ("key", "idx", "name"):
            if hasattr(key, attr):
                parts.append(str(getattr(key, attr)))
                break
        else:
            parts.append(str(key))
    return ".".join(parts)


def as_adapter(
    adapter: AdapterLike | None, paths: Iterable[str] = ()
) -> Adapter | None:
    """An Adapter from an Adapter, a family name, a dict of its fields, or the paths."""
    if isinstance(adapter, Adapter):
        return adapter
    if isinstance(adapter, str):
        for known in FAMILIES:
            if known.name == adapter:
                return jax_family(known)
        names = ", ".join(a.name for a in FAMILIES)
        raise ConfigError(f"no adapter {adapter!r}; known: {names}")
    if isinstance(adapter, Mapping):
        fields = dict(adapter)
        fields.setdefault("name", "custom")
        fields.setdefault("detect", "")
        for key in ("input", "branches", "output"):  # torch's hook sites: none here
            fields.setdefault(key, ())
        roles = fields.get("roles", ())
        fields["roles"] = tuple(roles.items() if isinstance(roles, Mapping) else roles)
        value = fields.get("embeddings", ())
        fields["embeddings"] = (value,) if isinstance(value, str) else tuple(value)
        try:
            return Adapter(**fields)
        except TypeError as exc:
            raise ConfigError(f"adapter: {exc}") from None
    if adapter is not None:
        raise ConfigTypeError(
            f"adapter must be an Adapter, a name or a dict, got {type(adapter)}"
        )
    paths = list(paths)
    for known in ADAPTERS:
        if any(re.search(known.detect, path) for path in paths):
            return known
    return None


def classify(
    path: str,
    leaf: Any = None,
    patterns: Patterns | None = None,
    adapter: AdapterLike | None = None,
) -> str:
    """The role of the leaf at `path` (a dotted name, see path_name).

    `patterns` (a dict or pairs of regular expression -> role, searched in order) is
    tried first, then the adapter's roles, then every known family's (DEFAULT_PATTERNS);
    a dict whose keys are exact paths works too. A path nothing matches is an error that
    names it: there is no silent default.
    """
    pairs = role_pairs(patterns)
    family = as_adapter(adapter)
    if family is not None:
        pairs += family.roles
    return role_of(path, (*pairs, *DEFAULT_PATTERNS), leaf)


def placed(
    params: Any,
    patterns: Patterns | None,
    adapter: AdapterLike | None,
    rules: Any = None,
) -> list[tuple[str, Any, str]]:
    """(path, leaf, role) of every leaf, in pytree order; one error names every leaf that
    no pattern places. A readout tied to the input table (flax Embed.attend: an
    input_weight and no output_weight) is allowed where ``rules`` (the config) allow the
    tie, as in torch (spectral.engine.ties); one array under two paths is refused."""
    leaves = [
        (path_name(kp), leaf)
        for kp, leaf in jax.tree_util.tree_flatten_with_path(params)[0]
    ]
    family = as_adapter(adapter, (path for path, _ in leaves))
    # one list: an iterator of pairs is read here and again in classify
    patterns = role_pairs(patterns)
    for pattern, role in (*patterns, *(family.roles if family is not None else ())):
        problem = unknown_role(pattern, role)
        if problem is not None:
            raise ConfigError(problem)
    out, unplaced = [], []
    for path, leaf in leaves:
        try:
            role = classify(path, leaf, patterns, family)
        except ValueError:
            unplaced.append(f"{path} {tuple(getattr(leaf, 'shape', ()))}")
            continue
        out.append((path, leaf, role))
    if unplaced:
        raise unplaced_error(unplaced)
    _refuse_ties(out, rules)
    return out


def _refuse_ties(out: list[tuple[str, Any, str]], rules: Any) -> None:
    seen: dict[int, str] = {}
    for path, leaf, role in out:
        if role in BIAS_ROLES:
            continue  # a shared zero vector is no tie
        if id(leaf) in seen:
            raise UnsupportedModelError(
                f"parameters {seen[id(leaf)]!r} and {path!r} are one array (tied). muP "
                "gives input and output embeddings different multipliers, "
                "initialisations and learning rates, so they must not share weights."
            )
        seen[id(leaf)] = path
    roles = {role for _, _, role in out}
    if "input_weight" not in roles or "output_weight" in roles:
        return
    differences = (
        ["no config's rules given"] if rules is None else tie_differences(rules)
    )
    if differences:
        raise UnsupportedModelError(
            "the model has an input_weight but no output_weight: a readout tied to the "
            "input embedding (flax Embed.attend) needs one rule for both roles (the "
            f"multiplier aside), and here {'; '.join(differences)}; add an untied output "
            "layer (nnx.Linear / nn.Dense), train the embeddings with an optimizer whose "
            "rules agree (docs/ties.md), or map it with patterns="
        )


def labels(
    params: Any,
    *,
    patterns: Patterns | None = None,
    adapter: AdapterLike | None = None,
    rules: Any = None,
) -> Any:
    """A pytree like params whose leaves are role names (optax.multi_transform labels).

    Works on a flax nnx state, a linen params dict or any pytree of arrays; the family is
    recognised by its paths (ADAPTERS), or give adapter= / patterns= (see classify). One
    error names every leaf without a role.
    """
    roles = {path: role for path, _, role in placed(params, patterns, adapter, rules)}
    return jax.tree_util.tree_map_with_path(lambda kp, _: roles[path_name(kp)], params)


def norm_part(path: str) -> str | None:
    """Is the leaf a norm layer's gain ("gain"), its bias ("bias") or neither (None)?"""
    parts = path.split(".")
    leaf, owner = parts[-1], (parts[-2] if len(parts) > 1 else "")
    is_norm = bool(_NORM_OWNER.search(owner))
    if leaf == "scale" or (is_norm and leaf == "weight"):
        return "gain"
    if is_norm and leaf == "bias":
        return "bias"
    return None


def is_table(path: str, family: Adapter | None) -> bool:
    """A lookup table (one-hot input): drawn with init_std, not init_std / sqrt(fan_in)."""
    if path.rsplit(".", 1)[-1] == "embedding":
        return True
    return family is not None and any(re.search(e, path) for e in family.embeddings)
