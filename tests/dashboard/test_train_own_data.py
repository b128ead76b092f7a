"""The Train page's "your own data": a name typed as the command line's --dataset takes it (a csv: table here) is
read, its notes shown, its models offered, and the run started with that name; a bad file is one line, no job."""

from __future__ import annotations

from pathlib import Path

from app_pages import assert_ok, make_app, open_page, record_starts, texts

from xaidash.dashboard.components.train_form import OWN, OWN_KEY


def _table(path: Path) -> Path:
    rows = "".join(
        f"r{i},{20 + i % 50},{['red', 'green', 'blue'][i % 3] if i % 7 else ''},{'ab'[i % 2]}\n" for i in range(60)
    )
    path.write_text("row_id,age,colour,label\n" + rows)
    return path


def test_a_table_typed_on_the_train_page_is_read_and_trained_by_its_name(
    tmp_path: Path, monkeypatch, fresh_jobs
) -> None:
    started = record_starts(monkeypatch)
    at = open_page(make_app(), "views/train.py")
    at.selectbox(key="train_dataset").set_value(OWN).run()
    assert_ok(at)
    hint = next(i for i in texts(at.info) if "Type the name of your data:" in i)
    assert all(form in hint for form in ("csv:<path>", "graphs:<path>", "imagefolder:<path>")), hint

    bad = tmp_path / "one.csv"
    bad.write_text("x,label\n1,a\n2,a\n")
    at.text_input(key=OWN_KEY).set_value(f"csv:{bad}?target=label").run()
    assert_ok(at)
    assert [e.value for e in at.error] == [
        f"{bad}: the target 'label' has one value ('a') on every row; a classifier needs at least 2 classes."
    ]
    assert not [b for b in at.button if b.label == "Start training"]

    name = f"csv:{_table(tmp_path / 'people.csv')}?target=label&id=row_id"
    at.text_input(key=OWN_KEY).set_value(name).run()
    assert_ok(at)
    assert not at.error
    shown = texts(at.caption)
    boxed = texts(at.warning)  # the data set's notes in a warning box (issue 36), its description a caption
    assert any("Missing values filled: colour: 9 as '(missing)'" in w for w in boxed), boxed
    assert any("target 'label' (2 classes), 2 columns (1 numeric, 1 categorical: colour)" in c for c in shown), shown
    assert at.selectbox(key="train_model").value == "tabular_mlp"
    next(b for b in at.button if b.label == "Start training").click().run()
    assert_ok(at)
    assert [cfg.dataset for cfg in started] == [name] and started[0].model == "tabular_mlp"
