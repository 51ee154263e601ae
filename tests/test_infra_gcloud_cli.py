"""Every gcloud line of infra/gke, of the advice its scripts print and of the docs, parsed by the real gcloud
CLI in one process (tests/support/gcloud_lines.py), where an argument error exits 2. Nothing leaves the
machine: no credentials, every API at a closed local port, and a network namespace where `unshare` can."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.doubles.cloud_tools import ALL_MADE, ROOT, make_sandbox, system_bin
from tests.support import docs

GCLOUD = shutil.which("gcloud")
pytestmark = [
    pytest.mark.skipif(
        GCLOUD is None, reason="the Google Cloud CLI (gcloud) is not installed on this machine"
    ),
    pytest.mark.slow,  # the real gcloud loads its CLI and each command group: seconds
]
SDK = Path(GCLOUD or "/").resolve().parents[1]  # the SDK's bin/gcloud
# The Python bin/gcloud picks: CLOUDSDK_PYTHON, else the SDK's bundled one, else python3 on PATH.
BUNDLED = SDK / "platform" / "bundledpythonunix" / "bin" / "python3"
GCLOUD_PYTHON = os.environ.get("CLOUDSDK_PYTHON") or str(BUNDLED if BUNDLED.exists() else "python3")
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

COMMAND = (
    r"\bgcloud ((?:[a-z][a-z-]*(?: |$))+)"  # the words naming a command, up to its first argument
)
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
    ("down.sh", ALL_MADE),
    ("down.sh", {"FAKE_EXISTING": "bucket", "DELETE_BUCKET": "yes", "PROJECT_ID": ""}),
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
    overrides = "".join(f"{api} = {endpoint}\n" for api in apis)
    settings = f"""[core]
disable_prompts = true
check_gce_metadata = false
disable_usage_reporting = true
disable_file_logging = true
[component_manager]
disable_update_check = true
[api_endpoint_overrides]
{overrides}"""
    (config / "configurations" / "config_default").write_text(settings)
    keep = ("PATH", "LANG", "LC_ALL", "TZ")
    return {
        **{name: os.environ[name] for name in keep if name in os.environ},
        "HOME": str(home),
        "CLOUDSDK_CONFIG": str(config),
    }


def verdict(argv: list[str], code: int, said: str) -> str | None:
    """None when the real gcloud accepted the command line, else why not."""
    shown = f"gcloud {shlex.join(argv)}\n{said.strip()}"
    if code == 2:
        return f"argument error (exit 2): {shown}"
    if code == 0 or NO_CREDENTIALS in said or SIGN_IN_PROMPT in said:
        return None
    return f"stopped before any request (exit {code}): {shown}"


def replay(argvs: list[list[str]], cwd: Path, env: dict[str, str]) -> list[str | None]:
    """The verdict of each argv, in order, all parsed by one process of the real gcloud CLI."""
    driver = ROOT / "tests" / "support" / "gcloud_lines.py"
    done = subprocess.run(
        [*network_jail(), GCLOUD_PYTHON, str(driver), str(SDK / "lib")],
        cwd=cwd,
        env=env,
        input=json.dumps(argvs),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return [
        verdict(argv, *answer) for argv, answer in zip(argvs, json.loads(done.stdout), strict=True)
    ]


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


def documented_gcloud_lines() -> list[list[str]]:
    """The gcloud commands of docs/gke.md, then of the README's "Run on GKE", variables expanded as exported
    (bash's $RANDOM as 12345), placeholders as written."""
    text = f"{docs.GKE.read_text()}\n{docs.section(docs.README, 'Run on GKE')}"
    return [
        words[1:] for words in docs.commands(text, {"RANDOM": "12345"}) if words[:1] == ["gcloud"]
    ]


def broken(scripts: list[list[str]], config: Path) -> list[list[str]]:
    """Recorded lines the real gcloud must refuse: a flag misspelt, a value of the wrong type, a flag left
    out, and a Cloud Build config with an unknown field (gcloud reads it before it calls anything)."""
    create = next(argv for argv in scripts if argv[:3] == ["container", "clusters", "create"])
    size = create.index("--disk-size") + 1
    grant = next(argv for argv in scripts if argv[:2] == ["projects", "add-iam-policy-binding"])
    build = next(argv for argv in scripts if argv[:2] == ["builds", "submit"])
    config.write_text((ROOT / "infra" / "gke" / "cloudbuild.yaml").read_text() + "optionz: {}\n")
    return [
        [("--num-node" if word == "--num-nodes" else word) for word in create],
        [*create[:size], "fifty", *create[size + 1 :]],
        [word for word in grant if word != "--role" and not word.startswith("roles/")],
        [str(config) if word == "infra/gke/cloudbuild.yaml" else word for word in build],
    ]


@pytest.fixture(scope="module")
def lines(
    tmp_path_factory: pytest.TempPathFactory, gcloud_env: dict[str, str]
) -> dict[str, list[tuple[list[str], str | None]]]:
    """Each kind of gcloud line (scripts, advised, documented, broken) with the real gcloud's verdicts."""
    base = tmp_path_factory.mktemp("scripts")
    sandbox = make_sandbox(base, system_bin(base / "system"))
    for script, settings in SCENARIOS:
        sandbox.run(script, **settings)
    scripts = distinct(sandbox.gcloud_argvs(), sandbox.env["TMPDIR"])
    for argument in (argument for argv in scripts for argument in argv):
        kept = Path(f"{argument}.kept")
        if argument.startswith(sandbox.env["TMPDIR"]) and kept.exists():
            shutil.copy(kept, argument)
    advised = []
    for script, settings in ADVICE_SCENARIOS:
        result, _ = sandbox.run(script, check=False, **settings)
        commands = re.findall(r"\bgcloud ([a-z][^()\n]*)", result.stderr)
        assert commands, (script, settings, result.stderr)
        advised += [shlex.split(command) for command in commands]
    kinds = {
        "scripts": scripts,
        "advised": advised,
        "documented": documented_gcloud_lines(),
        "broken": broken(scripts, base / "cloudbuild.yaml"),
    }
    everything = [argv for argvs in kinds.values() for argv in argvs]
    verdicts = iter(replay(everything, sandbox.root, gcloud_env))
    return {kind: [(argv, next(verdicts)) for argv in argvs] for kind, argvs in kinds.items()}


def test_the_scenarios_reach_every_gcloud_command_of_the_scripts(lines: dict[str, list]) -> None:
    """Each `gcloud GROUP ... VERB` written in infra/gke is run or advised above, so parsed here."""
    text = "\n".join(path.read_text() for path in sorted((ROOT / "infra" / "gke").glob("*.sh")))
    code = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    written = {found.strip() for line in code for found in re.findall(COMMAND, line)}
    reached = [shlex.join(argv) for kind in ("scripts", "advised") for argv, _ in lines[kind]]
    assert len(written) > 40 and "storage buckets create" in written
    missing = [c for c in written if not any(line.startswith(c) for line in reached)]
    assert sorted(c for c in missing if c.split()[0] in APIS_BY_GROUP) == []


@pytest.mark.parametrize("kind", ["scripts", "advised", "documented"])
def test_every_gcloud_line_parses(lines: dict[str, list], kind: str) -> None:
    argvs = [argv for argv, _ in lines[kind]]
    assert not {command_group(argv) for argv in argvs} - set(APIS_BY_GROUP), "group not overridden"
    failures = [verdict for _, verdict in lines[kind] if verdict]
    assert not failures, "\n\n".join(failures)


def test_the_documented_lines_are_read() -> None:
    argvs = documented_gcloud_lines()
    assert ["projects", "create", "mnist-argo-12345"] in argvs
    assert any(argv[:3] == ["billing", "projects", "link"] for argv in argvs)


def test_a_misspelt_flag_a_bad_value_or_build_config_is_caught(lines: dict[str, list]) -> None:
    misspelt, bad_value, no_role, build_config = [verdict or "" for _, verdict in lines["broken"]]
    for refusal in (misspelt, bad_value, no_role):
        assert refusal.startswith("argument error (exit 2)"), refusal
    assert "stopped before any request" in build_config and "optionz" in build_config, build_config
