/*
 * preload/filter.c - RESILIX_INCLUDE / RESILIX_EXCLUDE patterns (see
 * filter.h; ADR-143).
 *
 * Design. Parsed once at start-up, from the environment, into a fixed
 * table inside struct rx_config; matched at each admission (connect, and
 * curl_easy_perform), never on the I/O path. The curl layer knows a
 * transfer's address only when the URL's host is a literal; for a host
 * name it asks rx_filter_guarded_port, which decides with the patterns
 * that match every address and says when an address pattern must decide
 * at the connect instead (ADR-240).
 *
 * Parsing uses inet_pton for the address literals (locale-free, no
 * allocation) and hand-written digit loops for prefixes and ports, with
 * the same strictness as the rest of config.c: no signs, no spaces inside
 * a pattern, no empty pattern, ranges checked, never clamped. A malformed
 * pattern makes the whole configuration invalid (ADR-102): guarding a set
 * of destinations the user did not ask for would be worse than guarding
 * none.
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "filter.h"
#include "sockkey.h"

/* Parse [0-9]{1,5} within [min, max] from s[0..n). */
static bool parse_num(const char *s, size_t n, unsigned min, unsigned max,
		      unsigned *out)
{
	unsigned v = 0;
	size_t i;

	if (n == 0 || n > 5)
		return false;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v < min || v > max)
		return false;
	*out = v;
	return true;
}

/* Parse an address literal of s[0..n) into @p (family, addr). */
static bool parse_addr(const char *s, size_t n, struct rx_filter_pattern *p)
{
	char buf[INET6_ADDRSTRLEN + 1];

	if (n == 0 || n >= sizeof(buf))
		return false;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (inet_pton(AF_INET, buf, p->addr) == 1) {
		p->family = AF_INET;
		return true;
	}
	if (inet_pton(AF_INET6, buf, p->addr) == 1) {
		p->family = AF_INET6;
		return true;
	}
	return false;
}

/*
 * One pattern, s[0..n), no surrounding spaces. Forms: "*:PORT",
 * "ADDR[/PREFIX][:PORT]" for IPv4, "[ADDR6][/PREFIX][:PORT]" or a bare
 * "ADDR6[/PREFIX]" for IPv6 (a bare IPv6 address cannot carry a port:
 * its colons would be ambiguous).
 */
static const char *parse_one(const char *s, size_t n,
			     struct rx_filter_pattern *p)
{
	const char *addr = s, *rest;
	size_t alen, rlen;
	unsigned v;

	memset(p, 0, sizeof(*p));
	if (n >= 2 && s[0] == '*' && s[1] == ':') {
		if (!parse_num(s + 2, n - 2, 1, 65535, &v))
			return "the port must be 1..65535";
		p->port = (uint16_t)v;
		return NULL;
	}
	if (s[0] == '[') {
		const char *close = memchr(s, ']', n);

		if (!close)
			return "a '[' without its ']'";
		addr = s + 1;
		alen = (size_t)(close - addr);
		rest = close + 1;
		if (!parse_addr(addr, alen, p) || p->family != AF_INET6)
			return "not an IPv6 address inside [ ]";
	} else {
		size_t colons = 0, i;

		for (i = 0; i < n; i++)
			colons += s[i] == ':';
		/* Two or more colons: a bare IPv6 address (and prefix). */
		alen = strcspn(s, colons >= 2 ? "/" : "/:");
		if (alen > n)
			alen = n;
		rest = s + alen;
		if (!parse_addr(addr, alen, p))
			return "not an IP address, CIDR, ip:port or *:port";
		if (colons >= 2 && p->family != AF_INET6)
			return "not an IP address, CIDR, ip:port or *:port";
	}
	rlen = n - (size_t)(rest - s);
	p->prefix = p->family == AF_INET ? 32 : 128;
	if (rlen > 0 && rest[0] == '/') {
		size_t plen = strcspn(rest + 1, ":");

		if (plen > rlen - 1)
			plen = rlen - 1;
		if (!parse_num(rest + 1, plen, 0, p->prefix, &v))
			return p->family == AF_INET
				   ? "the prefix length must be 0..32"
				   : "the prefix length must be 0..128";
		p->prefix = (uint8_t)v;
		rest += 1 + plen;
		rlen -= 1 + plen;
	}
	if (rlen > 0) {
		if (rest[0] != ':')
			return "unexpected characters after the address";
		if (p->family == AF_INET6 && s[0] != '[')
			return "an IPv6 address with a port needs [brackets]";
		if (!parse_num(rest + 1, rlen - 1, 1, 65535, &v))
			return "the port must be 1..65535";
		p->port = (uint16_t)v;
	}
	/* Host bits beyond the prefix are ignored when matching; clear them
	 * so two spellings of one network compare equal. */
	{
		unsigned bytes = p->family == AF_INET ? 4 : 16, i;

		for (i = 0; i < bytes; i++) {
			unsigned keep =
			    p->prefix > i * 8
				? (p->prefix - i * 8 >= 8 ? 8
							  : p->prefix - i * 8)
				: 0;

			p->addr[i] &= (uint8_t)(0xff00u >> keep);
		}
	}
	return NULL;
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t';
}

int rx_filter_parse(struct rx_filter *f, const char *text, char *why,
		    size_t why_size)
{
	const char *s = text;

	memset(f, 0, sizeof(*f));
	if (!text || !*text) {
		snprintf(why, why_size, "the list is empty");
		return -1;
	}
	for (;;) {
		const char *end = strchr(s, ',');
		size_t n = end ? (size_t)(end - s) : strlen(s);
		const char *b = s, *err;

		while (n > 0 && is_space(*b)) {
			b++;
			n--;
		}
		while (n > 0 && is_space(b[n - 1]))
			n--;
		if (n == 0) {
			snprintf(why, why_size, "an empty pattern");
			return -1;
		}
		if (f->count == RX_FILTER_MAX) {
			snprintf(why, why_size, "more than %d patterns",
				 RX_FILTER_MAX);
			return -1;
		}
		err = parse_one(b, n, &f->p[f->count]);
		if (err) {
			snprintf(why, why_size, "pattern \"%.*s\": %s",
				 (int)(n > 64 ? 64 : n), b, err);
			return -1;
		}
		f->count++;
		if (!end)
			return 0;
		s = end + 1;
	}
}

/* Does @p match the address @a (4 or 16 bytes of @family) and @port? */
static bool match(const struct rx_filter_pattern *p, int family,
		  const uint8_t *a, uint16_t port)
{
	unsigned full, rem;

	if (p->port && p->port != port)
		return false;
	if (p->family == 0)
		return true;
	if (p->family != family)
		return false;
	full = p->prefix / 8;
	rem = p->prefix % 8;
	if (memcmp(p->addr, a, full) != 0)
		return false;
	return rem == 0 ||
	       ((a[full] ^ p->addr[full]) & (uint8_t)(0xff00u >> rem)) == 0;
}

/* Match any pattern of @f; *@port53 set when one that matched names port
 * 53 explicitly. */
static bool match_any(const struct rx_filter *f, int family, const uint8_t *a,
		      uint16_t port, bool *port53)
{
	bool any = false;
	uint32_t i;

	for (i = 0; f && i < f->count; i++) {
		if (match(&f->p[i], family, a, port)) {
			any = true;
			if (f->p[i].port == 53 && port53)
				*port53 = true;
		}
	}
	return any;
}

bool rx_filter_guarded(const struct rx_filter *include,
		       const struct rx_filter *exclude,
		       const struct sockaddr *sa, socklen_t len)
{
	const uint8_t *a;
	int family;
	uint16_t port;
	bool named53 = false;

	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const void *)sa;

		family = AF_INET;
		a = (const uint8_t *)&in->sin_addr;
		port = ntohs(in->sin_port);
	} else if (sa->sa_family == AF_INET6 && len >= RX_SIN6_MIN_LEN) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		family = AF_INET6;
		a = (const uint8_t *)&in6->sin6_addr;
		port = ntohs(in6->sin6_port);
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			family = AF_INET;
			a += 12;
		}
	} else {
		return false;
	}
	if (exclude && match_any(exclude, family, a, port, NULL))
		return false;
	if (include && include->count > 0 &&
	    !match_any(include, family, a, port, &named53))
		return false;
	return port != 53 || named53;
}

/*
 * The answers form Kleene's three-valued logic, ordered NO < DEPENDS <
 * YES: "or" is the larger, "and" the smaller, "not" the mirror. It never
 * turns an unknown into a YES or a NO, so whatever it decides holds for
 * every address; it may leave DEPENDS where the patterns contradict each
 * other (an address both included and excluded), which the connect then
 * decides exactly.
 */
static enum rx_filter_answer any_of(enum rx_filter_answer x,
				    enum rx_filter_answer y)
{
	return x > y ? x : y;
}

static enum rx_filter_answer all_of(enum rx_filter_answer x,
				    enum rx_filter_answer y)
{
	return x < y ? x : y;
}

static enum rx_filter_answer none_of(enum rx_filter_answer x)
{
	return (enum rx_filter_answer)(RX_FILTER_YES - x);
}

/* Could a pattern of @f match an address at @port? *@named53 likewise for
 * a pattern that names port 53. */
static enum rx_filter_answer match_port(const struct rx_filter *f,
					uint16_t port,
					enum rx_filter_answer *named53)
{
	enum rx_filter_answer any = RX_FILTER_NO;
	uint32_t i;

	for (i = 0; f && i < f->count; i++) {
		enum rx_filter_answer m;

		if (f->p[i].port && f->p[i].port != port)
			continue;
		m = f->p[i].family == 0 ? RX_FILTER_YES : RX_FILTER_DEPENDS;
		any = any_of(any, m);
		if (f->p[i].port == 53 && named53)
			*named53 = any_of(*named53, m);
	}
	return any;
}

enum rx_filter_answer rx_filter_guarded_port(const struct rx_filter *include,
					     const struct rx_filter *exclude,
					     uint16_t port)
{
	enum rx_filter_answer named53 = RX_FILTER_NO, in = RX_FILTER_YES;

	if (include && include->count > 0)
		in = match_port(include, port, &named53);
	/* The same rule as rx_filter_guarded: not excluded, included, and
	 * off port 53 unless an include pattern names it. */
	return all_of(all_of(none_of(match_port(exclude, port, NULL)), in),
		      port != 53 ? RX_FILTER_YES : named53);
}
