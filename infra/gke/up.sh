#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# From an empty GCP project to Argo Workflows and the page on GKE. Safe to run again: every step creates what
# is missing and reuses what it made before (what carries its label), and refuses what it did not make.
# Settings: environment variables, see infra/gke/config.sh.
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

# Refuse before touching anything when ARGO_VERSION has no known commit to build its manifest from.
check_argo_release() {
    [[ -n "$(argo_release_commit)" ]] ||
        bad_setting "no commit known for Argo ${ARGO_VERSION} in ${ARGO_RELEASES}: add its line (that file says how), or set ARGO_VERSION to a listed version"
}

enable_services() {
    local -a services=(container.googleapis.com compute.googleapis.com artifactregistry.googleapis.com
        cloudbuild.googleapis.com iam.googleapis.com iamcredentials.googleapis.com
        cloudresourcemanager.googleapis.com storage.googleapis.com
        containerfilesystem.googleapis.com) # image streaming
    [[ -z "${PAGE_IAP_MEMBERS}" ]] || services+=(iap.googleapis.com)
    log "enabling the APIs used (GKE, Compute Engine, Artifact Registry, Cloud Build, IAM, Storage, ...)"
    gcloud services enable "${services[@]}" --project "${PROJECT_ID}"
}

# ensure_account NAME DISPLAY: a Google service account of the project that up.sh made (its description says
# so); one of the same name that up.sh did not make stops the script.
ensure_account() {
    local name="$1" display="$2" email
    email="$(google_account "${name}")"
    if ! reuse_if_made_by_up "Google service account ${email}" \
        "service account ${email} exists but up.sh did not create it (its description is not '${ACCOUNT_DESCRIPTION}'): if an earlier up.sh made it, mark it: gcloud iam service-accounts update ${email} --project ${PROJECT_ID} --description '${ACCOUNT_DESCRIPTION}'" \
        gcloud iam service-accounts describe "${email}" --project "${PROJECT_ID}" --format 'value(description)'; then
        log "creating Google service account ${email}"
        gcloud iam service-accounts create "${name}" --project "${PROJECT_ID}" \
            --display-name "${display}" --description "${ACCOUNT_DESCRIPTION}"
    fi
}

# The nodes' own account with only the role GKE documents for node service accounts (write logs and metrics,
# read node configuration; "Use least privilege IAM service accounts", GKE's hardening guide), and read
# access to the image repository (ensure_registry).
ensure_node_account() {
    ensure_account "${NODE_ACCOUNT}" "mnist-argo GKE nodes"
    log "granting roles/container.defaultNodeServiceAccount to the nodes' account $(node_account)"
    retry gcloud projects add-iam-policy-binding "${PROJECT_ID}" --member "serviceAccount:$(node_account)" \
        --role roles/container.defaultNodeServiceAccount --condition None >/dev/null
}

# The workers pool: Spot VMs, none while no step runs (the cluster autoscaler adds one for a pending step and
# removes it once idle), tainted so that only the steps (which tolerate it, workflows/pipeline/resources.py) land there.
# Image streaming lets a trainer start on a fresh node before its 1.2 GB TensorFlow image is whole.
ensure_worker_pool() {
    if gcloud container node-pools describe "${WORKER_POOL}" --cluster "${CLUSTER}" --zone "${ZONE}" \
        --project "${PROJECT_ID}" >/dev/null 2>&1; then
        log "reusing node pool ${WORKER_POOL}"
        return
    fi
    log "creating node pool ${WORKER_POOL}: 0 to ${WORKER_MAX_NODES} Spot ${WORKER_MACHINE_TYPE}"
    gcloud container node-pools create "${WORKER_POOL}" --cluster "${CLUSTER}" --zone "${ZONE}" \
        --project "${PROJECT_ID}" --machine-type "${WORKER_MACHINE_TYPE}" --spot \
        --num-nodes 0 --enable-autoscaling --min-nodes 0 --max-nodes "${WORKER_MAX_NODES}" \
        --node-taints cloud.google.com/gke-spot=true:NoSchedule \
        --service-account "$(node_account)" --disk-type pd-balanced --disk-size "${DISK_SIZE_GB}" \
        --workload-metadata GKE_METADATA --enable-image-streaming --labels "$(labels_flag)"
}

# The control plane: its DNS endpoint (IAM decides who reaches it) for kubectl, its public IP endpoint closed
# to all but AUTHORIZED_NETWORKS.
control_plane_flags() {
    printf '%s\n' --enable-dns-access --enable-master-authorized-networks
    [[ -z "${AUTHORIZED_NETWORKS}" ]] || printf '%s\n' --master-authorized-networks "${AUTHORIZED_NETWORKS}"
}

create_cluster() {
    local -a access
    mapfile -t access < <(control_plane_flags)
    log "creating cluster ${CLUSTER} in ${ZONE}: one ${SYSTEM_MACHINE_TYPE} node (takes about 5 minutes)"
    gcloud container clusters create "${CLUSTER}" --zone "${ZONE}" --project "${PROJECT_ID}" \
        --num-nodes 1 --machine-type "${SYSTEM_MACHINE_TYPE}" --node-taints "${SYSTEM_POOL_TAINT}" \
        --disk-type pd-balanced --disk-size "${DISK_SIZE_GB}" \
        --service-account "$(node_account)" --workload-pool "${PROJECT_ID}.svc.id.goog" \
        --enable-dataplane-v2 --enable-shielded-nodes --release-channel regular \
        --enable-image-streaming --autoscaling-profile optimize-utilization \
        "${access[@]}" --labels "$(labels_flag)"
}

# A reused cluster gets what a new one has: Workload Identity, the closed control plane, the tainted system pool.
converge_cluster() {
    local pool node_pool dns="" authorized="" taints=""
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
    read -r dns authorized <<<"$(gcloud container clusters describe "${CLUSTER}" --zone "${ZONE}" \
        --project "${PROJECT_ID}" --format \
        'value(controlPlaneEndpointsConfig.dnsEndpointConfig.allowExternalTraffic,masterAuthorizedNetworksConfig.enabled)')" ||
        true
    if [[ "${dns}" != True ]]; then
        log "opening the control plane's DNS endpoint (IAM decides who reaches it)"
        gcloud container clusters update "${CLUSTER}" --zone "${ZONE}" --project "${PROJECT_ID}" --enable-dns-access
    fi
    if [[ "${authorized}" != True ]]; then
        log "closing the control plane's public IP endpoint to all but AUTHORIZED_NETWORKS"
        local -a networks=()
        [[ -z "${AUTHORIZED_NETWORKS}" ]] || networks=(--master-authorized-networks "${AUTHORIZED_NETWORKS}")
        gcloud container clusters update "${CLUSTER}" --zone "${ZONE}" --project "${PROJECT_ID}" \
            --enable-master-authorized-networks "${networks[@]}"
    fi
    taints="$(gcloud container node-pools describe "${SYSTEM_POOL}" --cluster "${CLUSTER}" --zone "${ZONE}" \
        --project "${PROJECT_ID}" --format 'value(config.taints[].key)')" || true
    if [[ "${taints}" != *"${SYSTEM_POOL_TAINT%%=*}"* ]]; then
        log "tainting node pool ${SYSTEM_POOL} (${SYSTEM_POOL_TAINT}): no run's pod may land there"
        gcloud container node-pools update "${SYSTEM_POOL}" --cluster "${CLUSTER}" --zone "${ZONE}" \
            --project "${PROJECT_ID}" --node-taints "${SYSTEM_POOL_TAINT}"
    fi
}

ensure_cluster() {
    local described="" status="" label=""
    # (a command substitution, not a process one: a failing command in the latter would fire the ERR trap)
    if described="$(gcloud container clusters describe "${CLUSTER}" --zone "${ZONE}" \
        --project "${PROJECT_ID}" --format "value(status,resourceLabels.${LABEL_KEY})" 2>/dev/null)"; then
        read -r status label <<<"${described}" || true
    fi
    if [[ -n "${status}" ]] && ! made_by_up "${label}"; then
        die "cluster ${CLUSTER} in ${ZONE} exists but up.sh did not create it (no label ${LABEL_KEY}=${LABEL_VALUE}): set CLUSTER to another name, or label it to let up.sh manage it: gcloud container clusters update ${CLUSTER} --zone ${ZONE} --project ${PROJECT_ID} --update-labels $(labels_flag)"
    fi
    case "${status}" in
    "") create_cluster ;;
    ERROR)
        log "cluster ${CLUSTER} is in ERROR (its creation or an update failed): deleting it, then creating it again"
        gcloud container clusters delete "${CLUSTER}" --zone "${ZONE}" --project "${PROJECT_ID}" --quiet
        create_cluster
        ;;
    RUNNING | DEGRADED)
        log "reusing cluster ${CLUSTER} in ${ZONE} (${status})"
        converge_cluster
        ;;
    *)
        die "cluster ${CLUSTER} is ${status}: an operation is under way. Wait for it (gcloud container operations list --zone ${ZONE} --project ${PROJECT_ID}), then run up.sh again"
        ;;
    esac
    ensure_worker_pool
    gcloud container clusters get-credentials "${CLUSTER}" --zone "${ZONE}" --project "${PROJECT_ID}" \
        --dns-endpoint
}

# ensure_labelled_bucket BUCKET WHAT: BUCKET exists and up.sh made it (it carries the label), or it is made
# here. A bucket of that name that up.sh did not make stops the script: up.sh never changes its settings.
ensure_labelled_bucket() {
    local bucket="$1" what="$2"
    reuse_if_made_by_up "${what} ${bucket}" \
        "${bucket} exists but up.sh did not create it (no label ${LABEL_KEY}=${LABEL_VALUE}), and up.sh changes no bucket it did not make: set BUCKET to another name, or label it to let up.sh manage it: gcloud storage buckets update ${bucket} --update-labels $(labels_flag)" \
        gcloud storage buckets describe "${bucket}" --project "${PROJECT_ID}" --format "value(labels.${LABEL_KEY})" &&
        return
    log "creating ${what} ${bucket} in ${REGION}"
    gcloud storage buckets create "${bucket}" --project "${PROJECT_ID}" --location "${REGION}" \
        --uniform-bucket-level-access --public-access-prevention "${@:3}" ||
        die "could not create ${bucket}: bucket names are global, and this one may be taken (set BUCKET)"
    gcloud storage buckets update "${bucket}" --project "${PROJECT_ID}" --update-labels "$(labels_flag)"
}

ensure_bucket() {
    local lifecycle
    ensure_labelled_bucket "gs://${BUCKET}" bucket
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
    ensure_account "${name}" "mnist-argo ${name} (Workload Identity)"
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
    if ! reuse_if_made_by_up "Artifact Registry repository ${REPOSITORY} in ${REGION}" \
        "Artifact Registry repository ${REPOSITORY} exists but up.sh did not create it (no label ${LABEL_KEY}=${LABEL_VALUE}): set REPOSITORY to another name, or label it: gcloud artifacts repositories update ${REPOSITORY} --location ${REGION} --project ${PROJECT_ID} --update-labels $(labels_flag)" \
        gcloud artifacts repositories describe "${REPOSITORY}" --location "${REGION}" --project "${PROJECT_ID}" \
        --format "value(labels.${LABEL_KEY})"; then
        log "creating Artifact Registry repository ${REPOSITORY} in ${REGION}"
        gcloud artifacts repositories create "${REPOSITORY}" --repository-format docker \
            --location "${REGION}" --project "${PROJECT_ID}" --description "mnist-argo images" \
            --labels "$(labels_flag)"
    fi
    # The nodes pull images as their account.
    retry gcloud artifacts repositories add-iam-policy-binding "${REPOSITORY}" --location "${REGION}" \
        --project "${PROJECT_ID}" --role roles/artifactregistry.reader \
        --member "serviceAccount:$(node_account)" >/dev/null
}

# Cloud Build runs as an account of its own (a user-specified service account), never the project's default
# build account, with what a build needs: read the uploaded source (its own bucket), write build logs, push
# to this repository only.
ensure_build_access() {
    local account bucket lifecycle
    ensure_account "${BUILD_ACCOUNT}" "mnist-argo image builds"
    account="$(google_account "${BUILD_ACCOUNT}")"
    bucket="gs://$(build_bucket)"
    ensure_labelled_bucket "${bucket}" "build bucket" --soft-delete-duration 0
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

# One Cloud Build of the three images (references STEPS TRAIN PAGE). Grants made moments ago can take minutes
# to reach Cloud Build, so a refusal naming a permission is retried twice, a minute apart; any other failure
# stops here.
cloud_build() {
    local steps="$1" train="$2" page="$3" output attempt
    output="$(mktemp)"
    for attempt in 1 2 3; do
        if gcloud builds submit --project "${PROJECT_ID}" --config infra/gke/cloudbuild.yaml \
            --service-account "projects/${PROJECT_ID}/serviceAccounts/$(google_account "${BUILD_ACCOUNT}")" \
            --gcs-source-staging-dir "gs://$(build_bucket)/source" \
            --substitutions "_STEPS_IMAGE=${steps},_TRAIN_IMAGE=${train},_PAGE_IMAGE=${page}" . 2>&1 |
            tee "${output}"; then
            rm -f "${output}"
            return
        fi
        grep -qiE 'permission|denied|forbidden|does not have' "${output}" ||
            die "the image build failed (see its log above); run up.sh again once it is fixed"
        ((attempt < 3)) || break
        log "the build was refused a permission granted moments ago (IAM takes minutes to propagate): retrying in 60s"
        sleep 60
    done
    rm -f "${output}"
    die "the build is still refused a permission: wait a few minutes and run up.sh again"
}

# Each target of infra/docker/Dockerfile and the reference of its image with IMAGE_TAG, one pair a line.
image_targets() {
    local target name
    for target in steps train page; do
        case "${target}" in
        steps) name="${STEPS_IMAGE_NAME}" ;;
        train) name="${TRAIN_IMAGE_NAME}" ;;
        page) name="${PAGE_IMAGE_NAME}" ;;
        esac
        printf '%s %s:%s\n' "${target}" "$(image_ref "${name}")" "${IMAGE_TAG}"
    done
}

# The three images, built and pushed unless all of them already exist with IMAGE_TAG (the tag names their
# content, so an existing one is what a build would make); one missing builds all three.
build_images() {
    local pair missing=0
    local -a pairs images=()
    mapfile -t pairs < <(image_targets)
    for pair in "${pairs[@]}"; do
        images+=("${pair#* }")
        [[ "${FORCE_BUILD}" == 1 ]] || image_exists "${pair#* }" || missing=1
    done
    if [[ "${FORCE_BUILD}" != 1 && "${missing}" == 0 ]]; then
        log "reusing images ${images[*]} (FORCE_BUILD=1 rebuilds them)"
        return
    fi
    if [[ "${BUILDER}" == cloudbuild ]]; then
        ensure_build_access
        # Each build starts on a fresh worker with an empty layer cache: the images are built from scratch
        # (about 10 minutes), which is why this runs only for a new IMAGE_TAG (a new content hash).
        log "building ${images[*]} with Cloud Build"
        cloud_build "${images[@]}"
    else
        require_commands docker
        log "building ${images[*]} with the local Docker engine"
        gcloud auth configure-docker "${REGION}-docker.pkg.dev" --quiet
        for pair in "${pairs[@]}"; do
            docker build --platform linux/amd64 --file infra/docker/Dockerfile --target "${pair%% *}" \
                --tag "${pair#* }" .
            docker push "${pair#* }"
        done
    fi
}

# Argo's release manifest, built from the release's kustomize base at its commit (git checks the content
# against the commit's hash) as Argo's Makefile builds install.yaml, and compared with the sha256 listed for
# the version where one is listed, before anything of it is applied; then the controller configured for this
# pipeline (render_argo_config).
install_argo() {
    local commit source directory expected actual
    commit="$(argo_release_commit)"
    source="https://github.com/argoproj/argo-workflows//manifests/cluster-install?ref=${commit}"
    directory="$(mktemp -d)"
    log "building Argo Workflows ${ARGO_VERSION}'s manifest from its kustomize base at commit ${commit}"
    kustomize_argo_release "${source}" >"${directory}/install.yaml"
    expected="$(argo_release_checksum)"
    if [[ -n "${expected}" ]]; then
        actual="$(sha256_of "${directory}/install.yaml")"
        if [[ "${actual}" != "${expected}" ]]; then
            rm -rf "${directory}"
            die "Argo ${ARGO_VERSION}'s manifest built at ${commit} has sha256 ${actual}, not the ${expected} listed in ${ARGO_RELEASES}: nothing applied"
        fi
    fi
    PAGE_URL="$(page_url)" render_argo_config "${directory}"
    log "installing Argo Workflows ${ARGO_VERSION} into namespace argo (executor without root, requeue ${REQUEUE_TIME})"
    # Argo v4's CRDs carry full validation schemas and are too large for client-side apply.
    kube apply --server-side --force-conflicts --kustomize "${directory}"
    rm -rf "${directory}"
    kube --namespace argo rollout status deployment/workflow-controller --timeout 5m
    kube --namespace argo rollout status deployment/argo-server --timeout 5m
}

# The public page's global static IP (PAGE_DOMAIN only), marked as up.sh's by its description.
ensure_page_address() {
    [[ -n "${PAGE_DOMAIN}" ]] || return 0
    if ! reuse_if_made_by_up "the page's global address ${PAGE_ADDRESS}" \
        "the global address ${PAGE_ADDRESS} exists but up.sh did not create it: delete it, or leave PAGE_DOMAIN empty" \
        gcloud compute addresses describe "${PAGE_ADDRESS}" --global --project "${PROJECT_ID}" \
        --format 'value(description)'; then
        log "reserving the page's global address ${PAGE_ADDRESS}"
        gcloud compute addresses create "${PAGE_ADDRESS}" --global --project "${PROJECT_ID}" \
            --description "${ACCOUNT_DESCRIPTION}"
    fi
}

BACKEND_WAIT_ATTEMPTS=90 # of 10 s: 15 minutes for GKE to make the page's load balancer

# IAP lets in only the members granted roles/iap.httpsResourceAccessor, granted on the page's backend service
# alone (on the project, it would let them through to every app IAP guards there). GKE makes that backend
# service from the Ingress within minutes of its being applied.
grant_iap_members() {
    local member backend="" attempt
    [[ -n "${PAGE_IAP_MEMBERS}" ]] || return 0
    for ((attempt = 1; attempt <= BACKEND_WAIT_ATTEMPTS; attempt++)); do
        backend="$(page_backend_service)"
        [[ -z "${backend}" ]] || break
        ((attempt > 1)) || log "waiting for GKE to make the page's load balancer (a few minutes)"
        sleep 10
    done
    [[ -n "${backend}" ]] ||
        die "the page's Ingress has no backend service after $((BACKEND_WAIT_ATTEMPTS / 6)) minutes: see kubectl --context $(kube_context "${ZONE}") -n ${NAMESPACE} describe ingress ${PAGE_SERVICE}, then run up.sh again"
    for member in ${PAGE_IAP_MEMBERS//,/ }; do
        log "letting ${member} through Identity-Aware Proxy to the page (backend service ${backend})"
        retry gcloud iap web add-iam-policy-binding --project "${PROJECT_ID}" \
            --resource-type backend-services --service "${backend}" --member "${member}" \
            --role roles/iap.httpsResourceAccessor --condition None >/dev/null
    done
}

apply_manifests() {
    local overlay="infra/k8s/overlays/${OVERLAY}" digest
    digest="$(image_digest "$(image_ref "${PAGE_IMAGE_NAME}"):${IMAGE_TAG}")"
    log "writing the kustomize overlay ${overlay} (page image ${digest}) and applying it"
    render_overlay "${overlay}" ../../base "${digest}"
    kube apply --kustomize "${overlay}"
    kube --namespace "${NAMESPACE}" rollout status deployment/mnist-page --timeout 10m
    wait_for_quota
}

QUOTA_WAIT_ATTEMPTS=36 # of 10 s: 6 minutes, past the controller manager's 5-minute quota resync
wait_for_quota() {
    local attempt
    for ((attempt = 1; attempt <= QUOTA_WAIT_ATTEMPTS; attempt++)); do
        if quota_counted kube; then
            return
        fi
        ((attempt == 1)) && log "waiting for the namespace's quota to count all it bounds (a run is refused until then)"
        sleep 10
    done
    die "the ResourceQuota ${RESOURCE_QUOTA} in namespace ${NAMESPACE} does not count all it bounds after $((QUOTA_WAIT_ATTEMPTS / 6)) minutes: see kubectl --context $(kube_context "${ZONE}") -n ${NAMESPACE} describe resourcequota ${RESOURCE_QUOTA}, then run up.sh again"
}

# The page's address for the Argo UI's link to it: PAGE_DOMAIN's, or the port-forward print_next_steps gives.
page_url() {
    if [[ -n "${PAGE_DOMAIN}" ]]; then echo "https://${PAGE_DOMAIN}/"; else echo "http://localhost:8501/"; fi
}

# How to reach the Argo UI, the page and train on the cluster: commands to paste into the same shell, in this
# order. The token lives in the shell's variable only: created for an hour, never printed.
print_next_steps() {
    local context page_line address
    context="$(kube_context "${ZONE}")"
    page_line="    kubectl --context ${context} -n ${NAMESPACE} port-forward service/mnist-page 8501:80 >/dev/null 2>&1 &"
    if [[ -n "${PAGE_DOMAIN}" ]]; then
        address="$(gcloud compute addresses describe "${PAGE_ADDRESS}" --global --project "${PROJECT_ID}" \
            --format 'value(address)')"
        log "the page: https://${PAGE_DOMAIN}/ once its DNS A record points at ${address} (the certificate follows, up to an hour later)"
    fi
    cat >&2 <<NEXT
==> done. Next, in this shell (then the Argo UI is at https://localhost:2746, the page at http://localhost:8501):
    kubectl --context ${context} -n argo port-forward service/argo-server 2746:2746 >/dev/null 2>&1 &
${page_line}
    export ARGO_SERVER=https://localhost:2746 ARGO_INSECURE_SKIP_VERIFY=true ARGO_NAMESPACE=${NAMESPACE}
    export ARGO_TOKEN="Bearer \$(kubectl --context ${context} -n ${NAMESPACE} create token ${SUBMITTER_ACCOUNT} --duration 1h)"
    .venv/bin/python workflows/submit.py --artifacts gs://${BUCKET} \\
        --image $(image_ref "${STEPS_IMAGE_NAME}"):${IMAGE_TAG} \\
        --train-image $(image_ref "${TRAIN_IMAGE_NAME}"):${IMAGE_TAG} --watch
NEXT
}

main() {
    print_settings
    check_settings
    # kubectl reaches GKE through gcloud's credential plugin: without it every kubectl call fails.
    require_commands gcloud kubectl gke-gcloud-auth-plugin git
    check_argo_release
    enable_services
    load_project_number
    resolve_zone
    ensure_node_account
    ensure_cluster
    ensure_bucket
    ensure_google_account "${PIPELINE_ACCOUNT}" roles/storage.objectUser
    ensure_google_account "${PAGE_ACCOUNT}" roles/storage.objectViewer
    grant_argo_server_read
    ensure_registry
    build_images
    install_argo
    ensure_page_address
    apply_manifests
    grant_iap_members
    print_next_steps
}

main "$@"
