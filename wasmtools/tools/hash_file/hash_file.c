/*
 * hash_file: a stock tool. It returns the SHA-256 digest of a file under
 * an allowed dir.
 *
 *   parameters: {"path": "/data/f.txt"}
 *   result:     {"path":"/data/f.txt","sha256":"9f86...","size":4}
 *
 * See ../stocklib/stock.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../stocklib/stock.h"

/* sha256 is the state of a SHA-256 digest (FIPS 180-4). */
struct sha256 {
	uint32_t h[8];
	uint8_t block[64];
	size_t fill;
	uint64_t len;
};

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, int n) { return x >> n | x << (32 - n); }

/* compress folds one 64-byte block into the digest. */
static void compress(struct sha256 *d, const uint8_t *p) {
	uint32_t w[64], v[8];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ w[i - 15] >> 3;
		uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ w[i - 2] >> 10;
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	memcpy(v, d->h, sizeof v);
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = v[7] + (ror(v[4], 6) ^ ror(v[4], 11) ^ ror(v[4], 25)) + ((v[4] & v[5]) ^ (~v[4] & v[6])) + K[i] + w[i];
		uint32_t t2 = (ror(v[0], 2) ^ ror(v[0], 13) ^ ror(v[0], 22)) + ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
		memmove(v + 1, v, 7 * sizeof v[0]);
		v[4] += t1;
		v[0] = t1 + t2;
	}
	for (int i = 0; i < 8; i++)
		d->h[i] += v[i];
}

static void sha256_init(struct sha256 *d) {
	static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	memcpy(d->h, iv, sizeof iv);
	d->fill = 0;
	d->len = 0;
}

static void sha256_write(struct sha256 *d, const uint8_t *p, size_t n) {
	d->len += n;
	while (n > 0) {
		size_t take = 64 - d->fill < n ? 64 - d->fill : n;
		memcpy(d->block + d->fill, p, take);
		d->fill += take, p += take, n -= take;
		if (d->fill == 64) {
			compress(d, d->block);
			d->fill = 0;
		}
	}
}

/* sha256_hex ends the digest and writes it in lower-case hex to out. */
static void sha256_hex(struct sha256 *d, char out[65]) {
	uint64_t bits = d->len * 8;
	uint8_t pad[72] = {0x80};
	size_t padlen = (d->fill < 56 ? 56 : 120) - d->fill;
	for (int i = 0; i < 8; i++)
		pad[padlen + i] = (uint8_t)(bits >> (56 - 8 * i));
	sha256_write(d, pad, padlen + 8);
	for (int i = 0; i < 8; i++)
		snprintf(out + 8 * i, 9, "%08x", d->h[i]);
}

static int run(void) {
	struct str path = {0};
	int rc = read_path_param(&path);
	if (rc != 0)
		return rc;
	int fd = open_path(path.s, path.n, O_RDONLY, 0);
	if (fd < 0)
		return fail_path("open", &path, errno);
	static uint8_t buf[32 << 10];
	struct sha256 d;
	sha256_init(&d);
	ssize_t got;
	while ((got = read(fd, buf, sizeof buf)) > 0)
		sha256_write(&d, buf, (size_t)got);
	if (got < 0) {
		rc = fail_path("read", &path, errno);
		close(fd);
		return rc;
	}
	close(fd);
	uint64_t size = d.len;
	char hex[65];
	sha256_hex(&d, hex);
	fputs("{\"path\":", stdout);
	json_string(path.s, path.n);
	printf(",\"sha256\":\"%s\",\"size\":%llu}\n", hex, (unsigned long long)size);
	return 0;
}

/* aip_call is the tool's entry in the reactor form. */
__attribute__((export_name("aip_call"))) int aip_call(void) { return finish(run()); }
