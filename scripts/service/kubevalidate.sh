# kubernetes-validate from PyPI (it bundles Kubernetes' OpenAPI schemas), for the offline
# check of the manifests `TOOL k8s-manifest` prints (common::scale::manifest): installed like
# the servers, never started as one. Exports FAIRBENCH_KUBERNETES_VALIDATE.

KUBEVALIDATE_VERSION=1.37.0

install_kubevalidate() {
  if command -v kubernetes-validate >/dev/null 2>&1; then
    return 0
  fi
  python3 -m pip install --quiet "kubernetes-validate==$KUBEVALIDATE_VERSION"
}

start_kubevalidate() {
  local bin
  bin=$(command -v kubernetes-validate) || die "kubernetes-validate is not installed (scripts/install-servers kubevalidate)"
  log "kubernetes-validate $("$bin" --version 2>/dev/null | tr -d '\n') for the manifest checks (nothing started)"
  echo "export FAIRBENCH_KUBERNETES_VALIDATE=$bin"
}

stop_kubevalidate() {
  :
}
