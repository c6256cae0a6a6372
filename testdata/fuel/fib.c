/* fib.c: doubly recursive Fibonacci, a call-heavy microbenchmark.
 * Usage: fib [n] (default 25). */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static int fib(int n) {
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

int main(int argc, char **argv) {
	int n = argc > 1 ? atoi(argv[1]) : 25;
	printf("fib(%d) = %d\n", n, fib(n));
	return 0;
}
