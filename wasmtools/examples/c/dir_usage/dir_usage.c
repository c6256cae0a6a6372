/*
 * dir_usage: an edgeaip tool written in C, to show the tool ABI without an
 * SDK. It counts the files, directories and bytes under a directory the
 * operator granted.
 *
 *   parameters (stdin):  {"path": "/data/kiosk"}
 *   result (stdout):     {"path": "/data/kiosk", "files": 12, "dirs": 3, "bytes": 40960}
 *   failure:             a message on stderr, exit status 1
 *
 * It takes the ABI's reactor form (wasi-libc's reactor model): the agent
 * runs its initialization (_initialize: wasi-libc's and the constructors)
 * once per loaded version and snapshots it, and each call runs aip_call in
 * a fresh instance started from that snapshot. aip_call returns the exit
 * status, so what stdio buffers must be flushed first: no exit() does it.
 * Static variables start each call as initialization left them.
 *
 * The agent validates the parameters against the manifest's input_schema
 * before the tool runs, so the parser below only needs to read an object
 * of string members. Symbolic links are counted as files, never followed.
 *
 * Build: see build.sh.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_INPUT (64 * 1024)
#define MAX_PATH 4096

struct usage {
	unsigned long long files, dirs, bytes;
};

static int failf(const char *msg, const char *path) {
	fprintf(stderr, "%s %s: %s\n", msg, path, strerror(errno));
	return 1;
}

/* skip_ws returns s past any JSON whitespace. */
static const char *skip_ws(const char *s) {
	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	return s;
}

/*
 * read_string reads the JSON string at s (its opening quote) into out and
 * returns the position after its closing quote, or NULL with a message in
 * err.
 */
static const char *read_string(const char *s, char *out, size_t cap, const char **err) {
	size_t n = 0;
	if (*s++ != '"') {
		*err = "expected a string";
		return NULL;
	}
	for (; *s != '"'; s++) {
		char c = *s;
		if (c == '\0') {
			*err = "unterminated string";
			return NULL;
		}
		if (c == '\\') {
			switch (*++s) {
			case '"': c = '"'; break;
			case '\\': c = '\\'; break;
			case '/': c = '/'; break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'n': c = '\n'; break;
			case 'r': c = '\r'; break;
			case 't': c = '\t'; break;
			default:
				*err = "unsupported escape in string (\\u is not handled)";
				return NULL;
			}
		}
		if (n + 1 >= cap) {
			*err = "string too long";
			return NULL;
		}
		out[n++] = c;
	}
	out[n] = '\0';
	return s + 1;
}

/* param_path finds the "path" member of the JSON object in. */
static int param_path(const char *in, char *path) {
	char key[64];
	const char *err = "expected a JSON object";
	const char *s = skip_ws(in);
	if (*s++ != '{')
		goto bad;
	for (s = skip_ws(s); *s != '}'; s = skip_ws(s)) {
		if (!(s = read_string(s, key, sizeof key, &err)))
			goto bad;
		s = skip_ws(s);
		if (*s++ != ':') {
			err = "expected ':'";
			goto bad;
		}
		s = skip_ws(s);
		char value[MAX_PATH];
		if (!(s = read_string(s, value, sizeof value, &err)))
			goto bad;
		if (strcmp(key, "path") == 0) {
			strcpy(path, value);
			return 0;
		}
		s = skip_ws(s);
		if (*s == ',')
			s++;
	}
	err = "parameter \"path\" is required";
bad:
	fprintf(stderr, "parameters: %s\n", err);
	return 1;
}

/* walk adds up dir and everything under it. */
static int walk(char *dir, struct usage *u) {
	DIR *d = opendir(dir);
	if (!d)
		return failf("open", dir);
	size_t len = strlen(dir);
	struct dirent *e;
	int rc = 0;
	while (rc == 0 && (e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (len + 1 + strlen(e->d_name) >= MAX_PATH) {
			errno = ENAMETOOLONG;
			rc = failf("walk", dir);
			break;
		}
		snprintf(dir + len, MAX_PATH - len, "/%s", e->d_name);
		struct stat st;
		if (lstat(dir, &st) != 0) {
			rc = failf("stat", dir);
		} else if (S_ISDIR(st.st_mode)) {
			u->dirs++;
			rc = walk(dir, u);
		} else {
			u->files++;
			u->bytes += (unsigned long long)st.st_size;
		}
		dir[len] = '\0';
	}
	closedir(d);
	return rc;
}

/* put_json_string writes s as a JSON string. */
static void put_json_string(const char *s) {
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* run is the tool: one call. */
static int run(void) {
	static char in[MAX_INPUT + 1];
	size_t n = fread(in, 1, MAX_INPUT, stdin);
	if (!feof(stdin)) {
		fprintf(stderr, "parameters: more than %d bytes\n", MAX_INPUT);
		return 1;
	}
	in[n] = '\0';

	static char path[MAX_PATH];
	if (param_path(in, path) != 0)
		return 1;
	struct usage u = {0};
	static char buf[MAX_PATH];
	strcpy(buf, path);
	if (walk(buf, &u) != 0)
		return 1;

	printf("{\"path\":");
	put_json_string(path);
	printf(",\"files\":%llu,\"dirs\":%llu,\"bytes\":%llu}\n", u.files, u.dirs, u.bytes);
	return 0;
}

/* aip_call is the tool's entry in the reactor form: run, with stdout
 * flushed before the status goes back. */
__attribute__((export_name("aip_call"))) int aip_call(void) {
	int rc = run();
	if (fflush(stdout) != 0 && rc == 0)
		rc = 1;
	return rc;
}
