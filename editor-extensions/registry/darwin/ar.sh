#!/usr/bin/env bash
# `zig ar` as one program, for AR_<triple> (env.sh): the cc crate archives
# the C and assembly objects it builds for macOS (ring's) with it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec "${ZIG:-$here/../../../.ci/cache/zig/ziglang/zig}" ar "$@"
