"""workflows/server/client.py through submit.py: what the real cluster cannot show (its refusals:
tests/cluster/test_server_refusals.py), on the Argo Server double or a bare web server."""

from __future__ import annotations

import contextlib
import http.server
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hera.exceptions import HeraException

from tests.doubles.argo_server import ArgoDouble
from tests.support.argo_double import on_argo, submit
from tests.support.project import free_port
from workflows.pipeline import resources as cluster
from workflows.server import client

pytestmark = pytest.mark.usefixtures("clean_environment")


@pytest.mark.parametrize(
    ("detail", "expected"),
    [
        (
            'workflows.argoproj.io "mnist-x" is forbidden: exceeded quota: mnist, requested: '
            "count/workflows.argoproj.io=1, used: count/workflows.argoproj.io=200",
            "the namespace's quota refused the run",
        ),
        (
            'workflows.argoproj.io "mnist-x" is forbidden: ValidatingAdmissionPolicy '
            "'mnist-workflows' with binding 'mnist-workflows' denied request",
            "the cluster's admission policy refused the Workflow",
        ),
    ],
    ids=["quota", "admission-policy"],
)
def test_a_forbidden_answer_says_who_refused(detail: str, expected: str) -> None:
    """403 is RBAC's answer, but the quota's and an admission policy's too: the line names which."""
    error = HeraException(f"Server returned status code 403 with message: `{detail}`")
    line = str(client._refusal(client.ArgoServer("https://argo:2746"), error))
    assert line.startswith(expected) or expected in line, line
    assert "\n" not in line


def test_a_name_published_in_the_bucket_is_refused_before_anything_is_sent(
    argo: ArgoDouble, gcs_bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Argo frees a run's name after its TTL: a second run of that name would publish over the first."""
    from steps.lib.storage import open_store

    open_store(f"gs://{gcs_bucket}").write_text("models/mnist/mnist-nightly/run.json", "{}")
    code, _, err = submit(capsys, "--artifacts", f"gs://{gcs_bucket}", "--name", "mnist-nightly")
    assert code == 2 and err.count("\n") == 1, err
    assert "run mnist-nightly is published already" in err and "--name" in err
    assert argo.requests == []


def test_base_href_prefixes_api_and_ui_link(
    serve: Callable, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    double, url = serve(base_href="/argo/")
    on_argo(monkeypatch, url, ARGO_BASE_HREF="/argo/", ARGO_NAMESPACE="mnist")
    code, out, _ = submit(capsys)
    assert code == 0
    name = next(iter(double.runs))
    assert f"{url}/argo/workflows/mnist/{name}" in out


class Page(http.server.BaseHTTPRequestHandler):
    """Any web page answering 200 with HTML, as a wrong port-forward would."""

    def do_POST(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"<html>hello</html>")

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def page(tls: ssl.SSLContext | None = None) -> Iterator[str]:
    """A web server of `Page`s in a thread, with `tls` if given; its URL."""
    server = http.server.HTTPServer(("127.0.0.1", 0), Page)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def self_signed(folder: Path) -> ssl.SSLContext:
    """A server's TLS with a certificate of its own making, as a port-forwarded Argo Server's."""
    key, certificate = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(certificate)),
        ],
        check=True,
        capture_output=True,
    )
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(certificate, key)
    return tls


@pytest.mark.parametrize(
    ("server", "said"),
    [
        ("plain-http", ["TLS failed", "use an http:// ARGO_SERVER"]),
        ("none", ["(Connection refused)", "port-forward svc/argo-server 2746:2746"]),
        ("not-argo", ["did not answer with JSON"]),
        ("self-signed", ["(self-signed certificate)", "ARGO_INSECURE_SKIP_VERIFY=true"]),
    ],
)
def test_a_server_that_cannot_be_spoken_to_is_one_line(
    server: str,
    said: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with page(self_signed(tmp_path) if server == "self-signed" else None) as url:
        if server == "plain-http":  # spoken to with TLS
            url = url.replace("http://", "https://")
        on_argo(monkeypatch, url if server != "none" else f"http://127.0.0.1:{free_port()}")
        code, _, err = submit(capsys)
    assert code == 1 and err.count("\n") == 1
    for words in said:
        assert words in err, err


@pytest.fixture
def lagging(serve: Callable, monkeypatch: pytest.MonkeyPatch) -> Callable[[int], ArgoDouble]:
    """A double whose cache trails by reads; the client's waits for it shortened."""
    monkeypatch.setattr("workflows.server.client.CACHE_WAITS", (0.01,) * 6)

    def start(lag: int) -> ArgoDouble:
        double, url = serve(informer_lag=lag)
        on_argo(monkeypatch, url)
        return double

    return start


def test_registering_while_the_cache_trails_the_writes_updates_the_template(
    lagging: Callable, capsys: pytest.CaptureFixture[str]
) -> None:
    """A create refused because the name exists, or an update refused as a Conflict, when the cache
    had not seen the last write yet, is the cache being behind: read again and retried."""
    argo = lagging(2)
    assert submit(capsys, "--register", "--rounds", "1")[0] == 0
    argo.stale[cluster.TEMPLATE_NAME] = [None, 2]  # the next two reads still miss the create
    code, out, err = submit(capsys, "--register", "--rounds", "2")
    assert code == 0 and out.startswith(f"updated WorkflowTemplate {cluster.TEMPLATE_NAME}"), err
    code, _, err = submit(capsys, "--register", "--rounds", "3")  # reads still show version 1
    assert code == 0, err
    template = argo.templates[cluster.TEMPLATE_NAME]
    assert template["metadata"]["resourceVersion"] == "3"
    assert sum("withParam" in t for t in template["spec"]["templates"][-1]["dag"]["tasks"]) == 3
    argo.stale[cluster.TEMPLATE_NAME] = [None, 2]  # a run from it right after: still not found
    code, out, err = submit(capsys, "--from-template", "--workers", "2")
    assert code == 0 and out.startswith("submitted mnist-"), err


def test_register_and_run_in_one_call_runs_the_spec_just_registered(
    lagging: Callable, capsys: pytest.CaptureFixture[str]
) -> None:
    """The controller's cache may still hold the previous spec: the run carries the one registered."""
    argo = lagging(2)
    assert submit(capsys, "--register", "--rounds", "1")[0] == 0
    argo.stale[cluster.TEMPLATE_NAME] = [argo.templates[cluster.TEMPLATE_NAME], 1000]
    code, _, err = submit(capsys, "--register", "--from-template", "--rounds", "3")
    assert code == 0, err
    [run] = argo.runs.values()
    assert run.workflow["spec"] == argo.templates[cluster.TEMPLATE_NAME]["spec"]
    labels = run.workflow["metadata"]["labels"]
    assert labels["workflows.argoproj.io/workflow-template"] == cluster.TEMPLATE_NAME
