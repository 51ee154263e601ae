"""The project's own errors. Each says in one line what went wrong, for the person who reads it."""

from __future__ import annotations

# A step's exit code for a StepError: bad input, which fails again however often it is tried (the
# pipeline's retry strategy leaves it alone).
EXIT_BAD_INPUT = 2


class ProjectError(Exception):
    """Every error the project raises on purpose (not a bug): str() is one line for people."""


class StepError(ProjectError):
    """A step's bad input or failed precondition: one line on stderr and exit code 2 (not retried)."""


class ArtifactNotFound(StepError):
    """A key that names nothing in the store; for a step, a missing input."""
