"""The global view of a table model: partial dependence and ICE (`pdp`), permutation importance (`importance`), a
surrogate tree (`surrogate`), glassbox references (`glassbox`), one entry point (`api.global_report`), its figures and
`xaidash global` (`cli`)."""

from xaidash.explainers.tabular.api import GlobalOptions, GlobalReport, column_dependence, global_report, pair_map

__all__ = ["GlobalOptions", "GlobalReport", "column_dependence", "global_report", "pair_map"]
