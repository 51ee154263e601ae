"""The real Argo Server's refusals, as submit.py words them: one line that says what to do."""

from __future__ import annotations

import secrets
import subprocess

import pytest

from tests.support.cluster import Cluster
from tests.support.project import run_submit
from workflows.pipeline import resources as names
from workflows.server.client import stop_workflow

pytestmark = pytest.mark.cluster

SMALL = ("--workers", "1", "--rounds", "1", "--epochs", "1", "--limit", "2000", "--serve", "never")


def refused(cluster: Cluster, *args: str, **env: str | None) -> subprocess.CompletedProcess:
    """submit.py against the cluster's server with ENV changed (None: unset); it must fail in one line."""
    changed = cluster.process_env(**{k: v for k, v in env.items() if v is not None})
    for name in (k for k, v in env.items() if v is None):
        changed.pop(name, None)
    done = run_submit(*cluster.submit_arguments(*SMALL, *args), env=changed, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    # besides the warnings that the local cluster's images are this machine's
    said = [line for line in done.stderr.splitlines() if not line.startswith("submit: warning: ")]
    assert len(said) == 1 and said[0].startswith("submit: error: "), done.stderr
    return done


def powerless_token(cluster: Cluster) -> str:
    """A token the API server accepts, of an account with no right on Workflows (the page's)."""
    token = cluster.kubectl(
        "-n", cluster.namespace, "create", "token", "mnist-page", "--duration", "10m"
    ).stdout.strip()
    return f"Bearer {token}"


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("no-token", ["401", "set ARGO_TOKEN", f"create token {names.SUBMITTER_ACCOUNT}"]),
        ("stale-token", ["401", "ARGO_TOKEN is not accepted"]),
        ("powerless-token", ["403", "ARGO_TOKEN", f"namespace '{names.NAMESPACE}'"]),
        ("no-namespace", ["403", "namespace 'nowhere'", "ARGO_NAMESPACE"]),
        ("certificate", ["TLS", "ARGO_INSECURE_SKIP_VERIFY=true"]),
    ],
)
def test_a_refusal_is_one_line_that_says_what_to_do(
    cluster: Cluster, case: str, expected: list[str]
) -> None:
    env: dict[str, str | None] = {
        "no-token": {"ARGO_TOKEN": None},
        "stale-token": {"ARGO_TOKEN": "Bearer stale"},
        "powerless-token": {"ARGO_TOKEN": powerless_token(cluster)},
        "no-namespace": {"ARGO_NAMESPACE": "nowhere"},
        "certificate": {"ARGO_INSECURE_SKIP_VERIFY": None},
    }[case]
    done = refused(cluster, "--watch", **env)
    for words in expected:
        assert words in done.stderr, done.stderr


def test_a_name_already_taken_is_refused_in_one_line(cluster: Cluster) -> None:
    name = f"mnist-taken-{secrets.token_hex(3)}"
    first = cluster.submit(*SMALL, "--name", name)
    assert first.returncode == 0, first.stderr
    try:
        done = refused(cluster, "--name", name)
        assert "already taken" in done.stderr and name in done.stderr and "--name" in done.stderr
    finally:
        stop_workflow(cluster.argo_server, name, "the test needed its name only")
