#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Builds the Argo UI for build.sh and prints the folder of its files (the Argo Server's ui/dist/app):
#   build-ui.sh VERSION MODULE_DIR
# from the Argo module's own ui/ (its sources and webpack configuration, and the api/ files webpack copies),
# with the npm registry's packages of argo/ui/yarn.lock, installed frozen: Argo's ui/package.json with npm's
# argo-ui 1.0.0 in place of a git commit on GitHub, which cannot be reached, and argo/ui/webpack.local.js
# (the two changes that package needs). Kept in CACHE under a name made from VERSION, argo/ui/ and UI_RECIPE
# (lib.sh), so it is built once. The build's folder (node_modules, 600 MB) and the package caches (npm's and
# yarn's, 1 GB) stay in CACHE; the next build of the UI removes the folder first.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "${here}/lib.sh"

main() {
    [[ $# -eq 2 ]] || die "usage: build-ui.sh VERSION MODULE_DIR"
    local version="$1" module_dir="$2" key app work started
    key="$( (echo "${version} ${UI_RECIPE}" && cat "${here}"/argo/ui/*) | sha256sum | cut -c1-16)"
    app="${CACHE}/ui-${key}"
    if [[ -f "${app}/index.html" ]]; then
        printf '%s\n' "${app}"
        return
    fi
    require_commands node npm
    log "building the Argo UI ${version} (about 10 minutes the first time)"
    started=${SECONDS}
    work="${CACHE}/ui-build"
    rm -rf "${CACHE}"/ui-* # builds of another version or lock file, and any build cut short
    mkdir -p "${work}/api"
    cp -R "${module_dir}/ui" "${work}/ui"
    cp -R "${module_dir}/api/openapi-spec" "${module_dir}/api/jsonschema" "${work}/api/"
    chmod -R u+w "${work}"
    cp "${here}"/argo/ui/* "${work}/ui/"
    # Argo's own .yarnrc leaves optional packages out, esbuild's compiled program among them (its install
    # script would fetch it instead; no install script runs here).
    rm "${work}/ui/.yarnrc"
    cd "${work}/ui"
    export npm_config_cache="${CACHE}/npm" YARN_CACHE_FOLDER="${CACHE}/yarn"
    npm pkg set dependencies.argo-ui=1.0.0
    npx --yes yarn@1.22.22 install --frozen-lockfile --ignore-scripts --non-interactive \
        --network-timeout 600000 >&2
    NODE_ENV=production VERSION="${version}" node_modules/.bin/webpack --mode production \
        --config webpack.local.js >&2
    mv dist/app "${app}"
    log "built the Argo UI in $((SECONDS - started)) s into ${app}"
    printf '%s\n' "${app}"
}

main "$@"
