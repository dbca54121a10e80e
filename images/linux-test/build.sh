#!/bin/sh
# Builds the linux-test guest from Debian packages only.
#   build.sh WORKDIR KEYDIR
# CU_GUEST_AGENT names the guest agent program to install (guest_agent/linux/).
# KEYDIR holds ssh_host_ed25519_key{,.pub} and client_key.pub, made by the caller.
# Writes WORKDIR/disk.qcow2, vmlinuz, initrd.img and packages.tsv.
# Needs root (mmdebstrap --mode=root), mmdebstrap, e2fsprogs and qemu-img.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=$1
keys=$2
mirror=${CU_RUN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
disk_size=${CU_RUN_DISK_SIZE:-3G}
root="$work/rootfs"

packages=$(grep -v '^#' "$here/packages.txt" | grep -v '^$' | paste -sd, -)

echo "== mmdebstrap: $(echo "$packages" | tr ',' '\n' | wc -l) packages from $mirror"
rm -rf "$root"; mkdir -p "$work"
# Documentation, translations and the DRI/LLVM stack (~150 MB) are never used by a
# software-rendered desktop under TCG, so dpkg never unpacks them.
mmdebstrap --variant=minbase --mode=root --format=directory \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/lib/x86_64-linux-gnu/dri/*' \
    --dpkgopt='path-exclude=/usr/lib/x86_64-linux-gnu/libLLVM*' \
    --include="$packages" \
    --customize-hook="CU_KEYS='$keys' CU_GUEST_AGENT='$CU_GUEST_AGENT' sh '$here/customize.sh' \"\$1\"" \
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
