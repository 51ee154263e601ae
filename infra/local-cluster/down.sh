#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# make cluster-down: stops what cluster-up started, by the PIDs it recorded, the pods' containers first (the
# kubelet tears their sandboxes and networks down), then removes the cluster's network and .cluster/.
# `down.sh DAEMON...` stops only those daemons (below).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "${here}/lib.sh"
# shellcheck source=daemons.sh
source "${here}/daemons.sh"

# Every pod deleted while the kubelet still runs, so that it stops their containers and sandboxes (CNI DEL
# frees their addresses); the controllers are stopped first so that nothing starts them again.
stop_pods() {
    [[ -n "$(running_pid kube-apiserver)" && -n "$(running_pid kubelet)" ]] || return 0
    stop_daemon kube-controller-manager
    stop_daemon kube-scheduler
    log "deleting every pod"
    kube delete pods --all --all-namespaces --force --grace-period 0 --wait=false >/dev/null 2>&1 || true
    wait_for "the kubelet to stop every pod's containers" 90 no_tasks || log "some containers outlived their pods"
}

no_tasks() { [[ -z "$(ctr_k8s tasks ls -q 2>/dev/null)" ]]; }

# What containerd still runs after the kubelet has gone: killed, then its record deleted.
kill_tasks() {
    [[ -n "$(running_pid containerd)" ]] || return 0
    local task
    for task in $(ctr_k8s tasks ls -q 2>/dev/null); do
        ctr_k8s tasks kill --signal SIGKILL "${task}" >/dev/null 2>&1 || true
    done
    wait_for "containerd's tasks to end" 30 no_tasks || true
    for task in $(ctr_k8s tasks ls -q 2>/dev/null); do
        ctr_k8s tasks delete --force "${task}" >/dev/null 2>&1 || true
    done
}

# Unmount what the kubelet and containerd mounted under .cluster (deepest first), then delete it without
# crossing into any other filesystem.
remove_state() {
    local mount
    while read -r mount; do
        umount "${mount}" 2>/dev/null || umount -l "${mount}"
    done < <(awk -v prefix="${STATE}/" 'index($5, prefix) == 1 { print $5 }' /proc/self/mountinfo |
        awk '{ print length, $0 }' | sort -rn | cut -d' ' -f2-)
    rm -rf --one-file-system "${STATE}"
}

main() {
    if [[ ! -d "${STATE}" ]]; then
        log "no local cluster here (${STATE} does not exist): nothing to stop"
        return
    fi
    stop_pods
    stop_daemon kubelet 30
    stop_daemon kube-controller-manager
    stop_daemon kube-scheduler
    if [[ -n "$(running_pid kube-proxy)" ]]; then
        stop_daemon kube-proxy
        # kube-proxy's own way to remove the iptables rules it made (cmd/kube-proxy, --cleanup).
        "$(cat "${STATE}/bin")/kube-proxy" --cleanup >>"${STATE}/logs/kube-proxy.log" 2>&1 || true
    fi
    kill_tasks
    stop_daemon containerd 30
    if [[ -f "${STATE}/containerd/made-run" ]]; then
        find /run/containerd -depth -type d -empty -delete 2>/dev/null || true
    fi
    stop_daemon gcs-emulator
    stop_daemon kube-apiserver 30
    stop_daemon etcd 30
    teardown_network
    remove_state
    log "local cluster removed"
}

# down.sh DAEMON...: stop only these daemons, by their PIDs, and keep the rest of the cluster and its state
# (the fault tests' way to stop the kubelet, the API server, ...; up.sh DAEMON... starts them again).
if (($# > 0)); then
    for name in "$@"; do
        [[ -f "${STATE}/pids/${name}.pid" ]] || die "not a running daemon of the local cluster: ${name}"
        stop_daemon "${name}" 30
    done
else
    main
fi
