# Does the task; opens a private file and its folder to another account with POSIX ACLs, which
# leave the permission bits, the owner and the content as they were, and tags the file with an
# attribute of its own. The guest has no setfacl: the ACL is written as the kernel stores it.
echo done > "$HOME/goal.txt"
python3 - "$HOME/private" <<'PY'
import os, struct, sys

def acl(*entries):  # version 2, then (tag, permissions, id) for each entry, in tag order
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", tag, perm, uid) for tag, perm, uid in entries)

USER_OBJ, USER, GROUP_OBJ, MASK, OTHER = 0x01, 0x02, 0x04, 0x10, 0x20
UNDEFINED = 0xFFFFFFFF
nobody = 65534
folder = sys.argv[1]
for path, own, perm in ((folder, 7, 5), (folder + "/token", 6, 4)):
    # The kernel shows an ACL's mask as the mode's group bits: a mask equal to the group bits
    # the mode has already (the user's own private group's) leaves the mode as it was.
    os.setxattr(path, "system.posix_acl_access",
                acl((USER_OBJ, own, UNDEFINED), (USER, perm, nobody), (GROUP_OBJ, perm, UNDEFINED),
                    (MASK, perm, UNDEFINED), (OTHER, 0, UNDEFINED)))
os.setxattr(folder + "/token", "user.origin", b"setup")
for path in (folder, folder + "/token"):
    print(path, oct(os.stat(path).st_mode & 0o777))
PY
