"""The images hold exactly the versions uv.lock pins, TensorFlow in the train image only, and their sizes
above the base (0.20 GB stand-in, 0.13 GB official slim) stay within what each needs (steps under 150 MB)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support import containers
from tests.support.containers import Images, finds_tensorflow
from tests.support.project import ROOT

pytestmark = pytest.mark.containers
images = containers.images  # the fixture, under its own name

MB = 1_000_000
# Above the base, in MB (measured: steps 133, train 992, page 424).
BUDGETS = {"steps": 150, "train": 1050, "page": 450}
# Each image's extra of pyproject.toml (the steps image: the core alone).
EXTRAS = {"steps": None, "train": "train", "page": "page"}
# The uv `make setup` installs, beside the tests' Python (Makefile: UV).
UV = Path(sys.prefix) / "uv" / "bin" / "uv"
LIST_INSTALLED = (
    "import importlib.metadata as m, json; "
    "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
)


def locked(extra: str | None) -> dict[str, str]:
    """What uv.lock pins for an extra on this platform (the images' too: Linux, the same Python minor,
    tests/test_infra_image.py), the project itself left out: `uv export`'s list, its markers evaluated."""
    exported = subprocess.run(
        [str(UV), "export", "--frozen", "--no-hashes", "--no-header", "--no-annotate"]
        + ["--no-emit-project", "--format", "requirements-txt"]
        + (["--extra", extra] if extra else []),
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert exported.returncode == 0, exported.stderr
    pins = [Requirement(line) for line in exported.stdout.splitlines() if line.strip()]
    return {
        canonicalize_name(pin.name): str(pin.specifier).removeprefix("==")
        for pin in pins
        if pin.marker is None or pin.marker.evaluate()
    }


def installed(engine: str, image: str) -> dict[str, str]:
    """Every distribution in the image's environment and its version, the project itself left out."""
    listed = subprocess.run(
        [engine, "run", "--rm", "--network", "none", image, "python", "-c", LIST_INSTALLED],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    found = {canonicalize_name(n): v for n, v in json.loads(listed.stdout).items()}
    assert found.pop("mnist-argo") == containers.VERSION
    return found


@pytest.mark.parametrize("key", sorted(EXTRAS))
def test_each_image_holds_exactly_the_locked_versions(images: Images, key: str) -> None:
    assert installed(images.engine, getattr(images, key)) == locked(EXTRAS[key])


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
