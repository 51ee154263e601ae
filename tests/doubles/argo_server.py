"""A double of the Argo Server, for the tests that cannot use the cluster (a mock: no Argo Server runs
here): the operations of its published OpenAPI the offline tests call, refused in its words (404, 409),
linted as it does only when a test sets `lint_refusal` (tests/cluster/test_lint_agrees.py), template
reads trailing writes by `informer_lag` reads as its cache does (argoserver.go: wftmplStore). A created
run replays a recording of a real run (tests/doubles/recordings.py): each GET its next status."""

from __future__ import annotations

import json
import random
import re
import string
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from tests.doubles import recordings
from tests.doubles.recordings import Recording
from tests.support.argo_schema import openapi

# The real server's lint of the pipeline with continueOn beside depends on a task of its DAG (validate.go:1477).
REFUSED_CONTINUE_ON = (
    "templates.pipeline cannot use 'continueOn' when using 'depends'. Instead use "
    "'dep-task.Failed'/'dep-task.Errored'"
)

# The API server's words for an update of an older version than it holds (apimachinery's NewConflict).
CONFLICT = (
    'Operation cannot be fulfilled on workflowtemplates "{name}": the object has been modified; '
    "please apply your changes to the latest version"
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
    stopped_at: int | None = None  # the read StopWorkflow came at

    def index(self) -> int:
        """The recorded status the run is at: each read moves it on by one."""
        recording, reads = self.recording, self.reads
        last = len(recording.statuses) - 1
        if self.stopped_at is None:
            before_stop = last if recording.stopped is None else recording.stopped - 1
            return max(0, min(reads - 1, before_stop))
        assert recording.stopped is not None
        return min(recording.stopped + reads - self.stopped_at, last)

    def answer(self) -> dict:
        """The Workflow as the server answers it now."""
        now = datetime.now(UTC)
        status = self.recording.served(self.index(), self.workflow["metadata"]["name"], now)
        return {**self.workflow, "status": status}


@dataclass
class ArgoDouble:
    story: str = "succeed"
    # A run read this often is an error of the test: a watch that never stops a stuck run fails
    # instead of reading its last status before the stop forever.
    max_reads: int = 1000
    base_href: str = "/"
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    runs: dict[str, Run] = field(default_factory=dict)
    templates: dict[str, dict] = field(default_factory=dict)
    informer_lag: int = 0
    lint_refusal: str | None = None  # the real server's words for the spec a test makes it refuse
    # name → [what the cache shows, reads left]
    stale: dict[str, list] = field(default_factory=dict)

    def start(self) -> str:
        """Serve in a thread; returns the base URL (http://127.0.0.1:port)."""
        double = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                double._handle(self)

            do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

            def log_message(self, *args: Any) -> None:
                pass

        self._routes = _routes()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

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
            status = 500
            answer = {"code": 13, "message": f"double: {type(error).__name__}: {error}"}
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
        body = json.loads(raw) if raw else None
        self.requests.append((handler.command, path, body))
        operation, path_values = self._operation(handler.command, path)
        namespace = path_values.get("namespace", "")
        serve = getattr(self, f"_op_{operation['operationId']}", None)
        if serve is None:
            raise Refused(501, 12, f"the double does not serve {operation['operationId']}")
        return serve(namespace, path_values.get("name"), body)

    def _operation(self, method: str, path: str) -> tuple[dict, dict[str, str]]:
        """The OpenAPI operation this request is, and its path parameters."""
        for pattern, template, item in self._routes:
            match = pattern.match(path)
            if match and method.lower() in item:
                names = re.findall(r"{([^/]+?)}", template)
                return item[method.lower()], dict(zip(names, match.groups(), strict=True))
        raise Refused(404, 5, f"no API operation {method} {path}")

    def _run(self, name: str) -> Run:
        if name not in self.runs:
            raise Refused(404, 5, f'workflows.argoproj.io "{name}" not found')
        return self.runs[name]

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

    def _op_WorkflowService_LintWorkflow(self, _: str, __: Any, body: dict) -> dict:
        """validate.go's error as LintWorkflow returns it: gRPC Unknown, HTTP 500
        (server/workflow/workflow_server.go:716)."""
        if self.lint_refusal:
            raise Refused(500, 2, self.lint_refusal)
        return body["workflow"]

    def _op_WorkflowTemplateService_LintWorkflowTemplate(self, _: str, __: Any, body: dict) -> dict:
        """InvalidArgument, HTTP 400 (server/workflowtemplate/workflow_template_server.go:192)."""
        if self.lint_refusal:
            raise Refused(400, 3, self.lint_refusal)
        return body["template"]

    def _op_WorkflowService_CreateWorkflow(self, namespace: str, _: Any, body: dict) -> dict:
        return self._create(namespace, body["workflow"])

    def _op_WorkflowService_SubmitWorkflow(self, namespace: str, _: Any, body: dict) -> dict:
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
        return self._create(namespace, workflow)

    def _op_WorkflowService_GetWorkflow(self, _: str, name: str, __: Any) -> dict:
        run = self._run(name)
        run.reads += 1
        if run.reads > self.max_reads:
            raise RuntimeError(f"{name} was read {run.reads} times: the watch never ends")
        return run.answer()

    def _op_WorkflowService_ListWorkflows(self, namespace: str, _: Any, __: Any) -> dict:
        items = [run.answer() for run in self.runs.values()]
        return {"metadata": {"resourceVersion": "1"}, "items": items}

    def _op_WorkflowService_StopWorkflow(self, _: str, name: str, body: Any) -> dict:
        run = self._run(name)
        if run.recording.stopped is None:
            raise RuntimeError(
                f"the recording of {self.story!r} was not stopped: nothing follows a stop"
            )
        if run.stopped_at is None:
            run.stopped_at = run.reads
        return run.answer()

    def _op_WorkflowTemplateService_CreateWorkflowTemplate(
        self, namespace: str, _: Any, body: dict
    ) -> dict:
        template = body["template"]
        name = template["metadata"]["name"]
        if name in self.templates:
            raise Refused(409, 6, f'workflowtemplates.argoproj.io "{name}" already exists')
        stored = {**template, "metadata": {**template["metadata"], "namespace": namespace}}
        stored["metadata"]["resourceVersion"] = "1"
        self._store(name, stored)
        return stored

    def _op_WorkflowTemplateService_GetWorkflowTemplate(self, _: str, name: str, __: Any) -> dict:
        template = self._cached(name)
        if template is None:
            raise Refused(404, 5, f'workflowtemplates.argoproj.io "{name}" not found')
        return template

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
    ) -> dict:
        template = body["template"]
        current = self.templates.get(template["metadata"]["name"])
        if current is None:
            raise Refused(404, 5, f'workflowtemplates.argoproj.io "{name}" not found')
        version = template["metadata"].get("resourceVersion")
        if version != current["metadata"]["resourceVersion"]:
            raise Refused(409, 10, CONFLICT.format(name=name))
        stored = {**template, "metadata": {**template["metadata"], "namespace": namespace}}
        stored["metadata"]["resourceVersion"] = str(int(version) + 1)
        self._store(name, stored)
        return stored
