"""The card's "Compare with…" (ui/compare.py) on the real page, run by streamlit.testing's AppTest: the
served model beside another run of its store, read-only."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from steps.lib.registry import LATEST_KEY
from tests.support.page import FIRST_RUN
from tests.support.project import ROOT
from tests.support.runs import CUT, OLD, beside_the_page_run
from ui.compare import PICKER


@pytest.fixture
def two_runs_store(published_store: Path, tmp_path: Path) -> Path:
    return beside_the_page_run(published_store, tmp_path / "store")


def test_the_served_model_beside_another_run(
    monkeypatch: pytest.MonkeyPatch, two_runs_store: Path
) -> None:
    monkeypatch.setenv("MODEL_URI", str(two_runs_store / LATEST_KEY))
    monkeypatch.chdir(ROOT)
    page = AppTest.from_file(str(ROOT / "ui" / "app.py"), default_timeout=120)
    page.run()
    [picker] = [box for box in page.sidebar.selectbox if box.label == PICKER]
    assert picker.options == [CUT, OLD] and picker.value is None
    assert not page.main.dataframe  # nothing compared until a run is picked

    picker.set_value(OLD).run()
    assert not page.exception, page.exception
    [other] = [metric for metric in page.main.metric if metric.label == OLD]
    assert other.value == "96.12%"
    [differ] = page.main.dataframe
    assert differ.value.to_dict("index") == {
        "workers": {"served": "1", "other": "3"},
        "epochs": {"served": "2", "other": "1"},
        "batch": {"served": "64", "other": "100"},
        "rounds": {"served": "1", "other": "2"},
    }
    captions = [caption for image in page.main.get("image") for caption in image.captions]
    assert {f"Confusion matrix of {FIRST_RUN}", f"Confusion matrix of {OLD}"} <= set(captions)
    assert len(page.main.get("vega_lite_chart")) >= 4  # accuracy and loss, of each run

    [picker] = [box for box in page.sidebar.selectbox if box.label == PICKER]
    picker.set_value(CUT).run()
    assert any("was not published: unfinished: round 2 training" in c.value for c in page.caption)
    assert (two_runs_store / LATEST_KEY).read_text() == FIRST_RUN  # read-only
