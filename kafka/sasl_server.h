/* SASL on kmirrord's own listener, server side: the SaslHandshake (17) and
 * SaslAuthenticate (36) request decoders and response encoders at the
 * versions Kafka 4.x serves (SaslHandshake v0-1, never flexible;
 * SaslAuthenticate v0-2, flexible from v2), the stored SCRAM credentials
 * (Kafka's ScramCredential: salt, iterations, StoredKey, ServerKey) and
 * their users file, and the server's half of PLAIN (RFC 4616) and
 * SCRAM-SHA-256/512 (RFC 5802, RFC 7677). Pure functions over OpenSSL;
 * the client's half is kafka/sasl.h.
 *
 * No password is stored: a PLAIN login is checked by deriving the SCRAM
 * StoredKey from the password it carries with a stored credential's salt
 * and iteration count, so one credential per user serves all three
 * mechanisms. */
#ifndef KM_KAFKA_SASL_SERVER_H
#define KM_KAFKA_SASL_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kafka/sasl.h"
#include "kafka/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
	KM_SCRAM_ITERATIONS_MIN = 4096,	/* ScramMechanism.minIterations() */
	KM_SCRAM_ITERATIONS_MAX = 1 << 24,
	KM_SCRAM_SALT_BYTES_MAX = 128,
	KM_SCRAM_HASH_BYTES_MAX = 64,
	KM_SASL_SERVER_AUTH_VERSION_MAX = 2,
};

/* One user's credential for one SCRAM mechanism. */
struct km_scram_cred {
	char user[KM_SASL_TEXT_BYTES];
	enum km_sasl_mech mech;		/* SCRAM-SHA-256 or SCRAM-SHA-512 */
	uint8_t salt[KM_SCRAM_SALT_BYTES_MAX];
	uint32_t salt_len;
	int32_t iterations;
	uint8_t stored_key[KM_SCRAM_HASH_BYTES_MAX];
	uint8_t server_key[KM_SCRAM_HASH_BYTES_MAX];
};

/** The hash's length of a SCRAM mechanism (32 or 64), else 0. */
uint32_t km_sasl_scram_hash_bytes(enum km_sasl_mech mech);

/**
 * Derive a credential from a password (RFC 5802 3).
 * @param salt  salt_len bytes, or NULL for 32 random ones.
 * @return 0, KM_ECFGVALUE (not a SCRAM mechanism, iterations outside
 *         [KM_SCRAM_ITERATIONS_MIN, KM_SCRAM_ITERATIONS_MAX], a name that
 *         is empty, too long or has a space or control character), -EIO
 *         (no random bytes or OpenSSL failed).
 */
int km_sasl_cred_make(enum km_sasl_mech mech, const char *user,
		       const char *password, int32_t iterations,
		       const uint8_t *salt, uint32_t salt_len,
		       struct km_scram_cred *out);

/** Does password derive cred's StoredKey? Constant time in the keys. */
bool km_sasl_cred_check(const struct km_scram_cred *cred,
			 const char *password);

/* The users file: one credential a line,
 *   NAME MECHANISM salt=B64,stored_key=B64,server_key=B64,iterations=N
 * (the last field is Kafka's ScramCredentialUtils text); '#' comments and
 * blank lines are skipped. */
struct km_sasl_users {
	struct km_scram_cred *v;
	uint32_t n;
	uint32_t cap;
};

/**
 * Parse a users file's text into out (emptied first; freed by the caller
 * with km_sasl_users_free, also after an error).
 * @return 0, or KM_ECFGVALUE with why naming the line and the field,
 *         -ENOMEM.
 */
int km_sasl_users_parse(const char *text, size_t len,
			struct km_sasl_users *out, char *why, size_t why_cap);

/** The file's text (malloc'd, NUL-terminated) or NULL (-ENOMEM). */
char *km_sasl_users_format(const struct km_sasl_users *u);

/** Add or replace (user, mech). @return 0 or -ENOMEM. */
int km_sasl_users_put(struct km_sasl_users *u, const struct km_scram_cred *c);

/** Remove every credential of user. @return how many. */
int km_sasl_users_remove(struct km_sasl_users *u, const char *user);

/** (user, mech); mech NONE: the user's first credential. NULL: none. */
const struct km_scram_cred *km_sasl_users_find(const struct km_sasl_users *u,
					       const char *user,
					       enum km_sasl_mech mech);

void km_sasl_users_free(struct km_sasl_users *u);

/* One server exchange. */
enum km_sasl_server_step {
	KM_SASL_SRV_START = 0,
	KM_SASL_SRV_FINAL,	/* SCRAM: server-first sent */
	KM_SASL_SRV_DONE,	/* authenticated: user is the name */
	KM_SASL_SRV_FAILED,
};

struct km_sasl_server {
	enum km_sasl_mech mech;
	enum km_sasl_server_step step;
	char user[KM_SASL_TEXT_BYTES];
	char nonce[KM_SASL_TEXT_BYTES];	/* client's + ours */
	uint32_t cnonce_len;		/* the client's part */
	char gs2[KM_SASL_TEXT_BYTES];	/* the client's GS2 header */
	char first_bare[KM_SASL_MSG_BYTES_MAX];
	char server_first[KM_SASL_MSG_BYTES_MAX];
	struct km_scram_cred cred;
	/* After a failure: why, for the log, and what Kafka tells the client
	 * ("" for its generic "invalid credentials" message). */
	char why[KM_SASL_TEXT_BYTES];
	char reply[KM_SASL_TEXT_BYTES];
};

/**
 * Start an exchange for mech.
 * @param nonce  the SCRAM server nonce (printable, no ','), or NULL for 24
 *               random bytes in base64 (tests pass RFC 7677's).
 * @return 0, KM_ECFGVALUE (no mechanism), -EIO (no random bytes).
 */
int km_sasl_server_start(struct km_sasl_server *s, enum km_sasl_mech mech,
			 const char *nonce);

/**
 * The client's message in, the server's answer out.
 * @return the answer's length (>= 0; PLAIN's is empty), s->step DONE once
 *         the client proved its password; or KM_EAUTH (s->why, s->reply;
 *         step FAILED), KM_ENOSPACE.
 */
int km_sasl_server_step(struct km_sasl_server *s,
			const struct km_sasl_users *users, const uint8_t *in,
			size_t in_len, uint8_t *out, size_t cap);

/** Forget the keys. */
void km_sasl_server_wipe(struct km_sasl_server *s);

/* ---- codecs (bodies after the header) ---- */

/** @return 0 or a wire error (a mechanism name above the buffer:
 *  KM_EWIRESTRLEN). */
int km_sasl_handshake_req_decode(struct km_wire_rd *r, int16_t version,
				 char *mech, size_t cap);
/** mechs: comma-joined. */
int km_sasl_handshake_resp_encode(struct km_wire_wr *w, int16_t version,
				  int16_t error_code, const char *mechs);

/** The auth bytes copied to out (*len); above cap: KM_EWIRECAPACITY. */
int km_sasl_auth_req_decode(struct km_wire_rd *r, int16_t version,
			    uint8_t *out, size_t cap, uint32_t *len);
/** message NULL: null. */
int km_sasl_auth_resp_encode(struct km_wire_wr *w, int16_t version,
			     int16_t error_code, const char *message,
			     const uint8_t *bytes, uint32_t len,
			     int64_t session_lifetime_ms);

#ifdef __cplusplus
}
#endif

#endif
