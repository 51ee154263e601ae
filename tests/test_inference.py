"""evaluate without TensorFlow: the numpy forward pass gives Keras's probabilities, predictions and loss."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from steps import evaluate
from steps.lib import inference
from steps.lib.entry_point import run
from steps.lib.mnist import Digits, load_mnist
from steps.lib.model_file import read_weights
from steps.lib.shards import write_shard

DIGITS = 500  # test digits compared
TOLERANCE = 1e-4  # absolute, on probabilities and on the mean loss


@pytest.fixture(scope="module")
def test_digits(mnist_path: Path) -> Digits:
    _, test = load_mnist(mnist_path)
    return Digits(test.x[:DIGITS], test.y[:DIGITS])


def keras_scores(weights: list[np.ndarray], digits: Digits) -> tuple[np.ndarray, float]:
    """Keras's own probabilities (model.predict) and loss (model.evaluate), as evaluate computed them."""
    from steps.lib.keras_model import build_model, compile_model, to_inputs

    model = compile_model(build_model(), learning_rate=1e-3)
    model.set_weights(weights)
    probabilities = model.predict(to_inputs(digits.x), batch_size=1000, verbose=0)
    loss = model.evaluate(to_inputs(digits.x), digits.y, batch_size=1000, verbose=0)[0]
    return probabilities, float(loss)


def keras_digits(ours: np.ndarray, keras: np.ndarray) -> np.ndarray:
    """Keras's digit where its top two probabilities stand over 2 * TOLERANCE apart (ours must agree,
    checked); in a near-tie the CPU's rounding may break it either way, and ours stands."""
    top_two = np.sort(keras, axis=1)[:, -2:]
    decided = top_two[:, 1] - top_two[:, 0] > 2 * TOLERANCE
    np.testing.assert_array_equal(ours.argmax(axis=1)[decided], keras.argmax(axis=1)[decided])
    return np.where(decided, keras.argmax(axis=1), ours.argmax(axis=1))


def test_the_evaluate_step_reports_what_keras_computes(
    digit_model: Path, test_digits: Digits, tmp_path: Path
) -> None:
    weights = read_weights(digit_model)
    expected, expected_loss = keras_scores(weights, test_digits)

    probabilities = inference.softmax(inference.logits(weights, test_digits.x))
    assert probabilities.dtype == np.float32
    np.testing.assert_allclose(probabilities, expected, rtol=0, atol=TOLERANCE)
    predicted = keras_digits(probabilities, expected)

    write_shard(tmp_path / "test.npz", test_digits)
    argv = ["--model", digit_model, "--test", tmp_path / "test.npz", "--out-dir", tmp_path / "out"]
    assert run(evaluate.main, evaluate.make_parser(), [str(a) for a in argv]) == 0
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["accuracy"] == float((predicted == test_digits.y).mean())
    assert (
        metrics["confusion_matrix"] == evaluate.confusion_matrix(test_digits.y, predicted).tolist()
    )
    assert metrics["loss"] == pytest.approx(expected_loss, rel=0, abs=TOLERANCE)


def test_a_confident_models_loss_is_computed_from_logits_as_keras_does(
    digit_model: Path, test_digits: Digits
) -> None:
    """Keras's evaluate takes the softmax's input, so a confidently wrong digit costs its full loss:
    clipping its probability at 1e-7 (Keras's epsilon) would cap it at 16 and misstate the mean."""
    weights = read_weights(digit_model)
    weights[-2] = weights[-2] * 30  # the last kernel: logits 30 times apart
    expected, expected_loss = keras_scores(weights, test_digits)
    logits = inference.logits(weights, test_digits.x)
    probabilities = inference.softmax(logits)
    np.testing.assert_allclose(probabilities, expected, rtol=0, atol=TOLERANCE)
    keras_digits(probabilities, expected)
    assert inference.cross_entropy(logits, test_digits.y) == pytest.approx(
        expected_loss, rel=0, abs=TOLERANCE
    )
    chosen = probabilities[np.arange(DIGITS), test_digits.y]
    clipped = float(-np.log(np.clip(chosen, 1e-7, 1 - 1e-7)).mean())
    assert abs(clipped - expected_loss) > 0.1  # the case tells the two apart


def test_batches_change_nothing(test_digits: Digits) -> None:
    rng = np.random.default_rng(0)
    from steps.init import initial_weights

    weights = initial_weights(5)
    weights = [w + rng.normal(0, 0.01, w.shape).astype(np.float32) for w in weights]
    whole = inference.logits(weights, test_digits.x[:50], batch=50)
    assert whole.shape == (50, 10) and whole.dtype == np.float32
    np.testing.assert_allclose(
        inference.logits(weights, test_digits.x[:50], batch=7), whole, atol=1e-5
    )


def test_a_model_whose_numbers_overflow_ends_with_one_line(tmp_path: Path) -> None:
    """Finite weights can still overflow float32: one error line (no numpy warnings), nothing written."""
    from steps import init
    from steps.lib.model_file import read_model_file, write_model_file

    model = tmp_path / "huge.h5"
    assert run(init.main, init.make_parser(), ["--out", str(model)]) == 0
    template = read_model_file(model)
    write_model_file(model, template, [w * np.float32(1e30) for w in template.weights])
    test_set = tmp_path / "test.npz"
    write_shard(
        test_set, Digits(np.full((20, 28, 28), 255, np.uint8), np.arange(20, dtype=np.uint8) % 10)
    )
    argv = ["--model", model, "--test", test_set, "--out-dir", tmp_path / "out"]
    result = subprocess.run(
        [sys.executable, "-m", "steps.evaluate", *argv],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr == f"python -m steps.evaluate: error: {model}: the test loss is nan\n"
    assert not (tmp_path / "out").exists()
