# shellcheck shell=bash
# The cluster's images: built with podman on this machine and imported into containerd (no registry is
# reachable, and the kubelet never pulls: every image a pod names is already there). Sourced by up.sh.

# podman's image NAME, saved and imported into containerd's k8s.io namespace unless the same image (by
# podman's ID, recorded at each import) is there already.
import_image() {
    local name="$1" id record
    id="$(podman image inspect --format '{{.Id}}' "${name}")"
    record="${STATE}/images/$(printf '%s' "${name}" | tr '/:' '__')"
    if [[ -f "${record}" && "$(cat "${record}")" == "${id}" ]] &&
        ctr_k8s images ls -q | grep -xF "${name}" >/dev/null; then
        return
    fi
    log "importing ${name} into containerd"
    podman save --format docker-archive "${name}" | ctr_k8s images import - >/dev/null
    mkdir -p "${STATE}/images"
    printf '%s\n' "${id}" >"${record}"
}

# Argo's images and the pause image, from the programs in BIN and a base of four files.
build_cluster_images() {
    local context target
    context="$(mktemp -d)"
    cp "${BIN}/argoexec" "${BIN}/workflow-controller" "${BIN}/argo" "$(command -v catatonit)" "${context}/"
    printf 'root:x:0:0:root:/root:/sbin/nologin\nargo:x:8737:8737:argo:/home/argo:/sbin/nologin\nnonroot:x:65535:65535::/:/sbin/nologin\n' \
        >"${context}/passwd"
    printf 'root:x:0:\nargo:x:8737:\nnonroot:x:65535:\n' >"${context}/group"
    printf 'hosts: files dns\n' >"${context}/nsswitch.conf"
    cp /etc/mime.types "${context}/mime.types"
    for target in argoexec workflow-controller argocli pause; do
        local name
        case "${target}" in
        argoexec) name="${ARGOEXEC_IMAGE}" ;;
        workflow-controller) name="${WORKFLOW_CONTROLLER_IMAGE}" ;;
        argocli) name="${ARGOCLI_IMAGE}" ;;
        pause) name="${PAUSE_IMAGE}" ;;
        esac
        podman build --quiet --format docker --file "${LOCAL_CLUSTER_DIR}/images/Containerfile" \
            --target "${target}" --tag "${name}" "${context}" >/dev/null
    done
    rm -rf "${context}"
}

build_and_import_images() {
    local name
    build_cluster_images
    # The project's three images, as `make images` builds them (the layer cache makes a rebuild quick).
    STEPS_IMAGE="${STEPS_IMAGE}" TRAIN_IMAGE="${TRAIN_IMAGE}" PAGE_IMAGE="${PAGE_IMAGE}" \
        "${PROJECT_ROOT}/infra/docker/build-images.sh" >>"${STATE}/logs/images.log" 2>&1
    for name in "${PAUSE_IMAGE}" "${ARGOEXEC_IMAGE}" "${WORKFLOW_CONTROLLER_IMAGE}" "${ARGOCLI_IMAGE}" \
        "${STEPS_IMAGE}" "${TRAIN_IMAGE}" "${PAGE_IMAGE}"; do
        import_image "${name}"
    done
}
