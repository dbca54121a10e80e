# cu-run: runs as root
# shellcheck shell=sh
# What verify's as_user runs first (privileged-prelude.sh), as root, in a mount namespace of the
# command's own (unshare --mount --propagation private): every mount there made read-only (a
# remount of the mount point alone; the filesystem stays writable outside), then "$@", which
# drops to the desktop user. Nothing the user's code does then can change a file the verifier
# reads. The root filesystem must go read-only, or nothing runs (exit 125).
mount -o remount,bind,ro / || exit 125
while read -r _ m _ o _; do
    case ",$o," in *,ro,*) continue;; esac
    # cu-run-lint: allow R7 -- in the command's own mount namespace: a mount point the agent chose is only made read-only there
    mount -o remount,bind,ro "$m" 2>/dev/null
done < /proc/self/mounts
exec "$@"
