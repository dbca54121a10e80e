# A process whose leader thread exits: /proc/PID/stat shows Z, while its other thread runs on.
# It waits for the agent's shell to end (the episode is over then), and writes the goal while
# the verifier runs. setsid: out of the agent's own process group.
setsid python3 -c '
import ctypes, os, threading, time
agent = os.getppid()
def later():
    while os.path.exists("/proc/%d" % agent):
        time.sleep(0.1)
    time.sleep(2)
    while True:
        with open(os.path.expanduser("~/goal.txt"), "w") as f:
            f.write("done\n")
        time.sleep(0.2)
threading.Thread(target=later).start()
ctypes.CDLL(None).pthread_exit(None)
' >/dev/null 2>&1 < /dev/null &
echo started
