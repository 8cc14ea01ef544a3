#!/usr/bin/env bash
# Prints the path of an aarch64 Debian sysroot for running the aarch64
# artifacts under qemu-user (qemu-aarch64-static -L SYSROOT prog), making it
# first if needed: glibc, CPython 3.11 (minimal + stdlib), Node (nodejs +
# libnode) and OpenJDK 17 (headless JRE), unpacked with `dpkg -x` from the arm64
# packages of this machine's Debian release (no root chroot, no binfmt).
# Installs qemu-user-static and adds the arm64 dpkg architecture when missing.
# Idempotent and quiet when all is there; any failure exits non-zero (CI must
# not skip the aarch64 tests for lack of a dependency).
#   scripts/arm64_sysroot.sh     (env: ETCDLOCK_ARM64_SYSROOT, default ~/.cache/etcdlock/arm64-sysroot)
set -euo pipefail
ROOTFS=${ETCDLOCK_ARM64_SYSROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/etcdlock/arm64-sysroot}
# What the three runtimes load, by package; no shell (/bin/sh) is unpacked, so
# a program under qemu that runs `sh -c` gets the host's, which the kernel runs
# natively (there is no binfmt entry for aarch64 binaries).
PKGS=(
  libc6 libgcc-s1 libstdc++6 zlib1g libssl3 libzstd1 liblzma5 libbz2-1.0 libffi8 libexpat1 libuuid1
  libcrypt1 libtinfo6 libncursesw6 libreadline8 libsqlite3-0 libnsl2 libtirpc3 libgssapi-krb5-2
  libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1 libdb5.3 libgdbm6
  python3.11-minimal libpython3.11-minimal libpython3.11-stdlib
  nodejs libnode108 libuv1 libc-ares2 libicu72 libnghttp2-14 libbrotli1
  openjdk-17-jre-headless
)
# Architecture-independent parts Debian's node loads at start (its builtins
# are externalized into these).
ALL_PKGS=(node-cjs-module-lexer node-undici node-acorn node-busboy node-xtend)
# Marker: the package list it was made from; a changed list remakes it.
stamp=$(printf '%s\n' "${PKGS[@]}" "${ALL_PKGS[@]}" | sha256sum | cut -c1-16)
if [ -f "$ROOTFS/.etcdlock-sysroot-$stamp" ] && command -v qemu-aarch64-static >/dev/null; then
  echo "$ROOTFS"; exit 0
fi

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
if ! command -v qemu-aarch64-static >/dev/null; then
  echo "arm64_sysroot: installing qemu-user-static" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq qemu-user-static >/dev/null
fi
if ! dpkg --print-foreign-architectures | grep -qx arm64 || ! apt-cache show libc6:arm64 >/dev/null 2>&1; then
  echo "arm64_sysroot: adding the arm64 package architecture (dpkg --add-architecture arm64)" >&2
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
fi

echo "arm64_sysroot: unpacking $((${#PKGS[@]} + ${#ALL_PKGS[@]})) arm64 packages into $ROOTFS" >&2
debs=$(mktemp -d); trap 'rm -rf "$debs"' EXIT
(cd "$debs" && apt-get download -qq "${PKGS[@]/%/:arm64}" "${ALL_PKGS[@]}" >/dev/null 2>&1) || {
  echo "arm64_sysroot: apt-get download of the arm64 packages failed" >&2; exit 1; }
rm -rf "$ROOTFS"; mkdir -p "$ROOTFS"
for d in "$debs"/*.deb; do dpkg -x "$d" "$ROOTFS"; done
# openjdk's `java` is reached through update-alternatives on a real install.
jhome=$(find "$ROOTFS/usr/lib/jvm" -maxdepth 1 -name 'java-17-openjdk-*' -type d | head -n 1)
[ -x "$jhome/bin/java" ] || { echo "arm64_sysroot: no java in the unpacked JRE" >&2; exit 1; }
for f in usr/bin/python3.11 usr/bin/node lib/ld-linux-aarch64.so.1; do
  [ -e "$ROOTFS/$f" ] || { echo "arm64_sysroot: $f missing after unpacking" >&2; exit 1; }
done
touch "$ROOTFS/.etcdlock-sysroot-$stamp"
echo "$ROOTFS"
