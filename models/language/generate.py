"""Generation with what each step chose and what it passed over: the probability of every generated token
and the top alternatives at that step, read from the model's raw logits (before any sampling filter)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from xaidash.models.language.model import LanguageModel
from xaidash.models.language.prompt import MAX_NEW_TOKENS, Prompt
from xaidash.models.registry import ModelError

ALTERNATIVES = 5


@dataclass(frozen=True)
class Step:
    """One generated token: its id and text, its probability, and the top alternatives (text, id, probability),
    highest first (the chosen token among them when it is in the top)."""

    id: int
    token: str
    prob: float
    alternatives: tuple[tuple[str, int, float], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "token": self.token,
            "probability": self.prob,
            "alternatives": [{"token": t, "id": i, "probability": p} for t, i, p in self.alternatives],
        }


@dataclass(frozen=True)
class Generation:
    prompt: Prompt
    steps: tuple[Step, ...]
    stopped: str  # "end of text" or "max new tokens"
    seconds: float
    sample: bool
    seed: int | None
    temperature: float

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(s.id for s in self.steps)

    @property
    def text(self) -> str:
        """The answer as text: every step's token but the end-of-text token it stopped at (that step stays in
        `steps`, with its probability)."""
        kept = self.steps[:-1] if self.stopped == "end of text" else self.steps
        return "".join(s.token for s in kept)

    def span_text(self, start: int, stop: int) -> str:
        return "".join(s.token for s in self.steps[start:stop])

    def to_json(self) -> dict[str, Any]:
        """The answer as a report keeps it: its text, why it stopped, its time and settings, and every step."""
        return {
            "text": self.text,
            "stopped": self.stopped,
            "seconds": round(self.seconds, 4),
            "sample": self.sample,
            "seed": self.seed,
            "temperature": self.temperature,
            "steps": [s.to_json() for s in self.steps],
        }


def cache_of(out: object) -> object:
    """The key-value cache a transformers forward pass returned (`cache` from transformers 5, `past_key_values`
    before)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


def _stop_ids(lm: LanguageModel) -> set[int]:
    ids: set[int] = set()
    for source in (lm.tokenizer, getattr(lm.model, "generation_config", None)):
        value = getattr(source, "eos_token_id", None)
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)
    return ids


@torch.no_grad()
def generate(
    lm: LanguageModel,
    prompt: Prompt,
    *,
    max_new_tokens: int = 32,
    sample: bool = False,
    temperature: float = 0.7,
    seed: int | None = 0,
    alternatives: int = ALTERNATIVES,
) -> Generation:
    """Greedy by default; with `sample`, tokens drawn from softmax(logits / temperature) with `seed`. The loop is
    written here (one step per token over the key-value cache) rather than `model.generate`, so each step's
    unfiltered probabilities and alternatives come with it."""
    if not 1 <= int(max_new_tokens) <= MAX_NEW_TOKENS:
        raise ModelError(f"max new tokens must be 1-{MAX_NEW_TOKENS}, not {max_new_tokens}.")
    if sample and not temperature > 0:
        raise ModelError(f"The sampling temperature must be above 0, not {temperature}.")
    room = lm.context - len(prompt)
    if room < 1:
        raise ModelError(f"The prompt fills the model's context of {lm.context} tokens: nothing can be generated.")
    steps_wanted = min(int(max_new_tokens), room)
    generator = torch.Generator(device="cpu").manual_seed(int(seed or 0)) if sample else None
    stop = _stop_ids(lm)
    started = time.perf_counter()
    ids = torch.tensor([prompt.ids], device=lm.device)
    past = None
    steps: list[Step] = []
    stopped = "max new tokens"
    for _ in range(steps_wanted):
        out = lm.model(input_ids=ids, cache=past, use_cache=True)
        past = cache_of(out)
        logits = out.logits[0, -1].float()
        probs = torch.softmax(logits, dim=-1)
        if sample:
            drawn = torch.softmax(logits / float(temperature), dim=-1).cpu()
            choice = int(torch.multinomial(drawn, 1, generator=generator).item())
        else:
            choice = int(torch.argmax(logits).item())
        top = torch.topk(probs, k=min(int(alternatives), probs.numel()))
        alts = tuple(
            (lm.tokenizer.decode([int(i)]), int(i), float(p))
            for p, i in zip(top.values.tolist(), top.indices.tolist(), strict=True)
        )
        steps.append(Step(choice, lm.tokenizer.decode([choice]), float(probs[choice]), alts))
        if choice in stop:
            stopped = "end of text"
            break
        ids = torch.tensor([[choice]], device=lm.device)
    return Generation(
        prompt=prompt,
        steps=tuple(steps),
        stopped=stopped,
        seconds=time.perf_counter() - started,
        sample=bool(sample),
        seed=int(seed or 0) if sample else None,
        temperature=float(temperature) if sample else 1.0,
    )
