#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Remove what infra/gke/up.sh made: the page's load balancer, the cluster (with Argo), the Google service
# accounts and the image repository. The bucket, which holds the published models, goes only if you say so
# (DELETE_BUCKET=yes, or "y" at the prompt). Settings: the same environment variables as up.sh.
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

delete_bucket() {
    local answer="${DELETE_BUCKET}"
    if ! gcloud storage buckets describe "gs://${BUCKET}" --project "${PROJECT_ID}" >/dev/null 2>&1; then
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
        log "deleting bucket gs://${BUCKET} and its objects"
        gcloud storage rm --recursive "gs://${BUCKET}" --project "${PROJECT_ID}"
    else
        log "kept bucket gs://${BUCKET} (DELETE_BUCKET=yes deletes it)"
    fi
}

main() {
    print_settings
    check_settings
    require_commands gcloud kubectl
    delete_cluster
    delete_google_account "${PIPELINE_ACCOUNT}"
    delete_google_account "${PAGE_ACCOUNT}"
    delete_registry
    delete_bucket
    log "done"
}

main "$@"
