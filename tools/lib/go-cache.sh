# Sourced by the scripts that build Go tools into ~/.cache: prints $result and exits when `ready` says the cache
# holds the build; else takes the cache's lock (one build at a time: the second finds it done), checks again, and
# returns with `start` set. The caller defines CACHE, OUT, tag (the log prefix), result and `ready`.
log() { printf '[%s] %s\n' "$tag" "$*" >&2; }
if ready; then echo "$result"; exit 0; fi
command -v go >/dev/null || { log "building $tag needs Go >= 1.26 on PATH (and the Go module proxy); none found"; exit 1; }
mkdir -p "$OUT"
exec 9>"$CACHE/.build.lock"
flock 9
if ready; then echo "$result"; exit 0; fi
start=$(date +%s)
