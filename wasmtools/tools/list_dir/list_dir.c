/*
 * list_dir: a stock tool. It lists a directory under an allowed dir.
 *
 *   parameters: {"path": "/data"}
 *   result:     {"entries":[{"name":"a.txt","type":"file","size":3},...],"path":"/data"}
 *
 * Entries come sorted by name (bytewise), without "." and "..". type is
 * dir, file, symlink (never followed) or other; size is a file's, 0 for
 * the rest. See ../stocklib/stock.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../stocklib/stock.h"

struct entry {
	char *name;
	const char *type;
	long long size;
};

/* type_of names the type of the entry e of dir d, as the Go tool did. */
static const char *type_of(DIR *d, const struct dirent *e, struct stat *st, bool *have_st) {
	unsigned char t = e->d_type;
	if (t == DT_UNKNOWN && fstatat(dirfd(d), e->d_name, st, AT_SYMLINK_NOFOLLOW) == 0) {
		*have_st = true;
		t = S_ISDIR(st->st_mode) ? DT_DIR : S_ISREG(st->st_mode) ? DT_REG : S_ISLNK(st->st_mode) ? DT_LNK : DT_UNKNOWN;
	}
	switch (t) {
	case DT_DIR: return "dir";
	case DT_REG: return "file";
	case DT_LNK: return "symlink";
	}
	return "other";
}

/* read_entry fills out from the entry e of d; the size of a regular file
 * is its lstat's, 0 if that fails. */
static bool read_entry(DIR *d, const struct dirent *e, struct entry *out) {
	struct stat st;
	bool have_st = false;
	out->type = type_of(d, e, &st, &have_st);
	out->size = 0;
	if (strcmp(out->type, "file") == 0 && (have_st || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0))
		out->size = (long long)st.st_size;
	return (out->name = strdup(e->d_name)) != NULL;
}

static int by_name(const void *a, const void *b) {
	return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

/* read_entries reads every entry of d into a new array; NULL with errno
 * set on an error. */
static struct entry *read_entries(DIR *d, size_t *count) {
	size_t n = 0, cap = 16;
	struct entry *es = malloc(cap * sizeof *es);
	struct dirent *e;
	for (errno = 0; es && (e = readdir(d)) != NULL; errno = 0) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (n == cap) {
			struct entry *bigger = realloc(es, (cap *= 2) * sizeof *es);
			if (!bigger)
				break;
			es = bigger;
		}
		if (!read_entry(d, e, &es[n]))
			break;
		n++;
	}
	if (!es || errno != 0) {
		int err = es ? errno : ENOMEM;
		free(es);
		errno = err;
		return NULL;
	}
	*count = n;
	return es;
}

static int run(void) {
	struct str path = {0};
	int rc = read_path_param(&path);
	if (rc != 0)
		return rc;
	int fd = open_path(path.s, path.n, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return fail_path("open", &path, errno);
	DIR *d = fdopendir(fd);
	if (!d) {
		rc = fail_path("readdirent", &path, errno);
		close(fd);
		return rc;
	}
	size_t n;
	struct entry *es = read_entries(d, &n);
	int err = errno;
	closedir(d);
	if (!es)
		return fail_path("readdirent", &path, err);
	qsort(es, n, sizeof *es, by_name);
	fputs("{\"entries\":[", stdout);
	for (size_t i = 0; i < n; i++) {
		fputs(i ? ",{\"name\":" : "{\"name\":", stdout);
		json_string(es[i].name, strlen(es[i].name));
		printf(",\"type\":\"%s\",\"size\":%lld}", es[i].type, es[i].size);
	}
	fputs("],\"path\":", stdout);
	json_string(path.s, path.n);
	fputs("}\n", stdout);
	return 0;
}

/* aip_call is the tool's entry in the reactor form. */
__attribute__((export_name("aip_call"))) int aip_call(void) { return finish(run()); }
