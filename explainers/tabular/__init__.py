"""The global view of a table model: partial dependence and ICE (`pdp`), permutation importance (`importance`), a
surrogate tree (`surrogate`), glassbox references (`glassbox`), one entry point (`api.global_report`), its figures and
`xaidash global` (`cli`)."""

from xaidash.explainers.tabular.api import GlobalOptions, GlobalReport, global_report

__all__ = ["GlobalOptions", "GlobalReport", "global_report"]
