#!/bin/sh
# run.sh: poolrun's worker check (BenchmarkWorkerCheck, package engine)
# and the raw MPI one-sided check of the same window (check.c) side by
# side, in alternated rounds, at 50 and 1000 live keys. Needs mpicc and
# mpirun (Debian: apt-get install openmpi-bin libopenmpi-dev); without
# them it says so and exits 0. From the repository root:
#
#   sh bench/mpi/run.sh            # 5 rounds
#   ROUNDS=9 sh bench/mpi/run.sh
#
# Each round prints one line per case; the last lines are the medians
# and the ratio of poolrun's check to MPI's lock_all check. MPI's window
# is osc/sm, its one-sided component for ranks on one host (the fastest
# here of sm, rdma and pt2pt).
set -eu
cd "$(dirname "$0")/../.."
if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
	echo "bench/mpi: no mpicc or mpirun here (Debian: apt-get install openmpi-bin libopenmpi-dev): skipped"
	exit 0
fi
rounds=${ROUNDS:-5}
checks=${CHECKS:-200000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpicc -O2 -o "$tmp/check" bench/mpi/check.c
go test -c -o "$tmp/engine.test" ./engine/
root=
[ "$(id -u)" = 0 ] && root=--allow-run-as-root

r=1
while [ "$r" -le "$rounds" ]; do
	"$tmp/engine.test" -test.run '^$' -test.bench '^BenchmarkWorkerCheck$' |
		awk -v r="$r" '/^BenchmarkWorkerCheck\// {
			name = $1; sub(/^BenchmarkWorkerCheck\//, "", name); sub(/-[0-9]+$/, "", name)
			for (i = 1; i <= NF; i++) if ($i == "ns/check") print r, "poolrun", name, $(i - 1)
		}' >>"$tmp/figures"
	for live in 50 1000; do
		mpirun $root --oversubscribe --mca osc sm -n 2 "$tmp/check" "$live" "$checks" |
			awk -v r="$r" '/^mpi / { print r, "mpi", $2 "/" $3, $4 }' >>"$tmp/figures"
	done
	awk -v r="$r" '$1 == r { printf "round %s  %-8s %-22s %8.1f ns/check\n", $1, $2, $3, $4 }' "$tmp/figures"
	r=$((r + 1))
done

echo
echo "medians over $rounds rounds (ns per check):"
for key in "poolrun live=50" "mpi live=50/lock_all" "mpi live=50/lock" \
	"poolrun live=1000" "mpi live=1000/lock_all" "mpi live=1000/lock" "poolrun live=1000/unchanged"; do
	set -- $key
	awk -v who="$1" -v name="$2" '$2 == who && $3 == name { print $4 }' "$tmp/figures" | sort -n |
		awk -v key="$key" '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "  %-28s %8.1f\n", key, m; print key, m > "/dev/stderr" }' 2>>"$tmp/medians"
done
awk '{ m[$1 " " $2] = $3 } END {
	for (l = 0; l < 2; l++) {
		live = l ? "1000" : "50"
		p = m["poolrun live=" live]; a = m["mpi live=" live "/lock_all"]
		if (a > 0) printf "  poolrun / MPI lock_all at %s live keys: %.2f\n", live, p / a
	}
}' "$tmp/medians"
