/* java.util.Properties.load() syntax; see props.h for what is supported. */
#include "control/props.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "common/km_assert.h"

struct reader {
	const char *text;
	size_t len;
	size_t pos;
	uint32_t line;
};

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\f';
}

static bool is_eol(char c)
{
	return c == '\n' || c == '\r';
}

/* Consume one line terminator (\n, \r or \r\n) at pos, if there is one. */
static void eat_eol(struct reader *r)
{
	if (r->pos < r->len && r->text[r->pos] == '\r') {
		r->pos++;
		if (r->pos < r->len && r->text[r->pos] == '\n')
			r->pos++;
		r->line++;
	} else if (r->pos < r->len && r->text[r->pos] == '\n') {
		r->pos++;
		r->line++;
	}
}

static size_t copy_line(struct reader *r, char *buf, size_t n)
{
	while (r->pos < r->len && !is_eol(r->text[r->pos]))
		buf[n++] = r->text[r->pos++];
	return n;
}

/* Java counts a line's trailing backslashes within that natural line only. */
static bool continues(const char *buf, size_t from, size_t n)
{
	size_t k = 0;

	while (n - k > from && buf[n - 1 - k] == '\\')
		k++;
	return k % 2 == 1;
}

/* One logical line into buf, continuations joined, escapes kept. */
static size_t read_logical(struct reader *r, char *buf)
{
	size_t chunk = 0;
	size_t n = copy_line(r, buf, 0);

	while (continues(buf, chunk, n)) {
		n--; /* the continuation backslash itself */
		eat_eol(r);
		/* Java skips blanks and whole blank lines after a continuation. */
		while (r->pos < r->len &&
		       (is_blank(r->text[r->pos]) || is_eol(r->text[r->pos]))) {
			if (is_eol(r->text[r->pos]))
				eat_eol(r);
			else
				r->pos++;
		}
		chunk = n;
		n = copy_line(r, buf, n);
	}
	eat_eol(r);
	return n;
}

static int hex4(const char *s, size_t n, size_t at, uint32_t *out)
{
	uint32_t v = 0;

	if (at + 4 > n)
		return KM_ECFGSYNTAX;
	for (size_t k = at; k < at + 4; k++) {
		char c = s[k];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return KM_ECFGSYNTAX;
	}
	*out = v;
	return 0;
}

static void put_utf8(uint32_t cp, char *out, size_t *o)
{
	unsigned char *u = (unsigned char *)out + *o;

	if (cp < 0x80) {
		u[0] = (unsigned char)cp;
		*o += 1;
	} else if (cp < 0x800) {
		u[0] = (unsigned char)(0xc0 | (cp >> 6));
		u[1] = (unsigned char)(0x80 | (cp & 0x3f));
		*o += 2;
	} else if (cp < 0x10000) {
		u[0] = (unsigned char)(0xe0 | (cp >> 12));
		u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (unsigned char)(0x80 | (cp & 0x3f));
		*o += 3;
	} else {
		u[0] = (unsigned char)(0xf0 | (cp >> 18));
		u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (unsigned char)(0x80 | (cp & 0x3f));
		*o += 4;
	}
}

/* \uXXXX at s[*i] (the backslash), a surrogate pair as one code point. The
 * output never outgrows the input: 6 bytes in give at most 3 out. */
static int decode_u(const char *s, size_t n, size_t *i, char *out, size_t *o)
{
	uint32_t cp, lo;

	if (hex4(s, n, *i + 2, &cp) < 0)
		return KM_ECFGSYNTAX;
	*i += 6;
	if (cp >= 0xdc00 && cp <= 0xdfff)
		return KM_ECFGSYNTAX;
	if (cp >= 0xd800 && cp <= 0xdbff) {
		if (*i + 1 >= n || s[*i] != '\\' || s[*i + 1] != 'u' ||
		    hex4(s, n, *i + 2, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
			return KM_ECFGSYNTAX;
		*i += 6;
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
	}
	if (cp == 0)
		return KM_ECFGSYNTAX;
	put_utf8(cp, out, o);
	return 0;
}

/* The escape starting with the backslash at s[*i]. */
static int decode_escape(const char *s, size_t n, size_t *i, char *out,
			 size_t *o)
{
	char c;

	KM_ASSERT(s[*i] == '\\');
	if (*i + 1 >= n) { /* a stray backslash at the very end: dropped */
		*i += 1;
		return 0;
	}
	c = s[*i + 1];
	if (c == 'u')
		return decode_u(s, n, i, out, o);
	switch (c) {
	case 't': out[(*o)++] = '\t'; break;
	case 'n': out[(*o)++] = '\n'; break;
	case 'r': out[(*o)++] = '\r'; break;
	case 'f': out[(*o)++] = '\f'; break;
	default: out[(*o)++] = c; break; /* "\\", "\=", "\ ", "\#", ... */
	}
	*i += 2;
	return 0;
}

/* Split a logical line into key and value, decoding both into out (which
 * holds n + 2 bytes: decoding never grows the text). */
static int split_pair(const char *raw, size_t n, char *out, char **key,
		      char **value)
{
	size_t i = 0, o = 0, keep;
	bool has_sep = false;
	int rc;

	while (i < n) {
		char c = raw[i];

		if (c == '\\') {
			if ((rc = decode_escape(raw, n, &i, out, &o)) < 0)
				return rc;
			continue;
		}
		i++;
		if (c == '=' || c == ':') {
			has_sep = true;
			break;
		}
		if (is_blank(c))
			break;
		out[o++] = c;
	}
	out[o++] = '\0';
	*key = out;
	for (; i < n; i++) {
		if (is_blank(raw[i]))
			continue;
		if (has_sep || (raw[i] != '=' && raw[i] != ':'))
			break;
		has_sep = true;
	}
	*value = out + o;
	keep = o;
	while (i < n) {
		if (raw[i] == '\\') {
			if ((rc = decode_escape(raw, n, &i, out, &o)) < 0)
				return rc;
			keep = o; /* escaped blanks are never trimmed */
		} else {
			out[o++] = raw[i++];
		}
	}
	while (o > keep && is_blank(out[o - 1]))
		o--;
	out[o] = '\0';
	return 0;
}

static uint32_t line_of(const char *text, size_t at)
{
	struct reader r = { text, at, 0, 1 };

	while (r.pos < r.len) {
		if (is_eol(text[r.pos]))
			eat_eol(&r);
		else
			r.pos++;
	}
	return r.line;
}

static int syntax_error(uint32_t line, const char *what, uint32_t *err_line,
			const char **err_what)
{
	if (err_line != NULL)
		*err_line = line;
	if (err_what != NULL)
		*err_what = what;
	return KM_ECFGSYNTAX;
}

int km_props_parse(const char *text, size_t len, km_props_fn fn, void *arg,
		   uint32_t *err_line, const char **err_what)
{
	struct reader r = { text, len, 0, 1 };
	const char *nul = memchr(text, '\0', len);
	char *raw, *out, *key, *value;
	int rc = 0;

	if (nul != NULL)
		return syntax_error(line_of(text, (size_t)(nul - text)),
				    "NUL byte in the text", err_line, err_what);
	raw = malloc(2 * len + 4);
	if (raw == NULL)
		return -ENOMEM;
	out = raw + len + 1;
	/* Each pass consumes at least one byte: bounded by len. */
	while (rc == 0 && r.pos < r.len) {
		uint32_t start;
		size_t n;

		while (r.pos < r.len && is_blank(text[r.pos]))
			r.pos++;
		if (r.pos >= r.len)
			break;
		if (is_eol(text[r.pos])) {
			eat_eol(&r);
			continue;
		}
		if (text[r.pos] == '#' || text[r.pos] == '!') {
			while (r.pos < r.len && !is_eol(text[r.pos]))
				r.pos++;
			eat_eol(&r);
			continue;
		}
		start = r.line;
		n = read_logical(&r, raw);
		if (split_pair(raw, n, out, &key, &value) < 0)
			rc = syntax_error(start,
					  "malformed \\uxxxx escape (needs 4 hex digits, a whole surrogate pair, not \\u0000)",
					  err_line, err_what);
		else
			rc = fn(arg, key, value, start);
	}
	free(raw);
	return rc;
}

struct sink {
	char *dst;
	size_t cap;
	size_t len;
};

static void put(struct sink *s, const char *p, size_t n)
{
	for (size_t k = 0; k < n; k++, s->len++)
		if (s->len + 1 < s->cap)
			s->dst[s->len] = p[k];
}

static void put_escaped_char(struct sink *s, unsigned char c)
{
	static const char hex[] = "0123456789ABCDEF";
	char u[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };

	switch (c) {
	case '\\': put(s, "\\\\", 2); break;
	case '\t': put(s, "\\t", 2); break;
	case '\n': put(s, "\\n", 2); break;
	case '\r': put(s, "\\r", 2); break;
	case '\f': put(s, "\\f", 2); break;
	default:
		if (c < 0x20 || c == 0x7f)
			put(s, u, sizeof(u));
		else
			put(s, (const char *)&c, 1);
		break;
	}
}

size_t km_props_escape(char *dst, size_t cap, const char *src, int is_key)
{
	struct sink s = { dst, cap, 0 };
	size_t n = strlen(src), tail = n;

	while (tail > 0 && src[tail - 1] == ' ')
		tail--;
	for (size_t k = 0; k < n; k++) {
		char c = src[k];
		bool esc = false;

		if (c == ' ')
			esc = is_key || k == 0 || k >= tail;
		else if (c == '=' || c == ':')
			esc = is_key;
		else if (c == '#' || c == '!')
			esc = is_key && k == 0;
		if (esc) {
			put(&s, "\\", 1);
			put(&s, &c, 1);
		} else {
			put_escaped_char(&s, (unsigned char)c);
		}
	}
	if (cap > 0)
		dst[s.len < cap ? s.len : cap - 1] = '\0';
	return s.len;
}
