"""`xaidash sae`: sparse autoencoders on a language-model run.

- `xaidash sae train --run LM --layer L [--site --architecture --width --k --corpus --tokens ...]` states the
  expected time, harvests the activations and trains with SAELens, printing progress lines; Ctrl-C stops after the
  current step with a resumable state, `--resume SAE_ID` continues it to the planned step. Ends with the held-out
  metrics.
- `xaidash sae list --run LM`: the run's SAEs with their status and metrics.
- `xaidash sae eval --run LM --sae ID`: evaluate an SAE again on its held-out tokens (metrics.json rewritten).
"""

from __future__ import annotations

import argparse
import signal
import textwrap
import threading
import time
from typing import Any

from xaidash.data.argtypes import float_range
from xaidash.data.formatting import duration_text
from xaidash.explainers.cli import one_line_errors
from xaidash.explainers.language.cli import LATEST, pick_run
from xaidash.models.device import device_arg
from xaidash.models.language.sae.config import ARCHITECTURES, SaeConfig, expected_seconds
from xaidash.models.language.sites import SITES

DEFAULTS = SaeConfig(layer=0)
PROGRESS_LINES = 20  # progress lines per phase


def metrics_lines(metrics: dict[str, Any] | None) -> list[str]:
    """The held-out metrics as a few aligned lines."""
    if not metrics:
        return ["  no metrics yet (the training has not finished)"]
    m = metrics
    return [
        f"  explained variance  {m['explained_variance']:.3f}   (1 - MSE / variance about the mean)",
        f"  loss recovered      {m['loss_recovered']:.3f}   (CE clean {m['ce_loss_clean']:.3f}, with the SAE "
        f"{m['ce_loss_with_sae']:.3f}, zero-ablated {m['ce_loss_zero_ablated']:.3f})",
        f"  L0                  {m['l0']:.1f}   (active features per token)",
        f"  dead features       {m['dead']:,}   (never active on {m['heldout_tokens']:,} held-out tokens)",
        f"  dense features      {m['dense']:,}   (active on more than a tenth of them)",
    ]


class Progress:
    """Prints about PROGRESS_LINES lines per phase from the training's events."""

    def __init__(self) -> None:
        self.shown: dict[str, int] = {}

    def __call__(self, e: Any) -> None:
        if e.phase == "harvest":
            self._every(
                "harvest",
                e.tokens_seen,
                e.tokens_total,
                lambda: f"harvest {e.tokens_seen:,}/{e.tokens_total:,} tokens  {duration_text(e.elapsed)}",
            )
        elif e.phase == "train":
            rate = e.step / max(e.elapsed, 1e-9)
            eta = (e.total_steps - e.step) / rate if rate > 0 else None
            self._every(
                "train",
                e.step,
                e.total_steps,
                lambda: (
                    f"step {e.step:,}/{e.total_steps:,}  mse {e.mse:.4g}  EV {e.explained_variance:.3f}  "
                    f"L0 {e.l0:.1f}  dead {e.dead:,}  {duration_text(e.elapsed)}  ETA {duration_text(eta)}"
                ),
            )
        elif e.phase == "evaluate":
            print("evaluating on the held-out tokens ...", flush=True)

    def _every(self, phase: str, done: int, total: int, line: Any) -> None:
        bucket = done * PROGRESS_LINES // max(total, 1)
        if self.shown.get(phase, -1) < bucket:
            self.shown[phase] = bucket
            print(line(), flush=True)


def _config(args: argparse.Namespace) -> SaeConfig:
    return SaeConfig(
        layer=args.layer,
        site=args.site,
        architecture=args.architecture,
        width=args.width,
        k=args.k if args.architecture == "topk" else None,
        corpus=args.corpus,
        tokens=args.tokens,
        context=args.context,
        batch_tokens=args.batch_tokens,
        lr=args.lr,
        heldout_tokens=args.heldout_tokens,
        seed=args.seed,
        sparsity=args.sparsity,
        epochs=args.epochs,
    )


def _stop_on_ctrl_c(stop: threading.Event) -> Any:
    """The first Ctrl-C sets `stop` (the training ends after its step, resumable); a second one interrupts."""

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print("\nstopping after this step (Ctrl-C again to abort without a resumable state) ...", flush=True)

    return signal.signal(signal.SIGINT, handler)


def _train(args: argparse.Namespace) -> int:
    from xaidash.models.language.loading import load_language_model
    from xaidash.models.language.sae import store
    from xaidash.models.language.sae.train import train_sae
    from xaidash.models.registry import ModelError

    run = pick_run(args.run)
    if args.resume is None and args.layer is None:
        raise ModelError("Give --layer L (the decoder layer whose activations the SAE reads), or --resume SAE_ID.")
    config = _config(args) if args.resume is None else store.read_record(run, args.resume).config
    config.check_settings()
    lm = load_language_model(run, args.device)
    if args.resume is None:
        config.check(lm)
    t = expected_seconds(config, int(lm.embedding().weight.shape[1]), lm.num_layers, store.measured_rates(run))
    print(
        f"{'resuming ' + args.resume if args.resume else 'training'}: layer {config.layer} {config.site}, "
        f"{config.architecture} width {config.width:,}, {config.tokens:,} tokens of {config.corpus} on {lm.device}; "
        f"expected about {duration_text(t['total'])} (harvest {duration_text(t['harvest'])}, train "
        f"{duration_text(t['train'])}, evaluate {duration_text(t['evaluate'])}). Ctrl-C stops with a resumable state.",
        flush=True,
    )
    stop = threading.Event()
    previous = _stop_on_ctrl_c(stop)
    start = time.monotonic()
    try:
        record = train_sae(run, config, Progress(), stop, resume=args.resume, lm=lm)
    finally:
        signal.signal(signal.SIGINT, previous)
    if record.status == "stopped":
        print(f"stopped: SAE {record.id}. Continue it with: xaidash sae train --run {run.id} --resume {record.id}")
        return 0
    print(f"done in {duration_text(time.monotonic() - start)}: SAE {record.id} (under {record.folder})")
    print("held-out metrics:")
    print("\n".join(metrics_lines(record.metrics)))
    return 0


def _num(metrics: dict[str, Any], key: str, fmt: str) -> str:
    return format(metrics[key], fmt) if key in metrics else "-"


def _list(args: argparse.Namespace) -> int:
    from xaidash.models.language.sae import store

    run = pick_run(args.run)
    records = store.list_saes(run)
    if not records:
        print(f"Run {run.id} has no SAEs yet: xaidash sae train --run {run.id} --layer L")
        return 0
    print(
        f"{'id':<40} {'layer':>5} {'site':<5} {'arch':<8} {'width':>7} {'k':>4} {'status':<9} "
        f"{'EV':>6} {'loss rec':>8} {'L0':>6} {'dead':>6}"
    )
    for r in records:
        c, m = r.config, r.metrics or {}
        print(
            f"{r.id:<40} {c.layer:>5} {c.site:<5} {c.architecture:<8} {c.width:>7,} {c.k or '-':>4} {r.status:<9} "
            f"{_num(m, 'explained_variance', '.3f'):>6} {_num(m, 'loss_recovered', '.3f'):>8} "
            f"{_num(m, 'l0', '.1f'):>6} {_num(m, 'dead', ','):>6}"
        )
    return 0


def _eval(args: argparse.Namespace) -> int:
    from xaidash.data.atomic import atomic_write_json
    from xaidash.models.language.loading import load_language_model
    from xaidash.models.language.sae import store
    from xaidash.models.language.sae.evaluate import evaluate_folder

    run = pick_run(args.run)
    record = store.read_record(run, args.sae)
    lm = load_language_model(run, args.device)
    metrics = {**(record.metrics or {}), **evaluate_folder(lm, run, args.sae)}
    if record.status == "finished":
        atomic_write_json(record.folder / store.METRICS, metrics)
    print(f"SAE {record.label}")
    print("\n".join(metrics_lines(metrics)))
    return 0


def _add_train(sub: Any) -> None:
    p = sub.add_parser(
        "train",
        help="harvest a layer's activations and train a sparse autoencoder on them (SAELens)",
        description=textwrap.fill(
            "Harvests the activations of one site of one decoder layer over a corpus (streamed to disk under the "
            "run), trains an SAE on them with SAELens and evaluates it on held-out tokens. Ctrl-C stops after the "
            "current step with a resumable state; --resume SAE_ID continues it.",
            100,
        ),
    )
    d = DEFAULTS
    p.add_argument("--run", help=f"a language-model run id; default {LATEST}: the newest one")
    p.add_argument("--layer", type=int, help="decoder layer (0 = the first)")
    p.add_argument(
        "--site",
        choices=list(SITES),
        default=d.site,
        help=f"where in the layer (default {d.site}): " + "; ".join(f"{s.id} = {s.label}" for s in SITES.values()),
    )
    p.add_argument("--architecture", choices=ARCHITECTURES, default=d.architecture, help=f"default {d.architecture}")
    p.add_argument("--width", type=int, default=d.width, help=f"features (default {d.width:,})")
    p.add_argument("--k", type=int, default=d.k, help=f"active features per token, topk (default {d.k})")
    p.add_argument("--sparsity", type=float, default=d.sparsity, help="L1 (standard) or L0 (jumprelu) coefficient")
    p.add_argument(
        "--corpus", default=d.corpus, help=f"sst2, sms_spam, cues, a text FILE or a FOLDER (default {d.corpus})"
    )
    p.add_argument("--tokens", type=int, default=d.tokens, help=f"training tokens (default {d.tokens:,})")
    p.add_argument(
        "--epochs", type=int, default=d.epochs, help=f"passes over the harvested tokens (default {d.epochs})"
    )
    p.add_argument("--context", type=int, default=d.context, help=f"tokens per context (default {d.context})")
    p.add_argument("--batch-tokens", type=int, default=d.batch_tokens, help=f"default {d.batch_tokens:,}")
    p.add_argument("--lr", type=float_range(0.0, 1.0, lo_open=True), default=d.lr, help=f"default {d.lr:g}")
    p.add_argument("--heldout-tokens", type=int, default=d.heldout_tokens, help=f"default {d.heldout_tokens:,}")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--resume", metavar="SAE_ID", help="continue a stopped SAE (its own settings hold)")
    p.add_argument("--device", type=device_arg, default="auto", help="auto (default), cpu, cuda, cuda:N or mps")
    p.set_defaults(func=lambda a: one_line_errors(_train, a))


def add_commands(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sae", help="sparse autoencoders on a language-model run: train, list, eval")
    inner = p.add_subparsers(dest="sae_command", required=True)
    _add_train(inner)
    lst = inner.add_parser("list", help="the run's SAEs with their status and held-out metrics")
    lst.add_argument("--run", help=f"a language-model run id; default {LATEST}")
    lst.set_defaults(func=lambda a: one_line_errors(_list, a))
    ev = inner.add_parser("eval", help="evaluate an SAE again on its held-out tokens")
    ev.add_argument("--run", help=f"a language-model run id; default {LATEST}")
    ev.add_argument("--sae", required=True, help="the SAE's id (xaidash sae list)")
    ev.add_argument("--device", type=device_arg, default="auto", help="auto (default), cpu, cuda, cuda:N or mps")
    ev.set_defaults(func=lambda a: one_line_errors(_eval, a))
