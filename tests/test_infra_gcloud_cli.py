"""Every gcloud command line of infra/gke (and of docs/gke.md and the README's GKE brief) parsed by the real
Google Cloud CLI: the scripts run against the stand-in gcloud (tests/doubles/cloud_tools.py), which records
each argv, once per path they can take; each distinct argv is replayed through the real `gcloud`, where an
argument error exits 2. Nothing leaves the machine: with no credentials a well-formed command stops with "You
do not currently have an active account selected"; every API is pointed at a closed port of 127.0.0.1, and,
where `unshare` can, gcloud runs in a network namespace with no interface up."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.doubles.cloud_tools import (
    BUCKET_POLICY,
    IAP_POLICY,
    PROJECT_POLICY,
    ROOT,
    Sandbox,
    make_sandbox,
    system_bin,
)
from tests.support import docs

GCLOUD = shutil.which("gcloud")
pytestmark = [
    pytest.mark.skipif(
        GCLOUD is None, reason="the Google Cloud CLI (gcloud) is not installed on this machine"
    ),
    pytest.mark.slow,  # the real gcloud parses every command line: seconds each
]

# What gcloud says where a well-formed command would first need credentials to call an API.
NO_CREDENTIALS = "You do not currently have an active account selected"
# `gcloud auth login` parses, prints its sign-in link, then waits for a code (stdin is empty here).
SIGN_IN_PROMPT = "enter the verification code provided in your browser"
# The APIs each command group may call (api_endpoint_overrides names): all point at a closed local port.
# A group missing here fails the test, so a new one gets its endpoint redirected before it is replayed.
APIS_BY_GROUP = {
    "artifacts": ["artifactregistry"],
    "auth": [],
    "billing": ["cloudbilling"],
    "builds": ["cloudbuild", "storage", "logging"],
    "compute": ["compute"],
    "config": [],
    "container": ["container", "compute"],
    "iam": ["iam", "iamcredentials"],
    "iap": ["iap"],
    "projects": ["cloudresourcemanager"],
    "services": ["serviceusage"],
    "storage": ["storage"],
}
# Each gcloud run takes about 0.5 s of CPU but 2 to 5 s on a loaded 2-core machine: run several at once.
PARALLEL = 6

# The scripts' paths: (script, settings) — together they run every gcloud line of up.sh and down.sh.
PUBLIC = {"PAGE_DOMAIN": "mnist.example.com", "PAGE_IAP_MEMBERS": "user:a@example.com"}
SCENARIOS: list[tuple[str, dict[str, str]]] = [
    ("up.sh", {}),
    ("up.sh", {"AUTHORIZED_NETWORKS": "203.0.113.7/32,198.51.100.0/24", **PUBLIC}),
    (
        "up.sh",
        {
            "FAKE_EXISTING": "cluster no-workload-identity open-control-plane bucket build-bucket "
            "account registry address",
            "FAKE_CLUSTER_ZONE": "us-central1-a",
        },
    ),
    ("up.sh", {"FAKE_EXISTING": "cluster", "FAKE_CLUSTER_STATUS": "ERROR"}),
    ("up.sh", {"BUILDER": "docker", "FORCE_BUILD": "1"}),
    (
        "down.sh",
        {
            "FAKE_EXISTING": "cluster bucket build-bucket account registry address",
            "FAKE_CLUSTER_ZONE": "us-central1-a",
            "FAKE_POLICY": BUCKET_POLICY,
            "FAKE_PROJECT_POLICY": PROJECT_POLICY,
            "FAKE_IAP_POLICY": IAP_POLICY,
            **PUBLIC,
        },
    ),
    ("down.sh", {"FAKE_EXISTING": "bucket", "DELETE_BUCKET": "yes"}),
]


def closed_port() -> int:
    """A port of 127.0.0.1 that nothing listens on (bound once, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def network_jail() -> list[str]:
    """`unshare --net --` where this user may make a network namespace, else nothing."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return []
    probe = subprocess.run([unshare, "--net", "--", "true"], capture_output=True)
    return [unshare, "--net", "--"] if probe.returncode == 0 else []


@pytest.fixture(scope="module")
def gcloud_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A throwaway gcloud configuration: no account, no prompts, no metadata server, no update check, no
    usage reports, no log files, and every API of APIS_BY_GROUP at a closed local port."""
    home = tmp_path_factory.mktemp("gcloud-home")
    config = home / "config"
    (config / "configurations").mkdir(parents=True)
    (config / "active_config").write_text("default")
    endpoint = f"http://127.0.0.1:{closed_port()}/"
    apis = sorted({api for group in APIS_BY_GROUP.values() for api in group})
    (config / "configurations" / "config_default").write_text(
        "\n".join(
            [
                "[core]",
                "disable_prompts = true",
                "check_gce_metadata = false",
                "disable_usage_reporting = true",
                "disable_file_logging = true",
                "[component_manager]",
                "disable_update_check = true",
                "[api_endpoint_overrides]",
                *(f"{api} = {endpoint}" for api in apis),
                "",
            ]
        )
    )
    keep = ("PATH", "LANG", "LC_ALL", "TZ")
    return {
        **{name: os.environ[name] for name in keep if name in os.environ},
        "HOME": str(home),
        "CLOUDSDK_CONFIG": str(config),
    }


def gcloud_verdict(argv: list[str], cwd: Path, env: dict[str, str], jail: list[str]) -> str | None:
    """None when the real gcloud accepts the command line, else why not."""
    assert GCLOUD is not None
    result = subprocess.run(
        [*jail, GCLOUD, *argv],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    shown = f"gcloud {shlex.join(argv)}\n{result.stderr.strip()}"
    if result.returncode == 2:
        return f"argument error (exit 2): {shown}"
    said = result.stdout + result.stderr
    if result.returncode == 0 or NO_CREDENTIALS in said or SIGN_IN_PROMPT in said:
        return None
    return f"stopped before any request (exit {result.returncode}): {shown}"


def replay(
    argvs: Iterable[list[str]], cwd: Path, env: dict[str, str]
) -> list[tuple[list[str], str | None]]:
    """Each argv through the real gcloud, several at once; the verdicts in order."""
    argvs = list(argvs)
    jail = network_jail()
    with ThreadPoolExecutor(PARALLEL) as pool:
        verdicts = list(pool.map(lambda argv: gcloud_verdict(argv, cwd, env, jail), argvs))
    return list(zip(argvs, verdicts, strict=True))


def command_group(argv: list[str]) -> str:
    return next(word for word in argv if not word.startswith("-"))


def distinct(argvs: Iterable[list[str]], temporary: str) -> list[list[str]]:
    """The argvs without repeats; a temporary file (under `temporary`) counts by its content, not its name."""

    def key(argument: str) -> str:
        kept = Path(f"{argument}.kept")
        if argument.startswith(temporary) and kept.exists():
            return "file:" + kept.read_text()
        return argument

    seen: dict[tuple[str, ...], list[str]] = {}
    for argv in argvs:
        seen.setdefault(tuple(map(key, argv)), argv)
    return list(seen.values())


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Sandbox, list[list[str]]]:
    """Every distinct gcloud argv of up.sh and down.sh over SCENARIOS, with their temporary files restored."""
    base = tmp_path_factory.mktemp("scripts")
    sandbox = make_sandbox(base, system_bin(base / "system"))
    for script, settings in SCENARIOS:
        sandbox.run(script, **settings)
    argvs = distinct(sandbox.gcloud_argvs(), sandbox.env["TMPDIR"])
    for argv in argvs:
        for argument in argv:
            kept = Path(f"{argument}.kept")
            if argument.startswith(sandbox.env["TMPDIR"]) and kept.exists():
                shutil.copy(kept, argument)
    return sandbox, argvs


def test_the_scripts_every_gcloud_line_parses(
    recorded: tuple[Sandbox, list[list[str]]], gcloud_env: dict[str, str]
) -> None:
    sandbox, argvs = recorded
    # The paths above reach every kind of gcloud call the scripts make.
    joined = [shlex.join(argv) for argv in argvs]
    for expected in (
        "services enable",
        "compute zones list",
        "container clusters create",
        "container clusters update",
        "container clusters get-credentials",
        "container node-pools create",
        "container node-pools update",
        "container clusters delete",
        "compute addresses create",
        "compute addresses delete",
        "projects add-iam-policy-binding",
        "projects get-iam-policy",
        "projects remove-iam-policy-binding",
        "builds submit",
        "auth configure-docker",
        "storage buckets get-iam-policy",
        "storage buckets remove-iam-policy-binding",
        "iam service-accounts delete",
        "artifacts repositories delete",
    ):
        assert any(line.startswith(expected) for line in joined), expected
    # The build's substitutions, one image per Dockerfile target, are among the lines replayed.
    (build,) = [argv for argv in argvs if argv[:2] == ["builds", "submit"]]
    substitutions = build[build.index("--substitutions") + 1]
    assert sorted(item.split("=")[0] for item in substitutions.split(",")) == [
        "_PAGE_IMAGE",
        "_STEPS_IMAGE",
        "_TRAIN_IMAGE",
    ]
    assert not {command_group(argv) for argv in argvs} - set(APIS_BY_GROUP), (
        "a group without overrides"
    )
    failures = [verdict for _, verdict in replay(argvs, sandbox.root, gcloud_env) if verdict]
    assert not failures, "\n\n".join(failures)


def test_a_misspelt_flag_or_bad_value_is_caught(
    recorded: tuple[Sandbox, list[list[str]]], gcloud_env: dict[str, str]
) -> None:
    """The check can fail: recorded lines with one flag misspelt, or a value of the wrong type."""
    sandbox, argvs = recorded
    create = next(argv for argv in argvs if argv[:3] == ["container", "clusters", "create"])
    misspelt = [("--num-node" if word == "--num-nodes" else word) for word in create]
    size = create.index("--disk-size") + 1
    bad_value = [*create[:size], "fifty", *create[size + 1 :]]
    grant = next(argv for argv in argvs if argv[:2] == ["projects", "add-iam-policy-binding"])
    no_role = [word for word in grant if word != "--role" and not word.startswith("roles/")]
    verdicts = replay([create, misspelt, bad_value, no_role], sandbox.root, gcloud_env)
    assert verdicts[0][1] is None, verdicts[0][1]
    for argv, verdict in verdicts[1:]:
        assert verdict and verdict.startswith("argument error (exit 2)"), (argv, verdict)


def test_a_build_config_gcloud_cannot_read_is_caught(
    recorded: tuple[Sandbox, list[list[str]]], gcloud_env: dict[str, str], tmp_path: Path
) -> None:
    """gcloud reads the Cloud Build config before it calls anything: an unknown field stops it there."""
    sandbox, argvs = recorded
    build = next(argv for argv in argvs if argv[:2] == ["builds", "submit"])
    config = tmp_path / "cloudbuild.yaml"
    config.write_text((ROOT / "infra" / "gke" / "cloudbuild.yaml").read_text() + "optionz: {}\n")
    broken = [str(config) if word == "infra/gke/cloudbuild.yaml" else word for word in build]
    ((_, verdict),) = replay([broken], sandbox.root, gcloud_env)
    assert verdict and "stopped before any request" in verdict and "optionz" in verdict


def documented_gcloud_lines() -> list[list[str]]:
    """The gcloud commands of docs/gke.md's bash blocks, then of the README's "Run on GKE" brief, with the
    variables their blocks export expanded (bash's $RANDOM as 12345) and placeholders as written."""
    sections = [docs.GKE.read_text(), docs.section(docs.README, "Run on GKE")]
    variables = {"RANDOM": "12345"}
    lines = []
    for block in docs.bash_blocks("\n".join(sections)):
        for command in block:
            words = shlex.split(command, comments=True)
            if words[:1] == ["export"] and all("=" in word for word in words[1:]):
                for word in words[1:]:
                    name, value = word.split("=", 1)
                    variables[name] = docs.expand(value, variables)
            elif words[:1] == ["gcloud"]:
                lines.append([docs.expand(word, variables) for word in words[1:]])
    return lines


def test_the_documented_gcloud_lines_parse(gcloud_env: dict[str, str], tmp_path: Path) -> None:
    argvs = documented_gcloud_lines()
    assert ["projects", "create", "mnist-argo-12345"] in argvs
    assert any(argv[:3] == ["billing", "projects", "link"] for argv in argvs)
    assert not {command_group(argv) for argv in argvs} - set(APIS_BY_GROUP), (
        "a group without overrides"
    )
    failures = [verdict for _, verdict in replay(argvs, tmp_path, gcloud_env) if verdict]
    assert not failures, "\n\n".join(failures)


# Where the scripts stop or keep something, they print the gcloud command that resolves it.
ADVICE_SCENARIOS: list[tuple[str, dict[str, str]]] = [
    ("up.sh", {"FAKE_EXISTING": "foreign-cluster"}),
    ("up.sh", {"FAKE_EXISTING": "foreign-bucket"}),
    ("up.sh", {"FAKE_EXISTING": "foreign-account"}),
    ("up.sh", {"FAKE_EXISTING": "foreign-registry"}),
    ("up.sh", {"FAKE_EXISTING": "cluster", "FAKE_CLUSTER_STATUS": "RECONCILING"}),
    ("down.sh", {"FAKE_EXISTING": "foreign-cluster"}),
    ("down.sh", {"FAKE_EXISTING": "cluster", "FAKE_NAMESPACE_TIMES_OUT": "1"}),
]


def test_the_gcloud_commands_the_scripts_advise_parse(
    tmp_path: Path, gcloud_env: dict[str, str]
) -> None:
    sandbox = make_sandbox(tmp_path, system_bin(tmp_path / "system"))
    advised = []
    for script, settings in ADVICE_SCENARIOS:
        result, _ = sandbox.run(script, check=False, **settings)
        commands = re.findall(r"\bgcloud ([a-z][^()\n]*)", result.stderr)
        assert commands, (script, settings, result.stderr)
        advised += [shlex.split(command) for command in commands]
    assert len(advised) >= len(ADVICE_SCENARIOS)
    failures = [verdict for _, verdict in replay(advised, sandbox.root, gcloud_env) if verdict]
    assert not failures, "\n\n".join(failures)
