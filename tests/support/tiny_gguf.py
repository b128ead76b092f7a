"""Tiny GGUF files written with the `gguf` package: a one-layer decoder with a byte-level tokenizer and a chat template,
which transformers converts in about a second (import tests and their refusals)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tiny_lm import CHAT_TEMPLATE

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def _byte_tokens() -> list[str]:
    from transformers.convert_slow_tokenizer import bytes_to_unicode  # GPT-2's byte -> printable character table

    table = bytes_to_unicode()
    return [table[b] for b in range(256)] + list(SPECIALS)


def write_gguf(path: Path, arch: str = "llama", qtype: object = None, hidden: int = 32, heads: int = 2) -> Path:
    """A one-layer `arch` decoder with random weights (2-D tensors stored as `qtype`, default float32) and a
    byte-level GPT-2 tokenizer without merges, as llama.cpp names its keys and tensors."""
    import gguf

    tokens, ff = _byte_tokens(), 2 * hidden
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name("tiny")
    writer.add_context_length(512)
    writer.add_embedding_length(hidden)
    writer.add_block_count(1)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(hidden // heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([1] * 256 + [3] * len(SPECIALS))
    writer.add_token_scores([0.0] * len(tokens))
    writer.add_token_merges([])
    writer.add_pad_token_id(256)
    writer.add_bos_token_id(257)
    writer.add_eos_token_id(258)
    writer.add_chat_template(CHAT_TEMPLATE)
    rng = np.random.default_rng(0)

    def tensor(name: str, *shape: int) -> None:
        values = (0.05 * rng.standard_normal(shape)).astype(np.float32)
        if qtype is None or len(shape) == 1:
            writer.add_tensor(name, values)
            return
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        try:
            data = gguf.quants.quantize(values, qtype)
        except NotImplementedError:  # a type gguf cannot write either: its bytes, zeros
            data = np.zeros((shape[0], shape[1] // block * size), dtype=np.uint8)
        writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)

    tensor("token_embd.weight", len(tokens), hidden)
    tensor("blk.0.attn_norm.weight", hidden)
    for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
        tensor(f"blk.0.{part}.weight", hidden, hidden)
    tensor("blk.0.ffn_norm.weight", hidden)
    tensor("blk.0.ffn_gate.weight", ff, hidden)
    tensor("blk.0.ffn_up.weight", ff, hidden)
    tensor("blk.0.ffn_down.weight", hidden, ff)
    tensor("output_norm.weight", hidden)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
