#!/usr/bin/env bash
# Builds the stack's OCI registry (main.go: go-containerregistry's pkg/registry behind TLS and basic auth) and crane,
# the independent client the tests hold `kubectl ptah push` to, into a cache directory keyed by the module's version.
# Does nothing when both binaries are there and answer. Prints the directory as its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
GGCR=v0.22.1
CACHE=${REGISTRY_CACHE:-$HOME/.cache/ptah-registry}
# The wrapper's own source is part of the key: an edited main.go is a new build.
OUT="$CACHE/$GGCR-$(sha256sum "$here/main.go" | cut -c1-12)"
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod

ready() { [ -x "$OUT/registry" ] && [ -x "$OUT/crane" ] && "$OUT/crane" version >/dev/null 2>&1; }
tag=registry result=$OUT
# shellcheck source=../lib/go-cache.sh
. "$here/../lib/go-cache.sh"
# Work on a scratch copy so a build never rewrites the committed go.mod/go.sum.
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
cp "$here/go.mod" "$here/go.sum" "$here/main.go" "$w/"
cd "$w"
log "building the registry and crane ($GGCR)"
go build -p 2 -trimpath -buildvcs=false -ldflags="-s -w" -o "$OUT/" . github.com/google/go-containerregistry/cmd/crane
log "built in $(( $(date +%s) - start ))s into $OUT"
echo "$OUT"
