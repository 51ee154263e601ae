"""Errors of compiling, checking, submitting and running the workflow: submit.py exits 2 on a refusal
(UsageError, WorkflowError: nothing ran) and 1 when what it tried failed (ArgoError, a failed run)."""

from __future__ import annotations

from steps.lib.errors import ProjectError


class UsageError(ProjectError):
    """submit.py was asked for something it cannot do as asked (e.g. --watch without an Argo Server)."""


class WorkflowError(ProjectError):
    """The compiled workflow cannot run as written: a cycle, a missing template, a refused spec."""


class WorkflowRefused(WorkflowError):
    """The Argo Server's lint refuses the spec: nothing was created or registered."""


class UnsupportedFeature(WorkflowError):
    """The spec uses an Argo feature the local runner does not implement."""


class UnresolvedReference(WorkflowError):
    """A {{...}} expression names something that does not exist."""
