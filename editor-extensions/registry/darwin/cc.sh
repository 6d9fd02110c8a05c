#!/usr/bin/env bash
# `zig cc` for a macOS target: the C compiler (CC_<triple>) and the linker
# (CARGO_TARGET_<TRIPLE>_LINKER) that env.sh names, one program because
# cargo's linker setting takes one.
#
# The target: the `-arch`/`--target` rustc or the cc crate passes, else the
# Rust triple in $DSH_DARWIN_TARGET (env.sh exports it). The deployment
# target: `-mmacosx-version-min=` if given, else $MACOSX_DEPLOYMENT_TARGET,
# else rustc's default (11.0 on arm64, 10.12 on x86_64). Those flags are
# dropped and said once as zig's `-target <arch>-macos.<version>`.
#
# Linking adds the SDK stubs next to this script (sdk/, see stubs.sh):
# `-F sdk/System/Library/Frameworks` for `-framework Security` and
# `-framework CoreFoundation`, `-L sdk/usr/lib` for std's `-liconv`. zig
# ships libSystem's stub itself. The binary binds to the real libraries by
# their install names when it runs on a Mac.
#
# ZIG overrides the zig binary (default: .ci/cache/zig/ziglang/zig, where
# .ci/cross installs the PyPI package `ziglang`).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
zig="${ZIG:-$here/../../../.ci/cache/zig/ziglang/zig}"

arch="" version="" link=1 args=() skip=""
arch_of() {
  case "$1" in
    arm64* | aarch64*) echo aarch64 ;;
    x86_64* | x86-64*) echo x86_64 ;;
    *) echo "cc.sh: unknown macOS architecture in '$1'" >&2; exit 2 ;;
  esac
}
for arg in "$@"; do
  case "$skip" in
    arch) arch="$(arch_of "$arg")"; skip=""; continue ;;
    target) arch="$(arch_of "$arg")"; skip=""; continue ;;
  esac
  case "$arg" in
    -arch) skip=arch ;;
    -target) skip=target ;;
    --target=*) arch="$(arch_of "${arg#--target=}")" ;;
    -mmacosx-version-min=* | -mmacos-version-min=*) version="${arg#*=}" ;;
    -c | -E | -S | -M | -MM) link=0; args+=("$arg") ;;
    *) args+=("$arg") ;;
  esac
done
if [ -z "$arch" ] && [ -n "${DSH_DARWIN_TARGET:-}" ]; then
  arch="$(arch_of "$DSH_DARWIN_TARGET")"
fi
[ -n "$arch" ] || { echo "cc.sh: no target (set DSH_DARWIN_TARGET, or source env.sh)" >&2; exit 2; }
if [ -z "$version" ]; then
  version="${MACOSX_DEPLOYMENT_TARGET:-}"
fi
if [ -z "$version" ]; then
  case "$arch" in aarch64) version=11.0 ;; *) version=10.12 ;; esac
fi
extra=()
if [ "$link" = 1 ]; then
  extra=(-F "$here/sdk/System/Library/Frameworks" -L "$here/sdk/usr/lib")
fi
if [ -n "${DSH_DARWIN_CC_LOG:-}" ]; then
  printf '%q ' "$0" "$@" >>"$DSH_DARWIN_CC_LOG"
  echo >>"$DSH_DARWIN_CC_LOG"
fi
exec "$zig" cc -target "$arch-macos.$version" "${extra[@]}" "${args[@]}"
