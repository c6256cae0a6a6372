/* sieve.c: sieve of Eratosthenes below n, repeated.
 * Usage: sieve [n] [repeats] (default 100000 1). Prints the prime count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 100000;
	int repeats = argc > 2 ? atoi(argv[2]) : 1;
	char *composite = malloc((size_t)n);
	int count = 0;
	for (int r = 0; r < repeats; r++) {
		memset(composite, 0, (size_t)n);
		count = 0;
		for (int i = 2; i < n; i++) {
			if (composite[i])
				continue;
			count++;
			for (int j = 2 * i; j < n; j += i)
				composite[j] = 1;
		}
	}
	printf("sieve: n=%d repeats=%d primes=%d\n", n, repeats, count);
	return 0;
}
