"""A scorer with a slow start, for examples/python/score.yaml.

It counts the words of an input that its reference lists. Its start
stands for a real tool's: time.sleep(0.5) for the imports (numpy, scipy,
a model framework take 0.3-3 s), time.sleep(0.3) for loading its
reference data.

    python3 score.py IN OUT              one input, as a plain command
    python3 score.py --persistent_worker a poolrun worker program
"""

import os
import sys
import time

time.sleep(0.5)  # stands for the imports of a real tool

try:
    import poolrun
except ImportError:  # run from a clone: the module is in python/
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import poolrun


def load_reference():
    time.sleep(0.3)  # stands for loading reference data
    with open("reference.txt") as f:
        return frozenset(f.read().split())


reference = poolrun.item("reference", build=load_reference)


def score(args):
    src, dst = args
    ref = reference.get()
    with open(src) as f:
        words = f.read().split()
    os.makedirs(os.path.dirname(dst) or ".", exist_ok=True)
    with open(dst, "w") as f:
        f.write("%d of %d words are in the reference\n" % (sum(w in ref for w in words), len(words)))
    return 0


if __name__ == "__main__":
    if "--persistent_worker" in sys.argv:
        poolrun.serve(score)
    else:
        sys.exit(score(sys.argv[1:]))
