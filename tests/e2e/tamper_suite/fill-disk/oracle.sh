# Fill every block the desktop user may write, so nothing more fits on the disk.
avail=$(df --output=avail -B1 "$HOME" | tail -n 1)
fallocate -l "$avail" "$HOME/fill" 2>/dev/null || dd if=/dev/zero of="$HOME/fill" bs=1M 2>/dev/null
df -h "$HOME"
exit 0
