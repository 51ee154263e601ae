# shellcheck shell=bash
# SC2034 (assigned but unused) is off for this file only: the scripts that source it use every variable.
# shellcheck disable=SC2034
# Every setting of infra/gke/up.sh and down.sh, each an environment variable with a default.
# Sourced, not run (from the repository's root). Override any of them in the environment, e.g.
# `REGION=europe-west1 infra/gke/up.sh`.

SETTINGS=(PROJECT_ID REGION ZONE CLUSTER NODE_COUNT MACHINE_TYPE DISK_SIZE_GB BUCKET ARTIFACT_TTL_DAYS
    RUN_PREFIX ARGO_VERSION REPOSITORY IMAGE_TAG BUILDER FORCE_BUILD OVERLAY DELETE_BUCKET)

PROJECT_ID="${PROJECT_ID:-$(gcloud config get-value project 2>/dev/null || true)}"
REGION="${REGION:-us-central1}"
# The cluster's zone, in REGION. Empty: the zone of an existing cluster named CLUSTER in REGION, else REGION's
# first zone that is up (looked up once the APIs are enabled: "<REGION>-a" does not exist in every region).
ZONE="${ZONE:-}"
CLUSTER="${CLUSTER:-mnist-argo}"
NODE_COUNT="${NODE_COUNT:-3}"
MACHINE_TYPE="${MACHINE_TYPE:-e2-standard-4}"
DISK_SIZE_GB="${DISK_SIZE_GB:-50}"
BUCKET="${BUCKET:-${PROJECT_ID}-mnist-argo}"
# Run artifacts (every object under "<RUN_PREFIX>*", i.e. "<workflow name>/...") are deleted after this
# many days; published models under "models/" are kept.
ARTIFACT_TTL_DAYS="${ARTIFACT_TTL_DAYS:-7}"
RUN_PREFIX="${RUN_PREFIX:-mnist-}"
ARGO_VERSION="${ARGO_VERSION:-v4.1.2}"
# Artifact Registry repository (Docker format) in REGION holding both images.
REPOSITORY="${REPOSITORY:-mnist}"

# 12 hex digits naming the images' content: a hash of infra/docker/Dockerfile and of every file under the
# paths .dockerignore lets into the build ("!path" lines), names included, caches left out. Any edit there,
# committed or not, changes it; an edit elsewhere (tests, docs) does not.
image_source_hash() {
    local line
    local -a paths=(infra/docker/Dockerfile) hasher=(sha256sum)
    command -v sha256sum >/dev/null 2>&1 || hasher=(shasum -a 256) # macOS
    if [[ -f .dockerignore ]]; then
        while IFS= read -r line; do
            [[ "${line}" != '!'* ]] || paths+=("${line#!}")
        done <.dockerignore
    fi
    find "${paths[@]}" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 2>/dev/null |
        LC_ALL=C sort -z | xargs -0 -r "${hasher[@]}" | "${hasher[@]}" | cut -c1-12
}

# The images' tag: the commit (git describe) and the hash of what goes into them, so a build is never reused
# for different sources (git describe --dirty alone is the same across different uncommitted edits).
IMAGE_TAG="${IMAGE_TAG:-$(git describe --always --dirty 2>/dev/null || echo 0.1.0)-$(image_source_hash)}"
# cloudbuild: build remotely with Cloud Build (no local Docker needed); docker: build and push locally.
BUILDER="${BUILDER:-cloudbuild}"
# 1: build and push even when both images already exist with IMAGE_TAG.
FORCE_BUILD="${FORCE_BUILD:-0}"
# up.sh writes the kustomize overlay for these settings to infra/k8s/overlays/<OVERLAY> (git ignores it).
OVERLAY="${OVERLAY:-local}"
# down.sh only: ask (prompt; keep the bucket when there is no terminal), yes, or no.
DELETE_BUCKET="${DELETE_BUCKET:-ask}"

# Fixed names: the manifests, the pipeline and the page refer to these.
NAMESPACE=mnist
PIPELINE_ACCOUNT=mnist-pipeline
PAGE_ACCOUNT=mnist-page
SUBMITTER_ACCOUNT=mnist-submitter
STEPS_IMAGE_NAME=mnist-argo-steps
PAGE_IMAGE_NAME=mnist-argo-page
