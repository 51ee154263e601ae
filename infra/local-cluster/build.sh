#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Builds the local cluster's programs from the Go modules pinned beside this script, with the ordinary
# `go build`, into a cache folder outside the repository, and prints that folder. A build is kept under a
# name made from every go.mod and go.sum (lib.sh, build_key), so it is redone only when one of them changes.
#   kubernetes/    kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubeadm,
#                  kubectl (of the same minor version as the cluster), etcd
#   argo/          workflow-controller, argoexec, argo (the CLI and the Argo Server, with the Argo UI: argo/ui/)
#   gcs-emulator/  fake-gcs-server
# Settings: LOCAL_CLUSTER_CACHE (default ~/.cache/mnist-argo/local-cluster).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "${here}/lib.sh"

# The version a module pins for PATH, as go.mod says.
pinned() { (cd "$1" && go list -m -f '{{.Version}}' "$2"); }

build_kubernetes() {
    local out="$1" version minor ldflags package
    version="$(pinned "${here}/kubernetes" k8s.io/kubernetes)"
    minor="$(cut -d. -f2 <<<"${version}")"
    # What Kubernetes' own build stamps (hack/lib/version.sh, kube::version::ldflags): servers and clients
    # report this version, and the kubelet registers its node with it.
    ldflags="-s -w"
    for package in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X ${package}.gitVersion=${version} -X ${package}.gitMajor=1 -X ${package}.gitMinor=${minor}"
        ldflags+=" -X ${package}.gitTreeState=clean"
    done
    log "building Kubernetes ${version} and etcd $(pinned "${here}/kubernetes" go.etcd.io/etcd/server/v3)"
    (cd "${here}/kubernetes" && CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags}" -o "${out}/" \
        k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy \
        k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kubectl)
    # etcd's main package is the module's root, go.etcd.io/etcd/server/v3 (server/main.go upstream).
    (cd "${here}/kubernetes" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${out}/etcd" \
        go.etcd.io/etcd/server/v3)
}

argo_version() { pinned "${here}/argo" github.com/argoproj/argo-workflows/v4; }

# The Argo module's folder in Go's module cache, once checked against go.sum.
argo_module() {
    (cd "${here}/argo" && go mod download && go mod verify >/dev/null &&
        go list -m -f '{{.Dir}}' github.com/argoproj/argo-workflows/v4)
}

# The module as published does not build everything: the Argo Server embeds the UI's files from ui/dist/app
# (ui/embed.go), which the module does not carry, and a symbolic link of the repository is missing (below).
# The module cache is read-only, so the build uses a copy of the module (checked against go.sum first) with
# the UI build-ui.sh builds (or, if that fails, a page saying so) and the link put back, through a go.mod of
# its own that replaces the module with it.
build_argo() {
    local out="$1" ui="$2" version module_dir source modfile ldflags app=""
    version="$(argo_version)"
    module_dir="$(argo_module)"
    if wait "${ui}"; then
        cat "${out}/ui.log" >&2
        app="$(cat "${out}/ui")"
    else
        cat "${out}/ui.log" >&2
        printf '\n!!! error: the Argo UI did not build (above); the Argo Server serves a page saying so.\n' >&2
        printf '!!! The next build tries again.\n\n' >&2
        touch "${out}/.without-ui"
    fi
    rm "${out}/ui" "${out}/ui.log"
    # Always the same folder for a version, so that Go's build cache finds what it compiled before.
    source="${CACHE}/src/argo-workflows-${version}"
    rm -rf "${source}"
    mkdir -p "${CACHE}/src"
    cp -R "${module_dir}" "${source}"
    chmod -R u+w "${source}"
    # Module zips carry no symbolic links (golang.org/x/mod/zip), and Argo's repository shares the executor's
    # process-group code between Linux and macOS through one: without it argoexec does not build for Linux.
    ln -s signal_darwin.go "${source}/workflow/executor/osspecific/signal_linux.go"
    mkdir -p "${source}/ui/dist"
    if [[ -n "${app}" ]]; then
        cp -R "${app}" "${source}/ui/dist/app"
    else
        mkdir "${source}/ui/dist/app"
        cp "${here}/argo/ui-placeholder.html" "${source}/ui/dist/app/index.html"
    fi
    modfile="${out}/argo-build.mod"
    cp "${here}/argo/go.mod" "${modfile}"
    cp "${here}/argo/go.sum" "${modfile%.mod}.sum"
    (cd "${here}/argo" && go mod edit -modfile "${modfile}" -replace "github.com/argoproj/argo-workflows/v4=${source}")
    # Argo's Makefile (override LDFLAGS): the version every program reports.
    ldflags="-s -w -X github.com/argoproj/argo-workflows/v4.version=${version}"
    ldflags+=" -X github.com/argoproj/argo-workflows/v4.gitTag=${version}"
    ldflags+=" -X github.com/argoproj/argo-workflows/v4.gitTreeState=clean"
    log "building Argo Workflows ${version}"
    (cd "${here}/argo" && CGO_ENABLED=0 go build -modfile "${modfile}" -trimpath -ldflags "${ldflags}" \
        -o "${out}/" github.com/argoproj/argo-workflows/v4/cmd/workflow-controller \
        github.com/argoproj/argo-workflows/v4/cmd/argoexec github.com/argoproj/argo-workflows/v4/cmd/argo)
    rm -rf "${modfile}" "${modfile%.mod}.sum"
}

build_gcs_emulator() {
    local out="$1"
    log "building fake-gcs-server $(pinned "${here}/gcs-emulator" github.com/fsouza/fake-gcs-server)"
    (cd "${here}/gcs-emulator" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${out}/" \
        github.com/fsouza/fake-gcs-server)
}

main() {
    local key bin partial started
    require_commands go
    key="$(build_key)"
    bin="${CACHE}/bin-${key}"
    if [[ -f "${bin}/.complete" && ! -f "${bin}/.without-ui" ]]; then
        printf '%s\n' "${bin}"
        return
    fi
    python3 "${here}/kubernetes/replaces.py" --check >&2
    partial="${bin}.partial"
    rm -rf "${partial}"
    mkdir -p "${partial}"
    started=${SECONDS}
    # The Argo UI (build-ui.sh) builds beside Kubernetes: much of its time is spent waiting on npm's registry,
    # Go's on the CPU. Its output is shown once build_argo has waited for it. A process group of its own
    # (set -m), stopped by its ID if this script ends first, however it ends.
    set -m
    bash "${here}/build-ui.sh" "$(argo_version)" "$(argo_module)" >"${partial}/ui" 2>"${partial}/ui.log" &
    UI_BUILD=$!
    set +m
    trap 'kill -- "-${UI_BUILD}" 2>/dev/null || true' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    build_kubernetes "${partial}" >&2
    build_argo "${partial}" "${UI_BUILD}" >&2
    build_gcs_emulator "${partial}" >&2
    touch "${partial}/.complete"
    rm -rf "${bin}" # a build without the UI, tried again
    mv "${partial}" "${bin}"
    # Builds of other go.mod files, and any build cut short, are of no further use.
    find "${CACHE}" -mindepth 1 -maxdepth 1 -name 'bin-*' ! -path "${bin}" -exec rm -rf {} +
    rm -rf "${CACHE}/src"
    log "built in $((SECONDS - started)) s into ${bin}"
    printf '%s\n' "${bin}"
}

main "$@"
