/*
 * params.c: the parameters of a call, one JSON object on stdin, read as the
 * Go SDK reads them (encoding/json, unknown fields refused). The agent has
 * already checked them against the tool's input schema, so only what a
 * schema lets through must be read exactly; the rest fails with an error
 * worded as encoding/json's are.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stock.h"

/* reader is the JSON text being read, and the first error met. */
struct reader {
	const char *p, *end;
	char err[160];
};

static void fail(struct reader *r, const char *msg) {
	if (!r->err[0])
		snprintf(r->err, sizeof r->err, "%s", msg);
}

/* fail_at fails on the character at r->p, where what was expected, as
 * encoding/json words it: "invalid character 'x' looking for ...", or
 * "unexpected EOF" at the end. */
static void fail_at(struct reader *r, const char *what) {
	char msg[160];
	if (r->p >= r->end)
		snprintf(msg, sizeof msg, "unexpected EOF");
	else
		snprintf(msg, sizeof msg, "invalid character '%c' %s", *r->p, what);
	fail(r, msg);
}

static void skip_ws(struct reader *r) {
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

static int hexval(char c) {
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* read_hex4 reads the four hex digits of a \u escape at p, or returns -1. */
static long read_hex4(const char *p, const char *end) {
	long v = 0;
	if (end - p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		int h = hexval(p[i]);
		if (h < 0)
			return -1;
		v = v << 4 | h;
	}
	return v;
}

/* put_utf8 appends rune c to out as UTF-8 and returns the new length. */
static size_t put_utf8(char *out, size_t n, long c) {
	if (c < 0x80) {
		out[n++] = (char)c;
	} else if (c < 0x800) {
		out[n++] = (char)(0xC0 | c >> 6);
		out[n++] = (char)(0x80 | (c & 0x3F));
	} else if (c < 0x10000) {
		out[n++] = (char)(0xE0 | c >> 12);
		out[n++] = (char)(0x80 | (c >> 6 & 0x3F));
		out[n++] = (char)(0x80 | (c & 0x3F));
	} else {
		out[n++] = (char)(0xF0 | c >> 18);
		out[n++] = (char)(0x80 | (c >> 12 & 0x3F));
		out[n++] = (char)(0x80 | (c >> 6 & 0x3F));
		out[n++] = (char)(0x80 | (c & 0x3F));
	}
	return n;
}

/* read_unicode reads the \uXXXX escape at r->p (past its backslash and u),
 * with its low surrogate if it is a high one, into out; as encoding/json,
 * a surrogate without its pair becomes U+FFFD. */
static size_t read_unicode(struct reader *r, char *out, size_t n) {
	long c = read_hex4(r->p, r->end);
	if (c < 0) {
		fail(r, "invalid character in \\u hexadecimal character escape");
		return n;
	}
	r->p += 4;
	if (c >= 0xD800 && c < 0xE000) {
		long lo = -1;
		if (c < 0xDC00 && r->end - r->p >= 6 && r->p[0] == '\\' && r->p[1] == 'u')
			lo = read_hex4(r->p + 2, r->end);
		if (lo >= 0xDC00 && lo < 0xE000) {
			r->p += 6;
			c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
		} else {
			c = 0xFFFD;
		}
	}
	return put_utf8(out, n, c);
}

/* read_string reads the JSON string at r->p into a new buffer in *out. */
static void read_string(struct reader *r, struct str *out) {
	r->p++; /* the opening quote */
	/* Escapes only shrink: the raw length bounds the decoded one. */
	const char *close = r->p;
	while (close < r->end && *close != '"')
		close += *close == '\\' ? 2 : 1;
	if (close >= r->end) {
		fail(r, "unexpected end of JSON input");
		return;
	}
	char *s = malloc((size_t)(close - r->p) + 1);
	size_t n = 0;
	if (!s) {
		fail(r, "out of memory");
		return;
	}
	while (r->p < close && !r->err[0]) {
		unsigned char c = (unsigned char)*r->p++;
		if (c < 0x20) {
			fail(r, "invalid control character in string literal");
		} else if (c != '\\') {
			s[n++] = (char)c;
		} else {
			char e = *r->p++;
			const char *simple = strchr("\"\\/bfnrt", e);
			if (e == 'u')
				n = read_unicode(r, s, n);
			else if (e && simple)
				s[n++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
			else
				fail(r, "invalid character in string escape code");
		}
	}
	r->p = close + 1;
	s[n] = '\0';
	free(out->s);
	out->s = s;
	out->n = n;
}

/* value_kind names the JSON value at r->p as encoding/json does in its
 * errors, or returns NULL if there is none. */
static const char *value_kind(const struct reader *r) {
	if (r->p >= r->end)
		return NULL;
	switch (*r->p) {
	case '"': return "string";
	case '{': return "object";
	case '[': return "array";
	case 't': case 'f': return "bool";
	case 'n': return "null";
	}
	return (*r->p == '-' || (*r->p >= '0' && *r->p <= '9')) ? "number" : NULL;
}

/* literal reads the literal word at r->p. */
static bool literal(struct reader *r, const char *word) {
	size_t n = strlen(word);
	if ((size_t)(r->end - r->p) < n || memcmp(r->p, word, n) != 0) {
		fail(r, "invalid literal in JSON input");
		return false;
	}
	r->p += n;
	return true;
}

/* read_int reads the JSON number at r->p into *i; a number that is no
 * int64 fails as encoding/json fails it. */
static void read_int(struct reader *r, const char *name, int64_t *i) {
	const char *start = r->p;
	while (r->p < r->end && strchr("+-.0123456789eE", *r->p))
		r->p++;
	char tok[64];
	snprintf(tok, sizeof tok, "%.*s", (int)(r->p - start), start);
	char *end;
	errno = 0;
	long long v = strtoll(tok, &end, 10);
	if (*end || errno || !tok[0]) {
		char msg[160];
		snprintf(msg, sizeof msg, "json: cannot unmarshal number %s into Go struct field params.%s of type int64", tok, name);
		fail(r, msg);
		return;
	}
	*i = v;
}

/* read_value reads the value of the member p. */
static void read_value(struct reader *r, const struct param *p) {
	static const char *const want[] = {[PARAM_STRING] = "string", [PARAM_INT] = "number", [PARAM_BOOL] = "bool"};
	static const char *const gotype[] = {[PARAM_STRING] = "string", [PARAM_INT] = "int64", [PARAM_BOOL] = "bool"};
	const char *kind = value_kind(r);
	if (!kind) {
		fail_at(r, "looking for beginning of value");
		return;
	}
	if (strcmp(kind, "null") == 0) {
		literal(r, "null");
		return;
	}
	if (strcmp(kind, want[p->kind]) != 0) {
		char msg[160];
		snprintf(msg, sizeof msg, "json: cannot unmarshal %s into Go struct field params.%s of type %s", kind, p->name, gotype[p->kind]);
		fail(r, msg);
		return;
	}
	switch (p->kind) {
	case PARAM_STRING:
		read_string(r, p->str);
		break;
	case PARAM_INT:
		read_int(r, p->name, p->i);
		break;
	case PARAM_BOOL:
		*p->b = *r->p == 't';
		literal(r, *p->b ? "true" : "false");
		break;
	}
}

/* read_member reads one "name": value member of the object. */
static void read_member(struct reader *r, const struct param *params, size_t n) {
	struct str key = {0};
	if (r->p >= r->end || *r->p != '"') {
		fail_at(r, "looking for beginning of object key string");
		return;
	}
	read_string(r, &key);
	skip_ws(r);
	if (r->err[0] || r->p >= r->end || *r->p != ':') {
		fail_at(r, "after object key");
		free(key.s);
		return;
	}
	r->p++;
	skip_ws(r);
	const struct param *p = NULL;
	for (size_t i = 0; i < n && !p; i++)
		if (strlen(params[i].name) == key.n && memcmp(params[i].name, key.s, key.n) == 0)
			p = &params[i];
	if (p) {
		read_value(r, p);
	} else {
		char msg[160];
		snprintf(msg, sizeof msg, "json: unknown field \"%.100s\"", key.s);
		fail(r, msg);
	}
	free(key.s);
}

/* read_object reads the JSON object in r into params. */
static void read_object(struct reader *r, const struct param *params, size_t n) {
	skip_ws(r);
	if (r->p == r->end)
		return; /* no parameters at all: the SDK takes io.EOF as none */
	const char *kind = value_kind(r);
	if (!kind || strcmp(kind, "object") != 0) {
		char msg[160];
		snprintf(msg, sizeof msg, "json: cannot unmarshal %s into Go value of type main.params", kind ? kind : "invalid value");
		fail(r, msg);
		return;
	}
	r->p++;
	skip_ws(r);
	if (r->p < r->end && *r->p == '}')
		return; /* {} */
	for (; !r->err[0]; skip_ws(r)) {
		read_member(r, params, n);
		skip_ws(r);
		if (r->p < r->end && *r->p == '}')
			return;
		if (r->p < r->end && *r->p == ',')
			r->p++;
		else
			fail_at(r, "after object key:value pair");
	}
}

/* read_stdin reads all of stdin into a new buffer. */
static char *read_stdin(size_t *len) {
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		n += fread(buf + n, 1, cap - n, stdin);
		if (n < cap)
			break;
		char *bigger = realloc(buf, cap *= 2);
		if (!bigger)
			free(buf);
		buf = bigger;
	}
	if (buf && ferror(stdin)) {
		free(buf);
		return NULL;
	}
	*len = n;
	return buf;
}

int read_params(const struct param *params, size_t n) {
	size_t len;
	char *in = read_stdin(&len);
	if (!in) {
		fprintf(stderr, "parameters: read stdin: %s\n", strerror(errno));
		return EXIT_BAD_PARAMS;
	}
	struct reader r = {.p = in, .end = in + len};
	read_object(&r, params, n);
	free(in);
	if (r.err[0]) {
		fprintf(stderr, "parameters: %s\n", r.err);
		return EXIT_BAD_PARAMS;
	}
	return 0;
}

int read_path_param(struct str *path) {
	const struct param params[] = {{.name = "path", .kind = PARAM_STRING, .str = path}};
	return read_params(params, 1);
}
