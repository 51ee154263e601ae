"""A small client for the Argo Server's REST API: create and get workflows, register a WorkflowTemplate,
submit a run from it. Settings follow Argo's own CLI (ARGO_SERVER, ARGO_TOKEN, ARGO_NAMESPACE, ...).

Every failure becomes one ArgoError whose message is a single line saying what to do about it.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workflows import cluster

TIMEOUT_SECONDS = 30
TRUE = {"1", "true", "yes", "on"}


class ArgoError(Exception):
    """The Argo Server could not do what was asked; the message is one line for the user."""


class NameTaken(ArgoError):
    """A resource of that name already exists (409)."""


@dataclass(frozen=True)
class ArgoServer:
    """Where the server is and how to talk to it."""

    url: str  # scheme://host:port, without the base href
    namespace: str = cluster.NAMESPACE
    token: str = ""
    insecure_skip_verify: bool = False
    base_href: str = "/"

    @property
    def root(self) -> str:
        """The server's root URL with its base href, ending in '/'."""
        path = self.base_href.strip("/")
        return f"{self.url.rstrip('/')}/{path + '/' if path else ''}"

    def ui_link(self, name: str) -> str:
        """The run's page in the Argo UI."""
        return f"{self.root}workflows/{self.namespace}/{name}"


def server_url(address: str, secure: bool = True) -> str:
    """ARGO_SERVER as Argo's CLI reads it: `host:port` (https unless ARGO_SECURE=false) or a full URL."""
    address = address.strip().rstrip("/")
    if "://" in address:
        return address
    return f"{'https' if secure else 'http'}://{address}"


def from_environment(
    environ: Mapping[str, str] = os.environ,
    server: str | None = None,
    namespace: str | None = None,
    insecure_skip_verify: bool | None = None,
    base_href: str | None = None,
) -> ArgoServer | None:
    """The server named by the arguments or, failing them, ARGO_*; None when no server is named."""
    address = server or environ.get("ARGO_SERVER", "")
    if not address:
        return None
    secure = environ.get("ARGO_SECURE", "true").lower() in TRUE
    if insecure_skip_verify is None:
        insecure_skip_verify = environ.get("ARGO_INSECURE_SKIP_VERIFY", "").lower() in TRUE
    return ArgoServer(
        url=server_url(address, secure),
        namespace=namespace or environ.get("ARGO_NAMESPACE") or cluster.NAMESPACE,
        token=environ.get("ARGO_TOKEN", ""),
        insecure_skip_verify=insecure_skip_verify,
        base_href=base_href or environ.get("ARGO_BASE_HREF") or "/",
    )


def _authorization(token: str) -> str:
    """ARGO_TOKEN may be given as Argo's CLI prints it ('Bearer ...') or bare."""
    token = token.strip()
    return token if token.lower().startswith(("bearer ", "basic ")) else f"Bearer {token}"


def _request(server: ArgoServer, method: str, path: str, body: Any = None) -> dict:
    """One API call; returns the decoded JSON answer or raises ArgoError with one line."""
    url = server.root + path.lstrip("/")
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Accept": "application/json"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    if server.token:
        headers["Authorization"] = _authorization(server.token)
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    context = None
    if url.startswith("https://"):
        context = ssl.create_default_context()
        if server.insecure_skip_verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS, context=context) as answer:
            return json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        raise _http_error(server, error) from None
    except (urllib.error.URLError, OSError) as error:
        raise _connection_error(server, error) from None
    except ValueError:
        raise ArgoError(
            f"{server.url} did not answer with JSON; is ARGO_SERVER the Argo Server?"
        ) from None


def _connection_error(server: ArgoServer, error: Exception) -> ArgoError:
    reason = getattr(error, "reason", error)
    if isinstance(reason, ssl.SSLCertVerificationError):
        return ArgoError(
            f"TLS: cannot verify the certificate of {server.url} ({reason.verify_message}); "
            "a port-forwarded Argo Server has a self-signed one: set ARGO_INSECURE_SKIP_VERIFY=true"
        )
    if isinstance(reason, ssl.SSLError):
        return ArgoError(
            f"TLS failed with {server.url} ({reason.reason or reason}); if the server runs "
            "without TLS (argo server --secure=false), use an http:// ARGO_SERVER"
        )
    return ArgoError(
        f"cannot reach the Argo Server at {server.url} ({reason}); is "
        "`kubectl -n argo port-forward svc/argo-server 2746:2746` running, and ARGO_SERVER right?"
    )


def _http_error(server: ArgoServer, error: urllib.error.HTTPError) -> ArgoError:
    try:
        detail = json.loads(error.read() or b"{}").get("message", "")
    except ValueError:
        detail = ""
    detail = " ".join(str(detail or error.reason).split())
    if error.code == 401:
        hint = "set ARGO_TOKEN" if not server.token else "ARGO_TOKEN is not accepted; renew it"
        return ArgoError(
            f"the Argo Server wants a valid token (401 {detail}): {hint}, e.g. "
            f'ARGO_TOKEN="Bearer $(kubectl -n {server.namespace} create token {cluster.SUBMITTER_ACCOUNT})"'
        )
    if error.code == 403:
        return ArgoError(
            f"the token in ARGO_TOKEN may not do this in namespace {server.namespace!r} "
            f"(403 {detail}); use a token of a ServiceAccount allowed there"
        )
    if error.code == 404 and "namespace" in detail.lower():
        return ArgoError(
            f"namespace {server.namespace!r} does not exist on the cluster ({detail}); "
            "set ARGO_NAMESPACE or --namespace"
        )
    if error.code == 409:
        return NameTaken(
            f"the name is already taken in namespace {server.namespace!r} ({detail}); "
            "choose another --name"
        )
    return ArgoError(f"the Argo Server answered {error.code}: {detail}")


def create_workflow(server: ArgoServer, workflow: dict) -> dict:
    """Submit a Workflow; returns it as created, with its generated name."""
    return _request(
        server,
        "POST",
        f"api/v1/workflows/{server.namespace}",
        {"namespace": server.namespace, "workflow": workflow},
    )


def get_workflow(server: ArgoServer, name: str) -> dict:
    """The Workflow with its current status and nodes."""
    return _request(
        server, "GET", f"api/v1/workflows/{server.namespace}/{urllib.parse.quote(name)}"
    )


def register_template(server: ArgoServer, template: dict) -> tuple[dict, bool]:
    """Create the WorkflowTemplate, or replace the one of the same name; returns (it, created?)."""
    name = template["metadata"]["name"]
    path = f"api/v1/workflow-templates/{server.namespace}"
    try:
        created = _request(
            server, "POST", path, {"namespace": server.namespace, "template": template}
        )
        return created, True
    except NameTaken:
        pass
    current = _request(server, "GET", f"{path}/{urllib.parse.quote(name)}")
    version = current["metadata"]["resourceVersion"]
    replacement = {**template, "metadata": {**template["metadata"], "resourceVersion": version}}
    updated = _request(
        server,
        "PUT",
        f"{path}/{urllib.parse.quote(name)}",
        {"namespace": server.namespace, "name": name, "template": replacement},
    )
    return updated, False


def submit_from_template(
    server: ArgoServer,
    template_name: str,
    parameters: Mapping[str, str],
    name: str | None = None,
) -> dict:
    """Start a run of a registered WorkflowTemplate with these parameter values."""
    options: dict[str, Any] = {
        "parameters": [f"{key}={value}" for key, value in parameters.items()]
    }
    if name:
        options["name"] = name
    return _request(
        server,
        "POST",
        f"api/v1/workflows/{server.namespace}/submit",
        {
            "namespace": server.namespace,
            "resourceKind": "WorkflowTemplate",
            "resourceName": template_name,
            "submitOptions": options,
        },
    )
