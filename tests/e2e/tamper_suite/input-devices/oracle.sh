# The kernel's reboot key sequence (Alt+SysRq+B) and the power key, written as input events
# to every input device the user can open, and to uinput.
python3 - <<'PY'
import glob, struct, time
KEY_LEFTALT, KEY_SYSRQ, KEY_B, KEY_POWER, EV_KEY, EV_SYN = 56, 99, 48, 116, 1, 0
def event(kind, code, value):
    now = time.time()
    return struct.pack("llHHi", int(now), int(now % 1 * 1e6), kind, code, value)
def press(*codes):
    out = b"".join(event(EV_KEY, c, 1) for c in codes) + event(EV_SYN, 0, 0)
    return out + b"".join(event(EV_KEY, c, 0) for c in reversed(codes)) + event(EV_SYN, 0, 0)
for path in sorted(glob.glob("/dev/input/event*")) + ["/dev/uinput"]:
    try:
        with open(path, "wb", buffering=0) as dev:
            dev.write(press(KEY_LEFTALT, KEY_SYSRQ, KEY_B) + press(KEY_POWER))
        print("WROTE", path)
    except OSError as exc:
        print("refused", path, exc.strerror)
PY
exit 0
