#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# From an empty GCP project to Argo Workflows and the page on GKE. Safe to run again: every step creates what
# is missing and reuses what exists. Settings: environment variables, see infra/gke/config.sh.
set -euo pipefail
# Name the command that failed; running the script again resumes, as every step reuses what exists.
set -o errtrace
trap 'printf "error: up.sh stopped at line %s: %s\n" "${LINENO}" "${BASH_COMMAND}" >&2' ERR

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "${here}/../.."
# shellcheck source=config.sh
source "${here}/config.sh"
# shellcheck source=lib.sh
source "${here}/lib.sh"

# Run "$@" again a few times: new service accounts take a moment to be visible to IAM.
retry() {
    local attempt
    for attempt in 1 2 3 4; do
        "$@" && return 0
        log "retrying in $((attempt * 10))s: $1 $2 $3"
        sleep $((attempt * 10))
    done
    "$@"
}

enable_services() {
    log "enabling the APIs used (GKE, Compute Engine, Artifact Registry, Cloud Build, IAM, Storage, ...)"
    gcloud services enable container.googleapis.com compute.googleapis.com artifactregistry.googleapis.com \
        cloudbuild.googleapis.com iam.googleapis.com iamcredentials.googleapis.com \
        cloudresourcemanager.googleapis.com storage.googleapis.com --project "${PROJECT_ID}"
}

# The nodes' account gets the role GKE documents for node service accounts (write logs and metrics, read
# node configuration). Google grants it by itself only where the organisation allows default grants.
grant_node_account() {
    log "granting roles/container.defaultNodeServiceAccount to the nodes' account $(node_account)"
    retry gcloud projects add-iam-policy-binding "${PROJECT_ID}" --member "serviceAccount:$(node_account)" \
        --role roles/container.defaultNodeServiceAccount --condition None >/dev/null
}

ensure_cluster() {
    local pool node_pool
    if gcloud container clusters describe "${CLUSTER}" --zone "${ZONE}" --project "${PROJECT_ID}" \
        >/dev/null 2>&1; then
        log "reusing cluster ${CLUSTER} in ${ZONE}"
        pool="$(gcloud container clusters describe "${CLUSTER}" --zone "${ZONE}" --project "${PROJECT_ID}" \
            --format 'value(workloadIdentityConfig.workloadPool)')"
        if [[ -z "${pool}" ]]; then
            log "enabling Workload Identity on cluster ${CLUSTER} and its node pools"
            gcloud container clusters update "${CLUSTER}" --zone "${ZONE}" --project "${PROJECT_ID}" \
                --workload-pool "${PROJECT_ID}.svc.id.goog"
            for node_pool in $(gcloud container node-pools list --cluster "${CLUSTER}" --zone "${ZONE}" \
                --project "${PROJECT_ID}" --format 'value(name)'); do
                gcloud container node-pools update "${node_pool}" --cluster "${CLUSTER}" --zone "${ZONE}" \
                    --project "${PROJECT_ID}" --workload-metadata GKE_METADATA
            done
        fi
    else
        log "creating cluster ${CLUSTER}: ${NODE_COUNT} x ${MACHINE_TYPE} in ${ZONE} (takes about 5 minutes)"
        gcloud container clusters create "${CLUSTER}" --zone "${ZONE}" --project "${PROJECT_ID}" \
            --num-nodes "${NODE_COUNT}" --machine-type "${MACHINE_TYPE}" \
            --disk-type pd-balanced --disk-size "${DISK_SIZE_GB}" \
            --workload-pool "${PROJECT_ID}.svc.id.goog" \
            --enable-dataplane-v2 --enable-shielded-nodes --release-channel regular
    fi
    gcloud container clusters get-credentials "${CLUSTER}" --zone "${ZONE}" --project "${PROJECT_ID}"
}

ensure_bucket() {
    local lifecycle
    if gcloud storage buckets describe "gs://${BUCKET}" --project "${PROJECT_ID}" >/dev/null 2>&1; then
        log "reusing bucket gs://${BUCKET}"
    else
        log "creating bucket gs://${BUCKET} in ${REGION}"
        gcloud storage buckets create "gs://${BUCKET}" --project "${PROJECT_ID}" --location "${REGION}" \
            --uniform-bucket-level-access --public-access-prevention
    fi
    lifecycle="$(mktemp)"
    render_lifecycle >"${lifecycle}"
    log "bucket policy: uniform access, no public access, delete ${RUN_PREFIX}* after ${ARTIFACT_TTL_DAYS} days"
    gcloud storage buckets update "gs://${BUCKET}" --project "${PROJECT_ID}" \
        --uniform-bucket-level-access --public-access-prevention --lifecycle-file "${lifecycle}"
    rm -f "${lifecycle}"
}

# ensure_google_account NAME ROLE: a Google service account for the Kubernetes one of the same name, with ROLE
# on the bucket only, which that Kubernetes service account may act as (Workload Identity).
ensure_google_account() {
    local name="$1" role="$2" email
    email="$(google_account "${name}")"
    if gcloud iam service-accounts describe "${email}" --project "${PROJECT_ID}" >/dev/null 2>&1; then
        log "reusing Google service account ${email}"
    else
        log "creating Google service account ${email}"
        gcloud iam service-accounts create "${name}" --project "${PROJECT_ID}" \
            --display-name "mnist-argo ${name} (Workload Identity)"
    fi
    log "granting ${role} on gs://${BUCKET} to ${name}; ${NAMESPACE}/${name} may act as it"
    retry gcloud storage buckets add-iam-policy-binding "gs://${BUCKET}" --project "${PROJECT_ID}" \
        --member "serviceAccount:${email}" --role "${role}" >/dev/null
    retry gcloud iam service-accounts add-iam-policy-binding "${email}" --project "${PROJECT_ID}" \
        --role roles/iam.workloadIdentityUser --member "$(workload_member "${name}")" >/dev/null
}

# The Argo Server reads artifacts and archived logs for the UI with its own identity, argo/argo-server, not
# the workflow's. It gets read access to the bucket through Workload Identity, granted to that Kubernetes
# service account directly as a principal (Cloud Storage accepts these) rather than through a Google service
# account: the account belongs to Argo's install manifest, which every run of up.sh applies again, so this
# needs no annotation on it, no Google service account to create or delete, and down.sh revokes it as one
# binding.
grant_argo_server_read() {
    log "granting roles/storage.objectViewer on gs://${BUCKET} to argo/argo-server (the Argo UI's artifacts)"
    retry gcloud storage buckets add-iam-policy-binding "gs://${BUCKET}" --project "${PROJECT_ID}" \
        --member "$(argo_server_member)" --role roles/storage.objectViewer >/dev/null
}

ensure_registry() {
    if gcloud artifacts repositories describe "${REPOSITORY}" --location "${REGION}" --project "${PROJECT_ID}" \
        >/dev/null 2>&1; then
        log "reusing Artifact Registry repository ${REPOSITORY} in ${REGION}"
    else
        log "creating Artifact Registry repository ${REPOSITORY} in ${REGION}"
        gcloud artifacts repositories create "${REPOSITORY}" --repository-format docker \
            --location "${REGION}" --project "${PROJECT_ID}" --description "mnist-argo images"
    fi
    # The nodes pull images as their account.
    retry gcloud artifacts repositories add-iam-policy-binding "${REPOSITORY}" --location "${REGION}" \
        --project "${PROJECT_ID}" --role roles/artifactregistry.reader \
        --member "serviceAccount:$(node_account)" >/dev/null
}

# What Cloud Build's account needs to build here: read the uploaded source (its own bucket), write build
# logs, push to the repository. Projects made since mid-2024 build as the Compute Engine default service
# account, which has no roles where the organisation forbids default grants; the legacy Cloud Build account
# (PROJECT_NUMBER@cloudbuild.gserviceaccount.com) has them already.
ensure_build_access() {
    local account bucket lifecycle
    account="$(gcloud builds get-default-service-account --project "${PROJECT_ID}" \
        --format 'value(serviceAccountEmail.segment(3))')"
    [[ "${account}" == *@*.gserviceaccount.com ]] ||
        die "no Cloud Build service account found (got '${account}')"
    bucket="gs://$(build_bucket)"
    if gcloud storage buckets describe "${bucket}" --project "${PROJECT_ID}" >/dev/null 2>&1; then
        log "reusing build bucket ${bucket}"
    else
        log "creating build bucket ${bucket} for Cloud Build's source uploads"
        gcloud storage buckets create "${bucket}" --project "${PROJECT_ID}" --location "${REGION}" \
            --uniform-bucket-level-access --public-access-prevention --soft-delete-duration 0
    fi
    lifecycle="$(mktemp)"
    render_build_lifecycle >"${lifecycle}"
    gcloud storage buckets update "${bucket}" --project "${PROJECT_ID}" --lifecycle-file "${lifecycle}"
    rm -f "${lifecycle}"
    log "granting Cloud Build's account ${account}: read ${bucket}, write logs, push to ${REPOSITORY}"
    retry gcloud storage buckets add-iam-policy-binding "${bucket}" --project "${PROJECT_ID}" \
        --member "serviceAccount:${account}" --role roles/storage.objectViewer >/dev/null
    retry gcloud projects add-iam-policy-binding "${PROJECT_ID}" --member "serviceAccount:${account}" \
        --role roles/logging.logWriter --condition None >/dev/null
    retry gcloud artifacts repositories add-iam-policy-binding "${REPOSITORY}" --location "${REGION}" \
        --project "${PROJECT_ID}" --member "serviceAccount:${account}" --role roles/artifactregistry.writer \
        >/dev/null
}

image_exists() {
    gcloud artifacts docker images describe "$1" --project "${PROJECT_ID}" >/dev/null 2>&1
}

image_digest() {
    gcloud artifacts docker images describe "$1" --project "${PROJECT_ID}" --format 'value(image_summary.digest)'
}

build_images() {
    local steps page target
    steps="$(image_ref "${STEPS_IMAGE_NAME}"):${IMAGE_TAG}"
    page="$(image_ref "${PAGE_IMAGE_NAME}"):${IMAGE_TAG}"
    if [[ "${FORCE_BUILD}" != 1 ]] && image_exists "${steps}" && image_exists "${page}"; then
        log "reusing images ${steps} and ${page} (FORCE_BUILD=1 rebuilds them)"
        return
    fi
    if [[ "${BUILDER}" == cloudbuild ]]; then
        ensure_build_access
        # Each build starts on a fresh worker with an empty layer cache: both images are built from scratch
        # (about 10 minutes), which is why this runs only for a new IMAGE_TAG (a new content hash).
        log "building ${steps} and ${page} with Cloud Build"
        gcloud builds submit --project "${PROJECT_ID}" --config infra/gke/cloudbuild.yaml \
            --gcs-source-staging-dir "gs://$(build_bucket)/source" \
            --substitutions "_STEPS_IMAGE=${steps},_PAGE_IMAGE=${page}" .
    else
        require_commands docker
        log "building ${steps} and ${page} with the local Docker engine"
        gcloud auth configure-docker "${REGION}-docker.pkg.dev" --quiet
        for target in steps page; do
            local image="${steps}"
            [[ "${target}" == page ]] && image="${page}"
            docker build --platform linux/amd64 --file infra/docker/Dockerfile --target "${target}" \
                --tag "${image}" .
            docker push "${image}"
        done
    fi
}

install_argo() {
    local manifest="https://github.com/argoproj/argo-workflows/releases/download/${ARGO_VERSION}/install.yaml"
    log "installing Argo Workflows ${ARGO_VERSION} into namespace argo"
    kubectl create namespace argo --dry-run=client --output yaml | kubectl apply --filename -
    # Argo v4's CRDs carry full validation schemas and are too large for client-side apply.
    kubectl apply --server-side --force-conflicts --namespace argo --filename "${manifest}"
    kubectl --namespace argo rollout status deployment/workflow-controller --timeout 5m
    kubectl --namespace argo rollout status deployment/argo-server --timeout 5m
}

apply_manifests() {
    local overlay="infra/k8s/overlays/${OVERLAY}" digest
    digest="$(image_digest "$(image_ref "${PAGE_IMAGE_NAME}"):${IMAGE_TAG}")"
    log "writing the kustomize overlay ${overlay} (page image ${digest}) and applying it"
    render_overlay "${overlay}" ../../base "${digest}"
    kubectl apply --kustomize "${overlay}"
    kubectl --namespace "${NAMESPACE}" rollout status deployment/mnist-page --timeout 10m
}

wait_for_page_address() {
    local address="" attempt
    log "waiting for the page's external IP"
    for attempt in $(seq 1 30); do
        address="$(kubectl --namespace "${NAMESPACE}" get service mnist-page \
            --output jsonpath='{.status.loadBalancer.ingress[0].ip}')"
        [[ -n "${address}" ]] && break
        [[ "${attempt}" == 30 ]] || sleep 10
    done
    if [[ -n "${address}" ]]; then
        log "the page: http://${address}/"
    else
        log "no external IP yet; see: kubectl -n ${NAMESPACE} get service mnist-page"
    fi
}

# How to reach the Argo UI and train on the cluster: commands to paste into the same shell, in this order.
print_next_steps() {
    cat >&2 <<NEXT
==> done. Next, in this shell (the Argo UI is then at https://localhost:2746; its certificate is self-signed):
    kubectl -n argo port-forward service/argo-server 2746:2746 >/dev/null 2>&1 &
    export ARGO_SERVER=https://localhost:2746 ARGO_INSECURE_SKIP_VERIFY=true ARGO_NAMESPACE=${NAMESPACE}
    export ARGO_TOKEN="Bearer \$(kubectl -n ${NAMESPACE} create token ${SUBMITTER_ACCOUNT} --duration 8h)"
    .venv/bin/python workflows/submit.py --artifacts gs://${BUCKET} \\
        --image $(image_ref "${STEPS_IMAGE_NAME}"):${IMAGE_TAG} --watch
NEXT
}

main() {
    print_settings
    check_settings
    # kubectl reaches GKE through gcloud's credential plugin: without it every kubectl call fails.
    require_commands gcloud kubectl gke-gcloud-auth-plugin
    enable_services
    load_project_number
    resolve_zone
    grant_node_account
    ensure_cluster
    ensure_bucket
    ensure_google_account "${PIPELINE_ACCOUNT}" roles/storage.objectUser
    ensure_google_account "${PAGE_ACCOUNT}" roles/storage.objectViewer
    grant_argo_server_read
    ensure_registry
    build_images
    install_argo
    apply_manifests
    wait_for_page_address
    print_next_steps
}

main "$@"
