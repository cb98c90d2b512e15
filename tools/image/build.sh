#!/usr/bin/env bash
# Builds the operator's one image (the manager and the runner) as an OCI image archive, without Docker or any
# daemon: the Debian bookworm libraries node needs (from Debian's packages, unpacked with dpkg-deb, no maintainer
# script run, so no shell is needed or shipped), this machine's node binary, the production node_modules and the
# compiled build, each a layer written with tar and sha256sum, assembled into an OCI layout and archived. The same
# image the Containerfile describes. Layers are cached under $PTAH_IMAGE_CACHE (~/.cache/ptah-image) by what they
# are made of, and the archive by the digest of all its inputs. Prints the archive's path as its last line.
#
# Node: the machine's own binary (the CI machine's, which the tests run under), not Debian's nodejs package:
# bookworm ships Node 18, below package.json's engines (>=20.19). The script refuses a node below the engines field.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
CACHE=${PTAH_IMAGE_CACHE:-$HOME/.cache/ptah-image}
IMAGE=${PTAH_IMAGE_NAME:-localhost/ptah-operator:dev}
NODE=$(readlink -f "${PTAH_IMAGE_NODE:-$(command -v node)}")
EPOCH=${SOURCE_DATE_EPOCH:-0}
# The runtime libraries of the node binary (ldd: libc, libm, libstdc++, libgcc_s), /etc/os-release, /etc/services.
PACKAGES=(libc6 libgcc-s1 libstdc++6 base-files netbase)
APP=/opt/ptah-operator
UID_GID=65532
log() { printf '[image] %s\n' "$*" >&2; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
sha_text() { sha256sum | cut -d' ' -f1; }
start=$(date +%s)

need=(dpkg-deb apt-get tar gzip sha256sum npm)
for tool in "${need[@]}"; do command -v "$tool" >/dev/null || { log "needs $tool on PATH"; exit 1; }; done
# The engines field is ">=MAJOR.MINOR"; the image must run a node that satisfies it.
"$NODE" -e '
  const want = /^>=(\d+)\.(\d+)/.exec(JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")).engines.node);
  const [major, minor] = process.versions.node.split(".").map(Number);
  if (!want || major < +want[1] || (major === +want[1] && minor < +want[2])) {
    console.error(`[image] ${process.argv[2]} is node ${process.versions.node}; package.json wants ${want ? want[0] : "a >=X.Y engines field"}`);
    process.exit(1);
  }' "$repo/package.json" "$NODE"
arch=$(dpkg --print-architecture)

# What Debian would hand out now: URI, file name, size and SHA256 of each package. Stale lists have no source for
# the installed versions; refresh them once.
uris() { apt-get download --print-uris "${PACKAGES[@]}" 2>/dev/null; }
if ! debs=$(uris) || [ "$(grep -c . <<<"$debs")" -ne "${#PACKAGES[@]}" ]; then
  log 'apt lists are stale; apt-get update'
  apt-get update -qq >&2
  debs=$(uris)
fi

recipe=$(cat "$here/build.sh" "$here/ptah-runner" | sha_text)
base_key=$(printf '%s\n%s\n' "$recipe" "$debs" | sha_text)
node_key=$(printf '%s\n%s\n' "$recipe" "$(sha "$NODE")" | sha_text)
modules_key=$(cat <(echo "$recipe") "$repo/package.json" "$repo/package-lock.json" | sha_text)
app_key=$( (echo "$recipe"; cd "$repo" && find src certs tools/build package.json package-lock.json tsconfig.json tsconfig.build.json -type f ! -name '*.test.ts' -print0 | sort -z | xargs -0 sha256sum) | sha_text)
image_key=$(printf '%s\n' "$IMAGE" "$EPOCH" "$base_key" "$node_key" "$modules_key" "$app_key" | sha_text)
archive="$CACHE/images/ptah-operator-${image_key:0:16}.oci.tar"
if [ -f "$archive" ]; then log "reusing $archive"; echo "$archive"; exit 0; fi

mkdir -p "$CACHE/layers" "$CACHE/images" "$CACHE/debs"
# One build at a time per cache (a test run and a person may both get here); the second finds the archive done.
exec 9>"$CACHE/.build.lock"
flock 9
if [ -f "$archive" ]; then log "reusing $archive"; echo "$archive"; exit 0; fi
work=$(mktemp -d "$CACHE/work.XXXXXX")
trap 'rm -rf "$work"' EXIT

# A layer from a directory: a tar with sorted names, one mtime and root ownership, so equal inputs give equal
# digests. Writes <key>.tar.gz and <key>.diffid (the uncompressed tar's digest, which the config lists).
layer() { # key dir
  local out="$CACHE/layers/$1" tmp="$work/$1"
  tar --create --directory "$2" --sort=name --mtime="@$EPOCH" --owner=0 --group=0 --numeric-owner \
    --format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime --file "$tmp.tar" .
  sha "$tmp.tar" >"$tmp.diffid"
  gzip -n -6 -c "$tmp.tar" >"$tmp.tar.gz"
  mv "$tmp.diffid" "$out.diffid"
  mv "$tmp.tar.gz" "$out.tar.gz"
  rm -rf "$tmp.tar" "$2"
}
cached() { [ -f "$CACHE/layers/$1.tar.gz" ] && [ -f "$CACHE/layers/$1.diffid" ]; }

base_layer() {
  log "base layer: ${PACKAGES[*]}"
  local root="$work/base"; mkdir -p "$root"
  (cd "$CACHE/debs" && apt-get download -qq "${PACKAGES[@]}" >&2)
  while read -r _uri file _size _sum; do
    dpkg-deb --extract "$CACHE/debs/$file" "$root"
  done <<<"$debs"
  mkdir -p "$root/etc" "$root/tmp" "$root/home/nonroot"
  chmod 1777 "$root/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%s:%s:nonroot:/home/nonroot:/sbin/nologin\n' "$UID_GID" "$UID_GID" >"$root/etc/passwd"
  printf 'root:x:0:\nnonroot:x:%s:\n' "$UID_GID" >"$root/etc/group"
  chmod 644 "$root/etc/passwd" "$root/etc/group"
  # Only what a process needs: no documentation, no package database.
  rm -rf "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/lintian" "$root/usr/share/info"
  layer "base-$base_key" "$root"
}

node_layer() {
  log "node layer: $NODE ($("$NODE" --version))"
  local root="$work/node"; mkdir -p "$root/usr/local/bin"
  install -m 755 "$NODE" "$root/usr/local/bin/node"
  layer "node-$node_key" "$root"
}

modules_layer() {
  log 'node_modules layer: npm ci --omit=dev'
  local root="$work/modules"; mkdir -p "$root$APP"
  cp "$repo/package.json" "$repo/package-lock.json" "$root$APP/"
  (cd "$root$APP" && npm ci --omit=dev --ignore-scripts --no-audit --no-fund --prefer-offline --loglevel=error >&2)
  rm "$root$APP/package.json" "$root$APP/package-lock.json"
  layer "modules-$modules_key" "$root"
}

app_layer() {
  log 'app layer: npm run build'
  local root="$work/app"; mkdir -p "$root$APP" "$root/usr/local/bin"
  (cd "$repo" && npm run --silent build -- --outDir "$root$APP/dist" --incremental false --sourceMap false >&2)
  rm -f "$root$APP/dist/tsconfig.build.tsbuildinfo"
  # package.json says "type": "module", which makes dist/'s .js files ES modules.
  install -m 644 "$repo/package.json" "$root$APP/package.json"
  install -m 755 "$here/ptah-runner" "$root/usr/local/bin/ptah-runner"
  chmod -R u=rwX,go=rX "$root$APP"
  layer "app-$app_key" "$root"
}

# The missing layers side by side: tsc is CPU-bound, npm ci and apt-get mostly wait on the network.
keys=("base-$base_key" "node-$node_key" "modules-$modules_key" "app-$app_key")
pids=()
for key in "${keys[@]}"; do
  if ! cached "$key"; then "${key%%-*}_layer" & pids+=($!); fi
done
for pid in "${pids[@]}"; do wait "$pid" || { log 'a layer failed (above)'; exit 1; }; done
# Unused entries go after a week; the ones this build uses are fresh again.
for key in "${keys[@]}"; do touch "$CACHE/layers/$key.tar.gz" "$CACHE/layers/$key.diffid"; done
find "$CACHE/layers" "$CACHE/images" "$CACHE/debs" -type f -mtime +7 -delete

# The OCI layout: blobs named by digest, the config, the manifest and index.json naming it.
layout="$work/layout"; mkdir -p "$layout/blobs/sha256"
blob() { # file → prints its digest, having copied it into the layout
  local d; d=$(sha "$1"); cp --link "$1" "$layout/blobs/sha256/$d"; echo "$d"
}
diff_ids=() descriptors=()
for key in "${keys[@]}"; do
  d=$(blob "$CACHE/layers/$key.tar.gz")
  diff_ids+=("\"sha256:$(cat "$CACHE/layers/$key.diffid")\"")
  descriptors+=("{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"sha256:$d\",\"size\":$(stat -c %s "$CACHE/layers/$key.tar.gz")}")
done
join() { local IFS=,; echo "$*"; }
version=$("$NODE" -p 'require(process.argv[1]).version' "$repo/package.json")
created=$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)
labels="{\"org.opencontainers.image.title\":\"ptah-operator\",\"org.opencontainers.image.version\":\"$version\"}"
printf '{"created":"%s","architecture":"%s","os":"linux","config":{"User":"%s:%s","Env":["PATH=/usr/local/bin:/usr/bin:/bin","NODE_ENV=production"],"Entrypoint":["/usr/local/bin/node"],"Cmd":["%s/dist/src/main.js"],"WorkingDir":"%s","Labels":%s},"rootfs":{"type":"layers","diff_ids":[%s]}}' \
  "$created" "$arch" "$UID_GID" "$UID_GID" "$APP" "$APP" "$labels" "$(join "${diff_ids[@]}")" >"$work/config.json"
config=$(blob "$work/config.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[%s],"annotations":%s}' \
  "$config" "$(stat -c %s "$work/config.json")" "$(join "${descriptors[@]}")" "$labels" >"$work/manifest.json"
manifest=$(blob "$work/manifest.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"org.opencontainers.image.ref.name":"%s","io.containerd.image.name":"%s"}}]}' \
  "$manifest" "$(stat -c %s "$work/manifest.json")" "$arch" "${IMAGE##*:}" "$IMAGE" >"$layout/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
tar --create --directory "$layout" --sort=name --mtime="@$EPOCH" --owner=0 --group=0 --numeric-owner --format=posix \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime --file "$work/image.tar" oci-layout index.json blobs
mv "$work/image.tar" "$archive"
log "built $IMAGE (manifest sha256:$manifest) in $(($(date +%s) - start)) s"
echo "$archive"
