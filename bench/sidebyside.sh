#!/usr/bin/env bash
# sidebyside.sh REV [ROUNDS [JOBS]]: no-op jobs/s of this tree and of
# commit REV, alternated round by round on the same machine (see
# noopjobs/main.go): this tree on 2 worker processes and on InProcess(2),
# REV on 2 worker processes, and on InProcess(2) too if its noopjobs has
# it. Prints every figure, sorted, and the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=$1 rounds=${2:-9} jobs=${3:-100000}
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/old" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
go build -o "$tmp/new" ./bench/noopjobs
git worktree add -q --detach "$tmp/old" "$rev"
mkdir -p "$tmp/old/bench/noopjobs"
cp bench/noopjobs/main.go "$tmp/old/bench/noopjobs/" # not inprocess.go: REV may have no InProcess
(cd "$tmp/old" && go build -o "$tmp/oldbin" ./bench/noopjobs)
for r in $(seq "$rounds"); do
	echo "new-processes $("$tmp/new" -n "$jobs" -w 2)"
	echo "new-inprocess $("$tmp/new" -n "$jobs" -w 2 -inprocess)"
	echo "$rev-processes $("$tmp/oldbin" -n "$jobs" -w 2)"
	if [ -e "$tmp/old/bench/noopjobs/inprocess.go" ]; then
		echo "$rev-inprocess $("$tmp/oldbin" -n "$jobs" -w 2 -inprocess)"
	fi
done | sort -k1,1 -k2n | awk '
	{ v[$1] = v[$1] " " $2; n[$1]++; x[$1, n[$1]] = $2 }
	END { for (k in v) printf "%-22s median %8d  all:%s\n", k, x[k, int((n[k] + 1) / 2)], v[k] }'
