/*
 * stock.h: what the stock tools written in C share (read_file, write_file,
 * list_dir, hash_file). They replaced tools written in Go with the SDK
 * (wasmtools/sdk), and answer as those did, byte for byte: the same
 * parameters, the same JSON results (as Go's encoding/json writes them),
 * the same exit statuses and the same error texts (as Go's os package and
 * the SDK word them). So this reads paths as Go's wasip1 port does (a
 * lexical clean, then the preopened directory whose name is the longest
 * prefix), and names errors with Go's words for WASI's errno values.
 *
 * Each tool is one .c file built with this library in wasi-libc's reactor
 * model: aip_call runs one call, in an instance started from a snapshot
 * taken after _initialize (see ../build.sh).
 */
#ifndef STOCK_H
#define STOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit statuses, as the Go SDK's. */
#define EXIT_FAILED 1     /* the tool failed: the error is on stderr */
#define EXIT_BAD_PARAMS 2 /* stdin was not the parameters the tool takes */

/* A string parameter: its bytes (NUL-terminated, but NULs may occur
 * inside) and length. */
struct str {
	char *s;
	size_t n;
};

/* The kinds of parameter the stock tools take. */
enum param_kind { PARAM_STRING, PARAM_INT, PARAM_BOOL };

/* One parameter: its JSON name, kind, and where its value goes (the
 * member for its kind). Absent or null, it keeps its zero value. */
struct param {
	const char *name;
	enum param_kind kind;
	struct str *str;
	int64_t *i;
	bool *b;
};

/* read_params reads stdin, one JSON object, into params (n of them). On
 * a failure it writes "parameters: ..." to stderr and returns
 * EXIT_BAD_PARAMS; otherwise 0. An empty stdin is an object with no
 * members, as for the SDK. */
int read_params(const struct param *params, size_t n);

/* read_path_param reads the parameters of a tool that takes only a path,
 * as read_params does. */
int read_path_param(struct str *path);

/* json_string writes s[0:n] to stdout as a JSON string, escaped as Go's
 * encoding/json escapes it (HTML characters, U+2028, U+2029, invalid
 * UTF-8 as U+FFFD). */
void json_string(const char *s, size_t n);

/* utf8_valid says whether s[0:n] is valid UTF-8, as Go's utf8.Valid. */
bool utf8_valid(const char *s, size_t n);

/* open_path opens path as Go's syscall.Open does under wasip1: flags and
 * mode as for openat. It returns the descriptor, or -1 with errno set. */
int open_path(const char *path, size_t pathlen, int flags, int mode);

/* fail_path writes the error of op on path with errno err to stderr, as
 * the SDK words an *fs.PathError, and returns EXIT_FAILED. */
int fail_path(const char *op, const struct str *path, int err);

/* fail_msg writes msg and a newline to stderr and returns EXIT_FAILED. */
int fail_msg(const char *msg);

/* finish flushes stdout and returns rc, or EXIT_FAILED if rc was 0 and
 * the flush failed: aip_call returns the status, and no exit() flushes. */
int finish(int rc);

#endif
