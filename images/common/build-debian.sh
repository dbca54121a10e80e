#!/bin/sh
# Builds a built-in Debian guest from Debian packages only, with its recipe's package list and
# customize hook.
#   build-debian.sh RECIPE WORKDIR KEYDIR
# RECIPE holds packages.txt, customize.sh and rootfs/ (and optionally dpkg-excludes.txt).
# CU_GUEST_AGENT names the guest agent program to install (guest_agent/linux/).
# KEYDIR holds ssh_host_ed25519_key{,.pub}, client_key.pub and admin_key.pub, made by the caller.
# CU_RUN_DISK_SIZE is the root filesystem's size; CU_RUN_DEB_CACHE, when set, a folder of .deb
# files kept between builds (a developer's rebuilds then download nothing twice).
# Writes WORKDIR/disk.qcow2, vmlinuz, initrd.img and packages.tsv.
# Needs root (mmdebstrap --mode=root), mmdebstrap, e2fsprogs and qemu-img.
set -eu
recipe=$1
work=$2
keys=$3
common=$(cd "$(dirname "$0")" && pwd)
mirror=${CU_RUN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
disk_size=${CU_RUN_DISK_SIZE:-3G}
root="$work/rootfs"

packages=$(grep -v '^#' "$recipe/packages.txt" | grep -v '^$' | paste -sd, -)
excludes=""
if [ -f "$recipe/dpkg-excludes.txt" ]; then
    for path in $(grep -v '^#' "$recipe/dpkg-excludes.txt" | grep -v '^$'); do
        excludes="$excludes --dpkgopt=path-exclude=$path"
    done
fi
cache_hooks=""
if [ -n "${CU_RUN_DEB_CACHE:-}" ]; then
    mkdir -p "$CU_RUN_DEB_CACHE"
    cache_hooks="--skip=download/empty --skip=essential/unlink"
fi

echo "== mmdebstrap: $(echo "$packages" | tr ',' '\n' | wc -l) packages from $mirror"
rm -rf "$root"; mkdir -p "$work"
# Documentation, translations and what the recipe excludes are never used by a software-rendered
# desktop under TCG, so dpkg never unpacks them.
# shellcheck disable=SC2086 # the lists are words on purpose
mmdebstrap --variant=minbase --mode=root --format=directory \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    $excludes $cache_hooks \
    ${CU_RUN_DEB_CACHE:+--setup-hook="mkdir -p \"\$1/var/cache/apt/archives\""} \
    ${CU_RUN_DEB_CACHE:+--setup-hook="sync-in '$CU_RUN_DEB_CACHE' /var/cache/apt/archives/"} \
    --include="$packages" \
    ${CU_RUN_DEB_CACHE:+--customize-hook="sync-out /var/cache/apt/archives '$CU_RUN_DEB_CACHE'"} \
    --customize-hook="CU_KEYS='$keys' CU_GUEST_AGENT='$CU_GUEST_AGENT' CU_COMMON='$common' sh '$recipe/customize.sh' \"\$1\"" \
    bookworm "$root" "$mirror"

echo "== kernel and initrd"
cp "$root"/boot/vmlinuz-* "$work/vmlinuz"
cp "$root"/boot/initrd.img-* "$work/initrd.img"
chroot "$root" dpkg-query -W -f='${Package}\t${Version}\n' > "$work/packages.tsv"

echo "== filesystem ($disk_size)"
rm -f "$work/disk.raw"
mkfs.ext4 -q -L cu-root -d "$root" "$work/disk.raw" "$disk_size"
qemu-img convert -O qcow2 "$work/disk.raw" "$work/disk.qcow2"
rm -rf "$work/disk.raw" "$root"
echo "== done"
