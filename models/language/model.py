"""A causal language model loaded for explanation: the transformers model, its tokenizer, and the few parts
explainers reach into (input embedding, decoder layers, final norm, unembedding), found once here so nothing
else decides them by architecture name."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from xaidash.models.registry import ModelError

# Where each decoder family keeps the stack of layers and the norm after it (the embedding and unembedding come
# from transformers' own get_input_embeddings / get_output_embeddings). Keyed by config.model_type.
_STACKS: dict[str, tuple[str, str]] = {
    "llama": ("model.layers", "model.norm"),
    "mistral": ("model.layers", "model.norm"),
    "qwen2": ("model.layers", "model.norm"),
    "qwen3": ("model.layers", "model.norm"),
    "gemma": ("model.layers", "model.norm"),
    "gemma2": ("model.layers", "model.norm"),
    "phi3": ("model.layers", "model.norm"),
    "olmo": ("model.layers", "model.norm"),
    "stablelm": ("model.layers", "model.norm"),
    "gpt2": ("transformer.h", "transformer.ln_f"),
    "gpt_neox": ("gpt_neox.layers", "gpt_neox.final_layer_norm"),
    "phi": ("model.layers", "model.final_layernorm"),
}
SUPPORTED_TYPES = tuple(_STACKS)


@dataclass(frozen=True)
class DecoderParts:
    """Module paths inside the transformers model."""

    embedding: str
    layers: str
    final_norm: str
    unembedding: str


def _path_of(model: nn.Module, module: nn.Module | None, what: str) -> str:
    for name, m in model.named_modules():
        if m is module:
            return name
    raise ModelError(f"{type(model).__name__} does not expose its {what}.")


def decoder_parts(model: nn.Module) -> DecoderParts:
    """The parts of a transformers causal LM, or a ModelError naming the architectures xaidash reads."""
    model_type = str(getattr(getattr(model, "config", None), "model_type", ""))
    if model_type not in _STACKS:
        raise ModelError(
            f"Decoder architecture {model_type or type(model).__name__!r} is not one xaidash can look inside; "
            f"supported: {', '.join(SUPPORTED_TYPES)}."
        )
    layers, norm = _STACKS[model_type]
    get_in = getattr(model, "get_input_embeddings", None)
    get_out = getattr(model, "get_output_embeddings", None)
    embedding = _path_of(model, get_in() if callable(get_in) else None, "input embedding")
    unembedding = _path_of(model, get_out() if callable(get_out) else None, "output embedding (lm_head)")
    for path in (layers, norm):
        try:
            model.get_submodule(path)
        except AttributeError:
            raise ModelError(
                f"{type(model).__name__} has no module {path!r}: not a standard {model_type} model."
            ) from None
    return DecoderParts(embedding=embedding, layers=layers, final_norm=norm, unembedding=unembedding)


@dataclass
class LanguageModel:
    """A causal LM ready to prompt: eval mode, on `device`, attention read eagerly (so weights can be returned)."""

    model: nn.Module
    tokenizer: Any
    device: torch.device
    name: str
    parts: DecoderParts
    context: int  # the most tokens (prompt and generated) the model reads at once
    run_dir: Path | None = None

    @property
    def config(self) -> Any:
        return self.model.config

    @property
    def num_layers(self) -> int:
        return len(self.layers())

    @property
    def num_heads(self) -> int:
        return int(self.config.num_attention_heads)

    @property
    def has_chat_template(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    @property
    def vocab_size(self) -> int:
        return int(self.unembedding().weight.shape[0])

    def embedding(self) -> nn.Embedding:
        m = self.model.get_submodule(self.parts.embedding)
        assert isinstance(m, nn.Embedding)
        return m

    def layers(self) -> nn.ModuleList:
        m = self.model.get_submodule(self.parts.layers)
        assert isinstance(m, nn.ModuleList)
        return m

    def final_norm(self) -> nn.Module:
        return self.model.get_submodule(self.parts.final_norm)

    def unembedding(self) -> nn.Linear:
        m = self.model.get_submodule(self.parts.unembedding)
        assert isinstance(m, nn.Linear)
        return m

    def special_ids(self) -> set[int]:
        return {int(i) for i in (getattr(self.tokenizer, "all_special_ids", None) or [])}

    def token_text(self, ids: list[int] | tuple[int, ...]) -> list[str]:
        """Each id as the text it stands for (a leading space kept, so words can be told apart)."""
        return [self.tokenizer.decode([int(i)]) for i in ids]

    @torch.no_grad()
    def logits(self, ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """(N, T, vocab) float logits for token ids (N, T) on the device."""
        out = self.model(input_ids=ids.to(self.device), attention_mask=attention_mask, use_cache=False)
        return out.logits.float()


def context_of(config: Any) -> int:
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return 2048


def wrap(
    model: nn.Module, tokenizer: Any, name: str, device: torch.device, run_dir: Path | None = None
) -> LanguageModel:
    """A loaded transformers causal LM as a LanguageModel (parts checked, eval mode, moved to `device`)."""
    parts = decoder_parts(model)
    model.to(device).eval()
    if getattr(tokenizer, "pad_token_id", None) is None and getattr(tokenizer, "eos_token", None) is not None:
        tokenizer.pad_token = tokenizer.eos_token  # batched passes pad with it (masked out)
    return LanguageModel(model, tokenizer, device, name, parts, context_of(model.config), run_dir)
