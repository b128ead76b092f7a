"""Explanations at data-set scale: the plan and chunks, the attribution store, its report, the Ray engine."""
