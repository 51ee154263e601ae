"""The words under a guess: the image, or the model served, as the likelier cause."""

from __future__ import annotations

from ui.guess import WEAK_ACCURACY, guess_text


def test_a_good_model_asks_for_a_clearer_image() -> None:
    said = guess_text(0.99, {"workers": 3}, {"missing_shards": {}})
    assert said.endswith("Try a clearer image, one digit filling most of it.")
    assert guess_text(None, {}, {}) == said  # nothing known of the model: the image


def test_a_weak_model_is_named_as_the_likelier_cause() -> None:
    said = guess_text(0.795, {}, {})
    assert "weak one (79.50% on the test set)" in said and "Try a clearer" not in said
    assert "Try a clearer" in guess_text(WEAK_ACCURACY, {}, {})


def test_a_partial_run_is_named_as_the_likelier_cause_whatever_it_scored() -> None:
    said = guess_text(0.97, {"limit": 3000}, {"missing_shards": {"2": ["1"]}})
    assert "trained on part of the data (--limit 3000; round 2 without shard 1)" in said
    assert "Try a clearer" not in said
