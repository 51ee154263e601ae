"""The Argo Server through Hera's `WorkflowsService`, configured as Argo's own CLI is (ARGO_SERVER,
ARGO_TOKEN, ARGO_NAMESPACE, ...); every failure one ArgoError line saying what to do about it."""

from __future__ import annotations

import os
import re
import ssl
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import pydantic
import requests
import urllib3
from hera import exceptions as hera_errors
from hera.workflows import WorkflowsService
from hera.workflows import models as m

from steps.lib.errors import ProjectError
from workflows.errors import WorkflowRefused
from workflows.pipeline import resources

TIMEOUT_SECONDS = 30
# The Argo Server answers template reads from an informer's cache (server/apiserver/argoserver.go:
# wftmplStore), which trails the API server's writes: a read right after a write may miss it.
CACHE_WAITS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)  # seconds between tries: 15.75 s at most in all
TRUE = {"1", "true", "yes", "on"}
# How hera.exceptions word an answer other than 2xx: "Server returned status code 401 with message: `...`"
HERA_MESSAGE = re.compile(r"status code (\d+) with message: `(.*)`\s*$", re.DOTALL)
# How the server answers a spec its validation refuses at lint: LintWorkflow returns validate.go's error as
# it is, which gRPC makes Unknown, HTTP 500 (server/workflow/workflow_server.go:716); LintWorkflowTemplate
# makes it InvalidArgument, HTTP 400 (server/workflowtemplate/workflow_template_server.go:191-193).
LINT_REFUSALS = (400, 500)
Answer = TypeVar("Answer")


class ArgoError(ProjectError):
    """The Argo Server could not do what was asked; the message is one line for the user."""


class NoSuchRun(ArgoError):
    """The namespace holds no Workflow of that name (404): never run there, or deleted since."""


@dataclass(frozen=True)
class ArgoServer:
    """Where the server is and how to talk to it."""

    url: str  # scheme://host:port, without the base href
    namespace: str = resources.NAMESPACE
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


def from_environment(
    environ: Mapping[str, str] = os.environ,
    server: str | None = None,
    namespace: str | None = None,
    insecure_skip_verify: bool | None = None,
    base_href: str | None = None,
) -> ArgoServer | None:
    """The server named by the arguments or, failing them, ARGO_*; None when no server is named.
    ARGO_SERVER is `host:port` (https unless ARGO_SECURE=false) or a full URL, as Argo's CLI reads it."""
    address = (server or environ.get("ARGO_SERVER", "")).strip().rstrip("/")
    if not address:
        return None
    if "://" not in address:
        secure = environ.get("ARGO_SECURE", "true").lower() in TRUE
        address = f"{'https' if secure else 'http'}://{address}"
    if insecure_skip_verify is None:
        insecure_skip_verify = environ.get("ARGO_INSECURE_SKIP_VERIFY", "").lower() in TRUE
    return ArgoServer(
        url=address,
        namespace=namespace or environ.get("ARGO_NAMESPACE") or resources.NAMESPACE,
        token=environ.get("ARGO_TOKEN", ""),
        insecure_skip_verify=insecure_skip_verify,
        base_href=base_href or environ.get("ARGO_BASE_HREF") or "/",
    )


class _TimedSession(requests.Session):
    """Hera's client passes no timeout; a dropped port-forward must not hang the CLI forever."""

    def request(self, *args: Any, **kwargs: Any) -> requests.Response:
        kwargs.setdefault("timeout", TIMEOUT_SECONDS)
        return super().request(*args, **kwargs)


def service(server: ArgoServer) -> WorkflowsService:
    """Hera's client for this server. ARGO_TOKEN may be 'Bearer ...' (as Argo's CLI prints it) or bare:
    Hera adds 'Bearer ' to a bare token."""
    return WorkflowsService(
        host=server.root,  # Hera joins "api/v1/..." to it, so the base href stays in every path
        verify_ssl=not server.insecure_skip_verify,
        token=server.token.strip() or None,
        namespace=server.namespace,
        session=_TimedSession(),
    )


def _find(error: BaseException | None, kind: type[BaseException]) -> BaseException | None:
    """The first exception of `kind` wrapped anywhere in `error` (requests wraps urllib3 wraps ssl)."""
    seen: set[int] = set()
    stack: list[Any] = [error]
    while stack:
        current = stack.pop()
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, kind):
            return current
        stack.extend([*current.args, getattr(current, "reason", None)])
        stack.extend([current.__cause__, current.__context__])
    return None


def _connection_error(server: ArgoServer, error: requests.RequestException) -> ArgoError:
    unverified = _find(error, ssl.SSLCertVerificationError)
    if isinstance(unverified, ssl.SSLCertVerificationError):
        return ArgoError(
            f"TLS: cannot verify the certificate of {server.url} ({unverified.verify_message}); "
            "a port-forwarded Argo Server has a self-signed one: set ARGO_INSECURE_SKIP_VERIFY=true"
        )
    tls = _find(error, ssl.SSLError)
    if isinstance(tls, ssl.SSLError):
        return ArgoError(
            f"TLS failed with {server.url} ({tls.reason or tls}); if the server runs "
            "without TLS (argo server --secure=false), use an http:// ARGO_SERVER"
        )
    reason = _find(error, OSError) or error
    return ArgoError(
        f"cannot reach the Argo Server at {server.url} ({' '.join(str(reason).split())}); is "
        "`kubectl -n argo port-forward svc/argo-server 2746:2746` running, and ARGO_SERVER right?"
    )


def _refusal(server: ArgoServer, error: hera_errors.HeraException) -> ArgoError:
    """One actionable line for an answer other than 2xx, from the status and the server's message."""
    match = HERA_MESSAGE.search(str(error))
    status = int(match.group(1)) if match else getattr(error, "status_code", 0)
    detail = " ".join((match.group(2) if match else str(error)).split())
    if status == 401:
        hint = "set ARGO_TOKEN" if not server.token else "ARGO_TOKEN is not accepted; renew it"
        return ArgoError(
            f"the Argo Server wants a valid token (401 {detail}): {hint}, e.g. "
            f'ARGO_TOKEN="Bearer $(kubectl -n {server.namespace} create token {resources.SUBMITTER_ACCOUNT})"'
        )
    if status == 403 and "quota" in detail:
        return ArgoError(
            f"the namespace's quota refused the run (403 {detail}); wait for runs to end or for "
            "their TTL, or raise the quota (infra/k8s/base/resource-limits.yaml)"
        )
    if status == 403 and "ValidatingAdmissionPolicy" in detail:
        return ArgoError(
            f"the cluster's admission policy refused the Workflow (403 {detail}); "
            "see docs/argo.md, who may do what"
        )
    if status == 403:
        return ArgoError(
            f"the token in ARGO_TOKEN may not do this in namespace {server.namespace!r} "
            f"(403 {detail}); use a token of a ServiceAccount allowed there, or check the namespace "
            "(ARGO_NAMESPACE, --namespace): in one that does not exist only an administrator's token "
            "is told so, any other's is refused like this"
        )
    if status == 404 and "namespace" in detail.lower():
        return ArgoError(
            f"namespace {server.namespace!r} does not exist on the cluster ({detail}); "
            "set ARGO_NAMESPACE or --namespace"
        )
    if status == 404 and detail.startswith("workflowtemplates"):
        return ArgoError(
            f"no such WorkflowTemplate in namespace {server.namespace!r} ({detail}); register it "
            "first: python workflows/submit.py --register"
        )
    if status == 404 and detail.startswith("workflows"):
        return NoSuchRun(
            f"the Argo Server holds no such run in namespace {server.namespace!r} ({detail}); "
            "it may have ended longer ago than its TTL: python workflows/submit.py --list"
        )
    if status == 409 and "already exists" not in detail:
        return ArgoError(
            f"someone else changed it while this was sent (409 {detail}); run the command again"
        )
    if status == 409:
        return ArgoError(
            f"the name is already taken in namespace {server.namespace!r} ({detail}); "
            "choose another --name"
        )
    return ArgoError(f"the Argo Server answered {status or 'an error'}: {detail}")


def _call(server: ArgoServer, operation: Callable[[WorkflowsService], Answer]) -> Answer:
    """`operation` on Hera's client; whatever Hera, requests or pydantic raise becomes one ArgoError."""
    try:
        with warnings.catch_warnings(), service(server) as argo:
            if server.insecure_skip_verify:  # asked for: do not warn on every request
                warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
            warnings.simplefilter("ignore", DeprecationWarning)  # Hera calls pydantic's .json()
            return operation(argo)
    except hera_errors.HeraException as error:
        raise _refusal(server, error) from None
    except requests.JSONDecodeError:
        raise ArgoError(
            f"{server.url} did not answer with JSON; is ARGO_SERVER the Argo Server?"
        ) from None
    except requests.RequestException as error:
        raise _connection_error(server, error) from None
    except (KeyError, pydantic.ValidationError) as error:
        # an error answer without Argo's "message", or a body that is not an Argo resource
        raise ArgoError(
            f"{server.url} answered with something other than the Argo Server's API "
            f"({type(error).__name__}); is ARGO_SERVER the Argo Server?"
        ) from None


def _as_dict(resource: pydantic.BaseModel) -> dict:
    """A Hera model as the JSON document the server sent."""
    return resource.model_dump(mode="json", by_alias=True, exclude_none=True)


def lint(server: ArgoServer, document: dict) -> None:
    """The Argo Server's own validation of a Workflow or WorkflowTemplate (validate.go, as at create),
    which creates nothing; WorkflowRefused with the server's reason when it refuses the spec."""
    kind = document["kind"]

    def check(argo: WorkflowsService) -> None:
        try:
            if kind == "WorkflowTemplate":
                template = m.WorkflowTemplate(**document)
                argo.lint_workflow_template(
                    m.WorkflowTemplateLintRequest(namespace=server.namespace, template=template)
                )
            else:
                workflow = m.Workflow(**document)
                argo.lint_workflow(
                    m.WorkflowLintRequest(namespace=server.namespace, workflow=workflow)
                )
        except hera_errors.HeraException as error:
            match = HERA_MESSAGE.search(str(error))
            if match is None or int(match.group(1)) not in LINT_REFUSALS:
                raise
            reason = " ".join(match.group(2).split())
            raise WorkflowRefused(f"the Argo Server refuses the {kind}: {reason}") from None

    _call(server, check)


def create_workflow(server: ArgoServer, workflow: dict) -> dict:
    """Submit a Workflow; returns it as created, with its generated name."""
    request = m.WorkflowCreateRequest(namespace=server.namespace, workflow=m.Workflow(**workflow))
    return _as_dict(_call(server, lambda argo: argo.create_workflow(request)))


def get_workflow(server: ArgoServer, name: str) -> dict:
    """The Workflow with its current status and nodes."""
    return _as_dict(_call(server, lambda argo: argo.get_workflow(name)))


def list_workflows(server: ArgoServer) -> list[dict]:
    """Every Workflow of the namespace the server still holds, with its spec and status."""
    listed = _call(server, lambda argo: argo.list_workflows())
    return [_as_dict(workflow) for workflow in listed.items or []]


def retry_workflow(server: ArgoServer, name: str) -> dict:
    """Run a failed Workflow's failed tasks again, keeping those that succeeded, as the Argo UI's
    Retry does (server/workflow/workflow_server.go: RetryWorkflow)."""
    request = m.WorkflowRetryRequest(name=name, namespace=server.namespace)
    return _as_dict(_call(server, lambda argo: argo.retry_workflow(name, request)))


def stop_workflow(server: ArgoServer, name: str, message: str) -> dict:
    """Stop a run as the Argo UI's Stop does: its running steps are ended, and it fails."""
    request = m.WorkflowStopRequest(name=name, namespace=server.namespace, message=message)
    return _as_dict(_call(server, lambda argo: argo.stop_workflow(name, request)))


def register_template(
    server: ArgoServer, template: dict, sleep: Callable[[float], None] = time.sleep
) -> tuple[dict, bool]:
    """Create the WorkflowTemplate, or replace it as Hera's WorkflowTemplate.update() does; returns
    (it, created?) once the server's cached reads see it. A create refused as existing or an update
    refused as a Conflict (the cache trailed a write) is tried again from a fresh read, a few times."""
    name = template["metadata"]["name"]

    def version(argo: WorkflowsService) -> str | None:
        try:
            return argo.get_workflow_template(name).metadata.resource_version
        except hera_errors.NotFound:
            return None

    def write(argo: WorkflowsService) -> tuple[m.WorkflowTemplate, bool]:
        for wait in (*CACHE_WAITS, None):
            current = version(argo)
            metadata = {**template["metadata"], "resourceVersion": current}
            try:
                if current is None:
                    stored = argo.create_workflow_template(
                        m.WorkflowTemplateCreateRequest(
                            namespace=server.namespace, template=m.WorkflowTemplate(**template)
                        )
                    )
                else:
                    stored = argo.update_workflow_template(
                        name,
                        m.WorkflowTemplateUpdateRequest(
                            name=name,
                            namespace=server.namespace,
                            template=m.WorkflowTemplate(**{**template, "metadata": metadata}),
                        ),
                    )
            except hera_errors.AlreadyExists:  # name taken, or Conflict: the cache was behind
                if wait is None:
                    raise
                sleep(wait)
                continue
            for pause in (0.0, *CACHE_WAITS):  # a bounded wait for the cache to show the write
                sleep(pause)
                if version(argo) == stored.metadata.resource_version:
                    break
            return stored, current is None
        raise AssertionError("unreachable")

    stored, created = _call(server, write)
    return _as_dict(stored), created


def submit_from_template(
    server: ArgoServer,
    template_name: str,
    parameters: Mapping[str, str],
    generate_name: str,
    name: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> dict:
    """Start a run of a registered WorkflowTemplate with these parameter values, named as direct runs
    (submitOptions.generateName: workflow/common/convert.go); a template the server's cache does not
    show yet (workflow_server.go: SubmitWorkflow) is asked for again a few times."""
    options = m.SubmitOpts(
        parameters=[f"{key}={value}" for key, value in parameters.items()],
        generate_name=None if name else generate_name,
        name=name,
    )
    request = m.WorkflowSubmitRequest(
        namespace=server.namespace,
        resource_kind="WorkflowTemplate",
        resource_name=template_name,
        submit_options=options,
    )

    def submit(argo: WorkflowsService) -> m.Workflow:
        for wait in (*CACHE_WAITS[:3], None):  # 1.75 s: the cache trails by moments, not seconds
            try:
                return argo.submit_workflow(request)
            except hera_errors.NotFound:
                if wait is None:
                    raise
                sleep(wait)
        raise AssertionError("unreachable")

    return _as_dict(_call(server, submit))
