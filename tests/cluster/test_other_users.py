"""What another user of the machine (`nobody`) or another machine reaches of the root-run local cluster."""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support import docs
from tests.support.cluster import Cluster
from tests.support.local_cluster import STATE, as_nobody, daemon_pid, flag, listeners
from tests.support.project import ROOT

pytestmark = pytest.mark.cluster

LISTENERS_SECTION = "Who can reach what"
CURL = ("curl", "-q", "-sS", "-m", "10")


@pytest.fixture(autouse=True)
def local_only(cluster: Cluster) -> None:
    if not cluster.local:
        pytest.skip("the local cluster's own processes and files (make cluster-up)")


def etcd_request(host: str, path: str, body: dict, *extra: str) -> list[str]:
    """curl's command line for a POST to etcd's JSON gateway (/v3/...) at HOST (scheme://host:port)."""
    return [*CURL, *extra, "-X", "POST", "--data", json.dumps(body), host + path]


def key(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


SECRETS = dict(key=key("/registry/secrets/"), range_end=key("/registry/secrets0"), count_only=True)


def etcd_hosts() -> list[str]:
    """Each address etcd serves its clients on (its --listen-client-urls), as scheme://host:port."""
    urls = flag(daemon_pid("etcd"), "--listen-client-urls").split(",")
    return [f"{urlsplit(url).scheme}://{urlsplit(url).netloc}" for url in urls]


def range_as_the_api_server(host: str, body: dict) -> dict:
    """etcd's answer to a range request sent with the API server's client certificate of etcd's CA."""
    pki = STATE / "pki"
    certificate = [
        "--cacert", str(pki / "etcd" / "ca.crt"),
        "--cert", str(pki / "apiserver-etcd-client.crt"),
        "--key", str(pki / "apiserver-etcd-client.key"),
    ]  # fmt: skip
    request = etcd_request(host, "/v3/kv/range", body, *certificate)
    return dict(json.loads(subprocess.run(request, capture_output=True, check=True).stdout))


def test_nobody_can_neither_read_nor_write_etcd() -> None:
    planted = f"/nobody-was-here-{secrets.token_hex(3)}"
    for host in etcd_hosts():
        port = urlsplit(host).netloc
        for tried in (f"http://{port}", f"https://{port}"):  # plain, and TLS without a certificate
            # The write is tried only once the read was refused.
            read = as_nobody(*etcd_request(tried, "/v3/kv/range", SECRETS, "-k"))
            print(f"\nnobody reads {tried}: {read.stdout or read.stderr!r}")
            assert '"header"' not in read.stdout, f"nobody read etcd at {tried}: {read.stdout}"
            wrote = as_nobody(
                *etcd_request(tried, "/v3/kv/put", {"key": key(planted), "value": key("x")}, "-k")
            )
            assert '"header"' not in wrote.stdout, f"nobody wrote to etcd: {wrote.stdout}"
        # The control: with the API server's certificate etcd answers, holds Secrets, and not the key.
        answer = range_as_the_api_server(host, SECRETS)
        assert int(answer["count"]) > 0, answer
        answer = range_as_the_api_server(host, {"key": key(planted), "count_only": True})
        assert "count" not in answer, answer


def written_secrets() -> list[Path]:
    """The keys, kubeconfigs and tokens up.sh writes (.cluster/env holds the submitter's token)."""
    pki = sorted((STATE / "pki").rglob("*.key"))
    kubeconfigs = sorted((STATE / "kubeconfigs").glob("*.conf"))
    return [*pki, *kubeconfigs, STATE / "kubeconfig", STATE / "env"]


def kubelet_secrets() -> list[Path]:
    """The kubelet's client key and every token it mounts into a pod (projected or Secret volumes)."""
    kubelet = STATE / "kubelet"
    return sorted(
        [*(kubelet / "pki").glob("*.pem"), *(kubelet / "pki").glob("*.key")]
        + [path for path in (kubelet / "pods").rglob("token") if path.is_file()]
    )


# What nobody's Python reads of the paths given on its command line: those it could open, in JSON.
READABLE = """
import json, sys
readable = []
for path in sys.argv[1:]:
    try:
        open(path, "rb").close()
        readable.append(path)
    except OSError:
        pass
print(json.dumps(readable))
"""


def test_every_key_token_and_kubeconfig_is_roots_alone() -> None:
    written = written_secrets()
    for made in ("kubeconfigs/kube-proxy.conf", "pki/sa.key", "pki/apiserver-etcd-client.key"):
        assert STATE / made in written, made
    modes = {str(path.relative_to(ROOT)): oct(path.stat().st_mode & 0o777) for path in written}
    print("\nmodes:", modes)
    assert {p: m for p, m in modes.items() if int(m, 8) & 0o077} == {}
    assert all(path.stat().st_uid == 0 for path in written)
    tried = [*written, *kubelet_secrets()]
    done = as_nobody("python3", "-c", READABLE, *map(str, tried))
    readable = json.loads(done.stdout)
    print(f"nobody tried {len(tried)} files, read {len(readable)}: {readable}")
    assert readable == []


def test_nobody_cannot_list_the_clusters_folder() -> None:
    assert STATE.stat().st_mode & 0o077 == 0, oct(STATE.stat().st_mode)
    assert as_nobody("ls", str(STATE)).returncode != 0


def test_nobody_cannot_reach_the_emulator(cluster: Cluster) -> None:
    emulator = cluster.env["STORAGE_EMULATOR_HOST"]
    name = f"nobody-was-here-{secrets.token_hex(3)}"
    listed = as_nobody(*CURL, f"{emulator}/storage/v1/b/{cluster.bucket}/o")
    print(f"\nnobody lists the bucket: {listed.stdout[:80] or listed.stderr!r}")
    assert listed.returncode != 0 and '"kind"' not in listed.stdout, listed.stdout[:200]
    uploaded = as_nobody(  # tried only once the listing was refused
        *CURL, "-X", "POST", "--data-binary", "run",
        f"{emulator}/upload/storage/v1/b/{cluster.bucket}/o?uploadType=media&name={name}",
    )  # fmt: skip
    assert uploaded.returncode != 0, uploaded.stdout
    assert not cluster.exists(name)
    assert cluster.exists(cluster.env["MNIST_SOURCE"].split("/", 3)[3])  # root's processes reach it


OUTSIDE = "mnist-outside"  # a network namespace standing for another machine, or another bridge's container
OUTSIDE_LINK = ("mnist-out0", "10.78.0.1/30", "10.78.0.2/30")


@pytest.fixture
def outside() -> Iterator[list[str]]:
    """The command prefix into a network namespace routed to the cluster's bridge, as another machine."""
    link, host_address, its_address = OUTSIDE_LINK
    commands = [
        ["ip", "netns", "add", OUTSIDE],
        ["ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", OUTSIDE],
        ["ip", "addr", "add", host_address, "dev", link],
        ["ip", "link", "set", link, "up"],
        ["ip", "-n", OUTSIDE, "addr", "add", its_address, "dev", "eth0"],
        ["ip", "-n", OUTSIDE, "link", "set", "eth0", "up"],
        ["ip", "-n", OUTSIDE, "route", "add", "10.77.0.0/16", "via", host_address.split("/")[0]],
    ]
    try:
        for command in commands:
            subprocess.run(command, check=True, capture_output=True)
        yield ["ip", "netns", "exec", OUTSIDE]
    finally:
        subprocess.run(["ip", "link", "delete", link], capture_output=True)
        subprocess.run(["ip", "netns", "delete", OUTSIDE], capture_output=True)


def test_no_other_machine_reaches_the_emulator(cluster: Cluster, outside: list[str]) -> None:
    emulator = cluster.env["STORAGE_EMULATOR_HOST"]
    api = subprocess.run(
        [*outside, "curl", "-q", "-sk", "-m", "10", "-o", "/dev/null", "-w", "%{http_code}",
         f"https://{urlsplit(emulator).hostname}:6443/version"],
        capture_output=True, text=True,
    )  # fmt: skip
    listed = subprocess.run(
        [*outside, *CURL, f"{emulator}/storage/v1/b"],
        capture_output=True, text=True,
    )  # fmt: skip
    print(
        f"\nfrom outside: the API server {api.stdout}; the emulator {listed.stdout or listed.stderr!r}"
    )
    assert api.stdout == "200", "the control: the API server answers from outside"
    assert listed.returncode != 0 and '"kind"' not in listed.stdout, listed.stdout[:200]


def test_every_listener_of_the_clusters_daemons_is_documented() -> None:
    """Each ADDRESS:PORT (or ADDRESS:random) `ss -ltnp` shows is in the table beside its daemon's name."""
    found = listeners()
    print("\nlisteners:", json.dumps({name: sorted(ports) for name, ports in found.items()}))
    assert {"etcd", "kube-apiserver", "kubelet", "gcs-emulator"} <= set(found), found
    table = docs.section(ROOT / "docs" / "local-cluster.md", LISTENERS_SECTION)
    rows = [line.split("|")[1:3] for line in table.splitlines() if line[:1] == "|"]
    missing = []
    for name, addresses in found.items():
        for address in addresses:
            host = address.rsplit(":", 1)[0]
            if not any(
                cells[0].strip().startswith(name)
                and cells[1].strip() in (f"`{address}`", f"`{host}:random`")
                for cells in rows
            ):
                missing.append(f"{name} {address}")
    assert missing == [], missing
