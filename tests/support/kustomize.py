"""A small kustomize for the tests: the subset infra/k8s uses (resources, components, namespace, images,
strategic-merge patches), so the manifests can be assembled where no kustomize binary is installed. Where kubectl is
installed, a test checks that `kubectl kustomize` assembles the same objects."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

SUPPORTED_FIELDS = {
    "apiVersion",
    "kind",
    "resources",
    "components",
    "namespace",
    "images",
    "patches",
}
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PersistentVolume",
    "StorageClass",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
}

Manifest = dict[str, Any]


def identity(manifest: Manifest) -> tuple[str, str, str]:
    """(kind, namespace, name): what kustomize keeps unique and patches match on."""
    metadata = manifest.get("metadata", {})
    return manifest["kind"], metadata.get("namespace", ""), metadata["name"]


def load_yaml_documents(path: Path) -> list[Manifest]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def build(directory: Path) -> list[Manifest]:
    """The manifests `kubectl kustomize DIRECTORY` would print, as dicts."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(kustomization) - SUPPORTED_FIELDS
    if unknown:
        raise ValueError(
            f"{directory}: kustomization fields this loader does not know: {sorted(unknown)}"
        )
    manifests: list[Manifest] = []
    for entry in kustomization.get("resources", []):
        path = directory / entry
        manifests += build(path) if path.is_dir() else load_yaml_documents(path)
    # A Component adds its resources to the parent's, then patches them all, before the parent's patches.
    for entry in kustomization.get("components", []):
        component = yaml.safe_load((directory / entry / "kustomization.yaml").read_text())
        if component.get("kind") != "Component" or set(component) - SUPPORTED_FIELDS:
            raise ValueError(f"{directory / entry}: not a Component this loader can assemble")
        for resource in component.get("resources", []):
            manifests += load_yaml_documents(directory / entry / resource)
        for patch in component.get("patches", []):
            apply_patch(manifests, patch, directory / entry)
    for patch in kustomization.get("patches", []):
        apply_patch(manifests, patch, directory)
    for image in kustomization.get("images", []):
        set_image(manifests, image)
    if namespace := kustomization.get("namespace"):
        for manifest in manifests:
            if manifest["kind"] not in CLUSTER_SCOPED:
                manifest["metadata"]["namespace"] = namespace
    identities = [identity(manifest) for manifest in manifests]
    duplicates = {item for item in identities if identities.count(item) > 1}
    if duplicates:
        raise ValueError(f"{directory}: objects defined twice: {sorted(duplicates)}")
    return manifests


def apply_patch(manifests: list[Manifest], patch: dict[str, Any], directory: Path) -> None:
    """A strategic-merge patch, inline or from a file, matched by its target or by its own kind and name."""
    if "patch" in patch:
        body = yaml.safe_load(patch["patch"])
    else:
        body = yaml.safe_load((directory / patch["path"]).read_text())
    target = patch.get("target") or {
        "kind": body["kind"],
        "name": body["metadata"]["name"],
    }
    matches = [
        manifest
        for manifest in manifests
        if manifest["kind"] == target["kind"] and manifest["metadata"]["name"] == target["name"]
    ]
    if len(matches) != 1:
        raise ValueError(f"{directory}: patch target {target} matches {len(matches)} objects")
    merged = merge(matches[0], body)
    matches[0].clear()
    matches[0].update(merged)


def merge(original: Any, patch: Any) -> Any:
    """Strategic merge as kustomize does it for these fields: maps merge, lists of named maps merge by name
    (containers, env, volumes, ports), any other value is replaced."""
    if isinstance(original, dict) and isinstance(patch, dict):
        merged = copy.deepcopy(original)
        for key, value in patch.items():
            merged[key] = merge(original[key], value) if key in original else copy.deepcopy(value)
        return merged
    if _named_list(original) and _named_list(patch):
        merged = copy.deepcopy(original)
        positions = {item["name"]: index for index, item in enumerate(merged)}
        for item in patch:
            if item["name"] in positions:
                merged[positions[item["name"]]] = merge(merged[positions[item["name"]]], item)
            else:
                merged.append(copy.deepcopy(item))
        return merged
    return copy.deepcopy(patch)


def _named_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, dict) and "name" in item for item in value
    )


def image_name(reference: str) -> str:
    """'registry:5000/path/name:tag@sha256:…' → 'registry:5000/path/name'."""
    without_digest = reference.split("@", 1)[0]
    head, _, last = without_digest.rpartition("/")
    last = last.split(":", 1)[0]
    return f"{head}/{last}" if head else last


def set_image(manifests: list[Manifest], image: dict[str, str]) -> None:
    """kustomize's `images` entry: a new name, tag or digest for every container using that image."""
    for manifest in manifests:
        pod = manifest.get("spec", {}).get("template", {}).get("spec") or manifest.get("spec", {})
        for container in pod.get("containers", []) + pod.get("initContainers", []):
            if image_name(container["image"]) != image["name"]:
                continue
            name = image.get("newName", image["name"])
            if "digest" in image:
                container["image"] = f"{name}@{image['digest']}"
            elif "newTag" in image:
                container["image"] = f"{name}:{image['newTag']}"
            else:
                tag = container["image"][len(image_name(container["image"])) :]
                container["image"] = f"{name}{tag}"
