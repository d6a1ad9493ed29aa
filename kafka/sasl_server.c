/* SASL server exchanges and the server's side of the Kafka codecs
 * (sasl_server.h). The messages a failure gives the client are Kafka's
 * (PlainSaslServer, ScramSaslServer): a SaslAuthenticationException's text
 * goes to the client as it is, any other failure becomes the
 * authenticator's generic "invalid credentials" message (reply ""). */
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

static int fail(struct km_sasl_server *s, const char *why, const char *reply)
{
	snprintf(s->why, sizeof(s->why), "%s", why);
	snprintf(s->reply, sizeof(s->reply), "%s", reply);
	s->step = KM_SASL_SRV_FAILED;
	OPENSSL_cleanse(&s->cred, sizeof(s->cred));
	return KM_EAUTH;
}

int km_sasl_server_start(struct km_sasl_server *s, enum km_sasl_mech mech,
			 const char *nonce)
{
	unsigned char raw[24];

	memset(s, 0, sizeof(*s));
	s->mech = mech;
	if (mech == KM_SASL_NONE)
		return KM_ECFGVALUE;
	if (nonce != NULL) {
		snprintf(s->nonce, sizeof(s->nonce), "%s", nonce);
		return 0;
	}
	if (RAND_bytes(raw, sizeof(raw)) != 1)
		return -EIO;
	EVP_EncodeBlock((unsigned char *)s->nonce, raw, sizeof(raw));
	return 0;
}

/* authzid NUL authcid NUL passwd (RFC 4616 2). */
static int plain_step(struct km_sasl_server *s,
		      const struct km_sasl_users *users, const uint8_t *in,
		      size_t in_len)
{
	char msg[KM_SASL_MSG_BYTES_MAX + 1];
	const char *authz = msg, *user, *pass;
	const struct km_scram_cred *c;

	if (in_len >= sizeof(msg) || memchr(in, 0, in_len) == NULL)
		return fail(s, "PLAIN: not authzid NUL user NUL password", "");
	memcpy(msg, in, in_len);
	msg[in_len] = '\0';
	user = authz + strlen(authz) + 1;
	if ((size_t)(user - msg) >= in_len)
		return fail(s, "PLAIN: not authzid NUL user NUL password", "");
	pass = user + strlen(user) + 1;
	if ((size_t)(pass - msg) > in_len ||
	    (size_t)(pass - msg) + strlen(pass) != in_len)
		return fail(s, "PLAIN: not three fields", "");
	if (user[0] == '\0')
		return fail(s, "PLAIN: no user",
			    "Authentication failed: username not specified");
	if (pass[0] == '\0')
		return fail(s, "PLAIN: no password",
			    "Authentication failed: password not specified");
	if (strlen(user) >= sizeof(s->user))
		return fail(s, "PLAIN: a user name above 255 bytes", "");
	memcpy(s->user, user, strlen(user) + 1);
	if (authz[0] != '\0' && strcmp(authz, user) != 0)
		return fail(s, "PLAIN: an authorization id that is not the user",
			    "Authentication failed: Client requested an "
			    "authorization id that is different from username");
	c = km_sasl_users_find(users, user, KM_SASL_NONE);
	if (c == NULL || !km_sasl_cred_check(c, pass)) {
		OPENSSL_cleanse(msg, sizeof(msg));
		return fail(s, c == NULL ? "unknown user" : "wrong password",
			    "Authentication failed: Invalid username or "
			    "password");
	}
	OPENSSL_cleanse(msg, sizeof(msg));
	s->step = KM_SASL_SRV_DONE;
	return 0;
}

/* A SCRAM attribute "k=" at the start of p, up to the next ','. */
static const char *take_attr(const char *p, char key, char *out, size_t cap)
{
	const char *end;
	size_t n;

	if (p == NULL || p[0] != key || p[1] != '=')
		return NULL;
	end = strchr(p + 2, ',');
	n = end ? (size_t)(end - p - 2) : strlen(p + 2);
	if (n >= cap)
		return NULL;
	memcpy(out, p + 2, n);
	out[n] = '\0';
	return end ? end + 1 : p + 2 + n;
}

/* RFC 5802 5.1's saslname: "=2C" is ',', "=3D" is '=', no other '='. */
static bool unescape_name(const char *in, char *out, size_t cap)
{
	size_t n = 0;

	for (const char *p = in; *p != '\0'; p++) {
		char c = *p;

		if (c == '=') {
			if (strncmp(p, "=2C", 3) != 0 && strncmp(p, "=3D", 3) != 0)
				return false;
			c = p[1] == '2' ? ',' : '=';
			p += 2;
		}
		if (n + 1 >= cap)
			return false;
		out[n++] = c;
	}
	out[n] = '\0';
	return n > 0;
}

/* gs2-header and client-first-message-bare (RFC 5802 7). */
static int parse_client_first(struct km_sasl_server *s, const char *msg,
			      char *authz, size_t authz_cap, char *cnonce,
			      size_t nonce_cap)
{
	char name[KM_SASL_TEXT_BYTES];
	const char *p = msg, *bare;

	authz[0] = '\0';
	if (strncmp(p, "n,", 2) != 0)
		return -1; /* Kafka binds no channel: "y," and "p=" fail */
	p += 2;
	if (*p == 'a')
		p = take_attr(p, 'a', authz, authz_cap);
	else if (*p == ',')
		p++;
	else
		p = NULL;
	if (p == NULL || (size_t)(p - msg) >= sizeof(s->gs2))
		return -1;
	memcpy(s->gs2, msg, (size_t)(p - msg));
	s->gs2[p - msg] = '\0';
	bare = p;
	p = take_attr(p, 'n', name, sizeof(name));
	p = take_attr(p, 'r', cnonce, nonce_cap);
	if (p == NULL || cnonce[0] == '\0' ||
	    !unescape_name(name, s->user, sizeof(s->user)) ||
	    strlen(bare) >= sizeof(s->first_bare))
		return -1;
	snprintf(s->first_bare, sizeof(s->first_bare), "%s", bare);
	return 0;
}

static int scram_first(struct km_sasl_server *s,
		       const struct km_sasl_users *users, const char *msg,
		       uint8_t *out, size_t cap)
{
	char authz[KM_SASL_TEXT_BYTES], cnonce[KM_SASL_TEXT_BYTES / 2];
	char salt64[KM_SCRAM_SALT_BYTES_MAX * 2], nonce[KM_SASL_TEXT_BYTES];
	const struct km_scram_cred *c;
	int n;

	if (parse_client_first(s, msg, authz, sizeof(authz), cnonce,
			       sizeof(cnonce)) < 0)
		return fail(s, "malformed SCRAM client-first-message", "");
	c = km_sasl_users_find(users, s->user, s->mech);
	if (c == NULL)
		return fail(s, "unknown user", "");
	if (authz[0] != '\0' && strcmp(authz, s->user) != 0)
		return fail(s, "an authorization id that is not the user",
			    "Authentication failed: Client requested an "
			    "authorization id that is different from username");
	if (c->iterations < KM_SCRAM_ITERATIONS_MIN)
		return fail(s, "fewer iterations than 4096", "");
	s->cred = *c;
	if (strlen(cnonce) + strlen(s->nonce) >= sizeof(nonce))
		return fail(s, "a client nonce too long", "");
	memcpy(nonce, cnonce, strlen(cnonce));
	memcpy(nonce + strlen(cnonce), s->nonce, strlen(s->nonce) + 1);
	memcpy(s->nonce, nonce, sizeof(nonce));
	s->cnonce_len = (uint32_t)strlen(cnonce);
	EVP_EncodeBlock((unsigned char *)salt64, c->salt, (int)c->salt_len);
	n = snprintf(s->server_first, sizeof(s->server_first), "r=%s,s=%s,i=%d",
		     s->nonce, salt64, (int)c->iterations);
	if (n < 0 || (size_t)n >= sizeof(s->server_first) || (size_t)n > cap)
		return KM_ENOSPACE;
	memcpy(out, s->server_first, (size_t)n);
	s->step = KM_SASL_SRV_FINAL;
	return n;
}

/* The nonce of server-first-message; or, as librdkafka before 2.6.1 sends
 * it (its #4895), our client's nonce once more in front of it: still
 * bound to our server nonce, so no replay, and kcat 2.0.2 can log in. */
static bool nonce_ok(const struct km_sasl_server *s, const char *nonce)
{
	size_t cl = s->cnonce_len;

	return strcmp(nonce, s->nonce) == 0 ||
	       (strlen(nonce) == cl + strlen(s->nonce) &&
		strncmp(nonce, s->nonce, cl) == 0 &&
		strcmp(nonce + cl, s->nonce) == 0);
}

/* client-final-message: "c=..,r=..[,ext],p=.." (RFC 5802 7); *proof_at
 * is where ",p=" starts (the end of client-final-message-without-proof). */
static bool parse_client_final(const struct km_sasl_server *s, const char *msg,
			       size_t *proof_at, uint8_t *proof, int *proof_len)
{
	char cb[KM_SASL_TEXT_BYTES], nonce[KM_SASL_TEXT_BYTES];
	char want[KM_SASL_TEXT_BYTES];
	const char *p = take_attr(msg, 'c', cb, sizeof(cb));
	const char *pp = strstr(msg, ",p=");

	p = take_attr(p, 'r', nonce, sizeof(nonce));
	if (p == NULL || pp == NULL || strchr(pp + 3, ',') != NULL)
		return false;
	EVP_EncodeBlock((unsigned char *)want, (const unsigned char *)s->gs2,
			(int)strlen(s->gs2));
	if (strcmp(cb, want) != 0 || !nonce_ok(s, nonce))
		return false;
	*proof_at = (size_t)(pp - msg);
	*proof_len = km_sasl_b64_decode(pp + 3, proof, KM_SCRAM_HASH_BYTES_MAX + 4);
	return *proof_len == (int)km_sasl_scram_hash_bytes(s->mech);
}

static int scram_final(struct km_sasl_server *s, const char *msg,
		       uint8_t *out, size_t cap)
{
	const EVP_MD *md = s->mech == KM_SASL_SCRAM_SHA_512 ? EVP_sha512()
							    : EVP_sha256();
	uint32_t hl = km_sasl_scram_hash_bytes(s->mech);
	char auth[3 * KM_SASL_MSG_BYTES_MAX], v64[128];
	uint8_t proof[KM_SCRAM_HASH_BYTES_MAX + 4], sig[KM_SCRAM_HASH_BYTES_MAX];
	uint8_t stored[KM_SCRAM_HASH_BYTES_MAX];
	unsigned int len = 0;
	size_t without;
	int plen, n;

	if (!parse_client_final(s, msg, &without, proof, &plen))
		return fail(s, "malformed SCRAM client-final-message or its "
			       "nonce or channel binding is not ours", "");
	n = snprintf(auth, sizeof(auth), "%s,%s,%.*s", s->first_bare,
		     s->server_first, (int)without, msg);
	if (n < 0 || (size_t)n >= sizeof(auth) ||
	    HMAC(md, s->cred.stored_key, (int)hl, (uint8_t *)auth, (size_t)n,
		 sig, &len) == NULL)
		return fail(s, "OpenSSL could not compute the signature", "");
	for (uint32_t i = 0; i < hl; i++)
		proof[i] ^= sig[i]; /* the ClientKey, if the proof is right */
	if (EVP_Digest(proof, hl, stored, NULL, md, NULL) != 1 ||
	    CRYPTO_memcmp(stored, s->cred.stored_key, hl) != 0)
		return fail(s, "wrong password (the client's proof does not "
			       "match)", "");
	if (HMAC(md, s->cred.server_key, (int)hl, (uint8_t *)auth, (size_t)n,
		 sig, &len) == NULL)
		return fail(s, "OpenSSL could not compute the signature", "");
	EVP_EncodeBlock((unsigned char *)v64, sig, (int)hl);
	OPENSSL_cleanse(&s->cred, sizeof(s->cred));
	n = snprintf((char *)out, cap, "v=%s", v64);
	if (n < 0 || (size_t)n >= cap)
		return KM_ENOSPACE;
	s->step = KM_SASL_SRV_DONE;
	return n;
}

int km_sasl_server_step(struct km_sasl_server *s,
			const struct km_sasl_users *users, const uint8_t *in,
			size_t in_len, uint8_t *out, size_t cap)
{
	char msg[KM_SASL_MSG_BYTES_MAX + 1];

	if (s->step == KM_SASL_SRV_DONE || s->step == KM_SASL_SRV_FAILED)
		return fail(s, "a message after the exchange ended", "");
	if (s->mech == KM_SASL_PLAIN)
		return plain_step(s, users, in, in_len);
	if (in_len >= sizeof(msg) || (in_len > 0 && memchr(in, 0, in_len)))
		return fail(s, "SCRAM message too long or with a NUL", "");
	if (in_len > 0)
		memcpy(msg, in, in_len);
	msg[in_len] = '\0';
	if (s->step == KM_SASL_SRV_START)
		return scram_first(s, users, msg, out, cap);
	return scram_final(s, msg, out, cap);
}

void km_sasl_server_wipe(struct km_sasl_server *s)
{
	OPENSSL_cleanse(s, sizeof(*s));
}

/* ---- codecs ----
 * SaslHandshakeRequest.json: "validVersions": "0-1", "flexibleVersions":
 * "none"; { "name": "Mechanism", "type": "string", "versions": "0+" }.
 * SaslAuthenticateRequest.json: "validVersions": "0-2",
 * "flexibleVersions": "2+"; { "name": "AuthBytes", "type": "bytes",
 * "versions": "0+" }. The responses: ErrorCode, ErrorMessage ("nullable
 * string"), AuthBytes, SessionLifetimeMs ("versions": "1+"); the
 * handshake's Mechanisms ("[]string"). */

int km_sasl_handshake_req_decode(struct km_wire_rd *r, int16_t version,
				 char *mech, size_t cap)
{
	struct km_wire_name n;

	if (version < 0 || version > 1)
		return km_wire_rd_fail(r, KM_EWIREVERSION);
	if (km_wire_rd_name(r, false, false, &n) < 0)
		return r->err;
	if ((size_t)n.len >= cap)
		return km_wire_rd_fail(r, KM_EWIRESTRLEN);
	memcpy(mech, n.s, (size_t)n.len);
	mech[n.len] = '\0';
	return km_wire_rd_end(r);
}

int km_sasl_handshake_resp_encode(struct km_wire_wr *w, int16_t version,
				  int16_t error_code, const char *mechs)
{
	int32_t count = 0;

	if (version < 0 || version > 1)
		return km_wire_wr_fail(w, KM_EWIREVERSION);
	for (const char *p = mechs; *p != '\0'; p++)
		count += p == mechs || p[-1] == ',';
	km_wire_wr_i16(w, error_code);
	km_wire_wr_array(w, false, false, count);
	for (const char *p = mechs; *p != '\0';) {
		size_t n = strcspn(p, ",");

		km_wire_wr_string(w, false, false, p, n);
		p += n + (p[n] == ',');
	}
	return w->err;
}

int km_sasl_auth_req_decode(struct km_wire_rd *r, int16_t version,
			    uint8_t *out, size_t cap, uint32_t *len)
{
	bool flex = version >= 2;
	struct km_wire_span sp;

	*len = 0;
	if (version < 0 || version > KM_SASL_SERVER_AUTH_VERSION_MAX)
		return km_wire_rd_fail(r, KM_EWIREVERSION);
	if (km_wire_rd_bytes(r, flex, false, &sp) < 0)
		return r->err;
	if ((uint32_t)sp.len > cap)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	*len = (uint32_t)km_wire_span_copy(r->chain, &sp, out, cap);
	if (flex)
		km_wire_rd_tags(r);
	return km_wire_rd_end(r);
}

int km_sasl_auth_resp_encode(struct km_wire_wr *w, int16_t version,
			     int16_t error_code, const char *message,
			     const uint8_t *bytes, uint32_t len,
			     int64_t session_lifetime_ms)
{
	bool flex = version >= 2;

	if (version < 0 || version > KM_SASL_SERVER_AUTH_VERSION_MAX)
		return km_wire_wr_fail(w, KM_EWIREVERSION);
	km_wire_wr_i16(w, error_code);
	km_wire_wr_string(w, flex, true, message,
			  message ? strlen(message) : 0);
	km_wire_wr_bytes(w, flex, false, bytes, (int32_t)len);
	if (version >= 1)
		km_wire_wr_i64(w, session_lifetime_ms);
	if (flex)
		km_wire_wr_tags(w);
	return w->err;
}
