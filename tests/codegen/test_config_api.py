"""A generated config's functions are the runtime's own: bound as they are, never re-declared.

``CONFIG.init_`` is ``spectral.torch.apply.init.init_by_role`` with the config as its first
argument, so the signature and the documentation a user sees are the function's own (no
forwarding method that could drift from it, no ``__doc__`` patched at import). Checked on the
generated module, the importing form and (``SPECTRAL_TEST_VENDOR=1``) the --vendor form.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path

import pytest

from spectral.codegen import render

pytestmark = pytest.mark.generated  # also run on the --vendor form

BOUND = {
    "torch": {
        "apply_multipliers": ("spectral.torch.apply.hooks", "install_multipliers"),
        "init_": ("spectral.torch.apply.init", "init_by_role"),
        "init_factors": ("spectral.torch.apply.init", "role_init_factors"),
        "param_groups": ("spectral.torch.optim.groups", "role_param_groups"),
        "build_optimizers": ("spectral.torch.optim.groups", "build_composite"),
        "check": ("spectral.torch.check.model", "check_model"),
        "fold_multipliers": ("spectral.torch.apply.export", "fold_into_weights"),
        "set_base_shapes": ("spectral.torch.model.shapes", "record_shapes_at_base"),
        "clip_grad_norm_": ("spectral.torch.apply.absorb", "clip_by_hooked_norm"),
    },
    "jax": {
        "init": ("spectral.jax.init", "init_params"),
        "optimizer": ("spectral.jax.optim", "build_optimizer"),
    },
}
"""Framework → the generated module's name → (runtime module, function) it binds."""


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # as an import does (dataclasses look it up)
    spec.loader.exec_module(mod)
    return mod


PLACES = {"set_base_shapes"}
"""Torch methods bound as the runtime function itself (it reads no placement)."""


@pytest.mark.parametrize("framework", sorted(BOUND))
def test_every_config_function_is_the_runtime_function(framework, tmp_path):
    """JAX binds the runtime functions themselves. The torch Config is the public binding
    (issue 47): each method takes the model (with patterns=/adapter= where it reads roles),
    places it once and passes the Placement to the runtime function, which takes
    (rules, placement, ...) and every other argument of the method by the same name, kind
    and default."""
    pytest.importorskip(framework)
    path = tmp_path / f"cfg_api_{framework}.py"
    path.write_text(
        render("muon-kimi", "adamw", base_width=64, base_depth=2, framework=framework)
    )
    mod = _load(path)
    config_class = type(mod.CONFIG)
    own = {name for name, value in vars(config_class).items() if inspect.isfunction(value)}
    assert own == set(BOUND[framework])

    def shape(params):
        return [(p.name, p.kind, p.default) for p in params]

    for name, (module, function_name) in BOUND[framework].items():
        function = getattr(importlib.import_module(module), function_name)
        bound = getattr(mod, name)  # the generated module's plain function
        assert bound.__self__ is mod.CONFIG
        parameters = list(inspect.signature(function).parameters.values())
        assert parameters[0].name == "rules"
        mine = list(inspect.signature(bound).parameters.values())
        assert bound.__doc__ and function.__doc__
        if framework == "jax" or name in PLACES:
            assert bound.__func__.__qualname__ == function.__qualname__ == function_name
            # names, kinds and defaults: the vendored form evaluates its annotations (it
            # has no `from __future__ import annotations`) and holds its own classes
            assert shape(mine) == shape(parameters[1:])
            continue
        assert bound.__func__.__qualname__ == f"Config.{name}"
        assert parameters[1].name in ("placement", "placed") and mine[0].name == "model"
        reading = {p.name for p in mine} & {"patterns", "adapter", "example_input"}
        assert "adapter" in reading, name
        reading -= {p.name for p in parameters}  # check's example_input runs the model
        rest = [p for p in mine[1:] if p.name not in reading and p.name != "given"]
        theirs = [p for p in parameters[2:] if p.name != "given"]
        assert shape(rest) == shape(theirs), name
