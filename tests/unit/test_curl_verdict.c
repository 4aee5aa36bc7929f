/*
 * test_curl_verdict.c - the curl layer's pure parts: the CURLcode verdict
 * table (ADR-153), the URL parser behind its keys (ADR-154), and, when
 * libcurl's headers are installed, every ABI number of curl_abi.h against
 * the real curl/curl.h.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "../support/cunit_main.h"
#include "curl_layer.h"

#if defined(__has_include)
#if __has_include(<curl/curl.h>)
#include <curl/curl.h>
#define HAVE_CURL_H 1
#endif
#endif

static void test_ok_reads_the_status(void)
{
	CU_ASSERT_EQUAL(rx__curl_verdict(RX_CURLE_OK, 200, true, false),
			RX_SUCCESS);
	CU_ASSERT_EQUAL(rx__curl_verdict(RX_CURLE_OK, 302, true, false),
			RX_SUCCESS);
	CU_ASSERT_EQUAL(rx__curl_verdict(RX_CURLE_OK, 404, true, false),
			RX_ANSWERED);
	CU_ASSERT_EQUAL(rx__curl_verdict(RX_CURLE_OK, 500, true, false),
			RX_TRANSIENT);
	CU_ASSERT_EQUAL(rx__curl_verdict(RX_CURLE_OK, 503, true, false),
			RX_OVERLOAD);
	CU_ASSERT_EQUAL(rx__curl_verdict(RX_CURLE_OK, 429, true, false),
			RX_OVERLOAD);
	CU_ASSERT_EQUAL(rx__curl_verdict(RX_CURLE_OK, 504, true, false),
			RX_TIMEOUT);
	/* No status (CONNECT_ONLY, HTTP/0.9), or not HTTP at all. */
	CU_ASSERT_EQUAL(rx__curl_verdict(RX_CURLE_OK, 0, true, false),
			RX_SUCCESS);
	CU_ASSERT_EQUAL(rx__curl_verdict(RX_CURLE_OK, 0, false, false),
			RX_SUCCESS);
	/* FTP's 226 or an SMTP 250 is not an HTTP status. */
	CU_ASSERT_EQUAL(rx__curl_verdict(RX_CURLE_OK, 550, false, false),
			RX_SUCCESS);
}

static void test_failonerror_reads_the_status(void)
{
	CU_ASSERT_EQUAL(
	    rx__curl_verdict(RX_CURLE_HTTP_RETURNED_ERROR, 500, true, false),
	    RX_TRANSIENT);
	CU_ASSERT_EQUAL(
	    rx__curl_verdict(RX_CURLE_HTTP_RETURNED_ERROR, 403, true, false),
	    RX_ANSWERED);
	CU_ASSERT_EQUAL(
	    rx__curl_verdict(RX_CURLE_HTTP_RETURNED_ERROR, 503, true, false),
	    RX_OVERLOAD);
	CU_ASSERT_EQUAL(
	    rx__curl_verdict(RX_CURLE_HTTP_RETURNED_ERROR, 0, true, false),
	    RX_TRANSIENT);
}

static void test_issue_minimum_table(void)
{
	static const int transient[] = {
	    RX_CURLE_COULDNT_CONNECT, RX_CURLE_SEND_ERROR,
	    RX_CURLE_RECV_ERROR,      RX_CURLE_GOT_NOTHING,
	    RX_CURLE_PARTIAL_FILE,    RX_CURLE_SSL_CONNECT_ERROR,
	    RX_CURLE_HTTP2_STREAM,    RX_CURLE_WEIRD_SERVER_REPLY};
	static const int answered[] = {
	    RX_CURLE_PEER_FAILED_VERIFICATION, RX_CURLE_SSL_CACERT_BADFILE,
	    RX_CURLE_SSL_CERTPROBLEM,	       RX_CURLE_SSL_CIPHER,
	    RX_CURLE_SSL_PINNEDPUBKEYNOTMATCH, RX_CURLE_LOGIN_DENIED,
	    RX_CURLE_TOO_MANY_REDIRECTS,       RX_CURLE_REMOTE_FILE_NOT_FOUND};
	static const int rejected[] = {
	    RX_CURLE_WRITE_ERROR,	   RX_CURLE_READ_ERROR,
	    RX_CURLE_COULDNT_RESOLVE_HOST, RX_CURLE_COULDNT_RESOLVE_PROXY,
	    RX_CURLE_URL_MALFORMAT,	   RX_CURLE_OUT_OF_MEMORY,
	    RX_CURLE_UNSUPPORTED_PROTOCOL, RX_CURLE_RECURSIVE_API_CALL};
	size_t i;

	CU_ASSERT_EQUAL(
	    rx__curl_verdict(RX_CURLE_OPERATION_TIMEDOUT, 0, true, false),
	    RX_TIMEOUT);
	for (i = 0; i < sizeof(transient) / sizeof(transient[0]); i++)
		CU_ASSERT_EQUAL(rx__curl_verdict(transient[i], 0, true, false),
				RX_TRANSIENT);
	for (i = 0; i < sizeof(answered) / sizeof(answered[0]); i++)
		CU_ASSERT_EQUAL(rx__curl_verdict(answered[i], 0, true, false),
				RX_ANSWERED);
	for (i = 0; i < sizeof(rejected) / sizeof(rejected[0]); i++)
		CU_ASSERT_EQUAL(rx__curl_verdict(rejected[i], 0, true, false),
				RX_REJECTED);
}

static void test_abandonment(void)
{
	/* The program stopping a transfer is not evidence, unless it had
	 * waited past the slow threshold. A write error never is. */
	CU_ASSERT_EQUAL(
	    rx__curl_verdict(RX_CURLE_ABORTED_BY_CALLBACK, 0, true, false),
	    RX_REJECTED);
	CU_ASSERT_EQUAL(
	    rx__curl_verdict(RX_CURLE_ABORTED_BY_CALLBACK, 0, true, true),
	    RX_TIMEOUT);
	CU_ASSERT_EQUAL(rx__curl_verdict(RX_CURLE_WRITE_ERROR, 0, true, true),
			RX_REJECTED);
}

/* Once the final status came, the error that ended the transfer later
 * (a timeout cutting a stream, a write error, a short body, an abort)
 * does not change the verdict: the call ended at its first byte
 * (ADR-241). Interim statuses are not an answer. */
static void test_answer_then_error(void)
{
	static const int after[] = {
	    RX_CURLE_OPERATION_TIMEDOUT,  RX_CURLE_WRITE_ERROR,
	    RX_CURLE_PARTIAL_FILE,	  RX_CURLE_ABORTED_BY_CALLBACK,
	    RX_CURLE_RECV_ERROR,	  RX_CURLE_HTTP2_STREAM,
	    RX_CURLE_BAD_CONTENT_ENCODING};
	size_t i;

	for (i = 0; i < sizeof(after) / sizeof(after[0]); i++) {
		CU_ASSERT_EQUAL(rx__curl_verdict(after[i], 200, true, true),
				RX_SUCCESS);
		CU_ASSERT_EQUAL(rx__curl_verdict(after[i], 500, true, false),
				RX_TRANSIENT);
		CU_ASSERT_EQUAL(rx__curl_verdict(after[i], 404, true, false),
				RX_ANSWERED);
		CU_ASSERT_EQUAL(rx__curl_verdict(after[i], 503, true, false),
				RX_OVERLOAD);
		CU_ASSERT_EQUAL(rx__curl_verdict(after[i], 504, true, false),
				RX_TIMEOUT);
		CU_ASSERT_EQUAL(rx__curl_verdict(after[i], 101, true, false),
				RX_SUCCESS);
	}
	/* 100 Continue, 103 Early Hints: the code decides. */
	CU_ASSERT_EQUAL(
	    rx__curl_verdict(RX_CURLE_OPERATION_TIMEDOUT, 100, true, false),
	    RX_TIMEOUT);
	CU_ASSERT_EQUAL(
	    rx__curl_verdict(RX_CURLE_WRITE_ERROR, 103, true, false),
	    RX_REJECTED);
	CU_ASSERT_EQUAL(
	    rx__curl_verdict(RX_CURLE_ABORTED_BY_CALLBACK, 100, true, true),
	    RX_TIMEOUT);
	/* Not HTTP: the reply code is not a status; the code decides. */
	CU_ASSERT_EQUAL(
	    rx__curl_verdict(RX_CURLE_OPERATION_TIMEDOUT, 150, false, false),
	    RX_TIMEOUT);
	CU_ASSERT_EQUAL(
	    rx__curl_verdict(RX_CURLE_REMOTE_FILE_NOT_FOUND, 550, false, false),
	    RX_ANSWERED);
	CU_ASSERT_TRUE(rx__curl_final_status(101));
	CU_ASSERT_TRUE(rx__curl_final_status(200));
	CU_ASSERT_TRUE(rx__curl_final_status(999));
	CU_ASSERT_FALSE(rx__curl_final_status(0));
	CU_ASSERT_FALSE(rx__curl_final_status(100));
	CU_ASSERT_FALSE(rx__curl_final_status(199));
	CU_ASSERT_FALSE(rx__curl_final_status(1000));
}

static void test_unknown_codes_are_transient(void)
{
	CU_ASSERT_EQUAL(rx__curl_verdict(100, 0, true, false), RX_TRANSIENT);
	CU_ASSERT_EQUAL(rx__curl_verdict(-1, 0, true, false), RX_TRANSIENT);
	CU_ASSERT_EQUAL(rx__curl_verdict(20, 0, true, false), RX_TRANSIENT);
}

static void test_url_default_ports(void)
{
	struct rx_curl_url u;

	CU_ASSERT_TRUE(
	    rx__curl_parse_url("https://API.Example.test/v1?x=1", NULL, &u));
	CU_ASSERT_STRING_EQUAL(u.scheme, "https");
	CU_ASSERT_STRING_EQUAL(u.host, "api.example.test");
	CU_ASSERT_EQUAL(u.port, 443);
	CU_ASSERT_FALSE(u.port_given);
	CU_ASSERT_STRING_EQUAL(u.path, "/v1");
	CU_ASSERT_TRUE(rx__curl_parse_url("HTTP://h", NULL, &u));
	CU_ASSERT_STRING_EQUAL(u.scheme, "http");
	CU_ASSERT_EQUAL(u.port, 80);
	CU_ASSERT_STRING_EQUAL(u.path, "/");
	CU_ASSERT_TRUE(rx__curl_parse_url("ftp://h/f.txt", NULL, &u));
	CU_ASSERT_EQUAL(u.port, 21);
}

static void test_url_parts(void)
{
	struct rx_curl_url u;

	CU_ASSERT_TRUE(rx__curl_parse_url(
	    "http://user:p%40ss@127.0.0.1:8443/payments?page=2#top", NULL, &u));
	CU_ASSERT_STRING_EQUAL(u.host, "127.0.0.1");
	CU_ASSERT_EQUAL(u.port, 8443);
	CU_ASSERT_TRUE(u.port_given);
	CU_ASSERT_STRING_EQUAL(u.path, "/payments");
	CU_ASSERT_TRUE(rx__curl_parse_url("http://[::1]:9000/a/b", NULL, &u));
	CU_ASSERT_STRING_EQUAL(u.host, "[::1]");
	CU_ASSERT_EQUAL(u.port, 9000);
	CU_ASSERT_STRING_EQUAL(u.path, "/a/b");
	CU_ASSERT_TRUE(rx__curl_parse_url("http://h?q", NULL, &u));
	CU_ASSERT_STRING_EQUAL(u.path, "/");
	CU_ASSERT_TRUE(rx__curl_parse_url("http://h:/x", NULL, &u));
	CU_ASSERT_EQUAL(u.port, 80);
}

static void test_url_without_scheme(void)
{
	struct rx_curl_url u;

	CU_ASSERT_TRUE(rx__curl_parse_url("example.test:81/x", NULL, &u));
	CU_ASSERT_STRING_EQUAL(u.scheme, "http");
	CU_ASSERT_FALSE(u.scheme_given);
	CU_ASSERT_EQUAL(u.port, 81);
	CU_ASSERT_TRUE(rx__curl_parse_url("ftp.example.test/x", NULL, &u));
	CU_ASSERT_STRING_EQUAL(u.scheme, "ftp");
	CU_ASSERT_EQUAL(u.port, 21);
	CU_ASSERT_TRUE(rx__curl_parse_url("example.test", "https", &u));
	CU_ASSERT_EQUAL(u.port, 443);
}

/* An address literal is kept as an address, for the filters (ADR-240);
 * anything inet_pton does not read is a name. */
static void test_url_literal(void)
{
	static const uint8_t v4[4] = {127, 0, 0, 1};
	static const uint8_t v6[16] = {0, 0, 0, 0, 0, 0, 0, 0,
				       0, 0, 0, 0, 0, 0, 0, 1};
	struct rx_curl_url u;

	CU_ASSERT_TRUE(rx__curl_parse_url("http://127.0.0.1:8080/x", NULL, &u));
	CU_ASSERT_EQUAL(u.family, AF_INET);
	CU_ASSERT_EQUAL(memcmp(u.addr, v4, 4), 0);
	CU_ASSERT_TRUE(rx__curl_parse_url("http://[::1]:8080/x", NULL, &u));
	CU_ASSERT_EQUAL(u.family, AF_INET6);
	CU_ASSERT_EQUAL(memcmp(u.addr, v6, 16), 0);
	CU_ASSERT_TRUE(rx__curl_parse_url("u@[::FFFF:10.0.0.1]/", NULL, &u));
	CU_ASSERT_EQUAL(u.family, AF_INET6);
	CU_ASSERT_TRUE(rx__curl_parse_url("http://localhost:8080/", NULL, &u));
	CU_ASSERT_EQUAL(u.family, 0);
	CU_ASSERT_TRUE(rx__curl_parse_url("http://127.1/", NULL, &u));
	CU_ASSERT_EQUAL(u.family, 0);
	CU_ASSERT_TRUE(
	    rx__curl_parse_url("http://[fe80::1%25eth0]/", NULL, &u));
	CU_ASSERT_EQUAL(u.family, 0);
	CU_ASSERT_TRUE(
	    rx__curl_parse_url("http://10.0.0.1.example/", NULL, &u));
	CU_ASSERT_EQUAL(u.family, 0);
}

/* The IPv4 test is the shim's own (ADR-562): it must read exactly what
 * inet_pton reads, on every form, and a failed parse leaves no family. */
static void test_url_ipv4_as_inet_pton(void)
{
	static const char *const hosts[] = {
	    "0.0.0.0",	   "255.255.255.255", "256.0.0.1",  "1.2.3",
	    "1.2.3.4.5",   "01.2.3.4",	      "1.2.3.04",   "1..2.3",
	    "1.2.3.4.",	   ".1.2.3.4",	      "10.0.0.1x",  "1.2.3.-4",
	    "9.8.7.6",	   "0.0.0.00",	      "100.200.0.9"};
	size_t i;

	for (i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
		char url[64];
		uint8_t want[4];
		struct rx_curl_url u;
		int ok = inet_pton(AF_INET, hosts[i], want) == 1;

		snprintf(url, sizeof(url), "http://%s/", hosts[i]);
		CU_ASSERT_TRUE_FATAL(rx__curl_parse_url(url, NULL, &u));
		CU_ASSERT_EQUAL(u.family, ok ? AF_INET : 0);
		if (ok)
			CU_ASSERT_EQUAL(memcmp(u.addr, want, 4), 0);
	}
}

static void test_url_refused(void)
{
	struct rx_curl_url u;

	CU_ASSERT_FALSE(rx__curl_parse_url(NULL, NULL, &u));
	CU_ASSERT_FALSE(rx__curl_parse_url("file:///etc/hosts", NULL, &u));
	CU_ASSERT_FALSE(rx__curl_parse_url("http:///x", NULL, &u));
	CU_ASSERT_FALSE(rx__curl_parse_url("http://h:99999/", NULL, &u));
	CU_ASSERT_FALSE(rx__curl_parse_url("http://h:0/", NULL, &u));
	CU_ASSERT_FALSE(rx__curl_parse_url("http://h:8x/", NULL, &u));
	CU_ASSERT_FALSE(rx__curl_parse_url("http://[::1/", NULL, &u));
	CU_ASSERT_FALSE(rx__curl_parse_url("nosuch://h/", NULL, &u));
}

static void test_abi_matches_curl_h(void)
{
#ifdef HAVE_CURL_H
	CU_ASSERT_EQUAL(RX_CURLOPTTYPE_LONG, CURLOPTTYPE_LONG);
	CU_ASSERT_EQUAL(RX_CURLOPTTYPE_OBJECTPOINT, CURLOPTTYPE_OBJECTPOINT);
	CU_ASSERT_EQUAL(RX_CURLOPTTYPE_FUNCTIONPOINT,
			CURLOPTTYPE_FUNCTIONPOINT);
	CU_ASSERT_EQUAL(RX_CURLOPTTYPE_OFF_T, CURLOPTTYPE_OFF_T);
	CU_ASSERT_EQUAL(RX_CURLOPTTYPE_BLOB, CURLOPTTYPE_BLOB);
	CU_ASSERT_EQUAL(RX_CURLOPT_PORT, CURLOPT_PORT);
	CU_ASSERT_EQUAL(RX_CURLOPT_NOBODY, CURLOPT_NOBODY);
	CU_ASSERT_EQUAL(RX_CURLOPT_UPLOAD, CURLOPT_UPLOAD);
	CU_ASSERT_EQUAL(RX_CURLOPT_POST, CURLOPT_POST);
	CU_ASSERT_EQUAL(RX_CURLOPT_FOLLOWLOCATION, CURLOPT_FOLLOWLOCATION);
	CU_ASSERT_EQUAL(RX_CURLOPT_PUT, 54); /* deprecated in curl.h */
	CU_ASSERT_EQUAL(RX_CURLOPT_HTTPGET, CURLOPT_HTTPGET);
	CU_ASSERT_EQUAL(RX_CURLOPT_URL, CURLOPT_URL);
	CU_ASSERT_EQUAL(RX_CURLOPT_ERRORBUFFER, CURLOPT_ERRORBUFFER);
	CU_ASSERT_EQUAL(RX_CURLOPT_POSTFIELDS, CURLOPT_POSTFIELDS);
	CU_ASSERT_EQUAL(RX_CURLOPT_HTTPPOST, 10024);
	CU_ASSERT_EQUAL(RX_CURLOPT_CUSTOMREQUEST, CURLOPT_CUSTOMREQUEST);
	CU_ASSERT_EQUAL(RX_CURLOPT_COPYPOSTFIELDS, CURLOPT_COPYPOSTFIELDS);
	CU_ASSERT_EQUAL(RX_CURLOPT_DEFAULT_PROTOCOL, CURLOPT_DEFAULT_PROTOCOL);
	CU_ASSERT_EQUAL(RX_CURLOPT_UNIX_SOCKET_PATH, CURLOPT_UNIX_SOCKET_PATH);
	CU_ASSERT_EQUAL(RX_CURLOPT_CONNECT_ONLY, CURLOPT_CONNECT_ONLY);
	CU_ASSERT_EQUAL(RX_CURLOPT_ABSTRACT_UNIX_SOCKET,
			CURLOPT_ABSTRACT_UNIX_SOCKET);
	CU_ASSERT_EQUAL(RX_CURLOPT_MIMEPOST, CURLOPT_MIMEPOST);
	CU_ASSERT_EQUAL(RX_CURLOPT_CURLU, CURLOPT_CURLU);
	CU_ASSERT_EQUAL(RX_CURLINFO_RESPONSE_CODE, CURLINFO_RESPONSE_CODE);
	CU_ASSERT_EQUAL(RX_CURLINFO_STARTTRANSFER_TIME_T,
			CURLINFO_STARTTRANSFER_TIME_T);
	CU_ASSERT_EQUAL(RX_CURL_ERROR_SIZE, CURL_ERROR_SIZE);
	CU_ASSERT_EQUAL(sizeof(rx_curl_off_t), sizeof(curl_off_t));
	CU_ASSERT_EQUAL(RX_CURLE_COULDNT_CONNECT, CURLE_COULDNT_CONNECT);
	CU_ASSERT_EQUAL(RX_CURLE_COULDNT_RESOLVE_HOST,
			CURLE_COULDNT_RESOLVE_HOST);
	CU_ASSERT_EQUAL(RX_CURLE_PARTIAL_FILE, CURLE_PARTIAL_FILE);
	CU_ASSERT_EQUAL(RX_CURLE_HTTP_RETURNED_ERROR,
			CURLE_HTTP_RETURNED_ERROR);
	CU_ASSERT_EQUAL(RX_CURLE_WRITE_ERROR, CURLE_WRITE_ERROR);
	CU_ASSERT_EQUAL(RX_CURLE_OPERATION_TIMEDOUT, CURLE_OPERATION_TIMEDOUT);
	CU_ASSERT_EQUAL(RX_CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CONNECT_ERROR);
	CU_ASSERT_EQUAL(RX_CURLE_ABORTED_BY_CALLBACK,
			CURLE_ABORTED_BY_CALLBACK);
	CU_ASSERT_EQUAL(RX_CURLE_TOO_MANY_REDIRECTS, CURLE_TOO_MANY_REDIRECTS);
	CU_ASSERT_EQUAL(RX_CURLE_GOT_NOTHING, CURLE_GOT_NOTHING);
	CU_ASSERT_EQUAL(RX_CURLE_SEND_ERROR, CURLE_SEND_ERROR);
	CU_ASSERT_EQUAL(RX_CURLE_RECV_ERROR, CURLE_RECV_ERROR);
	CU_ASSERT_EQUAL(RX_CURLE_SSL_CERTPROBLEM, CURLE_SSL_CERTPROBLEM);
	CU_ASSERT_EQUAL(RX_CURLE_SSL_CIPHER, CURLE_SSL_CIPHER);
	CU_ASSERT_EQUAL(RX_CURLE_PEER_FAILED_VERIFICATION,
			CURLE_PEER_FAILED_VERIFICATION);
	CU_ASSERT_EQUAL(RX_CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CACERT_BADFILE);
	CU_ASSERT_EQUAL(RX_CURLE_SSH, CURLE_SSH);
	CU_ASSERT_EQUAL(RX_CURLE_SSL_PINNEDPUBKEYNOTMATCH,
			CURLE_SSL_PINNEDPUBKEYNOTMATCH);
	CU_ASSERT_EQUAL(RX_CURLE_HTTP2_STREAM, CURLE_HTTP2_STREAM);
	CU_ASSERT_EQUAL(RX_CURLE_RECURSIVE_API_CALL, CURLE_RECURSIVE_API_CALL);
	CU_ASSERT_EQUAL(RX_CURLE_PROXY, CURLE_PROXY);
	CU_ASSERT_EQUAL(RX_CURLE_SSL_CLIENTCERT, CURLE_SSL_CLIENTCERT);
	CU_ASSERT_EQUAL(RX_CURLE_UNRECOVERABLE_POLL, CURLE_UNRECOVERABLE_POLL);
#else
	printf("(curl/curl.h not installed: ABI numbers not checked) ");
#endif
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"CURLE_OK reads the HTTP status", test_ok_reads_the_status},
	    {"CURLE_HTTP_RETURNED_ERROR reads the status",
	     test_failonerror_reads_the_status},
	    {"the issue's minimum table", test_issue_minimum_table},
	    {"abandonment", test_abandonment},
	    {"an answer, then an error", test_answer_then_error},
	    {"unknown codes are transient", test_unknown_codes_are_transient},
	    {"URL default ports", test_url_default_ports},
	    {"URL parts", test_url_parts},
	    {"URL without a scheme", test_url_without_scheme},
	    {"URL hosts that are address literals", test_url_literal},
	    {"URL IPv4 hosts read as inet_pton reads them",
	     test_url_ipv4_as_inet_pton},
	    {"URLs left to the socket layer", test_url_refused},
	    {"ABI numbers match curl/curl.h", test_abi_matches_curl_h},
	    {NULL, NULL}};

	return rx_run_suite("curl_verdict", tests);
}
