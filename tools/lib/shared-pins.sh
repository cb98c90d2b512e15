# Sourced by tools/controlplane/build.sh and tools/helm/build.sh, in their scratch module, just before `go build`.
# helm compiles ~900 of the control plane's packages (client-go, api, apimachinery, kubectl, ...). Go reuses a
# compiled package from GOCACHE only when the module's path@version, its source, the build tags and every dependency
# match; helm v4.3.2 selects newer versions of the modules listed in shared-pins/ than k8s v1.37.2 pins, so nothing
# above golang.org/x/sys matched and helm compiled them all again (738 s cold). Both modules therefore require the
# newer version (MVS cannot select an older one for helm) and replace it with k8s's pin: the control plane compiles
# exactly the source it pins (only the module version in its trimmed file paths and build info differs), and helm
# compiles against the same source. Nothing is applied at versions no list was made for.
shared_pins_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/shared-pins
apply_shared_pins() { # k8s-version helm-version
  local list m label source
  list="$shared_pins_dir/k8s-$1+helm-$2.txt"
  [ -f "$list" ] || return 0
  while read -r m label source; do
    case $m in '#'*|'') continue ;; esac
    go mod edit -require="$m@$label" -replace="$m=$m@$source"
  done <"$list"
}
