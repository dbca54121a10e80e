#!/bin/sh
# What every built-in Debian guest gets, run by a recipe's customize.sh after it copied its
# rootfs/ into the new root: the desktop user, the runner's keys, the guest agent, the pinned
# host key, the services, and what makes a TCG boot fast.
#   customize-base.sh ROOT USER
# CU_KEYS names the folder with the image's SSH host key and the runner's two public keys
# (client_key.pub for the desktop user, admin_key.pub for root); CU_GUEST_AGENT the guest agent.
set -eu
root=$1
user=$2
home="/home/$user"

# mmdebstrap leaves the build host's resolv.conf; the guest must not inherit it. It has no route
# out and no DNS: with no nameserver listed, lookups fail at once instead of waiting out a timeout
# (xauth, sudo and X all look names up).
rm -f "$root/etc/resolv.conf"
printf '# no nameserver: the guest has no network (cu-run)\n' > "$root/etc/resolv.conf"

# The desktop user, unprivileged: no sudo, since the agent gets whatever it can do. No groups
# either: Xorg runs as root and opens the input and video devices itself, and a user in
# `input` could write key events (the power key, SysRq) straight to the kernel. Its password
# only matters for a screen locker; logins are by key.
chroot "$root" useradd -m -s /bin/bash "$user"
cp -n "$root"/etc/skel/.[!.]* "$root$home/"  # rootfs/ made the home first, so useradd skipped skel
echo "$user:${CU_USER_PASSWORD:-$user}" | chroot "$root" chpasswd
chroot "$root" chown -R "$user:$user" "$home"
[ ! -f "$root$home/.xinitrc" ] || chmod 0755 "$root$home/.xinitrc"
install -d -m 0700 -o 1000 -g 1000 "$root$home/.ssh"
install -m 0600 -o 1000 -g 1000 "$CU_KEYS/client_key.pub" "$root$home/.ssh/authorized_keys"
# The runner's privileged channel: root, by a key of its own.
install -d -m 0700 "$root/root/.ssh"
install -m 0600 "$CU_KEYS/admin_key.pub" "$root/root/.ssh/authorized_keys"

# The guest agent: the runner runs it through SSH for the window list and AT-SPI tree.
install -m 0755 "$CU_GUEST_AGENT" "$root/usr/local/bin/cu-guest-agent"

# One pinned host key; sshd would otherwise make fresh keys nobody has recorded.
rm -f "$root"/etc/ssh/ssh_host_*
install -m 0600 "$CU_KEYS/ssh_host_ed25519_key" "$root/etc/ssh/"
install -m 0644 "$CU_KEYS/ssh_host_ed25519_key.pub" "$root/etc/ssh/"

chroot "$root" systemctl enable cu-net ssh >/dev/null 2>&1
# The exec audit (etc/audit/rules.d/cu-run.rules), as the host reads it from the disk after a
# freeze: each record handed to the kernel as it is written (a freeze writes out the page cache,
# not a process's buffer); one log that never rotates (an agent that floods it cannot push its
# own records into a file the reader skips); and no pause when the user fills the disk (root's
# reserved blocks still take the log, and "space left" counts only the user's).
conf="$root/etc/audit/auditd.conf"
sed -i -e 's/^flush = .*/flush = data/' -e 's/^max_log_file_action = .*/max_log_file_action = ignore/' \
    -e 's/^space_left_action = .*/space_left_action = ignore/' \
    -e 's/^admin_space_left_action = .*/admin_space_left_action = ignore/' "$conf"
for setting in 'flush = data' 'max_log_file_action = ignore' 'space_left_action = ignore' \
               'admin_space_left_action = ignore'; do
    grep -qx "$setting" "$conf" || { echo "auditd.conf: could not set $setting" >&2; exit 1; }
done
# Root's systemd user manager stays up (linger), and so is in every warm state: without it,
# logind starts one for the runner's first privileged command after each restore, which
# costs seconds under TCG.
install -d "$root/var/lib/systemd/linger" && touch "$root/var/lib/systemd/linger/root"
# Ctrl+Alt+Del on the console would reboot the guest.
chroot "$root" systemctl mask ctrl-alt-del.target >/dev/null 2>&1
# Each of these costs seconds of a TCG boot and does nothing for a throwaway guest.
chroot "$root" systemctl mask systemd-networkd.service systemd-networkd-wait-online.service \
    e2scrub_reap.service apt-daily.timer apt-daily-upgrade.timer man-db.timer e2scrub_all.timer \
    fstrim.timer >/dev/null 2>&1

# Kernel modules for hardware no VM here has (400 MB -> ~100 MB).
for d in drivers/net/wireless drivers/net/ethernet drivers/media drivers/infiniband \
         drivers/gpu/drm/amd drivers/gpu/drm/nouveau drivers/gpu/drm/i915 \
         drivers/gpu/drm/radeon drivers/bluetooth drivers/scsi drivers/staging \
         drivers/iio drivers/isdn sound net/bluetooth net/mac80211 net/wireless; do
    rm -rf "$root"/lib/modules/*/kernel/$d
done
for k in "$root"/lib/modules/*; do chroot "$root" depmod "$(basename "$k")"; done
chroot "$root" update-initramfs -u -k all >/dev/null
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
