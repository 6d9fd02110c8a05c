#!/usr/bin/env python3
"""Checks a macOS dsh built on Linux, where nothing can run it.

    editor-extensions/registry/darwin/check.py BINARY [arm64|x86_64]

It reads the Mach-O and fails (exit 1, saying why) unless:
- it is a 64-bit executable of the architecture given (if given);
- it loads only /usr/lib/libSystem.B.dylib, /usr/lib/libiconv.2.dylib and
  /System/Library/Frameworks/{Security,CoreFoundation}.framework, the
  libraries every Mac has, by those install names;
- on arm64, its ad-hoc code signature is whole: each page hash of the
  CodeDirectory matches the file (Apple silicon kills a binary whose
  signature does not), which also covers the strip rustc runs after the
  link. x86_64 needs none, and Apple's linker, like zig's, signs none.
It prints the libraries, the deployment target and SDK, and how many
symbols bind to each library. Standard library only.
"""
import hashlib
import struct
import sys

MH_MAGIC_64 = 0xFEEDFACF
CPU = {0x0100000C: "arm64", 0x01000007: "x86_64"}
LC_LOAD_DYLIB, LC_BUILD_VERSION, LC_CODE_SIGNATURE = 0xC, 0x32, 0x1D
LC_SYMTAB, LC_LOAD_WEAK_DYLIB, LC_VERSION_MIN_MACOSX = 0x2, 0x80000018, 0x24
ALLOWED = {
    "/usr/lib/libSystem.B.dylib",
    "/usr/lib/libiconv.2.dylib",
    "/System/Library/Frameworks/Security.framework/Versions/A/Security",
    "/System/Library/Frameworks/CoreFoundation.framework/Versions/A/CoreFoundation",
}
HASHES = {1: hashlib.sha1, 2: hashlib.sha256}


def version(v):
    return f"{v >> 16}.{(v >> 8) & 0xFF}.{v & 0xFF}"


def check_signature(data, off, size):
    """Recomputes the CodeDirectories' page hashes; returns what it checked."""
    magic, _length, count = struct.unpack_from(">III", data, off)
    if magic != 0xFADE0CC0:
        raise SystemExit(f"code signature: not an embedded signature (magic {magic:#x})")
    checked = []
    for i in range(count):
        slot, blob = struct.unpack_from(">II", data, off + 12 + 8 * i)
        base = off + blob
        if struct.unpack_from(">I", data, base)[0] != 0xFADE0C02:
            continue  # requirements, entitlements, CMS: not page hashes
        (_, _, ver, flags, hash_off, _ident, _special, n_code, code_limit,
         hash_size, hash_type, _platform, page_log) = struct.unpack_from(
            ">IIIIIIIIIBBBB", data, base)
        if hash_type not in HASHES:
            raise SystemExit(f"code signature: unknown hash type {hash_type}")
        page = 1 << page_log
        if code_limit != off:
            raise SystemExit(f"code signature covers {code_limit} bytes, the signature starts at {off}")
        for n in range(n_code):
            want = data[base + hash_off + n * hash_size: base + hash_off + (n + 1) * hash_size]
            got = HASHES[hash_type](data[n * page: min((n + 1) * page, code_limit)]).digest()[:hash_size]
            if want != got:
                raise SystemExit(f"code signature: page {n} (slot {slot}) does not match the file")
        checked.append(f"{n_code} pages of {page} bytes, hash type {hash_type}, flags {flags:#x}, version {ver:#x}")
    if not checked:
        raise SystemExit("code signature: no CodeDirectory")
    return checked


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    data = open(sys.argv[1], "rb").read()
    magic, cputype, _sub, filetype, ncmds, _size, _flags = struct.unpack_from("<IiIIIII", data, 0)
    if magic != MH_MAGIC_64 or filetype != 2:
        raise SystemExit("not a 64-bit Mach-O executable")
    arch = CPU.get(cputype & 0xFFFFFFFF, hex(cputype))
    if len(sys.argv) == 3 and arch != sys.argv[2]:
        raise SystemExit(f"architecture {arch}, not {sys.argv[2]}")
    print(f"architecture: {arch}")
    dylibs, signature, symtab = [], None, None
    off = 32
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<II", data, off)
        if cmd in (LC_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB):
            name_off, _ts, current, compat = struct.unpack_from("<IIII", data, off + 8)
            name = data[off + name_off: off + size].split(b"\0")[0].decode()
            dylibs.append(name)
            print(f"loads: {name} (current {version(current)}, compatibility {version(compat)})")
        elif cmd == LC_BUILD_VERSION:
            platform, minos, sdk = struct.unpack_from("<III", data, off + 8)
            print(f"platform {platform} (1 = macOS), minimum {version(minos)}, SDK {version(sdk)}")
        elif cmd == LC_VERSION_MIN_MACOSX:
            minos, sdk = struct.unpack_from("<II", data, off + 8)
            print(f"macOS minimum {version(minos)}, SDK {version(sdk)}")
        elif cmd == LC_CODE_SIGNATURE:
            signature = struct.unpack_from("<II", data, off + 8)
        elif cmd == LC_SYMTAB:
            symtab = struct.unpack_from("<IIII", data, off + 8)
        off += size
    wrong = [d for d in dylibs if d not in ALLOWED]
    if wrong:
        raise SystemExit(f"loads libraries a Mac may not have: {wrong}")
    if symtab:
        sym_off, nsyms, str_off, _ = symtab
        per = {}
        for i in range(nsyms):
            strx, ntype, _sect, desc, _value = struct.unpack_from("<IBBhQ", data, sym_off + 16 * i)
            if ntype & 0x0E == 0 and ntype & 0x01:  # undefined, external
                ordinal = (desc >> 8) & 0xFF
                lib = dylibs[ordinal - 1] if 0 < ordinal <= len(dylibs) else f"ordinal {ordinal}"
                per[lib] = per.get(lib, 0) + 1
        for lib, n in sorted(per.items()):
            print(f"binds {n} symbols to {lib}")
    if signature is None:
        if arch == "arm64":
            raise SystemExit("no code signature (Apple silicon will not run it)")
        print("no code signature (none needed on x86_64)")
        return
    for line in check_signature(data, *signature):
        print(f"code signature whole: {line}")


if __name__ == "__main__":
    main()
