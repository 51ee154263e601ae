"""Argo's `{{…}}` template tags: finding, checking and substituting them, for the lint and the local runner.

Follows Argo v4.1.2: `util/template` (tags are found with fasttemplate over the JSON of an object; `{{=…}}`
expression tags are never checked), `workflow/validate/validate.go:resolveAllVariables` (which references
resolve, and the prefixes it lets through), and `workflow/common/util.go:SubstituteParams` (globals first,
then inputs, over the JSON text; validation lets unresolved tags through, a run does not).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Mapping, Set
from typing import Any

# workflow/common/common.go:GlobalVarValidWorkflowVariablePrefix: only tags starting so are checked.
CHECKED_PREFIXES = ("item.", "steps.", "inputs.", "outputs.", "pod.", "workflow.", "tasks.")
# resolveAllVariables: tags under these prefixes resolve at run time, so they always pass.
RUNTIME_PREFIXES = (
    "outputs.",  # a template's own outputs, for its metrics
    "workflow.creationTimestamp",
    "workflow.scheduledTime",
    "workflow.duration",
    "tasks.name",
    "steps.name",
    "node.name",
)
WORKFLOW_PARAMETERS = "workflow.parameters"
# A scope entry ending in ".*" lets through every reference under its prefix: Argo's `item.*` (withParam)
# and `workflow.outputs.{parameters,artifacts}.*` (a globalName that is itself a parameter).
ANY_SUFFIX = ".*"
# util/template: the internal placeholders validation substitutes for values known only at run time.
PLACEHOLDER_PREFIX = "__argo__internal__placeholder-"
# validate.go:paramRegex: a string holding a simple reference, e.g. a globalName given as a parameter.
PARAMETER_RE = re.compile(r"{{[-a-zA-Z0-9]+(\.[-a-zA-Z0-9_]+)*}}")

START, END = "{{", "}}"


class TagError(ValueError):
    """A `{{` without its `}}` (fasttemplate refuses the whole text)."""


class UnresolvedTag(ValueError):
    """A tag with no value where every tag must have one (a run, not its validation)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"failed to resolve {{{{{name}}}}}")
        self.name = name


class Placeholders:
    """Fresh placeholder values, one per variable that has no value before the run."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)

    def next(self) -> str:
        return f"{PLACEHOLDER_PREFIX}{next(self._counter)}"


def is_placeholder(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(PLACEHOLDER_PREFIX)


def is_parameter(text: str) -> bool:
    """Whether `text` contains a simple reference such as `{{inputs.parameters.x}}`."""
    return PARAMETER_RE.search(text) is not None


def go_json(value: Any) -> str:
    """JSON text as Go's encoding/json writes it (HTML-safe escapes), the text Argo scans for tags."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
GO_ESCAPES |= {"\v": "\\v", "\\": "\\\\", '"': '\\"'}


def go_quote(text: str) -> str:
    """`text` as Go's %q (strconv.Quote) writes it: printable characters as they are, the rest escaped."""
    out = []
    for char in text:
        if char in GO_ESCAPES:
            out.append(GO_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'


def _spans(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, tag) for each `{{tag}}`, as fasttemplate finds them: the first `}}` closes a tag."""
    position = 0
    while (start := text.find(START, position)) >= 0:
        end = text.find(END, start + len(START))
        if end < 0:
            # fasttemplate v1.2.2, template.go:260: the whole text, then what follows the `{{`
            rest = text[start + len(START) :]
            raise TagError(
                f'Cannot find end tag="}}}}" in the template={go_quote(text)} starting from '
                f"{go_quote(rest)}"
            )
        yield start, end + len(END), text[start + len(START) : end]
        position = end + len(END)


def tags(text: str) -> list[str]:
    """Every tag in `text`, in order (raises TagError for an unclosed `{{`)."""
    return [tag for _, _, tag in _spans(text)]


def is_expression(tag: str) -> bool:
    """`{{=…}}`: an expression tag, which validation never checks."""
    return tag.startswith("=")


def has_expression(text: str) -> bool:
    """Whether `text` holds an expression tag (a `{{` never closed holds none)."""
    try:
        return any(is_expression(tag) for tag in tags(text))
    except TagError:
        return False


def has_simple_tag(text: str) -> bool:
    """validate.go:VerifyResolvedVariables: any simple tag left means the object needs run-time values."""
    try:
        return any(not is_expression(tag) for tag in tags(text))
    except TagError:
        return True


def unresolved(
    text: str, scope: Set[str], globals_: Mapping[str, str], template_validation: bool
) -> str | None:
    """The first simple tag in `text` that does not resolve in `scope`, as Argo's error names it.

    validate.go:resolveAllVariables. Raises TagError when a `{{` is never closed.
    """
    wildcards = [entry[: -len(ANY_SUFFIX) + 1] for entry in scope if entry.endswith(ANY_SUFFIX)]
    for tag in tags(text):
        if is_expression(tag):
            continue
        name = tag.strip()
        if not name.startswith(CHECKED_PREFIXES) or name in scope or name in globals_:
            continue
        if any(name.startswith(prefix) for prefix in wildcards):
            continue
        if name.startswith(RUNTIME_PREFIXES):
            continue
        if template_validation and name.startswith(WORKFLOW_PARAMETERS):
            # a WorkflowTemplate's parameters may come from the Workflow that runs it
            continue
        return f"failed to resolve {{{{{tag}}}}}"
    return None


def _escaped(value: str) -> str:
    """`value` as it sits inside a JSON string (Argo quotes replacements before inserting them)."""
    return go_json(value)[1:-1]


def substitute(text: str, values: Mapping[str, str], allow_unresolved: bool = True) -> str:
    """Replace each tag named in `values` in `text` (JSON text: values are escaped for a JSON string).

    util/template Replace: with `allow_unresolved`, as SubstituteParams calls it during validation, other
    tags and expressions stay as written; without it, as a run calls it, a tag not in `values` raises
    UnresolvedTag (an expression too: this project never evaluates one). TagError for an unclosed `{{`.
    """
    pieces, position = [], 0
    for start, end, tag in _spans(text):
        name = tag.strip()
        if is_expression(tag) or name not in values:
            if allow_unresolved:
                continue
            raise UnresolvedTag(name)
        pieces += [text[position:start], _escaped(values[name])]
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def substitute_value(value: Any, values: Mapping[str, str]) -> Any:
    """`value` (a string, or lists and maps of them) with every tag replaced, as a run substitutes them:
    over its Go JSON text (SubstituteParams); UnresolvedTag for a tag without a value."""
    return json.loads(substitute(go_json(value), values, allow_unresolved=False))
