#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and etcd from Go modules into a
# cache directory keyed by their versions. Does nothing when they are already there.
# Prints the directory holding the binaries as its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
K8S=${PTAH_K8S_VERSION:-v1.37.2}
ETCD=${PTAH_ETCD_VERSION:-v3.6.16}
STAGING="v0.${K8S#v1.}"
CACHE=${CONTROLPLANE_CACHE:-$HOME/.cache/ptah-controlplane}
OUT="$CACHE/k8s-$K8S-etcd-$ETCD"
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod

BINS="kube-apiserver kube-controller-manager kubectl"
have_all() { local b; for b in $BINS etcd; do [ -x "$OUT/$b" ] || return 1; done; }
ready() { have_all; }
tag=controlplane result=$OUT
# shellcheck source=../lib/go-cache.sh
. "$here/../lib/go-cache.sh"
# shellcheck source=../lib/shared-pins.sh
. "$here/../lib/shared-pins.sh"

build_kube() {
  # Work on a scratch copy so a build never rewrites the committed go.mod/go.sum.
  local w; w=$(mktemp -d); cp "$here/kube/go.mod" "$w/"; [ -f "$here/kube/go.sum" ] && cp "$here/kube/go.sum" "$w/"
  cd "$w"
  local gomod; gomod=$(go mod download -json "k8s.io/kubernetes@$K8S" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  # Pin every staging module the release itself replaces, at its matching v0.X.Y.
  local m; for m in $(sed -n 's|^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/src/.*|\1|p' "$gomod"); do
    go mod edit -replace="$m=$m@$STAGING"
  done
  local gd; gd=$(sed -n 's/^godebug default=\(.*\)$/\1/p' "$gomod"); [ -n "$gd" ] && go mod edit -godebug=default="$gd"
  local b missing=() all=()
  for b in $BINS; do
    all+=("k8s.io/kubernetes/cmd/$b@$K8S")
    [ -x "$OUT/$b" ] || missing+=("k8s.io/kubernetes/cmd/$b")
  done
  # Record every tool, not only the missing ones, so the go.mod/go.sum kept below stay complete.
  go get -tool "${all[@]}" >&2
  apply_shared_pins "$K8S" "${PTAH_HELM_VERSION:-v4.3.2}"
  local minor; minor=$(echo "$K8S" | cut -d. -f2)
  local ldf="-s -w" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $pkg.gitVersion=$K8S -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  log "building ${missing[*]} at $K8S"
  go build -p 2 -trimpath -buildvcs=false -tags=notest,grpcnotrace -ldflags="$ldf" -o "$OUT/" "${missing[@]}"
  # Keep the wrapper's resolved files so they can be committed when the pin changes.
  cp go.mod go.sum "$OUT/" ; cd - >/dev/null; rm -rf "$w"
}

build_etcd() {
  local w; w=$(mktemp -d); cp "$here/etcd/go.mod" "$w/"; [ -f "$here/etcd/go.sum" ] && cp "$here/etcd/go.sum" "$w/"
  cd "$w"
  go get -tool "go.etcd.io/etcd/server/v3@$ETCD" >&2
  log "building etcd $ETCD"
  go build -trimpath -buildvcs=false -ldflags="-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=$ETCD" -o "$OUT/etcd" go.etcd.io/etcd/server/v3
  cp go.mod "$OUT/etcd.go.mod"; cp go.sum "$OUT/etcd.go.sum"; cd - >/dev/null; rm -rf "$w"
}

[ -x "$OUT/etcd" ] || build_etcd
have_all || build_kube
"$OUT/kube-apiserver" --version >&2
# sed, not head: head would close the pipe before etcd is done writing (SIGPIPE: exit 141 under pipefail).
"$OUT/etcd" --version | sed -n 1p >&2
log "built in $(( $(date +%s) - start ))s into $OUT ($(du -sh "$OUT" | cut -f1))"
echo "$OUT"
