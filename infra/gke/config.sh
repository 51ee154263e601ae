# shellcheck shell=bash
# SC2034 (assigned but unused) is off for this file only: the scripts that source it use every variable.
# shellcheck disable=SC2034
# Every setting of infra/gke/up.sh and down.sh, each an environment variable with a default, and each checked
# against a pattern of its own before anything runs (lib.sh, setting_patterns).
# Sourced, not run (from the repository's root). Override any of them in the environment, e.g.
# `REGION=europe-west1 infra/gke/up.sh`.

SETTINGS=(PROJECT_ID REGION ZONE CLUSTER SYSTEM_MACHINE_TYPE WORKER_MACHINE_TYPE WORKER_MAX_NODES DISK_SIZE_GB
    AUTHORIZED_NETWORKS BUCKET ARTIFACT_TTL_DAYS RUN_PREFIX ARGO_VERSION REQUEUE_TIME REPOSITORY IMAGE_TAG BUILDER
    FORCE_BUILD OVERLAY PAGE_DOMAIN PAGE_IAP_MEMBERS DELETE_BUCKET)

PROJECT_ID="${PROJECT_ID:-$(gcloud config get-value project 2>/dev/null || true)}"
REGION="${REGION:-us-central1}"
# The cluster's zone, in REGION. Empty: the zone of an existing cluster named CLUSTER in REGION, else REGION's
# first zone that is up (looked up once the APIs are enabled: "<REGION>-a" does not exist in every region).
ZONE="${ZONE:-}"
CLUSTER="${CLUSTER:-mnist-argo}"
# A Standard cluster whose idle cost is one small on-demand node: the system pool (Argo, the page, GKE's own
# pods) is one SYSTEM_MACHINE_TYPE node; the workers pool, Spot VMs of WORKER_MACHINE_TYPE, scales from 0 to
# WORKER_MAX_NODES while a run needs it. The defaults hold 2 + 4 vCPUs, within a Free Trial's 8.
SYSTEM_MACHINE_TYPE="${SYSTEM_MACHINE_TYPE:-e2-standard-2}"
WORKER_MACHINE_TYPE="${WORKER_MACHINE_TYPE:-e2-standard-4}"
WORKER_MAX_NODES="${WORKER_MAX_NODES:-1}"
DISK_SIZE_GB="${DISK_SIZE_GB:-30}"
# The control plane's public IP endpoint accepts only these CIDR blocks (comma-separated, e.g. your address
# as 203.0.113.7/32); empty: none. kubectl reaches the cluster through its DNS endpoint, which IAM guards.
AUTHORIZED_NETWORKS="${AUTHORIZED_NETWORKS:-}"
BUCKET="${BUCKET:-${PROJECT_ID}-mnist-argo}"
# Run artifacts (every object under "<RUN_PREFIX>*", i.e. "<workflow name>/...") are deleted after this
# many days; published models under "models/" are kept.
ARTIFACT_TTL_DAYS="${ARTIFACT_TTL_DAYS:-7}"
RUN_PREFIX="${RUN_PREFIX:-mnist-}"
ARGO_VERSION="${ARGO_VERSION:-v4.1.2}"
# The Argo controller's DEFAULT_REQUEUE_TIME: how long it waits before looking at a workflow again after a
# change (workflow/controller/rate_limiters.go, GetRequeueTime; Argo's default 10s, at least 1s).
REQUEUE_TIME="${REQUEUE_TIME:-2s}"
# Artifact Registry repository (Docker format) in REGION holding the three images.
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
# 1: build and push even when all three images already exist with IMAGE_TAG.
FORCE_BUILD="${FORCE_BUILD:-0}"
# up.sh writes the kustomize overlay for these settings to infra/k8s/overlays/<OVERLAY> (git ignores it).
OVERLAY="${OVERLAY:-local}"
# Empty: the page has no public endpoint (reach it with kubectl port-forward). A domain name (e.g.
# mnist.example.com): the page is served there over HTTPS with a Google-managed certificate.
PAGE_DOMAIN="${PAGE_DOMAIN:-}"
# With PAGE_DOMAIN: comma-separated members (user:a@example.com,group:g@example.com) Identity-Aware Proxy lets
# in; empty: no IAP, anyone with the address reaches the page.
PAGE_IAP_MEMBERS="${PAGE_IAP_MEMBERS:-}"
# down.sh only: ask (prompt; keep the bucket when there is no terminal), yes, or no.
DELETE_BUCKET="${DELETE_BUCKET:-ask}"

# Fixed names: the manifests, the pipeline and the page refer to these.
NAMESPACE=mnist
PIPELINE_ACCOUNT=mnist-pipeline
EXECUTOR_ACCOUNT=mnist-executor
PAGE_ACCOUNT=mnist-page
SUBMITTER_ACCOUNT=mnist-submitter
# The images, one per target of infra/docker/Dockerfile: every step but train (no TensorFlow), train (with
# TensorFlow, the big one), and the page.
STEPS_IMAGE_NAME=mnist-argo-steps
TRAIN_IMAGE_NAME=mnist-argo-train
PAGE_IMAGE_NAME=mnist-argo-page
# The Google service accounts the nodes and Cloud Build run as (up.sh creates both; no default account).
NODE_ACCOUNT=mnist-nodes
BUILD_ACCOUNT=mnist-build
WORKER_POOL=workers
# The pool `clusters create` makes: one node for Argo, the page and GKE's own pods (lib.sh, SYSTEM_POOL_TAINT).
SYSTEM_POOL=default-pool
# The global static IP of the public page (PAGE_DOMAIN), named by the Ingress of infra/k8s/components/public-page.
PAGE_ADDRESS=mnist-page
# The label up.sh puts on what it creates (cluster, buckets, repository, address); down.sh deletes only what
# carries it, and up.sh reuses nothing that lacks it. Service accounts have no labels: their description
# carries ACCOUNT_DESCRIPTION instead.
LABEL_KEY=managed_by
LABEL_VALUE=mnist-argo-up
ACCOUNT_DESCRIPTION="Created by mnist-argo infra/gke/up.sh"
# The Argo releases up.sh can install: the commit of each, and the sha256 of the manifest it builds where known.
ARGO_RELEASES=infra/gke/argo-releases
