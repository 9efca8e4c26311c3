/* webhook: where alert webhooks may point (see webhook.h). */
#include "common/webhook.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The networks refused by default (RFC 6890 special purpose, less the global ones). */
static const struct {
	int family;
	const char *addr;
	int prefix;
} refused[] = {
	{ AF_INET, "0.0.0.0", 8 },       { AF_INET, "10.0.0.0", 8 },      { AF_INET, "100.64.0.0", 10 },
	{ AF_INET, "127.0.0.0", 8 },     { AF_INET, "169.254.0.0", 16 },  { AF_INET, "172.16.0.0", 12 },
	{ AF_INET, "192.0.0.0", 24 },    { AF_INET, "192.168.0.0", 16 },  { AF_INET, "198.18.0.0", 15 },
	{ AF_INET, "224.0.0.0", 4 },     { AF_INET, "240.0.0.0", 4 },     { AF_INET6, "::", 128 },
	{ AF_INET6, "::1", 128 },        { AF_INET6, "fc00::", 7 },       { AF_INET6, "fe80::", 10 },
	{ AF_INET6, "fec0::", 10 },      { AF_INET6, "ff00::", 8 },       { AF_INET6, "64:ff9b::", 96 },
	{ AF_INET6, "2002::", 16 },
};

static bool prefix_match(const unsigned char *a, const unsigned char *net, int prefix)
{
	int bytes = prefix / 8, bits = prefix % 8;

	if (memcmp(a, net, (size_t)bytes) != 0)
		return false;
	return bits == 0 || ((a[bytes] ^ net[bytes]) & (0xff << (8 - bits)) & 0xff) == 0;
}

/* An IPv6 address's 16 bytes b as (family, bytes in out, which may be b): an IPv4-mapped one as IPv4. */
static int addr6_of(const unsigned char *b, unsigned char out[16])
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (memcmp(b, mapped, 12) == 0) {
		memmove(out, b + 12, 4);
		return AF_INET;
	}
	memmove(out, b, 16);
	return AF_INET6;
}

/* The address of sa as (family, bytes); IPv4-mapped IPv6 addresses as IPv4. */
static int addr_of(const struct sockaddr *sa, unsigned char out[16])
{
	if (sa->sa_family == AF_INET) {
		memcpy(out, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return AF_INET;
	}
	if (sa->sa_family == AF_INET6)
		return addr6_of(((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr, out);
	return -1;
}

static bool addr_refused(int family, const unsigned char *a)
{
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		unsigned char net[16];

		if (refused[i].family == family && inet_pton(family, refused[i].addr, net) == 1 &&
		    prefix_match(a, net, refused[i].prefix))
			return true;
	}
	return false;
}

static bool addr_allowed(const struct webhook_nets *w, int family, const unsigned char *a)
{
	for (int i = 0; w && i < w->n; i++)
		if (w->net[i].family == family && prefix_match(a, w->net[i].addr, w->net[i].prefix))
			return true;
	return false;
}

static bool ok(const struct webhook_nets *w, int family, const unsigned char *a)
{
	return family > 0 && (!addr_refused(family, a) || addr_allowed(w, family, a));
}

bool webhook_addr_ok(const struct webhook_nets *w, const struct sockaddr *sa)
{
	unsigned char a[16];

	return ok(w, addr_of(sa, a), a);
}

int webhook_nets_add(struct webhook_nets *w, const char *list, char *err, size_t errlen)
{
	const char *p = list;

	while (*p) {
		size_t n = strcspn(p, ", ");
		char item[64], *slash;
		int family, max;
		long prefix;

		if (n == 0) {
			p++;
			continue;
		}
		if (n >= sizeof(item) || w->n == WEBHOOK_NETS_MAX) {
			snprintf(err, errlen, "--webhook-allow: at most %d networks, each ADDRESS[/PREFIX]", WEBHOOK_NETS_MAX);
			return -1;
		}
		memcpy(item, p, n);
		item[n] = '\0';
		p += n;
		slash = strchr(item, '/');
		if (slash)
			*slash = '\0';
		family = strchr(item, ':') ? AF_INET6 : AF_INET;
		max = family == AF_INET ? 32 : 128;
		prefix = max;
		if (slash) {
			char *end;

			prefix = strtol(slash + 1, &end, 10);
			if (!slash[1] || *end || prefix < 0 || prefix > max)
				prefix = -1;
		}
		if (inet_pton(family, item, w->net[w->n].addr) != 1 || prefix < 0) {
			snprintf(err, errlen, "--webhook-allow: '%.63s' is not ADDRESS[/PREFIX] (e.g. 127.0.0.0/8, fd00::/8)",
				 item);
			return -1;
		}
		w->net[w->n].family = family;
		w->net[w->n].prefix = (int)prefix;
		w->n++;
	}
	return 0;
}

int webhook_url_check(const char *url, const struct webhook_nets *w, char *err, size_t errlen)
{
	const char *auth, *at, *host;
	char h[256];
	size_t alen, hl;
	unsigned char a[16];
	int family = -1;

	if (!url || strlen(url) > 2048 ||
	    (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)) {
		snprintf(err, errlen, "webhook: required, an http:// or https:// URL of at most 2048 bytes");
		return -1;
	}
	auth = strstr(url, "://") + 3;
	alen = strcspn(auth, "/?#\\");
	/* the host follows the last '@' of the authority (user:password@host) */
	host = auth;
	for (at = auth; at < auth + alen; at++)
		if (*at == '@')
			host = at + 1;
	hl = (size_t)(auth + alen - host);
	if (hl && host[0] == '[') {
		const char *close = memchr(host, ']', hl);

		hl = close ? (size_t)(close - host - 1) : 0;
		host++;
		if (hl && hl < sizeof(h)) {
			memcpy(h, host, hl);
			h[hl] = '\0';
			/* an IPv4-mapped literal is the IPv4 address. (Not through a struct sockaddr made
			 * here: read as another struct type, gcc -O2 took its family for unset.) */
			family = inet_pton(AF_INET6, h, a) == 1 ? addr6_of(a, a) : 0;
		}
	} else {
		const char *colon = memchr(host, ':', hl);

		if (colon)
			hl = (size_t)(colon - host);
		if (hl && hl < sizeof(h)) {
			struct in_addr in;

			memcpy(h, host, hl);
			h[hl] = '\0';
			while (hl && h[hl - 1] == '.')   /* "localhost." is localhost */
				h[--hl] = '\0';
			/* inet_aton takes the forms a URL parser may too: 127.1, 0x7f000001, 2130706433 */
			if (inet_aton(h, &in)) {
				memcpy(a, &in, 4);
				family = AF_INET;
			} else {
				family = 0;
			}
		}
	}
	if (family < 0 || !hl) {
		snprintf(err, errlen, "webhook: the URL has no host");
		return -1;
	}
	if (family == 0) {
		size_t n = strlen(h);
		bool local = strcasecmp(h, "localhost") == 0 || (n > 10 && strcasecmp(h + n - 10, ".localhost") == 0);

		if (!local)
			return 0;   /* a name: its addresses are checked when delivering */
		family = AF_INET;
		memcpy(a, "\x7f\0\0\x01", 4);
	}
	if (ok(w, family, a))
		return 0;
	snprintf(err, errlen, "webhook: a loopback, link-local, private or otherwise internal address is not allowed "
			      "(the server's --webhook-allow lists the exceptions)");
	return -1;
}
