/*
 * coremark.c: a CoreMark-like CPU kernel, written for the edgeaip fuel
 * benchmarks (it shares CoreMark's mix of work, not its code). Each
 * iteration runs four kernels over the same small working set and folds
 * their results into a CRC:
 *   - linked list: find, reverse and merge-sort a list of records;
 *   - matrix: multiply by a constant, by a vector and by a matrix, then
 *     extract bit fields;
 *   - state machine: scan a buffer of numbers in several formats;
 *   - CRC-16 over everything.
 * Usage: coremark [iterations] (default 10). Prints the final CRC.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIST_LEN 64
#define MAT_N 24
#define STATE_LEN 256

typedef struct node {
	struct node *next;
	int16_t value;
	int16_t index;
} node;

static uint16_t crc16_byte(uint8_t data, uint16_t crc) {
	for (int i = 0; i < 8; i++) {
		uint8_t x = (data ^ (uint8_t)crc) & 1;
		data >>= 1;
		crc >>= 1;
		if (x)
			crc ^= 0xA001;
	}
	return crc;
}

static uint16_t crc16(int32_t v, uint16_t crc) {
	for (int i = 0; i < 4; i++)
		crc = crc16_byte((uint8_t)(v >> (8 * i)), crc);
	return crc;
}

/* ---- linked list ---- */

static node *list_build(node *pool, int n, uint32_t seed) {
	for (int i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		pool[i].value = (int16_t)(seed >> 17);
		pool[i].index = (int16_t)i;
		pool[i].next = i + 1 < n ? &pool[i + 1] : NULL;
	}
	return pool;
}

static node *list_reverse(node *head) {
	node *prev = NULL;
	while (head) {
		node *next = head->next;
		head->next = prev;
		prev = head;
		head = next;
	}
	return prev;
}

static node *list_find(node *head, int16_t value) {
	while (head && head->value != value)
		head = head->next;
	return head;
}

static int cmp_value(const node *a, const node *b) { return a->value - b->value; }
static int cmp_index(const node *a, const node *b) { return a->index - b->index; }

/* Bottom-up merge sort, as CoreMark's list benchmark does. */
static node *list_sort(node *list, int (*cmp)(const node *, const node *)) {
	int insize = 1;
	for (;;) {
		node *p = list, *tail = NULL;
		list = NULL;
		int merges = 0;
		while (p) {
			merges++;
			node *q = p;
			int psize = 0;
			for (int i = 0; i < insize && q; i++) {
				psize++;
				q = q->next;
			}
			int qsize = insize;
			while (psize > 0 || (qsize > 0 && q)) {
				node *e;
				if (psize == 0) {
					e = q; q = q->next; qsize--;
				} else if (qsize == 0 || !q || cmp(p, q) <= 0) {
					e = p; p = p->next; psize--;
				} else {
					e = q; q = q->next; qsize--;
				}
				if (tail)
					tail->next = e;
				else
					list = e;
				tail = e;
			}
			p = q;
		}
		tail->next = NULL;
		if (merges <= 1)
			return list;
		insize *= 2;
	}
}

static uint16_t bench_list(node *pool, uint32_t seed, uint16_t crc) {
	node *head = list_build(pool, LIST_LEN, seed);
	for (int i = 0; i < 8; i++) {
		node *found = list_find(head, pool[(seed + i * 7) % LIST_LEN].value);
		crc = crc16(found ? found->index : -1, crc);
		head = list_reverse(head);
	}
	head = list_sort(head, cmp_value);
	crc = crc16(head->value, crc);
	head = list_sort(head, cmp_index);
	for (node *p = head; p; p = p->next)
		crc = crc16(p->value, crc);
	return crc;
}

/* ---- matrix ---- */

static int32_t a[MAT_N][MAT_N], b[MAT_N][MAT_N], c[MAT_N][MAT_N];
static int32_t vec[MAT_N], out[MAT_N];

static uint16_t bench_matrix(uint32_t seed, uint16_t crc) {
	for (int i = 0; i < MAT_N; i++) {
		for (int j = 0; j < MAT_N; j++) {
			seed = seed * 1664525u + 1013904223u;
			a[i][j] = (int32_t)(seed >> 20) - 2048;
			b[i][j] = (int32_t)((seed >> 8) & 0xfff) - 2048;
		}
		vec[i] = (int32_t)(seed & 0xff);
	}
	for (int i = 0; i < MAT_N; i++)
		for (int j = 0; j < MAT_N; j++)
			c[i][j] = a[i][j] * 7;
	for (int i = 0; i < MAT_N; i++) {
		int32_t s = 0;
		for (int j = 0; j < MAT_N; j++)
			s += a[i][j] * vec[j];
		out[i] = s;
	}
	for (int i = 0; i < MAT_N; i++)
		for (int j = 0; j < MAT_N; j++) {
			int32_t s = 0;
			for (int k = 0; k < MAT_N; k++)
				s += a[i][k] * b[k][j];
			c[i][j] += s;
		}
	int32_t acc = 0;
	for (int i = 0; i < MAT_N; i++) {
		acc += out[i];
		for (int j = 0; j < MAT_N; j++)
			acc += (c[i][j] >> 2) & 0x3f;
	}
	return crc16(acc, crc);
}

/* ---- state machine ---- */

enum state { START, INT, FLOAT, EXP, SCI, HEX, INVALID, NSTATES };

static char text[STATE_LEN + 1];

static void state_fill(uint32_t seed) {
	static const char *const tokens[] = {"5012", "1.5e+7", "0x1f", "-123", "+0.5", "3e", "abc", "77.25", "-9.0E-3", "0"};
	int n = 0;
	while (n < STATE_LEN - 10) {
		seed = seed * 1664525u + 1013904223u;
		const char *t = tokens[(seed >> 16) % 10];
		size_t len = strlen(t);
		memcpy(text + n, t, len);
		n += (int)len;
		text[n++] = ',';
	}
	text[n] = 0;
}

static enum state state_step(enum state s, char ch) {
	int digit = ch >= '0' && ch <= '9';
	switch (s) {
	case START:
		if (digit) return INT;
		if (ch == '+' || ch == '-') return INT;
		if (ch == '.') return FLOAT;
		return INVALID;
	case INT:
		if (digit) return INT;
		if (ch == '.') return FLOAT;
		if (ch == 'x') return HEX;
		if (ch == 'e' || ch == 'E') return EXP;
		return INVALID;
	case FLOAT:
		if (digit) return FLOAT;
		if (ch == 'e' || ch == 'E') return EXP;
		return INVALID;
	case EXP:
		if (ch == '+' || ch == '-' || digit) return SCI;
		return INVALID;
	case SCI:
		return digit ? SCI : INVALID;
	case HEX:
		return (digit || (ch >= 'a' && ch <= 'f')) ? HEX : INVALID;
	default:
		return INVALID;
	}
}

static uint16_t bench_state(uint32_t seed, uint16_t crc) {
	int counts[NSTATES] = {0};
	state_fill(seed);
	enum state s = START;
	for (const char *p = text; *p; p++) {
		if (*p == ',') {
			counts[s]++;
			s = START;
		} else {
			s = state_step(s, *p);
		}
	}
	for (int i = 0; i < NSTATES; i++)
		crc = crc16(counts[i], crc);
	return crc;
}

int main(int argc, char **argv) {
	int iterations = argc > 1 ? atoi(argv[1]) : 10;
	node *pool = malloc(sizeof(node) * LIST_LEN);
	uint16_t crc = 0;
	for (int i = 0; i < iterations; i++) {
		uint32_t seed = (uint32_t)i * 2654435761u;
		crc = bench_list(pool, seed, crc);
		crc = bench_matrix(seed, crc);
		crc = bench_state(seed, crc);
	}
	printf("coremark: %d iterations crc=0x%04x\n", iterations, crc);
	free(pool);
	return 0;
}
