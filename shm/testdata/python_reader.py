"""The reader process of TestPythonReader (shm/python_test.go).

It reads, with python/poolrun.py, the window open on POOLRUN_WINDOW_FD
while the test publishes to it, and checks that every read is one whole
published set: python3 python_reader.py MIN_READS MIN_SETS MAX_SECONDS.

The test publishes the sets pyset(id) for id = 1, 2, 3, ...: n keys
id<<32 | (i+1)*step for i < n, with n = 1 + id*7919 % 1000 and
step = 1 + id % 13. Each key names its set, so a mixture of two sets, or
a set cut short or overrun, shows. Now and then it publishes a set larger
than the window instead, which reads as None (overflow).

The reader stops once it has made MIN_READS reads and seen MIN_SETS
different sets, or after MAX_SECONDS, and prints

    reads=R gens=G sets=S overflows=O retries=T stalls=U

(the distinct generations, the distinct sets, the reads that found the
window overflowed, the retries of the seqlock and the reads that gave up),
then exits 0. At the first read that is not a published set it prints a
line starting "torn:" and exits 1.
"""

import sys
import time

import poolrun


def pyset(id):
    n = 1 + id * 7919 % 1000
    step = 1 + id % 13
    return frozenset(id << 32 | (i + 1) * step for i in range(n))


def main(min_reads, min_sets, max_seconds):
    # No consistent read for this long would be a failure of the test (the
    # publisher pauses between publishes), not a stalled writer.
    w = poolrun.Window(stall_timeout=max_seconds)
    print("ready", flush=True)
    expected = {}
    gens, sets = set(), set()
    reads = overflows = 0
    last = 0
    deadline = time.monotonic() + max_seconds
    while (reads < min_reads or len(sets) < min_sets) and time.monotonic() < deadline:
        gen, keys = w.read()
        reads += 1
        if gen % 2 or gen < last:
            print("torn: generation %d after %d" % (gen, last), flush=True)
            return 1
        last = gen
        gens.add(gen)
        if keys is None:
            overflows += 1
            continue
        if not keys:
            if gen != 0:
                print("torn: an empty set at generation %d" % gen, flush=True)
                return 1
            continue
        id = min(keys) >> 32
        want = expected.get(id)
        if want is None:
            if len(expected) > 64:
                expected.clear()
            want = expected[id] = pyset(id)
        if keys != want:
            print(
                "torn: generation %d: %d keys, set %d has %d; %d of them not in it"
                % (gen, len(keys), id, len(want), len(keys - want)),
                flush=True,
            )
            return 1
        sets.add(id)
    print(
        "reads=%d gens=%d sets=%d overflows=%d retries=%d stalls=%d"
        % (reads, len(gens), len(sets), overflows, w.retries, w.stalls),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
