/* SASL to a Kafka broker, client side: the SaslHandshake (17) and
 * SaslAuthenticate (36) codecs, and the PLAIN (RFC 4616) and SCRAM-SHA-256 /
 * SCRAM-SHA-512 (RFC 5802, RFC 7677) exchanges Kafka's SaslClient performs,
 * the cryptography over OpenSSL's HMAC and PBKDF2.
 *
 * The versions are the non-flexible ones every broker since 1.0 serves
 * (SaslHandshake v1, SaslAuthenticate v1: the first with
 * session_lifetime_ms, KIP-368), so that the request header is v1 and the
 * response header v0 without a row in kafka/proto_header.c's table. */
#ifndef KM_KAFKA_SASL_H
#define KM_KAFKA_SASL_H

#include <stddef.h>
#include <stdint.h>

#include "kafka/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
	KM_API_SASL_HANDSHAKE = 17,
	KM_API_SASL_AUTHENTICATE = 36,
	KM_SASL_HANDSHAKE_VERSION = 1,
	KM_SASL_AUTH_VERSION = 1,
	KM_SASL_MSG_BYTES_MAX = 1024,	/* a SCRAM or PLAIN message */
	KM_SASL_TEXT_BYTES = 256,
};

enum km_sasl_mech {
	KM_SASL_NONE = 0,
	KM_SASL_PLAIN,
	KM_SASL_SCRAM_SHA_256,
	KM_SASL_SCRAM_SHA_512,
};

/** Kafka's name of a mechanism ("SCRAM-SHA-256"); "" for none. */
const char *km_sasl_mech_name(enum km_sasl_mech m);

/** @return 0 and *out for PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, else
 *  KM_ECFGVALUE. */
int km_sasl_mech_parse(const char *s, enum km_sasl_mech *out);

struct km_sasl_handshake_resp {
	int16_t error_code;
	char mechanisms[KM_SASL_TEXT_BYTES]; /* the broker's, comma-joined */
};

struct km_sasl_auth_resp {
	int16_t error_code;
	char error_message[KM_SASL_TEXT_BYTES];
	uint8_t auth[KM_SASL_MSG_BYTES_MAX];
	uint32_t auth_len;
	int64_t session_lifetime_ms;	/* 0: the broker does not re-auth */
};

/* Request bodies (after km_proto_req_begin) and response bodies (after the
 * response header). @return as the other codecs: 0 / count or a wire
 * error; a response's auth bytes above KM_SASL_MSG_BYTES_MAX are
 * KM_EWIRECAPACITY. */
int km_sasl_handshake_req_encode(struct km_wire_wr *w, int16_t version,
				 const char *mechanism);
int km_sasl_handshake_resp_decode(struct km_wire_rd *r, int16_t version,
				  struct km_sasl_handshake_resp *out);
int km_sasl_auth_req_encode(struct km_wire_wr *w, int16_t version,
			    const void *bytes, uint32_t len);
int km_sasl_auth_resp_decode(struct km_wire_rd *r, int16_t version,
			     struct km_sasl_auth_resp *out);

/* One client exchange. PLAIN: one message, an empty answer. SCRAM:
 * client-first, server-first -> client-final, server-final verified. */
struct km_sasl_client {
	enum km_sasl_mech mech;
	int step;
	char user[KM_SASL_TEXT_BYTES];
	char password[KM_SASL_TEXT_BYTES];
	char nonce[64];
	char first_bare[KM_SASL_MSG_BYTES_MAX];
	uint8_t server_sig[64];
	uint32_t sig_len;
	char why[KM_SASL_TEXT_BYTES]; /* after an error: what was wrong */
};

/**
 * Start an exchange and write the first client message to out.
 * @param nonce  the SCRAM client nonce (printable, no ','), or NULL for 24
 *               random bytes in base64 (tests pass RFC 7677's).
 * @return its length, or KM_ENOSPACE, KM_ECFGVALUE (no mechanism, a user
 *         or password too long), -EIO (no random bytes).
 */
int km_sasl_client_start(struct km_sasl_client *c, enum km_sasl_mech mech,
			 const char *user, const char *password,
			 const char *nonce, uint8_t *out, size_t cap);

/**
 * The server's message in, the next client message out.
 * @return its length (> 0: send it), 0 (the exchange is complete and the
 *         server proved it knows the password), or KM_EAUTH (c->why: the
 *         server's e= error, a nonce or a signature that does not match,
 *         a malformed message).
 */
int km_sasl_client_step(struct km_sasl_client *c, const uint8_t *in,
			size_t in_len, uint8_t *out, size_t cap);

/** Base64 (RFC 4648, padded) to bytes. @return how many, or -1 (not
 *  base64, or more than cap). */
int km_sasl_b64_decode(const char *in, uint8_t *out, size_t cap);

/** Forget the password and keys. */
void km_sasl_client_wipe(struct km_sasl_client *c);

#ifdef __cplusplus
}
#endif

#endif
