"""Tests of poolrun.py: run `python3 -m unittest -v` in this folder.

The windows here are written in Python from the layout of docs/WINDOW.md,
with the numbers copied from that page rather than taken from poolrun.py,
so that the reader is held to the document. shm/python_test.go checks the
reader against windows that Go writes.
"""

import contextlib
import io
import json
import mmap
import os
import select
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

import poolrun

# docs/WINDOW.md
MAGIC = 0x576E75726C6F6F70
VERSION = 1
HEADER = 4096
OFF_SEQ, OFF_COUNT, OFF_OVERFLOW = 24, 32, 40
WORD = struct.Struct("@Q")  # native, as the Go writer: one 8-byte store per word

TIMEOUT = 10  # seconds: the bound on every wait of these tests


def window_size(capacity):
    page = mmap.PAGESIZE
    return (HEADER + 8 * capacity + page - 1) // page * page


class FakeWriter:
    """A window file written in Python: the pool's side, for the tests."""

    def __init__(self, test, capacity=8, magic=MAGIC, version=VERSION, size=None):
        fd, self.path = tempfile.mkstemp(prefix="poolrun-test-window-")
        test.addCleanup(os.unlink, self.path)
        self.capacity = capacity
        if size is None:
            size = window_size(capacity)
        os.ftruncate(fd, size)
        self.size = size
        self.m = None
        if size >= 24:
            self.m = mmap.mmap(fd, size)
            test.addCleanup(self.m.close)
            struct.pack_into("@3Q", self.m, 0, magic, version, capacity)
        os.close(fd)
        self.seq = 0

    def open_fd(self, test):
        """A read-only descriptor of the file, closed at the test's end."""
        fd = os.open(self.path, os.O_RDONLY)
        test.addCleanup(os.close, fd)
        return fd

    def reader(self, test, **kw):
        w = poolrun.Window(self.open_fd(test), **kw)
        test.addCleanup(w.close)
        return w

    def put(self, off, value):
        # A slice assignment is one memcpy of the 8 bytes. struct.pack_into
        # would not do here: it zeroes its destination before it writes, so
        # a concurrent reader could find a sequence of 0.
        self.m[off : off + 8] = WORD.pack(value)

    def begin(self):
        self.seq += 1
        self.put(OFF_SEQ, self.seq)

    def write(self, keys):
        """Writes the set's fields (between begin and end)."""
        keys = sorted(set(keys))
        if len(keys) > self.capacity:
            self.put(OFF_OVERFLOW, 1)
            self.put(OFF_COUNT, 0)
            return
        for i, k in enumerate(keys):
            self.put(HEADER + 8 * i, k)
        self.put(OFF_COUNT, len(keys))
        self.put(OFF_OVERFLOW, 0)

    def end(self):
        self.seq += 1
        self.put(OFF_SEQ, self.seq)

    def publish(self, keys):
        """Publishes keys under the seqlock; returns the new generation."""
        self.begin()
        self.write(keys)
        self.end()
        return self.seq


class WindowTest(unittest.TestCase):
    def test_read(self):
        wr = FakeWriter(self, capacity=8)
        w = wr.reader(self)
        self.assertEqual(w.capacity, 8)
        self.assertEqual(w.read(), (0, frozenset()))
        self.assertEqual(w.gen(), 0)
        gen = wr.publish([9, 3, 5])
        self.assertEqual(w.read(), (gen, frozenset({3, 5, 9})))
        self.assertEqual(w.gen(), gen)
        gen = wr.publish([2 ** 64 - 1])  # the largest key
        self.assertEqual(w.read(), (gen, frozenset({2 ** 64 - 1})))
        gen = wr.publish(range(1, 9))  # a full window
        self.assertEqual(w.read(), (gen, frozenset(range(1, 9))))
        gen = wr.publish([])
        self.assertEqual(w.read(), (gen, frozenset()))
        self.assertEqual(w.retries, 0)

    def test_overflow(self):
        wr = FakeWriter(self, capacity=4)
        w = wr.reader(self)
        gen = wr.publish(range(1, 6))
        self.assertEqual(w.read(), (gen, None))
        gen = wr.publish([7])  # a set that fits clears the flag
        self.assertEqual(w.read(), (gen, frozenset({7})))

    def test_odd_sequence_retries(self):
        # The reader finds a publish under way, with garbage in the slots,
        # and must wait for its end: the writer finishes only once it has
        # seen the reader retry.
        wr = FakeWriter(self, capacity=8)
        wr.publish([1, 2])
        w = wr.reader(self)
        wr.begin()
        wr.write([99, 98, 97, 96, 95])

        def finish():
            deadline = time.monotonic() + TIMEOUT
            while w.retries == 0 and time.monotonic() < deadline:
                time.sleep(0.001)
            wr.write([4, 5, 6])
            wr.end()

        t = threading.Thread(target=finish)
        t.start()
        gen, keys = w.read()
        t.join(TIMEOUT)
        self.assertGreater(w.retries, 0)
        self.assertEqual((gen, keys), (4, frozenset({4, 5, 6})))
        self.assertEqual(w.stalls, 0)

    # WRITER publishes the sets of test_concurrent_writer to the window at
    # argv[1], one after the other, until its input ends. A publish follows
    # the last one at once, or after a pause of up to about 10 us, so that
    # the reader reads during publishes but is not starved of whole sets.
    WRITER = r"""
import mmap, os, select, struct, sys
HEADER, OFF_SEQ, OFF_COUNT, OFF_OVERFLOW = 4096, 24, 32, 40
word = struct.Struct("@Q")
sets = [sorted(s << 32 | i for i in range(1, n + 1)) for s, n in ((1, 3), (2, 50), (3, 17))]
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, os.fstat(fd).st_size)
seq = word.unpack_from(m, OFF_SEQ)[0]
i = 0

def put(off, value):  # as FakeWriter.put
    m[off : off + 8] = word.pack(value)

while True:
    keys = sets[i % 3]
    seq += 1
    put(OFF_SEQ, seq)
    for j, k in enumerate(keys):
        put(HEADER + 8 * j, k)
    put(OFF_COUNT, len(keys))
    seq += 1
    put(OFF_SEQ, seq)
    i += 1
    for _ in range(i % 4 * 100):
        pass
    if i == 1:
        print("ready", flush=True)
    if i % 16 == 0 and select.select([0], [], [], 0)[0]:
        break
"""

    def test_concurrent_writer(self):
        # A writer process publishes three sets of different lengths without
        # pause while this one reads: every read must be one whole set. Each
        # key names its set in its high bits, so a mixture shows.
        sets = [frozenset(s << 32 | i for i in range(1, n + 1)) for s, n in ((1, 3), (2, 50), (3, 17))]
        wr = FakeWriter(self, capacity=64)
        w = wr.reader(self, stall_timeout=TIMEOUT)
        p = subprocess.Popen(
            [sys.executable, "-c", self.WRITER, wr.path], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.addCleanup(p.wait, TIMEOUT)
        self.addCleanup(p.kill)
        self.addCleanup(p.stdout.close)
        self.assertEqual(p.stdout.readline(), b"ready\n")
        gens, last, reads = set(), 0, 0
        deadline = time.monotonic() + TIMEOUT
        try:
            while (reads < 2000 or len(gens) < 100) and time.monotonic() < deadline:
                reads += 1
                gen, keys = w.read()
                self.assertEqual(gen % 2, 0)
                self.assertGreaterEqual(gen, last)
                last = gen
                self.assertIn(keys, sets, "torn read at generation %d" % gen)
                gens.add(gen)
        finally:
            p.stdin.close()
        self.assertEqual(p.wait(TIMEOUT), 0)
        self.assertGreater(len(gens), 1, "the writer did not publish while the reader read")
        self.assertEqual(w.stalls, 0)

    def test_stalled_writer(self):
        wr = FakeWriter(self, capacity=8)
        wr.publish([1])
        w = wr.reader(self, stall_timeout=0.05)
        wr.begin()  # and never end
        start = time.monotonic()
        gen, keys = w.read()
        self.assertLess(time.monotonic() - start, TIMEOUT)
        self.assertIsNone(keys, "a stalled writer must keep everything")
        self.assertEqual(gen, wr.seq)
        self.assertEqual(w.gen(), wr.seq, "gen() returns the raw, odd sequence")
        self.assertEqual(w.stalls, 1)

    def test_count_above_capacity(self):
        wr = FakeWriter(self, capacity=4)
        w = wr.reader(self)
        wr.put(OFF_COUNT, 5)
        with self.assertRaisesRegex(ValueError, "count"):
            w.read()

    def test_open_refused(self):
        page = mmap.PAGESIZE
        tests = [
            ("empty file", dict(size=0), "size"),
            ("truncated header", dict(size=100), "size"),
            ("truncated slots", dict(capacity=1000, size=HEADER + 8), "size"),
            ("one page too many", dict(capacity=8, size=window_size(8) + page), "size"),
            ("wrong magic", dict(magic=0x646E697761746F6E), "magic"),
            ("next version", dict(version=VERSION + 1), "version"),
            ("version 0", dict(version=0), "version"),
            ("zero capacity", dict(capacity=0, size=window_size(8)), "capacity"),
            ("huge capacity", dict(capacity=1 << 40, size=window_size(8)), "capacity"),
            ("capacity larger than the file", dict(capacity=100000, size=window_size(8)), "size"),
        ]
        for name, kw, field in tests:
            with self.subTest(name):
                wr = FakeWriter(self, **kw)
                with self.assertRaisesRegex(ValueError, field):
                    poolrun.Window(wr.open_fd(self))

    def test_from_environment(self):
        wr = FakeWriter(self, capacity=8)
        wr.publish([42])
        fd = wr.open_fd(self)
        with mock.patch.dict(os.environ, {"POOLRUN_WINDOW_FD": str(fd)}):
            with poolrun.Window() as w:
                self.assertEqual(w.read()[1], frozenset({42}))
        with mock.patch.dict(os.environ, {"POOLRUN_WINDOW_FD": "three"}):
            with self.assertRaisesRegex(ValueError, "POOLRUN_WINDOW_FD"):
                poolrun.Window()
        env = dict(os.environ)
        env.pop("POOLRUN_WINDOW_FD", None)
        with mock.patch.dict(os.environ, env, clear=True):
            with self.assertRaisesRegex(ValueError, "POOLRUN_WINDOW_FD is not set"):
                poolrun.Window()

    def test_close(self):
        wr = FakeWriter(self, capacity=8)
        wr.publish([1])
        w = wr.reader(self)
        w.close()
        w.close()  # harmless
        self.assertEqual(w.gen(), 0)
        with self.assertRaisesRegex(ValueError, "closed"):
            w.read()


_names = iter(range(1 << 30))


class ItemsTestCase(unittest.TestCase):
    """A test that defines items: their names are its own, and it forgets
    them at its end, so that every serve sees the items of its test only."""

    def new_items(self, *names, keys=None, cleanup=None):
        """Defines items called names (made unique) whose builds return
        "NAME-value" and are noted in self.builds. keys maps some of the
        names to keys for POOLRUN_PROGRAM_ITEMS. The items' cleanup is given,
        or one that notes the value in self.cleaned and sets self.freed."""
        if not hasattr(self, "cleaned"):
            self.cleaned, self.builds, self.freed = [], [], threading.Event()

        def note(value):
            self.cleaned.append(value)
            self.freed.set()

        n = next(_names)
        full = {name: "%s%d" % (name, n) for name in names}
        env = ",".join("%s=%016x" % (full[name], key) for name, key in (keys or {}).items())
        items = []
        with mock.patch.dict(os.environ, {"POOLRUN_PROGRAM_ITEMS": env}):
            for name in names:
                items.append(
                    poolrun.item(
                        full[name],
                        build=lambda name=name: self.builds.append(name) or name + "-value",
                        cleanup=cleanup or note,
                    )
                )
                self.addCleanup(poolrun._registry.pop, full[name], None)
        return items


class ItemTest(ItemsTestCase):
    def test_get_memoises(self):
        (a,) = self.new_items("a")
        self.assertFalse(a.built)
        self.assertEqual(a.get(), "a-value")
        self.assertEqual(a.get(), "a-value")
        self.assertTrue(a.built)
        self.assertEqual(self.builds, ["a"])
        self.assertTrue(a.free())
        self.assertFalse(a.built)
        self.assertEqual(self.cleaned, ["a-value"])
        self.assertFalse(a.free(), "a second free has nothing to free")
        self.assertEqual(a.get(), "a-value")
        self.assertEqual(self.builds, ["a", "a"])

    def test_failed_build(self):
        calls = []

        def build():
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("no model yet")
            return "model"

        name = "flaky%d" % next(_names)
        it = poolrun.item(name, build)
        self.addCleanup(poolrun._registry.pop, name, None)
        with self.assertRaisesRegex(RuntimeError, "no model yet"):
            it.get()
        self.assertFalse(it.built)
        self.assertEqual(it.get(), "model")

    def test_keys(self):
        a, b = self.new_items("a", "b", keys={"a": 0x8C3F0E1D2A4B5C6D})
        self.assertEqual(a.key, 0x8C3F0E1D2A4B5C6D)
        self.assertIsNone(b.key)

    def test_malformed_keys(self):
        n = next(_names)
        env = "ok{n}=00000000000000ff,upper{n}=00000000000000FF,short{n}=ff,zero{n}=0000000000000000,{n}".format(n=n)
        err = io.StringIO()
        with mock.patch.dict(os.environ, {"POOLRUN_PROGRAM_ITEMS": env}), contextlib.redirect_stderr(err):
            for name in ("ok", "upper", "short", "zero"):
                it = poolrun.item("%s%d" % (name, n), lambda: None)
                self.addCleanup(poolrun._registry.pop, it.name, None)
                self.assertEqual(it.key, 0xFF if name == "ok" else None, name)
        self.assertEqual(err.getvalue().count("POOLRUN_PROGRAM_ITEMS"), 4, err.getvalue())

    def test_defined_twice(self):
        (a,) = self.new_items("a")
        with self.assertRaisesRegex(ValueError, "twice"):
            poolrun.item(a.name, lambda: None)


class Served:
    """serve running in a thread over pipes, and the test's ends of them."""

    def __init__(self, test, handler, window=None, idle=True):
        if not idle:
            # No looks at the window between requests: a test that changes
            # the window between two requests then knows that the second
            # request's look is the one that sees the change.
            patch = mock.patch.object(poolrun, "IDLE_INTERVAL", 3600)
            patch.start()
            test.addCleanup(patch.stop)
        r, self._to = os.pipe()
        self._from, w = os.pipe()
        self.stdin = os.fdopen(r, "rb", buffering=0)
        self.stdout = os.fdopen(w, "wb")
        self._buf = b""
        self.error = None
        self.returned = threading.Event()
        self.stderr = io.StringIO()
        redirect = contextlib.redirect_stderr(self.stderr)
        redirect.__enter__()
        test.addCleanup(redirect.__exit__, None, None, None)
        self._thread = threading.Thread(target=self._serve, args=(handler, window), daemon=True)
        self._thread.start()
        test.addCleanup(self._cleanup)

    def _serve(self, handler, window):
        try:
            poolrun.serve(handler, stdin=self.stdin, stdout=self.stdout, window=window)
        except BaseException as e:  # close raises it
            self.error = e
        finally:
            self.stdin.close()
            self.stdout.close()
            self.returned.set()

    def send(self, line):
        os.write(self._to, line)

    def request(self, args=(), needs=None, request_id=None):
        """Sends a request and returns the response, as a dict."""
        req = {"arguments": list(args)}
        if request_id is not None:
            req["requestId"] = request_id
        if needs is not None:
            req["poolrun"] = {"job": "j", "attempt": 1, "needs": list(needs)}
        self.send(json.dumps(req).encode() + b"\n")
        return self.response()

    def response(self):
        """Reads one response line, within TIMEOUT seconds."""
        deadline = time.monotonic() + TIMEOUT
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._from], [], [], max(left, 0))
            if not ready:
                raise AssertionError("no response within %d s" % TIMEOUT)
            chunk = os.read(self._from, 1 << 16)
            if not chunk:
                raise AssertionError("serve ended (%r) before it responded; got %r" % (self.error, self._buf))
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def end_input(self):
        """Closes serve's input."""
        if self._to is not None:
            os.close(self._to)
            self._to = None

    def close(self):
        """Ends the input and waits for serve to return."""
        self.end_input()
        if not self.returned.wait(TIMEOUT):
            raise AssertionError("serve did not return at the end of its input")
        if self.error is not None:
            raise self.error
        rest = os.read(self._from, 1 << 16)
        if self._buf or rest:
            raise AssertionError("output after the last response: %r" % (self._buf + rest))

    def _cleanup(self):
        if self._to is not None:
            os.close(self._to)
        self._thread.join(TIMEOUT)
        os.close(self._from)


class ServeTest(ItemsTestCase):
    def test_request(self):
        seen = []

        def handler(args):
            seen.append(args)
            print("scored", args[1])
            print("to the log", file=sys.stderr)
            return 3

        s = Served(self, handler)
        resp = s.request(["--input", "in/1.txt"])
        self.assertEqual(resp, {"exitCode": 3, "output": "scored in/1.txt\n", "requestId": 0})
        resp = s.request([], request_id=7)
        self.assertEqual(resp["requestId"], 7)
        s.close()
        self.assertEqual(seen, [["--input", "in/1.txt"], []])
        self.assertIn("to the log", s.stderr.getvalue())

    def test_none_is_success(self):
        s = Served(self, lambda args: None)
        self.assertEqual(s.request(["x"]), {"exitCode": 0, "output": "", "requestId": 0})
        s.close()

    def test_exception(self):
        def handler(args):
            print("half way")
            return 1 // 0

        s = Served(self, handler)
        resp = s.request(["x"])
        self.assertEqual(resp["exitCode"], 1)
        out = resp["output"]
        self.assertTrue(out.startswith("half way\nTraceback (most recent call last):\n"), out)
        self.assertIn("in handler", out)
        self.assertIn("ZeroDivisionError", out)
        self.assertNotIn("_call", out, "the traceback starts at the handler")
        # The program goes on.
        self.assertEqual(s.request(["y"])["exitCode"], 1)
        s.close()

    def test_sys_exit(self):
        codes = iter([sys.exit, lambda: sys.exit(4), lambda: sys.exit("bad input")])
        s = Served(self, lambda args: next(codes)())
        self.assertEqual(s.request()["exitCode"], 0)
        self.assertEqual(s.request()["exitCode"], 4)
        self.assertEqual(s.request(), {"exitCode": 1, "output": "bad input\n", "requestId": 0})
        s.close()

    def test_not_an_exit_code(self):
        s = Served(self, lambda args: "fine")
        resp = s.request()
        self.assertEqual(resp["exitCode"], 1)
        self.assertIn("'fine'", resp["output"])
        s.close()

    def test_bad_requests(self):
        s = Served(self, lambda args: print(args) or 0)
        for line, why in [
            (b"not json\n", "request is not JSON: "),
            (b"\xc3(\n", "request is not JSON: "),  # not UTF-8
            (b"[1, 2]\n", "request is not a JSON object: "),
            (b'{"arguments": "ab"}\n', "request's arguments are not a list of strings: "),
        ]:
            with self.subTest(line):
                s.send(line)
                resp = s.response()
                self.assertEqual(resp["exitCode"], 2)
                self.assertEqual(resp["requestId"], 0)
                self.assertTrue(resp["output"].startswith("poolrun.py: " + why), resp["output"])
        # Requests after bad ones are answered, Bazel's requests too.
        s.send(b'{"arguments": ["a"], "inputs": []}\n')
        self.assertEqual(s.response(), {"exitCode": 0, "output": "['a']\n", "requestId": 0})
        s.close()
        self.assertIn("poolrun.py: request is not JSON: ", s.stderr.getvalue())

    def test_requests_in_one_write(self):
        # Two requests and a last one without a newline, in one write.
        s = Served(self, lambda args: print(*args) or 0)
        s.send(b'{"arguments": ["1"]}\n{"arguments": ["2"]}\n{"arguments": ["3"]}')
        s.end_input()
        self.assertEqual([s.response()["output"] for _ in range(3)], ["1\n", "2\n", "3\n"])
        s.close()

    def test_items_freed(self):
        wr = FakeWriter(self, capacity=8)
        wr.publish([0xA, 0xB])
        a, b = self.new_items("a", "b", keys={"a": 0xA, "b": 0xB})
        state = []

        def handler(args):
            state.append((a.built, b.built))
            if args == ["build"]:
                a.get()
                b.get()

        s = Served(self, handler, window=wr.reader(self), idle=False)
        s.request(["build"], needs=[a.name, b.name])
        self.assertEqual((a.built, b.built), (True, True))
        s.request(["look"])  # both still listed
        self.assertEqual(state[-1], (True, True))

        wr.publish([])  # neither is listed: b goes, a is needed
        s.request(["look"], needs=[a.name])
        self.assertEqual(state[-1], (True, False))
        self.assertEqual(self.cleaned, ["b-value"])

        s.request(["look"])  # a goes now
        self.assertEqual(state[-1], (False, False))
        self.assertEqual(self.cleaned, ["b-value", "a-value"])
        s.close()
        self.assertEqual(self.cleaned, ["b-value", "a-value"], "nothing was left to free at the end")

    def test_overflow_frees_nothing(self):
        wr = FakeWriter(self, capacity=2)
        wr.publish([0xA])
        (a,) = self.new_items("a", keys={"a": 0xA})
        s = Served(self, lambda args: print(a.built) or a.get() and None, window=wr.reader(self), idle=False)
        self.assertEqual(s.request()["output"], "False\n")
        wr.publish([1, 2, 3])  # overflowed: every key counts as listed
        self.assertEqual(s.request()["output"], "True\n")
        self.assertEqual(self.cleaned, [])
        wr.publish([1])  # fits again, without a's key
        self.assertEqual(s.request()["output"], "False\n")
        self.assertEqual(self.cleaned, ["a-value"])
        s.close()

    def test_idle_free(self):
        # No request comes: serve reads the window on its own when the
        # generation moves, and frees the item within about 0.1 s.
        wr = FakeWriter(self, capacity=8)
        wr.publish([0xA])
        (a,) = self.new_items("a", keys={"a": 0xA})
        s = Served(self, lambda args: a.get() and None, window=wr.reader(self))
        s.request()
        self.assertTrue(a.built)
        wr.publish([0xC])
        self.assertTrue(self.freed.wait(TIMEOUT), "the item was not freed while serve was idle")
        self.assertFalse(a.built)
        s.close()
        self.assertEqual(self.cleaned, ["a-value"])

    def test_idle_after_unneeded_build(self):
        # A handler builds an item that its request did not name and that the
        # window does not list: serve frees it while idle although the
        # generation did not move.
        wr = FakeWriter(self, capacity=8)
        wr.publish([0xB])
        (a,) = self.new_items("a", keys={"a": 0xA})
        s = Served(self, lambda args: a.get() and None, window=wr.reader(self))
        s.request()
        self.assertTrue(self.freed.wait(TIMEOUT), "the item was not freed while serve was idle")
        s.close()

    def test_end_of_input_frees_all(self):
        wr = FakeWriter(self, capacity=8)
        wr.publish([0xA])
        a, b, c = self.new_items("a", "b", "c", keys={"a": 0xA})
        s = Served(self, lambda args: (a.get(), b.get()) and None, window=wr.reader(self))
        s.request()
        self.assertEqual(self.cleaned, [])
        s.close()
        self.assertEqual(sorted(self.cleaned), ["a-value", "b-value"])
        self.assertFalse(a.built or b.built or c.built)

    def test_item_without_key(self):
        wr = FakeWriter(self, capacity=8)
        (a,) = self.new_items("a")  # not in POOLRUN_PROGRAM_ITEMS
        s = Served(self, lambda args: a.get() and None, window=wr.reader(self), idle=False)
        s.request()
        wr.publish([0xB])
        s.request()
        self.assertTrue(a.built, "the window freed an item it has no key for")
        a.free()
        s.request()  # built again: no second message
        s.close()
        self.assertEqual(s.stderr.getvalue().count("is not in POOLRUN_PROGRAM_ITEMS"), 1, s.stderr.getvalue())

    def test_cleanup_raises(self):
        wr = FakeWriter(self, capacity=8)
        wr.publish([0xA])
        def cleanup(v):
            raise OSError("cannot close " + v)

        (a,) = self.new_items("a", keys={"a": 0xA}, cleanup=cleanup)
        s = Served(self, lambda args: print(a.built) or a.get() and None, window=wr.reader(self), idle=False)
        s.request()
        wr.publish([])
        self.assertEqual(s.request()["output"], "False\n", "the item is forgotten although its cleanup failed")
        s.close()
        err = s.stderr.getvalue()
        self.assertIn("cleanup of item %r failed" % a.name, err)
        self.assertIn("OSError: cannot close a-value", err)

    def test_in_memory_streams(self):
        # Streams without a descriptor: no idle looks, the same answers.
        out = io.BytesIO()
        inp = io.BytesIO(b'{"arguments": ["1"]}\n{"arguments": ["2"], "requestId": 5}\n')
        poolrun.serve(lambda args: print(args[0]) or int(args[0]), stdin=inp, stdout=out)
        lines = [json.loads(line) for line in out.getvalue().splitlines()]
        self.assertEqual(
            lines,
            [{"exitCode": 1, "output": "1\n", "requestId": 0}, {"exitCode": 2, "output": "2\n", "requestId": 5}],
        )


class ProgramTest(unittest.TestCase):
    """A real program, on its own standard input and output."""

    PROGRAM = r"""
import os, subprocess, sys
import poolrun

assert sys.argv[1:] == ["--persistent_worker"], sys.argv
model = poolrun.item("model", build=lambda: "the model", cleanup=lambda m: print("freed", m, file=sys.stderr))

def handle(args):
    print(model.get(), args)
    os.write(1, b"stray bytes on descriptor 1\n")
    subprocess.run([sys.executable, "-c", "print('a child printed this')"], check=True)
    return 0

print("printed before serve", flush=True)
poolrun.serve(handle)
print("printed after serve")
"""

    def test_program(self):
        env = dict(os.environ)
        env.pop("POOLRUN_WINDOW_FD", None)
        env["POOLRUN_PROGRAM_ITEMS"] = ""
        env["PYTHONPATH"] = os.path.dirname(os.path.abspath(poolrun.__file__))
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        req = {"arguments": ["--input", "x"], "requestId": 0, "poolrun": {"job": "j", "attempt": 1, "needs": ["model"]}}
        p = subprocess.run(
            [sys.executable, "-c", self.PROGRAM, "--persistent_worker"],
            input=(json.dumps(req) + "\n").encode(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            timeout=60,
        )
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 0, err)
        lines = p.stdout.decode().splitlines()
        self.assertEqual(
            lines,
            [
                "printed before serve",
                json.dumps({"exitCode": 0, "output": "the model ['--input', 'x']\n", "requestId": 0}),
                "printed after serve",
            ],
            err,
        )
        self.assertIn("stray bytes on descriptor 1", err)
        self.assertIn("a child printed this", err)
        self.assertIn("freed the model", err)


if __name__ == "__main__":
    unittest.main()
