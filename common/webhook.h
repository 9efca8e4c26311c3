/*
 * webhook: where alert webhooks may point. Loopback, link-local (169.254.169.254, the clouds'
 * metadata), private, shared, multicast and unspecified addresses are refused unless a network of
 * the server's allow list (--webhook-allow CIDR) holds them: when a rule is made (the URL's host, a
 * literal address or "localhost") and again for every address a delivery connects to, after DNS.
 */
#ifndef SM_WEBHOOK_H
#define SM_WEBHOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#define WEBHOOK_NETS_MAX 32

/* Networks allowed although refused by default. Zeroed: none. */
struct webhook_nets {
	int n;
	struct {
		int family;                 /* AF_INET or AF_INET6 */
		unsigned char addr[16];
		int prefix;
	} net[WEBHOOK_NETS_MAX];
};

/* Adds the networks of list ("127.0.0.0/8,::1/128"; an address alone is a host). 0, or -1 with err. */
int webhook_nets_add(struct webhook_nets *w, const char *list, char *err, size_t errlen);
/* Whether a delivery may connect to sa (w may be NULL: nothing allowed beyond the default). */
bool webhook_addr_ok(const struct webhook_nets *w, const struct sockaddr *sa);
/* Whether url may be a webhook: http(s), at most 2048 bytes, its host not a refused address or
 * "localhost". 0, or -1 with err naming the field ("webhook: ..."). */
int webhook_url_check(const char *url, const struct webhook_nets *w, char *err, size_t errlen);

#endif
