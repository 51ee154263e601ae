"""The tests' reference files (files.toml): the CI copy under ../shared, else the pinned file downloaded
once and checked by its sha256; REFERENCE_MIRROR (a URL) and REFERENCE_CACHE (a folder) override."""

from __future__ import annotations

import os
import tomllib
import urllib.parse
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from steps.lib.downloads import fetch_pinned
from steps.lib.errors import StepError

PINS = Path(__file__).with_name("files.toml")
SHARED = (
    Path(__file__).resolve().parents[2].parent / "shared"
)  # the project's CI keeps one beside it
MIRROR_ENV = "REFERENCE_MIRROR"
CACHE_ENV = "REFERENCE_CACHE"


class ReferenceUnavailable(RuntimeError):
    """A reference file that could not be had; its text is the one line that says why."""


@dataclass(frozen=True)
class Pin:
    name: str
    what: str
    shared: str  # the CI copy's path under ../shared
    sha256: str
    url: str | None = None

    @property
    def file_name(self) -> str:
        return f"{self.name}{Path(self.shared).suffix}"


@cache
def pins() -> dict[str, Pin]:
    """files.toml's entries; one `pinned_by` a module takes its url and sha256 from that module."""
    entries = {}
    for name, entry in tomllib.loads(PINS.read_text()).items():
        fields = {key: value for key, value in entry.items() if key != "pinned_by"}
        if entry.get("pinned_by") == "steps.lib.mnist":
            from steps.lib.mnist import KERAS_MNIST_SHA256, KERAS_MNIST_URL

            fields |= {"url": KERAS_MNIST_URL, "sha256": KERAS_MNIST_SHA256}
        entries[name] = Pin(name=name, **fields)
    return entries


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "mnist-argo" / "reference"
    return Path(os.environ.get(CACHE_ENV) or default)


def mirrored(url: str, mirror: str | None = None) -> str:
    """`url` with the scheme and host of `mirror` (REFERENCE_MIRROR), its path kept after the mirror's."""
    mirror = os.environ.get(MIRROR_ENV) if mirror is None else mirror
    if not mirror:
        return url
    base = urllib.parse.urlsplit(mirror)
    if base.scheme not in ("http", "https") or not base.netloc:
        raise ReferenceUnavailable(f"{MIRROR_ENV}={mirror[:200]}: not an http(s)://host[:port] URL")
    path = base.path.rstrip("/") + urllib.parse.urlsplit(url).path
    return urllib.parse.urlunsplit((base.scheme, base.netloc, path, "", ""))


def reference_file(name: str) -> Path:
    """The local path of reference file `name`: the CI copy, the cached download, or a fresh one."""
    pin = pins()[name]
    shared = SHARED / pin.shared
    if shared.is_file():
        return shared
    assert pin.url is not None, f"{PINS.name}: {name} has no url"
    try:
        return fetch_pinned(mirrored(pin.url), pin.sha256, cache_dir(), pin.file_name)
    except StepError as error:
        raise ReferenceUnavailable(f"{name} ({pin.what}): {error}") from None


def required(name: str) -> Path:
    """reference_file for a test or fixture: a file that cannot be had fails it, in one line."""
    import pytest

    try:
        return reference_file(name)
    except ReferenceUnavailable as error:
        reason = str(error)
    pytest.fail(reason, pytrace=False)  # outside the handler: the line alone, no chained traceback
