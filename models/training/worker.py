"""The training process under torchrun: `torchrun --nproc-per-node N -m xaidash.models.training.worker [train flags]`.

`xaidash train --nproc N` starts these processes itself (PyTorch's elastic launcher, the engine of torchrun);
this entry point is for launching them with torchrun or a cluster's scheduler instead, e.g. on two machines:

    torchrun --nnodes 2 --node-rank 0 --nproc-per-node 4 --master-addr node0 --master-port 29500 \\
        -m xaidash.models.training.worker --dataset cifar10 --model resnet18 --epochs 30

It takes `xaidash train`'s flags (its --nproc/--nnodes/... are torchrun's business here and ignored). Rank 0
shows the progress and writes the run folder; Ctrl-C (torchrun passes it on) stops every rank at the same step
and keeps a checkpoint; a crashed rank marks the run failed with its reason.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import asdict

from xaidash.models.cli import ProgressPrinter, add_commands, config_from_args
from xaidash.models.training.launcher import worker_main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m xaidash.models.training.worker")
    add_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["train", *(sys.argv[1:] if argv is None else argv)])
    cfg = config_from_args(args)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    cfg.nproc = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    main_rank = os.environ.get("RANK", "0") == "0"
    callbacks = [ProgressPrinter(args.quiet)] if main_rank else []
    out = worker_main(asdict(cfg), args.resume, args.backend, callbacks=callbacks)
    if out is None:
        return 2 if main_rank else 0  # refused: rank 0's message went to the log
    if main_rank:
        print(f"{out['state']}: run folder {out['path']}  test acc {out['test_acc']}")
    return 1 if out["state"] == "failed" else 0


def exit_now(code: int) -> None:
    """Leave without the interpreter's teardown: the run is written and the process group destroyed, but gloo's
    C++ threads can still be joinable when static objects are destroyed at exit, which aborts the process
    ("terminate called without an active exception", SIGABRT) and makes torchrun report a finished run as
    failed. Seen once in a full suite on 2 loaded cores."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
