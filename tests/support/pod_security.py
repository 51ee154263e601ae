"""The Pod Security Standards as a check of one pod, for the tests: where no cluster runs, what the Pod Security
admission controller would refuse in a namespace labelled `pod-security.kubernetes.io/enforce: <level>`.

The rules are those of kubernetes.io/docs/concepts/security/pod-security-standards ("latest"), as the
admission controller implements them (k8s.io/pod-security-admission, policy/check_*.go): baseline's controls,
then restricted's on top. Every container counts: containers, initContainers and ephemeralContainers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Pod = dict[str, Any]

# Baseline, "Capabilities": what a container may add (Docker's default set).
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
# Baseline, "Sysctls": the safe set.
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
# Restricted, "Volume Types".
RESTRICTED_VOLUMES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
LEVELS = ("privileged", "baseline", "restricted")


def containers(pod: Pod) -> Iterator[tuple[str, dict]]:
    """(where, container) for every container of the pod."""
    spec = pod["spec"]
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(field) or []:
            yield f"{field}[{container.get('name')}]", container


def violations(pod: Pod, level: str = "restricted") -> list[str]:
    """What of `pod` the `level` profile forbids, one line each; empty when the pod passes."""
    if level not in LEVELS:
        raise ValueError(f"unknown Pod Security level {level!r}")
    if level == "privileged":
        return []
    found = baseline_violations(pod)
    if level == "restricted":
        found += restricted_violations(pod)
    return found


def baseline_violations(pod: Pod) -> list[str]:
    spec = pod["spec"]
    pod_context = spec.get("securityContext") or {}
    found = []
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            found.append(f"host namespaces: spec.{field} is true")
    for volume in spec.get("volumes") or []:
        if "hostPath" in volume:
            found.append(f"hostPath volumes: volume {volume['name']}")
    found += _context_baseline("spec.securityContext", pod_context)
    for name in {sysctl["name"] for sysctl in pod_context.get("sysctls") or []} - SAFE_SYSCTLS:
        found.append(f"sysctls: {name} is not in the safe set")
    annotations = pod.get("metadata", {}).get("annotations") or {}
    for key, value in annotations.items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
            value == "runtime/default" or value.startswith("localhost/")
        ):
            found.append(f"AppArmor: annotation {key}={value}")
        if key == "seccomp.security.alpha.kubernetes.io/pod" and value == "unconfined":
            found.append("seccomp: pod annotation unconfined")
    for where, container in containers(pod):
        context = container.get("securityContext") or {}
        if context.get("privileged"):
            found.append(f"privileged: {where}")
        added = set((context.get("capabilities") or {}).get("add") or [])
        for capability in sorted(added - BASELINE_CAPABILITIES):
            found.append(f"capabilities: {where} adds {capability}")
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                found.append(f"host ports: {where} uses hostPort {port['hostPort']}")
        if context.get("procMount", "Default") != "Default":
            found.append(f"/proc mount type: {where} is {context['procMount']}")
        found += _context_baseline(where, context)
    return found


def _context_baseline(where: str, context: dict) -> list[str]:
    """The baseline controls a pod's and a container's securityContext share."""
    found = []
    if (context.get("windowsOptions") or {}).get("hostProcess"):
        found.append(f"HostProcess: {where}")
    if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
        found.append(f"seccomp: {where} is Unconfined")
    apparmor = (context.get("appArmorProfile") or {}).get("type")
    if apparmor not in (None, "RuntimeDefault", "Localhost"):
        found.append(f"AppArmor: {where} profile {apparmor}")
    selinux = context.get("seLinuxOptions") or {}
    if selinux.get("type", "") not in SELINUX_TYPES:
        found.append(f"SELinux: {where} type {selinux['type']}")
    for field in ("user", "role"):
        if selinux.get(field):
            found.append(f"SELinux: {where} sets {field}")
    return found


def restricted_violations(pod: Pod) -> list[str]:
    spec = pod["spec"]
    pod_context = spec.get("securityContext") or {}
    found = []
    for volume in spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            found.append(f"volume types: volume {volume['name']} is {sorted(kinds)}")
    if pod_context.get("runAsUser") == 0:
        found.append("running as non-root user: spec.securityContext.runAsUser is 0")
    pod_non_root = pod_context.get("runAsNonRoot") is True
    pod_seccomp = (pod_context.get("seccompProfile") or {}).get("type") in (
        "RuntimeDefault",
        "Localhost",
    )
    for where, container in containers(pod):
        context = container.get("securityContext") or {}
        if context.get("allowPrivilegeEscalation") is not False:
            found.append(
                f"privilege escalation: {where} does not set allowPrivilegeEscalation false"
            )
        non_root = context.get("runAsNonRoot")
        if non_root is False or (non_root is None and not pod_non_root):
            found.append(f"running as non-root: {where} may run as root (runAsNonRoot)")
        if context.get("runAsUser") == 0:
            found.append(f"running as non-root user: {where} runAsUser is 0")
        seccomp = (context.get("seccompProfile") or {}).get("type")
        if seccomp is None and not pod_seccomp:
            found.append(f"seccomp: {where} has no RuntimeDefault or Localhost profile")
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            found.append(f"capabilities: {where} does not drop ALL")
        for capability in sorted(set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}):
            found.append(f"capabilities: {where} adds {capability}")
    return found
