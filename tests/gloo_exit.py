"""How a gloo worker process of the distributed tests ends (not a test module).

Imported by ``ddp_worker.py``, ``hf_worker.py`` and ``fsdp_worker.py``, which are run as
scripts from this folder (so it is on ``sys.path``, also in ``mp.spawn``'s children).
"""

from __future__ import annotations

import os
import sys

import torch.distributed as dist


def leave() -> None:
    """Tear the process group down together, then exit at once.

    Every rank waits at a barrier first: gloo aborts a process ("terminate called without
    an active exception") if a peer leaves mid-collective. Then the process exits without
    running C++ destructors: gloo's background threads can still be joinable at interpreter
    exit, and std::terminate then aborts a rank that has finished its work (seen in CI).
    """
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
