/* SASL client exchanges and their Kafka codecs (sasl.h). */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "kafka/sasl.h"

const char *km_sasl_mech_name(enum km_sasl_mech m)
{
	switch (m) {
	case KM_SASL_PLAIN:
		return "PLAIN";
	case KM_SASL_SCRAM_SHA_256:
		return "SCRAM-SHA-256";
	case KM_SASL_SCRAM_SHA_512:
		return "SCRAM-SHA-512";
	case KM_SASL_NONE:
	default:
		return "";
	}
}

int km_sasl_mech_parse(const char *s, enum km_sasl_mech *out)
{
	for (int m = KM_SASL_PLAIN; m <= KM_SASL_SCRAM_SHA_512; m++)
		if (strcmp(s, km_sasl_mech_name((enum km_sasl_mech)m)) == 0) {
			*out = (enum km_sasl_mech)m;
			return 0;
		}
	return KM_ECFGVALUE;
}

/* ---- codecs ---- */

int km_sasl_handshake_req_encode(struct km_wire_wr *w, int16_t version,
				 const char *mechanism)
{
	(void)version; /* v0 and v1 share the body */
	km_wire_wr_string(w, false, false, mechanism, strlen(mechanism));
	return w->err;
}

int km_sasl_handshake_resp_decode(struct km_wire_rd *r, int16_t version,
				  struct km_sasl_handshake_resp *out)
{
	struct km_wire_name n;
	int32_t count = 0;
	size_t used = 0;

	(void)version;
	out->mechanisms[0] = '\0';
	km_wire_rd_i16(r, &out->error_code);
	km_wire_rd_array(r, false, false, &count);
	for (int32_t i = 0; i < count && r->err == 0; i++) {
		if (km_wire_rd_name(r, false, false, &n) < 0)
			break;
		used += (size_t)snprintf(out->mechanisms + used,
					 used < sizeof(out->mechanisms)
						 ? sizeof(out->mechanisms) - used
						 : 0,
					 "%s%s", i ? "," : "", n.s);
		if (used >= sizeof(out->mechanisms))
			used = sizeof(out->mechanisms) - 1;
	}
	return r->err;
}

int km_sasl_auth_req_encode(struct km_wire_wr *w, int16_t version,
			    const void *bytes, uint32_t len)
{
	(void)version; /* v0 and v1 share the request */
	km_wire_wr_bytes(w, false, false, bytes, (int32_t)len);
	return w->err;
}

int km_sasl_auth_resp_decode(struct km_wire_rd *r, int16_t version,
			     struct km_sasl_auth_resp *out)
{
	struct km_wire_name msg;
	struct km_wire_span sp;
	bool trunc;

	memset(out, 0, sizeof(*out));
	km_wire_rd_i16(r, &out->error_code);
	km_wire_rd_name_trunc(r, false, true, &msg, &trunc);
	if (r->err == 0 && msg.len > 0)
		snprintf(out->error_message, sizeof(out->error_message), "%s",
			 msg.s);
	if (km_wire_rd_bytes(r, false, false, &sp) < 0)
		return r->err;
	if ((uint32_t)sp.len > sizeof(out->auth))
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	out->auth_len = (uint32_t)km_wire_span_copy(r->chain, &sp, out->auth,
						    sizeof(out->auth));
	if (version >= 1)
		km_wire_rd_i64(r, &out->session_lifetime_ms);
	return r->err;
}

/* ---- PLAIN and SCRAM ---- */

static int why(struct km_sasl_client *c, const char *what)
{
	snprintf(c->why, sizeof(c->why), "%s", what);
	return KM_EAUTH;
}

static const EVP_MD *scram_md(const struct km_sasl_client *c)
{
	return c->mech == KM_SASL_SCRAM_SHA_512 ? EVP_sha512() : EVP_sha256();
}

/* RFC 5802 5.1: ',' and '=' in a user name are escaped. */
static size_t saslname(const char *user, char *out, size_t cap)
{
	size_t n = 0;

	for (const char *p = user; *p != '\0' && n + 4 < cap; p++) {
		if (*p == ',' || *p == '=') {
			memcpy(out + n, *p == ',' ? "=2C" : "=3D", 3);
			n += 3;
		} else {
			out[n++] = *p;
		}
	}
	out[n] = '\0';
	return n;
}

static int random_nonce(char *out, size_t cap)
{
	unsigned char raw[18];

	if (cap < 25 || RAND_bytes(raw, sizeof(raw)) != 1)
		return -EIO;
	EVP_EncodeBlock((unsigned char *)out, raw, sizeof(raw)); /* 24 chars */
	return 0;
}

int km_sasl_client_start(struct km_sasl_client *c, enum km_sasl_mech mech,
			 const char *user, const char *password,
			 const char *nonce, uint8_t *out, size_t cap)
{
	char name[KM_SASL_TEXT_BYTES * 3];
	size_t ul = strlen(user), pl = strlen(password);
	int n;

	memset(c, 0, sizeof(*c));
	c->mech = mech;
	if (mech == KM_SASL_NONE || ul >= sizeof(c->user) ||
	    pl >= sizeof(c->password))
		return KM_ECFGVALUE;
	memcpy(c->user, user, ul + 1);
	memcpy(c->password, password, pl + 1);
	if (mech == KM_SASL_PLAIN) {
		/* authzid (empty) NUL authcid NUL passwd */
		if (ul + pl + 2 > cap)
			return KM_ENOSPACE;
		out[0] = 0;
		memcpy(out + 1, user, ul);
		out[1 + ul] = 0;
		memcpy(out + 2 + ul, password, pl);
		c->step = 1;
		return (int)(ul + pl + 2);
	}
	if (nonce != NULL)
		snprintf(c->nonce, sizeof(c->nonce), "%s", nonce);
	else if (random_nonce(c->nonce, sizeof(c->nonce)) < 0)
		return -EIO;
	saslname(user, name, sizeof(name));
	n = snprintf(c->first_bare, sizeof(c->first_bare), "n=%s,r=%s", name,
		     c->nonce);
	if (n < 0 || (size_t)n >= sizeof(c->first_bare) || (size_t)n + 3 > cap)
		return KM_ENOSPACE;
	memcpy(out, "n,,", 3); /* no channel binding, no authzid */
	memcpy(out + 3, c->first_bare, (size_t)n);
	c->step = 1;
	return n + 3;
}

/* The value of attribute `key` (one letter) in a SCRAM message, copied. */
static bool attr(const char *msg, char key, char *out, size_t cap)
{
	for (const char *p = msg; p != NULL && *p != '\0';) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (len >= 2 && p[0] == key && p[1] == '=') {
			if (len - 2 >= cap)
				return false;
			memcpy(out, p + 2, len - 2);
			out[len - 2] = '\0';
			return true;
		}
		p = end ? end + 1 : NULL;
	}
	return false;
}

int km_sasl_b64_decode(const char *in, uint8_t *out, size_t cap)
{
	size_t len = strlen(in);
	int n;

	if (len % 4 != 0 || len / 4 * 3 > cap)
		return -1;
	n = EVP_DecodeBlock(out, (const unsigned char *)in, (int)len);
	if (n < 0)
		return -1;
	for (size_t i = len; i > 0 && in[i - 1] == '='; i--)
		n--; /* EVP_DecodeBlock counts the padding as bytes */
	return n;
}

static bool hmac(const EVP_MD *md, const void *key, size_t klen,
		 const void *data, size_t dlen, uint8_t *out)
{
	unsigned int len = 0;

	return HMAC(md, key, (int)klen, data, dlen, out, &len) != NULL;
}

/* Server-first in, client-final out (RFC 5802 3). */
static int scram_final(struct km_sasl_client *c, const char *sfirst,
		       uint8_t *out, size_t cap)
{
	const EVP_MD *md = scram_md(c);
	size_t hl = (size_t)EVP_MD_get_size(md);
	char nonce[256], salt64[256], iters[16], proof64[100];
	char auth_msg[3 * KM_SASL_MSG_BYTES_MAX], without[300];
	uint8_t salt[192], salted[64], ckey[64], skey[64], stored[64];
	uint8_t csig[64], sskey[64];
	int saltn, it, n;

	if (attr(sfirst, 'e', nonce, sizeof(nonce)))
		return why(c, nonce);
	if (!attr(sfirst, 'r', nonce, sizeof(nonce)) ||
	    !attr(sfirst, 's', salt64, sizeof(salt64)) ||
	    !attr(sfirst, 'i', iters, sizeof(iters)))
		return why(c, "malformed server-first-message");
	if (strncmp(nonce, c->nonce, strlen(c->nonce)) != 0)
		return why(c, "server nonce does not extend ours");
	it = atoi(iters);
	saltn = km_sasl_b64_decode(salt64, salt, sizeof(salt));
	if (it < 1 || saltn < 0)
		return why(c, "malformed salt or iteration count");
	n = snprintf(without, sizeof(without), "c=biws,r=%s", nonce);
	if (n < 0 || (size_t)n >= sizeof(without))
		return KM_ENOSPACE;
	snprintf(auth_msg, sizeof(auth_msg), "%s,%s,%s", c->first_bare,
		 sfirst, without);
	if (PKCS5_PBKDF2_HMAC(c->password, (int)strlen(c->password), salt,
			      saltn, it, md, (int)hl, salted) != 1 ||
	    !hmac(md, salted, hl, "Client Key", 10, ckey) ||
	    EVP_Digest(ckey, hl, stored, NULL, md, NULL) != 1 ||
	    !hmac(md, stored, hl, auth_msg, strlen(auth_msg), csig) ||
	    !hmac(md, salted, hl, "Server Key", 10, skey) ||
	    !hmac(md, skey, hl, auth_msg, strlen(auth_msg), sskey))
		return why(c, "OpenSSL could not compute the SCRAM keys");
	for (size_t i = 0; i < hl; i++)
		ckey[i] ^= csig[i]; /* ClientProof */
	EVP_EncodeBlock((unsigned char *)proof64, ckey, (int)hl);
	memcpy(c->server_sig, sskey, hl);
	c->sig_len = (uint32_t)hl;
	OPENSSL_cleanse(salted, sizeof(salted));
	n = snprintf((char *)out, cap, "%s,p=%s", without, proof64);
	if (n < 0 || (size_t)n >= cap)
		return KM_ENOSPACE;
	return n;
}

static int scram_verify(struct km_sasl_client *c, const char *sfinal)
{
	char v64[128];
	uint8_t v[96];

	if (attr(sfinal, 'e', v64, sizeof(v64)))
		return why(c, v64);
	if (!attr(sfinal, 'v', v64, sizeof(v64)) ||
	    km_sasl_b64_decode(v64, v, sizeof(v)) != (int)c->sig_len ||
	    CRYPTO_memcmp(v, c->server_sig, c->sig_len) != 0)
		return why(c, "the server's signature does not match: it "
			      "does not know the password");
	return 0;
}

int km_sasl_client_step(struct km_sasl_client *c, const uint8_t *in,
			size_t in_len, uint8_t *out, size_t cap)
{
	char msg[KM_SASL_MSG_BYTES_MAX + 1];
	int rc;

	if (in_len >= sizeof(msg))
		return why(c, "server message too long");
	if (in_len > 0) /* PLAIN's answer is empty, its bytes may be NULL */
		memcpy(msg, in, in_len);
	msg[in_len] = '\0';
	if (c->mech == KM_SASL_PLAIN && c->step == 1) {
		c->step = 3;
		return 0;
	}
	if (c->step == 1) {
		rc = scram_final(c, msg, out, cap);
		c->step = 2;
		return rc;
	}
	if (c->step == 2) {
		c->step = 3;
		return scram_verify(c, msg);
	}
	return why(c, "message after the exchange ended");
}

void km_sasl_client_wipe(struct km_sasl_client *c)
{
	OPENSSL_cleanse(c, sizeof(*c));
}
