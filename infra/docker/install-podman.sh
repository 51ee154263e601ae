#!/usr/bin/env bash
# Make podman usable on a Debian machine (as root): install podman, runc, debootstrap and acl when missing, and
# write /etc/containers/containers.conf when there is none. The settings are the ones this kind of machine
# needs: runc (crun refuses hybrid cgroup hierarchies), cgroupfs (no systemd running), and no default ulimits
# (the engine's default nofile/nproc limits cannot be set inside an unprivileged sandbox).
set -euo pipefail

# program:package; setfacl lets a container's user write to a folder store bind-mounted into it.
missing=()
for pair in podman:podman runc:runc debootstrap:debootstrap setfacl:acl; do
    program=${pair%%:*}
    command -v "$program" >/dev/null 2>&1 || [ -x "/usr/sbin/$program" ] || missing+=("${pair##*:}")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi

conf=/etc/containers/containers.conf
if [ ! -e "$conf" ]; then
    echo "writing $conf"
    mkdir -p /etc/containers
    cat >"$conf" <<'EOF'
[containers]
default_ulimits = []

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
EOF
fi

podman info --format '{{.Host.OCIRuntime.Name}} {{.Host.CgroupManager}}' >/dev/null
echo "podman $(podman version --format '{{.Client.Version}}') ready"
