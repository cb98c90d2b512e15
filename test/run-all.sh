#!/usr/bin/env bash
# `npm test`: the whole suite through test/run.ts (one PostgreSQL, control plane and fake kubelet for the run).
# Extra arguments go to the runner: tap flags and/or test files.
set -euo pipefail
cd "$(dirname "$0")/.."
# What the tests need from Debian, installed when missing.
bash tools/system-packages.sh
exec node_modules/.bin/tsx test/run.ts "$@"
