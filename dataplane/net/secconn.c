/* TLS over memory BIOs, then SASL, for one connection (secconn.h). */
#include <errno.h>
#include <stdarg.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/endian.h"
#include "common/errors.h"
#include "dataplane/net/secconn.h"
#include "kafka/proto.h"

#define FRAME_MAX 8192u

enum phase {
	PH_TLS,		/* TLS handshake */
	PH_SASL_START,	/* SaslHandshake to send */
	PH_SASL_HS,	/* waiting for SaslHandshake's answer */
	PH_SASL_AUTH,	/* waiting for a SaslAuthenticate answer */
	PH_DONE,
	PH_FAILED,
};

struct km_secconn {
	const struct km_netsec *sec;
	SSL *ssl;		/* NULL: the BIOs carry plaintext */
	BIO *in, *out;
	enum phase ph;
	int32_t corr;
	int64_t session_end_ms;
	struct km_sasl_client sasl;
	struct km_sasl_auth_resp auth;	/* 1 KiB+: here, not on the stack */
	bool established;	/* the first handshake is done */
	bool reneg;		/* the peer started another (TLS 1.2) */
	uint32_t flen;
	uint8_t frame[FRAME_MAX];
	char host[256];
	char why[768];
};

static const char *const proto_names[] = {
	"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL",
};

int km_secproto_parse(const char *s, enum km_secproto *out)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(s, proto_names[i]) == 0) {
			*out = (enum km_secproto)i;
			return 0;
		}
	return KM_ECFGVALUE;
}

const char *km_secproto_name(enum km_secproto p)
{
	return (unsigned)p < 4 ? proto_names[p] : "?";
}

/* OpenSSL's queued errors as one line (the last is the most specific). */
static void ssl_errors(char *why, size_t cap, const char *what)
{
	unsigned long e, last = 0;
	char buf[256] = "";

	while ((e = ERR_get_error()) != 0)
		last = e;
	if (last != 0)
		ERR_error_string_n(last, buf, sizeof(buf));
	snprintf(why, cap, "%s%s%s", what, buf[0] ? ": " : "", buf);
}

static int passwd_cb(char *buf, int size, int rw, void *u)
{
	size_t n = u != NULL ? strlen(u) : 0;

	(void)rw;
	if (n == 0 || n >= (size_t)size)
		return 0;
	memcpy(buf, u, n);
	return (int)n;
}

static int load_cert(SSL_CTX *ctx, const struct km_netsec_config *cfg,
		     char *why, size_t cap);

static int load_files(SSL_CTX *ctx, const struct km_netsec_config *cfg,
		      char *why, size_t cap)
{
	char what[700];

	if (cfg->ca_location != NULL
		    ? SSL_CTX_load_verify_locations(ctx, cfg->ca_location,
						    NULL) != 1
		    : SSL_CTX_set_default_verify_paths(ctx) != 1) {
		snprintf(what, sizeof(what), "cannot load CA '%s'",
			 cfg->ca_location ? cfg->ca_location : "(system)");
		ssl_errors(why, cap, what);
		return KM_ETLS;
	}
	return load_cert(ctx, cfg, why, cap);
}

/* Our own certificate and key (mutual TLS to a source; a listener's). */
static int load_cert(SSL_CTX *ctx, const struct km_netsec_config *cfg,
		     char *why, size_t cap)
{
	char what[700];

	if (cfg->cert_location == NULL)
		return 0;
	/* Without a password OpenSSL would ask for one on the terminal. */
	SSL_CTX_set_default_passwd_cb(ctx, passwd_cb);
	SSL_CTX_set_default_passwd_cb_userdata(
		ctx, (void *)(cfg->key_password ? cfg->key_password : ""));
	if (SSL_CTX_use_certificate_chain_file(ctx, cfg->cert_location) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, cfg->key_location
						     ? cfg->key_location
						     : cfg->cert_location,
					SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		snprintf(what, sizeof(what), "cannot load certificate '%s' "
			 "and key", cfg->cert_location);
		ssl_errors(why, cap, what);
		return KM_ETLS;
	}
	/* The password was needed only to decrypt the key, now loaded. */
	SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
	return 0;
}

int km_netsec_init(struct km_netsec *s, const struct km_netsec_config *cfg,
		   char *why, size_t why_cap)
{
	SSL_CTX *ctx;
	int rc;

	memset(s, 0, sizeof(*s));
	s->protocol = cfg->protocol;
	s->verify_host = cfg->verify_host;
	s->mech = cfg->mech;
	snprintf(s->user, sizeof(s->user), "%s", cfg->user ? cfg->user : "");
	snprintf(s->password, sizeof(s->password), "%s",
		 cfg->password ? cfg->password : "");
	if (cfg->protocol != KM_SEC_SSL && cfg->protocol != KM_SEC_SASL_SSL)
		return 0;
	if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL) {
		ssl_errors(why, why_cap, "SSL_CTX_new");
		return KM_ETLS;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if ((rc = load_files(ctx, cfg, why, why_cap)) < 0) {
		SSL_CTX_free(ctx);
		return rc;
	}
	s->ssl_ctx = ctx;
	return 0;
}

/* A record the client sends after the handshake that is itself
 * handshake (content type 22) is a TLS 1.2 renegotiation: TLS 1.3 hides
 * the type, and a client has no other handshake message to send then.
 * OpenSSL answers it with a warning and goes on; Kafka's SslTransportLayer
 * ends the connection ("Renegotiation is not supported"), and so do we. */
static void server_msg_cb(int write_p, int version, int type,
			  const void *buf, size_t len, SSL *ssl, void *arg)
{
	struct km_secconn *sc = SSL_get_app_data(ssl);
	const uint8_t *p = buf;

	(void)version, (void)arg;
	if (write_p || type != SSL3_RT_HEADER || len < 1 || sc == NULL ||
	    !sc->established || SSL_version(ssl) >= TLS1_3_VERSION)
		return;
	if (p[0] == SSL3_RT_HANDSHAKE)
		sc->reneg = true;
}

static int server_verify(SSL_CTX *ctx,
			 const struct km_netsec_server_config *cfg, char *why,
			 size_t cap)
{
	STACK_OF(X509_NAME) *names;
	char what[700];

	if (cfg->client_auth == KM_TLS_CLIENT_AUTH_NONE) {
		SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
		return 0;
	}
	if (cfg->ca_location == NULL ||
	    SSL_CTX_load_verify_locations(ctx, cfg->ca_location, NULL) != 1 ||
	    (names = SSL_load_client_CA_file(cfg->ca_location)) == NULL) {
		snprintf(what, sizeof(what), "cannot load CA '%s'",
			 cfg->ca_location ? cfg->ca_location : "(none)");
		ssl_errors(why, cap, what);
		return KM_ETLS;
	}
	SSL_CTX_set_client_CA_list(ctx, names);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER |
			   (cfg->client_auth == KM_TLS_CLIENT_AUTH_REQUIRED
				    ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
			   NULL);
	return 0;
}

int km_netsec_server_init(struct km_netsec *s,
			  const struct km_netsec_server_config *cfg,
			  char *why, size_t why_cap)
{
	struct km_netsec_config files = {
		.protocol = KM_SEC_SSL, .ca_location = NULL,
		.cert_location = cfg->cert_location,
		.key_location = cfg->key_location,
		.key_password = cfg->key_password,
	};
	SSL_CTX *ctx;
	int rc;

	memset(s, 0, sizeof(*s));
	s->protocol = KM_SEC_SSL;
	s->server = true;
	s->handshake_timeout_ms = cfg->handshake_timeout_ms
					  ? cfg->handshake_timeout_ms : 10000;
	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
		ssl_errors(why, why_cap, "SSL_CTX_new");
		return KM_ETLS;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
				 SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_msg_callback(ctx, server_msg_cb);
	/* load_files() loads the CA for a client; the server's is below. */
	if ((rc = load_cert(ctx, &files, why, why_cap)) < 0 ||
	    (rc = server_verify(ctx, cfg, why, why_cap)) < 0) {
		SSL_CTX_free(ctx);
		return rc;
	}
	s->ssl_ctx = ctx;
	return 0;
}

void km_netsec_free(struct km_netsec *s)
{
	if (s->ssl_ctx != NULL)
		SSL_CTX_free(s->ssl_ctx);
	OPENSSL_cleanse(s->password, sizeof(s->password));
	s->ssl_ctx = NULL;
}

/* The broker's certificate must name host: its DNS name, or its address
 * when host is an IP literal (Kafka's https endpoint identification). */
static int set_host(struct km_secconn *sc, const char *host)
{
	X509_VERIFY_PARAM *vp = SSL_get0_param(sc->ssl);
	ASN1_OCTET_STRING *ip = a2i_IPADDRESS(host);

	if (ip != NULL) {
		ASN1_OCTET_STRING_free(ip);
		if (!sc->sec->verify_host)
			return 0;
		return X509_VERIFY_PARAM_set1_ip_asc(vp, host) == 1 ? 0
								    : KM_ETLS;
	}
	SSL_set_tlsext_host_name(sc->ssl, host);
	return sc->sec->verify_host && SSL_set1_host(sc->ssl, host) != 1
		       ? KM_ETLS : 0;
}

int km_secconn_new(const struct km_netsec *s, const char *host,
		   struct km_secconn **out)
{
	struct km_secconn *sc = calloc(1, sizeof(*sc));

	if (sc == NULL)
		return -ENOMEM;
	sc->sec = s;
	snprintf(sc->host, sizeof(sc->host), "%s", host);
	sc->in = BIO_new(BIO_s_mem());
	sc->out = BIO_new(BIO_s_mem());
	if (sc->in == NULL || sc->out == NULL)
		goto fail;
	BIO_set_mem_eof_return(sc->in, -1); /* empty: retry, not EOF */
	sc->ph = s->protocol == KM_SEC_SASL_PLAINTEXT ? PH_SASL_START : PH_TLS;
	if (s->ssl_ctx != NULL) {
		if ((sc->ssl = SSL_new(s->ssl_ctx)) == NULL)
			goto fail;
		BIO_up_ref(sc->in);
		BIO_up_ref(sc->out);
		SSL_set_bio(sc->ssl, sc->in, sc->out);
		SSL_set_connect_state(sc->ssl);
		if (set_host(sc, host) < 0)
			goto fail;
	}
	*out = sc;
	return 0;
fail:
	km_secconn_free(sc);
	return KM_ETLS;
}

int km_secconn_new_server(const struct km_netsec *s, struct km_secconn **out)
{
	struct km_secconn *sc = calloc(1, sizeof(*sc));

	if (sc == NULL)
		return -ENOMEM;
	sc->sec = s;
	sc->in = BIO_new(BIO_s_mem());
	sc->out = BIO_new(BIO_s_mem());
	if (sc->in == NULL || sc->out == NULL ||
	    (sc->ssl = SSL_new(s->ssl_ctx)) == NULL) {
		km_secconn_free(sc);
		return KM_ETLS;
	}
	BIO_set_mem_eof_return(sc->in, -1);
	BIO_up_ref(sc->in);
	BIO_up_ref(sc->out);
	SSL_set_bio(sc->ssl, sc->in, sc->out);
	SSL_set_accept_state(sc->ssl);
	SSL_set_app_data(sc->ssl, sc);
	sc->ph = PH_TLS;
	*out = sc;
	return 0;
}

void km_secconn_free(struct km_secconn *sc)
{
	if (sc == NULL)
		return;
	if (sc->ssl != NULL)
		SSL_free(sc->ssl);
	BIO_free(sc->in);
	BIO_free(sc->out);
	km_sasl_client_wipe(&sc->sasl);
	free(sc);
}

int km_secconn_input(struct km_secconn *sc, const void *p, size_t n)
{
	size_t done = 0;

	if (n > 0 && BIO_write_ex(sc->in, p, n, &done) != 1)
		return -ENOMEM;
	return 0;
}

size_t km_secconn_output_pending(const struct km_secconn *sc)
{
	return BIO_ctrl_pending(sc->out);
}

size_t km_secconn_output(struct km_secconn *sc, void *buf, size_t cap)
{
	size_t n = 0;

	if (BIO_ctrl_pending(sc->out) == 0 ||
	    BIO_read_ex(sc->out, buf, cap, &n) != 1)
		return 0;
	return n;
}

static int fail(struct km_secconn *sc, int rc, const char *fmt,
		const char *detail)
{
	char what[700];

	snprintf(what, sizeof(what), fmt, detail);
	snprintf(sc->why, sizeof(sc->why), "%s", what);
	sc->ph = PH_FAILED;
	return rc;
}

/* A TLS error: the certificate check's reason when that is what failed. */
static int tls_fail(struct km_secconn *sc, const char *what)
{
	long v = SSL_get_verify_result(sc->ssl);
	char buf[400];

	if (v != X509_V_OK) {
		ERR_clear_error();
		snprintf(buf, sizeof(buf), "%s: certificate verify failed: %s",
			 what, X509_verify_cert_error_string(v));
	} else {
		ssl_errors(buf, sizeof(buf), what);
	}
	return fail(sc, KM_ETLS, "%s", buf);
}

int km_secconn_read(struct km_secconn *sc, void *buf, size_t cap)
{
	size_t n = 0;
	int e;

	if (sc->ssl == NULL) {
		if (BIO_ctrl_pending(sc->in) == 0 ||
		    BIO_read_ex(sc->in, buf, cap, &n) != 1)
			return 0;
		return (int)n;
	}
	if (SSL_read_ex(sc->ssl, buf, cap > INT32_MAX ? INT32_MAX : cap,
			&n) == 1 && !sc->reneg)
		return (int)n;
	if (sc->reneg)
		return fail(sc, KM_ETLS, "%s", "the peer started a TLS "
			    "renegotiation: refused");
	e = SSL_get_error(sc->ssl, 0);
	if (e == SSL_ERROR_WANT_READ)
		return 0;
	if (e == SSL_ERROR_ZERO_RETURN)
		return -ECONNRESET;
	return tls_fail(sc, "TLS read");
}

int km_secconn_write(struct km_secconn *sc, const void *p, size_t n)
{
	size_t done = 0;

	if (n == 0)
		return 0;
	if (sc->ssl == NULL)
		return BIO_write_ex(sc->out, p, n, &done) == 1 ? 0 : -ENOMEM;
	/* The write BIO grows: a write never waits for the peer. */
	if (SSL_write_ex(sc->ssl, p, n, &done) != 1 || done != n)
		return tls_fail(sc, "TLS write");
	return 0;
}

const char *km_secconn_why(const struct km_secconn *sc)
{
	return sc->why;
}

int km_secconn_reauth(struct km_secconn *sc)
{
	if (sc->sec->mech == KM_SASL_NONE || sc->ph != PH_DONE)
		return KM_EAUTH;
	sc->ph = PH_SASL_START;
	sc->flen = 0;
	return 0;
}

bool km_secconn_reauthing(const struct km_secconn *sc)
{
	return sc->ph == PH_SASL_START || sc->ph == PH_SASL_HS ||
	       sc->ph == PH_SASL_AUTH;
}

int64_t km_secconn_session_end_ms(const struct km_secconn *sc)
{
	return sc->session_end_ms;
}

/* ---- the SASL exchange (Kafka's SaslClientAuthenticator) ---- */

static int enc_handshake(struct km_wire_wr *w, const void *m)
{
	return km_sasl_handshake_req_encode(w, KM_SASL_HANDSHAKE_VERSION, m);
}

struct auth_msg {
	const uint8_t *p;
	uint32_t len;
};

static int enc_auth(struct km_wire_wr *w, const void *m)
{
	const struct auth_msg *a = m;

	return km_sasl_auth_req_encode(w, KM_SASL_AUTH_VERSION, a->p, a->len);
}

static int send_req(struct km_secconn *sc, int16_t key, int16_t version,
		    int (*enc)(struct km_wire_wr *, const void *),
		    const void *m)
{
	uint8_t buf[KM_SASL_MSG_BYTES_MAX + 512];
	struct km_reqhdr h = { .api_key = key, .api_version = version,
			       .correlation_id = ++sc->corr };
	struct km_wire_wr w;
	int rc;

	km_wire_name_set(&h.client_id, "kmirrord");
	km_wire_wr_init(&w, buf, sizeof(buf));
	if ((rc = km_proto_req_begin(&w, &h)) < 0 || (rc = enc(&w, m)) < 0 ||
	    (rc = km_wire_wr_frame_end(&w)) < 0)
		return rc;
	return km_secconn_write(sc, buf, w.pos);
}

/* One whole response frame read into sc->frame? @return 1 yes, 0 not
 * yet, or an error. */
static int read_frame(struct km_secconn *sc)
{
	uint32_t need = 4;
	int n;

	for (;;) {
		if (sc->flen >= 4)
			need = 4 + km_load_be32(sc->frame);
		if (need > FRAME_MAX)
			return fail(sc, KM_EWIREFRAMEMAX, "%s", "a SASL answer "
				    "larger than 8 KiB: not a Kafka broker's");
		if (sc->flen == need && need > 4)
			return 1;
		n = km_secconn_read(sc, sc->frame + sc->flen, need - sc->flen);
		if (n <= 0)
			return n == -ECONNRESET
				       ? fail(sc, -ECONNRESET, "%s",
					      "the broker closed the connection "
					      "during authentication")
				       : n;
		sc->flen += (uint32_t)n;
	}
}

/* The body of the frame read, after its header. */
static int frame_body(struct km_secconn *sc, int16_t key, int16_t version,
		      struct km_wire_rd *r, struct iovec *iov,
		      struct km_chain *ch)
{
	struct km_chain_cur cur = { 0, 0 };
	int32_t corr = 0;
	int rc;

	*iov = (struct iovec){ sc->frame + 4, sc->flen - 4 };
	*ch = (struct km_chain){ iov, 1 };
	sc->flen = 0;
	km_wire_rd_init(r, ch, cur, (uint32_t)iov->iov_len,
			&km_wire_limits_default);
	if ((rc = km_resphdr_decode(r, key, version, &corr)) < 0)
		return rc;
	return corr == sc->corr ? 0 : KM_EWIREVALUE;
}

static int sasl_send_auth(struct km_secconn *sc, const uint8_t *p, int len)
{
	struct auth_msg a = { p, (uint32_t)len };

	sc->ph = PH_SASL_AUTH;
	return send_req(sc, KM_API_SASL_AUTHENTICATE, KM_SASL_AUTH_VERSION,
			enc_auth, &a);
}

static int on_handshake(struct km_secconn *sc, struct km_wire_rd *r)
{
	struct km_sasl_handshake_resp m;
	uint8_t out[KM_SASL_MSG_BYTES_MAX];
	char what[700];
	int rc;

	if ((rc = km_sasl_handshake_resp_decode(r, 1, &m)) < 0)
		return fail(sc, rc, "malformed SaslHandshake answer: %s",
			    km_strerror(rc));
	if (m.error_code != 0) {
		snprintf(what, sizeof(what), "the broker does not enable SASL "
			 "mechanism %s (it enables: %s)",
			 km_sasl_mech_name(sc->sec->mech), m.mechanisms);
		return fail(sc, KM_ESASLMECH, "%s", what);
	}
	rc = km_sasl_client_start(&sc->sasl, sc->sec->mech, sc->sec->user,
				  sc->sec->password, NULL, out, sizeof(out));
	if (rc < 0)
		return fail(sc, rc, "cannot start SASL: %s", km_strerror(rc));
	return sasl_send_auth(sc, out, rc);
}

static int on_auth(struct km_secconn *sc, struct km_wire_rd *r,
		   int64_t now_ms)
{
	struct km_sasl_auth_resp *m = &sc->auth;
	uint8_t out[KM_SASL_MSG_BYTES_MAX];
	char what[700];
	int rc;

	if ((rc = km_sasl_auth_resp_decode(r, KM_SASL_AUTH_VERSION, m)) < 0)
		return fail(sc, rc, "malformed SaslAuthenticate answer: %s",
			    km_strerror(rc));
	if (m->error_code != 0) {
		snprintf(what, sizeof(what), "%s as '%s' refused: %s (Kafka "
			 "error %d)", km_sasl_mech_name(sc->sec->mech),
			 sc->sec->user, m->error_message[0] ? m->error_message
							     : "no reason given",
			 (int)m->error_code);
		return fail(sc, KM_EAUTH, "%s", what);
	}
	rc = km_sasl_client_step(&sc->sasl, m->auth, m->auth_len, out,
				 sizeof(out));
	if (rc < 0)
		return fail(sc, rc, "SASL: %s", sc->sasl.why);
	if (rc > 0)
		return sasl_send_auth(sc, out, rc);
	sc->session_end_ms = m->session_lifetime_ms > 0
				     ? now_ms + m->session_lifetime_ms : 0;
	km_sasl_client_wipe(&sc->sasl);
	sc->ph = PH_DONE;
	return 0;
}

static int advance_tls(struct km_secconn *sc)
{
	int rc = SSL_do_handshake(sc->ssl);

	if (rc == 1) {
		sc->established = true;
		sc->ph = sc->sec->mech != KM_SASL_NONE &&
				 sc->sec->protocol == KM_SEC_SASL_SSL
			 ? PH_SASL_START : PH_DONE;
		return 0;
	}
	if (SSL_get_error(sc->ssl, rc) == SSL_ERROR_WANT_READ)
		return 1;
	return tls_fail(sc, "TLS handshake");
}

int km_secconn_advance(struct km_secconn *sc, int64_t now_ms)
{
	struct km_wire_rd r;
	struct iovec iov;
	struct km_chain ch;
	int rc;

	for (;;) {
		switch (sc->ph) {
		case PH_TLS:
			if ((rc = advance_tls(sc)) != 0)
				return rc;
			break;
		case PH_SASL_START:
			sc->ph = PH_SASL_HS;
			if ((rc = send_req(sc, KM_API_SASL_HANDSHAKE,
					   KM_SASL_HANDSHAKE_VERSION,
					   enc_handshake,
					   km_sasl_mech_name(sc->sec->mech))) < 0)
				return rc;
			break;
		case PH_SASL_HS:
		case PH_SASL_AUTH:
			if ((rc = read_frame(sc)) <= 0)
				return rc < 0 ? rc : 1;
			rc = frame_body(sc, sc->ph == PH_SASL_HS
						     ? KM_API_SASL_HANDSHAKE
						     : KM_API_SASL_AUTHENTICATE,
					1, &r, &iov, &ch);
			if (rc < 0)
				return fail(sc, rc, "SASL answer: %s",
					    km_strerror(rc));
			rc = sc->ph == PH_SASL_HS ? on_handshake(sc, &r)
						  : on_auth(sc, &r, now_ms);
			if (rc < 0)
				return rc;
			break;
		case PH_DONE:
			return 0;
		case PH_FAILED:
		default:
			return KM_EAUTH;
		}
	}
}

/* ---- the client's principal (Kafka's DefaultKafkaPrincipalBuilder) ---- */

/* The attribute types Java's X500Principal.getName() names by keyword
 * in RFC 2253 form; any other is its OID and #hex of its DER value. */
static const char *rfc2253_keyword(int nid)
{
	switch (nid) {
	case NID_commonName: return "CN";
	case NID_countryName: return "C";
	case NID_localityName: return "L";
	case NID_stateOrProvinceName: return "ST";
	case NID_organizationName: return "O";
	case NID_organizationalUnitName: return "OU";
	case NID_streetAddress: return "STREET";
	case NID_domainComponent: return "DC";
	case NID_userId: return "UID";
	default: return NULL;
	}
}

struct sink {
	char *p;
	size_t cap, len;
};

static void put(struct sink *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put(struct sink *s, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(s->len < s->cap ? s->p + s->len : NULL,
		      s->len < s->cap ? s->cap - s->len : 0, fmt, ap);
	va_end(ap);
	s->len += n > 0 ? (size_t)n : 0;
}

/* RFC 2253 escaping as Java does it: the specials with a backslash, a
 * leading '#' or space and a trailing space too. */
static void put_value(struct sink *s, const unsigned char *v, int n)
{
	for (int i = 0; i < n; i++) {
		bool esc = strchr(",+\"\\<>;", v[i]) != NULL && v[i] != 0;

		esc |= (i == 0 && (v[i] == '#' || v[i] == ' ')) ||
		       (i == n - 1 && v[i] == ' ');
		put(s, "%s%c", esc ? "\\" : "", v[i]);
	}
}

static void put_hex_der(struct sink *s, const ASN1_STRING *v)
{
	int len = ASN1_STRING_length(v);
	const unsigned char *d = ASN1_STRING_get0_data(v);

	put(s, "#%02x", ASN1_STRING_type(v) & 0xff);
	if (len < 128)
		put(s, "%02x", len);
	else if (len < 256)
		put(s, "81%02x", len);
	else
		put(s, "82%04x", len);
	for (int i = 0; i < len; i++)
		put(s, "%02x", d[i]);
}

static void put_entry(struct sink *s, const X509_NAME_ENTRY *e)
{
	const ASN1_OBJECT *o = X509_NAME_ENTRY_get_object(e);
	const ASN1_STRING *v = X509_NAME_ENTRY_get_data(e);
	const char *kw = rfc2253_keyword(OBJ_obj2nid(o));
	unsigned char *u = NULL;
	char oid[128];
	int n;

	if (kw == NULL || (n = ASN1_STRING_to_UTF8(&u, v)) < 0) {
		OBJ_obj2txt(oid, sizeof(oid), o, 1);
		put(s, "%s=", oid);
		put_hex_der(s, v);
		return;
	}
	put(s, "%s=", kw);
	put_value(s, u, n);
	OPENSSL_free(u);
}

int km_secconn_peer_principal(const struct km_secconn *sc, char *out,
			      size_t cap)
{
	X509 *x = sc->ssl != NULL ? SSL_get0_peer_certificate(sc->ssl) : NULL;
	const X509_NAME *name;
	struct sink s = { out, cap, 0 };
	int n, prev_set = -1;

	if (x == NULL || !sc->established)
		return 0;
	name = X509_get_subject_name(x);
	n = X509_NAME_entry_count(name);
	put(&s, "User:");
	/* RFC 2253 writes the RDNs last first. */
	for (int i = n - 1; i >= 0; i--) {
		const X509_NAME_ENTRY *e = X509_NAME_get_entry(name, i);
		int set = X509_NAME_ENTRY_set(e);

		if (i != n - 1)
			put(&s, "%s", set == prev_set ? "+" : ",");
		prev_set = set;
		put_entry(&s, e);
	}
	if (s.len >= cap)
		return -ENOSPC;
	return (int)s.len;
}
