"""torchtitan's own entry point (``torchtitan.train.main``) on a machine without a GPU.

    python examples/torchtitan_cpu/cpu_launch.py --module tiny_llama --config tiny [FLAGS]

takes the flags ``torchrun -m torchtitan.train`` takes and runs torchtitan's stock
``main`` in one process (gloo). torchtitan 0.3.0 selects its device when imported
(``torchtitan.tools.utils``: CUDA when no accelerator is found), so before it is imported
torch's device lookup is made to answer "cpu", with a stand-in for the CUDA memory calls
its metrics make (:func:`use_cpu`); torch 2.13.0 lacks ``torch.distributed.set_timeout``,
which torchtitan calls after the first step, so it is aliased to the private function of
the same job. Nothing of torchtitan is changed. The working directory and this folder are
on the import path, so ``--module`` finds a generated ``mup_titan.py`` there and this
folder's ``tiny_llama`` registry. On a GPU use torchrun itself (docs/torchtitan.md).
"""

from __future__ import annotations

import os
import socket
import sys
import types
from pathlib import Path

import torch
import torch._utils

__all__ = ["single_process_env", "use_cpu"]


def _cpu_device_module() -> types.ModuleType:
    """torch.cpu with the calls torchtitan's DeviceMemoryMonitor makes on a GPU."""
    mod = types.ModuleType("cpu_device")
    mod.__dict__.update({k: getattr(torch.cpu, k) for k in dir(torch.cpu) if not k.startswith("_")})
    mod.set_device = lambda device: None
    mod.device_count = lambda: 1
    mod.current_device = lambda: 0
    mod.get_device_name = lambda device=None: "cpu"
    mod.get_device_properties = lambda device=None: types.SimpleNamespace(total_memory=1 << 34)
    mod.memory_stats = lambda device=None: {
        "active_bytes.all.peak": 0,
        "reserved_bytes.all.peak": 0,
        "num_alloc_retries": 0,
        "num_ooms": 0,
    }
    mod.reset_peak_memory_stats = lambda device=None: None
    mod.empty_cache = lambda: None
    mod.synchronize = lambda device=None: None
    mod.is_available = lambda: True
    return mod


_APPLIED: list[bool] = []


def use_cpu() -> None:
    """Make torchtitan, imported after this, select the CPU (nothing where CUDA exists);
    a second call does nothing."""
    if _APPLIED:
        return
    if "torchtitan.tools.utils" in sys.modules:
        raise RuntimeError("use_cpu() must run before torchtitan is imported")
    if not hasattr(torch.distributed, "set_timeout"):  # torch 2.13.0: only the private one
        from torch.distributed.distributed_c10d import _set_pg_timeout

        torch.distributed.set_timeout = _set_pg_timeout
    _APPLIED.append(True)
    if torch.cuda.is_available():  # on a GPU torchtitan finds it itself
        return
    cpu = _cpu_device_module()
    device_module = torch._utils._get_device_module
    torch._utils._get_available_device_type = lambda: "cpu"
    torch._utils._get_device_module = lambda t: cpu if t == "cpu" else device_module(t)


def single_process_env() -> None:
    """The variables torchrun sets, for one process on a free local port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1")):
        os.environ.setdefault(key, value)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(port))


def main(argv: list[str]) -> None:
    for folder in (os.getcwd(), str(Path(__file__).resolve().parent)):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    use_cpu()
    single_process_env()
    from torchtitan.train import main as torchtitan_main

    sys.argv = ["torchtitan.train", *argv]
    torchtitan_main()


if __name__ == "__main__":
    main(sys.argv[1:])
