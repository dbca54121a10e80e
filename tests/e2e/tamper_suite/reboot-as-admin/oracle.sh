# With admin rights (a task that grants them), the guest is reset at once through SysRq.
sudo -n sh -c 'sync; echo b > /proc/sysrq-trigger'
sleep 30
