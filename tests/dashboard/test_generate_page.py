"""The Generate page and the pages around it on a tiny random language model (AppTest): generate, the answer's
chips and alternatives, the methods' maps, the matrix, deletion / insertion and the logit lens; what if; the
Attention page for a decoder; Home's "Get SmolLM2" button; and the run picker keeping language models and
classifiers apart."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from app_pages import assert_ok, make_app, texts
from inspect_runs import make_run
from tiny_lm import save_tiny_folder

from xaidash.dashboard import services
from xaidash.dashboard.components import generate_compute, quickstart
from xaidash.explainers.language import query as query_module
from xaidash.explainers.language.api import planned_rows
from xaidash.explainers.language.figures import quoted
from xaidash.explainers.language.query import make_query
from xaidash.explainers.language.registry import featured_prompt_methods, get_prompt_method
from xaidash.explainers.language.targets import default_target
from xaidash.models.language.convert import convert_time_text, import_language_model
from xaidash.models.language.generate import generate
from xaidash.models.language.loading import MARK, load_language_model
from xaidash.models.language.prompt import build_prompt
from xaidash.models.registry import ModelError
from xaidash.models.runs.store import Run, load_bundle

PICKER = "xai_run_picker"
PICK = "gen_target_pick"
SPAN = "gen_target_span"
PROMPT = "what is the capital of france ?"
TIMEOUT = 180


@pytest.fixture(scope="module")
def lm_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """A runs root with a tiny Llama imported as a language model and a text classifier."""
    tmp = tmp_path_factory.mktemp("generate_page")
    root = tmp / "runs"
    lm = import_language_model("hf:" + str(save_tiny_folder(tmp / "tiny")), root=root)
    classifier = make_run(root, "cues", "text_cnn", epochs=1)
    return {"lm": lm, "classifier": classifier, "folder": tmp / "tiny"}  # type: ignore[dict-item]


@pytest.fixture
def root(lm_runs: dict[str, Run], monkeypatch: pytest.MonkeyPatch) -> Path:
    path = lm_runs["lm"].path.parent
    monkeypatch.setenv("XAIDASH_RUNS", str(path))
    return path


def generate_page(prompt: str = PROMPT):
    at = make_app(timeout=TIMEOUT)
    at.run()
    at.switch_page("views/generate.py").run()
    assert_ok(at)
    at.text_area(key="gen_prompt").set_value(prompt)
    at.button(key="gen_go").click().run()
    assert_ok(at)
    return at


def chips(at) -> list[str]:
    """The answer chips' texts (the first chip block on the page)."""
    block = next(m.value for m in at.markdown if "line-height:2.1" in m.value)
    return re.findall(r'font-family:monospace">([^<]*)</span>', block)


def test_generate_explain_matrix_faithfulness_and_logit_lens(
    root: Path, lm_runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real = generate_compute.run_method

    def counted(lm, query, method, params):
        calls.append(method)
        return real(lm, query, method, params)

    monkeypatch.setattr(generate_compute, "run_method", counted)
    at = generate_page()
    assert not at.error, texts(at.error)
    # The answer is the model's greedy answer: compare with a direct call.
    lm = load_language_model(lm_runs["lm"], device="cpu")
    prompt = build_prompt(lm, PROMPT)
    answer = generate(lm, prompt, max_new_tokens=32)
    assert len(chips(at)) == len(answer.steps)
    table = at.dataframe[0].value
    assert len(table) == len(answer.steps) and list(table["token"]) == [repr(s.token) for s in answer.steps]
    # Before running: the rows every default method will run, as the registry counts them.
    methods = featured_prompt_methods(limit=3)
    assert at.multiselect(key="gen_methods").value == methods
    span = at.select_slider(key="gen_target_span").value
    task = make_query(lm, prompt, answer.ids, span=(span[0], span[1] + 1))
    rows = planned_rows(task, {m: {} for m in methods})
    planned = next(c for c in texts(at.caption) if c.startswith("This will run"))
    assert f"This will run {sum(rows.values()):,} model rows over {task.n_features} features" in planned

    at.button(key="gen_run").click().run()
    assert_ok(at)
    assert not at.error, texts(at.error)
    titles = texts(at.caption)
    for m in methods:
        assert f"**{get_prompt_method(m).label}**" in titles, titles
    assert any(t.startswith("strongest:") for t in titles)
    charts = [json.dumps(json.loads(c.proto.spec)) for c in at.main.get("vega_lite_chart")]
    assert any("prompt \\u00d7 generated tokens" in c or "prompt × generated tokens" in c for c in charts), charts
    faith = next(d.value for d in at.dataframe if "deletion AUC" in d.value.columns)
    assert list(faith["method"]) == [get_prompt_method(m).label for m in methods] + ["random order (baseline)"]
    assert faith["deletion AUC"].notna().all()
    lens = next(c for c in charts if "probability of" in c and "after layer" in c)
    for layer in ("embeddings", "layer 1", f"layer {lm.num_layers}"):
        assert f'"{layer}"' in lens
    assert calls == methods
    # A rerun draws everything again from the cache, with nothing to compute.
    at.run()
    assert_ok(at)
    assert calls == methods and len([c for c in texts(at.caption) if c.startswith("strongest:")]) == len(methods)


def test_a_click_builds_the_query_once(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model-free query is built once for an answer and target (the rows sentence, the Run click's maps and the
    faithfulness curves, then every rerun, all read it from the cache), never once per use."""
    built: list[tuple[int, int]] = []
    real = query_module.PromptQuery.__init__

    def counted(self, *args, **kwargs) -> None:
        real(self, *args, **kwargs)
        built.append(self.span)

    monkeypatch.setattr(query_module.PromptQuery, "__init__", counted)
    at = generate_page("which city is the capital of spain ?")  # a prompt of its own: nothing cached before
    assert len(built) == 1  # the rows sentence under the methods asked for it
    at.button(key="gen_run").click().run()
    assert_ok(at)
    assert not at.error, texts(at.error)
    assert any(c.startswith("strongest:") for c in texts(at.caption))
    at.run()
    assert_ok(at)
    assert len(built) == 1


def test_an_empty_prompt_is_one_clear_line(root: Path) -> None:
    at = generate_page(prompt="   ")
    assert texts(at.error) == ["Generate: The prompt is empty: type a question or an instruction."]
    assert "Answer" not in texts(at.subheader)


def test_a_long_prompt_is_cut_with_a_notice(root: Path) -> None:
    at = generate_page(prompt="what is the capital of france ? " * 200)  # 1,400 tokens: over MAX_PROMPT_TOKENS
    assert_ok(at)
    notices = [w for w in texts(at.warning) if "The prompt was cut" in w]
    assert notices and "of 1400 tokens" in notices[0], texts(at.warning)


def test_sampling_follows_the_seed_and_temperature(root: Path, lm_runs) -> None:
    at = make_app(timeout=TIMEOUT)
    at.run()
    at.switch_page("views/generate.py").run()
    at.text_area(key="gen_prompt").set_value(PROMPT)
    at.radio(key="gen_decoding").set_value("sampling").run()  # the seed and temperature open for sampling
    at.number_input(key="gen_seed").set_value(7)
    at.number_input(key="gen_max_new").set_value(12).run()
    at.button(key="gen_go").click().run()
    assert_ok(at)
    lm = load_language_model(lm_runs["lm"], device="cpu")
    sampled = generate(lm, build_prompt(lm, PROMPT), max_new_tokens=12, sample=True, temperature=0.7, seed=7)
    assert list(at.dataframe[0].value["token"]) == [repr(s.token) for s in sampled.steps]
    assert any("sampled at temperature 0.7, seed 7" in c for c in texts(at.caption))


def test_a_span_and_a_contrast(root: Path) -> None:
    at = generate_page()
    slider = at.select_slider(key="gen_target_span")
    n = len(chips(at))
    slider.set_value((0, 1)).run()
    assert any("pick a single token" in c for c in texts(at.caption))
    at.select_slider(key="gen_target_span").set_value((n - 1, n - 1)).run()
    box = next(s for s in at.selectbox if s.key and s.key.startswith("gen_target_contrast"))
    assert box.options[0].startswith("none") and box.options[-1].startswith("another token")
    box.select_index(1).run()  # the step's most probable alternative
    at.multiselect(key="gen_methods").set_value(featured_prompt_methods(limit=1)).run()
    at.button(key="gen_run").click().run()
    assert_ok(at)
    assert not at.error, texts(at.error)
    heading = next(m for m in texts(at.markdown) if m.startswith("**Which prompt tokens produced"))
    assert " − log p(" in heading  # log p(generated) - log p(contrast)


def test_the_default_target_and_a_click_on_a_token_of_the_answer(root: Path, lm_runs) -> None:
    """The answer starts at its default target (the rule of explainers/language/targets.py); clicking a token pill
    explains that token: the slider follows, Run explains it; a span on the slider leaves no pill picked."""
    at = generate_page()
    lm = load_language_model(lm_runs["lm"], device="cpu")
    answer = generate(lm, build_prompt(lm, PROMPT), max_new_tokens=32)
    default = default_target(answer, lm.special_ids())
    pills = at.button_group(key=PICK)
    assert pills.value == default.step and len(pills.options) == len(answer.steps)
    assert at.select_slider(key=SPAN).value == (default.step, default.step)
    assert any(c.startswith("Picked first:") and default.why in c for c in texts(at.caption))
    other = len(answer.steps) - 1 if default.step != len(answer.steps) - 1 else 0  # the tiny model repeats a token:
    at.button_group(key=PICK).set_value(other).run()  # its pills differ only by position, and still pick their own
    assert_ok(at)
    assert at.select_slider(key=SPAN).value == (other, other)
    chip_borders = re.findall(r"border:([^;]*);", next(m.value for m in at.markdown if "line-height:2.1" in m.value))
    assert [k for k, b in enumerate(chip_borders) if "#f0a000" in b] == [other]  # the answer outlines it alone
    at.multiselect(key="gen_methods").set_value(featured_prompt_methods(limit=1)).run()
    at.button(key="gen_run").click().run()
    assert_ok(at)
    assert not at.error, texts(at.error)
    assert at.session_state["gen_request"].target.span == (other, other + 1)
    heading = next(m for m in texts(at.markdown) if m.startswith("**Which prompt tokens produced"))
    assert f"log p({quoted(answer.steps[other].token)})" in heading, heading
    at.select_slider(key=SPAN).set_value((0, 1)).run()
    assert at.button_group(key=PICK).value is None
    at.button_group(key=PICK).set_value(0).run()
    assert at.select_slider(key=SPAN).value == (0, 0)


def test_maps_no_better_than_chance_are_said_beside_the_table(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When no method's order beats the random orders beyond their spread, one sentence beside the table says the
    maps are not more faithful than chance for this target (the curves here: a method level with chance)."""
    import numpy as np

    from xaidash.dashboard.components import generate_maps
    from xaidash.explainers.language.faithfulness import RANDOM, FaithfulnessScore, chance_verdict

    def level(name: str) -> FaithfulnessScore:
        f = np.array([0.0, 1.0])
        return FaithfulnessScore(name, f, np.array([0, 1]), f, f, -1.6, -1.56, [0], 5, 0.1, 0.1)

    def scored(ctx, query, explanations):
        return {**{m: level(m) for m in explanations}, RANDOM: level(RANDOM)}

    monkeypatch.setattr(generate_maps, "faithfulness_of", scored)
    at = generate_page()
    at.multiselect(key="gen_methods").set_value(featured_prompt_methods(limit=1)).run()
    at.button(key="gen_run").click().run()
    assert_ok(at)
    said = chance_verdict(scored(None, None, {featured_prompt_methods(limit=1)[0]: None}))
    assert said and said in texts(at.warning), texts(at.warning)


def test_what_if_shows_both_answers_and_maps(root: Path) -> None:
    at = generate_page()
    at.text_area(key="gen_whatif_text").set_value("what is the capital of italy ?").run()
    at.button(key="gen_whatif_run").click().run()
    assert_ok(at)
    assert not at.error, texts(at.error)
    shown = texts(at.markdown)
    assert "**Original**" in shown and "**Edited**" in shown
    prompts = [c for c in texts(at.caption) if c.startswith("Prompt: ")]
    assert prompts == [f"Prompt: {PROMPT}", "Prompt: what is the capital of italy ?"]
    assert sum('class="xai-cbar"' in m for m in shown) >= 2  # each side's map has its colour bar


def test_the_attention_page_reads_the_decoder(root: Path, lm_runs) -> None:
    at = generate_page()
    at.switch_page("views/attention.py").run()
    assert_ok(at)
    assert not at.error, texts(at.error)
    line = next(m for m in texts(at.markdown) if "layers x" in m)
    lm = load_language_model(lm_runs["lm"], device="cpu")
    assert f"{lm.num_layers} layers x {lm.num_heads} heads" in line
    assert at.radio(key="attention_lm_source").value == "generate"
    assert {"Every layer and head", "One head", "Attention rollout", "Head view"} <= set(texts(at.subheader))
    assert any("Causal mask" in c for c in texts(at.caption))


def test_the_picker_keeps_language_models_and_classifiers_apart(root: Path, lm_runs) -> None:
    lm, classifier = lm_runs["lm"].id, lm_runs["classifier"].id
    at = make_app(timeout=TIMEOUT)
    at.run()
    at.switch_page("views/explain.py").run()
    assert_ok(at)
    assert at.sidebar.selectbox(key=PICKER).options and lm not in str(at.sidebar.selectbox(key=PICKER).options)
    assert at.session_state["xai_selected_run"] == classifier
    at.switch_page("views/generate.py").run()
    picker = at.sidebar.selectbox(key=PICKER)
    assert picker.value == lm and len(picker.options) == 1
    at.switch_page("views/attention.py").run()
    assert len(at.sidebar.selectbox(key=PICKER).options) == 2
    with pytest.raises(ModelError, match="Generate page"):
        load_bundle(lm_runs["lm"])


def test_get_smollm2_imports_in_the_background_and_links_to_generate(
    tmp_path: Path, lm_runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The button runs `import_language_model("smollm2")` in a thread (here swapped for the tiny folder's import,
    marked as the built-in one), shows its progress, then the run and a link to Generate."""
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path))
    folder = lm_runs["folder"]

    def fake_import(source: str) -> Run:
        run = import_language_model("hf:" + str(folder), root=tmp_path)
        config = run.config()
        config[MARK]["given"] = source
        run.write_config(config)
        return run

    monkeypatch.setattr(services, "import_language_model", fake_import)
    monkeypatch.setattr(quickstart, "builtin_gguf", lambda: tmp_path / "SmolLM2.gguf")
    at = make_app(timeout=TIMEOUT)
    at.run()
    assert_ok(at)
    assert any(f"converted once into a run ({convert_time_text()})" in m for m in texts(at.markdown))
    at.button(key="smollm2_get").click().run()
    snap = services.language_import().wait(120)
    assert snap.state == "completed", snap.error
    at.run()
    assert_ok(at)
    assert any("is ready" in m and snap.run_id in m for m in texts(at.markdown))
    assert at.session_state["xai_selected_lm"] == snap.run_id
    assert "smollm2_get" not in [b.key for b in at.button]


def test_the_replica_pool_counts_a_language_model_and_lends_two_sessions_a_copy_each(root: Path, lm_runs) -> None:
    import torch

    class Sized:  # SmolLM2's 134,515,008 float32 parameters (538 MB), on the meta device: nothing allocated
        model = torch.nn.Embedding(134_515_008 // 576, 576, device="meta")

    assert 2 <= services.replica_count(Sized()) < services.MAX_REPLICAS + 1  # type: ignore[arg-type]
    run = lm_runs["lm"]
    lm = services.language_model_for(run)
    assert services.language_model_for(run) is lm  # loaded once per weights version
    with services.lease_lm(run, lm) as first, services.lease_lm(run, lm) as second:
        assert first is lm and second is not lm  # the second session gets a copy loaded from the run folder
        assert second.name == lm.name and second.num_layers == lm.num_layers


def test_without_a_language_model_the_page_says_how_to_get_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_run(tmp_path, "cues", "text_cnn", epochs=1)  # a classifier only: never offered here
    monkeypatch.setenv("XAIDASH_RUNS", str(tmp_path))
    at = make_app(timeout=TIMEOUT)
    at.run()
    at.switch_page("views/generate.py").run()
    assert_ok(at)
    assert any("Get SmolLM2" in i and convert_time_text() in i for i in texts(at.info)), texts(at.info)
    assert not at.sidebar.selectbox and "No language model yet" in " ".join(texts(at.sidebar.caption))
