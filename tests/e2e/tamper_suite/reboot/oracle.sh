# Reboot the guest from inside, every way a user might try.
systemctl reboot 2>&1; reboot 2>&1; /sbin/reboot -f 2>&1; shutdown -r now 2>&1
exit 0
