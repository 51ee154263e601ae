"""The images' sizes stay within what each needs, and TensorFlow is in the train image only. Sizes are what
the project adds above the base image (the stand-in here is 0.20 GB, the official slim base about 0.13 GB):
the steps image's targets are 0.4 GB on the stand-in and 0.3 GB on the official base, so its layers above
the base stay under 150 MB."""

from __future__ import annotations

import subprocess

import pytest

from tests.support import containers
from tests.support.containers import Images, finds_tensorflow

pytestmark = pytest.mark.containers
images = containers.images  # the fixture, under its own name

MB = 1_000_000
# Above the base, in MB (measured: steps 133, train 992, page 424).
BUDGETS = {"steps": 150, "train": 1050, "page": 450}


def inspect(engine: str, image: str, template: str) -> str:
    found = subprocess.run(
        [engine, "image", "inspect", "--format", template, image], capture_output=True, text=True
    )
    assert found.returncode == 0, found.stderr
    return found.stdout.strip()


def above_base(engine: str, image: str) -> int:
    """Bytes the image adds to the base it was built on (the build labels the base's name)."""
    base = inspect(engine, image, '{{index .Labels "mnist-argo.base"}}')
    assert base, f"{image} does not name its base"
    return int(inspect(engine, image, "{{.Size}}")) - int(inspect(engine, base, "{{.Size}}"))


@pytest.mark.parametrize("key", sorted(BUDGETS))
def test_each_image_adds_no_more_than_it_needs(images: Images, key: str) -> None:
    image = getattr(images, key)
    added = above_base(images.engine, image)
    assert added <= BUDGETS[key] * MB, f"{image} adds {added / MB:.0f} MB to its base"


def test_only_the_train_image_has_tensorflow(images: Images) -> None:
    assert finds_tensorflow(images.engine, images.train)
    assert not finds_tensorflow(images.engine, images.steps)
    assert not finds_tensorflow(images.engine, images.page)
