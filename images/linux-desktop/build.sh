#!/bin/sh
# Builds the linux-desktop guest from Debian packages only (images/common/build-debian.sh): an
# XFCE desktop at 1920x1080 with LibreOffice, GIMP, Thunderbird, Chromium and VLC, for the
# benchmarks' tasks (docs/images.md).
#   build.sh WORKDIR KEYDIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
CU_RUN_DISK_SIZE=${CU_RUN_DISK_SIZE:-8G}
export CU_RUN_DISK_SIZE
exec sh "$here/../common/build-debian.sh" "$here" "$@"
