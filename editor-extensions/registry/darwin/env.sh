# Cross-building dsh for macOS on Linux, with zig as C compiler and linker
# and text stubs for Apple's libraries (no macOS SDK needed). Source it:
#
#   . editor-extensions/registry/darwin/env.sh <rust-target>
#   cargo build --release --target <rust-target> -p dsh-acp-server --bin dsh
#
# <rust-target> is aarch64-apple-darwin or x86_64-apple-darwin. It exports,
# for that target (TRIPLE in upper case, triple with `_` for `-`):
#   ZIG                              $ZIG if set, else .ci/cache/zig/ziglang/zig
#   ZIG_GLOBAL_CACHE_DIR             if unset: <target dir>/cross/zig-cache
#   DSH_DARWIN_TARGET                <rust-target>
#   CARGO_TARGET_<TRIPLE>_LINKER     darwin/cc.sh (zig cc, adds the stubs)
#   CC_<triple>                      darwin/cc.sh (ring's C and assembly)
#   AR_<triple>                      darwin/ar.sh (zig ar)
# and nothing else: no RUSTFLAGS or CFLAGS, cc.sh adds the stub paths at
# link time (-F sdk/System/Library/Frameworks, -L sdk/usr/lib). The paths
# are this checkout's, stable, so cargo's caches in <target dir> (default
# target/, or CARGO_TARGET_DIR) stay valid between builds. It returns 1
# (prints why) for another target or when zig is missing. The binary:
# <target dir>/<rust-target>/release/dsh, a Mach-O that loads libSystem,
# libiconv, Security and CoreFoundation from the Mac it runs on.
# stubs.sh says how the stubs are made.
dsh_darwin_env() {
  local here root triple="${1:-}" upper
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  root="$(cd "$here/../../.." && pwd)"
  case "$triple" in
    aarch64-apple-darwin | x86_64-apple-darwin) ;;
    *)
      echo "darwin/env.sh: target must be aarch64-apple-darwin or x86_64-apple-darwin, not '$triple'" >&2
      return 1
      ;;
  esac
  export ZIG="${ZIG:-$root/.ci/cache/zig/ziglang/zig}"
  if [ ! -x "$ZIG" ]; then
    echo "darwin/env.sh: no zig at $ZIG (set ZIG, or run .ci/cross)" >&2
    return 1
  fi
  export ZIG_GLOBAL_CACHE_DIR="${ZIG_GLOBAL_CACHE_DIR:-${CARGO_TARGET_DIR:-$root/target}/cross/zig-cache}"
  export DSH_DARWIN_TARGET="$triple"
  upper="${triple//-/_}"
  upper="${upper^^}"
  export "CARGO_TARGET_${upper}_LINKER=$here/cc.sh"
  export "CC_${triple//-/_}=$here/cc.sh"
  export "AR_${triple//-/_}=$here/ar.sh"
}
dsh_darwin_env "$@" || { unset -f dsh_darwin_env; return 1; }
unset -f dsh_darwin_env
