"""Explanations of generative language models: which prompt tokens produced each generated token (`registry` and
one module per method family), their quality (`faithfulness`), and what happens inside (`logit_lens`, decoder
attention)."""
