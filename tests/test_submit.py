"""submit.py against a test double of the Argo Server (tests/doubles/argo_server.py: no cluster
runs in this suite).

Every request the client sends is checked against the server's OpenAPI by the double; a test fails if
any was rejected. A watched run replays a real run recorded on a cluster (tests/doubles/recordings/),
so what the watch is tested on is what Argo's controller said.
"""

from __future__ import annotations

import datetime
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.doubles import recordings
from tests.doubles.argo_server import REFUSED_CONTINUE_ON, ArgoDouble
from tests.support import docs
from tests.support.argo_schema import first_error, workflow_validator
from tests.support.project import ROOT, free_port
from tests.support.stories import FIRST_TRY_LINE, MISSING_IMAGE, OOM_LAST_LINE, STORIES
from tests.support.watch_output import (
    PROGRESS,
    check_failed_trainer,
    check_retried_trainer,
    lines_of,
    phase,
    phases_of,
    progress_of,
    retries_in,
    steps_in,
)
from workflows.pipeline import resources as cluster
from workflows.server.client import ArgoError, from_environment, get_workflow, stop_workflow
from workflows.server.watch import watch
from workflows.submit import main

TOKEN = "Bearer good-token"
STORE = "gs://mnist-models"
IMAGE = "us-central1-docker.pkg.dev/project/mnist/mnist-argo-steps:1"
TRAIN_IMAGE = "registry.example/mnist-argo-train:1"
ARGO_VARIABLES = (
    "ARGO_SERVER",
    "ARGO_TOKEN",
    "ARGO_NAMESPACE",
    "ARGO_INSECURE_SKIP_VERIFY",
    "ARGO_BASE_HREF",
    "ARGO_SECURE",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in (*ARGO_VARIABLES, "ARTIFACTS", "MNIST_SOURCE", "WORKER_NUMBER"):
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture
def serve() -> Iterator[Callable[..., tuple[ArgoDouble, str]]]:
    """Start doubles of the Argo Server; each is checked for rejected requests and stopped after."""
    started: list[ArgoDouble] = []

    def start(**options: object) -> tuple[ArgoDouble, str]:
        double = ArgoDouble(**options)
        url = double.start()
        started.append(double)
        return double, url

    yield start
    for double in started:
        double.stop()
    for double in started:
        assert double.rejected == [], "the client sent requests the Argo Server API does not allow"


def on_argo(
    monkeypatch: pytest.MonkeyPatch, url: str, token: str | None = TOKEN, **variables: str
) -> None:
    monkeypatch.setenv("ARGO_SERVER", url)
    if token is not None:
        monkeypatch.setenv("ARGO_TOKEN", token)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)


def submit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(
        [
            "--artifacts",
            STORE,
            "--image",
            IMAGE,
            "--train-image",
            TRAIN_IMAGE,
            "--poll-seconds",
            "0",
            *args,
        ]
    )
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def argo(serve: Callable, monkeypatch: pytest.MonkeyPatch) -> ArgoDouble:
    """A double of the Argo Server, the one submit.py is told to use."""
    double, url = serve()
    on_argo(monkeypatch, url)
    return double


@pytest.fixture
def watched_run(
    serve: Callable, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., tuple[int, str, str]]:
    """Submit a run with a story's flags (tests/support/stories.py) and watch it on a double of the
    Argo Server that replays the real run recorded for that story."""

    def run(story: str) -> tuple[int, str, str]:
        _, url = serve(story=story)
        on_argo(monkeypatch, url)
        return submit(capsys, *recordings.load(story).flags, "--watch")

    return run


def trainer(shard: str, train_round: int = 1) -> str:
    return f"train-round-{train_round}({shard}:{shard})"


def test_submit_and_watch_a_run_to_success(serve: Callable) -> None:
    recording = recordings.load("succeed")
    double, url = serve()
    environment = {
        **os.environ,
        "ARGO_SERVER": url,
        "ARGO_TOKEN": TOKEN,
        "ARTIFACTS": STORE,
    }
    command = [sys.executable, str(ROOT / "workflows" / "submit.py")]
    arguments = [*recording.flags, "--image", IMAGE, "--train-image", TRAIN_IMAGE, "--watch"]
    result = subprocess.run(
        [*command, *arguments, "--poll-seconds", "0"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
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
    lines = result.stdout.splitlines()
    assert lines[0] == f"submitted {name} to {url} (namespace {cluster.NAMESPACE})"
    assert lines[1].strip() == f"{url}/workflows/{cluster.NAMESPACE}/{name}"
    # split, init, 2 rounds of 3 trainers and an aggregate, evaluate, publish
    steps = recording.steps()
    assert len(steps) == 1 + 1 + 2 * (3 + 1) + 1 + 1
    assert sorted(steps_in(result.stdout)) == sorted(steps)
    # each step's one try: a line for every state the controller gave it, in order, with its message
    for step in steps:
        [one_try] = recording.tries(step)
        states = recording.states(one_try)
        assert (states[0][0], states[-1][0]) == ("Pending", "Succeeded"), states
        printed = [line for line in lines_of(result.stdout, step) if PROGRESS not in line]
        assert [phase(line) for line in printed] == [state[0] for state in states], step
        for line, (_, message) in zip(printed, states, strict=True):
            assert line.endswith(f"  {message}" if message else "s"), line  # else: its duration
    trainer_waits = [
        line for line in lines_of(result.stdout, trainer("2")) if "Unschedulable" in line
    ]
    assert trainer_waits, "a trainer waiting for the node's CPU says so"
    seconds = (
        recordings.moment(recording.final["finishedAt"])
        - recordings.moment(recording.final["startedAt"])
    ).total_seconds()
    assert f"\nrun {name} Succeeded in {seconds:.0f}s\n" in result.stdout
    assert f"test accuracy: {recording.output('evaluate', 'accuracy')}" in result.stdout
    # publish's outcome is its output parameters, not its exit code: the run Succeeded
    reason = recording.output("publish", "reason")
    [said] = [line for line in result.stdout.splitlines() if "served" in line]
    assert said.startswith(f"not served: {reason}; to serve it anyway: "), said
    assert said.endswith(f"-m steps.serve {name} --store {STORE}")
    assert result.stderr == ""


def test_a_failed_run_names_the_failed_node(watched_run: Callable) -> None:
    """A trainer OOM-killed on every try: each wait says why, as the controller words it (operator.go,
    the container's name first, then its log's last line: the shell's word for the kill) and for how
    long (humanize.Duration's words, doubling), then the failure in one line."""
    code, out, err = watched_run("fail")
    killed = f"main: OOMKilled (exit code 137): {OOM_LAST_LINE}"
    backoffs = ["15 seconds", "30 seconds"]
    check_failed_trainer(code, out, err, trainer("1"), killed, backoffs, every=True)


def test_a_run_goes_ahead_without_a_failed_trainer_when_min_workers_allow(
    watched_run: Callable,
) -> None:
    recording = recordings.load("min-workers")
    code, out, err = watched_run("min-workers")
    assert code == 0, out + err
    for train_round in (1, 2):
        assert phases_of(out, trainer("1", train_round))[-1] == "Failed"
        assert retries_in(lines_of(out, trainer("1", train_round))[-1]) == 2
        assert phases_of(out, trainer("0", train_round))[-1] == "Succeeded"
        assert phases_of(out, f"aggregate-round-{train_round}")[-1] == "Succeeded"
    assert f"test accuracy: {recording.output('evaluate', 'accuracy')}" in out
    assert err == ""


def test_a_retried_trainer_is_watched_as_docs_argo_md_shows_it(watched_run: Callable) -> None:
    """The retry story: the failed try's reason and its backoff, then the retry. docs/argo.md shows
    what the watch printed for it: each of its lines is a line of the recording's replay, its duration
    aside (the replay's clock may fall a second either way)."""
    code, out, _ = watched_run("retry")
    failed = f"main: Error (exit code 1): {FIRST_TRY_LINE}"
    check_retried_trainer(code, out, trainer("0"), failed, "15 seconds", every=True)
    section = docs.section(docs.ARGO, "Submit a run and follow it")
    [example] = [body for _, body in docs.code_blocks(section) if "mnist-x7k2p" in body]
    steps = [line for line in example.splitlines() if line.startswith("  ")]
    steps = [line for line in steps if line.split()[0] != "..." and "https://" not in line]
    assert len(steps) >= 15
    printed = {without_duration(line) for line in out.splitlines()}
    for line in steps:
        assert without_duration(line) in printed, line
    name = out.split()[1]
    for line in example.splitlines():
        if line.startswith(("run ", "test accuracy: ")):
            assert line.replace("mnist-x7k2p", name) in out.splitlines(), line


def without_duration(line: str) -> str:
    return re.sub(r"\s+\d+s(?=\s|$)", "", line)


def watch_polls(double: ArgoDouble, url: str) -> list[tuple[int, str]]:
    """Watch the double's only run with watch() itself: (poll number, line) for every line echoed."""
    [name] = double.runs
    server = from_environment({"ARGO_SERVER": url, "ARGO_TOKEN": TOKEN})
    polls, lines = [0], []

    def next_poll(_: float) -> None:
        polls[0] += 1

    watch(server, name, echo=lambda line: lines.append((polls[0], line)), sleep=next_poll)
    return lines


def reported(recording: recordings.Recording, step: str) -> list[str]:
    """The progress values each of the step's tries showed while it ran, try after try."""
    values = []
    for name in recording.tries(step):
        assert len(recording.reports(name)) >= 2, f"{name}: the recording has too few reports"
        values += recording.reports(name)
    return values


def test_watch_prints_each_trainers_progress_once_per_change(
    serve: Callable, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trainers report batches done (ARGO_PROGRESS_FILE); in the recording the controller takes a
    report about once a minute (Argo's default tick) and the server returns it as each node's
    `progress`. Polling twice as fast as the recording changes, the watch still prints each value
    once, at most one line per step per poll, and none for steps that report nothing. A Retry node's
    own progress sums all its tries' (progress/updater.go, sumProgress); the watch shows the running
    try's own, from where that try started."""
    recording = recordings.load("retry")
    double, url = serve(story="retry", reads_per_tick=2)
    on_argo(monkeypatch, url)
    assert submit(capsys, *recording.flags)[0] == 0
    lines = watch_polls(double, url)
    out = "\n".join(line for _, line in lines)
    trainers = [step for step in recording.steps() if step.startswith("train-")]
    assert trainers == [trainer("0")]
    for step in trainers:
        assert progress_of(out, step) == reported(recording, step), step
    for step in set(recording.steps()) - set(trainers):
        assert progress_of(out, step) == [], step
    steps_per_poll = [(poll, line.split()[0]) for poll, line in lines]
    assert len(steps_per_poll) == len(set(steps_per_poll)), "two lines for one step in one poll"
    summed = {node.get("progress") for node in recording.nodes(trainer("0"))}
    second = recording.tries(trainer("0"))[1]
    assert summed.isdisjoint(recording.reports(second)), "the recording cannot tell them apart"


@pytest.mark.parametrize("story", STORIES)
def test_each_story_is_recorded_as_it_stands(story: str) -> None:
    """A story changed since its run was recorded must be recorded again (tests/doubles/record_runs.py)."""
    recording, told = recordings.load(story), STORIES[story]
    assert recording.story == story
    assert recording.flags == told.flags
    fault = {"shard": told.failing_shard, "command": told.fault} if told.fault else None
    assert (recording.fault, recording.train_image) == (fault, told.train_image or None)


def test_the_double_replays_a_recorded_run_under_the_created_name(
    serve: Callable, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each status of the recording in turn, one every `reads_per_tick` reads, then the last again;
    the created run's name and metadata; a stop the recorded run never had is an error, not an
    answer the double makes up."""
    recording = recordings.load("fail")
    double, url = serve(story="fail", reads_per_tick=2)
    on_argo(monkeypatch, url)
    assert submit(capsys, *recording.flags, "--name", "mnist-replayed")[0] == 0
    server = from_environment({"ARGO_SERVER": url, "ARGO_TOKEN": TOKEN})
    answers = [
        get_workflow(server, "mnist-replayed") for _ in range(2 * len(recording.statuses) + 2)
    ]

    def phases(status: dict, name: str) -> dict[str, str]:
        nodes = status["nodes"].values()
        return {node["name"].replace(name, "RUN"): node.get("phase", "") for node in nodes}

    expected = [phases(status, recording.run) for status in recording.statuses]
    served = [phases(answer["status"], "mnist-replayed") for answer in answers]
    assert served == [each for each in expected for _ in (1, 2)] + [expected[-1]] * 2
    assert recording.run not in json.dumps(answers)
    assert {answer["metadata"]["name"] for answer in answers} == {"mnist-replayed"}
    assert (
        answers[0]["metadata"]["labels"]
        == double.runs["mnist-replayed"].workflow["metadata"]["labels"]
    )
    with pytest.raises(ArgoError, match="was not stopped"):
        stop_workflow(server, "mnist-replayed", "stopped by the test")


def test_register_creates_then_updates_the_template(
    argo: ArgoDouble, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = submit(capsys, "--register", "--rounds", "2")
    assert code == 0
    assert out.startswith(f"created WorkflowTemplate {cluster.TEMPLATE_NAME} in namespace mnist")
    code, out, _ = submit(
        capsys,
        "--register",
        "--rounds",
        "4",
        "--image",
        "registry.example/steps:2",
        "--train-image",
        "registry.example/train:2",
    )
    assert code == 0 and out.startswith(f"updated WorkflowTemplate {cluster.TEMPLATE_NAME}")
    read = ("GET", f"/api/v1/workflow-templates/mnist/{cluster.TEMPLATE_NAME}")
    linted = ("POST", "/api/v1/workflow-templates/mnist/lint")
    # the server's lint, then as Hera's WorkflowTemplate.update(), then a read until the server's
    # cache shows the write
    assert [(m, p) for m, p, _ in argo.requests] == [
        linted,
        read,
        ("POST", "/api/v1/workflow-templates/mnist"),
        read,
        linted,
        read,
        ("PUT", f"/api/v1/workflow-templates/mnist/{cluster.TEMPLATE_NAME}"),
        read,
    ]
    template = argo.templates[cluster.TEMPLATE_NAME]
    assert template["metadata"]["resourceVersion"] == "2"
    stored = {k: v for k, v in template.items() if k != "metadata"}
    stored["metadata"] = {"name": cluster.TEMPLATE_NAME}
    assert first_error(workflow_validator("WorkflowTemplate"), stored) is None
    trains = [t for t in template["spec"]["templates"][-1]["dag"]["tasks"] if "withParam" in t]
    assert len(trains) == 4
    images = {
        t["name"]: t["container"]["image"]
        for t in template["spec"]["templates"]
        if "container" in t
    }
    assert images.pop("train") == "registry.example/train:2"
    assert set(images.values()) == {"registry.example/steps:2"}
    form = {p["name"] for p in template["spec"]["arguments"]["parameters"]}
    assert {"workers", "epochs", "batch", "store"} <= form


def test_from_template_starts_a_run_with_the_given_settings(
    argo: ArgoDouble, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = submit(capsys, "--from-template", "--workers", "5")
    assert code == 1
    assert err.count("\n") == 1 and "mnist-pipeline" in err and "not found" in err
    assert "register it first" in err
    assert submit(capsys, "--register", "--rounds", "2")[0] == 0
    code, out, _ = submit(capsys, "--from-template", "--workers", "3", "--epochs", "3", "--watch")
    assert code == 0, out
    [(_, path, body)] = [r for r in argo.requests if r[1].endswith("/submit")][-1:]
    assert path == "/api/v1/workflows/mnist/submit"
    assert body["resourceKind"] == "WorkflowTemplate"
    assert body["resourceName"] == cluster.TEMPLATE_NAME
    assert {"workers=3", "epochs=3", f"store={STORE}"} <= set(body["submitOptions"]["parameters"])
    # the run the double replays: the succeed story's, of 3 workers and 2 rounds
    assert phases_of(out, "train-round-2(2:2)")[-1] == "Succeeded"
    accuracy = recordings.load("succeed").output("evaluate", "accuracy")
    assert f"test accuracy: {accuracy}" in out


def test_runs_from_the_template_are_named_like_direct_runs(
    argo: ArgoDouble, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server names a template's run `<template>-xxxxx` unless submitOptions.generateName is
    sent (a field of SubmitOpts in the server's OpenAPI, checked by the double)."""
    assert submit(capsys, "--register")[0] == 0
    code, out, _ = submit(capsys)
    assert code == 0
    [direct] = argo.runs
    code, out, _ = submit(capsys, "--from-template")
    assert code == 0
    [from_template] = set(argo.runs) - {direct}
    prefix = direct[:-5]
    assert prefix == "mnist-" and from_template.startswith(prefix), from_template
    assert len(from_template) == len(direct)
    assert out.startswith(f"submitted {from_template} ")
    code, out, _ = submit(capsys, "--from-template", "--name", "mnist-nightly")
    assert code == 0 and "mnist-nightly" in argo.runs


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, like a port-forwarded Argo Server's."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "argo-server")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .sign(key, hashes.SHA256())
    )
    folder = tmp_path_factory.mktemp("tls")
    (folder / "cert.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return folder / "cert.pem", folder / "key.pem"


def test_tls_failure_says_how_to_accept_the_certificate(
    serve: Callable,
    certificate: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    double, url = serve(tls=certificate)
    assert url.startswith("https://")
    on_argo(monkeypatch, url.removeprefix("https://"))  # host:port, as Argo's CLI takes it
    code, _, err = submit(capsys)
    assert code == 1 and err.count("\n") == 1
    assert "TLS" in err and "ARGO_INSECURE_SKIP_VERIFY=true" in err
    assert double.requests == []
    monkeypatch.setenv("ARGO_INSECURE_SKIP_VERIFY", "true")
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        code, out, err = submit(capsys)
    assert code == 0 and out.startswith("submitted mnist-")
    assert len(double.runs) == 1
    assert err == "" and [w.message for w in warned] == []  # asked for: no warning per request


def test_plain_http_server_spoken_to_with_tls(
    serve: Callable, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, url = serve()
    on_argo(monkeypatch, url.replace("http://", "https://"))
    code, _, err = submit(capsys)
    assert code == 1 and err.count("\n") == 1
    assert "TLS failed" in err and "http://" in err


@pytest.mark.parametrize(
    ("token", "namespace", "expected"),
    [
        (None, "mnist", ["401", "set ARGO_TOKEN", "kubectl -n mnist create token mnist-submitter"]),
        ("Bearer stale", "mnist", ["401", "ARGO_TOKEN is not accepted"]),
        ("Bearer read-only-token", "mnist", ["403", "ARGO_TOKEN", "namespace 'mnist'"]),
        ("good-token", "nowhere", ["403", "namespace 'nowhere'", "ARGO_NAMESPACE"]),
    ],
    ids=["no-token", "bad-token", "forbidden", "no-namespace"],
)
def test_server_refusals_are_one_clear_line(
    token: str | None,
    namespace: str,
    expected: list[str],
    serve: Callable,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    double, url = serve()
    on_argo(monkeypatch, url, token=token, ARGO_NAMESPACE=namespace)
    code, out, err = submit(capsys, "--watch")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("submit: error: ")
    for words in expected:
        assert words in err
    assert double.runs == {}


def test_unreachable_server(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    on_argo(monkeypatch, f"http://127.0.0.1:{free_port()}")
    code, _, err = submit(capsys)
    assert code == 1 and err.count("\n") == 1
    assert "cannot reach the Argo Server" in err and "port-forward svc/argo-server 2746:2746" in err


def test_a_name_already_taken(argo: ArgoDouble, capsys: pytest.CaptureFixture[str]) -> None:
    assert submit(capsys, "--name", "mnist-nightly")[0] == 0
    assert "mnist-nightly" in argo.runs
    code, _, err = submit(capsys, "--name", "mnist-nightly")
    assert code == 1 and err.count("\n") == 1
    assert "already taken" in err and "mnist-nightly" in err and "--name" in err


def test_base_href_prefixes_api_and_ui_link(
    serve: Callable, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    double, url = serve(base_href="/argo/")
    on_argo(monkeypatch, url, ARGO_BASE_HREF="/argo/", ARGO_NAMESPACE="mnist")
    code, out, _ = submit(capsys)
    assert code == 0
    name = next(iter(double.runs))
    assert f"{url}/argo/workflows/mnist/{name}" in out


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
        ("someone/mnist-argo-steps:1", "names no registry"),
        ("localhost/mnist-argo-steps:0.1.0", "this machine's"),  # podman's local name
        ("localhost:5000/mnist-argo-steps:1", "this machine's"),
    ],
)
@pytest.mark.parametrize("flag", ["--image", "--train-image"])
def test_a_cluster_run_warns_of_an_image_no_registry_serves(
    argo: ArgoDouble, capsys: pytest.CaptureFixture[str], image: str, why: str, flag: str
) -> None:
    """A local cluster runs the images loaded into its nodes under their local names (the local
    cluster's containerd, kind load, k3d image import), so such a name is not refused; on GKE it is a
    mistake, so it is said in one line, with the pushed image's form, before the run is sent. A run
    from the registered template takes the template's images: none is asked for."""
    for flags in ([], ["--register"], ["--register", "--from-template"]):
        code, _, err = submit(capsys, *flags, flag, image)
        assert code == 0, err
        (warning,) = [line for line in err.splitlines() if "warning" in line]
        assert why in warning and f"{flag} REGION-docker.pkg.dev/" in warning
    code, _, err = submit(capsys, "--from-template", flag, image)
    assert code == 0 and "warning" not in err
    assert argo.requests


def test_a_cluster_store_is_the_artifact_repositorys_bucket_itself(
    argo: ArgoDouble, capsys: pytest.CaptureFixture[str]
) -> None:
    """Keyed artifacts go to the repository's bucket with their key as written (workflow_types.go:
    ArtifactLocation.Relocate): under gs://bucket/prefix the checkpoints and the published model
    landed apart from the run's files, out of the lifecycle rule's and the page's reach."""
    for flags in ([], ["--register"], ["--from-template"]):
        code, _, err = submit(capsys, *flags, "--artifacts", "gs://mnist-models/team-a")
        assert code == 2 and err.count("\n") == 1
        assert "without a prefix" in err and "--artifacts gs://BUCKET" in err
    assert argo.requests == []
    assert submit(capsys, "--artifacts", "gs://mnist-models/")[0] == 0


def test_the_submit_form_cannot_move_the_store(
    argo: ArgoDouble, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store is fixed when registering, an enum of its one value: the server refuses a run with
    another store (validate.go: validateArguments), as the artifacts' bucket cannot follow it."""
    assert submit(capsys, "--register")[0] == 0
    template = argo.templates[cluster.TEMPLATE_NAME]
    [store] = [p for p in template["spec"]["arguments"]["parameters"] if p["name"] == "store"]
    assert store["enum"] == [STORE] and store["value"] == STORE


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
    """The Argo Server's own validation judges the spec before anything is created or registered."""
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


def test_the_double_rejects_what_the_api_does_not_allow(serve: Callable) -> None:
    double, url = serve()

    def send(method: str, path: str, body: object = None) -> int:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            url + path, data=data, method=method, headers={"Authorization": TOKEN}
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return answer.status
        except urllib.error.HTTPError as error:
            return error.code

    workflow = {"metadata": {"generateName": "x-"}, "spec": {"entrypoint": "main"}}
    assert send("POST", "/api/v1/workflows/mnist", {"workflow": {"spec": "nope"}}) == 400
    assert send("POST", "/api/v1/workflows/mnist", {"workflow": workflow, "wokflow": {}}) == 400
    assert send("POST", "/api/v1/workflows/mnist", {"workflow": {"spec": {}}}) == 400
    assert send("PATCH", "/api/v1/workflows/mnist/x") == 400
    assert send("GET", "/api/v1/workflows/mnist/x?watch=true") == 400
    assert send("GET", "/api/v2/workflows/mnist") == 400
    assert send("POST", "/api/v1/workflows/mnist") == 400
    assert len(double.rejected) == 7
    double.rejected.clear()  # those were this test's own doing
    assert send("GET", "/api/v1/workflows/mnist/absent") == 404


def test_a_server_that_is_not_argo(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any web page answering 200 with HTML, as a wrong port-forward would."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"<html>hello</html>")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        on_argo(monkeypatch, f"http://127.0.0.1:{server.server_address[1]}")
        code, _, err = submit(capsys)
    finally:
        server.shutdown()
        server.server_close()
    assert code == 1 and err.count("\n") == 1
    assert "did not answer with JSON" in err


# --- register, then submit, against the server's informer cache (server/apiserver/argoserver.go) ---


@pytest.fixture
def quick_cache_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's waits for the server's cache, shortened: the double's cache trails by reads."""
    monkeypatch.setattr("workflows.server.client.CACHE_WAITS", (0.01,) * 6)


@pytest.fixture
def lagging(
    serve: Callable, monkeypatch: pytest.MonkeyPatch, quick_cache_waits: None
) -> Callable[[int], ArgoDouble]:
    def start(lag: int) -> ArgoDouble:
        double, url = serve(informer_lag=lag)
        on_argo(monkeypatch, url)
        return double

    return start


def test_registering_again_right_after_a_create_updates_it(
    lagging: Callable, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cache has not seen the create yet: the read says "not found", the create is refused
    because the name exists. That is the cache being behind, not a taken name."""
    argo = lagging(3)
    assert submit(capsys, "--register", "--rounds", "1")[0] == 0
    argo.stale[cluster.TEMPLATE_NAME] = [None, 2]  # the next two reads still miss it
    code, out, err = submit(capsys, "--register", "--rounds", "2")
    assert code == 0, err
    assert out.startswith(f"updated WorkflowTemplate {cluster.TEMPLATE_NAME}")
    assert argo.templates[cluster.TEMPLATE_NAME]["metadata"]["resourceVersion"] == "2"


def test_an_update_from_a_stale_read_is_tried_again(
    lagging: Callable, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cache still shows resourceVersion 1 after the update to 2: the next update with 1 is a
    Conflict (409), which is read again and retried, not reported as a name already taken."""
    argo = lagging(2)
    assert submit(capsys, "--register", "--rounds", "1")[0] == 0
    assert submit(capsys, "--register", "--rounds", "2")[0] == 0
    code, _, err = submit(capsys, "--register", "--rounds", "3")
    assert code == 0, err
    template = argo.templates[cluster.TEMPLATE_NAME]
    assert template["metadata"]["resourceVersion"] == "3"
    assert sum("withParam" in t for t in template["spec"]["templates"][-1]["dag"]["tasks"]) == 3


def test_a_conflict_that_persists_is_reported_as_one(
    lagging: Callable, capsys: pytest.CaptureFixture[str]
) -> None:
    argo = lagging(1)
    assert submit(capsys, "--register", "--rounds", "1")[0] == 0
    assert submit(capsys, "--register", "--rounds", "2")[0] == 0
    argo.stale[cluster.TEMPLATE_NAME][1] = 1000  # someone else's changes keep ours stale
    code, _, err = submit(capsys, "--register", "--rounds", "3")
    assert code == 1 and err.count("\n") == 1
    assert "someone else changed it" in err and "409" in err and "already taken" not in err


def test_a_run_from_the_template_right_after_registering_finds_it(
    lagging: Callable, capsys: pytest.CaptureFixture[str]
) -> None:
    argo = lagging(2)
    assert submit(capsys, "--register", "--rounds", "1")[0] == 0
    argo.stale[cluster.TEMPLATE_NAME] = [None, 2]
    code, out, err = submit(capsys, "--from-template", "--workers", "2")
    assert code == 0, err
    assert out.startswith("submitted mnist-")


def test_register_and_run_in_one_call_runs_the_spec_just_registered(
    lagging: Callable, capsys: pytest.CaptureFixture[str]
) -> None:
    """Argo's controller also reads templates from a cache, which may still hold the previous spec:
    the run carries the registered spec itself, labelled as the template's run."""
    argo = lagging(2)
    assert submit(capsys, "--register", "--rounds", "1")[0] == 0
    argo.stale[cluster.TEMPLATE_NAME] = [argo.templates[cluster.TEMPLATE_NAME], 1000]
    code, _, err = submit(capsys, "--register", "--from-template", "--rounds", "3")
    assert code == 0, err
    [run] = argo.runs.values()
    assert run.workflow["spec"] == argo.templates[cluster.TEMPLATE_NAME]["spec"]
    labels = run.workflow["metadata"]["labels"]
    assert labels["workflows.argoproj.io/workflow-template"] == cluster.TEMPLATE_NAME


def test_a_step_whose_image_cannot_be_pulled_stops_the_watched_run(
    serve: Callable, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Argo leaves such a pod Pending until the kubelet ends it at its activeDeadlineSeconds, then
    retries it (the train step's hour, three times); the watch stops the run instead, as the Argo UI's
    Stop does, and the controller ends every try it had (exec_control.go:52) and fails the run."""
    monkeypatch.setattr("workflows.server.watch.STUCK_SECONDS", 0.3)
    recording = recordings.load("cannot-pull")
    double, url = serve(story="cannot-pull")
    on_argo(monkeypatch, url)
    code, out, err = submit(capsys, *recording.flags, "--watch")
    assert code == 1
    [name] = double.runs
    stuck = trainer("0")  # the other trainer waits for the node's CPU, which the stuck pod holds
    pending = [line for line in lines_of(out, stuck) if phase(line) == "Pending"]
    assert f'ImagePullBackOff: Back-off pulling image "{MISSING_IMAGE}"' in pending[-1]
    [stopping] = [line for line in out.splitlines() if line.startswith("stopping ")]
    assert stopping.startswith(f"stopping {name}: {stuck} cannot start: ImagePullBackOff: ")
    [(path, body)] = [(r[1], r[2]) for r in double.requests if r[1].endswith("/stop")]
    assert path == f"/api/v1/workflows/mnist/{name}/stop"
    assert stopping.startswith(f"stopping {name}: {body['message']}")
    shutdown = "workflow shutdown with strategy:  Stop"
    assert err.splitlines() == [
        "submit: the run was stopped (Stopped with strategy 'Stop'); nothing after it ran"
    ]
    for step in (trainer("0"), trainer("1")):
        last = lines_of(out, step)[-1]
        assert phase(last) == "Failed" and last.endswith(f"  {shutdown}"), last
    assert f"\nrun {name} Failed in " in out
    assert "publish" not in out and "test accuracy" not in out
