"""The program's side of poolrun's persistent workers, in standard-library Python.

A persistent worker is a long-lived program that answers poolrun's requests
one at a time over its standard input and output (docs/WORKERS.md), and may
hold items in memory, each freed once the pool's window stops listing its
key (docs/WINDOW.md). This one file is that side for Python 3.8 or later:
copy it beside your program, or put its folder on PYTHONPATH.

    import poolrun

    model = poolrun.item("model", build=lambda: load_model("models/big.bin"),
                         cleanup=lambda m: m.close())

    def handle(args):
        m = model.get()              # built on first use, then memoised
        print(m.score(args[1]))      # printed output becomes the response's output
        return 0                     # the exit code; an exception gives 1 and its traceback

    poolrun.serve(handle)

The module exports four names: item and Item (a value the program holds),
serve (the request loop), and Window (a reader of the pool's window, which
serve opens by itself).
"""

import contextlib
import io
import json
import mmap
import os
import re
import select
import struct
import sys
import threading
import time
import traceback

__all__ = ["Item", "Window", "item", "serve"]

# The window's layout (docs/WINDOW.md; shm/layout.go in the Go code).
MAGIC = 0x576E75726C6F6F70  # the bytes "poolrunW" read as a little-endian word
LAYOUT_VERSION = 1
HEADER_SIZE = 4096  # the slots start here
MAX_CAPACITY = 1 << 24  # the largest capacity a header may claim (shm.Open's bound)

_OFF_SEQ = 24
_OFF_COUNT = 32  # count, then overflow at 40

# Every field is a 64-bit word in the machine's byte order, as the writer
# stores them: the formats are native ("@"), and a run of Q's has no padding.
_WORD = struct.Struct("@Q")
_HEADER = struct.Struct("@3Q")  # magic, version, capacity
_COUNT_OVERFLOW = struct.Struct("@2Q")

#: How long Window.read retries before it gives up on a consistent read and
#: answers "keep everything" (seconds).
STALL_TIMEOUT = 1.0

#: How often serve looks at the window while no request is waiting (seconds).
IDLE_INTERVAL = 0.1

_KEY_RE = re.compile(r"[0-9a-f]{16}\Z")


def _log(message):
    """Writes one line to standard error, the program's log."""
    err = sys.stderr
    if err is not None:
        print("poolrun.py: " + message, file=err, flush=True)


def _mapping_size(capacity):
    """The size of the file of a window of the given capacity: the header
    page and the slots, rounded up to whole pages."""
    page = mmap.PAGESIZE
    n = HEADER_SIZE + 8 * capacity
    return (n + page - 1) // page * page


class Window:
    """A read-only view of the pool's window: the set of item keys still needed.

    Window(fd) maps the window open on descriptor fd (by default the one
    that POOLRUN_WINDOW_FD names) read-only and checks its header field by
    field, as shm.Open does: the magic number, then the layout version,
    then the capacity, then the file's size. A file that fails a check
    raises ValueError naming the field ("magic", "version", "capacity",
    "size"); a missing or malformed POOLRUN_WINDOW_FD raises ValueError
    naming the variable; a descriptor that is not open raises OSError.
    The descriptor is not closed, and may be closed once the Window exists
    (the mapping holds the file).

    Attributes: capacity (the number of key slots), size (the file's size),
    stall_timeout (seconds, see read), retries (the number of times read
    had to read again because a publish was under way) and stalls (the
    number of reads that gave up).

    A Window is meant for one thread; it holds no lock.
    """

    def __init__(self, fd=None, stall_timeout=STALL_TIMEOUT):
        if fd is None:
            value = os.environ.get("POOLRUN_WINDOW_FD")
            if value is None:
                raise ValueError("poolrun: POOLRUN_WINDOW_FD is not set: poolrun gave this program no window")
            try:
                fd = int(value)
            except ValueError:
                raise ValueError("poolrun: POOLRUN_WINDOW_FD is %r, not a descriptor number" % value) from None
        where = "window on descriptor %d" % fd
        size = os.fstat(fd).st_size
        if size < HEADER_SIZE:
            raise ValueError("poolrun: %s: size %d is smaller than the %d-byte header" % (where, size, HEADER_SIZE))
        m = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        try:
            magic, version, capacity = _HEADER.unpack_from(m, 0)
            if magic != MAGIC:
                raise ValueError("poolrun: %s: magic is %#x, want %#x" % (where, magic, MAGIC))
            if version != LAYOUT_VERSION:
                raise ValueError(
                    "poolrun: %s: layout version is %d, poolrun.py reads version %d" % (where, version, LAYOUT_VERSION)
                )
            if capacity == 0 or capacity > MAX_CAPACITY:
                raise ValueError("poolrun: %s: capacity is %d, want 1 to %d" % (where, capacity, MAX_CAPACITY))
            want = _mapping_size(capacity)
            if size != want:
                raise ValueError(
                    "poolrun: %s: size is %d bytes, want %d for capacity %d" % (where, size, want, capacity)
                )
        except BaseException:
            m.close()
            raise
        self._m = m
        self.capacity = capacity
        self.size = size
        self.stall_timeout = stall_timeout
        self.retries = 0
        self.stalls = 0
        self._slots = struct.Struct("@0Q")

    def gen(self):
        """Returns the window's sequence as it is now, raw: even when no
        publish is under way, odd during one. It grows with every publish
        that changes the set, so a reader that saw the same value last time
        knows nothing changed. It costs one load and returns 0 after close.
        """
        m = self._m
        if m is None:
            return 0
        return _WORD.unpack_from(m, _OFF_SEQ)[0]

    def read(self):
        """Returns (gen, keys): the window's set as one published whole.

        keys is a frozenset of ints, or None when every key must be taken
        as listed: the overflow flag is set (the set had more keys than the
        window has slots), or no consistent read came within stall_timeout
        seconds (a writer that stalls or publishes without pause). gen is
        the sequence the set was read at (even); after a timeout it is the
        last sequence seen, which may be odd.

        The read is the seqlock's: load the sequence; if it is odd, retry;
        load the count, the overflow flag and count slots; load the
        sequence again; retry unless it is unchanged. Raises ValueError
        after close, or when a consistent read shows a count above the
        capacity (the file is not a window).
        """
        m = self._m
        if m is None:
            raise ValueError("poolrun: window is closed")
        seq = _WORD.unpack_from
        capacity = self.capacity
        deadline = None
        spins = 0
        while True:
            (s1,) = seq(m, _OFF_SEQ)
            if not s1 & 1:
                count, overflow = _COUNT_OVERFLOW.unpack_from(m, _OFF_COUNT)
                keys = ()
                if not overflow and 0 < count <= capacity:
                    slots = self._slots
                    if slots.size != 8 * count:
                        slots = self._slots = struct.Struct("@%dQ" % count)
                    keys = slots.unpack_from(m, HEADER_SIZE)
                if seq(m, _OFF_SEQ)[0] == s1:
                    if count > capacity:
                        raise ValueError("poolrun: window: count %d exceeds capacity %d" % (count, capacity))
                    if overflow:
                        return s1, None
                    return s1, frozenset(keys)
            # A publish is under way, or ended while we read: spin briefly,
            # then sleep a little (releasing the interpreter to other
            # threads) until the deadline.
            self.retries += 1
            spins += 1
            if spins < 64:
                continue
            now = time.monotonic()
            if deadline is None:
                deadline = now + self.stall_timeout
            elif now >= deadline:
                self.stalls += 1
                return s1, None
            time.sleep(0.00005)

    def close(self):
        """Unmaps the window. Closing twice is harmless; read then raises
        ValueError and gen returns 0."""
        m, self._m = self._m, None
        if m is not None:
            m.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self._m is None else "capacity %d" % self.capacity
        return "<poolrun.Window %s>" % state


# The items of this program, by name (item adds them; serve frees them).
_registry = {}
_registry_lock = threading.Lock()
_builds = 0  # the number of builds so far: serve reads the window again when it moves
_serving = False  # serve is running: an item without a key says so when built
_keys_cache = (None, {})  # (POOLRUN_PROGRAM_ITEMS as parsed, its map of name to key)


def _item_keys():
    """Returns POOLRUN_PROGRAM_ITEMS as a dict of name to key. An entry that is
    not name=KEY, with KEY 16 lower-case hexadecimal digits and not 0, is
    reported on standard error (once) and left out."""
    global _keys_cache
    value = os.environ.get("POOLRUN_PROGRAM_ITEMS", "")
    if _keys_cache[0] == value:
        return _keys_cache[1]
    keys = {}
    for entry in value.split(","):
        if not entry:
            continue
        name, sep, hexkey = entry.partition("=")
        if not sep or not name or not _KEY_RE.match(hexkey) or int(hexkey, 16) == 0:
            _log("POOLRUN_PROGRAM_ITEMS: %r is not name=KEY with KEY 16 lower-case hexadecimal digits; ignored" % entry)
            continue
        keys[name] = int(hexkey, 16)
    _keys_cache = (value, keys)
    return keys


class Item:
    """A value the program holds in memory, built on first use.

    Make one with item(). Attributes: name, and key (the item's window key
    from POOLRUN_PROGRAM_ITEMS, or None when the variable does not list the
    name: serve then never frees the item before the program ends).
    get and free are safe to call from several threads.
    """

    def __init__(self, name, build, cleanup, key):
        self.name = name
        self.key = key
        self._build = build
        self._cleanup = cleanup
        self._lock = threading.Lock()
        self._has = False
        self._value = None
        self._told = False

    @property
    def built(self):
        """Whether the item holds a value (built and not freed since)."""
        return self._has

    def get(self):
        """Returns the item's value, calling build() first if it holds none.

        An exception from build propagates and nothing is held, so the next
        get builds again.
        """
        global _builds
        with self._lock:
            if not self._has:
                if _serving and self.key is None and not self._told:
                    self._told = True
                    _log(
                        "item %r is not in POOLRUN_PROGRAM_ITEMS: the window cannot free it, "
                        "so it is kept until the program ends" % self.name
                    )
                value = self._build()
                self._value, self._has = value, True
                _builds += 1
            return self._value

    def free(self):
        """Forgets the item's value and calls cleanup(value) on it, if it
        holds one and has a cleanup. Returns whether it held a value. An
        exception from cleanup propagates; the value is forgotten anyway.
        """
        with self._lock:
            if not self._has:
                return False
            value, self._value, self._has = self._value, None, False
        if self._cleanup is not None:
            self._cleanup(value)
        return True

    def __repr__(self):
        key = "no key" if self.key is None else "key %016x" % self.key
        return "<poolrun.Item %r, %s, %s>" % (self.name, key, "built" if self._has else "not built")


def item(name, build, cleanup=None):
    """Defines the item called name and returns its Item.

    build() makes the value, on the first get; cleanup(value), if given,
    releases it when serve frees the item. name is the item's name in the
    workflow (`items: {name: {worker: ...}}`); its window key comes from
    POOLRUN_PROGRAM_ITEMS, read now. An item whose name that variable does not
    list is never freed by the window, only when serve ends. Defining a
    name twice raises ValueError.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("poolrun: item: the name must be a non-empty string, not %r" % (name,))
    if not callable(build):
        raise TypeError("poolrun: item %r: build is not callable" % name)
    if cleanup is not None and not callable(cleanup):
        raise TypeError("poolrun: item %r: cleanup is not callable" % name)
    it = Item(name, build, cleanup, _item_keys().get(name))
    with _registry_lock:
        if name in _registry:
            raise ValueError("poolrun: item %r is defined twice" % name)
        _registry[name] = it
    return it


def _free(it):
    """Frees it; a cleanup that raises is reported on standard error."""
    try:
        it.free()
    except Exception:
        _log("cleanup of item %r failed; the item is freed anyway:\n%s" % (it.name, traceback.format_exc().rstrip()))


def _items():
    with _registry_lock:
        return list(_registry.values())


class _Requests:
    """The lines of the request stream. With a descriptor, next waits at
    most timeout seconds; without one (an in-memory stream), it reads a
    line at once."""

    def __init__(self, f):
        self._f = f
        try:
            self._fd = f.fileno()
        except (AttributeError, OSError, ValueError):
            self._fd = None
        self._buf = bytearray()
        self._eof = False

    def next(self, timeout):
        """Returns the next line, with its newline; b"" at the end of input;
        None when timeout seconds passed without a whole line."""
        if self._fd is None:
            return self._f.readline()
        while True:
            i = self._buf.find(b"\n")
            if i >= 0:
                line = bytes(self._buf[: i + 1])
                del self._buf[: i + 1]
                return line
            if self._eof:
                line = bytes(self._buf)  # a last line without a newline, then b""
                self._buf.clear()
                return line
            ready, _, _ = select.select([self._fd], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(self._fd, 1 << 16)
            if chunk:
                self._buf += chunk
            else:
                self._eof = True


@contextlib.contextmanager
def _protocol_streams(stdin, stdout):
    """Yields the binary streams of the protocol. The program's own
    standard input and output, when stdin or stdout is None, are moved to
    private descriptors for the duration (which child processes do not
    inherit), and descriptor 0 is pointed at /dev/null and descriptor 1 at
    standard error: so that neither a child process nor C code can read a
    request or write into the responses (it writes to the log instead)."""
    restore = []  # (private descriptor, the one it was, its stream)
    try:
        if stdin is None:
            fd = os.dup(0)
            stdin = os.fdopen(fd, "rb", buffering=0, closefd=False)
            restore.append((fd, 0, stdin))
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
        if stdout is None:
            if sys.stdout is not None:
                sys.stdout.flush()
            fd = os.dup(1)
            stdout = os.fdopen(fd, "wb", closefd=False)
            restore.append((fd, 1, stdout))
            os.dup2(2, 1)
        yield stdin, stdout
    finally:
        for fd, target, stream in reversed(restore):
            with contextlib.suppress(OSError, ValueError):
                if target == 1 and sys.stdout is not None:
                    sys.stdout.flush()  # what was printed meanwhile goes to the log
                stream.close()  # flushes; the descriptor stays open
            os.dup2(fd, target)
            os.close(fd)


def _call(handler, args):
    """Runs handler(args) with sys.stdout captured; returns (exit code, output)."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            code = handler(args)
    except SystemExit as e:  # sys.exit(n) in a handler ends the request, not the program
        code = e.code
        if code is not None and not isinstance(code, int):
            out.write("%s\n" % (code,))
            code = 1
    except Exception as e:
        tb = e.__traceback__.tb_next or e.__traceback__  # from the handler's frame on
        out.write("".join(traceback.format_exception(type(e), e, tb)))
        return 1, out.getvalue()
    if code is None:
        return 0, out.getvalue()
    if not isinstance(code, int):
        out.write("poolrun.py: the handler returned %r, not an exit code\n" % (code,))
        return 1, out.getvalue()
    return int(code), out.getvalue()


def _parse(line):
    """Returns (arguments, needs, requestId) of a request line, or raises
    ValueError with the reason it is not a request."""
    try:
        req = json.loads(line)
    except ValueError as e:
        raise ValueError("request is not JSON: %s: %s" % (e, _quote(line))) from None
    if not isinstance(req, dict):
        raise ValueError("request is not a JSON object: %s" % _quote(line))
    args = req.get("arguments", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ValueError("request's arguments are not a list of strings: %s" % _quote(line))
    needs = ()
    ours = req.get("poolrun")
    if isinstance(ours, dict) and isinstance(ours.get("needs"), list):
        needs = frozenset(n for n in ours["needs"] if isinstance(n, str))
    return args, needs, req.get("requestId", 0)


def _quote(line, limit=200):
    text = line.decode("utf-8", "replace").rstrip("\r\n")
    if len(text) > limit:
        text = text[:limit] + "..."
    return repr(text)


def _respond(out, code, output, request_id):
    line = json.dumps({"exitCode": code, "output": output, "requestId": request_id})
    out.write(line.encode("utf-8") + b"\n")
    out.flush()


class _Sweeper:
    """Frees the items the window no longer lists (see serve)."""

    def __init__(self, window):
        self.window = window
        self.gen = None  # the generation of the last read
        self.builds = -1  # _builds at the last read
        self.told = False  # a failed read was reported

    def due(self):
        """Whether the window moved, or an item was built, since the last read."""
        return self.window is not None and (self.window.gen() != self.gen or _builds != self.builds)

    def sweep(self, needs=()):
        """Reads the window and frees every built item with a key it does not
        list, except those named in needs."""
        if self.window is None:
            return
        self.builds = _builds
        try:
            self.gen, keys = self.window.read()
        except ValueError as e:
            if not self.told:
                self.told = True
                _log("%s; items are kept until the window reads again" % e)
            return
        if keys is None:
            return  # overflowed or stalled: everything is listed
        for it in _items():
            if it.built and it.key is not None and it.key not in keys and it.name not in needs:
                _free(it)


def serve(handler, stdin=None, stdout=None, window=None):
    """Answers poolrun's requests until the end of input, then returns.

    Each request is a JSON object on one line (docs/WORKERS.md). For each:

    1. Read the window and free (cleanup, then forget) every built item
       whose key it no longer lists, except the items the request's
       poolrun.needs names. An overflowed window, or one that gives no
       consistent read, frees nothing.
    2. Call handler(arguments) with sys.stdout captured (sys.stdout is a
       StringIO for the call, for every thread). It returns the exit
       code; None means 0. sys.exit(n) in the handler ends the request
       with exit code n (sys.exit("message"): 1, and the message in the
       output), not the program. Another exception gives exit code 1,
       with its traceback after what the handler printed.
    3. Write {"exitCode": N, "output": printed text, "requestId": the
       request's, or 0} as one line, and flush.

    A line that is not a request (not JSON, not an object, arguments not a
    list of strings) is reported on standard error and answered with exit
    code 2 and the reason in the output. While no request is waiting,
    serve looks at the window about every IDLE_INTERVAL seconds and frees
    items as in step 1 whenever its generation moved (or an item was built)
    since its last read. At the end of input, and if serve ends otherwise
    (an exception, KeyboardInterrupt), every built item is freed. A cleanup
    that raises is reported on standard error; the item is freed anyway.
    Items without a key (see item) are freed only then.

    stdin and stdout are binary streams, by default the program's standard
    input and output. In that case serve moves them to private descriptors
    while it runs and points descriptor 0 at /dev/null and descriptor 1 at
    standard error, so that a stray print outside a handler, a child
    process or C code writes to the log instead of into the protocol.
    window is a Window; by default serve opens the one of
    POOLRUN_WINDOW_FD, and runs without one (freeing items only at the
    end) when that variable is not set or the window cannot be opened,
    which it reports on standard error.

    serve does not read sys.argv: the --persistent_worker word poolrun
    appends is the program's to ignore.
    """
    global _serving
    opened = False
    if window is None and os.environ.get("POOLRUN_WINDOW_FD"):
        try:
            window = Window()
            opened = True
        except (ValueError, OSError) as e:
            _log("%s; items are kept until the program ends" % e)
    elif window is None and any(it.key is not None for it in _items()):
        _log("POOLRUN_WINDOW_FD is not set: items are kept until the program ends")
    sweeper = _Sweeper(window)
    _serving = True
    try:
        with _protocol_streams(stdin, stdout) as (inp, out):
            requests = _Requests(inp)
            while True:
                line = requests.next(IDLE_INTERVAL)
                if line is None:
                    if sweeper.due():
                        sweeper.sweep()
                    continue
                if not line:
                    return
                try:
                    args, needs, request_id = _parse(line)
                except ValueError as e:
                    _log(str(e))
                    _respond(out, 2, "poolrun.py: %s\n" % e, 0)
                    continue
                sweeper.sweep(needs)
                code, output = _call(handler, args)
                _respond(out, code, output, request_id)
    finally:
        _serving = False
        for it in _items():
            if it.built:
                _free(it)
        if opened:
            window.close()
