#!/usr/bin/env bash
# Builds the helm CLI (Go module helm.sh/helm/v4) into a cache directory keyed by its version.
# Does nothing when the binary is already there and answers `version`. Prints the binary's path as its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
HELM=${PTAH_HELM_VERSION:-v4.3.2}
CACHE=${HELM_CACHE:-$HOME/.cache/ptah-helm}
OUT="$CACHE/$HELM"
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod

ready() { [ -x "$OUT/helm" ] && "$OUT/helm" version --short >/dev/null 2>&1; }
tag=helm result=$OUT/helm
# shellcheck source=../lib/go-cache.sh
. "$here/../lib/go-cache.sh"
# shellcheck source=../lib/shared-pins.sh
. "$here/../lib/shared-pins.sh"
# Work on a scratch copy so a build never rewrites the committed go.mod/go.sum.
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
cp "$here/go.mod" "$w/"; [ -f "$here/go.sum" ] && cp "$here/go.sum" "$w/"
cd "$w"
go get -tool "helm.sh/helm/v4/cmd/helm@$HELM" >&2
apply_shared_pins "${PTAH_K8S_VERSION:-v1.37.2}" "$HELM"
log "building helm $HELM"
# The control plane's flags and tags (tools/controlplane/build.sh), so that the packages both compile are compiled
# once: notest leaves apimachinery's fuzzing helpers out (test-only code); helm links no grpc, so grpcnotrace changes
# nothing of its own.
go build -p 2 -trimpath -buildvcs=false -tags=notest,grpcnotrace \
  -ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=$HELM -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
  -o "$OUT/helm" helm.sh/helm/v4/cmd/helm
# Keep the resolved files so they can be committed when the pin changes.
cp go.mod go.sum "$OUT/"
"$OUT/helm" version --short >&2
log "built in $(( $(date +%s) - start ))s into $OUT"
echo "$OUT/helm"
