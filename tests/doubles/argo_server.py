"""A test double of the Argo Server: it stands in for a Kubernetes cluster with Argo Workflows, which
cannot run here.

An HTTP(S) server on 127.0.0.1 that checks every request against the Argo Server's published OpenAPI
(swagger.json, tests/reference: argo-server-openapi): the path must be one of its paths, the method one of that path's
operations, every query parameter declared, and the JSON body valid for the operation's body schema (refs
resolved into `definitions`, unknown fields refused). A request that does not conform gets 400 and is kept
in `rejected`. Its answers are validated against the same document before they are sent.

What it serves, as the server would: lint, create, get, list and retry workflows, lint, create, get and
update WorkflowTemplates, and submit from a template. The double judges no spec: its lint passes every one,
answering the spec as the server does, unless a test sets `lint_refusal`, the words the real server refuses a
spec with (REFUSED_CONTINUE_ON, which tests/cluster/test_lint_agrees.py checks against the real server),
answered with the real server's status for each kind. A run submitted from a template is named `<template>-` and five characters, unless
submitOptions.generateName or .name say otherwise (upstream workflow/common/convert.go,
NewWorkflowFromWorkflowTemplate; SubmitOpts in the OpenAPI: "GenerateName overrides
metadata.generateName"). Bearer tokens, namespaces and names behave as on a cluster: 401, 403 (also for
a namespace that does not exist: RBAC refuses first), 404 template, 409 name, 409 conflict for a stale
resourceVersion; worded as the real server words them (tests/cluster/test_server_refusals.py).

The server reads templates from an informer's cache, not from the API server (server/apiserver/
argoserver.go builds wftmplStore from an informer; GetWorkflowTemplate and SubmitWorkflow read it), so a
read right after a write may still see what was there before: `informer_lag` is how many template reads
after each write still see the previous state. Writes go to the API server and see the truth.

A created run replays a recording of a real run (tests/doubles/recordings.py; `story` picks it, one of
tests/support/stories.py): each GET of the run answers the recording's next status, one status every
`reads_per_tick` GETs, so a watcher polling faster than the run changes reads the same status again; after
the last it stays there. The recorded run's name is replaced by the created one, and its times are moved
so that each status reads as if read now. The created spec and metadata are the run's own. StopWorkflow
moves the run to the part of its recording that followed its stop; a recording that was not stopped has
none, and stopping its run is an error of the test.
"""

from __future__ import annotations

import json
import random
import re
import ssl
import string
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.doubles import recordings
from tests.doubles.recordings import Recording
from tests.support.argo_schema import first_error, openapi, openapi_validator

WORKFLOW = (
    "#/definitions/io.argoproj.workflow.v1alpha1.Workflow"  # the schema of a Workflow answered
)
TEMPLATE = "#/definitions/io.argoproj.workflow.v1alpha1.WorkflowTemplate"
# The real server's lint of the pipeline with continueOn beside depends on a task of its DAG (validate.go:1477).
REFUSED_CONTINUE_ON = (
    "templates.pipeline cannot use 'continueOn' when using 'depends'. Instead use "
    "'dep-task.Failed'/'dep-task.Errored'"
)


class Refused(Exception):
    """An answer other than 200: HTTP status, gRPC code, message."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _routes() -> list[tuple[re.Pattern[str], str, dict]]:
    """(regex, path template, path item) for every API path; literal segments win over parameters."""
    routes = []
    for template, item in openapi()["paths"].items():
        segments = [
            "([^/]+)" if re.fullmatch(r"{[^/]+}", segment) else re.escape(segment)
            for segment in template.split("/")
        ]
        routes.append((re.compile("^" + "/".join(segments) + "$"), template, item))
    routes.sort(key=lambda route: route[1].count("{"))
    return routes


@dataclass
class Run:
    """A created Workflow, the recording it replays, and how far it went."""

    workflow: dict
    recording: Recording
    reads: int = 0
    stopped_at: int | None = None  # the tick StopWorkflow came at
    retried: bool = False  # RetryWorkflow came: its failed nodes are gone, and it runs

    def tick(self, reads_per_tick: int) -> int:
        """How many statuses the run has moved through: 1 on the first read."""
        return -(-self.reads // reads_per_tick)

    def index(self, reads_per_tick: int) -> int:
        """The recorded status the run is at."""
        recording, tick = self.recording, self.tick(reads_per_tick)
        last = len(recording.statuses) - 1
        if self.stopped_at is None:
            before_stop = last if recording.stopped is None else recording.stopped - 1
            return max(0, min(tick - 1, before_stop))
        assert recording.stopped is not None
        return min(recording.stopped + tick - self.stopped_at, last)

    def answer(self, reads_per_tick: int) -> dict:
        """The Workflow as the server answers it now."""
        now = datetime.now(UTC)
        status = self.recording.served(
            self.index(reads_per_tick), self.workflow["metadata"]["name"], now
        )
        if self.retried:  # as workflow/util/util.go: FormulateRetryWorkflow leaves it
            nodes = status.get("nodes", {})
            kept = {key: node for key, node in nodes.items() if node["phase"] == "Succeeded"}
            status = {**status, "phase": "Running", "nodes": kept}
            status.pop("finishedAt", None)
        return {**self.workflow, "status": status}


@dataclass
class ArgoDouble:
    token: str = "Bearer good-token"
    forbidden_token: str = "Bearer read-only-token"
    namespaces: tuple[str, ...] = ("mnist",)
    story: str = "succeed"
    reads_per_tick: int = 1
    # A run read this often is an error of the test: a watch that never stops a stuck run fails
    # instead of reading its last status before the stop forever.
    max_reads: int = 1000
    base_href: str = "/"
    tls: tuple[Path, Path] | None = None  # certificate and key files: serve HTTPS
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    runs: dict[str, Run] = field(default_factory=dict)
    templates: dict[str, dict] = field(default_factory=dict)
    informer_lag: int = 0
    lint_refusal: str | None = None  # the real server's words for the spec a test makes it refuse
    stale: dict[str, list] = field(
        default_factory=dict
    )  # name → [what the cache shows, reads left]

    # ---- the server ----------------------------------------------------------------------------

    def start(self) -> str:
        """Serve in a thread; returns the base URL (scheme://127.0.0.1:port)."""
        double = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                double._handle(self)

            do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

            def log_message(self, *args: Any) -> None:
                pass

        self._routes = _routes()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if self.tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self.tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            scheme = "https"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return f"{scheme}://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        try:
            status, answer = 200, self._answer(handler)
        except Refused as refused:
            status = refused.status
            answer = {"code": refused.code, "message": refused.message}
        except Exception as error:  # a bug in the double: make the test see it
            status, answer = (
                500,
                {"code": 13, "message": f"double: {type(error).__name__}: {error}"},
            )
        body = json.dumps(answer).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def _answer(self, handler: BaseHTTPRequestHandler) -> dict:
        url = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        prefix = "/" + self.base_href.strip("/")
        path = (
            url.path[len(prefix) :] if url.path.startswith(prefix) and prefix != "/" else url.path
        )
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            self._reject(f"{handler.command} {path}: body is not JSON")
        self.requests.append((handler.command, path, body))
        operation, path_values = self._conform(handler.command, path, parse_qs(url.query), body)
        namespace = path_values.get("namespace", "")
        self._authorize(handler.command, path, handler.headers.get("Authorization", ""), namespace)
        serve = getattr(self, f"_op_{operation['operationId']}", None)
        if serve is None:
            raise Refused(501, 12, f"the double does not serve {operation['operationId']}")
        answer, schema = serve(namespace, path_values.get("name"), body)
        error = first_error(openapi_validator(schema), answer)
        if error:
            raise RuntimeError(f"the double's own answer does not conform: {error}")
        return answer

    # ---- conformance ---------------------------------------------------------------------------

    def _reject(self, reason: str) -> None:
        self.rejected.append(reason)
        raise Refused(400, 3, f"does not conform to the Argo Server API: {reason}")

    def _conform(
        self, method: str, path: str, query: dict, body: Any
    ) -> tuple[dict, dict[str, str]]:
        """The operation this request is, and its path parameters; rejects what does not conform."""
        for pattern, template, item in self._routes:
            match = pattern.match(path)
            if not match:
                continue
            operation = item.get(method.lower())
            if operation is None:
                self._reject(f"{method} is not an operation of {template}")
            names = re.findall(r"{([^/]+?)}", template)
            values = dict(zip(names, match.groups(), strict=True))
            parameters = operation.get("parameters", [])
            declared = {p["name"] for p in parameters if p["in"] == "query"}
            unknown = sorted(set(query) - declared)
            if unknown:
                self._reject(f"{template} takes no query parameter {', '.join(unknown)}")
            body_parameter = next((p for p in parameters if p["in"] == "body"), None)
            if body_parameter is None and body is not None:
                self._reject(f"{method} {template} takes no body")
            if body_parameter is not None:
                if body is None:
                    self._reject(f"{method} {template} needs a body")
                error = first_error(openapi_validator(body_parameter["schema"]["$ref"]), body)
                if error:
                    self._reject(f"{method} {template} body: {error}")
            return operation, values
        self._reject(f"no API path {path}")
        raise AssertionError("unreachable")

    def _authorize(self, method: str, path: str, authorization: str, namespace: str) -> None:
        """As the real server answers (tests/cluster/test_server_refusals.py): a token it does not
        accept, then the API server's RBAC, which refuses before it looks the namespace up."""
        if authorization not in (self.token, self.forbidden_token):
            raise Refused(401, 16, "token not valid: Unauthorized")
        if authorization == self.forbidden_token:
            raise Refused(403, 7, self._forbidden(method, path, namespace, "mnist-page"))
        if namespace not in self.namespaces:
            raise Refused(403, 7, self._forbidden(method, path, namespace, "mnist-submitter"))

    @staticmethod
    def _forbidden(method: str, path: str, namespace: str, account: str) -> str:
        """The API server's RBAC refusal, as the Argo Server passes it on."""
        resource = "workflowtemplates" if "/workflow-templates/" in path else "workflows"
        verb = {"POST": "create", "PUT": "update", "DELETE": "delete"}.get(method, "get")
        return (
            f'{resource}.argoproj.io is forbidden: User "system:serviceaccount:mnist:{account}" '
            f'cannot {verb} resource "{resource}" in API group "argoproj.io" in the namespace '
            f'"{namespace}"'
        )

    # ---- workflows -----------------------------------------------------------------------------

    def _create(self, namespace: str, workflow: dict) -> dict:
        metadata = dict(workflow["metadata"])
        name = metadata.pop("generateName", "") + "".join(
            random.choices(string.ascii_lowercase + string.digits, k=5)
        )
        name = metadata.get("name") or name
        if name in self.runs:
            raise Refused(409, 6, f'workflows.argoproj.io "{name}" already exists')
        created = {
            **workflow,
            "metadata": {
                **metadata,
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{name}",
                "resourceVersion": "1",
                "creationTimestamp": recordings.stamp(datetime.now(UTC)),
            },
        }
        self.runs[name] = Run(created, recordings.load(self.story))
        return created

    def _op_WorkflowService_LintWorkflow(self, _: str, __: Any, body: dict) -> tuple:
        """validate.go's error as LintWorkflow returns it: gRPC Unknown, HTTP 500
        (server/workflow/workflow_server.go:716)."""
        if self.lint_refusal:
            raise Refused(500, 2, self.lint_refusal)
        return body["workflow"], WORKFLOW

    def _op_WorkflowTemplateService_LintWorkflowTemplate(
        self, _: str, __: Any, body: dict
    ) -> tuple:
        """InvalidArgument, HTTP 400 (server/workflowtemplate/workflow_template_server.go:192)."""
        if self.lint_refusal:
            raise Refused(400, 3, self.lint_refusal)
        return body["template"], TEMPLATE

    def _op_WorkflowService_CreateWorkflow(self, namespace: str, _: Any, body: dict) -> tuple:
        created = self._create(namespace, body["workflow"])
        return created, WORKFLOW

    def _op_WorkflowService_SubmitWorkflow(self, namespace: str, _: Any, body: dict) -> tuple:
        if body.get("resourceKind", "").lower() != "workflowtemplate":
            raise Refused(400, 3, f"resourceKind {body.get('resourceKind')!r} is not supported")
        template = self._cached(body.get("resourceName", ""))
        if template is None:
            name = body.get("resourceName")
            raise Refused(404, 5, f'workflowtemplates.argoproj.io "{name}" not found')
        options = body.get("submitOptions", {})
        given = dict(item.split("=", 1) for item in options.get("parameters", []))
        workflow = {
            "metadata": {
                **({"name": options["name"]} if options.get("name") else {}),
                "generateName": options.get("generateName") or template["metadata"]["name"] + "-",
                "labels": {"workflows.argoproj.io/workflow-template": template["metadata"]["name"]},
            },
            "spec": {
                "workflowTemplateRef": {"name": template["metadata"]["name"]},
                "arguments": {"parameters": [{"name": k, "value": v} for k, v in given.items()]},
            },
        }
        created = self._create(namespace, workflow)
        return created, WORKFLOW

    def _op_WorkflowService_GetWorkflow(self, _: str, name: str, __: Any) -> tuple:
        run = self.runs.get(name)
        if run is None:
            raise Refused(404, 5, f'workflows.argoproj.io "{name}" not found')
        run.reads += 1
        if run.reads > self.max_reads:
            raise RuntimeError(f"{name} was read {run.reads} times: the watch never ends")
        return run.answer(self.reads_per_tick), WORKFLOW

    def _op_WorkflowService_ListWorkflows(self, namespace: str, _: Any, __: Any) -> tuple:
        items = [run.answer(self.reads_per_tick) for run in self.runs.values()]
        listed = {"metadata": {"resourceVersion": "1"}, "items": items}
        return listed, "#/definitions/io.argoproj.workflow.v1alpha1.WorkflowList"

    def _op_WorkflowService_RetryWorkflow(self, _: str, name: str, __: Any) -> tuple:
        """As workflow/util/util.go: FormulateRetryWorkflow, without its options."""
        run = self.runs.get(name)
        if run is None:
            raise Refused(404, 5, f'workflows.argoproj.io "{name}" not found')
        phase = run.answer(self.reads_per_tick)["status"].get("phase")
        if phase == "Succeeded":
            raise Refused(
                400,
                3,
                "To retry a succeeded workflow, set the options restartSuccessful and "
                "nodeFieldSelector",
            )
        if phase not in ("Failed", "Error"):
            raise Refused(400, 3, f"Cannot retry a workflow in phase {phase}")
        run.retried = True
        return run.answer(self.reads_per_tick), WORKFLOW

    def _op_WorkflowService_StopWorkflow(self, _: str, name: str, body: Any) -> tuple:
        run = self.runs.get(name)
        if run is None:
            raise Refused(404, 5, f'workflows.argoproj.io "{name}" not found')
        if run.recording.stopped is None:
            raise RuntimeError(
                f"the recording of {self.story!r} was not stopped: nothing follows a stop"
            )
        if run.stopped_at is None:
            run.stopped_at = run.tick(self.reads_per_tick)
        return run.answer(self.reads_per_tick), WORKFLOW

    # ---- templates -----------------------------------------------------------------------------

    def _op_WorkflowTemplateService_CreateWorkflowTemplate(
        self, namespace: str, _: Any, body: dict
    ) -> tuple:
        template = body["template"]
        name = template["metadata"]["name"]
        if name in self.templates:
            raise Refused(409, 6, f'workflowtemplates.argoproj.io "{name}" already exists')
        stored = {**template, "metadata": {**template["metadata"], "namespace": namespace}}
        stored["metadata"]["resourceVersion"] = "1"
        self._store(name, stored)
        return stored, TEMPLATE

    def _op_WorkflowTemplateService_GetWorkflowTemplate(self, _: str, name: str, __: Any) -> tuple:
        template = self._cached(name)
        if template is None:
            raise Refused(404, 5, f'workflowtemplates.argoproj.io "{name}" not found')
        return template, TEMPLATE

    def _cached(self, name: str) -> dict | None:
        """The template as the server's informer shows it: for a while after a write, as before."""
        stale = self.stale.get(name)
        if stale and stale[1] > 0:
            stale[1] -= 1
            return stale[0]
        return self.templates.get(name)

    def _store(self, name: str, template: dict) -> None:
        if self.informer_lag:
            self.stale[name] = [self.templates.get(name), self.informer_lag]
        self.templates[name] = template

    def _op_WorkflowTemplateService_UpdateWorkflowTemplate(
        self, namespace: str, name: str, body: dict
    ) -> tuple:
        template = body["template"]
        current = self.templates.get(template["metadata"]["name"])
        if current is None:
            raise Refused(404, 5, f'workflowtemplates.argoproj.io "{name}" not found')
        version = template["metadata"].get("resourceVersion")
        if version != current["metadata"]["resourceVersion"]:
            raise Refused(
                409,
                10,
                f'Operation cannot be fulfilled on workflowtemplates "{name}": the '
                "object has been modified; please apply your changes to the latest version",
            )
        stored = {**template, "metadata": {**template["metadata"], "namespace": namespace}}
        stored["metadata"]["resourceVersion"] = str(int(version) + 1)
        self._store(name, stored)
        return stored, TEMPLATE
