#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Remove what infra/gke/up.sh made: the page's load balancer, the cluster (with Argo) and its kubeconfig
# entry, the Google service accounts and their grants on the bucket, the image repository, the build bucket
# and the written overlay. The bucket, which holds the published models, goes only if you say so
# (DELETE_BUCKET=yes, or "y" at the prompt). Safe to run again. Settings: the same environment variables as
# up.sh.
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
    if [[ -z "${ZONE}" ]]; then
        log "no cluster ${CLUSTER} in ${REGION}"
        return
    fi
    if ! gcloud container clusters describe "${CLUSTER}" --zone "${ZONE}" --project "${PROJECT_ID}" \
        >/dev/null 2>&1; then
        log "no cluster ${CLUSTER} in ${ZONE}"
        return
    fi
    gcloud container clusters get-credentials "${CLUSTER}" --zone "${ZONE}" --project "${PROJECT_ID}"
    # Deleting the Service first releases its load balancer, which deleting the cluster could leave behind.
    log "deleting namespace ${NAMESPACE} (the page's load balancer goes with it)"
    kubectl delete namespace "${NAMESPACE}" --ignore-not-found --wait=true --timeout 5m
    log "deleting cluster ${CLUSTER} (takes a few minutes)"
    gcloud container clusters delete "${CLUSTER}" --zone "${ZONE}" --project "${PROJECT_ID}" --quiet
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
        if grep -qxF "${context}" < <(kubectl config get-clusters); then
            kubectl config delete-cluster "${context}"
        fi
        if grep -qxF "${context}" < <(kubectl config get-users); then
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

delete_google_account() {
    local email
    email="$(google_account "$1")"
    if gcloud iam service-accounts describe "${email}" --project "${PROJECT_ID}" >/dev/null 2>&1; then
        log "deleting Google service account ${email}"
        gcloud iam service-accounts delete "${email}" --project "${PROJECT_ID}" --quiet
    else
        log "no Google service account ${email}"
    fi
}

delete_registry() {
    if gcloud artifacts repositories describe "${REPOSITORY}" --location "${REGION}" --project "${PROJECT_ID}" \
        >/dev/null 2>&1; then
        log "deleting Artifact Registry repository ${REPOSITORY} and its images"
        gcloud artifacts repositories delete "${REPOSITORY}" --location "${REGION}" --project "${PROJECT_ID}" \
            --quiet
    else
        log "no Artifact Registry repository ${REPOSITORY} in ${REGION}"
    fi
}

bucket_exists() { gcloud storage buckets describe "$1" --project "${PROJECT_ID}" >/dev/null 2>&1; }

# Delete the bucket $1 and its objects, which $2 names.
remove_bucket() {
    log "deleting bucket $1 and its objects ($2)"
    gcloud storage rm --recursive "$1" --project "${PROJECT_ID}"
}

# The build bucket holds only Cloud Build's source uploads.
delete_build_bucket() {
    local bucket
    bucket="gs://$(build_bucket)"
    if bucket_exists "${bucket}"; then
        remove_bucket "${bucket}" "Cloud Build's source uploads"
    else
        log "no build bucket ${bucket}"
    fi
}

delete_bucket() {
    local answer="${DELETE_BUCKET}"
    if ! bucket_exists "gs://${BUCKET}"; then
        log "no bucket gs://${BUCKET}"
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
    delete_google_account "${PIPELINE_ACCOUNT}"
    delete_google_account "${PAGE_ACCOUNT}"
    delete_registry
    delete_build_bucket
    delete_bucket
    delete_overlay
    log "done"
}

main "$@"
