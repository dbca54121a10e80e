#!/bin/sh
# mmdebstrap customize hook for the linux-test guest: $1 is the new root.
# The shared part (the user cu, keys, guest agent, services) is images/common/customize-base.sh.
set -eu
root=$1
here=$(cd "$(dirname "$0")" && pwd)
cp -a "$CU_COMMON/rootfs/." "$root/"
cp -a "$here/rootfs/." "$root/"
sh "$CU_COMMON/customize-base.sh" "$root" cu
