/*
 * preload/curl_url.c - split a URL given to CURLOPT_URL into the parts the
 * curl layer keys on (ADR-154): scheme, host, port and path.
 *
 * The curl layer copies these parts into its per-handle table when the
 * program sets the URL, because libcurl copies the string and the program
 * may free its own at once; a fixed-size copy of the parts needs no
 * allocation, where a copy of the URL (up to 8 MB in libcurl) would.
 *
 * The parser follows what libcurl accepts, only as far as keys need:
 * "scheme://[user[:pass]@]host[:port][/path][?query][#fragment]", the host
 * an IPv6 literal in brackets or anything up to ':' or '/'. A URL without
 * "://" gets CURLOPT_DEFAULT_PROTOCOL's scheme or libcurl's guess from the
 * host name ("ftp.*" is FTP, everything else HTTP). Hosts are lower-cased
 * (DNS names are case-insensitive, so "API.example" and "api.example"
 * share a circuit); paths are kept byte for byte. Anything this parser
 * cannot read - no host, a port outside 1..65535, a scheme without a
 * known default port, file: URLs that never touch the network - is left
 * to the socket layer, which sees the connect if there is one. A host
 * that is an address literal is kept as an address too, so the curl layer
 * can apply RESILIX_INCLUDE/RESILIX_EXCLUDE exactly (ADR-240).
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "curl_layer.h"

/* Default ports of the schemes libcurl speaks (curl's lib/url.c and
 * the IANA registry). */
static const struct {
	const char *scheme;
	uint16_t port;
} defaults[] = {
    {"http", 80},   {"https", 443}, {"ws", 80},	    {"wss", 443},
    {"ftp", 21},    {"ftps", 990},  {"sftp", 22},   {"scp", 22},
    {"smtp", 25},   {"smtps", 465}, {"imap", 143},  {"imaps", 993},
    {"pop3", 110},  {"pop3s", 995}, {"ldap", 389},  {"ldaps", 636},
    {"telnet", 23}, {"dict", 2628}, {"gopher", 70}, {"gophers", 70},
    {"mqtt", 1883}, {"rtsp", 554},  {"smb", 445},   {"smbs", 445},
    {"tftp", 69},   {"rtmp", 1935},
};

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static bool scheme_char(char c, bool first)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
		return true;
	return !first &&
	       ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.');
}

/* Copy [s, s+n) lower-cased into @dst of @size. False when it does not
 * fit (the caller leaves such a URL to the socket layer). */
static bool copy_lower(char *dst, size_t size, const char *s, size_t n)
{
	size_t i;

	if (n + 1 > size)
		return false;
	for (i = 0; i < n; i++)
		dst[i] = lower(s[i]);
	dst[n] = '\0';
	return true;
}

/* Is @s (NUL-terminated) an IPv4 address in the one form inet_pton
 * reads - four decimal parts of 0..255, no leading zero, nothing else?
 * Then @addr gets it, network order. inet_pton's own test, at a fifth of
 * its cost: every transfer's URL comes here (ADR-562). */
static bool ipv4_literal(const char *s, uint8_t addr[4])
{
	uint8_t a[4];
	int part;

	for (part = 0; part < 4; part++) {
		unsigned v = 0, digits = 0;

		if (part > 0 && *s++ != '.')
			return false;
		while (*s >= '0' && *s <= '9') {
			if (digits > 0 && v == 0)
				return false; /* a leading zero */
			v = v * 10 + (unsigned)(*s++ - '0');
			if (v > 255)
				return false;
			digits++;
		}
		if (digits == 0)
			return false;
		a[part] = (uint8_t)v;
	}
	if (*s != '\0')
		return false;
	memcpy(addr, a, sizeof(a));
	return true;
}

/* Is @u's host (@n bytes) an address literal? Then the filters can judge
 * the transfer as the connect would (ADR-240). A name, the usual case,
 * costs a test of its first byte. */
static void literal(struct rx_curl_url *u, size_t n)
{
	char buf[INET6_ADDRSTRLEN + 1];

	if (u->host[0] >= '0' && u->host[0] <= '9') {
		if (ipv4_literal(u->host, u->addr))
			u->family = AF_INET;
	} else if (n > 2 && u->host[0] == '[' && u->host[n - 1] == ']' &&
		   n - 2 < sizeof(buf)) {
		memcpy(buf, u->host + 1, n - 2);
		buf[n - 2] = '\0';
		if (inet_pton(AF_INET6, buf, u->addr) == 1)
			u->family = AF_INET6;
	}
}

bool rx__curl_default_port(const char *scheme, uint16_t *port)
{
	size_t i;

	for (i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
		if (strcmp(defaults[i].scheme, scheme) == 0) {
			*port = defaults[i].port;
			return true;
		}
	}
	return false;
}

bool rx__curl_parse_url(const char *url, const char *default_scheme,
			struct rx_curl_url *out)
{
	const char *p, *auth, *auth_end, *host, *host_end, *at, *colon;
	size_t n;

	if (!url || !out)
		return false;
	/* What every success writes is not cleared first (a memset of the
	 * whole would cost more than the parse). */
	out->port_given = false;
	out->scheme_given = false;
	out->family = 0;
	memset(out->addr, 0, sizeof(out->addr));
	/* libcurl skips leading blanks of a URL. */
	while (*url == ' ' || *url == '\t')
		url++;

	/* Scheme. */
	for (p = url; scheme_char(*p, p == url); p++)
		;
	if (p > url && strncmp(p, "://", 3) == 0) {
		if (!copy_lower(out->scheme, sizeof(out->scheme), url,
				(size_t)(p - url)))
			return false;
		auth = p + 3;
		out->scheme_given = true;
	} else {
		auth = url;
		if (default_scheme && *default_scheme) {
			if (!copy_lower(out->scheme, sizeof(out->scheme),
					default_scheme, strlen(default_scheme)))
				return false;
		} else if (strncmp(url, "ftp.", 4) == 0 ||
			   strncmp(url, "FTP.", 4) == 0) {
			strcpy(out->scheme, "ftp");
		} else {
			strcpy(out->scheme, "http");
		}
	}
	if (!rx__curl_default_port(out->scheme, &out->port))
		return false; /* file:, or a scheme we cannot key */

	/* Authority: up to the path, query or fragment. */
	auth_end = auth + strcspn(auth, "/?#");
	/* User info ends at the last '@' of the authority. */
	at = memrchr(auth, '@', (size_t)(auth_end - auth));
	host = at ? at + 1 : auth;
	if (*host == '[') {
		const char *close =
		    memchr(host, ']', (size_t)(auth_end - host));

		if (!close)
			return false;
		host_end = close + 1;
		colon =
		    host_end < auth_end && *host_end == ':' ? host_end : NULL;
	} else {
		colon = memchr(host, ':', (size_t)(auth_end - host));
		host_end = colon ? colon : auth_end;
	}
	if (host_end == host)
		return false;
	if (!copy_lower(out->host, sizeof(out->host), host,
			(size_t)(host_end - host)))
		return false;
	literal(out, (size_t)(host_end - host));
	if (colon && colon + 1 < auth_end) {
		unsigned long port = 0;

		for (p = colon + 1; p < auth_end; p++) {
			if (*p < '0' || *p > '9')
				return false;
			port = port * 10 + (unsigned long)(*p - '0');
			if (port > 65535)
				return false;
		}
		if (port == 0)
			return false;
		out->port = (uint16_t)port;
		out->port_given = true;
	}

	/* Path: without query and fragment; "/" when there is none. */
	n = *auth_end == '/' ? strcspn(auth_end, "?#") : 0;
	if (n == 0) {
		strcpy(out->path, "/");
	} else {
		if (n > sizeof(out->path) - 1)
			n = sizeof(out->path) - 1;
		memcpy(out->path, auth_end, n);
		out->path[n] = '\0';
	}
	return true;
}
