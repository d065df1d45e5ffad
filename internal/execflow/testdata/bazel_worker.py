"""A worker written to Bazel's JSON worker protocol alone, with nothing of
poolrun's: TestPythonProgram runs it unchanged."""

import json
import sys

for line in sys.stdin:
    request = json.loads(line)
    response = {"exitCode": 0, "output": "bazel " + " ".join(request["arguments"]), "requestId": request.get("requestId", 0)}
    sys.stdout.write(json.dumps(response) + "\n")
    sys.stdout.flush()
