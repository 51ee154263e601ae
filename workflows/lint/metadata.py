"""What the Kubernetes API server checks in the metadata of every object it stores, custom resources
included: a name (or a generateName) that is a DNS-1123 subdomain, label keys and values, annotation keys
and their total size. apiextensions-apiserver applies apimachinery's ValidateObjectMetaAccessor with
NameIsDNSSubdomain to a Workflow or WorkflowTemplate (pkg/registry/customresource/validator.go:53) beside
the CRD's schema; the rules and words are apimachinery v0.34's (pkg/api/validation/objectmeta.go,
pkg/util/validation/validation.go). The name the server generates from a generateName is not checked
here: it is only known once the object is created.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from workflows.lint.argo_common.tags import go_quote

SUBDOMAIN_MAX = 253  # DNS1123SubdomainMaxLength
NAME_PART_MAX = 63  # qualifiedNameMaxLength, LabelValueMaxLength
ANNOTATIONS_MAX_BYTES = 256 * 1024  # TotalAnnotationSizeLimitB
DNS_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
SUBDOMAIN = DNS_LABEL + "(\\." + DNS_LABEL + ")*"
SUBDOMAIN_WORDS = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
QUALIFIED = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
QUALIFIED_WORDS = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
LABEL_VALUE = "(" + QUALIFIED + ")?"
LABEL_VALUE_WORDS = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)


def regex_error(words: str, regex: str, *examples: str) -> str:
    """validation.RegexError, with its spacing: "(e.g. 'a',  or 'b', regex used ...)"."""
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{words} (e.g. {shown}regex used for validation is '{regex}')"


def max_length_error(length: int) -> str:
    return f"must be no more than {length} characters"


def subdomain_faults(value: str) -> list[str]:
    """validation.IsDNS1123Subdomain."""
    faults = []
    if len(value) > SUBDOMAIN_MAX:
        faults.append(max_length_error(SUBDOMAIN_MAX))
    if not re.fullmatch(SUBDOMAIN, value):
        faults.append(regex_error(SUBDOMAIN_WORDS, SUBDOMAIN, "example.com"))
    return faults


def qualified_name_faults(value: str) -> list[str]:
    """validation.IsQualifiedName: a name part, with an optional DNS subdomain prefix and '/'."""
    faults = []
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name "
            + regex_error(QUALIFIED_WORDS, QUALIFIED, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            faults.append("prefix part must be non-empty")
        else:
            faults.extend(f"prefix part {fault}" for fault in subdomain_faults(prefix))
    if not name:
        faults.append("name part must be non-empty")
    elif len(name) > NAME_PART_MAX:
        faults.append(f"name part {max_length_error(NAME_PART_MAX)}")
    if not re.fullmatch(QUALIFIED, name):
        faults.append(
            "name part " + regex_error(QUALIFIED_WORDS, QUALIFIED, "MyName", "my.name", "123-abc")
        )
    return faults


def label_value_faults(value: str) -> list[str]:
    """validation.IsValidLabelValue."""
    faults = []
    if len(value) > NAME_PART_MAX:
        faults.append(max_length_error(NAME_PART_MAX))
    if not re.fullmatch(LABEL_VALUE, value):
        faults.append(regex_error(LABEL_VALUE_WORDS, LABEL_VALUE, "MyValue", "my_value", "12345"))
    return faults


def mask_trailing_dash(name: str) -> str:
    """generic.go:maskTrailingDash, as written: a generateName's last two characters become 'a'."""
    return name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name


def _invalid(path: str, value: str, faults: list[str]) -> Iterator[str]:
    for fault in faults:
        yield f"metadata.{path}: Invalid value: {go_quote(value)}: {fault}"


def metadata_faults(document: Mapping[str, Any]) -> list[str]:
    """ValidateObjectMetaAccessor's refusals of the document's metadata, in its order."""
    metadata = document.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    name, generate_name = metadata.get("name") or "", metadata.get("generateName") or ""
    faults: list[str] = []
    if isinstance(generate_name, str) and generate_name:
        faults += _invalid(
            "generateName", generate_name, subdomain_faults(mask_trailing_dash(generate_name))
        )
    if not name and not generate_name:
        faults.append("metadata.name: Required value: name or generateName is required")
    elif isinstance(name, str) and name:
        faults += _invalid("name", name, subdomain_faults(name))
    labels = metadata.get("labels")
    for key, value in (labels if isinstance(labels, Mapping) else {}).items():
        faults += _invalid("labels", str(key), qualified_name_faults(str(key)))
        if isinstance(value, str):
            faults += _invalid("labels", value, label_value_faults(value))
    annotations = metadata.get("annotations")
    annotations = annotations if isinstance(annotations, Mapping) else {}
    for key in annotations:
        # keys are qualified names, but of any case (ValidateAnnotations lowers them first)
        faults += _invalid("annotations", str(key), qualified_name_faults(str(key).lower()))
    size = sum(
        len(str(key).encode()) + len(str(value).encode()) for key, value in annotations.items()
    )
    if size > ANNOTATIONS_MAX_BYTES:
        faults.append(
            f"metadata.annotations: Too long: may not be more than {ANNOTATIONS_MAX_BYTES} bytes"
        )
    return faults
