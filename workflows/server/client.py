"""The Argo Server through Hera's `WorkflowsService`, configured as Argo's own CLI is (ARGO_SERVER,
ARGO_TOKEN, ARGO_NAMESPACE, ...); every failure one ArgoError line saying what to do about it."""

from __future__ import annotations

import os
import re
import ssl
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import pydantic
import requests
import urllib3
from hera import exceptions as hera_errors
from hera.workflows import WorkflowsService
from hera.workflows import models as m

from steps.lib.errors import ProjectError
from workflows.errors import WorkflowError
from workflows.pipeline import resources

TIMEOUT_SECONDS = 30
# The Argo Server answers template reads from an informer's cache (server/apiserver/argoserver.go:
# wftmplStore), which trails the API server's writes: a read right after a write may miss it.
CACHE_WAITS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)  # seconds between tries: 15.75 s at most in all
TRUE = {"1", "true", "yes", "on"}
# How hera.exceptions word an answer other than 2xx: "Server returned status code 401 with message: `...`"
HERA_MESSAGE = re.compile(r"status code (\d+) with message: `(.*)`\s*$", re.DOTALL)
# A spec the server's lint refuses: LintWorkflow answers HTTP 500 (server/workflow/workflow_server.go:716),
# LintWorkflowTemplate 400 (server/workflowtemplate/workflow_template_server.go:191-193).
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
        return f"{self.root}workflows/{self.namespace}/{name}"


def from_environment(
    environ: Mapping[str, str] = os.environ,
    server: str | None = None,
    namespace: str | None = None,
    insecure_skip_verify: bool | None = None,
    base_href: str | None = None,
) -> ArgoServer | None:
    """The server the arguments or ARGO_* name (`host:port` is https unless ARGO_SECURE=false, as
    Argo's CLI reads it); None when no server is named."""
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


def _wrapped(error: BaseException) -> Iterator[BaseException]:
    """`error` and all it wraps: Python's chain, urllib3's `reason`, requests' urllib3 error."""
    yield error
    inner = (error.__cause__ or error.__context__, getattr(error, "reason", None), *error.args)
    for each in {id(e): e for e in inner if isinstance(e, BaseException)}.values():
        yield from _wrapped(each)


def _connection_error(server: ArgoServer, error: requests.RequestException) -> ArgoError:
    causes = list(_wrapped(error))
    if unverified := [c for c in causes if isinstance(c, ssl.SSLCertVerificationError)]:
        return ArgoError(
            f"TLS: cannot verify the certificate of {server.url} ({unverified[0].verify_message}); "
            "a port-forwarded Argo Server has a self-signed one: set ARGO_INSECURE_SKIP_VERIFY=true"
        )
    if isinstance(error, requests.exceptions.SSLError):
        return ArgoError(
            f"TLS failed with {server.url}; if the server runs without TLS "
            "(argo server --secure=false), use an http:// ARGO_SERVER"
        )
    reasons = [c.strerror for c in causes if isinstance(c, OSError) and c.strerror] or [str(error)]
    return ArgoError(
        f"cannot reach the Argo Server at {server.url} ({reasons[0]}); is "
        "`kubectl -n argo port-forward svc/argo-server 2746:2746` running, and ARGO_SERVER right?"
    )


def _answer(error: hera_errors.HeraException) -> tuple[int, str]:
    """The status of an answer other than 2xx, and the server's message on one line."""
    match = HERA_MESSAGE.search(str(error))
    if match is None:
        return getattr(error, "status_code", 0), " ".join(str(error).split())
    return int(match[1]), " ".join(match[2].split())


def _refusal(server: ArgoServer, error: hera_errors.HeraException) -> ArgoError:
    """One actionable line for an answer other than 2xx, from the status and the server's message."""
    status, detail = _answer(error)
    where = f"namespace {server.namespace!r}"
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
            f"the token in ARGO_TOKEN may not do this in {where} (403 {detail}); use a token of a "
            "ServiceAccount allowed there, or check the namespace (ARGO_NAMESPACE, --namespace): in "
            "one that does not exist only an administrator's token is told so, any other's is "
            "refused like this"
        )
    if status == 404 and "namespace" in detail.lower():
        return ArgoError(
            f"{where} does not exist on the cluster ({detail}); set ARGO_NAMESPACE or --namespace"
        )
    if status == 404 and detail.startswith("workflowtemplates"):
        return ArgoError(
            f"no such WorkflowTemplate in {where} ({detail}); register it "
            "first: python workflows/submit.py --register"
        )
    if status == 404 and detail.startswith("workflows"):
        return NoSuchRun(
            f"the Argo Server holds no such run in {where} ({detail}); "
            "it may have ended longer ago than its TTL: python workflows/submit.py --list"
        )
    if status == 409 and "already exists" not in detail:
        return ArgoError(
            f"someone else changed it while this was sent (409 {detail}); run the command again"
        )
    if status == 409:
        return ArgoError(f"the name is already taken in {where} ({detail}); choose another --name")
    return ArgoError(f"the Argo Server answered {status or 'an error'}: {detail}")


def call(server: ArgoServer, operation: Callable[[WorkflowsService], Any]) -> Any:
    """`operation` on Hera's client for this server, its answer as the JSON the server sent; whatever
    Hera, requests or pydantic raise becomes one ArgoError."""
    try:
        with warnings.catch_warnings():
            if server.insecure_skip_verify:  # asked for: do not warn on every request
                warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
            warnings.simplefilter("ignore", DeprecationWarning)  # Hera calls pydantic's .json()
            with WorkflowsService(
                host=server.root,  # Hera joins "api/v1/..." to it: the base href stays in every path
                verify_ssl=not server.insecure_skip_verify,
                token=server.token.strip() or None,  # Hera adds 'Bearer ' to a bare token
                namespace=server.namespace,
                session=_TimedSession(),
            ) as argo:
                answer = operation(argo)
    except hera_errors.HeraException as error:
        raise _refusal(server, error) from None
    except requests.JSONDecodeError:
        raise ArgoError(
            f"{server.url} did not answer with JSON; is ARGO_SERVER the Argo Server?"
        ) from None
    except requests.RequestException as error:
        raise _connection_error(server, error) from None
    except (KeyError, pydantic.ValidationError) as error:  # an answer that is not Argo's API
        raise ArgoError(
            f"{server.url} answered with something other than the Argo Server's API "
            f"({type(error).__name__}); is ARGO_SERVER the Argo Server?"
        ) from None
    if isinstance(answer, pydantic.BaseModel):
        return answer.model_dump(mode="json", by_alias=True, exclude_none=True)
    return answer


def lint(server: ArgoServer, document: dict) -> None:
    """The Argo Server's own validation of a Workflow or WorkflowTemplate, which creates nothing;
    WorkflowError with the server's reason when it refuses the spec: nothing is created or registered."""
    kind, namespace = document["kind"], server.namespace

    def check(argo: WorkflowsService) -> None:
        try:
            if kind == "WorkflowTemplate":
                template = m.WorkflowTemplate(**document)
                argo.lint_workflow_template(
                    m.WorkflowTemplateLintRequest(namespace=namespace, template=template)
                )
            else:
                argo.lint_workflow(
                    m.WorkflowLintRequest(namespace=namespace, workflow=m.Workflow(**document))
                )
        except hera_errors.HeraException as error:
            status, detail = _answer(error)
            if status not in LINT_REFUSALS:
                raise
            raise WorkflowError(f"the Argo Server refuses the {kind}: {detail}") from None

    call(server, check)


def create_workflow(server: ArgoServer, workflow: dict) -> dict:
    request = m.WorkflowCreateRequest(namespace=server.namespace, workflow=m.Workflow(**workflow))
    return call(server, lambda argo: argo.create_workflow(request))


def stop_workflow(server: ArgoServer, name: str, message: str) -> dict:
    """Stop a run as the Argo UI's Stop does: its running steps are ended, and it fails."""
    request = m.WorkflowStopRequest(name=name, namespace=server.namespace, message=message)
    return call(server, lambda argo: argo.stop_workflow(name, request))


def _retried(attempt: Callable[[], Answer], refused: type[Exception], waits: tuple) -> Answer:
    """`attempt`, tried again after each wait while the server's trailing cache makes it fail so."""
    for wait in waits:
        try:
            return attempt()
        except refused:
            time.sleep(wait)
    return attempt()


def register_template(server: ArgoServer, template: dict) -> bool:
    """Create the WorkflowTemplate or replace it, then await the server's cache; True when created. A
    write the cache makes fail (name taken, or a Conflict) is tried again from a fresh read."""
    name, namespace = template["metadata"]["name"], server.namespace

    def version(argo: WorkflowsService) -> str | None:
        try:
            return argo.get_workflow_template(name).metadata.resource_version
        except hera_errors.NotFound:
            return None

    def write(argo: WorkflowsService) -> tuple[m.WorkflowTemplate, bool]:
        current = version(argo)
        metadata = {**template["metadata"], "resourceVersion": current}
        sent = m.WorkflowTemplate(**{**template, "metadata": metadata})
        if current is None:
            request = m.WorkflowTemplateCreateRequest(namespace=namespace, template=sent)
            return argo.create_workflow_template(request), True
        update = m.WorkflowTemplateUpdateRequest(name=name, namespace=namespace, template=sent)
        return argo.update_workflow_template(name, update), False

    def register(argo: WorkflowsService) -> bool:
        stored, created = _retried(lambda: write(argo), hera_errors.AlreadyExists, CACHE_WAITS)
        for pause in (0.0, *CACHE_WAITS):  # a bounded wait for the cache to show the write
            time.sleep(pause)
            if version(argo) == stored.metadata.resource_version:
                break
        return created

    return call(server, register)


def submit_from_template(
    server: ArgoServer, template_name: str, parameters: Mapping[str, str], name: str | None
) -> dict:
    """Start a run of a registered WorkflowTemplate, named as direct runs; a template the server's cache
    does not show yet (workflow_server.go: SubmitWorkflow) is asked for again a few times."""
    options = m.SubmitOpts(
        parameters=[f"{key}={value}" for key, value in parameters.items()],
        generate_name=None if name else resources.RUN_PREFIX,
        name=name,
    )
    request = m.WorkflowSubmitRequest(
        namespace=server.namespace,
        resource_kind="WorkflowTemplate",
        resource_name=template_name,
        submit_options=options,
    )
    # 1.75 s in all: the cache trails by moments, not seconds
    submit = partial(_retried, refused=hera_errors.NotFound, waits=CACHE_WAITS[:3])
    return call(server, lambda argo: submit(lambda: argo.submit_workflow(request)))
