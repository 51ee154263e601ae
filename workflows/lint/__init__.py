"""An offline `argo lint`: Argo v4.1.2's validation rules, then the API server's schema constraints.

entry_point.py reads manifests and reports (`check`, `python -m workflows.lint`); validation.py walks a
document as validate.go does, with templates.py (template types, references, leaf rules) and dag.py (a DAG's
tasks, after validateDAG and common/ancestry.go); fields.py holds the field rules they share; schema.py the
CRD's constraints.
"""

from workflows.lint.entry_point import LintReport, check

__all__ = ["LintReport", "check"]
