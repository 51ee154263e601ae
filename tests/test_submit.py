"""submit.py as a user runs it against the Argo Server double: what it sends and prints for a run, a
registration and a run from the template, and what it refuses before anything is sent."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from tests.doubles import recordings
from tests.doubles.argo_server import REFUSED_CONTINUE_ON, ArgoDouble
from tests.support import docs
from tests.support.argo_double import IMAGE, STORE, on_argo, submit
from tests.support.argo_schema import first_error, workflow_validator
from tests.support.stories import STORIES
from tests.support.watch_output import steps_in
from workflows import preflight
from workflows.pipeline import resources as cluster
from workflows.pipeline.settings import PipelineSettings
from workflows.pipeline.workflow import compile_template
from workflows.submit import main

pytestmark = pytest.mark.usefixtures("clean_environment")


def test_submit_and_watch_a_run_to_success(
    argo: ArgoDouble, capsys: pytest.CaptureFixture[str]
) -> None:
    recording = recordings.load("succeed")
    code, out, err = submit(capsys, *recording.flags, "--watch")
    assert code == 0, out + err
    double, url = argo, os.environ["ARGO_SERVER"]
    linted, created = [r for r in double.requests if r[0] == "POST"]
    assert linted[:2] == ("POST", f"/api/v1/workflows/{cluster.NAMESPACE}/lint")
    assert created[:2] == ("POST", f"/api/v1/workflows/{cluster.NAMESPACE}")
    sent = created[2]["workflow"]
    assert linted[2]["workflow"] == sent, "the server's lint judged the very spec created"
    assert first_error(workflow_validator("Workflow"), sent) is None
    parameters = {p["name"]: p["value"] for p in sent["spec"]["arguments"]["parameters"]}
    flags = dict(zip(recording.flags[::2], recording.flags[1::2], strict=True))
    for name in ("workers", "epochs", "batch", "limit", "seed", "serve"):
        assert parameters[name] == flags[f"--{name}"], name
    assert parameters["store"] == STORE
    name = next(iter(double.runs))
    lines = out.splitlines()
    assert lines[0] == f"submitted {name} to {url} (namespace {cluster.NAMESPACE})"
    assert lines[1].strip() == f"{url}/workflows/{cluster.NAMESPACE}/{name}"
    assert sorted(steps_in(out)) == sorted(recording.steps())
    seconds = (
        recordings.moment(recording.final["finishedAt"])
        - recordings.moment(recording.final["startedAt"])
    ).total_seconds()
    assert f"\nrun {name} Succeeded in {seconds:.0f}s\n" in out
    assert f"test accuracy: {recording.output('evaluate', 'accuracy')}" in out
    # publish's outcome is its output parameters, not its exit code: the run Succeeded
    reason = recording.output("publish", "reason")
    [said] = [line for line in out.splitlines() if "served" in line]
    assert said.startswith(f"not served: {reason}; to serve it anyway: "), said
    assert said.endswith(f"-m steps.promote {name} --store {STORE}")
    assert err == ""


@pytest.mark.parametrize("story", STORIES)
def test_each_story_is_recorded_as_it_stands(story: str) -> None:
    """A story changed since its run was recorded must be recorded again (tests/doubles/record_runs.py)."""
    recording, told = recordings.load(story), STORIES[story]
    assert recording.story == story
    assert recording.flags == told.flags
    fault = {"shard": told.failing_shard, "command": told.fault} if told.fault else None
    assert (recording.fault, recording.train_image) == (fault, told.train_image or None)


def test_register_creates_then_updates_the_template(
    argo: ArgoDouble, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = submit(capsys, "--register", "--rounds", "2")
    assert code == 0
    assert out.startswith(f"created WorkflowTemplate {cluster.TEMPLATE_NAME} in namespace mnist")
    images = ("--image", "registry.example/steps:2", "--train-image", "registry.example/train:2")
    code, out, _ = submit(capsys, "--register", "--rounds", "4", *images)
    assert code == 0 and out.startswith(f"updated WorkflowTemplate {cluster.TEMPLATE_NAME}")
    template = argo.templates[cluster.TEMPLATE_NAME]
    assert template["metadata"]["resourceVersion"] == "2"
    # through Hera's models and the wire unchanged (before Hera 5.26 they dropped `backoff.cap`)
    settings = PipelineSettings(rounds=4, store=STORE, image=images[1], train_image=images[3])
    assert template["spec"] == compile_template(settings)["spec"]


def test_from_template_starts_a_run_with_the_given_settings(
    argo: ArgoDouble, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = submit(capsys, "--from-template", "--workers", "5")
    assert code == 1
    assert err.count("\n") == 1 and "mnist-pipeline" in err and "not found" in err
    assert "register it first" in err
    assert submit(capsys, "--register", "--rounds", "2")[0] == 0
    code, out, _ = submit(capsys, "--from-template", "--workers", "3", "--epochs", "3")
    assert code == 0, out
    [(_, path, body)] = [r for r in argo.requests if r[1].endswith("/submit")][-1:]
    assert path == "/api/v1/workflows/mnist/submit"
    assert body["resourceKind"] == "WorkflowTemplate"
    assert body["resourceName"] == cluster.TEMPLATE_NAME
    assert {"workers=3", "epochs=3", f"store={STORE}"} <= set(body["submitOptions"]["parameters"])
    assert body["submitOptions"]["generateName"] == "mnist-", "named as direct runs"
    assert submit(capsys, "--from-template", "--name", "mnist-nightly")[0] == 0
    assert "mnist-nightly" in argo.runs


def test_cluster_runs_need_a_bucket_and_a_url_source(
    argo: ArgoDouble, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--artifacts", ".runs"]) == 2
    assert "--artifacts gs://BUCKET" in capsys.readouterr().err
    code, _, err = submit(capsys, "--source", "data/mnist.npz")
    assert code == 2 and "URL or gs:// URI" in err
    assert argo.requests == []


@pytest.mark.parametrize(
    ("image", "why"),
    [
        ("mnist-argo-steps:0.1.0", "names no registry"),  # the default: the local build
        ("localhost/mnist-argo-steps:0.1.0", "this machine's"),  # podman's local name
        (IMAGE, None),
    ],
)
def test_an_image_no_registry_serves_is_told_apart(image: str, why: str | None) -> None:
    said = preflight.unpullable_image(image)
    assert said is None if why is None else why in (said or ""), said


@pytest.mark.parametrize("flag", ["--image", "--train-image"])
def test_a_cluster_run_warns_of_an_image_no_registry_serves(
    argo: ArgoDouble, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    """Only said (a local cluster's nodes hold them loaded); a run from the template takes its images."""
    for flags in ([], ["--register"], ["--register", "--from-template"]):
        code, _, err = submit(capsys, *flags, flag, "mnist-argo-steps:0.1.0")
        assert code == 0, err
        (warning,) = [line for line in err.splitlines() if "warning" in line]
        assert "names no registry" in warning and f"{flag} REGION-docker.pkg.dev/" in warning
    code, _, err = submit(capsys, "--from-template", flag, "mnist-argo-steps:0.1.0")
    assert code == 0 and "warning" not in err


def test_a_cluster_store_is_the_artifact_repositorys_bucket_itself(
    argo: ArgoDouble, capsys: pytest.CaptureFixture[str]
) -> None:
    for flags in ([], ["--register"], ["--from-template"]):
        code, _, err = submit(capsys, *flags, "--artifacts", "gs://mnist-models/team-a")
        assert code == 2 and err.count("\n") == 1
        assert "without a prefix" in err and "--artifacts gs://BUCKET" in err
    assert argo.requests == []
    assert submit(capsys, "--artifacts", "gs://mnist-models/")[0] == 0


@pytest.mark.parametrize(
    ("flags", "kind"),
    [
        ([], "Workflow"),
        (["--register"], "WorkflowTemplate"),
        (["--from-template", "--register"], "WorkflowTemplate"),
    ],
    ids=["run", "register", "register-and-run"],
)
def test_a_spec_the_servers_lint_refuses_is_one_line_exit_2_and_nothing_made(
    serve: Callable,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    kind: str,
) -> None:
    double, url = serve(lint_refusal=REFUSED_CONTINUE_ON)
    on_argo(monkeypatch, url)
    code, out, err = submit(capsys, *flags, "--watch")
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"submit: error: the Argo Server refuses the {kind}: {REFUSED_CONTINUE_ON}"
    ]
    if kind == "Workflow":
        assert err.strip() in docs.ARGO.read_text(), "docs/argo.md shows the refusal"
    assert [path for _, path, _ in double.requests] == [
        f"/api/v1/{'workflows' if kind == 'Workflow' else 'workflow-templates'}/mnist/lint"
    ]
    assert double.runs == {} and double.templates == {}


def test_argo_only_flags_without_a_server(capsys: pytest.CaptureFixture[str]) -> None:
    for flag in ("--watch", "--register", "--from-template"):
        assert main([flag]) == 2
        assert "need an Argo Server: set ARGO_SERVER" in capsys.readouterr().err
