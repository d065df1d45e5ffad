/*
 * check.c: the raw MPI form of a poolrun worker's check before a job, for
 * bench/mpi/run.sh to time beside BenchmarkWorkerCheck (package engine).
 *
 * Rank 0 exposes a window of LIVE sorted 64-bit keys (the still-required
 * item keys); rank 1, on the same host, reads it one-sided and decides,
 * for the 8 items it holds (5 of them listed), which are gone: 8 binary
 * searches in its copy. Two ways of reading:
 *
 *   lock_all  MPI_Win_lock_all once, then per check MPI_Get of the LIVE
 *             keys and MPI_Win_flush (no exclusion against a writer);
 *   lock      per check MPI_Win_lock(SHARED), MPI_Get, MPI_Win_unlock
 *             (safe against a concurrent exclusive writer).
 *
 * Usage: mpirun -n 2 check LIVE CHECKS
 * Prints, from rank 1: "mpi live=LIVE lock_all NS" and "... lock NS", the
 * nanoseconds per check.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

enum { held = 8, listed = 5 };

/* next is splitmix64: the same keys on both ranks. */
static uint64_t next(uint64_t *s) {
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static int cmp(const void *a, const void *b) {
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int search(const uint64_t *k, int n, uint64_t key) {
	int lo = 0, hi = n;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (k[mid] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && k[lo] == key;
}

static double now(void) { return MPI_Wtime(); }

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int live = argc > 1 ? atoi(argv[1]) : 1000;
	long checks = argc > 2 ? atol(argv[2]) : 200000;
	if (size != 2 || live < held || live > 1000 || checks < 1) {
		if (rank == 0)
			fprintf(stderr, "usage: mpirun -n 2 check LIVE(8..1000) CHECKS\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}

	uint64_t keys[1000], seed = 1;
	for (int i = 0; i < live; i++)
		keys[i] = next(&seed);
	qsort(keys, live, sizeof keys[0], cmp);
	uint64_t mine[held];
	for (int i = 0; i < listed; i++)
		mine[i] = keys[(i * 2 + 1) * live / (2 * listed)];
	for (int i = listed; i < held; i++)
		mine[i] = next(&seed); /* not listed (a collision is 1 in 2^64) */

	uint64_t *base;
	MPI_Win win;
	MPI_Win_allocate(rank == 0 ? 1000 * sizeof(uint64_t) : 0, sizeof(uint64_t),
			 MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
	if (rank == 0)
		for (int i = 0; i < live; i++)
			base[i] = keys[i];
	MPI_Barrier(MPI_COMM_WORLD);

	if (rank == 1) {
		uint64_t copy[1000];
		long found = 0;
		MPI_Win_lock_all(0, win);
		for (int i = 0; i < 1000; i++) { /* warm up */
			MPI_Get(copy, live, MPI_UINT64_T, 0, 0, live, MPI_UINT64_T, win);
			MPI_Win_flush(0, win);
		}
		double t0 = now();
		for (long c = 0; c < checks; c++) {
			MPI_Get(copy, live, MPI_UINT64_T, 0, 0, live, MPI_UINT64_T, win);
			MPI_Win_flush(0, win);
			for (int j = 0; j < held; j++)
				found += search(copy, live, mine[j]);
		}
		double t1 = now();
		MPI_Win_unlock_all(win);
		for (long c = 0; c < checks; c++) {
			MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
			MPI_Get(copy, live, MPI_UINT64_T, 0, 0, live, MPI_UINT64_T, win);
			MPI_Win_unlock(0, win);
			for (int j = 0; j < held; j++)
				found += search(copy, live, mine[j]);
		}
		double t2 = now();
		if (found != 2L * checks * listed) {
			fprintf(stderr, "check: found %ld listed items, want %ld\n", found, 2L * checks * listed);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		printf("mpi live=%d lock_all %.1f\n", live, (t1 - t0) * 1e9 / checks);
		printf("mpi live=%d lock %.1f\n", live, (t2 - t1) * 1e9 / checks);
		fflush(stdout);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_free(&win);
	MPI_Finalize();
	return 0;
}
