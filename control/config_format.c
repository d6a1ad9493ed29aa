/* The writer every key's formatter appends to when kmirrord prints its
 * effective configuration as properties text (km_config_format, with the
 * key table in config_keys.c): bounded, it counts what would not fit. */
#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/km_assert.h"
#include "control/config_pvt.h"
#include "control/props.h"

void km_config_emit(struct km_config_sink *s, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(s->len < s->cap ? s->buf + s->len : NULL,
		      s->len < s->cap ? s->cap - s->len : 0, fmt, ap);
	va_end(ap);
	KM_ASSERT(n >= 0);
	s->len += (size_t)n;
}

void km_config_emit_escaped(struct km_config_sink *s, const char *value)
{
	bool room = s->len < s->cap;

	s->len += km_props_escape(room ? s->buf + s->len : NULL,
				  room ? s->cap - s->len : 0, value, 0);
}

void km_config_emit_addr(struct km_config_sink *s,
			 const struct km_config_addr *a)
{
	if (strchr(a->host, ':') != NULL)
		km_config_emit(s, "[%s]:%u", a->host, a->port);
	else
		km_config_emit(s, "%s:%u", a->host, a->port);
}

void km_config_emit_ipv4(struct km_config_sink *s, uint32_t be)
{
	char text[INET_ADDRSTRLEN];
	struct in_addr a = { .s_addr = be };

	inet_ntop(AF_INET, &a, text, sizeof(text));
	km_config_emit(s, "%s", text);
}
