# shellcheck shell=bash disable=SC2034 # the variables are for the scripts that source this
# Shared by the hack/kind scripts (sourced, never run): the names everything agrees on,
# finding the tools, and the cluster's kubeconfig.
#
# Settings (environment):
#   KAOS_KIND_CLUSTER     kind cluster name (default kaos-e2e)
#   KAOS_KIND_NAMESPACE   namespace of the samples (default kaos-e2e)
#   KAOS_KIND_NODE_IMAGE  kind node image for `up` (default: the one of your kind release)
#   KAOS_KIND_TIMEOUT     how long `deploy` waits for the chart and the samples (default 15m)
#   KAOS_DOCKER, KAOS_KIND, KAOS_KUBECTL, KAOS_HELM   a tool's path instead of the lookup
#   KAOS_CACHE_DIR        hack/k8s-build's cache (default ~/.cache/kaos), searched for tools

KIND_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# The kind cluster config, the chart values and the suite's own manifests (kept beside the
# tests, so that this directory holds shell scripts only).
MANIFESTS=${KIND_ROOT}/tests/e2e/kind/manifests
CLUSTER=${KAOS_KIND_CLUSTER:-kaos-e2e}
NAMESPACE=${KAOS_KIND_NAMESPACE:-kaos-e2e}
WAIT_TIMEOUT=${KAOS_KIND_TIMEOUT:-15m}
# The chart's documented release: its Secret names (kaos-pgvector-connection) follow.
RELEASE=kaos
RELEASE_NAMESPACE=kaos-system
# Local image names. The registry is never contacted: the images are loaded into the
# nodes, and hack/kind/values.yaml points the chart at the same prefix.
REGISTRY=kaos.local
TAG=dev
# The images built FROM Dockerfile.base, each from images/<name>/Dockerfile.
IMAGES=(memory agent operator)
CACHE_DIR=${KAOS_CACHE_DIR:-${HOME}/.cache/kaos}
STATE_DIR=${CACHE_DIR}/kind/${CLUSTER}
# Exported so that every kubectl and helm below talks to this cluster, never to the
# user's current context.
export KUBECONFIG=${STATE_DIR}/kubeconfig

log() { printf 'kind/%s: %s\n' "${0##*/}" "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# image_ref NAME [TAG] -> kaos.local/kaos-NAME:TAG (NAME: base, memory, agent, operator;
# TAG: dev by default)
image_ref() { printf '%s/kaos-%s:%s\n' "${REGISTRY}" "$1" "${2:-${TAG}}"; }

tool_hint() {
  case $1 in
    kind) printf 'run hack/k8s-build kind, or install it: https://kind.sigs.k8s.io/docs/user/quick-start/#installation' ;;
    helm) printf 'run hack/k8s-build (it builds the pinned helm)' ;;
    kubectl) printf 'install kubectl: https://kubernetes.io/docs/tasks/tools/' ;;
    docker) printf 'install Docker: https://docs.docker.com/engine/install/' ;;
    *) printf 'install %s' "$1" ;;
  esac
}

# find_tool NAME: $KAOS_<NAME>, else PATH, else hack/k8s-build's cache (the same order
# as the kaos CLI); dies naming how to get it.
find_tool() {
  local name=$1 var override
  var=KAOS_$(printf '%s' "${name}" | tr '[:lower:]' '[:upper:]')
  override=${!var:-}
  if [[ -n ${override} ]]; then
    [[ -x ${override} ]] || die "${var}=${override} is not an executable"
    printf '%s\n' "${override}"
  elif command -v "${name}" >/dev/null 2>&1; then
    command -v "${name}"
  elif [[ -x ${CACHE_DIR}/bin/${name} ]]; then
    printf '%s\n' "${CACHE_DIR}/bin/${name}"
  else
    die "${name} not found on PATH nor in ${CACHE_DIR}/bin: $(tool_hint "${name}")"
  fi
}

# A docker CLI without a reachable engine is the usual failure: say so in one line.
require_docker() {
  local docker out
  docker=$(find_tool docker)
  if ! out=$("${docker}" info --format '{{.ServerVersion}}' 2>&1); then
    die "the Docker engine is not reachable (docker info: $(printf '%s' "${out}" | grep -m1 -v '^$'))"
  fi
  printf '%s\n' "${docker}"
}

cluster_exists() {  # KIND
  local clusters
  clusters=$("$1" get clusters 2>/dev/null) || return 1
  grep -qx -- "${CLUSTER}" <<<"${clusters}"
}

# Write the cluster's kubeconfig to ${KUBECONFIG} (kind's own view of it, so a cluster
# made by hand with `kind create cluster --name ...` works too).
write_kubeconfig() {  # KIND
  mkdir -p "${STATE_DIR}"
  "$1" get kubeconfig --name "${CLUSTER}" >"${KUBECONFIG}.partial" ||
    die "cannot read the kubeconfig of kind cluster ${CLUSTER}"
  chmod 600 "${KUBECONFIG}.partial"
  mv "${KUBECONFIG}.partial" "${KUBECONFIG}"
}
