"""Reusable page parts: the input picker, parameter controls, charts and image helpers."""
