/*
 * write_file: a stock tool. It writes or appends to a file under an
 * allowed dir.
 *
 *   parameters: {"path": "/data/f.txt", "content": "...", "encoding": "utf-8", "append": false}
 *   result:     {"bytes_written":3,"path":"/data/f.txt"}
 *
 * content is text, or base64 (standard, padded; line breaks skipped, as
 * Go's decoder skips them) when encoding is base64. The file is made if
 * it is missing (mode 0644), and replaced unless append is set. See
 * ../stocklib/stock.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../stocklib/stock.h"

/* b64 is the value of a base64 digit, or -1. */
static int b64(unsigned char c) {
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

static bool line_break(unsigned char c) { return c == '\n' || c == '\r'; }

/* quantum decodes the quantum of src at *si into dst, as Go's
 * base64.StdEncoding decodes it (decodeQuantum), and returns the bytes it
 * wrote, or -1 with the offset of the corrupt input in *bad. */
static long quantum(const unsigned char *src, size_t len, size_t *si, unsigned char *dst, size_t *bad) {
	unsigned char d[4] = {0};
	int dlen = 4;
	for (int j = 0; j < 4; j++) {
		if (*si == len) {
			if (j == 0)
				return 0;
			*bad = *si - (size_t)j; /* too short, or not padded */
			return -1;
		}
		unsigned char in = src[(*si)++];
		if (b64(in) >= 0) {
			d[j] = (unsigned char)b64(in);
			continue;
		}
		if (line_break(in)) {
			j--;
			continue;
		}
		if (in != '=' || j < 2) {
			*bad = *si - 1;
			return -1;
		}
		if (j == 2) { /* "==" is due: one more '=' */
			while (*si < len && line_break(src[*si]))
				(*si)++;
			if (*si == len || src[*si] != '=') {
				*bad = *si == len ? len : *si - 1;
				return -1;
			}
			(*si)++;
		}
		while (*si < len && line_break(src[*si]))
			(*si)++;
		if (*si < len) {
			*bad = *si; /* something after the padding */
			return -1;
		}
		dlen = j;
		break;
	}
	unsigned v = (unsigned)d[0] << 18 | (unsigned)d[1] << 12 | (unsigned)d[2] << 6 | d[3];
	for (int i = 0; i < dlen - 1; i++)
		dst[i] = (unsigned char)(v >> (16 - 8 * i));
	return dlen - 1;
}

/* decode_base64 decodes s in place; on corrupt input it writes the error
 * as the Go tool did and returns EXIT_FAILED. */
static int decode_base64(struct str *s) {
	const unsigned char *src = (const unsigned char *)s->s;
	unsigned char *dst = (unsigned char *)s->s;
	size_t si = 0, n = 0, bad;
	while (si < s->n) {
		unsigned char out[3];
		long got = quantum(src, s->n, &si, out, &bad);
		if (got < 0) {
			fprintf(stderr, "parameter \"content\": illegal base64 data at input byte %zu\n", bad);
			return EXIT_FAILED;
		}
		/* Output never overtakes input: 3 bytes out for 4 or more in. */
		memcpy(dst + n, out, (size_t)got);
		n += (size_t)got;
	}
	s->n = n;
	return 0;
}

/* write_all writes b[0:n] to fd and returns how much went, as Go's
 * File.Write; *err is the errno that stopped it, or 0. */
static size_t write_all(int fd, const char *b, size_t n, int *err) {
	size_t done = 0;
	*err = 0;
	while (done < n) {
		ssize_t w = write(fd, b + done, n - done);
		if (w < 0) {
			*err = errno;
			break;
		}
		if (w == 0)
			break;
		done += (size_t)w;
	}
	return done;
}

/* encoding_ok checks the encoding parameter, decoding content if it is
 * base64. */
static int encoding_ok(const struct str *encoding, struct str *content) {
	if (encoding->n == 0 || strcmp(encoding->s, "utf-8") == 0)
		return 0;
	if (strcmp(encoding->s, "base64") == 0)
		return decode_base64(content);
	/* The schema's enum lets no other through: Go's %q is not copied. */
	fputs("parameter \"encoding\": want utf-8 or base64, got \"", stderr);
	fwrite(encoding->s, 1, encoding->n, stderr);
	fputs("\"\n", stderr);
	return EXIT_FAILED;
}

static int run(void) {
	struct str path = {0}, content = {0}, encoding = {0};
	bool append = false;
	const struct param params[] = {
		{.name = "path", .kind = PARAM_STRING, .str = &path},
		{.name = "content", .kind = PARAM_STRING, .str = &content},
		{.name = "encoding", .kind = PARAM_STRING, .str = &encoding},
		{.name = "append", .kind = PARAM_BOOL, .b = &append},
	};
	int rc = read_params(params, 4);
	if (rc == 0)
		rc = encoding_ok(&encoding, &content);
	if (rc != 0)
		return rc;
	int fd = open_path(path.s, path.n, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0644);
	if (fd < 0)
		return fail_path("open", &path, errno);
	int err;
	size_t n = write_all(fd, content.s, content.n, &err);
	int cerr = close(fd) == 0 ? 0 : errno;
	if (err)
		return fail_path("write", &path, err);
	if (n != content.n)
		return fail_msg("short write");
	if (cerr)
		return fail_path("close", &path, cerr);
	fputs("{\"bytes_written\":", stdout);
	printf("%zu,\"path\":", n);
	json_string(path.s, path.n);
	fputs("}\n", stdout);
	return 0;
}

/* aip_call is the tool's entry in the reactor form. */
__attribute__((export_name("aip_call"))) int aip_call(void) { return finish(run()); }
