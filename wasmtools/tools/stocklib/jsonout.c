/*
 * jsonout.c: JSON strings written as Go's encoding/json writes them, so
 * that a result reads byte for byte as the Go tools' did.
 */
#include <stdio.h>

#include "stock.h"

/* rune_len returns the length of the valid UTF-8 sequence at s (n bytes
 * left), as Go's utf8.DecodeRune judges it (no overlong forms, no
 * surrogates, nothing past U+10FFFF), or 0 if it is not one; *rune is
 * the code point. */
static size_t rune_len(const unsigned char *s, size_t n, long *rune) {
	unsigned char c = s[0];
	size_t len;
	long min;
	if (c < 0x80) {
		*rune = c;
		return 1;
	} else if (c >= 0xC2 && c < 0xE0) {
		len = 2, min = 0x80, *rune = c & 0x1F;
	} else if (c >= 0xE0 && c < 0xF0) {
		len = 3, min = 0x800, *rune = c & 0x0F;
	} else if (c >= 0xF0 && c < 0xF5) {
		len = 4, min = 0x10000, *rune = c & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		*rune = *rune << 6 | (s[i] & 0x3F);
	}
	if (*rune < min || *rune > 0x10FFFF || (*rune >= 0xD800 && *rune < 0xE000))
		return 0;
	return len;
}

bool utf8_valid(const char *s, size_t n) {
	long rune;
	for (size_t i = 0, l; i < n; i += l)
		if (!(l = rune_len((const unsigned char *)s + i, n - i, &rune)))
			return false;
	return true;
}

/* put_ascii writes the ASCII byte c as encoding/json does with HTML
 * escaping on. */
static void put_ascii(unsigned char c) {
	static const char hex[] = "0123456789abcdef";
	switch (c) {
	case '"': fputs("\\\"", stdout); return;
	case '\\': fputs("\\\\", stdout); return;
	case '\b': fputs("\\b", stdout); return;
	case '\f': fputs("\\f", stdout); return;
	case '\n': fputs("\\n", stdout); return;
	case '\r': fputs("\\r", stdout); return;
	case '\t': fputs("\\t", stdout); return;
	}
	if (c < 0x20 || c == '<' || c == '>' || c == '&')
		printf("\\u00%c%c", hex[c >> 4], hex[c & 0xF]);
	else
		putchar(c);
}

void json_string(const char *s, size_t n) {
	const unsigned char *u = (const unsigned char *)s;
	putchar('"');
	for (size_t i = 0; i < n;) {
		long rune;
		size_t len = rune_len(u + i, n - i, &rune);
		if (len == 0) {
			fputs("\\ufffd", stdout);
			len = 1;
		} else if (len == 1) {
			put_ascii(u[i]);
		} else if (rune == 0x2028 || rune == 0x2029) {
			printf("\\u%04lx", rune);
		} else {
			fwrite(u + i, 1, len, stdout);
		}
		i += len;
	}
	putchar('"');
}
