/*
 * test_filter.c - RESILIX_INCLUDE / RESILIX_EXCLUDE patterns (preload/
 * filter.c, ADR-143): what parses, what is refused and why, and which
 * destinations are guarded, IPv4 and IPv6, port 53 included; and what
 * the lists say about a port whose address is not known yet (a curl
 * transfer to a host name, ADR-240).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "../support/cunit_main.h"
#include "filter.h"

static struct sockaddr_in6 dst6(const char *ip, int port)
{
	struct sockaddr_in6 s;

	memset(&s, 0, sizeof(s));
	s.sin6_family = AF_INET6;
	s.sin6_port = htons((uint16_t)port);
	inet_pton(AF_INET6, ip, &s.sin6_addr);
	return s;
}

/* Guarded under the lists @inc and @exc (NULL = unset)? */
static bool guarded(const char *inc, const char *exc, const char *ip, int port)
{
	struct rx_filter fi, fe;
	char why[160];

	if (inc)
		CU_ASSERT_EQUAL_FATAL(rx_filter_parse(&fi, inc, why, 160), 0);
	if (exc)
		CU_ASSERT_EQUAL_FATAL(rx_filter_parse(&fe, exc, why, 160), 0);
	if (strchr(ip, ':')) {
		struct sockaddr_in6 s = dst6(ip, port);

		return rx_filter_guarded(inc ? &fi : NULL, exc ? &fe : NULL,
					 (struct sockaddr *)&s, sizeof(s));
	} else {
		struct sockaddr_in s;

		memset(&s, 0, sizeof(s));
		s.sin_family = AF_INET;
		s.sin_port = htons((uint16_t)port);
		inet_pton(AF_INET, ip, &s.sin_addr);
		return rx_filter_guarded(inc ? &fi : NULL, exc ? &fe : NULL,
					 (struct sockaddr *)&s, sizeof(s));
	}
}

static void test_valid_patterns(void)
{
	static const char *ok[] = {"10.0.0.0/8",
				   "192.168.1.7",
				   "127.0.0.1:8080",
				   "*:443",
				   "::1",
				   "::1/128",
				   "fd00::/8",
				   "[::1]:8080",
				   "[fd00::]/8:443",
				   "10.0.0.0/8:80",
				   " 10.0.0.0/8 , *:80 ",
				   "0.0.0.0/0",
				   "::/0",
				   "::ffff:10.0.0.1",
				   NULL};
	struct rx_filter f;
	char why[160];

	for (int i = 0; ok[i]; i++) {
		int rc = rx_filter_parse(&f, ok[i], why, sizeof(why));

		if (rc != 0)
			fprintf(stderr, "refused %s: %s\n", ok[i], why);
		CU_ASSERT_EQUAL(rc, 0);
	}
	CU_ASSERT_EQUAL(rx_filter_parse(&f, "1.2.3.4,*:1,::1", why, 160), 0);
	CU_ASSERT_EQUAL(f.count, 3);
}

static void test_malformed_patterns(void)
{
	static const char *bad[] = {"",
				    ",",
				    "10.0.0.0/8,",
				    "10.0.0.0/33",
				    "::1/129",
				    "*:0",
				    "*:65536",
				    "*:",
				    "*:-1",
				    "host.example:80",
				    "1.2.3",
				    "1.2.3.4:",
				    "1.2.3.4:80x",
				    "::1:80x",
				    "fd00::/8:443",
				    "[1.2.3.4]:80",
				    "[::1",
				    "10.0.0.0/",
				    "10.0.0.0/8/8",
				    "1.2.3.4 5",
				    "*",
				    NULL};
	struct rx_filter f;
	char why[160];

	for (int i = 0; bad[i]; i++) {
		why[0] = '\0';
		int rc = rx_filter_parse(&f, bad[i], why, sizeof(why));

		if (rc == 0)
			fprintf(stderr, "accepted \"%s\"\n", bad[i]);
		CU_ASSERT_EQUAL(rc, -1);
		CU_ASSERT(why[0] != '\0');
	}
	/* The message names the offending pattern. */
	rx_filter_parse(&f, "10.0.0.0/8,1.2.3.4/40", why, sizeof(why));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "1.2.3.4/40"));
}

static void test_too_many_patterns(void)
{
	char list[33 * 8 + 1] = "";
	struct rx_filter f;
	char why[160];

	for (int i = 0; i < RX_FILTER_MAX; i++)
		strcat(list, i ? ",*:1" : "*:1");
	CU_ASSERT_EQUAL(rx_filter_parse(&f, list, why, sizeof(why)), 0);
	strcat(list, ",*:2");
	CU_ASSERT_EQUAL(rx_filter_parse(&f, list, why, sizeof(why)), -1);
}

static void test_default_guards_all_but_dns(void)
{
	CU_ASSERT_TRUE(guarded(NULL, NULL, "127.0.0.1", 80));
	CU_ASSERT_TRUE(guarded(NULL, NULL, "::1", 8080));
	CU_ASSERT_FALSE(guarded(NULL, NULL, "127.0.0.1", 53));
	CU_ASSERT_FALSE(guarded(NULL, NULL, "::1", 53));
	/* A user exclude does not bring DNS back. */
	CU_ASSERT_FALSE(guarded(NULL, "10.0.0.0/8", "127.0.0.1", 53));
	/* A CIDR include does not name port 53... */
	CU_ASSERT_FALSE(guarded("127.0.0.0/8", NULL, "127.0.0.1", 53));
	/* ...an explicit one does. */
	CU_ASSERT_TRUE(guarded("*:53", NULL, "127.0.0.1", 53));
	CU_ASSERT_TRUE(guarded("127.0.0.1:53", NULL, "127.0.0.1", 53));
}

static void test_cidr_v4(void)
{
	CU_ASSERT_TRUE(guarded("10.0.0.0/8", NULL, "10.255.1.2", 80));
	CU_ASSERT_FALSE(guarded("10.0.0.0/8", NULL, "11.0.0.1", 80));
	CU_ASSERT_TRUE(guarded("10.1.2.3/15", NULL, "10.0.255.255", 80));
	CU_ASSERT_FALSE(guarded("10.1.2.3/15", NULL, "10.2.0.0", 80));
	CU_ASSERT_TRUE(guarded("0.0.0.0/0", NULL, "203.0.113.9", 1));
	CU_ASSERT_FALSE(guarded(NULL, "127.0.0.0/8", "127.0.0.2", 80));
	CU_ASSERT_TRUE(guarded(NULL, "127.0.0.1/32", "127.0.0.2", 80));
	/* An IPv4-mapped IPv6 destination matches IPv4 patterns. */
	CU_ASSERT_FALSE(guarded(NULL, "127.0.0.0/8", "::ffff:127.0.0.1", 80));
}

static void test_cidr_v6(void)
{
	CU_ASSERT_TRUE(guarded("fd00::/8", NULL, "fd12:3456::1", 443));
	CU_ASSERT_FALSE(guarded("fd00::/8", NULL, "fe80::1", 443));
	CU_ASSERT_TRUE(guarded("2001:db8::/33", NULL, "2001:db8:7fff::1", 1));
	CU_ASSERT_FALSE(guarded("2001:db8::/33", NULL, "2001:db8:8000::1", 1));
	CU_ASSERT_FALSE(guarded(NULL, "::1", "::1", 80));
	CU_ASSERT_FALSE(guarded("10.0.0.0/8", NULL, "::1", 80));
}

static void test_ports(void)
{
	CU_ASSERT_FALSE(guarded(NULL, "*:8080", "127.0.0.1", 8080));
	CU_ASSERT_TRUE(guarded(NULL, "*:8080", "127.0.0.1", 8081));
	CU_ASSERT_TRUE(guarded("127.0.0.1:8080", NULL, "127.0.0.1", 8080));
	CU_ASSERT_FALSE(guarded("127.0.0.1:8080", NULL, "127.0.0.1", 8081));
	CU_ASSERT_FALSE(guarded("127.0.0.1:8080", NULL, "127.0.0.2", 8080));
	CU_ASSERT_TRUE(guarded("[::1]:8080", NULL, "::1", 8080));
	CU_ASSERT_FALSE(guarded("[::1]:8080", NULL, "::1", 8081));
	CU_ASSERT_TRUE(guarded("10.0.0.0/8:443", NULL, "10.9.9.9", 443));
	CU_ASSERT_FALSE(guarded("10.0.0.0/8:443", NULL, "10.9.9.9", 80));
	/* Exclude wins over include. */
	CU_ASSERT_FALSE(guarded("*:80", "127.0.0.1", "127.0.0.1", 80));
}

/* The answer for @port on an address not known, under @inc and @exc. */
static enum rx_filter_answer by_port(const char *inc, const char *exc, int port)
{
	struct rx_filter fi, fe;
	char why[160];

	if (inc)
		CU_ASSERT_EQUAL_FATAL(rx_filter_parse(&fi, inc, why, 160), 0);
	if (exc)
		CU_ASSERT_EQUAL_FATAL(rx_filter_parse(&fe, exc, why, 160), 0);
	return rx_filter_guarded_port(inc ? &fi : NULL, exc ? &fe : NULL,
				      (uint16_t)port);
}

static void test_port_only(void)
{
	/* No list: every port but DNS. */
	CU_ASSERT_EQUAL(by_port(NULL, NULL, 80), RX_FILTER_YES);
	CU_ASSERT_EQUAL(by_port(NULL, NULL, 53), RX_FILTER_NO);
	/* "*:port" decides alone. */
	CU_ASSERT_EQUAL(by_port(NULL, "*:8080", 8080), RX_FILTER_NO);
	CU_ASSERT_EQUAL(by_port(NULL, "*:8080", 8081), RX_FILTER_YES);
	CU_ASSERT_EQUAL(by_port("*:8080", NULL, 8080), RX_FILTER_YES);
	CU_ASSERT_EQUAL(by_port("*:8080", NULL, 8081), RX_FILTER_NO);
	CU_ASSERT_EQUAL(by_port("*:53", NULL, 53), RX_FILTER_YES);
	/* An address pattern that could match leaves it to the address. */
	CU_ASSERT_EQUAL(by_port(NULL, "127.0.0.1:8080", 8080),
			RX_FILTER_DEPENDS);
	CU_ASSERT_EQUAL(by_port(NULL, "127.0.0.0/8", 8080), RX_FILTER_DEPENDS);
	CU_ASSERT_EQUAL(by_port("10.0.0.0/8", NULL, 8080), RX_FILTER_DEPENDS);
	CU_ASSERT_EQUAL(by_port("127.0.0.1:53", NULL, 53), RX_FILTER_DEPENDS);
	/* One that cannot match (another port) does not. */
	CU_ASSERT_EQUAL(by_port(NULL, "127.0.0.1:8080", 8081), RX_FILTER_YES);
	CU_ASSERT_EQUAL(by_port("10.0.0.0/8:443", NULL, 80), RX_FILTER_NO);
	CU_ASSERT_EQUAL(by_port("127.0.0.0/8", NULL, 53), RX_FILTER_NO);
	/* A decided exclusion wins over anything the include may say... */
	CU_ASSERT_EQUAL(by_port("10.0.0.0/8", "*:80", 80), RX_FILTER_NO);
	/* ...and a decided inclusion still depends on the exclusions. */
	CU_ASSERT_EQUAL(by_port("*:80", "10.0.0.0/8", 80), RX_FILTER_DEPENDS);
	CU_ASSERT_EQUAL(by_port("*:80, 10.0.0.0/8", NULL, 80), RX_FILTER_YES);
}

/* Whatever the port-only answer decides holds for every address: checked
 * against rx_filter_guarded over lists, ports and addresses. */
static void test_port_only_agrees(void)
{
	static const char *lists[] = {NULL,
				      "*:80",
				      "*:53",
				      "127.0.0.1",
				      "127.0.0.1:80",
				      "10.0.0.0/8",
				      "10.0.0.0/8:53",
				      "[::1]:80",
				      "::/0",
				      "*:80,10.0.0.0/8",
				      "0.0.0.0/0:80"};
	static const char *addrs[] = {"127.0.0.1", "10.1.2.3", "192.0.2.1",
				      "::1", "2001:db8::1"};
	static const int ports[] = {80, 53, 8080};
	const size_t nl = sizeof(lists) / sizeof(lists[0]);

	for (size_t i = 0; i < nl; i++) {
		for (size_t x = 0; x < nl; x++) {
			for (size_t p = 0; p < 3; p++) {
				enum rx_filter_answer a =
				    by_port(lists[i], lists[x], ports[p]);

				if (a == RX_FILTER_DEPENDS)
					continue;
				for (size_t k = 0; k < 5; k++)
					CU_ASSERT_EQUAL(
					    guarded(lists[i], lists[x],
						    addrs[k], ports[p]),
					    a == RX_FILTER_YES);
			}
		}
	}
}

static void test_not_ip(void)
{
	struct sockaddr sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_family = AF_UNIX;
	CU_ASSERT_FALSE(rx_filter_guarded(NULL, NULL, &sa, sizeof(sa)));
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"valid patterns", test_valid_patterns},
	    {"malformed patterns", test_malformed_patterns},
	    {"too many patterns", test_too_many_patterns},
	    {"default: all but DNS", test_default_guards_all_but_dns},
	    {"IPv4 CIDR", test_cidr_v4},
	    {"IPv6 CIDR", test_cidr_v6},
	    {"ports", test_ports},
	    {"port only (a host name)", test_port_only},
	    {"port only agrees with every address", test_port_only_agrees},
	    {"not an IP destination", test_not_ip},
	    {NULL, NULL}};

	return rx_run_suite("filter", tests);
}
