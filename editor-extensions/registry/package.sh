#!/usr/bin/env bash
# Packages dsh for the ACP registry (agentclientprotocol/registry), which
# Zed, JetBrains and other clients install agents from.
#
#   editor-extensions/registry/package.sh [--binary PATH] [--out DIR] [--entry FILE]
#   editor-extensions/registry/package.sh --target PLATFORM... | --all [--out DIR] [--entry FILE]
#
# Without --target: it builds the release binary for this machine (or
# packages --binary), writes DIR/dsh-<version>-<triple>.tar.gz and its
# .sha256, and writes the committed registry entry (dsh/agent.json) from the
# whole target table below: what a release publishes. tests/e2e/registry.rs
# runs it so and compares the entry.
#
# With --target (repeatable) or --all: it cross-builds each registry
# platform named (the `dist` profile: what users download), writes each
# archive and its .sha256 to DIR, and writes DIR/agent.json (or --entry)
# listing the platforms it built and only those. It prints each target's
# build time. Cross builds need, beside `rustup target add <triple>`:
#   windows-x86_64            x86_64-w64-mingw32-gcc (apt gcc-mingw-w64-x86-64)
#   linux-aarch64, darwin-*   zig (PATH, $DSH_ZIG, or .ci/cache/zig from
#                             `pip install --target .ci/cache/zig ziglang`)
# .ci/cross installs them. The archives: .tar.gz with `dsh`, Windows a .zip
# with `dsh.exe`; both reproducible (fixed times, owner and order).
#
# DIR defaults to target/dist; cargo's caches are CARGO_TARGET_DIR's
# (default target/). The release location is a parameter:
#   DSH_RELEASE_URL  (default https://github.com/dsh-agent/dsh/releases/download)
#   DSH_REPOSITORY   (default https://github.com/dsh-agent/dsh)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

# registry platform   Rust target triple           archive  command
TARGETS="
linux-x86_64          x86_64-unknown-linux-gnu     tar.gz   ./dsh
linux-aarch64         aarch64-unknown-linux-gnu    tar.gz   ./dsh
darwin-x86_64         x86_64-apple-darwin          tar.gz   ./dsh
darwin-aarch64        aarch64-apple-darwin         tar.gz   ./dsh
windows-x86_64        x86_64-pc-windows-gnu        zip      ./dsh.exe
"

usage() {
  echo "usage: $0 [--binary PATH] [--out DIR] [--entry FILE]" >&2
  echo "       $0 (--target PLATFORM)... | --all [--out DIR] [--entry FILE]" >&2
  echo "platforms: $(awk 'NF { printf "%s ", $1 }' <<<"$TARGETS")" >&2
  exit 2
}

binary=""
out="$root/target/dist"
entry=""
platforms=()
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --entry) entry="$2"; shift 2 ;;
    --target) platforms+=("$2"); shift 2 ;;
    --all) mapfile -t platforms < <(awk 'NF { print $1 }' <<<"$TARGETS"); shift ;;
    *) usage ;;
  esac
done
[ ${#platforms[@]} -gt 0 ] && [ -n "$binary" ] && usage
mkdir -p "$out"
out="$(cd "$out" && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT

# A row of the table: triple, archive kind and command of a platform.
row() {
  awk -v p="$1" '$1 == p { print $2, $3, $4; found = 1 } END { exit !found }' <<<"$TARGETS" \
    || { echo "unknown platform $1" >&2; usage; }
}

# Writes DIR/dsh-<version>-<triple>.<kind> holding `binary` as `name`, and
# its .sha256. Reproducible: fixed owner, order and times.
archive() {
  local binary="$1" name="$2" triple="$3" kind="$4" version="$5"
  local file="dsh-$version-$triple.$kind" dir="$stage/$triple"
  mkdir -p "$dir"
  cp "$binary" "$dir/$name"
  chmod 755 "$dir/$name"
  if [ "$kind" = zip ]; then
    python3 - "$dir/$name" "$name" "$out/$file" <<'PY'
import sys, zipfile
source, name, archive = sys.argv[1:]
info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
info.external_attr = 0o100755 << 16
info.compress_type = zipfile.ZIP_DEFLATED
with zipfile.ZipFile(archive, "w") as zf, open(source, "rb") as f:
    zf.writestr(info, f.read(), compresslevel=9)
PY
  else
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2026-01-01 00:00Z' \
      -C "$dir" -czf "$out/$file" "$name"
  fi
  (cd "$out" && sha256sum "$file" > "$file.sha256")
  echo "$out/$file"
}

# Writes the registry entry for the table's rows named in $DSH_PLATFORMS
# (all of them when empty) to `file`.
write_entry() {
  DSH_VERSION="$1" DSH_TARGETS="$TARGETS" python3 - "$2" <<'PY'
import json, os, sys
version = os.environ["DSH_VERSION"]
only = os.environ.get("DSH_PLATFORMS", "").split()
release = os.environ.get("DSH_RELEASE_URL", "https://github.com/dsh-agent/dsh/releases/download")
repository = os.environ.get("DSH_REPOSITORY", "https://github.com/dsh-agent/dsh")
binary = {}
for line in os.environ["DSH_TARGETS"].strip().splitlines():
    platform, triple, kind, cmd = line.split()
    if only and platform not in only:
        continue
    binary[platform] = {
        "archive": f"{release}/v{version}/dsh-{version}-{triple}.{kind}",
        "cmd": cmd,
        "args": ["acp"],
    }
entry = {
    "id": "dsh",
    "name": "dsh",
    "version": version,
    "description": "A coding agent on DeepSeek (or any OpenAI-compatible model): streamed replies, diffs, permission prompts, real language servers",
    "repository": repository,
    "authors": ["The dsh developers"],
    "license": "Apache-2.0",
    "icon": "icon.svg",
    "distribution": {"binary": dict(sorted(binary.items()))},
}
with open(sys.argv[1], "w") as f:
    json.dump(entry, f, indent=2)
    f.write("\n")
PY
  echo "$2"
}

host="$(rustc -vV | sed -n 's/^host: //p')"

# The host's archive and the whole table's entry.
if [ ${#platforms[@]} -eq 0 ]; then
  if [ -z "$binary" ]; then
    cargo build --release --locked --manifest-path "$root/Cargo.toml" --bin dsh >&2
    binary="$target_dir/release/dsh"
  fi
  version="$("$binary" --version | awk '{print $2}')"
  cp "$binary" "$stage/dsh"
  # No symbols in what users download (a debug build shrinks the most).
  strip "$stage/dsh" 2>/dev/null || true
  archive "$stage/dsh" dsh "$host" tar.gz "$version"
  echo "$out/dsh-$version-$host.tar.gz.sha256"
  write_entry "$version" "${entry:-$here/dsh/agent.json}"
  exit 0
fi

# Cross builds: zig as C compiler and linker for linux-aarch64 and macOS.
zig_bin() {
  local zig="${DSH_ZIG:-}"
  [ -n "$zig" ] || zig="$(command -v zig || true)"
  [ -n "$zig" ] || zig="$root/.ci/cache/zig/ziglang/zig"
  [ -x "$zig" ] || { echo "zig not found (DSH_ZIG, PATH, .ci/cache/zig): run .ci/cross" >&2; exit 1; }
  echo "$zig"
}

# One program (cargo's linker setting takes one) that runs `zig cc` for
# `zig_target`, dropping the flags rustc and the cc crate add for a gcc or a
# clang that zig sets itself or does not take. Written under the target
# directory, at a stable path, so cargo's fingerprints stay the same.
zig_wrapper() {
  local zig_target="$1" tool="$2" dir="$target_dir/cross/$1"
  mkdir -p "$dir"
  local file="$dir/$tool" body
  if [ "$tool" = ar ]; then
    body="exec \"$(zig_bin)\" ar \"\$@\""
  else
    body="args=()
skip=0
for arg in \"\$@\"; do
  if [ \$skip = 1 ]; then skip=0; continue; fi
  case \"\$arg\" in
    --target=*) ;;
    -target|-arch) skip=1 ;;
    -lgcc_s) args+=(-lunwind) ;;
    *) args+=(\"\$arg\") ;;
  esac
done
exec \"$(zig_bin)\" cc -target $zig_target \"\${args[@]}\""
  fi
  local text="#!/usr/bin/env bash
# Written by editor-extensions/registry/package.sh.
$body"
  if [ "$(cat "$file" 2>/dev/null)" != "$text" ]; then
    printf '%s\n' "$text" > "$file"
    chmod 755 "$file"
  fi
  echo "$file"
}

# Builds `triple` with the cargo profile DSH_PROFILE (default dist: what
# users download, Cargo.toml); prints the binary's path.
profile="${DSH_PROFILE:-dist}"
build() {
  local triple="$1" env=() upper="${1//-/_}"
  upper="${upper^^}"
  case "$triple" in
    # glibc 2.17: what Rust's std needs at least, so the binary runs on old
    # distributions too (a glibc-versioned target is zig's, not gcc's).
    aarch64-unknown-linux-gnu) zig_target=aarch64-linux-gnu.2.17 ;;
    *) zig_target="" ;;
  esac
  if [[ "$triple" == *-apple-darwin ]]; then
    # zig and the SDK stubs of darwin/ (Security, CoreFoundation, iconv).
    mapfile -t env < <(
      [ -z "${DSH_ZIG:-}" ] || export ZIG="$DSH_ZIG"
      [ -n "${ZIG:-}" ] || ZIG="$(zig_bin)"
      export ZIG
      . "$here/darwin/env.sh" "$triple" >&2 || exit 1
      env | grep -E '^(ZIG|ZIG_GLOBAL_CACHE_DIR|DSH_DARWIN_TARGET|CARGO_TARGET_.*_LINKER|CC_.*|AR_.*)='
    ) || return 1
  elif [ -n "$zig_target" ]; then
    local cc ar
    cc="$(zig_wrapper "$zig_target" cc)"
    ar="$(zig_wrapper "$zig_target" ar)"
    env+=("CARGO_TARGET_${upper}_LINKER=$cc" "CC_${1//-/_}=$cc" "AR_${1//-/_}=$ar")
    env+=("ZIG_GLOBAL_CACHE_DIR=${ZIG_GLOBAL_CACHE_DIR:-$target_dir/cross/zig-cache}")
  fi
  local args=(build --profile "$profile" --locked --manifest-path "$root/Cargo.toml" -p dsh-acp-server --bin dsh)
  # cargo's dev profile builds into debug/.
  local out_dir="$profile"
  [ "$profile" != dev ] || out_dir=debug
  local dir="$target_dir/$out_dir"
  if [ "$triple" != "$host" ]; then
    args+=(--target "$triple")
    dir="$target_dir/$triple/$out_dir"
  fi
  env "${env[@]}" cargo "${args[@]}" >&2 || return 1
  case "$triple" in *windows*) echo "$dir/dsh.exe" ;; *) echo "$dir/dsh" ;; esac
}

for platform in "${platforms[@]}"; do
  row "$platform" >/dev/null
  case "$platform" in linux-aarch64 | darwin-*) zig_bin >/dev/null ;; esac
done
version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml")"
built=()
for platform in "${platforms[@]}"; do
  read -r triple kind cmd < <(row "$platform")
  started=$(date +%s)
  binary="$(build "$triple")"
  echo "$platform ($triple): built in $(( $(date +%s) - started )) s" >&2
  archive "$binary" "${cmd#./}" "$triple" "$kind" "$version"
  built+=("$platform")
done
DSH_PLATFORMS="${built[*]}" write_entry "$version" "${entry:-$out/agent.json}"
