# shellcheck shell=bash
# SC2034 (assigned but unused) is off for this file only: the scripts that source it use every variable.
# shellcheck disable=SC2034
# What build.sh, up.sh and down.sh share: where things are, the cluster's addresses, messages. Sourced, not run.

log() { printf '==> %s\n' "$*" >&2; }
die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

require_commands() {
    local command
    for command in "$@"; do
        command -v "${command}" >/dev/null 2>&1 || die "'${command}' is not installed or not on PATH"
    done
}

LOCAL_CLUSTER_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PROJECT_ROOT="$(cd "${LOCAL_CLUSTER_DIR}/../.." && pwd)"
# Built programs, outside the repository.
CACHE="${LOCAL_CLUSTER_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/mnist-argo/local-cluster}"
# The running cluster's state: logs, PIDs, certificates, etcd's data, containerd's images, kubeconfig, env.
STATE="${PROJECT_ROOT}/.cluster"

# The cluster's own network, inside this machine: a bridge the node's pods hang on, whose address is also
# the node's, the API server's and the GCS emulator's. Nothing routes or masquerades it out.
BRIDGE=mnist0
NODE_NAME=mnist-local
NODE_IP=10.77.0.1
POD_CIDR=10.77.0.0/24
SERVICE_CIDR=10.77.1.0/24
API_PORT=6443
GCS_PORT=4443
# etcd on the loopback only, over TLS with client certificates as kubeadm runs it; its metrics and health in
# plain HTTP beside it (cmd/kubeadm/app/phases/etcd/local.go, getEtcdCommand).
ETCD_CLIENT_URL=https://127.0.0.1:2379
ETCD_PEER_URL=https://127.0.0.1:2380
ETCD_METRICS_PORT=2381
# The loopback ports that answer without credentials (etcd's metrics, the kubelet's and kube-proxy's health
# and metrics): root's processes only (daemons.sh, host_rules).
KUBELET_HEALTHZ_PORT=10248
KUBE_PROXY_METRICS_PORT=10249
KUBE_PROXY_HEALTHZ_PORT=10256
# The page's Service address, chosen here so that the Argo UI's link to the page (PAGE_URL, render_argo_config
# in infra/gke/lib.sh) is known when Argo is installed: in the lowest 16 addresses of the Service range, which
# Kubernetes keeps for addresses chosen by hand (KEP-3070).
PAGE_IP=10.77.1.10
PAGE_URL="http://${PAGE_IP}/"
BUCKET=mnist-local
NAMESPACE=mnist

# How the programs are built: raise it when build.sh changes what it builds or how.
BUILD_RECIPE=2
# The same for the Argo UI (build-ui.sh): raise it when that script changes what it builds or how.
UI_RECIPE=1
# A name for one build of the programs: a hash of the modules that decide it (the Argo UI's too: the Argo
# Server embeds it) and of the recipes' numbers, so that a change of the scripts' comments builds nothing.
build_key() {
    (cd "${LOCAL_CLUSTER_DIR}" && { echo "${BUILD_RECIPE} ${UI_RECIPE}"; cat ./*/go.mod ./*/go.sum \
        argo/ui-placeholder.html argo/ui/*; } | sha256sum | cut -c1-16)
}

# The Argo release the argo/ module pins, and the project's version (pyproject.toml), for the images' tags.
ARGO_LOCAL_VERSION="$(grep -m 1 -oE 'github.com/argoproj/argo-workflows/v4 v[^ ]+' \
    "${LOCAL_CLUSTER_DIR}/argo/go.mod" | cut -d' ' -f2)"
PROJECT_VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' "${PROJECT_ROOT}/pyproject.toml")"
# The images pods run, all imported into containerd by up.sh; the project's as `make images` names them.
ARGOEXEC_IMAGE="localhost/argoproj/argoexec:${ARGO_LOCAL_VERSION}-nonroot"
WORKFLOW_CONTROLLER_IMAGE="localhost/argoproj/workflow-controller:${ARGO_LOCAL_VERSION}"
ARGOCLI_IMAGE="localhost/argoproj/argocli:${ARGO_LOCAL_VERSION}"
PAUSE_IMAGE="localhost/mnist-local/pause:catatonit"
STEPS_IMAGE="localhost/mnist-argo-steps:${PROJECT_VERSION}"
TRAIN_IMAGE="localhost/mnist-argo-train:${PROJECT_VERSION}"
PAGE_IMAGE="localhost/mnist-argo-page:${PROJECT_VERSION}"
# Where up.sh puts MNIST in the bucket, for the split step's --source.
MNIST_KEY=reference/mnist.npz
