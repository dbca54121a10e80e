#!/bin/sh
# Makes a fresh Debian/Ubuntu host ready for cu-run: system packages, the libvirt
# daemons, and a virtualenv (.venv) with cu-run installed. Safe to run again; fast
# when everything is there. Run as root (the image build uses mmdebstrap --mode=root).
#   setup-host.sh                 cu-run itself: runs, validate, vm up, mcp, reports
#   setup-host.sh --extras a,b    and its extras: cluster (Ray), live (websockify), inspect (inspect_ai)
#   setup-host.sh --test          and all that the tests need (every extra, pytest, ruff, mypy)
set -eu
cd "$(dirname "$0")/.."

extras=""
while [ $# -gt 0 ]; do
    case $1 in
        --test) extras="test,inspect,cluster,live" ;;
        --extras) [ $# -ge 2 ] || { echo "setup-host.sh: --extras needs a list, e.g. --extras cluster" >&2; exit 2; }
                  extras="$2"; shift ;;
        *) echo "setup-host.sh: unknown option $1 (use --test, or --extras cluster,live,inspect)" >&2; exit 2 ;;
    esac
    shift
done

# packer, ovmf and xorriso check the Windows build;
# ffmpeg encodes screen recordings (run --record); novnc is the live view's full-size screen (--live);
# bubblewrap is the sandbox that scores on the host: an imported benchmark's metrics (docs/benchmarks.md), a disk-scored task's verify.py (docs/tasks.md);
# acl's setfacl makes the ACL a write-set test must see; xvfb is the X server the X sweep is tested on;
# faketime's libfaketime gives host-side scoring a task's frozen clock (docs/network.md);
# p7zip-full's 7z reads a Windows ISO's UDF tree, where Microsoft keeps install.wim (docs/windows.md).
packages="qemu-system-x86 qemu-utils libvirt-daemon-system libvirt-clients libvirt-dev pkg-config
gcc python3-dev python3-venv mmdebstrap e2fsprogs openssh-client packer ovmf xorriso ffmpeg novnc
bubblewrap grub-efi-amd64-bin mtools acl xvfb faketime p7zip-full"
# The tests master a stand-in Windows ISO as Microsoft does (the files in UDF only, a real WIM) with
# tools other than the 7-Zip that reads it: genisoimage and wimlib. shellcheck reads every sh
# program the runner sends to a guest, and the image's build scripts (tests/unit/test_guest_programs.py).
# chromium renders report.html and Inspect's viewer in tests (cu-run itself needs no browser here).
case ",$extras," in *,test,*) packages="$packages genisoimage wimtools shellcheck chromium" ;; esac

if [ "$(id -u)" -ne 0 ]; then
    echo "setup-host.sh: run as root (sudo $0): it installs packages and starts libvirtd" >&2
    exit 1
fi

missing=""
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in $packages; do
    # Ubuntu calls Debian's chromium chromium-browser.
    installed "$p" || { [ "$p" = chromium ] && installed chromium-browser; } || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "== installing:$missing"
    apt-get update -qq
    case "$missing " in
        *" chromium "*) apt-cache show chromium >/dev/null 2>&1 ||
                            missing=$(printf '%s ' "$missing" | sed 's/ chromium / chromium-browser /') ;;
    esac
    # shellcheck disable=SC2086 # one word per package
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

# Without udev (containers, CI) /dev/kvm stays root-only; libvirt then finds KVM
# "gone" for its QEMU user and re-probes QEMU on every domain start (~60 s each).
if [ -c /dev/kvm ] && getent group kvm >/dev/null; then
    chgrp kvm /dev/kvm && chmod 0660 /dev/kvm
fi

# libvirtd and virtlogd: through systemd when it runs, by hand otherwise (containers, CI).
start_daemon() {
    name=$1 socket=$2
    [ -S "$socket" ] && pgrep -x "$name" >/dev/null && return 0
    if [ "$(systemctl is-system-running 2>/dev/null || true)" != offline ] && command -v systemctl >/dev/null \
        && systemctl start "$name" 2>/dev/null; then
        :
    else
        "$name" -d
    fi
    for _ in $(seq 50); do [ -S "$socket" ] && return 0; sleep 0.1; done
    echo "setup-host.sh: $name did not come up (no $socket)" >&2
    exit 1
}
start_daemon virtlogd /run/libvirt/virtlogd-sock
start_daemon libvirtd /run/libvirt/libvirt-sock

# One marker per set of extras: asking for more extras installs them; asking for fewer keeps what is there.
marker=".venv/.installed${extras:+-$(echo "$extras" | tr ',' '-')}"
# -nt is not POSIX, but dash and every sh Debian and Ubuntu ship have it.
# shellcheck disable=SC3013
if [ ! -x .venv/bin/cu-run ] || [ ! -f "$marker" ] || [ pyproject.toml -nt "$marker" ]; then
    echo "== virtualenv .venv${extras:+ (extras: $extras)}"
    python3 -m venv .venv
    .venv/bin/pip install -q --upgrade pip
    # setuptools takes the data folders (images/, tasks/) carried as package data for packages it was
    # not told of, and says so at length for each; they are data, never imported.
    PYTHONWARNINGS="ignore::UserWarning" .venv/bin/pip install -q -e ".${extras:+[$extras]}"
    touch "$marker"
fi

# The tests score imported benchmark tasks with desktop-env's metrics: their venv (about 750 MiB
# from PyPI, once) goes in the tests' own cache, made here so no test needs the network.
if [ "$extras" = "test,inspect,cluster,live" ]; then
    .venv/bin/cu-run scoring env --cache-dir "${CU_RUN_TEST_HOME:-$HOME/.cache/cu-run-tests}" >/dev/null
fi

# The recording proxy is mitmproxy in a venv of its own (runner/network/proxy.py): a run makes it
# at first use; the tests' copy is made here, so no test needs the network.
if [ "$extras" = "test,inspect,cluster,live" ]; then
    .venv/bin/python -c 'import sys; from pathlib import Path; from runner.network.proxy import proxy_env
proxy_env(Path(sys.argv[1]), say=lambda line: print("==", line))' "${CU_RUN_TEST_HOME:-$HOME/.cache/cu-run-tests}"
fi

# The e2e tests run the real Claude Code and Codex CLIs against a fake model on loopback
# (tests/fake_model.py): pinned releases from npm, their native binaries, into the tests' cache.
# --ignore-scripts: the binaries come as optional dependencies; nothing needs to run at install.
if [ "$extras" = "test,inspect,cluster,live" ]; then
    clis="${CU_RUN_TEST_HOME:-$HOME/.cache/cu-run-tests}/agent-clis"
    wanted="@anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0"
    if [ "$(cat "$clis/.installed" 2>/dev/null)" != "$wanted" ]; then
        command -v npm >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
        echo "== agent CLIs for the tests: $wanted"
        rm -rf "$clis" && mkdir -p "$clis"
        # shellcheck disable=SC2086 # one word per package
        npm install --prefix "$clis" --ignore-scripts --no-audit --no-fund --loglevel=error $wanted >/dev/null
        echo "$wanted" > "$clis/.installed"
    fi
fi
