#!/bin/sh
# The linters of deploy/ (issue 20 item 4; docs/deploy.md): shellcheck on the sbatch
# script, yamllint (deploy/.yamllint) on every YAML file, kubernetes-validate (the
# Kubernetes schemas, offline) on the manifests. Each linter is also run on a broken
# copy made here, which it must reject, so that a linter that checks nothing fails the
# test. Tools: shellcheck and yamllint from scripts/install-deps.sh, kubernetes-validate
# from scripts/install-python-deps.sh (.venv; KA_KUBERNETES_VALIDATE overrides).
# usage: deploy_lint.sh SOURCE_DIR
set -u
SRC=$1
. "$SRC/tests/lib.sh" # check, cleanup on EXIT/INT/TERM
ka_init deploy-lint
KV=${KA_KUBERNETES_VALIDATE:-$SRC/.venv/bin/kubernetes-validate}
[ -x "$KV" ] || KV=$(command -v kubernetes-validate || echo "")
for t in shellcheck yamllint; do
  command -v $t >/dev/null || { echo "FAIL - $t is not installed (scripts/install-deps.sh)"; exit 1; }
done
[ -n "$KV" ] || { echo "FAIL - kubernetes-validate is not installed (scripts/install-python-deps.sh)"; exit 1; }
D=$SRC/deploy
MANIFESTS="$D/k8s/namespace.yaml $D/k8s/envserver.yaml $D/k8s/gpuexec.yaml"

# shellcheck disable=SC2086
check "shellcheck: deploy/slurm/*.sbatch" shellcheck "$D"/slurm/*.sbatch
check "yamllint: deploy/" yamllint --strict -c "$D/.yamllint" "$D"
# shellcheck disable=SC2086
check "kubernetes-validate: deploy/k8s manifests" "$KV" --quiet $MANIFESTS
check "the kustomization lists every manifest" \
  sh -c "for m in $MANIFESTS; do grep -q \"^  - \$(basename \$m)\$\" '$D/k8s/kustomization.yaml' || exit 1; done"

# ---- controls: broken copies each linter must reject
sed 's/^set -euo pipefail$/if [ -n "${KA_SERVER:-}" ]; then/' "$D/slurm/gpuexec.sbatch" >"$WORK/bad.sbatch"
check "control: shellcheck rejects an unclosed if" sh -c "! shellcheck '$WORK/bad.sbatch' >/dev/null 2>&1"
sed 's/^  replicas: 1$/  replicas: 1\n   replicas: 2/' "$D/k8s/envserver.yaml" >"$WORK/bad-indent.yaml"
check "control: yamllint rejects a bad indentation" \
  sh -c "! yamllint -c '$D/.yamllint' '$WORK/bad-indent.yaml' >/dev/null 2>&1"
sed 's/^  replicas: 1$/  replicas: one/' "$D/k8s/envserver.yaml" >"$WORK/bad-type.yaml"
check "control: kubernetes-validate rejects replicas: one" \
  sh -c "! '$KV' --quiet '$WORK/bad-type.yaml' >/dev/null 2>&1"
exit $fail
