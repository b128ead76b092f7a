"""Sparse autoencoders on a language model's activations: settings (`config`), the corpus (`corpus`), harvesting
the activations to disk (`harvest`), training with SAELens (`train`), held-out evaluation (`evaluate`) and the files
kept under the language model's run (`store`)."""
