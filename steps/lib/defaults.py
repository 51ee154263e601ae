"""What a run does when nobody says otherwise, declared once: the pipeline's settings
(workflows/pipeline/settings.py) and the steps' own flags both take their defaults from here, so
`python -m steps.<name>` run by hand does what the step does in the pipeline."""

from __future__ import annotations

from pathlib import Path

from steps.lib.mnist import KERAS_MNIST_URL

# The project's folder, when this is a clone of it (an installed package, as in the images, has none).
PROJECT_ROOT = Path(__file__).resolve().parents[2]
IN_A_CLONE = (PROJECT_ROOT / "pyproject.toml").is_file()

WORKERS = 3  # shards, and trainers in parallel
EPOCHS = 4  # passes over a shard in each round
BATCH = 100  # samples per gradient step
ROUNDS = 2  # train → average rounds
LEARNING_RATE = 0.004  # Adam's step size in round 1
FINAL_LEARNING_RATE = 0.001  # and in the last round (steps.lib.schedule)
MIN_WORKERS = 0  # 0: every shard's model is needed
LIMIT = 0  # training digits kept, 0 = all
# training digits split holds out of every shard, on which aggregate scores each round's average: 0.1
# point a digit, and a fraction of a second to score in numpy; never part of the test set
VALIDATION = 1000
SEED = 0
PARTITION = "iid"
ALPHA = 0.5  # Dirichlet concentration
RETRIES = 2  # of a failed step, but on bad input
RETRY_BACKOFF = "15s"  # before the first retry; doubled for each further one
# When a run becomes the served model (steps.lib.promotion): only when it scores better than the one
# served, so an experiment never replaces it unasked; a partial run never replaces a complete one.
SERVE = "if-better"
# if-better and if-not-worse serve no model below this test accuracy (chance is 0.10; the README's
# quick try, 3000 digits for one epoch, scores about 0.8)
MIN_ACCURACY = 0.5
# if-not-worse serves one scoring up to this below the model LATEST serves (a default run scores 0.99)
MAX_ACCURACY_DROP = 0.05
SOURCE = KERAS_MNIST_URL  # mnist.npz
SOURCE_ENV = "MNIST_SOURCE"  # the environment variable that names it, for submit.py and the tools
# The artifact store (a folder here, or gs://bucket[/prefix]) the page reads too: in a clone, its own
# .runs wherever a command starts, so the page and every tool find the runs made from any folder.
STORE = str(PROJECT_ROOT / ".runs") if IN_A_CLONE else ".runs"
STORE_ENV = "ARTIFACTS"  # the environment variable that sets it, for submit.py and the page alike
IMAGE = "mnist-argo-steps:0.1.0"  # every step but train (no TensorFlow)
TRAIN_IMAGE = "mnist-argo-train:0.1.0"  # the train step (TensorFlow)
