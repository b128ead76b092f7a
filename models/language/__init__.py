"""Generative (causal) language models: imported once into a run folder (`convert`), loaded back (`model`),
prompted through their chat template (`prompt`) and asked to write (`generate`)."""
