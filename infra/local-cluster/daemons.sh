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

# The bridge the pods hang on, with the node's address; forwarding on (Services are DNAT), and a guard that
# drops anything from the pods that would leave by another interface: no route or masquerade out.
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
    iptables -C FORWARD -s "${POD_CIDR}" ! -o "${BRIDGE}" -j DROP 2>/dev/null ||
        iptables -I FORWARD 1 -s "${POD_CIDR}" ! -o "${BRIDGE}" -j DROP
    iptables -C FORWARD -d "${POD_CIDR}" ! -i "${BRIDGE}" -j DROP 2>/dev/null ||
        iptables -I FORWARD 1 -d "${POD_CIDR}" ! -i "${BRIDGE}" -j DROP
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
    while iptables -D FORWARD -s "${POD_CIDR}" ! -o "${BRIDGE}" -j DROP 2>/dev/null; do :; done
    while iptables -D FORWARD -d "${POD_CIDR}" ! -i "${BRIDGE}" -j DROP 2>/dev/null; do :; done
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

# MNIST into the bucket, for the split step: the file up.sh found (MNIST_FILE), else find_mnist's.
upload_mnist() {
    local source="${MNIST_FILE:-}"
    [[ -n "${source}" ]] || source="$(find_mnist)"
    curl -fsS -X POST -H 'Content-Type: application/octet-stream' --data-binary "@${source}" \
        "${GCS_URL}/upload/storage/v1/b/${BUCKET}/o?uploadType=media&name=${MNIST_KEY}" >/dev/null
}
