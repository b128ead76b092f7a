"""Training recipes: what every zoo model declares, how a config is resolved from them, what a run records,
the accuracy warnings that read them, and (slow) the accuracy each built-in recipe promises."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest

import xaidash.models  # noqa: F401  (registers the zoo)
from xaidash.dashboard.cli import main
from xaidash.data.modalities import MODALITIES
from xaidash.data.registry import DatasetInfo, get_info, list_datasets, list_factories, load_split
from xaidash.models import registry
from xaidash.models.registry import ModelError, get_spec, list_models, models_for, recommended_model
from xaidash.models.runs.quality import accuracy_warning
from xaidash.models.runs.store import list_runs
from xaidash.models.training.config import TrainConfig
from xaidash.models.training.data import split_indices
from xaidash.models.training.engine import train
from xaidash.models.training.recipes import SETTINGS, Recipe, generic_recipe, recipe_for
from xaidash.models.training.session import setup_run

BUILT_IN = ("shapes", "cues", "digits")
OFFLINE_FILES = ("mnist", "fashion_mnist", "sst2", "sms_spam")  # under ../shared/data


# ---- what the zoo declares ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", list_models(), ids=lambda s: s.name)
def test_every_model_declares_recipes_for_data_it_fits(spec) -> None:
    names = {i.name: i for i in list_datasets()}
    assert spec.modality in spec.recipes, f"{spec.name} has no fallback recipe for {spec.modality} data"
    for key, recipe in spec.recipes.items():
        assert key in names or key in list_factories() or key in MODALITIES, key
        if key in names:
            assert spec.fits(names[key]) is None and names[key].modality == spec.modality, (spec.name, key)
        assert recipe.epochs >= 1 and recipe.batch_size >= 1 and 0 < recipe.lr < 1 and recipe.max_train_samples >= 0
        if recipe.expected_acc is not None:  # measured: only on a named data set
            assert key in names and 0 < recipe.expected_acc <= 1, (spec.name, key)
        if key not in names:
            assert not recipe.recommended and recipe.expected_acc is None, (spec.name, key)


@pytest.mark.parametrize("name", [*BUILT_IN, *OFFLINE_FILES, "cifar10"])
def test_each_data_set_has_one_recommended_model(name: str) -> None:
    info = get_info(name)
    recommended = [s.name for s in models_for(info) if s.recipes.get(name, generic_recipe(info)).recommended]
    assert len(recommended) == 1, (name, recommended)
    assert recommended_model(info).name == recommended[0]


def test_the_recommended_models_are_the_ones_the_pages_need() -> None:
    picks = {name: recommended_model(get_info(name)).name for name in (*BUILT_IN, *OFFLINE_FILES)}
    assert picks["shapes"] == "resnet_small"  # global average pooling + linear: CAM and Grad-CAM apply
    assert get_spec("resnet_small").gap_classifier is not None
    assert picks["mnist"] == picks["fashion_mnist"] == "simple_cnn"
    assert picks["sst2"] == "minilm"
    assert picks["cues"] in ("text_cnn", "text_transformer")


def test_cifar10_recipes_are_reasoned_not_measured() -> None:
    # cifar10 cannot be had offline here: its recipes carry no accuracy they were never seen to reach
    for spec in models_for(get_info("cifar10")):
        if "cifar10" in spec.recipes:
            assert spec.recipes["cifar10"].expected_acc is None


def test_default_lr_is_gone_from_the_model_spec() -> None:
    assert not hasattr(get_spec("resnet_small"), "default_lr")


# ---- lookup and resolution ---------------------------------------------------------------------------------------


def test_recipe_lookup_takes_the_most_specific_key() -> None:
    a, b, c = Recipe(1, 8, 1e-3), Recipe(2, 8, 1e-3), Recipe(3, 8, 1e-3)
    recipes = {"shapes": a, "imagefolder": b, "image": c}
    assert recipe_for(recipes, get_info("shapes")) == ("shapes", a)
    folder = DatasetInfo("imagefolder:/tmp/pets?size=64", "image", ("cat", "dog"), (3, 64, 64))
    assert recipe_for(recipes, folder) == ("imagefolder", b)
    assert recipe_for(recipes, get_info("digits")) == ("image", c)
    assert recipe_for({}, get_info("cues")) == ("generic", Recipe(5, 64, 2e-3, weight_decay=0.01))
    assert recipe_for({}, get_info("digits")) == ("generic", Recipe(5, 128, 2e-3, augment="shift", weight_decay=0.01))


def test_with_recipe_fills_only_the_settings_left_open() -> None:
    cfg = TrainConfig(dataset="shapes", model="resnet_small", lr=0.05, augment="flip")
    key, recipe = cfg.recipe()
    resolved = cfg.with_recipe()
    assert key == "shapes"
    assert resolved.lr == 0.05 and resolved.augment == "flip"  # given: kept
    assert resolved.epochs == recipe.epochs and resolved.batch_size == recipe.batch_size
    assert resolved.optimizer == recipe.optimizer and resolved.schedule == recipe.schedule
    assert all(getattr(resolved, k) is not None for k in SETTINGS)
    assert resolved.with_recipe() == resolved  # resolving twice changes nothing
    assert cfg.epochs is None  # the original is left as it was


def test_a_batch_given_without_a_learning_rate_scales_the_recipes_learning_rate() -> None:
    from xaidash.models.training.recipes import lr_note, scale_lr

    key, recipe = TrainConfig(dataset="mnist", model="simple_cnn").recipe()
    assert (key, recipe.batch_size, recipe.lr, recipe.optimizer) == ("mnist", 64, 1e-2, "adam")
    bigger = TrainConfig(dataset="mnist", model="simple_cnn", batch_size=256).with_recipe()
    assert bigger.lr == 0.02  # 4x the batch: 2x the learning rate for Adam (square root)
    assert TrainConfig(dataset="mnist", model="simple_cnn", batch_size=256, optimizer="sgd").with_recipe().lr == 0.04
    assert TrainConfig(dataset="mnist", model="simple_cnn", batch_size=16).with_recipe().lr == 1e-2  # smaller: kept
    assert TrainConfig(dataset="mnist", model="simple_cnn", batch_size=256, lr=0.001).with_recipe().lr == 0.001
    assert TrainConfig(dataset="mnist", model="simple_cnn", batch_size=64).with_recipe().lr == 1e-2
    assert bigger.with_recipe() == bigger  # resolved once: stays
    assert scale_lr(3e-3, 128, 512, "adamw") == 0.006 and scale_lr(0.1, 256, 1024, "sgd") == 0.4
    assert lr_note(recipe, 256, "adam") == (
        "learning rate 0.02: the recipe's 0.01 at batch 64, scaled to batch 256 (by the square root, for adam)"
    )


def test_unresolved_settings_are_refused_by_name() -> None:
    with pytest.raises(ModelError, match="not resolved: epochs, batch_size"):
        TrainConfig(lr=1e-3).settings()


def test_bad_explicit_settings_are_refused_before_the_recipe_is_looked_up() -> None:
    with pytest.raises(ModelError, match="label smoothing"):
        TrainConfig(model="no-such-model", label_smoothing=1.5).validate()


def test_a_run_records_its_resolved_settings_and_its_recipe() -> None:
    session = setup_run(TrainConfig(dataset="digits", model="mlp", epochs=1, device="cpu"))
    config = json.loads(session.run.file("config.json").read_text())
    key, recipe = session.recipe
    assert key == "digits"
    assert config["recipe"] == {"key": key, **recipe.settings(), "expected_acc": recipe.expected_acc}
    assert config["recipe"]["expected_acc"] is not None  # digits is measured for mlp
    train_section = config["train"]
    assert train_section["epochs"] == 1  # given
    assert {k: train_section[k] for k in SETTINGS if k != "epochs"} == {
        k: v for k, v in recipe.settings().items() if k != "epochs"
    }
    assert config["lr"] == recipe.lr


def test_resume_keeps_the_runs_own_settings_when_the_recipe_changes(monkeypatch) -> None:
    first = train(TrainConfig(dataset="digits", model="mlp", epochs=1, max_train_samples=300, device="cpu"))
    before = first.run.config()["train"]
    spec = get_spec("mlp")
    changed = {**spec.recipes, "digits": replace(spec.recipes["digits"], lr=0.5, batch_size=7, augment="flip")}
    monkeypatch.setitem(registry.MODELS._entries, "mlp", replace(spec, recipes=changed))
    resumed = train(TrainConfig(epochs=2, device="cpu"), resume=first.run.id)
    assert resumed.state == "completed" and resumed.epochs_done == 2
    after = resumed.run.config()["train"]
    assert after["epochs"] == 2
    assert {k: after[k] for k in SETTINGS if k != "epochs"} == {k: before[k] for k in SETTINGS if k != "epochs"}


def test_resume_without_epochs_finishes_the_planned_run() -> None:
    import threading

    stop = threading.Event()
    first = train(
        TrainConfig(dataset="digits", model="mlp", epochs=2, max_train_samples=300, device="cpu"),
        callbacks=[lambda e: stop.set() if e.kind == "epoch" else None],
        stop=stop,
    )
    assert first.state == "stopped" and first.epochs_done == 1
    resumed = train(TrainConfig(device="cpu"), resume=first.run.id)
    assert resumed.state == "completed" and resumed.epochs_done == 2


# ---- the command line --------------------------------------------------------------------------------------------


def test_train_help_says_the_defaults_come_from_the_recipe(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for option in ("--epochs", "--batch-size", "--lr", "--optimizer", "--schedule", "--augment", "--weight-decay"):
        assert option in out
    assert out.count("from the model's recipe for this data") >= 9
    assert "default: None" not in out


def test_models_lists_each_models_recipes(capsys) -> None:
    assert main(["models", "--recipes"]) == 0
    out = capsys.readouterr().out
    block = out[out.index("resnet_small") : out.index("\n", out.index("shapes ", out.index("resnet_small")))]
    recipe = get_spec("resnet_small").recipes["shapes"]
    assert f"lr {recipe.lr:g}" in block and "(recommended)" in block
    assert f"test acc {100 * recipe.expected_acc:.1f}%" in block


# ---- accuracy warnings -------------------------------------------------------------------------------------------


def config_with(expected: float | None, classes: int = 4) -> dict:
    return {"classes": [str(i) for i in range(classes)], "recipe": {"key": "shapes", "expected_acc": expected}}


def test_a_run_near_chance_is_flagged() -> None:
    warning = accuracy_warning(config_with(0.99), {"test_acc": 0.27})
    assert warning and "near chance (25.0%)" in warning and "27.0%" in warning


def test_a_run_far_below_its_recipe_is_flagged() -> None:
    warning = accuracy_warning(config_with(0.99), {"test_acc": 0.46})
    assert warning and "far below" in warning and "99.0%" in warning


def test_a_good_run_and_one_without_a_measured_recipe_are_not_flagged() -> None:
    assert accuracy_warning(config_with(0.99), {"test_acc": 0.97}) is None
    assert accuracy_warning(config_with(None), {"test_acc": 0.70}) is None
    assert accuracy_warning(config_with(0.99), {"state": "running"}) is None  # nothing to judge yet


def test_chance_is_the_majority_class_when_the_labels_are_imbalanced() -> None:
    # sms_spam's test split: 87% ham. Always saying 'ham' scores 87%, which is no model at all.
    confusion = [[870, 0], [130, 0]]
    config = config_with(None, classes=2)
    warning = accuracy_warning(config, {"test_acc": 0.87, "confusion": confusion})
    assert warning and "near chance (87.0%)" in warning
    assert accuracy_warning(config, {"test_acc": 0.98, "confusion": [[865, 5], [15, 115]]}) is None


def test_the_cli_warns_about_a_poor_run(capsys) -> None:
    # one step of plain SGD at a tiny learning rate: an untrained model, which the CLI says is near chance
    args = ["--epochs", "1", "--max-train-samples", "64", "--batch-size", "64", "--lr", "1e-6", "--optimizer", "sgd"]
    assert main(["train", "--dataset", "digits", "--model", "mlp", *args, "--quiet", "--device", "cpu"]) == 0
    assert "near chance" in capsys.readouterr().err
    assert main(["runs"]) == 0
    assert "near chance" in capsys.readouterr().out


# ---- the recipes' promises (slow: each trains with nothing but --dataset and --model) -----------------------------


def train_with_defaults(dataset: str, model: str, *extra: str) -> tuple[float, float]:
    """(test accuracy, seconds) of `xaidash train --dataset D --model M` and nothing else but `extra`."""
    start = time.perf_counter()
    assert main(["train", "--dataset", dataset, "--model", model, *extra, "--quiet"]) == 0
    seconds = time.perf_counter() - start
    run = list_runs()[0]
    assert run.config()["model"] == model and run.summary()["state"] == "completed"
    return run.summary()["test_acc"], seconds


@pytest.mark.slow  # about 15 s
def test_text_cnn_on_cues_reaches_97_percent() -> None:
    acc, _ = train_with_defaults("cues", "text_cnn")
    assert acc >= 0.97, acc


@pytest.mark.slow  # about 20 s: one epoch over 54,000 MNIST images
def test_simple_cnn_on_mnist_reaches_97_percent_after_one_epoch(offline_data) -> None:
    acc, _ = train_with_defaults("mnist", "simple_cnn", "--epochs", "1")
    assert acc >= 0.97, acc


def bag_of_words_accuracy(dataset: str, max_train_samples: int) -> float:
    """TF-IDF + logistic regression on the training texts a capped run trains on (the same seeded subset),
    scored on the same test split."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    train_split, test_split = load_split(dataset, "train"), load_split(dataset, "test")
    texts, labels = bag_of_words_training_data(train_split, max_train_samples)
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=1, sublinear_tf=True)
    classifier = LogisticRegression(max_iter=2000, C=4.0).fit(vectorizer.fit_transform(texts), labels)
    return float((classifier.predict(vectorizer.transform(test_split.texts)) == test_split.labels.numpy()).mean())


def bag_of_words_training_data(split, max_train_samples: int) -> tuple[list[str], list[int]]:
    """The texts and labels a run with this cap trains on (the engine's own seeded subset, validation held out)."""
    cfg = TrainConfig()
    train_idx, _ = split_indices(len(split), cfg.seed, max_train_samples, cfg.val_fraction)
    return [split.texts[i] for i in train_idx.tolist()], [int(split.labels[i]) for i in train_idx.tolist()]


@pytest.mark.long(seconds=95)
@pytest.mark.slow  # about 80 s on a quiet 2-core CPU: MiniLM's encoder is fine-tuned on 5,000 phrases
def test_minilm_on_sst2_beats_a_bag_of_words_baseline(offline_data) -> None:
    acc, _ = train_with_defaults("sst2", "minilm")
    cap = get_spec("minilm").recipes["sst2"].max_train_samples
    baseline = bag_of_words_accuracy("sst2", cap)  # TF-IDF + logistic regression on the same phrases
    assert acc >= baseline + 0.04, (acc, baseline)
    assert acc >= bag_of_words_accuracy("sst2", 0), acc  # and on all 67,349 phrases


def test_minilm_on_sst2_fine_tunes_its_encoder() -> None:
    cfg = TrainConfig(dataset="sst2", model="minilm").with_recipe()
    assert cfg.model_options == {"freeze_encoder": False} and cfg.lr is not None and cfg.lr < 1e-3
    given = TrainConfig(dataset="sst2", model="minilm", model_options={"freeze_encoder": True}).with_recipe()
    assert given.model_options == {"freeze_encoder": True}  # the user's options win


# ---- xaidash demo ------------------------------------------------------------------------------------------------


def test_ctrl_c_asks_for_a_stop_and_a_second_one_aborts() -> None:
    import os
    import signal
    import threading

    from xaidash.models.cli import ctrl_c_stops

    stop, before = threading.Event(), signal.getsignal(signal.SIGINT)
    with ctrl_c_stops(stop):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs between bytecodes of the main thread
        assert stop.is_set()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
    assert signal.getsignal(signal.SIGINT) is before  # the handler before is back


def test_demo_stops_cleanly_on_ctrl_c_and_skips_the_rest(monkeypatch, capsys) -> None:
    import os
    import signal

    from xaidash.models import cli
    from xaidash.models.training import demo

    monkeypatch.setattr(demo, "DEMO_RUNS", (("digits", "mlp"), ("cues", "text_cnn")))
    real_train = cli.train

    def train_then_ctrl_c(cfg, callbacks, stop):
        def press(event) -> None:
            if event.kind == "step" and not stop.is_set():
                os.kill(os.getpid(), signal.SIGINT)

        return real_train(cfg, callbacks=[*callbacks, press], stop=stop)

    monkeypatch.setattr(cli, "train", train_then_ctrl_c)
    assert main(["demo", "--quiet", "--device", "cpu"]) == 1
    out = capsys.readouterr().out
    (run,) = list_runs()  # the second run never started
    summary = run.summary()
    assert summary["state"] == "stopped" and summary["kept"].startswith("weights after")
    assert f"run {run.id}" in out and "stopped" in out and "demo: 1 of 2 runs in" in out


# The demo's accuracy targets are checked where a new user meets them: the quick-start button in
# tests/dashboard/test_train_browser.py trains the real demo runs and checks each against the figures.
