/* stride.c: the inner loop of a sieve on its own, as a fixture for the
 * meter's worst case: for 64 strides k (1 to 64, in a scrambled order),
 * store to every k-th element of an int array. The inner loop is a store,
 * two adds, a compare and a branch, so what the meter adds to an
 * iteration shows at full weight. clang's runtime unrolling is turned off
 * for it, as it is in effect for a sieve, whose stride changes with
 * the data.
 * Usage: stride [n] [repeats] (default 100000 1). Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 100000;
	int repeats = argc > 2 ? atoi(argv[2]) : 1;
	int *a = calloc((size_t)n, sizeof *a);
	for (int r = 0; r < repeats; r++)
		for (int s = 0; s < 64; s++) {
			int k = 1 + (s * 37) % 64;
#pragma clang loop unroll(disable)
			for (int j = k; j < n; j += k)
				a[j] = r + k;
		}
	long sum = 0;
	for (int i = 0; i < n; i++)
		sum += a[i];
	printf("stride: n=%d repeats=%d sum=%ld\n", n, repeats, sum);
	return 0;
}
