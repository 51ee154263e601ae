#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# make cluster-up: a single-node Kubernetes with Argo Workflows on this machine, every part built from its Go
# module (build.sh) or taken from Debian's packages, each daemon a process of this machine with its log in
# .cluster/logs/ and its PID in .cluster/pids/. Argo is installed from its release manifests as
# infra/gke/up.sh installs it, then the project's infra/k8s base, unchanged, with a local overlay. Safe to run
# again: what runs already is kept. Writes .cluster/kubeconfig (admin) and .cluster/env (for `source`).
# `up.sh DAEMON...` starts only those daemons again (start_only, below).
set -euo pipefail
set -o errtrace
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "${here}/lib.sh"
# shellcheck source=daemons.sh
source "${here}/daemons.sh"
# shellcheck source=render.sh
source "${here}/render.sh"

current_step="starting"
# What started stays up: once the cause is fixed, cluster-up again goes on from there; cluster-down stops it.
trap 'printf "error: cluster-up failed at step \"%s\" (line %s: %s); logs in %s; make cluster-up again once fixed, or make cluster-down\n" "${current_step}" "${LINENO}" "${BASH_COMMAND}" "${STATE}/logs" >&2' ERR
step() {
    current_step="$1"
    log "$1"
}

check_machine() {
    [[ "$(id -u)" == 0 ]] || die "the local cluster runs its kubelet, containerd and network as root: run as root"
    require_commands go podman containerd containerd-shim-runc-v2 ctr runc iptables conntrack catatonit ip curl \
        python3 sha256sum
    local plugin controller
    for plugin in bridge host-local loopback portmap; do
        [[ -x "${CNI_BIN}/${plugin}" ]] ||
            die "CNI plugin ${CNI_BIN}/${plugin} is missing: apt-get install containernetworking-plugins"
    done
    for controller in cpu cpuacct cpuset memory pids; do
        grep -qw "${controller}" /proc/self/cgroup ||
            die "the cgroup controller '${controller}' is not mounted: the kubelet needs it"
    done
}

start_network() {
    setup_network
}

# .cluster/ and what it holds (keys, tokens, kubeconfigs, etcd's data, the bucket) are root's alone.
make_state() {
    mkdir -p "${STATE}/logs" "${STATE}/pids"
    chmod 700 "${STATE}"
}

# Every certificate `init phase certs all` makes for a local etcd too: etcd's own CA, its server and peer
# certificates, and the API server's client certificate for it (cmd/kubeadm/app/phases/certs/certlist.go).
# Written with umask 077, so that each kubeconfig and key is its owner's (root's) only.
make_certificates() {
    mkdir -p "${STATE}/pki" "${STATE}/kubeconfigs"
    render_kubeadm_config | write_if_changed "${STATE}/kubeadm.yaml"
    (
        umask 077
        if [[ ! -f "${STATE}/pki/ca.crt" ]]; then
            "${BIN}/kubeadm" init phase certs all --config "${STATE}/kubeadm.yaml" >>"${STATE}/logs/kubeadm.log" 2>&1
        fi
        if [[ ! -f "${STATE}/kubeconfigs/kubelet.conf" ]]; then
            "${BIN}/kubeadm" init phase kubeconfig all --config "${STATE}/kubeadm.yaml" \
                --kubeconfig-dir "${STATE}/kubeconfigs" >>"${STATE}/logs/kubeadm.log" 2>&1
            "${BIN}/kubeadm" kubeconfig user --config "${STATE}/kubeadm.yaml" --client-name system:kube-proxy \
                >"${STATE}/kubeconfigs/kube-proxy.conf.partial" 2>>"${STATE}/logs/kubeadm.log"
            mv "${STATE}/kubeconfigs/kube-proxy.conf.partial" "${STATE}/kubeconfigs/kube-proxy.conf"
        fi
    )
}

# etcd as kubeadm runs it (cmd/kubeadm/app/phases/etcd/local.go, getEtcdCommand): clients and peers over
# TLS, each with a certificate of etcd's CA; only its health and metrics in plain HTTP, on the loopback.
start_etcd() {
    local pki="${STATE}/pki/etcd"
    start_daemon etcd "${BIN}/etcd" --name "${NODE_NAME}" --data-dir "${STATE}/etcd" \
        --listen-client-urls "${ETCD_CLIENT_URL}" --advertise-client-urls "${ETCD_CLIENT_URL}" \
        --cert-file "${pki}/server.crt" --key-file "${pki}/server.key" \
        --trusted-ca-file "${pki}/ca.crt" --client-cert-auth=true \
        --listen-peer-urls "${ETCD_PEER_URL}" --initial-advertise-peer-urls "${ETCD_PEER_URL}" \
        --initial-cluster "${NODE_NAME}=${ETCD_PEER_URL}" \
        --peer-cert-file "${pki}/peer.crt" --peer-key-file "${pki}/peer.key" \
        --peer-trusted-ca-file "${pki}/ca.crt" --peer-client-cert-auth=true \
        --listen-metrics-urls "http://127.0.0.1:${ETCD_METRICS_PORT}"
    wait_for "etcd to answer" 60 curl -fsS "http://127.0.0.1:${ETCD_METRICS_PORT}/health"
}

start_api_server() {
    local pki="${STATE}/pki"
    # etcd with the API server's client certificate, as kubeadm configures it (phases/controlplane/manifests.go)
    start_daemon kube-apiserver "${BIN}/kube-apiserver" --etcd-servers "${ETCD_CLIENT_URL}" \
        --etcd-cafile "${pki}/etcd/ca.crt" --etcd-certfile "${pki}/apiserver-etcd-client.crt" \
        --etcd-keyfile "${pki}/apiserver-etcd-client.key" \
        --bind-address "${NODE_IP}" --advertise-address "${NODE_IP}" --secure-port "${API_PORT}" \
        --service-cluster-ip-range "${SERVICE_CIDR}" --authorization-mode Node,RBAC \
        --enable-admission-plugins NodeRestriction --allow-privileged=false --profiling=false \
        --client-ca-file "${pki}/ca.crt" --tls-cert-file "${pki}/apiserver.crt" \
        --tls-private-key-file "${pki}/apiserver.key" \
        --kubelet-client-certificate "${pki}/apiserver-kubelet-client.crt" \
        --kubelet-client-key "${pki}/apiserver-kubelet-client.key" --kubelet-preferred-address-types InternalIP \
        --service-account-issuer https://kubernetes.default.svc.cluster.local \
        --service-account-key-file "${pki}/sa.pub" --service-account-signing-key-file "${pki}/sa.key" \
        --requestheader-client-ca-file "${pki}/front-proxy-ca.crt" \
        --proxy-client-cert-file "${pki}/front-proxy-client.crt" \
        --proxy-client-key-file "${pki}/front-proxy-client.key" \
        --requestheader-allowed-names front-proxy-client --requestheader-username-headers X-Remote-User \
        --requestheader-group-headers X-Remote-Group --requestheader-extra-headers-prefix X-Remote-Extra-
    wait_for "the API server to be ready" 120 kube_super get --raw /readyz
    # kubeadm's admin kubeconfig is in group kubeadm:cluster-admins, which kubeadm init binds to cluster-admin
    # (cmd/kubeadm/app/phases/kubeconfig, EnsureAdminClusterRoleBinding); the phases alone do not.
    kube_super create clusterrolebinding kubeadm:cluster-admins --clusterrole cluster-admin \
        --group kubeadm:cluster-admins --dry-run=client -o yaml | kube_super apply -f - >/dev/null
    cp "${STATE}/kubeconfigs/admin.conf" "${STATE}/kubeconfig"
}

# One of each on one node: no leader election, so that neither exits when the API server is away for a while.
start_controllers() {
    local pki="${STATE}/pki"
    start_daemon kube-controller-manager "${BIN}/kube-controller-manager" \
        --kubeconfig "${STATE}/kubeconfigs/controller-manager.conf" \
        --authentication-kubeconfig "${STATE}/kubeconfigs/controller-manager.conf" \
        --authorization-kubeconfig "${STATE}/kubeconfigs/controller-manager.conf" \
        --bind-address 127.0.0.1 --use-service-account-credentials --leader-elect=false \
        --service-account-private-key-file "${pki}/sa.key" --root-ca-file "${pki}/ca.crt" \
        --cluster-signing-cert-file "${pki}/ca.crt" --cluster-signing-key-file "${pki}/ca.key" \
        --service-cluster-ip-range "${SERVICE_CIDR}" --cluster-name "${NODE_NAME}" --profiling=false
    start_daemon kube-scheduler "${BIN}/kube-scheduler" --kubeconfig "${STATE}/kubeconfigs/scheduler.conf" \
        --authentication-kubeconfig "${STATE}/kubeconfigs/scheduler.conf" \
        --authorization-kubeconfig "${STATE}/kubeconfigs/scheduler.conf" \
        --bind-address 127.0.0.1 --leader-elect=false --profiling=false
}

start_containerd() {
    mkdir -p "${STATE}/containerd" "${STATE}/cni/net.d"
    render_containerd_config | write_if_changed "${STATE}/containerd/config.toml"
    render_cni_config | write_if_changed "${STATE}/cni/net.d/10-mnist.conflist"
    # containerd 1.6's shims keep their sockets in /run/containerd/s whatever its state folder: down.sh
    # removes that folder if it was not there before.
    [[ -e /run/containerd ]] || touch "${STATE}/containerd/made-run"
    start_daemon containerd containerd --config "${STATE}/containerd/config.toml"
    wait_for "containerd to answer" 60 ctr_k8s version
}

load_images() {
    # shellcheck source=images.sh
    source "${here}/images.sh"
    build_and_import_images
}

start_kubelet() {
    mkdir -p "${STATE}/kubelet" "${STATE}/pod-logs"
    : >"${STATE}/resolv.conf"
    render_kubelet_config | write_if_changed "${STATE}/kubelet/config.yaml"
    start_daemon kubelet "${BIN}/kubelet" --config "${STATE}/kubelet/config.yaml" \
        --kubeconfig "${STATE}/kubeconfigs/kubelet.conf" --root-dir "${STATE}/kubelet" \
        --cert-dir "${STATE}/kubelet/pki" --hostname-override "${NODE_NAME}" --node-ip "${NODE_IP}"
    wait_for "node ${NODE_NAME} to be Ready" 180 node_ready
}

start_kube_proxy() {
    render_kube_proxy_config | write_if_changed "${STATE}/kube-proxy.yaml"
    start_daemon kube-proxy "${BIN}/kube-proxy" --config "${STATE}/kube-proxy.yaml" \
        --hostname-override "${NODE_NAME}"
    wait_for "kube-proxy to route the kubernetes Service" 60 kubernetes_service_routed
}

start_gcs_emulator() {
    mkdir -p "${STATE}/gcs"
    start_daemon gcs-emulator "${BIN}/fake-gcs-server" -scheme http -host "${NODE_IP}" -port "${GCS_PORT}" \
        -external-url "${GCS_URL}" -public-host "${NODE_IP}:${GCS_PORT}" -backend filesystem \
        -filesystem-root "${STATE}/gcs" -log-level warn
    wait_for "the GCS emulator to answer" 60 curl -fsS "${GCS_URL}/storage/v1/b"
    if ! curl -fsS "${GCS_URL}/storage/v1/b/${BUCKET}" >/dev/null 2>&1; then
        curl -fsS -X POST -H 'Content-Type: application/json' --data "{\"name\": \"${BUCKET}\"}" \
            "${GCS_URL}/storage/v1/b?project=local" >/dev/null
    fi
    upload_mnist
}

install_argo() {
    render_argo_install "${STATE}/argo"
    kube apply --server-side --force-conflicts --kustomize "${STATE}/argo" >>"${STATE}/logs/apply.log"
    kube -n argo rollout status deployment/workflow-controller --timeout 5m
    kube -n argo rollout status deployment/argo-server --timeout 5m
}

apply_project() {
    render_project_overlay "${STATE}/k8s"
    kube apply --kustomize "${STATE}/k8s" >>"${STATE}/logs/apply.log"
    kube -n "${NAMESPACE}" rollout status deployment/mnist-page --timeout 5m
    # infra/gke/lib.sh's quota_counted, as GKE's up.sh waits for it
    wait_for "the namespace's quota to count all it bounds" 360 \
        gke_lib quota_counted "$(kubectl_bin)" --kubeconfig "${STATE}/kubeconfig"
}

write_env() {
    render_env >"${STATE}/env.partial"
    chmod 600 "${STATE}/env.partial"
    mv "${STATE}/env.partial" "${STATE}/env"
}

main() {
    local started=${SECONDS}
    step "checking this machine"
    check_machine
    MNIST_FILE="$(mnist_to_upload)"
    make_state
    step "building the programs (cached after the first time)"
    BIN="$(bash "${here}/build.sh")"
    printf '%s\n' "${BIN}" >"${STATE}/bin"
    step "the cluster's network: bridge ${BRIDGE} ${NODE_IP}, pods ${POD_CIDR}, services ${SERVICE_CIDR}"
    start_network
    step "certificates and kubeconfigs (kubeadm)"
    make_certificates
    step "etcd"
    start_etcd
    step "the API server"
    start_api_server
    step "the controller manager and the scheduler"
    start_controllers
    step "containerd"
    start_containerd
    step "images: built with podman, imported into containerd"
    load_images
    step "the kubelet"
    start_kubelet
    step "kube-proxy"
    start_kube_proxy
    step "the GCS emulator, bucket ${BUCKET}"
    start_gcs_emulator
    step "Argo Workflows, from its release manifests"
    install_argo
    step "the project's manifests (infra/k8s/base and a local overlay)"
    apply_project
    step "writing ${STATE}/env"
    write_env
    log "cluster up in $((SECONDS - started)) s: source ${STATE}/env"
}

# up.sh DAEMON...: start only these daemons of a cluster that is up otherwise (any that runs already is kept),
# as the fault tests do after stopping one: etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# containerd, kubelet, kube-proxy, gcs-emulator.
start_only() {
    local name
    [[ -f "${STATE}/bin" ]] || die "no local cluster here: make cluster-up first"
    BIN="$(cat "${STATE}/bin")"
    for name in "$@"; do
        step "${name}"
        case "${name}" in
        etcd) start_etcd ;;
        kube-apiserver) start_api_server ;;
        kube-controller-manager | kube-scheduler) start_controllers ;;
        containerd) start_containerd ;;
        kubelet) start_kubelet ;;
        kube-proxy) start_kube_proxy ;;
        gcs-emulator)
            MNIST_FILE="$(mnist_to_upload)"
            start_gcs_emulator
            ;;
        *) die "not a daemon of the local cluster: ${name}" ;;
        esac
    done
}

if (($# > 0)); then
    start_only "$@"
else
    main
fi
