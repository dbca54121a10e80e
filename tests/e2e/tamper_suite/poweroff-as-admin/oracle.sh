# With admin rights, the guest powers itself off, as a host's shutdown would look.
sudo -n systemctl poweroff --force --force
sleep 30
