"""`xaidash runs --calibration [RUN]`: a run's calibration on the terminal (ECE, MCE, NLL and Brier before and after
temperature scaling, T, and the reliability table), fitted and saved first when missing or stale."""

from __future__ import annotations

import sys
from pathlib import Path

from xaidash.data.atomic import atomic_write_json
from xaidash.models.calibration import CalibrationScores
from xaidash.models.calibration_run import CALIBRATION, Calibration, calibration_for
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import resolve_run


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def reliability_table(before: CalibrationScores, after: CalibrationScores) -> list[str]:
    """One line per confidence bin: its range, and for plain and scaled probabilities the count, mean confidence,
    accuracy and their gap (accuracy - confidence: negative is overconfident)."""
    lines = [
        f"{'confidence bin':15s} | {'before: n':>9s} {'conf':>6s} {'acc':>6s} {'gap':>7s} |"
        f" {'after: n':>9s} {'conf':>6s} {'acc':>6s} {'gap':>7s}"
    ]
    for b, a in zip(before.bins, after.bins, strict=True):
        cells = []
        for x in (b, a):
            gap = None if x.accuracy is None or x.confidence is None else x.accuracy - x.confidence
            gap_text = "-" if gap is None else f"{gap:+.3f}"
            cells.append(f"{x.count:>9d} {_cell(x.confidence):>6s} {_cell(x.accuracy):>6s} {gap_text:>7s}")
        lines.append(f"{f'({b.lower:.3f}, {b.upper:.3f}]':15s} | {cells[0]} | {cells[1]}")
    return lines


def report_lines(run_id: str, cal: Calibration) -> list[str]:
    """The terminal report of a calibration."""
    b, a = cal.before, cal.after
    rows = [
        ("ECE (15 bins)", b.ece, a.ece),
        ("MCE", b.mce, a.mce),
        ("NLL (nats)", b.nll, a.nll),
        ("Brier", b.brier, a.brier),
        ("accuracy", b.accuracy, a.accuracy),
    ]
    return [
        f"run {run_id}: temperature T = {cal.temperature:.4f} (fitted {cal.created})",
        cal.note,
        f"{'':14s} {'before':>8s} {'after':>8s}",
        *(f"{name:14s} {x:8.4f} {y:8.4f}" for name, x, y in rows),
        "",
        "reliability (bins of the top class's probability; gap = accuracy - confidence, negative: overconfident)",
        *reliability_table(b, a),
    ]


def cmd_calibration(run: str, out: str | None = None, refit: bool = False, device: str | None = "cpu") -> int:
    """Print a run's calibration (fitting and saving it when missing or stale), optionally writing it as JSON."""
    r = resolve_run(run)
    cal, fitted = calibration_for(
        r, device=device, refit=refit, progress=lambda what: print(f"calibration: {what}…", file=sys.stderr)
    )
    print("\n".join(report_lines(r.id, cal)))
    print(f"{'saved' if fitted else 'read'}: {r.file(CALIBRATION)}")
    if out:
        target = Path(out)
        if target.is_dir():
            raise ModelError(f"--out {out} is a folder: give a file name such as calibration.json.")
        try:
            atomic_write_json(target, {"run": r.id, **cal.to_json()})
        except OSError as e:
            raise ModelError(f"Could not write {out}: {e}") from None
        print(f"wrote {out}")
    return 0
