"""Concepts (TCAV): does a layer use a human concept for a class? `concept_report` runs it; `sources` is the
registry of where a concept's examples come from."""

from xaidash.explainers.concepts.api import ConceptReport, concept_report
from xaidash.explainers.concepts.significance import ConceptResult
from xaidash.explainers.concepts.sources import ConceptSource, list_sources, load_concept

__all__ = ["ConceptReport", "ConceptResult", "ConceptSource", "concept_report", "list_sources", "load_concept"]
