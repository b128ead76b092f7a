"""The results an Explain session computes beside the maps, as parts of its report (`ReportExtra`): an attack with
the maps before and after, a counterfactual, the training samples behind a prediction. Each keeps the result's
every field (explainers/figures/result_json.py), the lines the page shows and its pictures."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PIL import Image

from xaidash.explainers.figures.png import input_image, png_bytes
from xaidash.explainers.figures.report_extras import ExtraFigure, ReportExtra, folder_of
from xaidash.explainers.figures.result_json import result_json
from xaidash.explainers.influence.api import InfluenceResult, TrainingSample
from xaidash.explainers.robust.attack import AttackResult
from xaidash.explainers.robust.counterfactual import Counterfactual
from xaidash.explainers.robust.explanation_change import TOP_SHARE, MapChange
from xaidash.explainers.robust.figures import change_figures, perturbation_figure
from xaidash.explainers.robust.table_value_counterfactual import ValueCounterfactual, value_change_text

SHOWN_PX = 224  # an input image in the report: enlarged to this width (nearest neighbour: the pixels stay pixels)
TEXT_CHARS = 160  # a training text in the table


def picture(image01: Any, width: int = SHOWN_PX) -> bytes:
    """An input image as PNG, enlarged to `width` pixels wide (nearest neighbour)."""
    img = input_image(image01)
    height = max(1, round(img.height * width / max(1, img.width)))
    return png_bytes(img.resize((width, height), Image.Resampling.NEAREST))


def _data(result: Any, i: int, kind: str, **more: Any) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The result's every field and `more` beside them (plain JSON), and their array files under the extra's folder."""
    prefix = f"{folder_of(i, kind)}/"
    data, files = result_json(result, prefix=prefix)
    beside, more_files = result_json(more, prefix=prefix)
    return {**data, **beside}, {**files, **more_files}


def _attack_figures(result: AttackResult, label: str = "") -> list[ExtraFigure]:
    c = result.classes
    before = f"{c[result.pred_before]} ({result.probs_before[result.pred_before]:.0%})"
    after = f"{c[result.pred_after]} ({result.probs_after[result.pred_after]:.0%})"
    out = [
        ExtraFigure(f"{label}Original", picture(result.original), f"predicted {before}"),
        ExtraFigure(f"{label}Perturbed", picture(result.perturbed), f"predicted {after}"),
    ]
    fig = perturbation_figure(result)
    if fig.figure_png is not None:
        out.append(ExtraFigure(f"{label}Perturbation", fig.figure_png, fig.caption.text()))
    return out


def attack_extra(i: int, result: AttackResult, changes: Sequence[MapChange], display: str = "overlay") -> ReportExtra:
    """An attack on input `i`: its verdict, the original, perturbed and perturbation pictures, each method's map
    before and after with their rank correlation and top-pixel overlap."""
    figures = _attack_figures(result)
    lines = [result.summary()]
    for c in changes:
        pair = change_figures(c, result, result.classes, display)
        if pair is None:
            lines.append(f"{c.label}: failed ({c.error})")
            continue
        lines.append(f"{c.label}: Spearman ρ {c.spearman:.2f}, top {TOP_SHARE:.0%} kept {c.top_k:.0%} ({c.k} pixels)")
        for name, fig in zip(("before", "after"), pair, strict=True):
            if fig.figure_png is not None:
                figures.append(ExtraFigure(f"{c.label}: {name}", fig.figure_png, fig.caption.text()))
    data, files = _data(result, i, "attack", explanations=list(changes))
    title = f"Attack: {result.label}, ε = {result.epsilon * 255:.0f}/255"
    return ReportExtra(i, "attack", title, lines, data, figures, [], files)


def _changes_table(cf: Counterfactual | ValueCounterfactual) -> list[dict[str, str]]:
    """A table row's changed columns, each before → after in its units (empty for images and texts)."""
    return [{"column": c.column, "the row": c.old_text, "→ changed to": c.new_text} for c in cf.changes]


def counterfactual_extra(i: int, cf: Counterfactual | ValueCounterfactual) -> ReportExtra:
    """A counterfactual for input `i`: what was found (or that none was within the budget), its pictures, the edited
    words or the changed columns; for a number to predict, the range it reached for and the value before → after."""
    lines = [cf.summary()]
    if isinstance(cf, ValueCounterfactual):
        title = f"Counterfactual: the predicted {cf.target.name} {cf.goal.text(cf.target)}"
        if cf.after is not None:
            lines.append(f"Predicted {value_change_text(cf.target, cf.before, cf.after)}")
        figures = []
    else:
        title = f"{cf.name[:1].upper()}{cf.name[1:]}: towards {cf.target_name}"  # names an adversarial example
        if cf.text is not None:
            lines.append(f"Edited text: {cf.text}")
        figures = _attack_figures(cf.result) if cf.result is not None else []
    if cf.note:
        lines.append(cf.note)
    if cf.fixed:
        lines.append("Kept as they were: " + ", ".join(cf.fixed) + ".")
    data, files = _data(cf, i, "counterfactual")
    return ReportExtra(i, "counterfactual", title, lines, data, figures, _changes_table(cf), files)


def _class(classes: Sequence[str], k: int) -> str:
    return classes[k] if 0 <= k < len(classes) else f"class {k}"


def _row(side: str, rank: int, s: TrainingSample, classes: Sequence[str], text: str | None) -> dict[str, str]:
    label = _class(classes, s.label) + (
        f" (flipped from {_class(classes, s.dataset_label)})" if s.label != s.dataset_label else ""
    )
    row = {
        "": f"{side} {rank}",
        "train index": str(s.index),
        "trained as": label,
        "predicted": f"{_class(classes, s.predicted)} {s.probability:.0%}",
        "score": f"{s.score:+.4g}",
    }
    if text is not None:
        row["text"] = text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"
    return row


def influence_extra(i: int, result: InfluenceResult, classes: Sequence[str], split: Any = None) -> ReportExtra:
    """The training samples behind input `i`'s prediction: the supporting and opposing ones in a table (with their
    pictures when `split`, the run's training split, holds images; their texts when it holds texts)."""
    epochs = ", ".join(str(e) for e in result.checkpoints) or "the final weights"
    lines = [
        f"{result.label} for class {_class(classes, result.target)} · checkpoints: {epochs} · layer: {result.layer} · "
        f"score units: {result.units} · {result.seconds:.1f} s",
        "Supporting samples pushed the model towards the class (highest positive score first); opposing ones away "
        "from it (most negative first).",
        *result.notes,
    ]
    texts = getattr(split, "texts", None)
    image = getattr(split, "image", None) if texts is None else None
    table, figures = [], []
    for side, samples in (("supporting", result.proponents), ("opposing", result.opponents)):
        for rank, s in enumerate(samples, 1):
            table.append(_row(side, rank, s, classes, None if texts is None else str(texts[s.index])))
            if image is not None:
                figures.append(
                    ExtraFigure(
                        f"{side} {rank}: train #{s.index}",
                        picture(image(s.index).numpy(), 96),
                        f"score {s.score:+.3g} · trained as {_class(classes, s.label)}",
                    )
                )
    data, files = _data(result, i, "training_samples", classes=list(classes))
    return ReportExtra(
        i, "training_samples", "Training samples behind this prediction", lines, data, figures, table, files
    )
