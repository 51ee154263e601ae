# shellcheck shell=bash
# SC2034 (assigned but unused) is off for this file only: the scripts that source it use every variable.
# shellcheck disable=SC2034
# Starting, finding and stopping the cluster's daemons by the PIDs recorded in .cluster/pids/, and the
# network they share. Sourced by up.sh and down.sh after lib.sh.

CNI_BIN=/usr/lib/cni
CONTAINERD_SOCKET="${STATE}/containerd/containerd.sock"
GCS_URL="http://${NODE_IP}:${GCS_PORT}"

# The PID recorded for NAME if that process still runs the program it was started as, else nothing.
running_pid() {
    local name="$1" pid program
    [[ -f "${STATE}/pids/${name}.pid" ]] || return 0
    read -r pid program <"${STATE}/pids/${name}.pid" || return 0
    if [[ -n "${pid}" && "$(readlink "/proc/${pid}/exe" 2>/dev/null)" == "${program}" ]]; then
        printf '%s' "${pid}"
    fi
}

# start_daemon NAME PROGRAM ARGS...: runs PROGRAM in a session of its own, its output in logs/NAME.log,
# and records its PID and program; a NAME already running is left alone.
start_daemon() {
    local name="$1" program pid
    program="$(command -v "$2")"
    program="$(readlink -f "${program}")"
    shift 2
    if [[ -n "$(running_pid "${name}")" ]]; then
        log "${name} runs already (PID $(running_pid "${name}"))"
        return
    fi
    setsid "${program}" "$@" >>"${STATE}/logs/${name}.log" 2>&1 </dev/null &
    pid=$!
    printf '%s %s\n' "${pid}" "${program}" >"${STATE}/pids/${name}.pid"
    log "${name} started (PID ${pid}, log ${STATE}/logs/${name}.log)"
}

# stop_daemon NAME [SECONDS]: SIGTERM to the recorded PID, SIGKILL after SECONDS (default 20); forgets it.
stop_daemon() {
    local name="$1" wait="${2:-20}" pid tries
    pid="$(running_pid "${name}")"
    if [[ -n "${pid}" ]]; then
        kill -TERM "${pid}" 2>/dev/null || true
        for ((tries = 0; tries < wait * 10; tries++)); do
            [[ -d "/proc/${pid}" ]] || break
            sleep 0.1
        done
        if [[ -d "/proc/${pid}" ]]; then
            log "${name} (PID ${pid}) did not stop in ${wait} s: killing it"
            kill -KILL "${pid}" 2>/dev/null || true
        fi
        log "${name} stopped (PID ${pid})"
    fi
    rm -f "${STATE}/pids/${name}.pid"
}

# write_if_changed FILE: standard input into FILE, unless FILE holds that already (kube-proxy exits when its
# configuration file changes, and a daemon that runs already keeps its file).
write_if_changed() {
    local file="$1" content
    content="$(cat)"
    [[ -f "${file}" && "$(cat "${file}")" == "${content}" ]] && return
    printf '%s\n' "${content}" >"${file}.partial"
    mv "${file}.partial" "${file}"
}

# wait_for WHAT SECONDS COMMAND...: COMMAND until it succeeds, or fail naming WHAT after SECONDS.
wait_for() {
    local what="$1" seconds="$2" deadline
    shift 2
    deadline=$((SECONDS + seconds))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || die "timed out after ${seconds} s waiting for ${what}"
        sleep 1
    done
}

kubectl_bin() { printf '%s/kubectl' "$(cat "${STATE}/bin")"; }
# kubectl as the cluster's admin, and as system:masters (before the admin's binding exists).
kube() { "$(kubectl_bin)" --kubeconfig "${STATE}/kubeconfig" "$@"; }
kube_super() { "$(kubectl_bin)" --kubeconfig "${STATE}/kubeconfigs/super-admin.conf" "$@"; }
ctr_k8s() { ctr --address "${CONTAINERD_SOCKET}" --namespace k8s.io "$@"; }

node_ready() {
    [[ "$(kube get node "${NODE_NAME}" \
        -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}

# The Nth address of the service range (1: the kubernetes Service).
service_ip() { printf '%s.%s' "${SERVICE_CIDR%.*}" "$1"; }

# Whether kube-proxy has written its rule for the kubernetes Service (pods reach the API server through it).
kubernetes_service_routed() {
    iptables -t nat -S KUBE-SERVICES 2>/dev/null | grep -q -- "--comment \"default/kubernetes:https cluster IP\""
}

# The host's rules for the cluster, one a line as CHAIN and the rest of `iptables -A` (docs/local-cluster.md,
# "Who can reach what"): anything from or to the pods that would cross another interface is dropped; the GCS
# emulator, which asks no credentials, answers the pods on the bridge and root's own processes only; so do
# the loopback ports that answer without credentials. The owner match sees the local sender's UID in OUTPUT.
GCS_GUARD=MNIST-GCS-GUARD
host_rules() {
    cat <<RULES
FORWARD -s ${POD_CIDR} ! -o ${BRIDGE} -j DROP
FORWARD -d ${POD_CIDR} ! -i ${BRIDGE} -j DROP
${GCS_GUARD} -i lo -j RETURN
${GCS_GUARD} -i ${BRIDGE} -s ${POD_CIDR} -j RETURN
${GCS_GUARD} -p tcp -j REJECT --reject-with tcp-reset
INPUT -p tcp -d ${NODE_IP} --dport ${GCS_PORT} -j ${GCS_GUARD}
OUTPUT -p tcp -d ${NODE_IP} --dport ${GCS_PORT} -m owner ! --uid-owner 0 -j REJECT --reject-with tcp-reset
OUTPUT -p tcp -d 127.0.0.1 -m multiport --dports ${ETCD_METRICS_PORT},${KUBELET_HEALTHZ_PORT},${KUBE_PROXY_METRICS_PORT},${KUBE_PROXY_HEALTHZ_PORT} -m owner ! --uid-owner 0 -j REJECT --reject-with tcp-reset
RULES
}

# Each of host_rules not yet there: the guard chain's in order, the others first in their built-in chain.
add_host_rules() {
    local chain rule
    iptables -N "${GCS_GUARD}" 2>/dev/null || true
    while read -r chain rule; do
        # shellcheck disable=SC2086 # a rule as host_rules writes it is its own arguments
        if ! iptables -C "${chain}" ${rule} 2>/dev/null; then
            if [[ "${chain}" == "${GCS_GUARD}" ]]; then
                iptables -A "${chain}" ${rule}
            else
                iptables -I "${chain}" 1 ${rule}
            fi
        fi
    done < <(host_rules)
}

remove_host_rules() {
    local chain rule
    while read -r chain rule; do
        # shellcheck disable=SC2086 # a rule as host_rules writes it is its own arguments
        while iptables -D "${chain}" ${rule} 2>/dev/null; do :; done
    done < <(host_rules)
    iptables -X "${GCS_GUARD}" 2>/dev/null || true
}

# The bridge the pods hang on, with the node's address; forwarding on (Services are DNAT), and host_rules.
setup_network() {
    if ! ip link show "${BRIDGE}" >/dev/null 2>&1; then
        ip link add "${BRIDGE}" type bridge
    fi
    ip addr replace "${NODE_IP}/${POD_CIDR#*/}" dev "${BRIDGE}"
    ip link set "${BRIDGE}" up
    # The two settings as they were, for down.sh to put back.
    [[ -f "${STATE}/sysctl-before" ]] ||
        sysctl net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables >"${STATE}/sysctl-before"
    sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
    add_host_rules
}

# The chains the kubelet makes in every table (kubelet_network_linux.go: its canary, KUBE-FIREWALL and the
# iptables hint), which it never removes: their jumps from the built-in chains first, then the chains.
remove_kubelet_chains() {
    local command table chain rule
    for command in iptables ip6tables; do
        for table in filter nat mangle; do
            for chain in KUBE-FIREWALL KUBE-KUBELET-CANARY KUBE-IPTABLES-HINT; do
                "${command}" -t "${table}" -S "${chain}" >/dev/null 2>&1 || continue
                while read -r rule; do
                    # shellcheck disable=SC2086 # a rule as iptables -S prints it is its own arguments
                    "${command}" -t "${table}" -D ${rule#-A } 2>/dev/null || true
                done < <("${command}" -t "${table}" -S | grep -- "-j ${chain}\( \|\$\)" || true)
                "${command}" -t "${table}" -F "${chain}" 2>/dev/null || true
                "${command}" -t "${table}" -X "${chain}" 2>/dev/null || true
            done
        done
    done
}

teardown_network() {
    remove_kubelet_chains
    remove_host_rules
    if ip link show "${BRIDGE}" >/dev/null 2>&1; then
        ip link delete "${BRIDGE}"
    fi
    if [[ -f "${STATE}/sysctl-before" ]]; then
        sysctl -q -p "${STATE}/sysctl-before"
    fi
}

# The local mnist.npz to put into the bucket: MNIST_SOURCE as `make` sets it (such as the copy CI keeps),
# else the official Keras download, checked against its sha256 and cached as the steps do. up.sh asks before
# any daemon starts, so a missing file fails first.
find_mnist() {
    local source="${MNIST_SOURCE:-}"
    if [[ -z "${source}" ]]; then
        [[ -x "${PROJECT_ROOT}/.venv/bin/python" ]] ||
            die "no MNIST_SOURCE and no project environment to download MNIST with: run make setup-run, or set MNIST_SOURCE=/path/to/mnist.npz"
        source="$(cd "${PROJECT_ROOT}" && .venv/bin/python -c \
            'from steps.lib.mnist import KERAS_MNIST_URL, fetch_source; print(fetch_source(KERAS_MNIST_URL))')" ||
            die "cannot download MNIST (above): set MNIST_SOURCE=/path/to/mnist.npz"
    fi
    if [[ ! -f "${source}" ]]; then
        printf "error: MNIST_SOURCE must name a local mnist.npz to put into the bucket (got '%s')\n" "${source}" >&2
        exit 2
    fi
    printf '%s\n' "${source}"
}

# Whether the emulator holds MNIST already: its filesystem backend keeps an object at ROOT/BUCKET/NAME
# (fake-gcs-server v1.56.1, internal/backend/fs.go, CreateObject), and its restarts keep every object.
mnist_stored() { [[ -f "${STATE}/gcs/${BUCKET}/${MNIST_KEY}" ]]; }

# The local mnist.npz to put into the bucket, or nothing when the bucket holds it already: a cluster started
# before, whose .cluster/env names that copy in MNIST_SOURCE, needs no file to start its emulator again.
mnist_to_upload() { mnist_stored || find_mnist; }

# MNIST into the bucket, for the split step: the file in MNIST_FILE (mnist_to_upload's), if any.
upload_mnist() {
    [[ -n "${MNIST_FILE:-}" ]] || return 0
    curl -fsS -X POST -H 'Content-Type: application/octet-stream' --data-binary "@${MNIST_FILE}" \
        "${GCS_URL}/upload/storage/v1/b/${BUCKET}/o?uploadType=media&name=${MNIST_KEY}" >/dev/null
}
