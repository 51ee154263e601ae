"""What the page's tests share: one decent model trained once, published with the real steps."""

from __future__ import annotations

import json
from pathlib import Path

from steps import evaluate, publish
from steps.dataset import Digits, load_mnist, write_shard

TRAIN_DIGITS = 10_000  # ~96% on the test set after 2 epochs, in about half a minute on 2 cores
EPOCHS = 2
BATCH = 64
EVAL_DIGITS = 2_000  # the published metrics.json; enough for a confusion matrix
FIRST_RUN = "ui-test-1"


def train_digit_model(mnist_path: Path, target: Path) -> Path:
    """Train the project's CNN on the first TRAIN_DIGITS training digits; save it as .h5."""
    import keras

    from steps.model import build_model, compile_model, save_model, to_inputs

    train, _ = load_mnist(mnist_path)
    keras.utils.set_random_seed(0)
    model = compile_model(build_model(), learning_rate=1e-3)
    model.fit(
        to_inputs(train.x[:TRAIN_DIGITS]),
        train.y[:TRAIN_DIGITS],
        epochs=EPOCHS,
        batch_size=BATCH,
        verbose=0,
    )
    save_model(model, target)
    return target


def evaluate_model(mnist_path: Path, model: Path, out_dir: Path) -> Path:
    """Run the evaluate step on EVAL_DIGITS test digits; return the folder with its outputs."""
    _, test = load_mnist(mnist_path)
    test_file = out_dir / "test.npz"
    write_shard(test_file, Digits(test.x[:EVAL_DIGITS], test.y[:EVAL_DIGITS]))
    args = ["--model", str(model), "--test", str(test_file), "--out-dir", str(out_dir)]
    evaluate.main(evaluate.parse_args().parse_args(args))
    return out_dir


def publish_run(store: str | Path, run: str, model: Path, evaluation: Path) -> None:
    """Publish `model` as `run` with the publish step: the run's files, then LATEST."""
    settings = {"workers": 1, "rounds": 1, "epochs": EPOCHS, "batch": BATCH}
    args = [
        "--store",
        str(store),
        "--run",
        run,
        "--model",
        str(model),
        "--metrics",
        str(evaluation / "metrics.json"),
        "--attach",
        str(evaluation / "confusion.png"),
        "--settings",
        json.dumps(settings),
    ]
    publish.main(publish.parse_args().parse_args(args))
