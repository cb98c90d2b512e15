#!/usr/bin/env bash
# The Debian packages the test suite needs, installed only when missing (the README's test command runs this first,
# so a fresh machine needs no other script): PostgreSQL (the tests' database server), openssl (the test PKI),
# util-linux and mount (unshare, mount, setpriv, flock for the fake kubelet and the build), lua5.4 (runs the Argo CD
# health check in its test), prometheus (its promtool checks and tests the alert rules), umoci (unpacks the image
# archive in its test: an OCI implementation other than the script that wrote it).
set -euo pipefail
missing=()
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || missing+=(postgresql)
command -v openssl >/dev/null || missing+=(openssl)
for tool in unshare setpriv flock; do command -v "$tool" >/dev/null || { missing+=(util-linux); break; }; done
command -v mount >/dev/null || missing+=(mount)
command -v lua5.4 >/dev/null || missing+=(lua5.4)
command -v umoci >/dev/null || missing+=(umoci)
command -v promtool >/dev/null || missing+=(prometheus)
[ "${#missing[@]}" -eq 0 ] && exit 0
printf '[packages] installing %s\n' "${missing[*]}" >&2
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { printf '[packages] %s missing, and installing them needs root (or sudo)\n' "${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq >&2
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
