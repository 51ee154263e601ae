"""Which manifests may be sent to a real Argo Server, and why the others are not.

Argo's validation evaluates expression tags (`{{=…}}`): ProcessArgs substitutes every template with its
inputs and the workflow's variables, evaluating each expression whose variables it knows
(util/template/expression_template.go:241-248, expressionReplaceCore; `sprig` is always known,
util/expr/env/env.go:28). The server's lint endpoint does so too, and one expression can cost it any
amount of memory: `{{=sprig.repeat(2000000000, "x")}}` in one request of 1 KB makes a 2 GB string.

The rule: a manifest is sent only when each of its expression tags calls nothing but a few functions
whose result is no larger than what they are given (CHEAP_CALLS; no `sprig.` function at all), makes
no range (`..`), and holds no number above MAX_NUMBER outside its string literals; and when its JSON is
at most MAX_BYTES. Anything else is not sent, with the reason.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

MAX_BYTES = 1024 * 1024
MAX_NUMBER = 1000
# expr-lang builtins and Argo's own functions (util/expr/env) whose result is no larger than what they
# are given: none repeats or generates.
CHEAP_CALLS = frozenset(
    {"asInt", "asFloat", "jsonpath", "string", "int", "float", "len", "lower", "upper", "trim"}
    | {"filter", "map", "toJson"}
)
STRING_LITERAL = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`[^`]*`""", re.DOTALL)
CALL = re.compile(r"([A-Za-z_$][\w$]*(?:\s*\.\s*[A-Za-z_$][\w$]*)*)\s*\(")
NUMBER = re.compile(
    r"(?<![\w.])(0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|\d[\d_]*(?:\.\d*)?(?:[eE][+-]?\d+)?)"
)


def expression_tags(text: str) -> Iterator[str]:
    """Each expression tag's expression, found as fasttemplate finds tags (a `{{` closed by the next
    `}}`, or by the end of the text when none follows); a tag whose text starts with `=` after any
    spaces counts, though Argo itself reads only `=` as its first character (util/template/kind.go)."""
    start = text.find("{{")
    while start != -1:
        end = text.find("}}", start + 2)
        tag = text[start + 2 : end if end != -1 else len(text)]
        if tag.lstrip().startswith("="):
            yield tag.lstrip()[1:]
        if end == -1:
            return
        start = text.find("{{", end + 2)


def _unescaped(expression: str) -> str:
    """The expression as Argo compiles it: the JSON string's escapes undone (expressionReplaceCore)."""
    try:
        return str(json.loads(f'"{expression}"'))
    except json.JSONDecodeError:
        return expression


def _number(literal: str) -> float:
    digits = literal.replace("_", "")
    if digits[:2].lower() in ("0x", "0o", "0b"):
        return int(digits, 0)
    return float(digits)


def costly(expression: str) -> str | None:
    """Why evaluating EXPRESSION could cost the server much, or None when it cannot."""
    code = STRING_LITERAL.sub("''", _unescaped(expression))
    for call in CALL.findall(code):
        name = re.sub(r"\s+", "", call)
        if name not in CHEAP_CALLS:
            return f"it calls {name}()"
    if ".." in code:
        return "it makes a range (..)"
    for literal in NUMBER.findall(code):
        if _number(literal) > MAX_NUMBER:
            return f"it holds the number {literal}"
    return None


def withheld(document: Mapping[str, Any]) -> str | None:
    """Why DOCUMENT must not be sent to a real Argo Server, or None when it may be."""
    text = json.dumps(document, ensure_ascii=False)
    if len(text.encode()) > MAX_BYTES:
        return f"its JSON is larger than {MAX_BYTES // 1024} KiB"
    for expression in expression_tags(text):
        if reason := costly(expression):
            shown = " ".join(_unescaped(expression).split())
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            return f"an expression tag may be costly to evaluate: {reason} ({{{{={shown}}}}})"
    return None
