"""workflows/server/client.py through submit.py, against the Argo Server double: each refusal one line
saying what to do, the base href, and registering while the server's cache trails its writes."""

from __future__ import annotations

import datetime
import http.server
import threading
import warnings
from collections.abc import Callable
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
        (
            'workflows.argoproj.io is forbidden: User "x" cannot create',
            "ARGO_TOKEN may not do this",
        ),
    ],
    ids=["quota", "admission-policy", "rbac"],
)
def test_a_forbidden_answer_says_who_refused(detail: str, expected: str) -> None:
    """403 is RBAC's answer, but the quota's and an admission policy's too: the line names which."""
    error = HeraException(f"Server returned status code 403 with message: `{detail}`")
    line = str(client._refusal(client.ArgoServer("https://argo:2746"), error))
    assert line.startswith(expected) or expected in line, line
    assert "\n" not in line


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


def test_a_name_already_taken(
    argo: ArgoDouble, gcs_bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bucket = ("--artifacts", f"gs://{gcs_bucket}")  # one this machine reads: no warning line
    assert submit(capsys, *bucket, "--name", "mnist-nightly")[0] == 0
    assert "mnist-nightly" in argo.runs
    code, _, err = submit(capsys, *bucket, "--name", "mnist-nightly")
    assert code == 1 and err.count("\n") == 1
    assert "already taken" in err and "mnist-nightly" in err and "--name" in err


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
