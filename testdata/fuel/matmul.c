/* matmul.c: naive double-precision matrix multiply, n x n, repeated.
 * Usage: matmul [n] [repeats] (default 64 1). Prints a checksum. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 64;
	int repeats = argc > 2 ? atoi(argv[2]) : 1;
	double *a = malloc(sizeof(double) * n * n);
	double *b = malloc(sizeof(double) * n * n);
	double *c = calloc((size_t)n * n, sizeof(double));
	for (int i = 0; i < n * n; i++) {
		a[i] = (double)(i % 17) * 0.5;
		b[i] = (double)(i % 13) - 6.0;
	}
	for (int r = 0; r < repeats; r++)
		for (int i = 0; i < n; i++)
			for (int j = 0; j < n; j++) {
				double s = 0;
				for (int k = 0; k < n; k++)
					s += a[i * n + k] * b[k * n + j];
				c[i * n + j] += s;
			}
	double sum = 0;
	for (int i = 0; i < n * n; i++)
		sum += c[i];
	printf("matmul: n=%d repeats=%d sum=%.1f\n", n, repeats, sum);
	return 0;
}
