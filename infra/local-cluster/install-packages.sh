#!/usr/bin/env bash
# The Debian 12 packages the local cluster runs (as root): containerd and runc, the CNI plugins (bridge,
# host-local, loopback, portmap), iptables and conntrack for kube-proxy, catatonit for the pods' pause
# container, curl. Go builds the rest (build.sh). Installs only what is missing.
set -euo pipefail

# program:package
missing=()
for pair in containerd:containerd runc:runc iptables:iptables conntrack:conntrack catatonit:catatonit \
    curl:curl; do
    program=${pair%%:*}
    command -v "${program}" >/dev/null 2>&1 || [ -x "/usr/sbin/${program}" ] || missing+=("${pair##*:}")
done
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing ${missing[*]}"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
# Debian's package would start containerd as a system service where systemd runs; the local cluster starts
# its own, with its own configuration and socket, and needs no other.
echo "the local cluster's packages are installed"
