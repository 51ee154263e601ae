#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Remove what infra/gke/up.sh made, and only what carries its mark: the cluster, its kubeconfig entry, the
# service accounts and their grants, the image repository, the build bucket, the page's address and overlay.
# The bucket goes only if you say so (DELETE_BUCKET=yes). Settings: the same as up.sh. Safe to run again.
set -euo pipefail
# Name the command that failed; running the script again resumes, as every step reuses what exists.
set -o errtrace
trap 'printf "error: down.sh stopped at line %s: %s\n" "${LINENO}" "${BASH_COMMAND}" >&2' ERR

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "${here}/../.."
# shellcheck source=config.sh
source "${here}/config.sh"
# shellcheck source=lib.sh
source "${here}/lib.sh"

delete_cluster() {
    local label
    if [[ -z "${ZONE}" ]]; then
        log "no cluster ${CLUSTER} in ${REGION}"
        return
    fi
    if ! label="$(gcloud container clusters describe "${CLUSTER}" --zone "${ZONE}" --project "${PROJECT_ID}" \
        --format "value(resourceLabels.${LABEL_KEY})" 2>/dev/null)"; then
        log "no cluster ${CLUSTER} in ${ZONE}"
        return
    fi
    if ! made_by_up "${label}"; then
        log "kept cluster ${CLUSTER} in ${ZONE}: up.sh did not create it (no label ${LABEL_KEY}=${LABEL_VALUE}); if an"
        log "earlier up.sh made it, label it and run down.sh again: gcloud container clusters update ${CLUSTER} --zone ${ZONE} --project ${PROJECT_ID} --update-labels $(labels_flag)"
        return
    fi
    # The DNS endpoint, as up.sh sets it; a cluster labelled by hand since an earlier up.sh may have only its IP.
    gcloud container clusters get-credentials "${CLUSTER}" --zone "${ZONE}" --project "${PROJECT_ID}" \
        --dns-endpoint ||
        gcloud container clusters get-credentials "${CLUSTER}" --zone "${ZONE}" --project "${PROJECT_ID}"
    revoke_iap_members
    # Deleting the namespace first lets GKE release the public page's load balancer, which deleting the
    # cluster could leave behind. A failure or a timeout here does not keep the cluster billing.
    log "deleting namespace ${NAMESPACE} (and the public page's load balancer, if any)"
    if ! kube delete namespace "${NAMESPACE}" --ignore-not-found --wait=true --timeout 5m; then
        log "namespace ${NAMESPACE} was not deleted in time: deleting the cluster anyway. If the page was public,"
        log "check for a load balancer left behind: gcloud compute forwarding-rules list --project ${PROJECT_ID}"
    fi
    log "deleting cluster ${CLUSTER} (takes a few minutes)"
    gcloud container clusters delete "${CLUSTER}" --zone "${ZONE}" --project "${PROJECT_ID}" --quiet
}

# Remove what up.sh granted on the public page's backend service: roles/iap.httpsResourceAccessor to the members
# of PAGE_IAP_MEMBERS, and no other binding.
revoke_iap_members() {
    local backend role member
    [[ -n "${PAGE_IAP_MEMBERS}" ]] || return 0
    backend="$(page_backend_service)"
    [[ -n "${backend}" ]] || return 0
    while read -r role member; do
        [[ "${role}" == roles/iap.httpsResourceAccessor && ",${PAGE_IAP_MEMBERS}," == *",${member},"* ]] ||
            continue
        log "revoking ${role} on the page's backend service ${backend} from ${member}"
        gcloud iap web remove-iam-policy-binding --project "${PROJECT_ID}" --resource-type backend-services \
            --service "${backend}" --member "${member}" --role "${role}" --condition None >/dev/null
    done < <(gcloud iap web get-iam-policy --project "${PROJECT_ID}" --resource-type backend-services \
        --service "${backend}" --flatten 'bindings[].members' --format 'value(bindings.role,bindings.members)')
}

# gcloud removes the cluster's kubeconfig entry when a deletion completes; remove any left behind (a cluster
# deleted elsewhere, an interrupted deletion), and the current context if it was that one.
forget_kube_contexts() {
    local context
    for context in $(kubectl config get-contexts --output name 2>/dev/null); do
        # shellcheck disable=SC2053 # the right side is a pattern on purpose
        [[ "${context}" == $(kube_context "${ZONE:-${REGION}-[a-z]}") ]] || continue
        log "removing kubeconfig context ${context}"
        if [[ "$(kubectl config current-context 2>/dev/null)" == "${context}" ]]; then
            kubectl config unset current-context
        fi
        kubectl config delete-context "${context}"
        # grep reads the whole listing (no -q): kubectl never writes into a closed pipe, which would fire the trap
        if kubectl config get-clusters | grep -xF "${context}" >/dev/null; then
            kubectl config delete-cluster "${context}"
        fi
        if kubectl config get-users | grep -xF "${context}" >/dev/null; then
            kubectl config delete-user "${context}"
        fi
    done
}

# Remove from the bucket's policy what up.sh granted there: the two Google service accounts (live, or shown as
# "deleted:serviceAccount:...?uid=..." once deleted, as an earlier down.sh left them) and argo/argo-server.
revoke_bucket_grants() {
    local role member pipeline page
    bucket_exists "gs://${BUCKET}" || return 0
    pipeline="$(google_account "${PIPELINE_ACCOUNT}")"
    page="$(google_account "${PAGE_ACCOUNT}")"
    while read -r role member; do
        case "${member}" in
        "serviceAccount:${pipeline}" | "deleted:serviceAccount:${pipeline}?uid="* | \
            "serviceAccount:${page}" | "deleted:serviceAccount:${page}?uid="* | "$(argo_server_member)")
            log "revoking ${role} on gs://${BUCKET} from ${member}"
            gcloud storage buckets remove-iam-policy-binding "gs://${BUCKET}" --project "${PROJECT_ID}" \
                --member "${member}" --role "${role}" >/dev/null
            ;;
        esac
    done < <(gcloud storage buckets get-iam-policy "gs://${BUCKET}" --project "${PROJECT_ID}" \
        --flatten 'bindings[].members' --format 'value(bindings.role,bindings.members)')
}

# Remove the project-level roles up.sh granted: the nodes' and the build's accounts' (live, or shown as
# "deleted:serviceAccount:...?uid=..." once deleted).
revoke_project_grants() {
    local role member nodes build
    nodes="$(google_account "${NODE_ACCOUNT}")"
    build="$(google_account "${BUILD_ACCOUNT}")"
    while read -r role member; do
        case "${member}" in
        "serviceAccount:${nodes}" | "deleted:serviceAccount:${nodes}?uid="* | \
            "serviceAccount:${build}" | "deleted:serviceAccount:${build}?uid="*) ;;
        *) continue ;;
        esac
        log "revoking ${role} on project ${PROJECT_ID} from ${member}"
        gcloud projects remove-iam-policy-binding "${PROJECT_ID}" --member "${member}" --role "${role}" \
            --condition None >/dev/null
    done < <(gcloud projects get-iam-policy "${PROJECT_ID}" --flatten 'bindings[].members' \
        --format 'value(bindings.role,bindings.members)')
}

delete_google_account() {
    local email description
    email="$(google_account "$1")"
    if ! description="$(gcloud iam service-accounts describe "${email}" --project "${PROJECT_ID}" \
        --format 'value(description)' 2>/dev/null)"; then
        log "no Google service account ${email}"
    elif made_by_up "${description}"; then
        log "deleting Google service account ${email}"
        gcloud iam service-accounts delete "${email}" --project "${PROJECT_ID}" --quiet
    else
        log "kept Google service account ${email}: up.sh did not create it"
    fi
}

delete_registry() {
    local label
    if ! label="$(gcloud artifacts repositories describe "${REPOSITORY}" --location "${REGION}" \
        --project "${PROJECT_ID}" --format "value(labels.${LABEL_KEY})" 2>/dev/null)"; then
        log "no Artifact Registry repository ${REPOSITORY} in ${REGION}"
    elif made_by_up "${label}"; then
        log "deleting Artifact Registry repository ${REPOSITORY} and its images"
        gcloud artifacts repositories delete "${REPOSITORY}" --location "${REGION}" --project "${PROJECT_ID}" \
            --quiet
    else
        log "kept Artifact Registry repository ${REPOSITORY}: up.sh did not create it"
    fi
}

delete_page_address() {
    local description
    description="$(gcloud compute addresses describe "${PAGE_ADDRESS}" --global --project "${PROJECT_ID}" \
        --format 'value(description)' 2>/dev/null)" || return 0
    if made_by_up "${description}"; then
        log "releasing the page's global address ${PAGE_ADDRESS}"
        gcloud compute addresses delete "${PAGE_ADDRESS}" --global --project "${PROJECT_ID}" --quiet
    else
        log "kept the global address ${PAGE_ADDRESS}: up.sh did not create it"
    fi
}

bucket_exists() { gcloud storage buckets describe "$1" --project "${PROJECT_ID}" >/dev/null 2>&1; }

# Whether bucket $1 carries up.sh's label.
bucket_made_by_up() {
    local label
    label="$(gcloud storage buckets describe "$1" --project "${PROJECT_ID}" \
        --format "value(labels.${LABEL_KEY})" 2>/dev/null)" && made_by_up "${label}"
}

# Delete the bucket $1 and its objects, which $2 names.
remove_bucket() {
    log "deleting bucket $1 and its objects ($2)"
    gcloud storage rm --recursive "$1" --project "${PROJECT_ID}"
}

# The build bucket holds only Cloud Build's source uploads.
delete_build_bucket() {
    local bucket
    bucket="gs://$(build_bucket)"
    if ! bucket_exists "${bucket}"; then
        log "no build bucket ${bucket}"
    elif bucket_made_by_up "${bucket}"; then
        remove_bucket "${bucket}" "Cloud Build's source uploads"
    else
        log "kept ${bucket}: up.sh did not create it (no label ${LABEL_KEY}=${LABEL_VALUE})"
    fi
}

delete_bucket() {
    local answer="${DELETE_BUCKET}"
    if ! bucket_exists "gs://${BUCKET}"; then
        log "no bucket gs://${BUCKET}"
        return
    fi
    if ! bucket_made_by_up "gs://${BUCKET}"; then
        log "kept gs://${BUCKET}: up.sh did not create it (no label ${LABEL_KEY}=${LABEL_VALUE})"
        return
    fi
    if [[ "${answer}" == ask ]]; then
        if [[ -t 0 ]]; then
            read -r -p "Delete gs://${BUCKET} and everything in it, published models included? [y/N] " answer
        else
            answer=no
        fi
    fi
    if [[ "${answer}" =~ ^([Yy]|[Yy][Ee][Ss])$ ]]; then
        remove_bucket "gs://${BUCKET}" "the published models included"
    else
        log "kept bucket gs://${BUCKET} (DELETE_BUCKET=yes deletes it)"
    fi
}

# The overlay up.sh wrote, if it is still the one up.sh wrote (a folder holding anything else stays).
delete_overlay() {
    local directory="infra/k8s/overlays/${OVERLAY}"
    [[ -f "${directory}/kustomization.yaml" ]] || return 0
    if [[ "$(head -n 1 "${directory}/kustomization.yaml")" != "# Written by infra/gke/up.sh"* ]]; then
        log "kept ${directory}: its kustomization.yaml was not written by up.sh"
        return
    fi
    log "deleting the overlay ${directory}"
    rm -f "${directory}/kustomization.yaml"
    rmdir "${directory}" 2>/dev/null || log "kept ${directory}: it holds other files"
}

main() {
    print_settings
    check_settings
    require_commands gcloud kubectl gke-gcloud-auth-plugin
    load_project_number
    [[ -n "${ZONE}" ]] || ZONE="$(existing_cluster_zone)"
    delete_cluster
    forget_kube_contexts
    revoke_bucket_grants
    revoke_project_grants
    delete_google_account "${PIPELINE_ACCOUNT}"
    delete_google_account "${PAGE_ACCOUNT}"
    delete_google_account "${NODE_ACCOUNT}"
    delete_google_account "${BUILD_ACCOUNT}"
    delete_registry
    delete_page_address
    delete_build_bucket
    delete_bucket
    delete_overlay
    log "done"
}

main "$@"
