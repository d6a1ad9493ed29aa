/* kmirrord's configuration: the checks that look at several keys together,
 * run once every key is applied, and the values derived from other keys
 * (control.socket from data.dir, the advertised address from listeners,
 * workers under net.mode=dpdk). */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/errors.h"
#include "control/config_pvt.h"

static int check_local(const struct km_config *cfg, const char *prefix,
		       char *err, size_t err_len)
{
	for (uint32_t i = 0; i < cfg->local_topics_count; i++)
		for (uint32_t j = 0; j < cfg->topics_count; j++)
			if (strcmp(cfg->local_topics[i], cfg->topics[j]) == 0) {
				km_config_errf(err, err_len,
					       "%stopic \"%s\" is in both topics (mirrored) and local.topics (writable)",
					       prefix, cfg->topics[j]);
				return KM_ECFGMISSING;
			}
	return 0;
}

static int check_groups(const struct km_config *cfg, const char *prefix,
			char *err, size_t err_len)
{
	if (cfg->group_min_session_timeout_ms > cfg->group_max_session_timeout_ms) {
		km_config_errf(err, err_len,
			       "%sgroup.min.session.timeout.ms=%u is above group.max.session.timeout.ms=%u",
			       prefix, cfg->group_min_session_timeout_ms,
			       cfg->group_max_session_timeout_ms);
		return KM_ECFGMISSING;
	}
	if (cfg->groups_count > 0 && cfg->bootstrap_count == 0) {
		km_config_errf(err, err_len,
			       "%sgroups is set but source.bootstrap.servers is not (offsets are synced from the source)",
			       prefix);
		return KM_ECFGMISSING;
	}
	return 0;
}

static int check_sources(const struct km_config *cfg, const char *prefix,
			 char *err, size_t err_len)
{
	int rc;

	if ((rc = check_local(cfg, prefix, err, err_len)) < 0)
		return rc;
	if (cfg->data_dir[0] == '\0') {
		km_config_errf(err, err_len, "%sdata.dir is required", prefix);
		return KM_ECFGMISSING;
	}
	bool topics = cfg->topics_count > 0 || cfg->topics_include[0] != '\0';

	if (topics && cfg->bootstrap_count == 0) {
		km_config_errf(err, err_len,
			       "%s%s is set but source.bootstrap.servers is not (a mirroring host needs both; a host that only serves local partitions sets neither)",
			       prefix, cfg->topics_count > 0 ? "topics" : "topics.include");
		return KM_ECFGMISSING;
	}
	if (cfg->bootstrap_count > 0 && !topics) {
		km_config_errf(err, err_len,
			       "%ssource.bootstrap.servers is set but neither topics nor topics.include is (a mirroring host needs both; a host that only serves local partitions sets neither)",
			       prefix);
		return KM_ECFGMISSING;
	}
	return check_groups(cfg, prefix, err, err_len);
}

/* net.mode=dpdk gives each worker one queue pair of the port, and most
 * ports (and vdevs by default) have one: an unset `workers` is then 1, not
 * one per core. More workers need as many queue pairs, which the port
 * set-up checks (it names the vdev argument that adds them). */
static void dpdk_workers(struct km_config *cfg, bool workers_set)
{
	if (!workers_set)
		cfg->workers = 1;
}

static int check_dpdk(struct km_config *cfg, bool workers_set,
		      const char *prefix, char *err, size_t err_len)
{
	const struct km_config_dpdk *d = &cfg->dpdk;
	char ip[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN], mask[INET_ADDRSTRLEN];

	if (cfg->net_mode != KM_CONFIG_NET_DPDK)
		return 0; /* dpdk.* are checked one by one, then ignored */
	dpdk_workers(cfg, workers_set);
	if (d->port[0] == '\0' || d->ip_be == 0) {
		km_config_errf(err, err_len, "%snet.mode=dpdk needs %s", prefix,
			       d->port[0] == '\0' ? "dpdk.port" : "dpdk.ip");
		return KM_ECFGMISSING;
	}
	if (d->mtu != 0 && d->mtu < KM_CONFIG_DPDK_MTU_MIN) {
		km_config_errf(err, err_len,
			       "%sdpdk.mtu %u: 0 (the port's own) or %u..9000",
			       prefix, d->mtu, KM_CONFIG_DPDK_MTU_MIN);
		return KM_ECFGVALUE;
	}
	if (d->gateway_be == 0 ||
	    (d->gateway_be & d->netmask_be) == (d->ip_be & d->netmask_be))
		return 0;
	inet_ntop(AF_INET, &d->ip_be, ip, sizeof(ip));
	inet_ntop(AF_INET, &d->gateway_be, gw, sizeof(gw));
	inet_ntop(AF_INET, &d->netmask_be, mask, sizeof(mask));
	km_config_errf(err, err_len,
		       "%sdpdk.gateway %s is not in the subnet of dpdk.ip %s with dpdk.netmask %s",
		       prefix, gw, ip, mask);
	return KM_ECFGMISSING;
}

/* A listener's protocol: listener.security.protocol.map's, or Kafka's
 * default map (each protocol's name maps to itself). */
static int listener_protocol(const struct km_config *cfg,
			     struct km_config_listener *l, const char *prefix,
			     char *err, size_t err_len)
{
	for (uint32_t i = 0; i < cfg->protocol_map_count; i++)
		if (strcmp(cfg->protocol_map[i].name, l->name) == 0) {
			l->protocol = cfg->protocol_map[i].protocol;
			return 0;
		}
	if (cfg->protocol_map_count == 0 &&
	    km_config_protocol_of(l->name, &l->protocol) == 0)
		return 0;
	km_config_errf(err, err_len, "%slisteners: listener %s is not in "
		       "listener.security.protocol.map", prefix, l->name);
	return KM_ECFGMISSING;
}

/* advertised.listeners by name; a listener it does not name advertises
 * its own address, the machine's host name for a wildcard host. */
static int listener_advertised(const struct km_config *cfg,
			       struct km_config_listener *l)
{
	for (uint32_t i = 0; i < cfg->adv_given_count; i++)
		if (strcmp(cfg->adv_given[i].name, l->name) == 0) {
			l->advertised = cfg->adv_given[i].addr;
			l->advertised_set = true;
			return 0;
		}
	l->advertised = l->addr;
	if (km_config_host_is_any(l->addr.host) &&
	    gethostname(l->advertised.host, sizeof(l->advertised.host)) < 0)
		strcpy(l->advertised.host, "localhost");
	l->advertised.host[sizeof(l->advertised.host) - 1] = '\0';
	return 0;
}

static int check_listener_tls(const struct km_config *cfg,
			      const struct km_config_listener *l,
			      const char *prefix, char *err, size_t err_len)
{
	const char *missing = NULL;

	if (l->protocol != 1 && l->protocol != 3) /* SSL, SASL_SSL */
		return 0;
	if (cfg->ssl_cert[0] == '\0')
		missing = "ssl.certificate.location";
	else if (cfg->ssl_key[0] == '\0')
		missing = "ssl.key.location";
	else if (cfg->ssl_client_auth != 0 && cfg->ssl_ca[0] == '\0')
		missing = "ssl.ca.location (ssl.client.auth checks client "
			  "certificates against it)";
	if (missing == NULL)
		return 0;
	km_config_errf(err, err_len, "%slistener %s (%s) needs %s", prefix,
		       l->name, km_config_protocol_name(l->protocol), missing);
	return KM_ECFGMISSING;
}

/* A SASL listener authenticates against sasl.users.file; a file with no
 * SASL listener is a mistake, not a default. */
static int check_listener_sasl(const struct km_config *cfg,
			       const char *prefix, char *err, size_t err_len)
{
	const struct km_config_listener *sasl = NULL;

	for (uint32_t i = 0; i < cfg->listeners_count && sasl == NULL; i++)
		if (cfg->listeners[i].protocol == 2 || /* SASL_PLAINTEXT */
		    cfg->listeners[i].protocol == 3)   /* SASL_SSL */
			sasl = &cfg->listeners[i];
	if (sasl != NULL && cfg->sasl_users_file[0] == '\0') {
		km_config_errf(err, err_len, "%slistener %s (%s) needs "
			       "sasl.users.file (written by kmirror-users)",
			       prefix, sasl->name,
			       km_config_protocol_name(sasl->protocol));
		return KM_ECFGMISSING;
	}
	if (sasl == NULL && cfg->sasl_users_file[0] != '\0') {
		km_config_errf(err, err_len, "%ssasl.users.file is set but no "
			       "listener is SASL_PLAINTEXT or SASL_SSL", prefix);
		return KM_ECFGVALUE;
	}
	return 0;
}

static int derive_listeners(struct km_config *cfg, const char *prefix,
			    char *err, size_t err_len)
{
	uint32_t primary = UINT32_MAX;
	int rc;

	if (cfg->listeners_count == 0) {
		memset(&cfg->listeners[0], 0, sizeof(cfg->listeners[0]));
		strcpy(cfg->listeners[0].name, "PLAINTEXT");
		cfg->listeners[0].addr = cfg->listener;
		cfg->listeners_count = 1;
	}
	for (uint32_t i = 0; i < cfg->adv_given_count; i++) {
		bool found = false;

		for (uint32_t j = 0; j < cfg->listeners_count; j++)
			found |= strcmp(cfg->listeners[j].name,
					cfg->adv_given[i].name) == 0;
		if (!found) {
			km_config_errf(err, err_len, "%sadvertised.listeners "
				       "names %s, which listeners does not",
				       prefix, cfg->adv_given[i].name);
			return KM_ECFGMISSING;
		}
	}
	for (uint32_t i = 0; i < cfg->listeners_count; i++) {
		struct km_config_listener *l = &cfg->listeners[i];

		if ((rc = listener_protocol(cfg, l, prefix, err, err_len)) < 0 ||
		    (rc = check_listener_tls(cfg, l, prefix, err, err_len)) < 0)
			return rc;
		listener_advertised(cfg, l);
		if (primary == UINT32_MAX && l->protocol == 0)
			primary = i;
	}
	primary = primary == UINT32_MAX ? 0 : primary;
	cfg->listener = cfg->listeners[primary].addr;
	cfg->advertised = cfg->listeners[primary].advertised;
	return check_listener_sasl(cfg, prefix, err, err_len);
}

bool km_config_listener_on_dpdk(const struct km_config *cfg,
				const struct km_config_listener *l)
{
	struct in_addr a;

	return cfg->net_mode == KM_CONFIG_NET_DPDK && cfg->dpdk.ip_be != 0 &&
	       inet_pton(AF_INET, l->addr.host, &a) == 1 &&
	       a.s_addr == cfg->dpdk.ip_be;
}

/* A listener on the DPDK port (km_config_listener_on_dpdk): the TCP
 * endpoint has no TLS server and keeps the upper half of the port space
 * for its own outgoing connections (dataplane/net/dpdk/dnet_listen.c). */
static int check_dpdk_listeners(const struct km_config *cfg,
				const char *prefix, char *err, size_t err_len)
{
	for (uint32_t i = 0; i < cfg->listeners_count; i++) {
		const struct km_config_listener *l = &cfg->listeners[i];

		if (!km_config_listener_on_dpdk(cfg, l))
			continue;
		if (l->protocol == 1 || l->protocol == 3) { /* SSL, SASL_SSL */
			km_config_errf(err, err_len, "%slisteners: %s://%s:%u is on the DPDK port (its host is dpdk.ip), which serves PLAINTEXT and SASL_PLAINTEXT only, not %s; put TLS listeners on a kernel address",
				       prefix, l->name, l->addr.host, l->addr.port,
				       km_config_protocol_name(l->protocol));
			return KM_ECFGVALUE;
		}
		if (l->addr.port >= KM_CONFIG_DPDK_LISTEN_PORT_END) {
			km_config_errf(err, err_len, "%slisteners: %s://%s:%u is on the DPDK port (its host is dpdk.ip), whose ports %u-65535 are its TCP endpoint's own for outgoing connections; choose a port below %u",
				       prefix, l->name, l->addr.host, l->addr.port,
				       KM_CONFIG_DPDK_LISTEN_PORT_END,
				       KM_CONFIG_DPDK_LISTEN_PORT_END);
			return KM_ECFGVALUE;
		}
	}
	return 0;
}

int km_config_derive(struct km_config *cfg, const char *prefix, char *err,
		     size_t err_len)
{
	int rc;

	if (cfg->control_socket[0] == '\0') {
		int n = snprintf(cfg->control_socket, sizeof(cfg->control_socket),
				 "%s/%s", cfg->data_dir,
				 KM_CONFIG_SOCKET_DEFAULT_NAME);

		if (n < 0 || (size_t)n >= sizeof(cfg->control_socket)) {
			km_config_errf(err, err_len,
				       "%sthe default control.socket (data.dir + \"/%s\") is longer than %u bytes, the limit of a Unix socket path; set control.socket",
				       prefix, KM_CONFIG_SOCKET_DEFAULT_NAME,
				       KM_CONFIG_SOCKET_BYTES_MAX - 1);
			return KM_ECFGMISSING;
		}
	}
	rc = derive_listeners(cfg, prefix, err, err_len);
	return rc < 0 ? rc : check_dpdk_listeners(cfg, prefix, err, err_len);
}

/* SASL needs its three keys, and they mean nothing without it (a
 * mechanism set on a PLAINTEXT source is a mistake, not a default). */
static int check_security(const struct km_config *cfg, const char *prefix,
			  char *err, size_t err_len)
{
	int p = cfg->source_security_protocol;
	bool sasl = p == 2 || p == 3; /* SASL_PLAINTEXT, SASL_SSL */
	const char *missing = NULL;

	if (sasl && cfg->source_sasl_mechanism == 0)
		missing = "source.sasl.mechanism";
	else if (sasl && cfg->source_sasl_username[0] == '\0')
		missing = "source.sasl.username";
	else if (sasl && cfg->source_sasl_password_file[0] == '\0')
		missing = "source.sasl.password.file";
	if (missing != NULL) {
		km_config_errf(err, err_len, "%ssource.security.protocol=%s "
			       "needs %s", prefix,
			       p == 2 ? "SASL_PLAINTEXT" : "SASL_SSL", missing);
		return KM_ECFGMISSING;
	}
	if (!sasl && cfg->source_sasl_mechanism != 0) {
		km_config_errf(err, err_len, "%ssource.sasl.mechanism is set "
			       "but source.security.protocol is not SASL_SSL "
			       "or SASL_PLAINTEXT", prefix);
		return KM_ECFGMISSING;
	}
	if ((cfg->source_ssl_cert[0] == '\0') !=
	    (cfg->source_ssl_key[0] == '\0')) {
		km_config_errf(err, err_len, "%ssource.ssl.certificate.location "
			       "and source.ssl.key.location go together",
			       prefix);
		return KM_ECFGMISSING;
	}
	return 0;
}

int km_config_check(struct km_config *cfg, bool workers_set,
		    const char *prefix, char *err, size_t err_len)
{
	int rc = check_sources(cfg, prefix, err, err_len);

	if (rc == 0)
		rc = check_dpdk(cfg, workers_set, prefix, err, err_len);
	if (rc == 0)
		rc = check_security(cfg, prefix, err, err_len);
	return rc;
}
