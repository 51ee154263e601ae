"""The real Streamlit page, run by streamlit.testing's AppTest: model card, predictions, bad input, LATEST."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import uuid
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from streamlit.testing.v1 import AppTest

from steps.lib.model_file import read_weights
from steps.lib.registry import LATEST_KEY, run_prefix
from tests.conftest import new_bucket
from tests.support.gcs_emulator import own_emulator
from tests.support.page import (
    BATCH,
    EPOCHS,
    FIRST_RUN,
    SAMPLES,
    TRAINING_HISTORY,
    encode,
    publish_run,
)
from tests.support.project import ROOT
from tests.support.steps import write_model_weights
from ui import model_source, training
from ui.images.decode import MAX_FILE_MB, MAX_PIXELS, MB
from ui.pictures import CAPTION as PAIR_CAPTION
from ui.verbatim import verbatim
from ui.widget_states import MAX_DRAWING_BYTES, MAX_MESSAGE_MB

APP = ROOT / "ui" / "app.py"
TIMEOUT = 120  # the first run imports TensorFlow and loads the model


def open_page(monkeypatch: pytest.MonkeyPatch, model_uri: str) -> AppTest:
    monkeypatch.setenv("MODEL_URI", model_uri)
    monkeypatch.chdir(ROOT)  # where `streamlit run` reads .streamlit/config.toml
    page = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    page.run()
    assert not page.exception, page.exception
    return page


def metric(page: AppTest, label: str) -> str:
    values = [item.value for item in page.metric if item.label == label]
    assert values, f"no {label!r} on the page: {[item.label for item in page.metric]}"
    return values[0]


def image_captions(page: AppTest) -> list[str]:
    return [caption for image in page.get("image") for caption in image.captions]


def upload(page: AppTest, name: str, data: bytes, mime: str = "image/png") -> AppTest:
    page.file_uploader[0].set_value((name, data, mime))
    page.run()
    assert not page.exception, page.exception
    return page


def latest_uri(store: Path) -> str:
    return str(store / LATEST_KEY)


@pytest.fixture(autouse=True)
def look_at_every_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each run starts a look for a new model in the background, none skipped for being recent."""
    monkeypatch.setattr(model_source, "CHECK_SECONDS", 0)


def look_again(page: AppTest) -> None:
    """Run the page once a look for a new model, started after the store changed, has ended."""
    for keeper in list(model_source.KEEPERS.values()):
        keeper.wait()
    page.run()  # starts the look
    for keeper in list(model_source.KEEPERS.values()):
        keeper.wait()
    page.run()
    assert not page.exception, page.exception


@pytest.fixture
def own_store(published_store: Path, tmp_path: Path) -> Path:
    """A copy of the published store that a test may change."""
    return Path(shutil.copytree(published_store, tmp_path / "store"))


def chart_specs(block) -> list[dict]:
    """The Vega-Lite specs of `block`'s charts; none binds its scales to the mouse wheel."""
    specs = [json.loads(chart.proto.spec) for chart in block.get("vega_lite_chart")]
    for spec in specs:
        assert not [p for p in spec.get("params", []) if p.get("bind") == "scales"], spec["params"]
    return specs


def encoded_fields(spec: dict) -> set[str]:
    """Every field a chart's layers encode."""
    layers = spec.get("layer", [spec])
    return {
        channel["field"]
        for layer in layers
        for channel in layer.get("encoding", {}).values()
        if isinstance(channel, dict) and "field" in channel
    }


def test_the_page_shows_the_card_with_its_curves_the_report_and_the_three_inputs(
    monkeypatch: pytest.MonkeyPatch, published_store: Path
) -> None:
    page = open_page(monkeypatch, latest_uri(published_store))
    card = page.sidebar
    assert [item.value for item in card.metric if item.label == "Run"] == [verbatim(FIRST_RUN)]
    assert not [item for item in page.main.metric if item.label == "Run"]
    assert float(metric(page, "Test accuracy").rstrip("%")) > 90
    assert metric(page, "Epochs") == str(EPOCHS) and metric(page, "Batch") == str(BATCH)
    assert any("Trained and published" in caption.value for caption in page.caption)
    curves = chart_specs(card)
    assert len(curves) == 2 and all({"epoch", "value", "line"} <= encoded_fields(c) for c in curves)
    # whole epochs on the axis, even for a run of one epoch ("1.000000" before)
    assert {layer["encoding"]["x"]["axis"]["format"] for c in curves for layer in c["layer"]} == {
        "d"
    }
    assert training.rounds_line(TRAINING_HISTORY) in [caption.value for caption in card.caption]
    assert any(f"Serving {verbatim(FIRST_RUN)}" in caption.value for caption in page.main.caption)
    assert not page.expander  # nothing to unfold: the report is there
    assert "Confusion matrix on the test set" in image_captions(page)
    assert len([s for s in chart_specs(page.main) if "misread" in encoded_fields(s)]) == 1
    assert any(caption.value.startswith("Commonest mistakes: ") for caption in page.main.caption)
    assert [tab.label for tab in page.tabs] == ["Upload images", "Take a photo", "Draw a digit"]
    assert any("Draw one digit" in caption.value for caption in page.caption)
    assert not page.error and not page.warning


@pytest.mark.parametrize("history", ['{"rounds": "many"}', None])
def test_a_run_without_a_valid_history_or_a_matrix_shows_the_rest(
    monkeypatch: pytest.MonkeyPatch, own_store: Path, history: str | None
) -> None:
    path = own_store / run_prefix(FIRST_RUN) / "history.json"
    path.write_text(history) if history else path.unlink()
    metrics_file = own_store / run_prefix(FIRST_RUN) / "metrics.json"
    metrics = json.loads(metrics_file.read_text())
    del metrics["confusion_matrix"]
    metrics_file.write_text(json.dumps(metrics))
    page = open_page(monkeypatch, latest_uri(own_store))
    assert metric(page, "Run") == verbatim(FIRST_RUN) and not page.warning
    assert not chart_specs(page.sidebar)  # no curves
    said = [c.value for c in page.sidebar.caption if c.value.startswith("The training history")]
    assert len(said) == (1 if history else 0)
    assert "Confusion matrix on the test set" in image_captions(page)  # the run's confusion.png
    assert [s for s in chart_specs(page.main) if "misread (%)" in encoded_fields(s)]


def test_an_upload_is_never_written_to_disk_under_its_name(
    monkeypatch: pytest.MonkeyPatch, published_store: Path, tmp_path: Path
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # where a temporary copy would go
    tempfile.tempdir = None  # make tempfile read TMPDIR again
    name = f"upload-{uuid.uuid4().hex}.jpg"
    try:
        page = open_page(monkeypatch, latest_uri(published_store))
        upload(page, name, (SAMPLES / "7-photo.jpg").read_bytes(), "image/jpeg")
        assert metric(page, "Prediction") == "7"
    finally:
        tempfile.tempdir = None
    for folder in (tmp_path, published_store, ROOT):
        assert name not in files_under(folder), f"{name} was written under {folder}"


def files_under(folder: Path) -> set[str]:
    """Names of the files under `folder`, leaving out virtual environments and git's store."""
    names: set[str] = set()
    for _, subfolders, files in os.walk(folder):
        subfolders[:] = [sub for sub in subfolders if sub not in {".venv", ".git"}]
        names.update(files)
    return names


def bad_uploads() -> dict[str, tuple[bytes, str]]:
    """Files the page refuses, and what it says (a browser refuses one over the limit earlier)."""
    side, limit = int((MAX_PIXELS * 3) ** 0.5), MAX_FILE_MB * MB
    return {
        "not an image": (b"just some text\n" * 10, "This is not an image the page can read"),
        "truncated": ((SAMPLES / "4-photo.jpg").read_bytes()[:2000], "damaged or cut short"),
        "0 bytes": (b"", "The file is empty"),
        "no ink": (encode(Image.new("RGB", (120, 90), "white")), "No digit found"),
        "bomb": (encode(Image.new("1", (side, side), 0)), "The image has too many pixels"),
        "too big": (
            encode(Image.new("L", (28, 28))) + bytes(limit),
            f"the limit is {limit // MB} MB",
        ),
    }


def test_each_bad_upload_gets_its_one_message_and_the_page_keeps_working(
    monkeypatch: pytest.MonkeyPatch, published_store: Path
) -> None:
    page = open_page(monkeypatch, latest_uri(published_store))
    for case, (data, message) in bad_uploads().items():
        upload(page, f"{case}.png", data)
        assert [message in error.value for error in page.error] == [True], case
        assert not [item for item in page.metric if item.label == "Prediction"], case
        upload(page, "7.jpg", (SAMPLES / "7-photo.jpg").read_bytes())  # the next upload works
        assert metric(page, "Prediction") == "7" and not page.error
        assert not page.warning  # read at SURE or more: no guess


@pytest.fixture(scope="module")
def undecided_model(digit_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test model with its last layer zeroed: 10% for every digit, whatever the image and the CPU."""
    path = tmp_path_factory.mktemp("undecided") / "model.h5"
    shutil.copyfile(digit_model, path)
    weights = read_weights(path)
    return write_model_weights(path, [*weights[:-2], *(np.zeros_like(w) for w in weights[-2:])])


def test_the_default_model_uri_is_the_local_stores_latest_and_an_empty_one_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ARTIFACTS", str(tmp_path / "empty-store"))
    page = open_page(monkeypatch, "")  # MODEL_URI empty: the default applies
    assert f"No model is published at {verbatim(latest_uri(tmp_path / 'empty-store'))}" in (
        page.info[0].value
    )
    assert "make pipeline" in page.info[0].value
    assert not page.file_uploader


def test_a_new_latest_is_picked_up_and_a_broken_one_keeps_the_old_model(
    monkeypatch: pytest.MonkeyPatch, own_store: Path, digit_model: Path
) -> None:
    # a refused version is tried again at once here, not after a minute, so fixing it shows
    monkeypatch.setattr(model_source, "REFUSED_RETRY_SECONDS", 0)
    page = open_page(monkeypatch, latest_uri(own_store))
    assert metric(page, "Run") == verbatim(FIRST_RUN)

    # LATEST names a run whose model never arrived: keep serving, and say so
    (own_store / run_prefix("ui-test-3")).mkdir(parents=True)
    (own_store / LATEST_KEY).write_text("ui-test-3")
    look_again(page)
    assert metric(page, "Run") == verbatim(FIRST_RUN)
    assert f"Still serving {verbatim(FIRST_RUN)}" in page.warning[0].value
    assert "ui-test-3" in page.text[0].value  # the store's words, as plain text

    # once it is whole, the page switches without a restart
    shutil.copyfile(digit_model, own_store / run_prefix("ui-test-3") / "model.h5")
    look_again(page)
    assert metric(page, "Run") == verbatim("ui-test-3") and not page.warning
    upload(page, "7.jpg", (SAMPLES / "7-photo.jpg").read_bytes())
    assert metric(page, "Prediction") == "7"


def test_the_card_shows_every_setting_that_is_not_the_default(
    monkeypatch: pytest.MonkeyPatch, own_store: Path
) -> None:
    settings = {"workers": 2, "rounds": 1, "epochs": 1, "batch": 100, "limit": 3000, "seed": 0}
    publish_copy(own_store, "ui-quick", settings=settings | {"source": "/srv/data/mnist.npz"})
    page = open_page(monkeypatch, latest_uri(own_store))
    [caption] = [c.value for c in page.caption if c.value.startswith("Not the defaults:")]
    shown = ["--workers 2", "--rounds 1", "--epochs 1", "--limit 3000", "--source a local file"]
    assert caption == "Not the defaults: " + " ".join(verbatim(flag) for flag in shown)
    assert "/srv" not in str(page)  # the server's disk is not the visitors' business


def test_several_files_or_a_photo_get_one_result_each_beside_their_picture(
    monkeypatch: pytest.MonkeyPatch, published_store: Path
) -> None:
    page = open_page(monkeypatch, latest_uri(published_store))
    names = ["7-photo.jpg", "2-mnist.png", "4-photo.jpg"]
    files = [(name, (SAMPLES / name).read_bytes(), "image/jpeg") for name in names]
    files.insert(1, ("notes.png", b"not an image", "image/png"))
    page.file_uploader[0].set_value(files)
    page.run()
    assert not page.exception, page.exception
    assert [item.value for item in page.metric if item.label == "Prediction"] == ["7", "2", "4"]
    assert [text.value for text in page.text] == [name for name, _, _ in files]
    assert [error.value for error in page.error] == [
        "This is not an image the page can read (use png, jpg, jpeg, bmp, gif, webp)."
    ]
    assert image_captions(page).count(PAIR_CAPTION) == 3  # each beside what the model sees
    # each digit's errors, each file's ten probabilities
    assert len(chart_specs(page.main)) == 1 + 3
    page.camera_input[0].set_value(
        ("cam.jpg", (SAMPLES / "0-photo.jpg").read_bytes(), "image/jpeg")
    )
    page.file_uploader[0].set_value(None)
    page.run()
    assert not page.exception, page.exception
    assert metric(page, "Prediction") == "0"  # a photo from the camera
    assert image_captions(page).count(PAIR_CAPTION) == 1


def test_an_unexpected_failure_shows_a_plain_message_not_the_source(
    monkeypatch: pytest.MonkeyPatch, published_store: Path
) -> None:
    import ui.readings

    def broken(image: object) -> object:
        raise RuntimeError("/secret/path/in/the/source.py line 42")

    monkeypatch.setattr(ui.readings, "to_mnist", broken)  # the page reads images there
    monkeypatch.setattr(ui.readings, "KEPT", ui.readings.Kept())  # nothing read before this test
    page = open_page(monkeypatch, latest_uri(published_store))
    upload(page, "7.jpg", (SAMPLES / "7-photo.jpg").read_bytes())
    assert [error.value for error in page.error] == [
        "This image could not be processed. Try another photo."
    ]
    assert "secret" not in str(page)


def test_streamlit_runs_the_page_with_its_bounds_no_tracebacks_and_no_per_run_reloading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bounded messages, no tracebacks, no per-run file watching or full collection."""
    from streamlit import config

    monkeypatch.chdir(ROOT)  # Streamlit reads ./.streamlit/config.toml, as the page's image does
    config.get_config_options(force_reparse=True)
    try:
        assert config.get_option("client.showErrorDetails") == "none"
        assert config.get_option("client.toolbarMode") == "viewer"
        assert config.get_option("client.showErrorLinks") is False
        assert config.get_option("server.maxUploadSize") == MAX_FILE_MB  # ui.predict's too
        assert config.get_option("server.maxMessageSize") == MAX_MESSAGE_MB
        assert config.get_option("server.maxWidgetStateSize") == MAX_MESSAGE_MB
        assert MAX_DRAWING_BYTES < MAX_MESSAGE_MB * 1_000_000  # Streamlit's megabyte is 10^6 bytes
        assert config.get_option("server.enableWebsocketCompression") is False
        assert config.get_option("server.fileWatcherType") == "none"
        assert config.get_option("runner.postScriptGC") is False
    finally:
        monkeypatch.undo()
        config.get_config_options(force_reparse=True)


# Store text is untrusted: shown as text, never as Markdown; and nothing in it stops the page.

HOSTILE = (
    "![beacon](http://127.0.0.1:9/b.png) [log in](https://evil.example/login) www.evil.example"
)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)


def rendered_as_markdown(page: AppTest) -> list[str]:
    """The text of every element Streamlit renders as Markdown (alerts, captions, toasts, metrics)."""
    kinds = ("markdown", "caption", "warning", "info", "error", "success", "toast", "subheader")
    values = [element.value for kind in kinds for element in page.get(kind)]
    return values + [text for item in page.metric for text in (item.label, item.value)]


def assert_no_store_markdown(page: AppTest) -> None:
    for value in rendered_as_markdown(page):
        outside_code = CODE_SPAN.sub("", str(value))
        assert "](" not in outside_code and "evil.example" not in outside_code, value


def publish_copy(store: Path, run: str, **card: object) -> None:
    """A copy of the first run as `run`, its run.json changed by `card`; LATEST names it."""
    folder = store / run_prefix(run)
    shutil.copytree(store / run_prefix(FIRST_RUN), folder)
    raw = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**raw, **card}))
    (store / LATEST_KEY).write_text(run)


def test_store_text_is_shown_as_text_not_markdown(
    monkeypatch: pytest.MonkeyPatch, own_store: Path
) -> None:
    page = open_page(monkeypatch, latest_uri(own_store))
    publish_copy(own_store, "ui-test-md", published_at=HOSTILE, settings={"workers": HOSTILE})
    look_again(page)
    assert not page.exception, page.exception
    assert_no_store_markdown(page)

    (own_store / LATEST_KEY).write_text(HOSTILE)  # quoted by the warning that it is no run id
    look_again(page)
    assert not page.exception, page.exception
    assert any("!" in text.value and "not a run id" in text.value for text in page.text)
    assert_no_store_markdown(page)


def test_a_card_in_a_shape_no_check_expected_does_not_stop_the_page(
    monkeypatch: pytest.MonkeyPatch, own_store: Path
) -> None:
    """Whatever the checks of steps.lib.published let through, the page keeps its tabs."""
    import steps.lib.registry

    def unchecked(store: object, folder: str, run: str) -> dict:
        return {"run": run, "settings": ["not", "an", "object"], "accuracy": "0.9"}

    monkeypatch.setattr(steps.lib.registry, "read_run_card", unchecked)  # read_published's reader
    page = open_page(monkeypatch, latest_uri(own_store))
    assert [tab.label for tab in page.tabs] == ["Upload images", "Take a photo", "Draw a digit"]
    assert "The model's card cannot be shown." in [warning.value for warning in page.warning]
    upload(page, "7.jpg", (SAMPLES / "7-photo.jpg").read_bytes())
    assert metric(page, "Prediction") == "7"


def test_what_the_page_says_of_a_model_is_built_once_per_model(
    monkeypatch: pytest.MonkeyPatch, own_store: Path
) -> None:
    """Two visitors' four runs build the card, the curves and the report once; each run shows them."""
    import steps.lib.confusion_plot
    import steps.lib.published
    import ui.report

    built: Counter[str] = Counter()

    def counted(module: object, name: str) -> None:
        function = getattr(module, name)

        def counting(*args: object, **kwargs: object) -> object:
            built[name] += 1
            return function(*args, **kwargs)

        monkeypatch.setattr(module, name, counting)

    counted(training, "curve_chart")  # the curves, one chart a metric
    counted(steps.lib.confusion_plot, "draw_confusion")  # the report's picture
    counted(ui.report, "errors_per_digit")  # the report's chart
    counted(steps.lib.published, "differing")  # the card's settings
    for _ in range(2):
        page = open_page(monkeypatch, latest_uri(own_store))
        for _ in range(2):
            page.run()
            assert metric(page, "Run") == verbatim(FIRST_RUN)
            assert len(chart_specs(page.sidebar)) == 2
            assert "Confusion matrix on the test set" in image_captions(page)
    assert built == {"curve_chart": 2, "draw_confusion": 1, "errors_per_digit": 1, "differing": 1}


def test_a_store_that_cannot_be_reached_is_said_so_with_or_without_a_model_in_memory(
    monkeypatch: pytest.MonkeyPatch, digit_model: Path, model_evaluation: Path
) -> None:
    """With the store's emulator stopped the page says so, serving the model in memory if any."""
    with own_emulator() as emulator:
        bucket = new_bucket(emulator.host, monkeypatch)
        publish_run(f"gs://{bucket}", "gcs-run-1", digit_model, model_evaluation)
        uri = f"gs://{bucket}/{LATEST_KEY}"
        page = open_page(monkeypatch, uri)
        assert metric(page, "Run") == verbatim("gcs-run-1") and not page.warning
        emulator.stop()
        keeper = model_source.KEEPERS[uri]
        keeper.store().deadline = 1.0  # the reads give up sooner, retries and all
        look_again(page)
    assert metric(page, "Run") == verbatim("gcs-run-1")
    assert [w.value for w in page.warning] == [
        f"Still serving {verbatim('gcs-run-1')}: {model_source.UNREACHABLE}, "
        "a newer model may be there."
    ]
    upload(page, "7.jpg", (SAMPLES / "7-photo.jpg").read_bytes())
    assert metric(page, "Prediction") == "7"
    monkeypatch.setattr(model_source, "KEEPERS", {})  # a server started since: nothing in memory
    monkeypatch.setattr(model_source, "STORE_SECONDS", 1.0)
    page = open_page(monkeypatch, uri)
    assert [w.value for w in page.warning] == [
        f"No model yet: {model_source.UNREACHABLE}. Reload this page in a moment."
    ]
    assert not page.info and not page.file_uploader


def test_a_guess_of_a_weak_model_blames_the_model_not_the_image(
    monkeypatch: pytest.MonkeyPatch, own_store: Path, undecided_model: Path
) -> None:
    """A partial run of 79.5% served: "Try a clearer image" sent visitors after the wrong cause."""
    settings = {"workers": 1, "rounds": 1, "epochs": EPOCHS, "batch": BATCH, "limit": 3000}
    publish_copy(own_store, "ui-weak", accuracy=0.795, settings=settings)
    shutil.copyfile(undecided_model, own_store / run_prefix("ui-weak") / "model.h5")
    page = open_page(monkeypatch, latest_uri(own_store))
    upload(page, "7.jpg", (SAMPLES / "7-photo.jpg").read_bytes())
    assert [item.proto.delta for item in page.metric if item.label == "Prediction"] == [
        "10.0% confident"
    ]
    (said,) = [warning.value for warning in page.warning if "Low confidence" in warning.value]
    assert "Try a clearer image" not in said
    assert "79.50% on the test set" in said and "--limit 3000" in said
