"""The two real judges of a manifest, over HTTP: the Argo Server (its lint endpoints, and a Workflow's
create with `createOptions.dryRun`, which validates as create does and stores nothing) and the
Kubernetes API server (a create with `dryRun=All`: the CRD's schema and CEL rules, the metadata rules).

Each answer becomes a Verdict: accepted, or refused with the message and the fields it names.
"""

from __future__ import annotations

import base64
import re
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

Manifest = dict[str, Any]
# The Argo Server's endpoints by kind: the lint's path and the body's key (the server's OpenAPI spec).
ARGO_LINT = {
    "Workflow": ("/api/v1/workflows/{namespace}/lint", "workflow"),
    "WorkflowTemplate": ("/api/v1/workflow-templates/{namespace}/lint", "template"),
    "ClusterWorkflowTemplate": ("/api/v1/cluster-workflow-templates/lint", "template"),
}
PLURAL = {
    "Workflow": "workflows",
    "WorkflowTemplate": "workflowtemplates",
    "ClusterWorkflowTemplate": "clusterworkflowtemplates",
}
CLUSTER_SCOPED = ("ClusterWorkflowTemplate",)
TIMEOUT = 60
UNAVAILABLE = (502, 503, 504)  # a server restarting or overloaded: no verdict yet
# A field path at the start of a message: `spec.templates[0].name`, `templates.main.tasks.a`.
LEADING_PATH = re.compile(r"^[A-Za-z_][\w-]*(?:\[\d+\])?(?:\.[^\s:.\[\]]+(?:\[\d+\])?)+")
QUOTED = re.compile(r"'([^']*)'|\"([^\"]*)\"")


class JudgeError(AssertionError):
    """A judge answered neither yes nor no (unreachable, an unexpected status): no verdict."""


@dataclass(frozen=True)
class Verdict:
    """A judge's answer: accepted, or refused with its messages and the fields they name."""

    ok: bool
    messages: tuple[str, ...] = ()
    fields: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        return "; ".join(self.messages)

    @classmethod
    def refused(cls, *messages: str, fields: tuple[str, ...] | None = None) -> Verdict:
        named = (
            fields if fields is not None else tuple(f for m in messages for f in named_fields(m))
        )
        return cls(False, tuple(messages), named)


ACCEPTED = Verdict(True)


def named_fields(message: str) -> tuple[str, ...]:
    """The fields a refusal names: the path it starts with (as Argo and the API server start their
    messages), else the names it quotes (`template name 'nope' undefined`)."""
    if path := LEADING_PATH.match(message):
        return (path.group(0),)
    return tuple(single or double for single, double in QUOTED.findall(message))


def api_fields(message: str) -> tuple[str, ...]:
    """The field of an API server cause as the lint words it: `<field>: <what is wrong>`."""
    head, colon, _ = message.partition(": ")
    return (head,) if colon and " " not in head else named_fields(message)


@dataclass
class Http:
    """requests sessions, one per thread, sharing their settings."""

    base: str
    headers: dict[str, str] = field(default_factory=dict)
    verify: bool | str = True
    cert: tuple[str, str] | None = None
    local: threading.local = field(default_factory=threading.local, repr=False)

    def session(self) -> requests.Session:
        """This thread's session, made on its first request."""
        session: requests.Session | None = getattr(self.local, "session", None)
        if session is None:
            session = requests.Session()
            session.trust_env = False  # REQUESTS_CA_BUNDLE would replace the cluster's own CA
            session.headers.update(self.headers)
            session.verify = self.verify
            session.cert = self.cert
            self.local.session = session
        return session

    def post(self, path: str, body: Any, again: bool = False, **params: str) -> requests.Response:
        """POST BODY; AGAIN: a request that stores nothing, asked again for half a minute (1, 2, 4,
        8 and 16 s apart) while the server cannot be reached or is not ready (restarting)."""
        for attempt in range(6 if again else 1):
            if attempt:
                time.sleep(2 ** (attempt - 1))
            try:
                response = self.session().post(
                    self.base + path, json=body, params=params, timeout=TIMEOUT
                )
            except (requests.ConnectionError, requests.Timeout) as problem:
                failure = f"POST {self.base}{path}: {problem}"
                continue
            except requests.RequestException as problem:
                raise JudgeError(f"POST {self.base}{path}: {problem}") from None
            if response.status_code not in UNAVAILABLE:
                return response
            failure = f"POST {self.base}{path}: {response.status_code} {response.text[:300]}"
        raise JudgeError(failure)

    def delete(self, path: str) -> requests.Response:
        try:
            return self.session().delete(self.base + path, timeout=TIMEOUT)
        except requests.RequestException as problem:
            raise JudgeError(f"DELETE {self.base}{path}: {problem}") from None


def _answer(response: requests.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise JudgeError(f"{response.status_code} {response.text[:300]!r}: not a JSON object")
    return body


@dataclass
class ArgoServer:
    """The Argo Server, called with a bearer token."""

    http: Http

    @classmethod
    def at(cls, url: str, token: str, insecure: bool) -> ArgoServer:
        bearer = token if token.startswith("Bearer ") else f"Bearer {token}"
        return cls(Http(url.rstrip("/"), {"Authorization": bearer}, verify=not insecure))

    def _verdict(self, response: requests.Response) -> Verdict:
        body = _answer(response)
        if response.ok:
            return ACCEPTED
        # a refusal (a missing template is one, 404) carries Argo's message; 401 and 403 are no verdict
        if response.status_code in (401, 403) or "message" not in body:
            raise JudgeError(f"the Argo Server answered {response.status_code}: {body}")
        return Verdict.refused(str(body["message"]))

    def lint(self, document: Manifest, namespace: str) -> Verdict:
        path, key = ARGO_LINT[str(document["kind"])]
        body = (
            {key: document}
            if "{namespace}" not in path
            else {"namespace": namespace, key: document}
        )
        return self._verdict(self.http.post(path.format(namespace=namespace), body, again=True))

    def create_dry_run(self, workflow: Manifest, namespace: str) -> Verdict:
        """validate.go as CreateWorkflow runs it (Opts{}), which returns before it stores anything
        when the request has createOptions.dryRun (server/workflow/workflow_server.go:124-131)."""
        body = {"namespace": namespace, "workflow": workflow, "createOptions": {"dryRun": ["All"]}}
        response = self.http.post(f"/api/v1/workflows/{namespace}", body, again=True)
        if response.ok and _answer(response).get("metadata", {}).get("uid"):
            raise JudgeError("the Argo Server stored a Workflow asked for with dryRun")
        return self._verdict(response)


@dataclass
class ApiServer:
    """The Kubernetes API server, as the kubeconfig's user (an admin)."""

    http: Http
    files: tempfile.TemporaryDirectory[str] | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ApiServer:
        """From `kubectl config view --raw --minify --flatten -o json`: one cluster, one user."""
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        files = tempfile.TemporaryDirectory(prefix="lint-judges-")

        def written(name: str, data: str) -> str:
            path = Path(files.name) / name
            path.write_bytes(base64.b64decode(data))
            path.chmod(0o600)
            return str(path)

        verify: bool | str = True
        if cluster.get("insecure-skip-tls-verify"):
            verify = False
        elif cluster.get("certificate-authority-data"):
            verify = written("ca.crt", cluster["certificate-authority-data"])
        headers, cert = {}, None
        if user.get("token"):
            headers["Authorization"] = f"Bearer {user['token']}"
        if user.get("client-certificate-data"):
            cert = (
                written("client.crt", user["client-certificate-data"]),
                written("client.key", user["client-key-data"]),
            )
        return cls(Http(cluster["server"].rstrip("/"), headers, verify, cert), files)

    def close(self) -> None:
        if self.files is not None:
            self.files.cleanup()

    @staticmethod
    def path(kind: str, namespace: str, name: str = "") -> str:
        group = "/apis/argoproj.io/v1alpha1"
        where = "" if kind in CLUSTER_SCOPED else f"/namespaces/{namespace}"
        return f"{group}{where}/{PLURAL[kind]}" + (f"/{name}" if name else "")

    def dry_run(self, document: Manifest, namespace: str) -> Verdict:
        """A create with dryRun=All: every check of a create, nothing stored."""
        kind = str(document["kind"])
        response = self.http.post(self.path(kind, namespace), document, again=True, dryRun="All")
        body = _answer(response)
        if response.ok:
            return ACCEPTED
        if response.status_code not in (400, 422) or body.get("kind") != "Status":
            raise JudgeError(f"the API server answered {response.status_code}: {body}")
        causes = body.get("details", {}).get("causes") or []
        messages = tuple(
            f"{cause['field']}: {cause.get('message', '')}"
            if cause.get("field")
            else cause["message"]
            for cause in causes
        )
        fields = tuple(cause["field"] for cause in causes if cause.get("field"))
        return Verdict.refused(*(messages or (str(body.get("message")),)), fields=fields or None)

    def create(self, path: str, document: Manifest) -> dict[str, Any]:
        response = self.http.post(path, document)
        body = _answer(response)
        if not response.ok:
            raise JudgeError(f"create {path}: {response.status_code} {body.get('message', body)}")
        return body

    def delete(self, path: str) -> None:
        response = self.http.delete(path)
        if not response.ok and response.status_code != 404:
            raise JudgeError(f"delete {path}: {response.status_code} {response.text[:300]}")
