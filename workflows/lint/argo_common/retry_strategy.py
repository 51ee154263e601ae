"""A template's retryStrategy as Argo v4.1.2 names its parts: the retry policies it knows (wfv1.RetryPolicy,
checked by validate.go:validateTemplateHolder) and the variables a retried template sees
(util/variables/keys/retries.go), for the lint and the local runner alike."""

from __future__ import annotations

RETRY_POLICIES = ("Always", "OnFailure", "OnError", "OnTransientError")
RETRY_VARIABLES = (
    "retries",
    "lastRetry.exitCode",
    "lastRetry.status",
    "lastRetry.duration",
    "lastRetry.message",
)


def policy_error(policy: str) -> str | None:
    """Argo's complaint about a retryPolicy it does not know (an empty one is the default), else None."""
    if policy and policy not in RETRY_POLICIES:
        return f"{policy} is not a valid RetryPolicy"
    return None
