/*
 * preload/curl_abi.h - the few numbers of libcurl's ABI the curl layer
 * needs, written out so the shim builds without libcurl's headers (the
 * shim never links libcurl; it finds it at run time, ADR-150).
 *
 * Every value below is part of libcurl's stable ABI: libcurl never
 * renumbers an option, an info code or a result code (they are numbers
 * compiled into every program that uses them). The values are those of
 * curl/curl.h (7.88.1, Debian 12); tests/unit/test_curl_verdict.c checks
 * each one against the real header whenever libcurl's headers are
 * installed, so a typo here fails `make check`.
 *
 * Option numbers are a type base plus an index (curl.h, "CURLOPTTYPE_*"):
 * the base says how the variadic argument of curl_easy_setopt is passed,
 * which is how the wrapper forwards an option it knows nothing about.
 */
#ifndef RESILIX_PRELOAD_CURL_ABI_H
#define RESILIX_PRELOAD_CURL_ABI_H

#include <stdint.h>

/* Option type ranges (curl.h): an option's number is base + index. */
#define RX_CURLOPTTYPE_LONG 0		   /* long (also VALUES) */
#define RX_CURLOPTTYPE_OBJECTPOINT 10000   /* void *, char *, slist * */
#define RX_CURLOPTTYPE_FUNCTIONPOINT 20000 /* a function pointer */
#define RX_CURLOPTTYPE_OFF_T 30000	   /* curl_off_t (64-bit) */
#define RX_CURLOPTTYPE_BLOB 40000	   /* struct curl_blob * */
#define RX_CURLOPTTYPE_END 50000	   /* first number past them all */

/* The options the curl layer reads (it forwards all of them). */
#define RX_CURLOPT_PORT 3
#define RX_CURLOPT_NOBODY 44
#define RX_CURLOPT_UPLOAD 46
#define RX_CURLOPT_POST 47
#define RX_CURLOPT_FOLLOWLOCATION 52
#define RX_CURLOPT_PUT 54
#define RX_CURLOPT_HTTPGET 80
#define RX_CURLOPT_CONNECT_ONLY 141
#define RX_CURLOPT_URL 10002
#define RX_CURLOPT_ERRORBUFFER 10010
#define RX_CURLOPT_POSTFIELDS 10015
#define RX_CURLOPT_HTTPPOST 10024
#define RX_CURLOPT_CUSTOMREQUEST 10036
#define RX_CURLOPT_COPYPOSTFIELDS 10165
#define RX_CURLOPT_UNIX_SOCKET_PATH 10231
#define RX_CURLOPT_DEFAULT_PROTOCOL 10238
#define RX_CURLOPT_ABSTRACT_UNIX_SOCKET 10264
#define RX_CURLOPT_MIMEPOST 10269
#define RX_CURLOPT_CURLU 10282
/* What the retry layer wraps and bounds (curl_retry.c). */
#define RX_CURLOPT_TIMEOUT 13
#define RX_CURLOPT_HEADER 42
#define RX_CURLOPT_TIMEOUT_MS 155
#define RX_CURLOPT_WRITEDATA 10001
#define RX_CURLOPT_HEADERDATA 10029
#define RX_CURLOPT_WRITEFUNCTION 20011
#define RX_CURLOPT_HEADERFUNCTION 20079

/* CURLINFO: type base | index. */
#define RX_CURLINFO_STRING 0x100000 /* char ** */
#define RX_CURLINFO_LONG 0x200000   /* long * */
#define RX_CURLINFO_DOUBLE 0x300000 /* double * */
#define RX_CURLINFO_OFF_T 0x600000  /* curl_off_t * */
#define RX_CURLINFO_TYPEMASK 0xf00000
#define RX_CURLINFO_RESPONSE_CODE (0x200000 + 2)	 /* long */
#define RX_CURLINFO_HTTP_CONNECTCODE (0x200000 + 22)	 /* long */
#define RX_CURLINFO_STARTTRANSFER_TIME_T (0x600000 + 54) /* curl_off_t, us */

/* The error buffer a program hands to CURLOPT_ERRORBUFFER. */
#define RX_CURL_ERROR_SIZE 256

/* RX_CURL_ARG_IN_REGISTER: 1 where curl_easy_setopt's and
 * curl_easy_getinfo's one variadic argument (always one eightbyte of
 * INTEGER class) arrives where a named third argument would, so the
 * wrappers read it as one (x86-64, the psABI 3.5.7; ADR-560); 0 elsewhere,
 * where they use va_arg. -DRX_CURL_VA_ARG forces 0, to test that path. */
#if defined(__x86_64__) && defined(__LP64__) && !defined(RX_CURL_VA_ARG)
#define RX_CURL_ARG_IN_REGISTER 1
#else
#define RX_CURL_ARG_IN_REGISTER 0
#endif

/* curl_off_t: 64-bit on every platform libcurl supports. */
typedef int64_t rx_curl_off_t;

/* CURLcode values (curl.h, enum CURLcode). Gaps are codes libcurl
 * marks obsolete; they classify like any unknown code. */
enum rx_curlcode {
	RX_CURLE_OK = 0,
	RX_CURLE_UNSUPPORTED_PROTOCOL = 1,
	RX_CURLE_FAILED_INIT = 2,
	RX_CURLE_URL_MALFORMAT = 3,
	RX_CURLE_NOT_BUILT_IN = 4,
	RX_CURLE_COULDNT_RESOLVE_PROXY = 5,
	RX_CURLE_COULDNT_RESOLVE_HOST = 6,
	RX_CURLE_COULDNT_CONNECT = 7,
	RX_CURLE_WEIRD_SERVER_REPLY = 8,
	RX_CURLE_REMOTE_ACCESS_DENIED = 9,
	RX_CURLE_FTP_ACCEPT_FAILED = 10,
	RX_CURLE_FTP_WEIRD_PASS_REPLY = 11,
	RX_CURLE_FTP_ACCEPT_TIMEOUT = 12,
	RX_CURLE_FTP_WEIRD_PASV_REPLY = 13,
	RX_CURLE_FTP_WEIRD_227_FORMAT = 14,
	RX_CURLE_FTP_CANT_GET_HOST = 15,
	RX_CURLE_HTTP2 = 16,
	RX_CURLE_FTP_COULDNT_SET_TYPE = 17,
	RX_CURLE_PARTIAL_FILE = 18,
	RX_CURLE_FTP_COULDNT_RETR_FILE = 19,
	RX_CURLE_QUOTE_ERROR = 21,
	RX_CURLE_HTTP_RETURNED_ERROR = 22,
	RX_CURLE_WRITE_ERROR = 23,
	RX_CURLE_UPLOAD_FAILED = 25,
	RX_CURLE_READ_ERROR = 26,
	RX_CURLE_OUT_OF_MEMORY = 27,
	RX_CURLE_OPERATION_TIMEDOUT = 28,
	RX_CURLE_FTP_PORT_FAILED = 30,
	RX_CURLE_FTP_COULDNT_USE_REST = 31,
	RX_CURLE_RANGE_ERROR = 33,
	RX_CURLE_HTTP_POST_ERROR = 34,
	RX_CURLE_SSL_CONNECT_ERROR = 35,
	RX_CURLE_BAD_DOWNLOAD_RESUME = 36,
	RX_CURLE_FILE_COULDNT_READ_FILE = 37,
	RX_CURLE_LDAP_CANNOT_BIND = 38,
	RX_CURLE_LDAP_SEARCH_FAILED = 39,
	RX_CURLE_FUNCTION_NOT_FOUND = 41,
	RX_CURLE_ABORTED_BY_CALLBACK = 42,
	RX_CURLE_BAD_FUNCTION_ARGUMENT = 43,
	RX_CURLE_INTERFACE_FAILED = 45,
	RX_CURLE_TOO_MANY_REDIRECTS = 47,
	RX_CURLE_UNKNOWN_OPTION = 48,
	RX_CURLE_SETOPT_OPTION_SYNTAX = 49,
	RX_CURLE_GOT_NOTHING = 52,
	RX_CURLE_SSL_ENGINE_NOTFOUND = 53,
	RX_CURLE_SSL_ENGINE_SETFAILED = 54,
	RX_CURLE_SEND_ERROR = 55,
	RX_CURLE_RECV_ERROR = 56,
	RX_CURLE_SSL_CERTPROBLEM = 58,
	RX_CURLE_SSL_CIPHER = 59,
	RX_CURLE_PEER_FAILED_VERIFICATION = 60,
	RX_CURLE_BAD_CONTENT_ENCODING = 61,
	RX_CURLE_FILESIZE_EXCEEDED = 63,
	RX_CURLE_USE_SSL_FAILED = 64,
	RX_CURLE_SEND_FAIL_REWIND = 65,
	RX_CURLE_SSL_ENGINE_INITFAILED = 66,
	RX_CURLE_LOGIN_DENIED = 67,
	RX_CURLE_TFTP_NOTFOUND = 68,
	RX_CURLE_TFTP_PERM = 69,
	RX_CURLE_REMOTE_DISK_FULL = 70,
	RX_CURLE_TFTP_ILLEGAL = 71,
	RX_CURLE_TFTP_UNKNOWNID = 72,
	RX_CURLE_REMOTE_FILE_EXISTS = 73,
	RX_CURLE_TFTP_NOSUCHUSER = 74,
	RX_CURLE_SSL_CACERT_BADFILE = 77,
	RX_CURLE_REMOTE_FILE_NOT_FOUND = 78,
	RX_CURLE_SSH = 79,
	RX_CURLE_SSL_SHUTDOWN_FAILED = 80,
	RX_CURLE_AGAIN = 81,
	RX_CURLE_SSL_CRL_BADFILE = 82,
	RX_CURLE_SSL_ISSUER_ERROR = 83,
	RX_CURLE_FTP_PRET_FAILED = 84,
	RX_CURLE_RTSP_CSEQ_ERROR = 85,
	RX_CURLE_RTSP_SESSION_ERROR = 86,
	RX_CURLE_FTP_BAD_FILE_LIST = 87,
	RX_CURLE_CHUNK_FAILED = 88,
	RX_CURLE_NO_CONNECTION_AVAILABLE = 89,
	RX_CURLE_SSL_PINNEDPUBKEYNOTMATCH = 90,
	RX_CURLE_SSL_INVALIDCERTSTATUS = 91,
	RX_CURLE_HTTP2_STREAM = 92,
	RX_CURLE_RECURSIVE_API_CALL = 93,
	RX_CURLE_AUTH_ERROR = 94,
	RX_CURLE_HTTP3 = 95,
	RX_CURLE_QUIC_CONNECT_ERROR = 96,
	RX_CURLE_PROXY = 97,
	RX_CURLE_SSL_CLIENTCERT = 98,
	RX_CURLE_UNRECOVERABLE_POLL = 99
};

/* The sonames libcurl ships under on Debian (the OpenSSL, GnuTLS and NSS
 * builds), where a plugin may have dlopen'ed it RTLD_LOCAL: the list
 * curl.c and this layer pass to rx__symbol_real (symbols.h);
 * defined in curl.c. */
#define RX_CURL_NSONAMES 3
extern const char *const rx__curl_sonames[RX_CURL_NSONAMES];

#endif
