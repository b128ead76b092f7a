"""A language model's run folder back to a `LanguageModel` (seconds, not the GGUF's dequantisation), and the
run store's answer when a page for classifiers is handed one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from xaidash.data.modalities import PROMPT
from xaidash.models.bundle import ModelBundle
from xaidash.models.device import pick_device
from xaidash.models.language.model import LanguageModel, wrap
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import LANGUAGE_MARK, Run, RunLoader, register_loader, resolve_run

LM_FOLDER = "lm"  # the transformers folder inside the run
MODALITY = PROMPT.id
MARK = LANGUAGE_MARK  # the config.json key of a language model's run


def is_language_run(run: Run) -> bool:
    """Whether `run` holds a generative language model (`Run.kind`); False for a run that cannot be read."""
    try:
        return run.kind == "language_model"
    except ModelError:
        return False


def load_folder(folder: Path, name: str, device: str | None = "auto", run_dir: Path | None = None) -> LanguageModel:
    """Load a converted folder (transformers config, safetensors, tokenizer) with eager attention."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # a 0.2 s load needs no progress bar in the terminal or server log
    if not (folder / "model.safetensors").is_file() or not (folder / "config.json").is_file():
        raise ModelError(f"{folder} lacks model.safetensors or config.json: import the model again.")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        model = AutoModelForCausalLM.from_pretrained(
            str(folder), dtype=torch.float32, attn_implementation="eager", use_safetensors=True
        )
    except (ValueError, OSError, KeyError, RuntimeError) as e:
        raise ModelError(f"Could not load the language model in {folder}: {e}") from None
    return wrap(model, tokenizer, name, pick_device(device), run_dir)


def load_language_model(run: str | Path | Run, device: str | None = "auto") -> LanguageModel:
    """The language model of a run made by `xaidash import smollm2 | gguf: | hf:` (a causal LM)."""
    r = run if isinstance(run, Run) else resolve_run(run)
    config = r.config()
    if r.kind != "language_model":
        raise ModelError(f"Run {r.id} holds a {config.get('model', '?')} classifier, not a generative language model.")
    return load_folder(r.path / LM_FOLDER, str(config.get("model", r.id)), device, r.path)


def _refuse(run: Run, device: str | None = None, epoch: int | None = None) -> ModelBundle:
    raise ModelError(
        f"Run {run.id} is a generative language model ({run.config().get('model', '?')}): open it on the Generate "
        f"page or with `xaidash generate --run {run.id}`."
    )


def _tokenizer(run: Run) -> Any:
    return None


register_loader("language_model", RunLoader(load=_refuse, tokenizer=_tokenizer))
