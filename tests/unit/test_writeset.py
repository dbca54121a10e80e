"""The write set on planted manifests: what counts as a change, and what is allowed."""

import hashlib
import time

import pytest

from fakes.display import LocalShell
from runner.profiles import get_profile
from typing_extensions import override
from dataclasses import replace

from runner.profiles.listing import Entry, Watch, expand, matches, take_listing

from runner.scoring.writeset import Change, diff, unexpected, what_changed
from runner.profiles.listing import WriteSetLister

HOME = "/home/cu"


LISTER = get_profile("linux").part(WriteSetLister)


def f(size=1, sha="a"):
    return Entry("f", size, sha)


BEFORE = {"/home/cu": Entry("d", 4096, ""), "/home/cu/notes.txt": f(5, "n1"), "/home/cu/keep.txt": f(3, "k"),
          "/home/cu/gone.txt": f(2, "g"), "/home/cu/.bash_history": f(1, "h1")}
AFTER = {"/home/cu": Entry("d", 4096, ""), "/home/cu/notes.txt": f(5, "n2"), "/home/cu/keep.txt": f(3, "k"),
         "/home/cu/new": Entry("d", 4096, ""), "/home/cu/new/a.txt": f(1, "x"),
         "/home/cu/.bash_history": f(9, "h2")}


def test_diff_names_created_removed_and_modified():
    assert diff(BEFORE, AFTER) == [Change("/home/cu/.bash_history", "modified"), Change("/home/cu/gone.txt", "removed"),
                                   Change("/home/cu/new", "created"), Change("/home/cu/new/a.txt", "created"),
                                   Change("/home/cu/notes.txt", "modified")]
    assert diff(BEFORE, BEFORE) == []


def test_same_size_other_content_is_a_change():
    assert diff({"/p": f(3, "aaa")}, {"/p": f(3, "bbb")}) == [Change("/p", "modified")]
    assert diff({"/p": f()}, {"/p": Entry("l", 1, "")}) == [Change("/p", "modified", "was a file, now a link")]


def test_allowed_and_ignored_paths_are_not_unexpected():
    ignore = tuple(expand(p, HOME) for p in LISTER.default_ignore)
    bad = unexpected(diff(BEFORE, AFTER), (expand("~/new/a.txt", HOME), expand("~/notes.txt", HOME)), ignore)
    # ~/new is covered because it was created to hold an allowed file; gone.txt is not allowed.
    assert bad == [Change("/home/cu/gone.txt", "removed")]


def test_nothing_allowed_lists_everything_but_the_desktops_own_churn():
    ignore = tuple(expand(p, HOME) for p in LISTER.default_ignore)
    bad = unexpected(diff(BEFORE, AFTER), (), ignore)
    assert [c.path for c in bad] == ["/home/cu/gone.txt", "/home/cu/new", "/home/cu/new/a.txt", "/home/cu/notes.txt"]


@pytest.mark.parametrize("path, pattern, expected", [
    ("/home/cu/projects/alpha/docs", "/home/cu/projects", True),   # inside an allowed folder
    ("/home/cu/projects2", "/home/cu/projects", False),
    ("/home/cu/.cache/x/y", "/home/cu/.cache/**", True),
    ("/home/cu/.cache", "/home/cu/.cache/**", False),
    ("/home/cu/a.txt", "/home/cu/*.txt", True),
    ("/home/cu/sub/a.txt", "/home/cu/*.txt", False),                # * stays within one folder
    ("/home/cu/sub/a.txt", "/home/cu/**.txt", True),
    ("/home/cu/.xsession-errors.old", "/home/cu/.xsession-errors*", True),
])
def test_glob_matching(path, pattern, expected):
    assert matches(path, pattern) is expected


def test_windows_paths_match_case_insensitively():
    assert matches(r"C:\Users\cu\AppData\Local\Temp\x.tmp", r"C:\Users\cu\appdata\**", windows=True)
    assert not matches(r"C:\evals\report.txt", r"C:\Users\cu\**", windows=True)
    assert expand(r"~\AppData\**", r"C:\Users\cu") == r"C:\Users\cu\AppData\**"


def test_files_left_unhashed_are_compared_by_metadata():
    old, same, touched = Entry("f", 9, "", 100.0), Entry("f", 9, "", 100.0), Entry("f", 9, "", 101.5)
    assert diff({"/big": old}, {"/big": same}) == []
    assert diff({"/big": old}, {"/big": touched})[0].what == "modified"
    # hashed on one side only (the hashing budget ran out on the other): the metadata decides
    assert diff({"/p": Entry("f", 3, "aaa", 5.0)}, {"/p": Entry("f", 3, "", 5.0)}) == []


def test_windows_listing():
    output = ("d\t0\t10000000\t\tC:\\evals\\sub\r\nf\t12\t20000000\tABCDEF\tC:\\evals\\a.txt\r\n"
              "f\t99999999999\t30000000\t\tC:\\evals\\big.bin\r\ntruncated\r\n")
    listing = get_profile("windows").part(WriteSetLister).parse_listing(output)
    assert listing.entries == {"C:\\evals\\sub": Entry("d", 0, "", 1.0), "C:\\evals\\a.txt": Entry("f", 12, "abcdef", 2.0),
                               "C:\\evals\\big.bin": Entry("f", 99999999999, "", 3.0)}
    assert listing.unhashed == ("C:\\evals\\big.bin",) and listing.truncated


def test_listing_script_against_a_real_folder(tmp_path):
    """The guest-side script, run by sh on this host (LocalShell), over a real tree."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a file.txt").write_text("hello")
    (tmp_path / "b.txt").write_text("x")
    before = take_listing(LocalShell(), LISTER, Watch((str(tmp_path),))).entries
    (tmp_path / "docs" / "a file.txt").write_text("hellO")
    (tmp_path / "c.txt").write_text("new")
    after = take_listing(LocalShell(), LISTER, Watch((str(tmp_path), str(tmp_path / "missing")))).entries
    assert before[str(tmp_path / "docs" / "a file.txt")].size == 5
    assert diff(before, after) == [Change(str(tmp_path / "c.txt"), "created"),
                                   Change(str(tmp_path / "docs" / "a file.txt"), "modified")]
    assert str(diff(before, after)[1]) == f"{tmp_path}/docs/a file.txt (modified)"


def test_the_lister_is_bounded_and_never_follows_links_or_reads_fifos(tmp_path, monkeypatch):
    """A sparse file far over the limit is not read, a FIFO is not opened (the listing would
    hang), a link is listed as a link, and names with newlines survive."""
    import os

    from runner.profiles import linux_listing as linux

    (tmp_path / "odd\tname\nx").write_text("abc")
    with open(tmp_path / "sparse.bin", "wb") as f:
        f.truncate(50 * 2**30)  # 50 GiB, nothing on disk
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link").symlink_to("/etc/passwd")
    listing = take_listing(LocalShell(), LISTER, Watch((str(tmp_path),)))
    entries = listing.entries
    assert entries[str(tmp_path / "odd\tname\nx")].sha256 == hashlib.sha256(b"abc").hexdigest()
    assert entries[str(tmp_path / "sparse.bin")] .size == 50 * 2**30 and entries[str(tmp_path / "sparse.bin")].sha256 == ""
    assert listing.unhashed == (str(tmp_path / "sparse.bin"),)
    assert entries[str(tmp_path / "pipe")].kind == "o" and entries[str(tmp_path / "link")].kind == "l"

    monkeypatch.setattr(linux, "MAX_ENTRIES", 2)
    small = take_listing(LocalShell(), LISTER, Watch((str(tmp_path),)))
    assert small.truncated and len(small.entries) == 2


def test_names_that_are_not_utf8_stay_apart(tmp_path):
    """Two names that differ only in bytes UTF-8 cannot decode are two entries, not one: a
    file the agent made must not hide behind one setup made."""
    import os

    root = os.fsencode(tmp_path)
    for name in (b"a\xfe.txt", b"a\xff.txt"):
        with open(root + b"/" + name, "wb") as fh:
            fh.write(name)
    entries = take_listing(LocalShell(), LISTER, Watch((str(tmp_path),))).entries
    names = sorted(os.fsencode(p) for p in entries if p != str(tmp_path))
    assert names == [root + b"/a\xfe.txt", root + b"/a\xff.txt"]


def test_overlapping_roots_list_each_path_once_and_the_budget_leaves_files_unhashed(tmp_path, monkeypatch):
    from runner.profiles import linux_listing as linux

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("a")
    monkeypatch.setattr(linux, "MAX_ENTRIES", 3)  # the root, sub and a.txt: listed twice, still 3
    listing = take_listing(LocalShell(), LISTER, Watch((str(tmp_path), str(tmp_path / "sub"))))
    assert not listing.truncated and len(listing.entries) == 3

    monkeypatch.setattr(linux, "HASH_BUDGET_S", -1.0)  # the budget spent before the first file
    listing = take_listing(LocalShell(), LISTER, Watch((str(tmp_path),)))
    assert listing.unhashed == (str(tmp_path / "sub" / "a.txt"),)


@pytest.mark.parametrize("output", ["", "f 420 0 0 1 2 3 4 - 2f61 - -\n", "f 420 0 0 1 2 3 4 - 2f61 - -\ncomplete\n",
                                    "f 420 0 0 1 2 3 4 -\ncomplete 1\n", "f 420 0 0 one 2 3 4 - 2f61 - -\ncomplete 1\n",
                                    "f 420 0 0 1 2 3 4 - zz - -\ncomplete 1\n", "x 420 0 0 1 2 3 4 - 2f61 - -\ncomplete 1\n",
                                    "f 420 0 0 1 2 3 4 - 2f61 - -\ncomplete 1\nPASS\n",
                                    "f 420 0 0 1 2 3 4 - 2f61 -\ncomplete 1\n",  # no XATTRS field
                                    "f 420 0 0 1 2 3 4 - 2f61 - 75:abc\ncomplete 1\n",  # a digest cut short
                                    "f 420 0 0 1 2 3 4 - 2f61 - PASS\ncomplete 1\n"])
def test_a_listing_the_lister_did_not_print_is_an_infra_error(output):
    from runner.errors import InfraError

    with pytest.raises(InfraError, match="listing"):
        LISTER.parse_listing(output)


# -- tamper class 2: a change to a watched file must show, whichever way it was hidden.
# Each runs the real lister with sh on this host over a real tree, as the admin would in the guest.

def listed(root, **watch):
    return take_listing(LocalShell(), LISTER, Watch((str(root),), **watch))


CLOCK_REALTIME_COARSE = 5  # Linux's clock id (<linux/time.h>); Python's time module does not name it


def past(ns: int) -> None:
    """Returns once the kernel's clock for file times has passed NS. A ctime is stamped from the
    coarse realtime clock, a tick behind the listing's time_ns(): a change made within that tick
    of the listing's start had a ctime before it, was taken for unchanged since, and these tests
    failed now and then (the product's own listing after allows two seconds for this,
    Watch.after). Waiting for the clock, not for a time, makes each change come after."""
    while time.clock_gettime_ns(CLOCK_REALTIME_COARSE) <= ns:
        pass


def test_a_file_over_the_hash_limit_rewritten_in_place_with_its_mtime_restored_is_a_change(tmp_path, monkeypatch):
    import os

    from runner.profiles import linux_listing as linux

    monkeypatch.setattr(linux, "HASH_MAX_BYTES", 1024)  # the 64 MiB limit, scaled down
    big = tmp_path / "big.bin"
    big.write_bytes(b"a" * 4096)
    os.utime(big, ns=(1_000_000_000, 1_000_000_000))
    before = listed(tmp_path)
    past(before.started_ns)
    assert str(big) in before.unhashed
    with open(big, "r+b") as fh:  # same size, one byte different: dd conv=notrunc
        fh.seek(100)
        fh.write(b"b")
    os.utime(big, ns=(1_000_000_000, 1_000_000_000))  # touch -r: the mtime the agent controls
    after = listed(tmp_path, since_ns=before.started_ns)
    (change,) = diff(before.entries, after.entries)
    assert change.path == str(big) and "ctime" in change.detail


def test_the_hash_budget_spent_on_decoys_leaves_the_file_that_mattered_still_compared(tmp_path, monkeypatch):
    import os

    from runner.profiles import linux_listing as linux

    target = tmp_path / "zzz" / "notes.txt"
    target.parent.mkdir()
    target.write_text("original")
    before = listed(tmp_path)
    past(before.started_ns)
    assert before.entries[str(target)].sha256  # hashed before
    monkeypatch.setattr(linux, "HASH_BUDGET_S", -1.0)  # decoys used up the budget: nothing is hashed after
    stat = target.stat()
    target.write_text("tampered")  # same size
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    after = listed(tmp_path, since_ns=before.started_ns)
    assert str(target) in after.unhashed
    assert [c.path for c in diff(before.entries, after.entries)] == [str(target)]


def test_files_untouched_since_the_first_listing_are_not_hashed_again(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    before = listed(tmp_path)
    past(before.started_ns)
    (tmp_path / "b.txt").write_text("b")
    after = listed(tmp_path, since_ns=before.started_ns)
    assert after.unhashed == (str(tmp_path / "a.txt"),) and after.entries[str(tmp_path / "b.txt")].sha256
    assert [str(c) for c in diff(before.entries, after.entries)] == [f"{tmp_path}/b.txt (created)"]


def test_ignored_paths_are_listed_but_never_hashed(tmp_path):
    (tmp_path / ".cache" / "deep").mkdir(parents=True)
    (tmp_path / ".cache" / "deep" / "x.bin").write_text("x")
    (tmp_path / ".xsession-errors.old").write_text("y")
    (tmp_path / "kept.txt").write_text("z")
    listing = listed(tmp_path, ignore=(f"{tmp_path}/.cache/**", f"{tmp_path}/.xsession-errors*"))
    assert set(listing.unhashed) == {f"{tmp_path}/.cache/deep/x.bin", f"{tmp_path}/.xsession-errors.old"}
    assert listing.entries[f"{tmp_path}/kept.txt"].sha256


def test_a_link_pointed_elsewhere_is_a_change(tmp_path):
    (tmp_path / "link").symlink_to("a")
    before = listed(tmp_path)
    (tmp_path / "link").unlink()
    (tmp_path / "link").symlink_to("/etc/shadow")
    (change,) = diff(before.entries, listed(tmp_path).entries)
    assert change.detail == "link target a -> /etc/shadow"


def test_mode_and_owner_are_compared_for_files_and_folders(tmp_path):
    import os

    (tmp_path / "sub").mkdir()
    (tmp_path / "f.txt").write_text("x")
    before = listed(tmp_path)
    os.chmod(tmp_path / "f.txt", 0o4777)
    os.chown(tmp_path / "sub", 65534, 65534)
    changes = {c.path: c.detail for c in diff(before.entries, listed(tmp_path).entries)}
    assert changes == {f"{tmp_path}/f.txt": "mode 644 -> 4777", f"{tmp_path}/sub": "owner 0:0 -> 65534:65534"}


def test_a_file_the_lister_cannot_read_counts_as_changed_with_the_reason():
    """The lister run as an account that cannot open the file (here nobody, over root's 0600 file):
    it is listed with the reason, and the diff names it."""
    import os
    import shutil
    import tempfile
    from pathlib import Path

    class AsNobody(LocalShell):
        @override
        def run(self, script, timeout=60.0):
            return super().run(f"exec setpriv --reuid=65534 --regid=65534 --clear-groups sh -s <<'CU_EOF'\n"
                               f"{script}\nCU_EOF\n", timeout)

    tmp_path = Path(tempfile.mkdtemp(prefix="cu-run-test-"))  # nobody can reach it, unlike pytest's tmp_path
    try:
        tmp_path.chmod(0o755)
        secret = tmp_path / "secret.txt"
        secret.write_text("s")
        before = take_listing(LocalShell(), LISTER, Watch((str(tmp_path),)))
        os.chmod(secret, 0o600)
        after = take_listing(AsNobody(), LISTER, Watch((str(tmp_path),)))
        assert after.entries[str(secret)].error == "Permission denied"
        changes = {c.path: c.detail for c in diff(before.entries, after.entries)}
        assert changes[str(secret)] == "could not be read: Permission denied"
    finally:
        shutil.rmtree(tmp_path)


def test_a_path_too_long_to_examine_is_listed_with_the_reason_never_skipped(tmp_path):
    import os

    here = os.open(tmp_path, os.O_RDONLY)
    try:
        for _ in range(20):  # 20 x 250 characters: over PATH_MAX
            os.mkdir("d" * 250, dir_fd=here)
            deeper = os.open("d" * 250, os.O_RDONLY, dir_fd=here)
            os.close(here)
            here = deeper
    finally:
        os.close(here)
    listing = listed(tmp_path)
    broken = {p: e for p, e in listing.entries.items() if e.error}
    assert broken and all(e.error == "File name too long" for e in broken.values()), broken


def test_a_name_with_a_newline_inside_an_allowed_folder_is_allowed():
    assert matches("/home/cu/Desktop/a\nPASS", "/home/cu/Desktop/**")
    assert not matches("/home/cu/Desktop/a\nPASS", "/home/cu/Documents/**")


# -- round three, class 1: what the permission bits and the content do not show.

def test_an_acl_that_leaves_the_mode_bits_alone_is_a_change(tmp_path):
    """setfacl gives another account read access; mode bits, owner, content stay (the group
    bits show the ACL's mask, which setfacl -n leaves be)."""
    import subprocess

    secret = tmp_path / "secret.txt"
    secret.write_text("private")
    secret.chmod(0o600)
    before = listed(tmp_path)
    past(before.started_ns)
    subprocess.run(["setfacl", "-m", "u:nobody:r", str(secret)], check=True)
    after = listed(tmp_path, since_ns=before.started_ns)
    (change,) = diff(before.entries, after.entries)
    assert change.path == str(secret) and "extended attributes changed: ACL" in change.detail, change


def test_a_user_attribute_is_a_change_and_its_value_counts(tmp_path):
    import os

    tagged = tmp_path / "tagged.txt"
    tagged.write_text("x")
    os.setxattr(tagged, "user.verdict", b"fail")
    before = listed(tmp_path)
    past(before.started_ns)
    assert before.entries[str(tagged)].xattrs == (("user.verdict", hashlib.sha256(b"fail").hexdigest()),)
    os.setxattr(tagged, "user.verdict", b"pass")
    after = listed(tmp_path, since_ns=before.started_ns)
    assert [str(c) for c in diff(before.entries, after.entries)] == [
        f"{tagged} (modified: extended attributes changed: user.verdict)"]


def test_a_file_written_and_put_back_is_a_change_by_its_ctime(tmp_path):
    """Same content, mode, owner and attributes after: only the kernel's ctime tells."""
    kept = tmp_path / "kept.txt"
    kept.write_text("same")
    before = listed(tmp_path)
    past(before.started_ns)
    kept.write_text("other")
    kept.write_text("same")
    after = listed(tmp_path, since_ns=before.started_ns)
    assert [str(c) for c in diff(before.entries, after.entries)] == [f"{kept} (modified: ctime or inode changed)"]


def test_a_folders_own_ctime_is_not_a_change_its_entries_are():
    """Files made and removed in a folder move its ctime; only the entries count."""
    folder = Entry("d", 4096, "", 1.0, mode=0o755, owner=(1000, 1000), ctime_ns=1, inode=7, xattrs=())
    assert what_changed(folder, replace(folder, ctime_ns=2, mtime=2.0)) is None
    assert what_changed(folder, replace(folder, xattrs=(("system.posix_acl_default", "ab" * 32),))) \
        == "extended attributes changed: default ACL"
