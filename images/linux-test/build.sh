#!/bin/sh
# Builds the linux-test guest from Debian packages only (images/common/build-debian.sh).
#   build.sh WORKDIR KEYDIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
CU_RUN_DISK_SIZE=${CU_RUN_DISK_SIZE:-3G}
export CU_RUN_DISK_SIZE
exec sh "$here/../common/build-debian.sh" "$here" "$@"
