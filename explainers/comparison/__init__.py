"""Comparing explanations: methods on one sample, two models side by side, one input across training."""
