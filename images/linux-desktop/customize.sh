#!/bin/sh
# mmdebstrap customize hook for the linux-desktop guest: $1 is the new root.
# The shared part (the user, keys, guest agent, services) is images/common/customize-base.sh;
# here, what makes the apps start without a first-run dialog, and Chrome's command.
set -eu
root=$1
here=$(cd "$(dirname "$0")" && pwd)
cp -a "$CU_COMMON/rootfs/." "$root/"
cp -a "$here/rootfs/." "$root/"
chmod 0755 "$root/usr/local/bin/google-chrome" "$root/usr/local/bin/thunderbird" "$root/usr/local/bin/cu-warm-apps"
# The folders a desktop user has, and Thunderbird's Local Folders.
for d in Desktop Documents Downloads Music Pictures Videos ".thunderbird/cu.default/Mail/Local Folders"; do
    mkdir -p "$root/home/user/$d"
done
# OSWorld's account: `user`, home /home/user (its tasks name that path in 282 files).
sh "$CU_COMMON/customize-base.sh" "$root" user
# GIMP queries every plug-in at its first start (~30 s under TCG): done here, once, for the user.
chroot "$root" runuser -u user -- env HOME=/home/user gimp -i -d -f -b "(gimp-quit 0)" >/dev/null 2>&1 || true
# OSWorld's steps run `python -c "import pyautogui; ..."`: python is python3 (python-is-python3),
# pyautogui comes from PyPI, pinned, installed with the host's pip for the guest's Python 3.11.
"${CU_PYTHON:-python3}" -m pip install --quiet --disable-pip-version-check --no-deps --no-compile \
    --target "$root/usr/local/lib/python3.11/dist-packages" -r "$here/pip-packages.txt"
# The guest is throwaway: no updates to fetch, no cache to rebuild on its first boot.
chroot "$root" systemctl mask sysstat.service sysstat-collect.timer sysstat-summary.timer >/dev/null 2>&1 || true
