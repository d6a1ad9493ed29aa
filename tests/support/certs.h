/* Certificates for TLS tests, made with the `openssl` tool: a CA, and
 * certificates it signs with a subject and subjectAltNames of the test's
 * choosing. Files land in one directory, named after what they are:
 * NAME.key (0600) and NAME.pem, plus NAME.ks.pem for a signed certificate
 * (key then certificate: Kafka's PEM keystore). Errors come back as text
 * ("" = ok), as in process.h. No googletest here. */
#ifndef KM_TESTS_SUPPORT_CERTS_H
#define KM_TESTS_SUPPORT_CERTS_H

#include <string>
#include <vector>

namespace kmtest {

/* `openssl ARGS...` to completion: "" or why it failed. */
std::string openssl(const std::vector<std::string> &args);

/* dir/name.key and dir/name.pem: a self-signed CA, CN=name. */
std::string make_ca(const std::string &dir, const std::string &name);

/* dir/name.{key,pem,ks.pem} signed by the CA dir/ca.{pem,key}, for subj
 * ("/CN=broker") and, if not empty, san ("DNS:localhost,IP:127.0.0.1"). */
std::string make_cert(const std::string &dir, const std::string &ca,
		      const std::string &name, const std::string &subj,
		      const std::string &san);

} // namespace kmtest

#endif
