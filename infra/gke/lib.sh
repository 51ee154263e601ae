# shellcheck shell=bash
# Functions shared by up.sh and down.sh: messages, names derived from the settings, and rendered files.
# Sourced after config.sh, not run.

log() { printf '==> %s\n' "$*" >&2; }
die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}
# A setting that cannot work: one line, exit 2, before anything is touched.
bad_setting() {
    printf 'error: %s\n' "$*" >&2
    exit 2
}

print_settings() {
    local name
    log "settings (override any with an environment variable):"
    for name in "${SETTINGS[@]}"; do
        printf '    %-20s %s\n' "${name}" "${!name:-(unset)}" >&2
    done
}

require_commands() {
    local command
    for command in "$@"; do
        command -v "${command}" >/dev/null 2>&1 || die "'${command}' is not installed or not on PATH"
    done
}

# $1 as a JSON string literal, which is also a YAML double-quoted scalar (YAML 1.2's escapes include JSON's):
# every value the scripts write into a JSON or YAML file goes through it. Pure bash: neither python3 nor jq is
# sure to be on a machine with gcloud.
json_string() {
    local text="$1" encoded="" char index
    for ((index = 0; index < ${#text}; index++)); do
        char="${text:index:1}"
        case "${char}" in
        '"') encoded+='\"' ;;
        "\\") encoded+="\\\\" ;;
        [[:cntrl:]]) encoded+="$(printf '\\u%04x' "'${char}")" ;;
        *) encoded+="${char}" ;;
        esac
    done
    printf '"%s"' "${encoded}"
}

# Each setting and the pattern it must match, in the order they are checked (REGION before ZONE, which is
# checked against it); each pattern admits names of the kind the setting holds and nothing that could break
# out of a command line, a JSON or YAML value, or a gcloud list (no quote, space, comma or newline, but in
# AUTHORIZED_NETWORKS and PAGE_IAP_MEMBERS, lists of their own).
EMAIL='[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}'
CIDR='[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}'
DOMAIN='([a-z0-9]([a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,}'
IAP_MEMBER="((user|group|serviceAccount):${EMAIL}|domain:${DOMAIN})"
setting_patterns() {
    cat <<PATTERNS
PROJECT_ID ^[a-z][a-z0-9-]{4,28}[a-z0-9]$ a project id: 6 to 30 lowercase letters, digits and hyphens, from a letter
REGION ^[a-z]+-[a-z]+[0-9]+$ a Compute Engine region, e.g. us-central1
ZONE ^(${REGION}-[a-z])?$ a zone of REGION '${REGION}' (e.g. ${REGION}-b), or unset
CLUSTER ^[a-z]([a-z0-9-]{0,38}[a-z0-9])?$ a cluster name: up to 40 lowercase letters, digits and hyphens, from a letter
SYSTEM_MACHINE_TYPE ^[a-z0-9]+-[a-z0-9-]+$ a machine type name, e.g. e2-standard-2
WORKER_MACHINE_TYPE ^[a-z0-9]+-[a-z0-9-]+$ a machine type name, e.g. e2-standard-4
WORKER_MAX_NODES ^[1-9][0-9]{0,3}$ a positive integer
DISK_SIZE_GB ^[1-9][0-9]{0,4}$ a positive integer
AUTHORIZED_NETWORKS ^(${CIDR}(,${CIDR})*)?$ CIDR blocks separated by commas (e.g. 203.0.113.7/32), or unset
BUCKET ^[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]$ a bucket name: lowercase letters, digits, - and _
ARTIFACT_TTL_DAYS ^[1-9][0-9]{0,4}$ a positive integer
RUN_PREFIX ^[a-z0-9][a-z0-9.-]{0,62}$ the start of a workflow's name: lowercase letters, digits, - and .
ARGO_VERSION ^v[0-9]+\.[0-9]+\.[0-9]+$ a release of Argo Workflows, e.g. v4.1.2
REQUEUE_TIME ^[1-9][0-9]*(s|m)$ whole seconds or minutes, at least 1s (e.g. 2s)
REPOSITORY ^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$ a repository name: lowercase letters, digits and hyphens, from a letter
IMAGE_TAG ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ an image tag: letters, digits, _, . and -
BUILDER ^(cloudbuild|docker)$ 'cloudbuild' or 'docker'
FORCE_BUILD ^[01]$ 0 or 1
OVERLAY ^[a-z0-9][a-z0-9_-]*$ a plain directory name
PAGE_DOMAIN ^(${DOMAIN})?$ a domain name in lower case (e.g. mnist.example.com), or unset
PAGE_IAP_MEMBERS ^(${IAP_MEMBER}(,${IAP_MEMBER})*)?$ user:EMAIL, group:EMAIL, serviceAccount:EMAIL or domain:DOMAIN, separated by commas
DELETE_BUCKET ^(ask|yes|no)$ ask, yes or no
PATTERNS
}

check_settings() {
    local name pattern what
    while read -r name pattern what; do
        [[ "${!name}" =~ ${pattern} ]] || bad_setting "${name} must be ${what}, got $(printf '%q' "${!name}")"
    done < <(setting_patterns)
    # The lifecycle rule deletes objects whose names start with RUN_PREFIX: none under models/ may match.
    [[ "models/" != "${RUN_PREFIX}"* ]] ||
        bad_setting "RUN_PREFIX '${RUN_PREFIX}' would match published models under models/: choose another"
    [[ "${OVERLAY}" != example ]] || bad_setting "OVERLAY must be a directory name other than 'example'"
    # Bucket names have at most 63 characters, and the build bucket's is BUCKET's with a suffix.
    ((${#BUCKET} <= 63 - ${#BUILD_BUCKET_SUFFIX})) ||
        bad_setting "BUCKET '${BUCKET}' is too long: at most $((63 - ${#BUILD_BUCKET_SUFFIX})) characters"
    [[ -z "${PAGE_IAP_MEMBERS}" || -n "${PAGE_DOMAIN}" ]] ||
        bad_setting "PAGE_IAP_MEMBERS needs PAGE_DOMAIN: IAP guards the public page only"
}

# The project's number, which the names of Google's default accounts and Workload Identity principals carry.
PROJECT_NUMBER=""
load_project_number() {
    PROJECT_NUMBER="$(gcloud projects describe "${PROJECT_ID}" --format 'value(projectNumber)')"
    [[ "${PROJECT_NUMBER}" =~ ^[0-9]+$ ]] ||
        die "no project number for '${PROJECT_ID}': does the project exist?"
}

# The zone of an existing cluster named CLUSTER in REGION, or nothing.
existing_cluster_zone() {
    local name location
    while read -r name location; do
        if [[ "${name}" == "${CLUSTER}" && "${location}" =~ ^${REGION}-[a-z]$ ]]; then
            printf '%s' "${location}"
            return
        fi
    done < <(gcloud container clusters list --project "${PROJECT_ID}" --format 'value(name,location)' \
        --quiet 2>/dev/null)
}

# Sets ZONE when it is unset: the zone of the existing cluster, else REGION's first zone (by name) that is up.
# Zones are "<region>-<letter>", but not every region has "-a" (europe-west1 has b, c and d).
resolve_zone() {
    local zones
    [[ -z "${ZONE}" ]] || return 0
    ZONE="$(existing_cluster_zone)"
    if [[ -n "${ZONE}" ]]; then
        log "zone ${ZONE}: where cluster ${CLUSTER} is"
        return
    fi
    zones="$(gcloud compute zones list --project "${PROJECT_ID}" --filter 'status=UP' --format 'value(name)')"
    ZONE="$(grep -E "^${REGION}-[a-z]\$" <<<"${zones}" | LC_ALL=C sort | head -n 1 || true)"
    [[ -n "${ZONE}" ]] || die "no zone of REGION '${REGION}' is up: is it a Compute Engine region?"
    log "zone ${ZONE}: the first of ${REGION} (set ZONE to choose another)"
}

# The nodes' own Google service account (never the Compute Engine default one, which holds Editor in older
# projects and which Cloud Build may also use).
node_account() { google_account "${NODE_ACCOUNT}"; }

# Whether what `gcloud ... describe --format value(<label or description>)` printed ($1) marks a resource up.sh made.
made_by_up() { [[ "$1" == "${LABEL_VALUE}" || "$1" == "${ACCOUNT_DESCRIPTION}" ]]; }
labels_flag() { printf '%s=%s' "${LABEL_KEY}" "${LABEL_VALUE}"; }

# reuse_if_made_by_up WHAT REFUSAL DESCRIBE...: runs DESCRIBE (a `gcloud ... describe --format value(...)` of
# the label or description); fails if nothing of that name exists, says it reuses WHAT if up.sh made it, and
# stops the script with REFUSAL if something of that name exists that up.sh did not make.
reuse_if_made_by_up() {
    local what="$1" refusal="$2" mark
    mark="$("${@:3}" 2>/dev/null)" || return 1
    made_by_up "${mark}" || die "${refusal}"
    log "reusing ${what}"
}

# The Argo Server's own Kubernetes service account (argo/argo-server, from Argo's install manifest) as a
# Workload Identity principal that IAM policies can name directly.
argo_server_member() {
    printf 'principal://iam.googleapis.com/projects/%s/locations/global/workloadIdentityPools/%s/subject/%s' \
        "${PROJECT_NUMBER}" "${PROJECT_ID}.svc.id.goog" ns/argo/sa/argo-server
}

# Cloud Build's source uploads go to a bucket of their own (objects deleted after a day), instead of the
# project-wide gs://PROJECT_cloudbuild that gcloud would otherwise create and that other builds may share.
BUILD_BUCKET_SUFFIX=-build
build_bucket() { printf '%s%s' "${BUCKET}" "${BUILD_BUCKET_SUFFIX}"; }

# The kubeconfig context (and cluster and user entry) `gcloud container clusters get-credentials` writes.
kube_context() { printf 'gke_%s_%s_%s' "${PROJECT_ID}" "$1" "${CLUSTER}"; }

# kubectl on this cluster, whichever context is current: another shell may switch it while up.sh runs.
kube() { kubectl --context "$(kube_context "${ZONE}")" "$@"; }

# Argo's release manifest as Argo's own Makefile makes install.yaml (`manifests/install.yaml` and
# `dist/manifests/%`): `kubectl kustomize --load-restrictor=LoadRestrictionsNone manifests/cluster-install`,
# then every `:latest` image tag set to ARGO_VERSION. SOURCE is that folder: a git URL at a commit
# (kustomize's remote form, what up.sh uses) or a local copy (the Go module's, for the local cluster).
# KUBECTL names the kubectl to run (default: kubectl).
kustomize_argo_release() {
    local source="$1" kubectl="${2:-kubectl}"
    "${kubectl}" kustomize --load-restrictor=LoadRestrictionsNone "${source}" | sed "s/:latest/:${ARGO_VERSION}/"
}

# How often a running step's executor patches its pod with the progress the step wrote (the controller
# passes its own ARGO_PROGRESS_PATCH_TICK_DURATION to each wait container: workflow/controller/workflowpod.go,
# createEnvVars). Argo's default, a minute, outlasts most trainers here, whose progress would never show.
PROGRESS_REPORT_TIME=10s

# The executor image without root, and the securityContext Argo gives its init and wait containers
# (workflow/controller/workflowpod.go, newExecContainer: the controller config's executor.securityContext);
# with the workflow's pod securityContext (workflows/pipeline/resources.py) each pod of a run meets Pod Security
# `restricted` (docs/workflow-pod-security-context.md, "Non-root Executor Image").
# Its second file: DEFAULT_REQUEUE_TIME on the controller (workflow/controller/rate_limiters.go), and how
# often a step's executor hands the controller its progress (PROGRESS_REPORT_TIME); the controller and the
# server tolerate the system pool's taint.
# ARGO_EXECUTOR_IMAGE replaces the released executor image; ARGO_EXTRA_ENV (NAME=VALUE) is given to the
# executor's containers and to every step's main container (the config's executor.env and mainContainer,
# workflowpod.go: createEnvVars and the strategic merge of mainContainer): the local cluster names its GCS
# emulator so, GKE sets neither. PAGE_URL, the page's address as a browser reaches it, puts a button on each
# workflow's page in the Argo UI that opens it (the config's links, scope workflow: ui/src/workflows/components/
# workflow-details/workflow-details.tsx; the page shows the store's runs, and no URL picks one).
render_argo_config() {
    local directory="$1" env=""
    mkdir -p "${directory}"
    if [[ -n "${ARGO_EXTRA_ENV:-}" ]]; then
        env="
    env:
      - name: $(json_string "${ARGO_EXTRA_ENV%%=*}")
        value: $(json_string "${ARGO_EXTRA_ENV#*=}")"
    fi
    cat >"${directory}/kustomization.yaml" <<YAML
# Argo Workflows $(json_string "${ARGO_VERSION}"): its release manifest (install.yaml, kustomize_argo_release),
# configured for this pipeline by infra/gke/lib.sh.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: argo
resources:
  - namespace.yaml
  - install.yaml
patches:
  - path: workflow-controller-configmap.yaml
  - path: workflow-controller-deployment.yaml
  - path: argo-server-deployment.yaml
YAML
    # Argo's own pods (controller, server) meet baseline as released; restricted is reported, not enforced.
    cat >"${directory}/namespace.yaml" <<YAML
apiVersion: v1
kind: Namespace
metadata:
  name: argo
  labels:
    pod-security.kubernetes.io/enforce: baseline
    pod-security.kubernetes.io/enforce-version: latest
    pod-security.kubernetes.io/warn: restricted
    pod-security.kubernetes.io/warn-version: latest
    pod-security.kubernetes.io/audit: restricted
    pod-security.kubernetes.io/audit-version: latest
YAML
    cat >"${directory}/workflow-controller-configmap.yaml" <<YAML
apiVersion: v1
kind: ConfigMap
metadata:
  name: workflow-controller-configmap
  namespace: argo
data:
  executor: |
    image: $(json_string "${ARGO_EXECUTOR_IMAGE:-quay.io/argoproj/argoexec:${ARGO_VERSION}-nonroot}")
    securityContext:
      runAsNonRoot: true
      allowPrivilegeEscalation: false
      privileged: false
      readOnlyRootFilesystem: true
      capabilities:
        drop: ["ALL"]
      seccompProfile:
        type: RuntimeDefault${env}
YAML
    if [[ -n "${env}" ]]; then
        printf '  mainContainer: |%s\n' "${env}" >>"${directory}/workflow-controller-configmap.yaml"
    fi
    if [[ -n "${PAGE_URL:-}" ]]; then
        printf '  links: |\n    - name: Model page\n      scope: workflow\n      url: %s\n' \
            "$(json_string "${PAGE_URL}")" >>"${directory}/workflow-controller-configmap.yaml"
    fi
    cat >"${directory}/workflow-controller-deployment.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata:
  name: workflow-controller
  namespace: argo
spec:
  template:
    spec:
      containers:
        - name: workflow-controller
          env:
            - name: DEFAULT_REQUEUE_TIME
              value: $(json_string "${REQUEUE_TIME}")
            - name: ARGO_PROGRESS_PATCH_TICK_DURATION
              value: $(json_string "${PROGRESS_REPORT_TIME}")
$(argo_resources)
      tolerations:
$(system_pool_toleration)
YAML
    cat >"${directory}/argo-server-deployment.yaml" <<YAML
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
$(argo_resources)
      tolerations:
$(system_pool_toleration)
YAML
}

# Argo's release sets no memory limit on its controller or server. Both evaluate a submitter's expression
# tags (a workflow argument's `{{=...}}` at lint and at run time), and one 1 KB lint request whose tag built
# a 2 GB string grew the server to 22 GB on a 24 GB node: with a limit, the container alone is killed and
# restarted, not the node's other pods.
argo_resources() {
    cat <<YAML
          resources:
            requests: {cpu: 50m, memory: 128Mi}
            limits: {memory: 1Gi}
YAML
}

# Whether the namespace's ResourceQuota (infra/k8s/base/resource-limits.yaml) counts every resource it
# bounds, with kubectl called as "$@". Until the quota controller has counted one (a custom resource such
# as count/workflows.argoproj.io only once its discovery finds it: within 30 s to 5 minutes, the
# controller manager's --resource-quota-sync-period), the API server refuses to create any ("status
# unknown for quota"), so the first submit would fail. Here rather than in up.sh because the local
# cluster waits the same way.
RESOURCE_QUOTA=mnist
quota_counted() {
    # shellcheck disable=SC2016 # a go-template's variables, not the shell's
    local keys='{{range $key, $value := .}}{{$key}} {{end}}' hard used
    hard="$("$@" -n mnist get resourcequota "${RESOURCE_QUOTA}" -o go-template="{{with .spec.hard}}${keys}{{end}}")"
    used="$("$@" -n mnist get resourcequota "${RESOURCE_QUOTA}" -o go-template="{{with .status.used}}${keys}{{end}}")"
    [[ -n "${hard}" && "${hard}" == "${used}" ]]
}

# The system pool's taint. GKE's own pods tolerate this key, so do Argo's controller and server
# (render_argo_config) and the page (infra/k8s/base/page.yaml); a workflow's pod may not
# (infra/k8s/base/admission-policies.yaml), so no run can fill the node they need. Here rather than in
# config.sh because the local cluster renders Argo's configuration with this file alone.
SYSTEM_POOL_TAINT=components.gke.io/gke-managed-components=true:NoSchedule
system_pool_toleration() {
    local effect="${SYSTEM_POOL_TAINT##*:}"
    printf '        - key: %s\n          operator: Exists\n          effect: %s\n' \
        "$(json_string "${SYSTEM_POOL_TAINT%%=*}")" "$(json_string "${effect}")"
}

# ARGO_VERSION's line of ARGO_RELEASES ("<version> <commit> [<sha256>]"), or nothing.
argo_release_line() {
    local version commit sum
    [[ -f "${ARGO_RELEASES}" ]] || return 0
    while read -r version commit sum; do
        if [[ "${version}" == "${ARGO_VERSION}" && "${commit}" =~ ^[0-9a-f]{40}$ ]]; then
            printf '%s %s' "${commit}" "${sum}"
            return
        fi
    done < <(grep -v '^#' "${ARGO_RELEASES}")
}
# The commit ARGO_VERSION is built from, and the sha256 of the install.yaml it builds (if one is listed).
argo_release_commit() { argo_release_line | cut -d' ' -f1; }
argo_release_checksum() {
    local sum
    sum="$(argo_release_line | cut -s -d' ' -f2)"
    [[ ! "${sum}" =~ ^[0-9a-f]{64}$ ]] || printf '%s' "${sum}"
}

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum "$1" | cut -c1-64
    else
        shasum -a 256 "$1" | cut -c1-64 # macOS
    fi
}

# Google service account e-mail of a Kubernetes service account's twin, e.g. mnist-pipeline@PROJECT.iam...
google_account() { printf '%s@%s.iam.gserviceaccount.com' "$1" "${PROJECT_ID}"; }

# Workload Identity member naming a Kubernetes service account of the namespace.
workload_member() { printf 'serviceAccount:%s.svc.id.goog[%s/%s]' "${PROJECT_ID}" "${NAMESPACE}" "$1"; }

image_ref() { printf '%s-docker.pkg.dev/%s/%s/%s' "${REGION}" "${PROJECT_ID}" "${REPOSITORY}" "$1"; }

# The build bucket's lifecycle: a build reads its uploaded source within minutes; delete it after a day.
render_build_lifecycle() {
    printf '{"rule": [{"action": {"type": "Delete"}, "condition": {"age": 1}}]}\n'
}

# The name of the backend service GKE makes for the public page (k8s1-<hash>-mnist-mnist-page-80-<hash>, named
# after the page's Service), from its Ingress's ingress.kubernetes.io/backends annotation ({"<backend service>":
# "<health>"}), which the Ingress controller writes once the load balancer exists; nothing until then.
PAGE_SERVICE=mnist-page # the page's Service and Ingress (infra/k8s)
page_backend_service() {
    local backends
    backends="$(kube --namespace "${NAMESPACE}" get ingress "${PAGE_SERVICE}" --ignore-not-found \
        --output 'jsonpath={.metadata.annotations.ingress\.kubernetes\.io/backends}' 2>/dev/null)" || return 0
    [[ "${backends}" =~ \"(k8s[0-9a-z]*-[0-9a-z]+-${NAMESPACE}-${PAGE_SERVICE}-[0-9a-z-]+)\" ]] || return 0
    printf '%s' "${BASH_REMATCH[1]}"
}

# The bucket's lifecycle: delete run artifacts (names starting with RUN_PREFIX, the workflows' generateName)
# after ARTIFACT_TTL_DAYS days. Nothing under models/ matches, so published models and LATEST stay.
render_lifecycle() {
    cat <<JSON
{
  "rule": [
    {
      "action": {"type": "Delete"},
      "condition": {"age": ${ARTIFACT_TTL_DAYS}, "matchesPrefix": [$(json_string "${RUN_PREFIX}")]}
    }
  ]
}
JSON
}

# The overlay patches that name BUCKET, for any cluster (GKE's overlay here, the local cluster's too): the
# artifact repository's bucket, and the LATEST the page serves. Optional: an image pull policy for the page
# and one more NAME=VALUE in its environment.
render_bucket_patches() {
    local pull_policy="${1:-}" extra_env="${2:-}"
    cat <<YAML
  - patch: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: artifact-repositories
        namespace: ${NAMESPACE}
      data:
        default-v1: |
          archiveLogs: true
          gcs:
            bucket: $(json_string "${BUCKET}")
            keyFormat: "{{workflow.name}}/{{pod.name}}"
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: mnist-page
        namespace: ${NAMESPACE}
      spec:
        template:
          spec:
            containers:
              - name: page${pull_policy:+
                imagePullPolicy: ${pull_policy}}
                env:
                  - name: MODEL_URI
                    value: $(json_string "gs://${BUCKET}/models/mnist/LATEST")${extra_env:+
                  - name: $(json_string "${extra_env%%=*}")
                    value: $(json_string "${extra_env#*=}")}
YAML
}

# A kustomize overlay for these settings in directory $1, on top of the base at $2 (a path relative to $1),
# running the page's image by its digest $3 (sha256:...), so the cluster runs exactly the image pushed.
render_overlay() {
    local directory="$1" base="$2" digest="$3"
    [[ "${digest}" =~ ^sha256:[0-9a-f]{64}$ ]] || die "not an image digest: '${digest}'"
    mkdir -p "${directory}"
    cat >"${directory}/kustomization.yaml" <<YAML
# Written by infra/gke/up.sh for project $(json_string "${PROJECT_ID}"), image tag $(json_string "${IMAGE_TAG}"):
# change the settings (infra/gke/config.sh) and run up.sh again rather than editing this file.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(json_string "${base}")
images:
  - name: ${PAGE_IMAGE_NAME}
    newName: $(json_string "$(image_ref "${PAGE_IMAGE_NAME}")")
    digest: $(json_string "${digest}")
patches:
  - patch: |
      apiVersion: v1
      kind: ServiceAccount
      metadata:
        name: ${PIPELINE_ACCOUNT}
        namespace: ${NAMESPACE}
        annotations:
          iam.gke.io/gcp-service-account: $(json_string "$(google_account "${PIPELINE_ACCOUNT}")")
  - patch: |
      apiVersion: v1
      kind: ServiceAccount
      metadata:
        name: ${PAGE_ACCOUNT}
        namespace: ${NAMESPACE}
        annotations:
          iam.gke.io/gcp-service-account: $(json_string "$(google_account "${PAGE_ACCOUNT}")")
$(render_bucket_patches)
YAML
    if [[ -n "${PAGE_DOMAIN}" ]]; then
        cat >>"${directory}/kustomization.yaml" <<YAML
  - patch: |
      apiVersion: networking.gke.io/v1
      kind: ManagedCertificate
      metadata:
        name: mnist-page
        namespace: ${NAMESPACE}
      spec:
        domains:
          - $(json_string "${PAGE_DOMAIN}")
YAML
        render_components "${base}" >>"${directory}/kustomization.yaml"
    fi
}

# The overlay's components: the public page (PAGE_DOMAIN) and IAP in front of it (PAGE_IAP_MEMBERS).
render_components() {
    local components="${1%base}components"
    printf 'components:\n  - %s\n' "$(json_string "${components}/public-page")"
    [[ -z "${PAGE_IAP_MEMBERS}" ]] || printf '  - %s\n' "$(json_string "${components}/iap")"
}
