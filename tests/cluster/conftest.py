"""The cluster tests (`pytest -m cluster`, `make test-cluster`): each module here is marked `cluster` and runs
on the cluster tests/support/cluster.py finds, which must answer: no cluster fails them, never skips them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing

import pytest

from tests.support.cluster import Cluster, from_environment


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    target = from_environment()
    target.kubectl("get", "--raw", "/readyz")
    with closing(target):
        yield target
