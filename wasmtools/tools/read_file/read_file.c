/*
 * read_file: a stock tool. It returns the content of a file under an
 * allowed dir, as UTF-8 text or, for binary content, base64.
 *
 *   parameters: {"path": "/data/f.txt", "max_bytes": 262144}
 *   result:     {"path":"/data/f.txt","size":12,"content":"...","encoding":"utf-8","truncated":false}
 *
 * At most max_bytes (default 256 KiB) are read; size is the file's, and
 * truncated says whether content is less than it. See ../stocklib/stock.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../stocklib/stock.h"

#define DEFAULT_MAX_BYTES (256 << 10)

/* read_at_most reads up to max bytes of fd into a new buffer, as Go's
 * io.ReadAll of an io.LimitReader; it returns NULL with errno set on a
 * read error. */
static char *read_at_most(int fd, int64_t max, size_t *len) {
	size_t cap = 512, n = 0;
	char *buf = malloc(cap);
	while (buf && (int64_t)n < max) {
		if (n == cap) {
			char *bigger = realloc(buf, cap *= 2);
			if (!bigger) {
				free(buf);
				errno = ENOMEM;
				return NULL;
			}
			buf = bigger;
		}
		size_t want = cap - n;
		if ((int64_t)want > max - (int64_t)n)
			want = (size_t)(max - (int64_t)n);
		ssize_t got = read(fd, buf + n, want);
		if (got < 0) {
			free(buf);
			return NULL;
		}
		if (got == 0)
			break;
		n += (size_t)got;
	}
	*len = n;
	return buf;
}

/* put_base64 writes b[0:n] to stdout in standard base64, padded. */
static void put_base64(const unsigned char *b, size_t n) {
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = b[i] << 16 | (i + 1 < n ? b[i + 1] << 8 : 0) | (i + 2 < n ? b[i + 2] : 0);
		putchar(abc[v >> 18 & 63]);
		putchar(abc[v >> 12 & 63]);
		putchar(i + 1 < n ? abc[v >> 6 & 63] : '=');
		putchar(i + 2 < n ? abc[v & 63] : '=');
	}
}

static int run(void) {
	struct str path = {0};
	int64_t max = 0;
	const struct param params[] = {
		{.name = "path", .kind = PARAM_STRING, .str = &path},
		{.name = "max_bytes", .kind = PARAM_INT, .i = &max},
	};
	int rc = read_params(params, 2);
	if (rc != 0)
		return rc;
	if (max <= 0)
		max = DEFAULT_MAX_BYTES;
	int fd = open_path(path.s, path.n, O_RDONLY, 0);
	if (fd < 0)
		return fail_path("open", &path, errno);
	struct stat st;
	if (fstat(fd, &st) != 0) {
		rc = fail_path("stat", &path, errno);
		close(fd);
		return rc;
	}
	size_t n;
	char *content = read_at_most(fd, max, &n);
	if (!content) {
		rc = fail_path("read", &path, errno);
		close(fd);
		return rc;
	}
	close(fd);
	bool text = utf8_valid(content, n);
	fputs("{\"path\":", stdout);
	json_string(path.s, path.n);
	printf(",\"size\":%lld,\"content\":", (long long)st.st_size);
	if (text) {
		json_string(content, n);
	} else {
		putchar('"');
		put_base64((const unsigned char *)content, n);
		putchar('"');
	}
	printf(",\"encoding\":\"%s\",\"truncated\":%s}\n", text ? "utf-8" : "base64", (int64_t)st.st_size > (int64_t)n ? "true" : "false");
	free(content);
	return 0;
}

/* aip_call is the tool's entry in the reactor form. */
__attribute__((export_name("aip_call"))) int aip_call(void) { return finish(run()); }
