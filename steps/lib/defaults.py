"""What a run does when nobody says otherwise, declared once: the pipeline's settings
(workflows/pipeline/settings.py) and the steps' own flags both take their defaults from here, so
`python -m steps.<name>` run by hand does what the step does in the pipeline."""

from __future__ import annotations

from steps.lib.mnist import KERAS_MNIST_URL

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
# publish refuses a model below this test accuracy (chance is 0.10; a small quick run scores 0.85+)
MIN_ACCURACY = 0.5
# and one scoring more than this below the model LATEST serves (a default run scores 0.99)
MAX_ACCURACY_DROP = 0.05
SOURCE = KERAS_MNIST_URL  # mnist.npz
SOURCE_ENV = "MNIST_SOURCE"  # the environment variable that names it, for submit.py and the tools
STORE = ".runs"  # the artifact store (a folder here, or gs://bucket[/prefix]) the page reads too
STORE_ENV = "ARTIFACTS"  # the environment variable that sets it, for submit.py and the page alike
