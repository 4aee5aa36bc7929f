/*
 * test_proto_http.c - the HTTP/1.x protocol module of the shim
 * (preload/proto_http.c): status lines read whole or byte by byte, interim
 * responses skipped, upgrades and non-HTTP bytes told apart, and which
 * writes start a request (ADR-191, ADR-214).
 */
#include "config.h" /* _GNU_SOURCE, as in the shim's own files */

#include <string.h>
#include <sys/uio.h>

#include "../support/cunit_main.h"
#include "proto_http.h"

/* Feed @text in pieces of @step bytes; the result and *@status. */
static enum rx_sniff_result feed(const char *text, size_t step, int *status)
{
	struct rx_sniff_http s;
	enum rx_sniff_result r = RX_SNIFF_MORE;
	size_t len = strlen(text), at = 0;

	rx__sniff_reset(&s);
	*status = 0;
	while (at < len && r == RX_SNIFF_MORE) {
		size_t n = len - at < step ? len - at : step;

		r = rx__sniff_feed(&s, text + at, n, status);
		at += n;
	}
	return r;
}

static void test_final_status_whole_and_split(void)
{
	static const char *const lines[] = {"HTTP/1.1 200 OK\r\n\r\n",
					    "HTTP/1.0 503 Busy\r\n\r\n",
					    "HTTP/2 404 \r\n\r\n"};
	static const int want[] = {200, 503, 404};
	size_t i, step;
	int status;

	for (i = 0; i < 3; i++)
		for (step = 1; step <= 32; step *= 2) {
			CU_ASSERT_EQUAL(feed(lines[i], step, &status),
					RX_SNIFF_FINAL);
			CU_ASSERT_EQUAL(status, want[i]);
		}
}

static void test_interim_then_final(void)
{
	const char *text = "HTTP/1.1 100 Continue\r\n\r\n"
			   "HTTP/1.1 201 Created\r\n\r\n";
	size_t step;
	int status;

	for (step = 1; step <= 64; step *= 2) {
		CU_ASSERT_EQUAL(feed(text, step, &status), RX_SNIFF_FINAL);
		CU_ASSERT_EQUAL(status, 201);
	}
}

static void test_upgrade_and_other(void)
{
	int status;

	CU_ASSERT_EQUAL(
	    feed("HTTP/1.1 101 Switching Protocols\r\n\r\n", 64, &status),
	    RX_SNIFF_UPGRADE);
	CU_ASSERT_EQUAL(feed("\x16\x03\x01\x02\x00", 64, &status),
			RX_SNIFF_OTHER);
	CU_ASSERT_EQUAL(feed("SSH-2.0-OpenSSH\r\n", 64, &status),
			RX_SNIFF_OTHER);
	CU_ASSERT_EQUAL(feed("HTTP/1.1 2x0 OK\r\n", 64, &status),
			RX_SNIFF_OTHER);
	CU_ASSERT_EQUAL(feed("HTTP/1.1 20", 64, &status), RX_SNIFF_MORE);
}

/* Does @text, written as one buffer or as two (split at @cut), start a
 * request? Both must agree. */
static bool starts(const char *text, size_t cut)
{
	size_t len = strlen(text);
	struct iovec one = {(void *)text, len};
	struct iovec two[2] = {{(void *)text, cut < len ? cut : len},
			       {(void *)(text + (cut < len ? cut : len)),
				cut < len ? len - cut : 0}};
	bool a = rx__http_request_start(&one, 1);
	bool b = rx__http_request_start(two, 2);

	CU_ASSERT_EQUAL(a, b);
	return a;
}

static void test_request_start(void)
{
	size_t cut;

	for (cut = 0; cut <= 8; cut++) {
		CU_ASSERT_TRUE(starts("GET / HTTP/1.1\r\n", cut));
		CU_ASSERT_TRUE(starts("POST /upload HTTP/1.1\r\n", cut));
		CU_ASSERT_TRUE(starts("PUT /x HTTP/1.1\r\n", cut));
		CU_ASSERT_TRUE(starts("OPTIONS * HTTP/1.1\r\n", cut));
		CU_ASSERT_TRUE(starts("GET http://a/ HTTP/1.1\r\n", cut));
		CU_ASSERT_TRUE(
		    starts("CONNECT a.example:443 HTTP/1.1\r\n", cut));
		CU_ASSERT_TRUE(starts("M-SEARCH * HTTP/1.1\r\n", cut));
		/* Written in pieces: every byte so far fits the rule. */
		CU_ASSERT_TRUE(starts("GET", cut));
		CU_ASSERT_TRUE(starts("POST ", cut));
		/* Bodies, chunks and JSON continue the current request. */
		CU_ASSERT_FALSE(starts("{\"a\": 1}", cut));
		CU_ASSERT_FALSE(starts("1a\r\nhello", cut));
		CU_ASSERT_FALSE(starts("get / HTTP/1.1\r\n", cut));
		CU_ASSERT_TRUE(starts("GETX", cut)); /* a longer method */
		CU_ASSERT_FALSE(starts("GETX/ HTTP/1.1", cut));
		CU_ASSERT_FALSE(starts("POST/ HTTP/1.1", cut));
		CU_ASSERT_FALSE(starts("POSTS x", cut));
		CU_ASSERT_FALSE(starts("GET  /", cut));
		CU_ASSERT_FALSE(starts("CONNECT -x", cut));
		CU_ASSERT_FALSE(starts("-GET /", cut));
	}
	CU_ASSERT_FALSE(rx__http_request_start(NULL, 0));
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"final status, whole and split",
	     test_final_status_whole_and_split},
	    {"interim response, then final", test_interim_then_final},
	    {"upgrade and non-HTTP bytes", test_upgrade_and_other},
	    {"which writes start a request", test_request_start},
	    {NULL, NULL}};

	return rx_run_suite("sniff_http", tests);
}
