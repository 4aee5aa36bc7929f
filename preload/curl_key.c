/*
 * preload/curl_key.c - what a guarded curl_easy_perform is keyed by
 * (ADR-154): the request method, the key built from the handle's URL
 * parts, the filters' verdict on the destination (ADR-240), and the
 * per-thread key memo that skips all of it for the URL the thread keyed
 * last (ADR-563, ADR-590).
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "curl_table.h"
#include "filter.h"
#include "runtime.h"

const char *rx__curl_method_of(const struct rx_curl_handle *st)
{
	if (st->custom[0])
		return st->custom;
	if (st->no_body)
		return "HEAD";
	if (st->upload)
		return "PUT";
	switch (st->httpreq) {
	case RX_CURL_REQ_POST:
		return "POST";
	case RX_CURL_REQ_PUT:
		return "PUT";
	case RX_CURL_REQ_HEAD:
		return "HEAD";
	default:
		return "GET";
	}
}

/* A bounded appender for keys: snprintf costs a thousand instructions
 * per key, this a few dozen (scripts/bench curl). */
struct keybuf {
	char *p;
	size_t left; /* bytes that still fit, NUL excluded */
};

static void put_n(struct keybuf *k, const char *s, size_t n)
{
	if (n > k->left)
		n = k->left;
	memcpy(k->p, s, n);
	k->p += n;
	k->left -= n;
}

static void put(struct keybuf *k, const char *s)
{
	put_n(k, s, strlen(s));
}

static void put_port(struct keybuf *k, unsigned port)
{
	char d[8];
	size_t i = sizeof(d);

	do {
		d[--i] = (char)('0' + port % 10);
		port /= 10;
	} while (port && i > 0);
	put_n(k, d + i, sizeof(d) - i);
}

/* The port the transfer connects to: CURLOPT_PORT overrides the URL's. */
static uint16_t port_of(const struct rx_curl_handle *st)
{
	return st->port ? st->port : st->url.port;
}

/* Format the key of @st's transfer (ADR-154) into @buf of @size (>= 1).
 * Returns its length; keys longer than @size - 1 (RX_KEY_MAX) are
 * truncated, as the registry would truncate them. */
static size_t make_key(const struct rx_curl_handle *st, char *buf, size_t size)
{
	unsigned port = port_of(st);
	struct keybuf k = {buf, size - 1};

	switch (rx__config()->curl_key) {
	case RX_CURL_KEY_ENDPOINT:
		put(&k, rx__curl_method_of(st));
		put(&k, " ");
		put(&k, st->url.host);
		put(&k, ":");
		put_port(&k, port);
		put(&k, st->url.path);
		break;
	case RX_CURL_KEY_ORIGIN:
		put(&k, st->url.scheme);
		put(&k, "://");
		put(&k, st->url.host);
		put(&k, ":");
		put_port(&k, port);
		break;
	case RX_CURL_KEY_HOST:
	default:
		put(&k, st->url.host);
		put(&k, ":");
		put_port(&k, port);
		break;
	}
	*k.p = '\0';
	return (size_t)(k.p - buf);
}

/*
 * Do RESILIX_INCLUDE and RESILIX_EXCLUDE let the curl layer guard @st's
 * transfer (ADR-240)? A URL whose host is an address literal is judged as
 * its connect would be. A host name is judged by the patterns that match
 * every address ("*:port"); when an address pattern could change the
 * answer, the curl layer cannot know it before libcurl resolves the name,
 * so it does not guard the transfer: it runs as if the curl layer were
 * not there, and the socket layer, which sees each connect's address,
 * applies the filters to it and guards what they let through, by
 * ip:port. Either way one layer at most counts the transfer.
 */
static bool filters_let_guard(const struct rx_curl_handle *st)
{
	const struct rx_config *cfg = rx__config();
	uint16_t port = port_of(st);
	union {
		struct sockaddr sa;
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
	} a;
	socklen_t len;

	memset(&a, 0, sizeof(a));
	switch (st->url.family) {
	case AF_INET:
		a.in.sin_family = AF_INET;
		a.in.sin_port = htons(port);
		memcpy(&a.in.sin_addr, st->url.addr, 4);
		len = sizeof(a.in);
		break;
	case AF_INET6:
		a.in6.sin6_family = AF_INET6;
		a.in6.sin6_port = htons(port);
		memcpy(&a.in6.sin6_addr, st->url.addr, 16);
		len = sizeof(a.in6);
		break;
	default:
		return rx_filter_guarded_port(&cfg->include, &cfg->exclude,
					      port) == RX_FILTER_YES;
	}
	return rx_filter_guarded(&cfg->include, &cfg->exclude, &a.sa, len);
}

static bool is_http(const struct rx_curl_handle *st)
{
	return strcmp(st->url.scheme, "http") == 0 ||
	       strcmp(st->url.scheme, "https") == 0;
}

/*
 * The key memo (ADR-563): what the last perform on this thread derived
 * from its URL's parts and port - the filters' verdict, the key, whether
 * it is http(s) - for a handle whose parts came from the same URL memo
 * generation. Not with RESILIX_CURL_KEY=endpoint, whose key holds the
 * method and path too. The configuration is fixed once the shim is
 * ready, so nothing else can change these.
 */
static RX_TLS struct key_memo {
	uint64_t url_gen; /* 0: empty */
	uint16_t port;	  /* port_of() it was built for */
	bool guard;	  /* filters_let_guard() */
	bool http;	  /* is_http() */
	uint32_t hash;	  /* rx_registry_hash() of key (ADR-590) */
	size_t klen;
	char key[RX_KEY_MAX + 1];
} key_memo;

bool rx__curl_destination(const struct rx_curl_handle *st, char *key,
			  size_t *klen, uint32_t *hash, bool *http)
{
	struct key_memo *m = &key_memo;
	bool memo =
	    st->url_gen != 0 && rx__config()->curl_key != RX_CURL_KEY_ENDPOINT;

	if (memo && m->url_gen == st->url_gen && m->port == port_of(st)) {
		if (!m->guard)
			return false;
		memcpy(key, m->key, m->klen + 1);
		*klen = m->klen;
		*hash = m->hash;
		*http = m->http;
		return true;
	}
	if (!filters_let_guard(st)) {
		if (memo) {
			m->url_gen = st->url_gen;
			m->port = port_of(st);
			m->guard = false;
		}
		return false;
	}
	*klen = make_key(st, key, RX_KEY_MAX + 1);
	*hash = rx_registry_hash(key, *klen);
	*http = is_http(st);
	if (memo) {
		m->url_gen = st->url_gen;
		m->port = port_of(st);
		m->guard = true;
		m->http = *http;
		m->hash = *hash;
		memcpy(m->key, key, *klen + 1);
		m->klen = *klen;
	}
	return true;
}
