# shellcheck shell=bash source-path=SCRIPTDIR
# The local cluster's configuration files, each rendered from the settings in lib.sh. Sourced by up.sh.

# gke_lib FUNCTION ARGS...: one of infra/gke/lib.sh's functions, which make Argo's manifest, its controller
# configuration and the overlay's bucket patches as up.sh makes them, run in a subshell so that the rest of
# that file (its own kube, log, ...) stays out of these scripts.
gke_lib() {
    (
        # shellcheck source=../gke/lib.sh
        source "${LOCAL_CLUSTER_DIR}/../gke/lib.sh"
        "$@"
    )
}

# kubeadm writes the certificates (a CA, the API server's, the kubelet client's, the service-account key
# pair, the front proxy's) and the kubeconfigs of admin, controller manager, scheduler and kubelet; nothing
# else of kubeadm runs. kubeadm.k8s.io/v1beta4: cmd/kubeadm/app/apis/kubeadm/v1beta4/types.go.
render_kubeadm_config() {
    cat <<YAML
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: ${NODE_IP}
  bindPort: ${API_PORT}
nodeRegistration:
  name: ${NODE_NAME}
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
clusterName: ${NODE_NAME}
kubernetesVersion: $("${BIN}/kube-apiserver" --version | cut -d' ' -f2)
certificatesDir: ${STATE}/pki
controlPlaneEndpoint: ${NODE_IP}:${API_PORT}
networking:
  serviceSubnet: ${SERVICE_CIDR}
  podSubnet: ${POD_CIDR}
apiServer:
  certSANs: ["${NODE_IP}", "$(service_ip 1)"]
YAML
}

# containerd (Debian's 1.6) with everything under .cluster/containerd: its own socket, root and state, so it
# never meets another containerd; runc with cgroupfs (no systemd here); no registry is reachable, so the
# sandbox's pause image is one of the imported images and nothing is ever pulled. A root without
# CAP_SYS_RESOURCE (as in some VMs and sandboxes) cannot lower an OOM score, which the kubelet asks for every
# sandbox (-998) and Guaranteed container: restrict_oom_score_adj keeps them at containerd's own instead.
render_containerd_config() {
    # CAP_SYS_RESOURCE is bit 24 of the effective capabilities.
    local RESTRICT_OOM_SCORE_ADJ=false
    (((0x$(awk '/^CapEff:/ { print $2 }' /proc/self/status) >> 24) & 1)) || RESTRICT_OOM_SCORE_ADJ=true
    cat <<TOML
version = 2
root = "${STATE}/containerd/root"
state = "${STATE}/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "${CONTAINERD_SOCKET}"

[ttrpc]
  address = "${CONTAINERD_SOCKET}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "${STATE}/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE_IMAGE}"
  restrict_oom_score_adj = ${RESTRICT_OOM_SCORE_ADJ}
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        Root = "${STATE}/containerd/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "${CNI_BIN}"
    conf_dir = "${STATE}/cni/net.d"
TOML
}

# The pods' network: the bridge up.sh made, addresses from the pod range, and one route, to the Services
# through the node: no default route, no masquerade, nothing beyond the cluster is reachable from a pod.
render_cni_config() {
    cat <<JSON
{
  "cniVersion": "0.4.0",
  "name": "mnist-local",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "${BRIDGE}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "${POD_CIDR}", "gateway": "${NODE_IP}"}]],
        "routes": [{"dst": "${SERVICE_CIDR}"}],
        "dataDir": "${STATE}/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
}

# The kubelet: cgroupfs, containerd's socket, pods with no DNS server (resolvConf is an empty file: nothing
# in the pipeline resolves names, and no address outside the cluster may be asked), eviction and image
# garbage collection at the disk's very end only (images cannot be pulled again here).
render_kubelet_config() {
    cat <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: ${STATE}/pki/ca.crt
authorization:
  mode: Webhook
address: ${NODE_IP}
healthzBindAddress: 127.0.0.1
healthzPort: ${KUBELET_HEALTHZ_PORT}
readOnlyPort: 0
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://${CONTAINERD_SOCKET}
resolvConf: ${STATE}/resolv.conf
podLogsDir: ${STATE}/pod-logs
failSwapOn: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 200Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
YAML
}

render_kube_proxy_config() {
    cat <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: ${STATE}/kubeconfigs/kube-proxy.conf
mode: iptables
clusterCIDR: ${POD_CIDR}
bindAddress: ${NODE_IP}
healthzBindAddress: 127.0.0.1:${KUBE_PROXY_HEALTHZ_PORT}
metricsBindAddress: 127.0.0.1:${KUBE_PROXY_METRICS_PORT}
nodePortAddresses: ["${NODE_IP}/32"]
conntrack:
  maxPerCore: 0
YAML
}

# Argo Workflows as infra/gke/up.sh installs it (render_argo_install, render_argo_config in
# infra/gke/lib.sh): the release's kustomize base, here the Go module's own copy of manifests/, with the
# controller configuration up.sh renders; only the images are the locally built ones, and the executor and
# the steps' main containers are told where the GCS emulator is.
render_argo_install() {
    local directory="$1" manifests
    manifests="$(cd "${LOCAL_CLUSTER_DIR}/argo" && go list -m -f '{{.Dir}}' github.com/argoproj/argo-workflows/v4)/manifests"
    mkdir -p "${directory}"
    ARGO_VERSION="${ARGO_LOCAL_VERSION}" gke_lib kustomize_argo_release "${manifests}/cluster-install" \
        "$(kubectl_bin)" >"${directory}/install.yaml"
    ARGO_VERSION="${ARGO_LOCAL_VERSION}" REQUEUE_TIME="${REQUEUE_TIME:-2s}" PAGE_URL="${PAGE_URL}" \
        ARGO_EXECUTOR_IMAGE="${ARGOEXEC_IMAGE}" ARGO_EXTRA_ENV="STORAGE_EMULATOR_HOST=${GCS_URL}" \
        gke_lib render_argo_config "${directory}"
    # The Argo Server reads archived logs and artifacts from the bucket for the UI and the API.
    cat >"${directory}/argo-server-emulator.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata:
  name: argo-server
  namespace: argo
spec:
  template:
    spec:
      containers:
        - name: argo-server
          env:
            - name: STORAGE_EMULATOR_HOST
              value: "${GCS_URL}"
YAML
    printf '  - path: argo-server-emulator.yaml\n' >>"${directory}/kustomization.yaml"
    cat >>"${directory}/kustomization.yaml" <<YAML
images:
  - name: quay.io/argoproj/workflow-controller
    newName: ${WORKFLOW_CONTROLLER_IMAGE%:*}
    newTag: ${WORKFLOW_CONTROLLER_IMAGE##*:}
  - name: quay.io/argoproj/argocli
    newName: ${ARGOCLI_IMAGE%:*}
    newTag: ${ARGOCLI_IMAGE##*:}
YAML
}

# The project's manifests as every cluster gets them (infra/k8s/base), with this cluster's settings in an
# overlay, as up.sh writes one for GKE: the bucket, the page's image, and where the GCS emulator is; the page's
# Service at PAGE_IP, the address of the Argo UI's link to it. The page's image is imported, never pulled:
# IfNotPresent.
render_project_overlay() {
    local directory="$1"
    mkdir -p "${directory}"
    cat >"${directory}/kustomization.yaml" <<YAML
# Written by infra/local-cluster/up.sh for the local cluster.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to "${directory}" "${PROJECT_ROOT}/infra/k8s/base")
images:
  - name: mnist-argo-page
    newName: ${PAGE_IMAGE%:*}
    newTag: ${PAGE_IMAGE##*:}
patches:
$(gke_lib render_bucket_patches IfNotPresent "STORAGE_EMULATOR_HOST=${GCS_URL}")
  - patch: |
      apiVersion: v1
      kind: Service
      metadata:
        name: mnist-page
        namespace: ${NAMESPACE}
      spec:
        clusterIP: ${PAGE_IP}
YAML
}

# What `source .cluster/env` sets: the admin's kubeconfig, the Argo Server and the submitter's token (one
# day), the artifact store, the emulator, the images, the page's address, and the built programs (kubectl,
# argo) on PATH.
render_env() {
    local server token
    server="$(kube -n argo get service argo-server -o jsonpath='{.spec.clusterIP}')"
    token="$(kube -n "${NAMESPACE}" create token mnist-submitter --duration 24h)"
    cat <<ENV
# Written by infra/local-cluster/up.sh: \`source .cluster/env\` in bash.
export KUBECONFIG="${STATE}/kubeconfig"
export PATH="$(cat "${STATE}/bin"):\${PATH}"
export ARGO_SERVER="https://${server}:2746"
export ARGO_INSECURE_SKIP_VERIFY=true
export ARGO_NAMESPACE="${NAMESPACE}"
export ARGO_TOKEN="Bearer ${token}"
export ARTIFACTS="gs://${BUCKET}"
export MNIST_SOURCE="gs://${BUCKET}/${MNIST_KEY}"
export STORAGE_EMULATOR_HOST="${GCS_URL}"
export GOOGLE_CLOUD_PROJECT=local
export STEPS_IMAGE="${STEPS_IMAGE}"
export TRAIN_IMAGE="${TRAIN_IMAGE}"
export PAGE_IMAGE="${PAGE_IMAGE}"
export PAGE_URL="${PAGE_URL}"
ENV
}
