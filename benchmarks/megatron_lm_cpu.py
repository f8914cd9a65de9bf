"""Megatron-LM's own pretrain_gpt.py path with docs/megatron.md's diff applied, on CPU.

Run from a Megatron-LM checkout at tag core_v0.16.1 (55ac7082) with the diff of
docs/megatron.md applied and a generated ``mup_megatron.py`` beside ``pretrain_gpt.py``
(``spectral codegen adamw --base-width 64 --base-depth 2 --framework megatron -o
mup_megatron.py``); megatron-core 0.16.1 and torch from this project's venv, Megatron-LM's
``megatron/training`` from the checkout (it also imports ``six``)::

    cd MEGATRON_LM && PYTHONPATH=.:SIX_DIR python path/to/megatron_lm_cpu.py 128 3 [tied] [moe]

It parses Megatron-LM's own flags (``parse_args``, ``validate_args``), builds the model
through the patched ``mup_gpt_builder`` (inside Megatron-LM's ``model_provider``) and the
optimizer through the patched ``training.setup_model_and_optimizer``, then prints the largest
relative difference between every parameter's lr / weight decay / eps in the optimizer
Megatron built and ``parameter_hparams``, and at the base (64 x 2) whether the model equals
the stock ``gpt_builder``'s drawn from the same seed. What needs CUDA is replaced, as in
tests/codegen/test_megatron.py: ``get_model`` builds the bare model (Megatron's DDP
allocates its buffers on the GPU; ``ddp_config`` is set instead) and ``FP32Optimizer``'s loss
scale is made on the CPU. One gloo process, an in-memory store. Nothing is trained.
"""

from __future__ import annotations

import sys
import warnings
from functools import partial

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def main(argv: list[str]) -> None:
    width, depth = int(argv[0]), int(argv[1])
    tied, moe = "tied" in argv[2:], "moe" in argv[2:]
    from megatron.core import parallel_state

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    flags = [
        "--num-layers", str(depth), "--hidden-size", str(width),
        "--num-attention-heads", str(width // 32), "--kv-channels", "32",
        "--seq-length", "64", "--max-position-embeddings", "64",
        "--micro-batch-size", "1", "--global-batch-size", "1", "--train-iters", "10",
        "--lr", "3e-3", "--min-lr", "3e-4", "--weight-decay", "0.1", "--adam-eps", "1e-8",
        "--lr-decay-style", "cosine", "--clip-grad", "0", "--init-method-std", "0.02",
        "--use-cpu-initialization", "--transformer-impl", "local",
        "--position-embedding-type", "learned_absolute",
        "--vocab-size", "512", "--tokenizer-type", "NullTokenizer",
        "--no-gradient-accumulation-fusion", "--no-masked-softmax-fusion",
        "--no-bias-gelu-fusion", "--no-bias-dropout-fusion", "--no-persist-layer-norm",
    ]  # fmt: skip
    if not tied:
        flags.append("--untie-embeddings-and-output-weights")
    if moe:
        flags += ["--num-experts", "4", "--moe-router-topk", "2"]
        flags += ["--moe-ffn-hidden-size", str(2 * width), "--disable-bias-linear"]
    sys.argv = ["pretrain_gpt.py", *flags]

    import gpt_builders
    import megatron.training.training as training
    import model_provider
    import mup_megatron as mup
    import pretrain_gpt
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.enums import ModelType
    from megatron.core.optimizer.optimizer import FP32Optimizer, MegatronOptimizer
    from megatron.training.arguments import parse_args, validate_args
    from megatron.training.global_vars import set_global_variables

    args = parse_args()
    validate_args(args)
    set_global_variables(args, build_tokenizer=False)
    args.padded_vocab_size = 512  # what the tokenizer build would set

    def cpu_fp32_init(self, optimizer, config, init_state_fn):  # loss scale: device='cuda'
        MegatronOptimizer.__init__(self, optimizer, config, init_state_fn)
        self._scale = torch.tensor([1.0])
        self.is_stub_optimizer = optimizer is None

    def get_model(provider, model_type, wrap_with_ddp=True):  # Megatron's DDP needs CUDA
        torch.manual_seed(0)
        m = provider(pre_process=True, post_process=True)
        m.ddp_config = DistributedDataParallelConfig()
        return [m]

    FP32Optimizer.__init__ = cpu_fp32_init
    training.get_model = get_model
    model, optimizer, scheduler = training.setup_model_and_optimizer(
        partial(model_provider.model_provider, pretrain_gpt.mup_gpt_builder),
        ModelType.encoder_or_decoder,
    )
    (m,) = model
    scheduler.step(0)
    group_of = {id(p): g for g in optimizer.param_groups for p in g["params"]}
    base = {"lr": args.lr, "weight_decay": args.weight_decay, "eps": args.adam_eps}
    if tied:  # parameter_hparams refuses a tie: the untied twin's numbers, head aside
        torch.manual_seed(0)
        args.untie_embeddings_and_output_weights = True
        twin = model_provider.model_provider(pretrain_gpt.mup_gpt_builder, True, True)
        args.untie_embeddings_and_output_weights = False
        want = mup.parameter_hparams(twin, width, depth, **base)
    else:
        want = mup.parameter_hparams(m, width, depth, **base)
    worst = 0.0
    for name, p in m.named_parameters():
        for key in ("lr", "weight_decay", "eps"):
            ref = want[name][key]
            worst = max(worst, abs(group_of[id(p)][key] - ref) / max(abs(ref), 1e-300))
    problems = mup.check_overrides(model, mup.optimizer_overrides(optimizer.config, model))
    print(
        f"{width}x{depth} {'tied' if tied else 'untied'}{' moe' if moe else ''}: "
        f"{len(group_of)} parameters in {len(optimizer.param_groups)} groups; largest relative "
        f"difference of lr / weight decay / eps from parameter_hparams {worst:.1e}; "
        f"check_overrides {problems}"
    )
    if (width, depth) == (64, 2):
        torch.manual_seed(0)
        plain = model_provider.model_provider(gpt_builders.gpt_builder, True, True)
        ours, theirs = dict(m.named_parameters()), dict(plain.named_parameters())
        same = ours.keys() == theirs.keys() and all(torch.equal(ours[n], theirs[n]) for n in ours)
        print(f"  the stock gpt_builder's model, same seed, bit for bit: {same}")


if __name__ == "__main__":
    main(sys.argv[1:])
