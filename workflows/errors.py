"""Refusals of submit.py, which exits 2 on them: nothing ran (a failed try exits 1: ArgoError, a run)."""

from __future__ import annotations

from steps.lib.errors import ProjectError


class UsageError(ProjectError):
    """submit.py was asked for something it cannot do as asked (e.g. --watch without an Argo Server)."""


class WorkflowError(ProjectError):
    """The compiled workflow cannot run as written: a cycle, a missing template, a refused spec."""


class UnsupportedFeature(WorkflowError):
    """The spec uses an Argo feature the local runner does not implement."""


class UnresolvedReference(WorkflowError):
    """A {{...}} expression names something that does not exist."""
