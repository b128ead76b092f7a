"""Prompt attribution methods, one module each; importing this package registers them all."""
