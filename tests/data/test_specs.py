"""The one registry class and the one parameter check (`xaidash.data.specs`): what every registry (data sets,
models, methods, prompt methods, attacks, influence methods, concept sources, projections) relies on."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from xaidash.data.errors import DatasetError, ExplainError, XaidashError
from xaidash.data.specs import LayerChoices, Param, Registry, Spec, resolve_params


@dataclass(frozen=True)
class Entry(Spec):
    id: str
    label: str = ""
    modalities: tuple[str, ...] = ("image",)
    params: tuple[Param, ...] = ()
    featured: int | None = None


def registry(*entries: Entry, **kw) -> Registry[Entry]:
    reg: Registry[Entry] = Registry("entry", **kw)
    for e in entries:
        reg.register(e)
    return reg


def test_register_get_find_and_keys() -> None:
    a, b = Entry("a"), Entry("b")
    reg = registry(a, b)
    assert reg.get("a") is a and reg.find("b") is b and reg.find("c") is None
    assert reg.keys() == ["a", "b"] and "a" in reg and "c" not in reg
    assert list(reg) == reg.all() == [a, b] and len(reg) == 2
    assert reg.all(lambda e: e.id == "b") == [b]
    reg.unregister(a)
    assert reg.keys() == ["b"]


def test_a_key_registered_twice_is_refused() -> None:
    reg = registry(Entry("a"))
    with pytest.raises(ValueError, match="entry 'a' registered twice"):
        reg.register(Entry("a", label="another"))
    assert reg.get("a").label == ""


def test_an_unknown_key_names_the_known_ones_in_the_registrys_error() -> None:
    reg = registry(Entry("b"), Entry("a"))
    with pytest.raises(XaidashError, match=r"^Unknown entry 'c'\. Known: a, b\.$"):
        reg.get("c")
    own = registry(Entry("b"), error=DatasetError, unknown=lambda key, known: f"No {key!r}; try {known}.")
    with pytest.raises(DatasetError, match=r"^No 'c'; try \['b'\]\.$"):
        own.get("c")


def test_composite_keys_list_each_entry_once() -> None:
    both = Entry("ig", modalities=("image", "text"))
    text = Entry("lime", modalities=("text",))
    reg = registry(both, text, keys=lambda e: ((e.id, m) for m in e.modalities))
    assert reg.get(("ig", "text")) is reg.get(("ig", "image")) is both
    assert reg.all() == [both, text]
    assert "Known: ig, lime." in reg.unknown_message(("x", "image"))
    reg.unregister(both)
    assert reg.keys() == [("lime", "text")]


def test_the_fact_check_runs_when_an_entry_registers() -> None:
    def check(e: Entry) -> None:
        if not e.label:
            raise ValueError(f"{e.id} has no label")

    reg = registry(Entry("a", label="A"), check=check)
    with pytest.raises(ValueError, match="b has no label"):
        reg.register(Entry("b"))
    assert reg.keys() == ["a"]


def test_featured_entries_by_rank_then_id() -> None:
    reg = registry(
        Entry("d", featured=2),
        Entry("c"),
        Entry("b", featured=1, modalities=("text",)),
        Entry("a", featured=2),
        Entry("e", featured=0),
    )
    assert [e.id for e in reg.featured()] == ["e", "b", "a", "d"]
    assert [e.id for e in reg.featured(lambda e: "image" in e.modalities)] == ["e", "a", "d"]
    assert [e.id for e in reg.featured(among=["d", "c", "a"])] == ["a", "d"]
    assert [e.id for e in reg.featured(limit=2)] == ["e", "b"]


# ---- parameters -----------------------------------------------------------------------------------------------


def test_coerce_converts_checks_ranges_and_matches_choices_given_as_text() -> None:
    assert Param("steps", "int", 8, min=1).coerce("16") == 16
    assert Param("eps", "float", 0.1).coerce("0.5") == 0.5
    flag = Param("flag", "bool", False)
    assert flag.coerce("yes") is True and flag.coerce("0") is False and flag.coerce(True) is True
    window = Param("window", "choice", 3, choices=(3, 5, 7))
    assert window.coerce("5") == 5 and window.coerce(7) == 7
    assert Param("fill", "choice", "mean", choices=("mean", "zero")).coerce("zero") == "zero"
    with pytest.raises(ExplainError, match=r"window='4': choose one of 3, 5, 7"):
        window.coerce("4")
    with pytest.raises(ExplainError, match="steps must be a int, got 'many'"):
        Param("steps", "int", 8).coerce("many")
    with pytest.raises(ExplainError, match=r"steps=0 is outside \[1, 100\]"):
        Param("steps", "int", 8, min=1, max=100).coerce(0)


def test_resolve_params_fills_defaults_and_refuses_unknown_names() -> None:
    params = (Param("steps", "int", 8, min=1), Param("baseline", "choice", "zero", choices=("zero", "mean")))
    assert resolve_params("ig", params, None) == {"steps": 8, "baseline": "zero"}
    assert resolve_params("ig", params, {"steps": "4", "baseline": "mean"}) == {"steps": 4, "baseline": "mean"}
    with pytest.raises(ExplainError, match=r"^ig has no parameter bogus, nope; it takes: steps, baseline\.$"):
        resolve_params("ig", params, {"nope": 1, "bogus": 2})
    with pytest.raises(ExplainError, match=r"^occlusion has no parameter x; it takes: none\.$"):
        resolve_params("occlusion", (), {"x": 1})


def test_a_layer_takes_its_default_and_its_choices_from_the_model() -> None:
    params = (Param("layer", "layer", None),)
    layers = LayerChoices(("block1", "block2"), default="block2", owner="resnet_small")
    assert resolve_params("gradcam", params, {}, layers) == {"layer": "block2"}
    assert resolve_params("gradcam", params, {"layer": "block1"}, layers) == {"layer": "block1"}
    with pytest.raises(
        ExplainError, match=r"Layer 'fc' is not a conv layer of resnet_small; pick one of block1, block2"
    ):
        resolve_params("gradcam", params, {"layer": "fc"}, layers)
    with pytest.raises(ExplainError, match="is not a conv layer of the model"):
        resolve_params("gradcam", params, {})


def test_a_spec_resolves_its_own_parameters_named_by_its_id() -> None:
    spec = Entry("smoothgrad", params=(Param("samples", "int", 20, min=1),))
    assert spec.resolve_params() == {"samples": 20}
    assert spec.resolve_params({"samples": "5"}) == {"samples": 5}
    with pytest.raises(ExplainError, match=r"^smoothgrad has no parameter noise"):
        spec.resolve_params({"noise": 1})
