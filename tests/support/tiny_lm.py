"""Small random causal language models built with transformers (fast tests), with a word-level tokenizer that has
a chat template, so everything the SmolLM2 tests check runs in well under a second per call."""

from __future__ import annotations

from pathlib import Path

import torch

from xaidash.models.language.model import LanguageModel, wrap

WORDS = [
    *["<unk>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "user", "assistant"],
    "\n",
    *[
        "what",
        "is",
        "the",
        "capital",
        "of",
        "france",
        "?",
        "paris",
        "london",
        "berlin",
        "a",
        "an",
        "city",
        "country",
        "it",
        "in",
        "and",
        "to",
        ".",
        ",",
        "yes",
        "no",
    ],
    *["red", "blue", "green", "cat", "dog"],
]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_tokenizer():
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(dict.fromkeys(WORDS))}
    tok = Tokenizer(WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split("\n", behavior="isolated"),
            pre_tokenizers.WhitespaceSplit(),
            pre_tokenizers.Punctuation(),
        ]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        eos_token="<|im_end|>",
        bos_token="<|im_start|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>", "<|endoftext|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_llama(seed: int = 0, layers: int = 2, heads: int = 4, hidden: int = 32) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(dict.fromkeys(WORDS)),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        attn_implementation="eager",
    )
    config._attn_implementation = "eager"
    return LlamaForCausalLM(config).eval()


def tiny_gpt2(seed: int = 0) -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=len(dict.fromkeys(WORDS)),
        n_embd=32,
        n_layer=2,
        n_head=4,
        n_positions=512,
        bos_token_id=2,
        eos_token_id=3,
    )
    config._attn_implementation = "eager"
    return GPT2LMHeadModel(config).eval()


def tiny_lm(kind: str = "llama", seed: int = 0) -> LanguageModel:
    """A LanguageModel on the CPU: random weights, the word-level tokenizer above, its chat template."""
    model = tiny_llama(seed) if kind == "llama" else tiny_gpt2(seed)
    return wrap(model, tiny_tokenizer(), f"tiny-{kind}", torch.device("cpu"))


def save_tiny_folder(folder: Path, kind: str = "llama", seed: int = 0) -> Path:
    """A transformers causal LM folder (config, safetensors, tokenizer) for `xaidash import hf:FOLDER` tests."""
    lm = tiny_lm(kind, seed)
    lm.model.save_pretrained(str(folder))
    lm.tokenizer.save_pretrained(str(folder))
    return folder
