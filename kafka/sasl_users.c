/* Stored SCRAM credentials and the users file's text (sasl_server.h). */
#include <ctype.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "kafka/sasl_server.h"

uint32_t km_sasl_scram_hash_bytes(enum km_sasl_mech mech)
{
	return mech == KM_SASL_SCRAM_SHA_256 ? 32
	       : mech == KM_SASL_SCRAM_SHA_512 ? 64 : 0;
}

static const EVP_MD *mech_md(enum km_sasl_mech mech)
{
	return mech == KM_SASL_SCRAM_SHA_512 ? EVP_sha512() : EVP_sha256();
}

/* A name goes on a whitespace-separated line and into log lines. */
static bool valid_user(const char *user)
{
	size_t n = strlen(user);

	if (n == 0 || n >= KM_SASL_TEXT_BYTES)
		return false;
	for (size_t i = 0; i < n; i++)
		if (isspace((unsigned char)user[i]) ||
		    iscntrl((unsigned char)user[i]))
			return false;
	return true;
}

/* SaltedPassword -> StoredKey, ServerKey (RFC 5802 3). */
static bool derive(enum km_sasl_mech mech, const char *password,
		   const uint8_t *salt, uint32_t salt_len, int32_t iterations,
		   uint8_t *stored, uint8_t *server)
{
	const EVP_MD *md = mech_md(mech);
	uint32_t hl = km_sasl_scram_hash_bytes(mech);
	uint8_t salted[KM_SCRAM_HASH_BYTES_MAX], ckey[KM_SCRAM_HASH_BYTES_MAX];
	unsigned int len = 0;
	bool ok;

	ok = PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt,
			       (int)salt_len, iterations, md, (int)hl,
			       salted) == 1 &&
	     HMAC(md, salted, (int)hl, (const uint8_t *)"Client Key", 10,
		  ckey, &len) != NULL &&
	     EVP_Digest(ckey, hl, stored, NULL, md, NULL) == 1 &&
	     (server == NULL ||
	      HMAC(md, salted, (int)hl, (const uint8_t *)"Server Key", 10,
		   server, &len) != NULL);
	OPENSSL_cleanse(salted, sizeof(salted));
	OPENSSL_cleanse(ckey, sizeof(ckey));
	return ok;
}

int km_sasl_cred_make(enum km_sasl_mech mech, const char *user,
		       const char *password, int32_t iterations,
		       const uint8_t *salt, uint32_t salt_len,
		       struct km_scram_cred *out)
{
	memset(out, 0, sizeof(*out));
	if (km_sasl_scram_hash_bytes(mech) == 0 || !valid_user(user) ||
	    iterations < KM_SCRAM_ITERATIONS_MIN ||
	    iterations > KM_SCRAM_ITERATIONS_MAX ||
	    (salt != NULL && (salt_len == 0 || salt_len > sizeof(out->salt))))
		return KM_ECFGVALUE;
	snprintf(out->user, sizeof(out->user), "%s", user);
	out->mech = mech;
	out->iterations = iterations;
	if (salt != NULL) {
		memcpy(out->salt, salt, salt_len);
		out->salt_len = salt_len;
	} else {
		out->salt_len = 32;
		if (RAND_bytes(out->salt, (int)out->salt_len) != 1)
			return -EIO;
	}
	if (!derive(mech, password, out->salt, out->salt_len, iterations,
		    out->stored_key, out->server_key))
		return -EIO;
	return 0;
}

bool km_sasl_cred_check(const struct km_scram_cred *cred,
			 const char *password)
{
	uint8_t stored[KM_SCRAM_HASH_BYTES_MAX];
	uint32_t hl = km_sasl_scram_hash_bytes(cred->mech);
	bool ok = hl > 0 &&
		  derive(cred->mech, password, cred->salt, cred->salt_len,
			 cred->iterations, stored, NULL) &&
		  CRYPTO_memcmp(stored, cred->stored_key, hl) == 0;

	OPENSSL_cleanse(stored, sizeof(stored));
	return ok;
}

/* ---- the table ---- */

static int find_index(const struct km_sasl_users *u, const char *user,
		      enum km_sasl_mech mech)
{
	for (uint32_t i = 0; i < u->n; i++)
		if (strcmp(u->v[i].user, user) == 0 &&
		    (mech == KM_SASL_NONE || u->v[i].mech == mech))
			return (int)i;
	return -1;
}

const struct km_scram_cred *km_sasl_users_find(const struct km_sasl_users *u,
					       const char *user,
					       enum km_sasl_mech mech)
{
	int i = find_index(u, user, mech);

	return i < 0 ? NULL : &u->v[i];
}

int km_sasl_users_put(struct km_sasl_users *u, const struct km_scram_cred *c)
{
	int i = find_index(u, c->user, c->mech);

	if (i >= 0) {
		u->v[i] = *c;
		return 0;
	}
	if (u->n == u->cap) {
		uint32_t cap = u->cap ? 2 * u->cap : 8;
		struct km_scram_cred *v = realloc(u->v, cap * sizeof(*v));

		if (v == NULL)
			return -ENOMEM;
		u->v = v;
		u->cap = cap;
	}
	u->v[u->n++] = *c;
	return 0;
}

int km_sasl_users_remove(struct km_sasl_users *u, const char *user)
{
	uint32_t kept = 0;
	int gone = 0;

	for (uint32_t i = 0; i < u->n; i++) {
		if (strcmp(u->v[i].user, user) == 0) {
			OPENSSL_cleanse(&u->v[i], sizeof(u->v[i]));
			gone++;
			continue;
		}
		u->v[kept++] = u->v[i];
	}
	u->n = kept;
	return gone;
}

void km_sasl_users_free(struct km_sasl_users *u)
{
	if (u->v != NULL)
		OPENSSL_cleanse(u->v, u->cap * sizeof(*u->v));
	free(u->v);
	memset(u, 0, sizeof(*u));
}

/* ---- the file's text ---- */

static int b64_field(const char *val, uint8_t *out, uint32_t want_min,
		     uint32_t want_max)
{
	uint8_t tmp[KM_SCRAM_SALT_BYTES_MAX + 4];
	int n = km_sasl_b64_decode(val, tmp, sizeof(tmp));

	if (n < (int)want_min || n > (int)want_max)
		return -1;
	memcpy(out, tmp, (size_t)n);
	return n;
}

/* "salt=..,stored_key=..,server_key=..,iterations=N" into c. */
static const char *parse_cred_text(char *text, struct km_scram_cred *c)
{
	uint32_t hl = km_sasl_scram_hash_bytes(c->mech);
	int seen = 0, n;
	char *save = NULL, *end;

	for (char *kv = strtok_r(text, ",", &save); kv != NULL;
	     kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');

		if (eq == NULL)
			return "a field without '='";
		*eq++ = '\0';
		if (strcmp(kv, "salt") == 0 &&
		    (n = b64_field(eq, c->salt, 1, sizeof(c->salt))) > 0)
			c->salt_len = (uint32_t)n, seen |= 1;
		else if (strcmp(kv, "stored_key") == 0 &&
			 b64_field(eq, c->stored_key, hl, hl) > 0)
			seen |= 2;
		else if (strcmp(kv, "server_key") == 0 &&
			 b64_field(eq, c->server_key, hl, hl) > 0)
			seen |= 4;
		else if (strcmp(kv, "iterations") == 0) {
			long it = strtol(eq, &end, 10);

			if (*eq == '\0' || *end != '\0' ||
			    it < KM_SCRAM_ITERATIONS_MIN ||
			    it > KM_SCRAM_ITERATIONS_MAX)
				return "iterations not a number in [4096, 16777216]";
			c->iterations = (int32_t)it;
			seen |= 8;
		} else
			return "a field that is not salt, stored_key, "
			       "server_key or iterations in base64 of the "
			       "mechanism's hash length";
	}
	return seen == 15 ? NULL
			  : "salt, stored_key, server_key and iterations "
			    "are not all there";
}

static const char *parse_line(char *line, struct km_scram_cred *c)
{
	char *save = NULL;
	char *name = strtok_r(line, " \t", &save);
	char *mech = strtok_r(NULL, " \t", &save);
	char *cred = strtok_r(NULL, " \t", &save);

	memset(c, 0, sizeof(*c));
	if (name == NULL || mech == NULL || cred == NULL ||
	    strtok_r(NULL, " \t", &save) != NULL)
		return "expected NAME MECHANISM salt=..,stored_key=..,"
		       "server_key=..,iterations=N";
	if (!valid_user(name))
		return "the name is longer than 255 bytes";
	snprintf(c->user, sizeof(c->user), "%s", name);
	if (km_sasl_mech_parse(mech, &c->mech) < 0 ||
	    c->mech == KM_SASL_PLAIN)
		return "the mechanism is not SCRAM-SHA-256 or SCRAM-SHA-512";
	return parse_cred_text(cred, c);
}

int km_sasl_users_parse(const char *text, size_t len,
			struct km_sasl_users *out, char *why, size_t why_cap)
{
	char line[1024];
	size_t at = 0;
	int lineno = 0, rc = 0;

	km_sasl_users_free(out);
	while (at < len && rc == 0) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
		const char *err = NULL;
		struct km_scram_cred c;
		char *p;

		lineno++;
		if (n >= sizeof(line))
			err = "longer than 1023 bytes";
		else {
			memcpy(line, text + at, n);
			line[n] = '\0';
			line[strcspn(line, "\r")] = '\0';
		}
		at += n + 1;
		for (p = line; err == NULL && isspace((unsigned char)*p); p++)
			;
		if (err == NULL && (*p == '\0' || *p == '#'))
			continue;
		if (err == NULL && (err = parse_line(p, &c)) == NULL &&
		    km_sasl_users_find(out, c.user, c.mech) != NULL)
			err = "a second credential for this name and mechanism";
		if (err != NULL) {
			snprintf(why, why_cap, "line %d: %s", lineno, err);
			rc = KM_ECFGVALUE;
		} else
			rc = km_sasl_users_put(out, &c);
		OPENSSL_cleanse(&c, sizeof(c));
	}
	OPENSSL_cleanse(line, sizeof(line));
	return rc;
}

static void b64(const uint8_t *in, uint32_t n, char *out)
{
	EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

char *km_sasl_users_format(const struct km_sasl_users *u)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (f == NULL)
		return NULL;
	fputs("# kmirrord sasl.users.file, written by kmirror-users: one SCRAM "
	      "credential a line,\n# NAME MECHANISM salt=,stored_key=,"
	      "server_key=,iterations= (base64; no password)\n", f);
	for (uint32_t i = 0; i < u->n; i++) {
		const struct km_scram_cred *c = &u->v[i];
		uint32_t hl = km_sasl_scram_hash_bytes(c->mech);
		char salt[KM_SCRAM_SALT_BYTES_MAX * 2], st[128], sv[128];

		b64(c->salt, c->salt_len, salt);
		b64(c->stored_key, hl, st);
		b64(c->server_key, hl, sv);
		fprintf(f, "%s %s salt=%s,stored_key=%s,server_key=%s,"
			"iterations=%d\n", c->user, km_sasl_mech_name(c->mech),
			salt, st, sv, (int)c->iterations);
	}
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}
