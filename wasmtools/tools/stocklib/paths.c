/*
 * paths.c: paths opened as Go's syscall package opens them under wasip1
 * (syscall/fs_wasip1.go, Go 1.26), not as wasi-libc does. Go cleans a path
 * lexically first ("/data/../etc" is "/etc"), then opens it relative to
 * the preopened directory whose name is its longest prefix, and fails
 * with EBADF when none is. wasi-libc would send ".." to the host, which
 * refuses it as an escape: another error than the Go tools gave.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <wasi/api.h>

#include "stock.h"

/* append_clean appends path to buf[0:*n] as Go's appendCleanPath does:
 * "." and empty elements dropped, ".." taking off the last element, or
 * kept when there is none to take off and lookup_parent is set. */
static bool append_clean(char *buf, size_t *n, const char *path, size_t len, bool lookup_parent) {
	size_t i = 0;
	while (i < len) {
		while (i < len && path[i] == '/')
			i++;
		size_t j = i;
		while (j < len && path[j] != '/')
			j++;
		const char *s = path + i;
		size_t sn = j - i;
		i = j;
		if (sn == 0 || (sn == 1 && s[0] == '.'))
			continue;
		if (sn == 2 && s[0] == '.' && s[1] == '.') {
			if (!lookup_parent) {
				size_t k = *n;
				while (k > 0 && buf[k - 1] != '/')
					k--;
				while (k > 1 && buf[k - 1] == '/')
					k--;
				*n = k;
				if (k != 0)
					continue;
				lookup_parent = true;
			}
		} else {
			lookup_parent = false;
		}
		if (*n > 0 && buf[*n - 1] != '/')
			buf[(*n)++] = '/';
		memcpy(buf + *n, s, sn);
		*n += sn;
	}
	return lookup_parent;
}

/* join_path returns dir and file joined and cleaned, as Go's joinPath,
 * in a new buffer. */
static char *join_path(const char *dir, const char *file, size_t filelen) {
	size_t dirlen = strlen(dir), n = 0;
	char *buf = malloc(dirlen + filelen + 3);
	if (!buf)
		return NULL;
	if (dir[0] == '/')
		buf[n++] = '/';
	bool lookup_parent = append_clean(buf, &n, dir, dirlen, false);
	append_clean(buf, &n, file, filelen, lookup_parent);
	if (n == 0)
		buf[n++] = '.';
	if (buf[n - 1] != '/' && filelen > 0 && file[filelen - 1] == '/')
		buf[n++] = '/';
	buf[n] = '\0';
	return buf;
}

/* preopen is a directory the host granted, as Go's port lists them. */
struct preopen {
	int fd;
	char name[512];
};

/* next_preopen fills p with the first preopened directory at p->fd or
 * after, and returns false when there is none. */
static bool next_preopen(struct preopen *p) {
	for (;; p->fd++) {
		__wasi_prestat_t st;
		__wasi_errno_t e = __wasi_fd_prestat_get(p->fd, &st);
		if (e == __WASI_ERRNO_BADF)
			return false;
		if (e != 0 || st.tag != __WASI_PREOPENTYPE_DIR || st.u.dir.pr_name_len >= sizeof p->name)
			continue;
		if (__wasi_fd_prestat_dir_name(p->fd, (uint8_t *)p->name, st.u.dir.pr_name_len) != 0)
			continue;
		p->name[st.u.dir.pr_name_len] = '\0';
		return true;
	}
}

/* cwd is the directory a relative path is taken from, as Go's port
 * takes it: $PWD, or else the first preopened directory. */
static char *cwd(void) {
	const char *pwd = getenv("PWD");
	if (pwd && *pwd)
		return join_path("/", pwd, strlen(pwd));
	struct preopen p = {.fd = 3};
	return strdup(next_preopen(&p) ? p.name : "");
}

int open_path(const char *path, size_t pathlen, int flags, int mode) {
	if (pathlen == 0 || memchr(path, '\0', pathlen)) {
		errno = EINVAL;
		return -1;
	}
	char *dir = path[0] == '/' ? strdup("/") : cwd();
	char *clean = dir ? join_path(dir, path, pathlen) : NULL;
	free(dir);
	if (!clean) {
		errno = ENOMEM;
		return -1;
	}
	int dirfd = -1;
	size_t best = 0;
	for (struct preopen p = {.fd = 3}; next_preopen(&p); p.fd++) {
		size_t len = strlen(p.name);
		if (len > best && strncmp(clean, p.name, len) == 0)
			dirfd = p.fd, best = len;
	}
	const char *rel = clean + best;
	while (*rel == '/')
		rel++;
	int fd = -1;
	if (dirfd < 0)
		errno = EBADF;
	else
		fd = openat(dirfd, *rel ? rel : ".", flags, mode);
	/* Go opens a directory read-only on a second try, as a directory:
	 * some hosts refuse it the rights a file is opened with. */
	if (fd < 0 && errno == EISDIR && flags == O_RDONLY)
		fd = openat(dirfd, *rel ? rel : ".", O_RDONLY | O_DIRECTORY, 0);
	free(clean);
	return fd;
}
