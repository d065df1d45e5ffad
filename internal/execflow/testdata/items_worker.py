"""A worker program of TestPythonProgram, with python/poolrun.py.

It holds the items "first" and "second", and logs to $PROG_LOG: "start
PID", "build PID NAME", "free PID NAME", "req PID ARGS", "end PID". A
request's args are an item's name, then optionally "die-once": the
program kills itself with SIGKILL in the middle of the request, unless
the file died exists (which it then makes).
"""

import os
import signal
import sys

import poolrun

log = open(os.environ["PROG_LOG"], "a", buffering=1)
pid = os.getpid()


def held(name):
    def build():
        log.write("build %d %s\n" % (pid, name))
        return name

    def cleanup(value):
        log.write("free %d %s\n" % (pid, value))

    return poolrun.item(name, build, cleanup)


items = {name: held(name) for name in ("first", "second")}


def handle(args):
    log.write("req %d %s\n" % (pid, " ".join(args)))
    items[args[0]].get()
    if args[1:] == ["die-once"] and not os.path.exists("died"):
        open("died", "w").close()
        os.kill(pid, signal.SIGKILL)
    print("done", args[0])
    return 0


log.write("start %d\n" % pid)
poolrun.serve(handle)
log.write("end %d\n" % pid)
sys.exit(0)
