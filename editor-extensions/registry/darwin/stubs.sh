#!/usr/bin/env bash
# Writes the macOS SDK stubs dsh links against (sdk/), from the symbol lists
# in symbols/: text-based stubs (.tbd, tbd-version 4), the format of Apple's
# own SDK. A stub names a library's install name and the symbols it exports;
# the linker records the install name and binds the symbols to it, and the
# real library answers when the binary runs on a Mac. No Apple code is here.
#
#   editor-extensions/registry/darwin/stubs.sh [--scan DEPS]
#
# symbols/<Name>.txt holds one symbol a line (Mach-O spelling, leading `_`),
# `#` lines are comments. libiconv's is iconv's three calls (std links
# -liconv and calls none of them). Security's and CoreFoundation's are what
# the compiled code of dsh's macOS TLS dependencies refers to:
# security-framework(-sys), core-foundation(-sys) and
# rustls-platform-verifier, whose `extern` blocks bind Apple's headers.
# `--scan DEPS` rewrites those two lists from the rlibs in DEPS, a debug
# build's deps directory (machine code, which llvm-nm reads; release rlibs
# are bitcode): the symbols their objects leave undefined, `_Sec*`/`_kSec*`
# to Security, `_CF*`/`_kCF*` to CoreFoundation. A debug build links all of
# them, a release build (LTO) a subset. So, after a dependency update:
#
#   . editor-extensions/registry/darwin/env.sh aarch64-apple-darwin
#   cargo build --target aarch64-apple-darwin -p dsh-acp-server --bin dsh
#   editor-extensions/registry/darwin/stubs.sh --scan target/aarch64-apple-darwin/debug/deps
#
# (the first command's link may fail on a new symbol; the scan needs only
# the rlibs). A symbol of another framework shows as `undefined symbol: _X`
# at the link: add a row below and a list.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if [ "${1:-}" = --scan ]; then
  deps="${2:?--scan needs the deps directory}"
  nm="${NM:-llvm-nm}"
  found=()
  for crate in security_framework security_framework_sys core_foundation core_foundation_sys rustls_platform_verifier; do
    # The newest build of each crate: old ones of other features linger.
    rlib="$(ls -t "$deps"/lib"$crate"-*.rlib 2>/dev/null | head -n 1)"
    [ -n "$rlib" ] || { echo "stubs.sh: no lib$crate-*.rlib in $deps" >&2; exit 1; }
    found+=("$rlib")
  done
  syms="$("$nm" -u "${found[@]}" 2>/dev/null | grep -E '^_k?(Sec|CF)[A-Za-z0-9_]*$' | sort -u)"
  header="# Written by stubs.sh --scan: what security-framework(-sys),
# core-foundation(-sys) and rustls-platform-verifier refer to."
  { echo "$header"; grep -E '^_k?Sec' <<<"$syms"; } >"$here/symbols/Security.txt"
  { echo "$header"; grep -E '^_k?CF' <<<"$syms"; } >"$here/symbols/CoreFoundation.txt"
  echo "stubs.sh: $(grep -cE '^_k?Sec' <<<"$syms") Security, $(grep -cE '^_k?CF' <<<"$syms") CoreFoundation symbols" >&2
fi

# name            install name                                                              current     compatibility  stub
LIBS="
Security         /System/Library/Frameworks/Security.framework/Versions/A/Security          61040.1.3   1.0.0    System/Library/Frameworks/Security.framework/Security.tbd
CoreFoundation   /System/Library/Frameworks/CoreFoundation.framework/Versions/A/CoreFoundation  1971.0.0  150.0.0  System/Library/Frameworks/CoreFoundation.framework/CoreFoundation.tbd
libiconv         /usr/lib/libiconv.2.dylib                                                   7.0.0       7.0.0    usr/lib/libiconv.tbd
"

rm -rf "$here/sdk"
while read -r name install current compat stub; do
  [ -n "$name" ] || continue
  mkdir -p "$(dirname "$here/sdk/$stub")"
  {
    echo "--- !tapi-tbd"
    echo "# Written by editor-extensions/registry/darwin/stubs.sh from symbols/$name.txt."
    echo "tbd-version:     4"
    echo "targets:         [ x86_64-macos, arm64-macos ]"
    echo "install-name:    '$install'"
    echo "current-version: $current"
    echo "compatibility-version: $compat"
    echo "exports:"
    echo "  - targets:         [ x86_64-macos, arm64-macos ]"
    # One symbol a line, in YAML's flow style as Apple's stubs are.
    grep -v '^#' "$here/symbols/$name.txt" | grep . | sort -u \
      | awk 'NR == 1 { printf "    symbols:         [ \x27%s\x27", $0; next }
             { printf ",\n                       \x27%s\x27", $0 }
             END { print " ]" }'
    echo "..."
  } >"$here/sdk/$stub"
done <<<"$LIBS"
