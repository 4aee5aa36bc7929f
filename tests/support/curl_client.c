/*
 * curl_client.c - a libcurl program for the curl layer's tests: easy
 * transfers in series or on several threads, or the multi interface.
 *
 * Usage:
 *   curl_client [--mode easy|multi] [--threads N] [--requests N]
 *               [--parallel N] [--method M] [--insecure] [--errbuf]
 *               [--fresh [--hold]] [--dup] [--reset] [--timeout-ms N]
 *               [--maxfilesize N] [--cainfo-blob FILE] [--refuse-body]
 *               [--unix-socket PATH | --abstract-unix-socket NAME]
 *               [--unix-until K] [--curlu-from K] URL...
 *
 *   --mode easy     curl_easy_perform (the default); multi: one multi
 *                   handle running --parallel transfers at once;
 *                   connect-only: CURLOPT_CONNECT_ONLY to the first URL,
 *                   then --requests "GET /" requests on that connection
 *                   with curl_easy_send and curl_easy_recv
 *   --threads N     easy mode: N threads, each doing --requests transfers
 *   --requests N    transfers per thread (easy) or in total (multi),
 *                   default 10; URL i of the list serves transfer i
 *                   (cycling)
 *   --method M      GET (default), POST, HEAD, or any custom method
 *   --insecure      no TLS verification (self-signed test upstreams)
 *   --errbuf        set CURLOPT_ERRORBUFFER and print it
 *   --info          easy mode: after each transfer's line, a line
 *                   "info <i> <fields>" of what curl_easy_getinfo reads
 *                   (connections, addresses, errno, sizes, times)
 *   --fresh         a new handle per transfer (default: one per thread,
 *                   so connections are kept alive)
 *   --hold          with --fresh, keep every handle (and its connection
 *                   cache) until the last transfer is done
 *   --dup           each handle is curl_easy_duphandle of a template that
 *                   carries the options
 *   --reset         curl_easy_reset the handle before each transfer and
 *                   set every option again
 *   --maxfilesize N CURLOPT_MAXFILESIZE_LARGE (a curl_off_t option)
 *   --cainfo-blob F trust the certificate in F, passed in memory with
 *                   CURLOPT_CAINFO_BLOB (a blob option)
 *   --print-body    the write callback copies the body to stdout (before
 *                   the transfer's line; serial transfers only)
 *   --refuse-body   the write callback takes no byte of the body, so a
 *                   transfer whose answer has one ends in
 *                   CURLE_WRITE_ERROR after its status came
 *   --unix-socket P connect to the Unix socket P
 *                   (CURLOPT_UNIX_SOCKET_PATH), the URL's host and port
 *                   being only names in the request
 *   --abstract-unix-socket N  the same, the abstract socket N
 *                   (CURLOPT_ABSTRACT_UNIX_SOCKET)
 *   --curlu-from K  transfers i >= K also set CURLOPT_CURLU (a CURLU of
 *                   the same URL) after CURLOPT_URL, just before perform
 *   --unix-until K  only transfers i < K go over that socket, the later
 *                   ones over TCP: with --reset or a new handle they are
 *                   set without the option, on a reused handle the
 *                   option is set to NULL before transfer K
 *   --fork-stress N no transfers: 2 threads set options on their handles
 *                   in a loop while the main thread forks N children
 *                   that each set an option on a third and exit; prints
 *                   "forks K", K the children that exited normally (one
 *                   that inherited a held lock is killed by SIGALRM
 *                   after 5 s and not counted; the
 *                   forking stops there)
 *
 * Output, one line per transfer (flushed):
 *   <thread> <i> <curlcode> <http status> <elapsed us> <errbuf or ->
 * Exit status 0 once every transfer ran, whatever their results; 2 on a
 * usage error.
 */
#include <curl/curl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *mode = "easy";
static int threads = 1, requests = 10, parallel = 4;
static const char *method = "GET";
static int insecure, use_errbuf, fresh, hold, dup_mode, reset_mode, info;
static int refuse_body;
static int print_body;
static long timeout_ms = 10000;
static curl_off_t maxfilesize = -1;
static const char *unix_path;
static CURLoption unix_option = CURLOPT_UNIX_SOCKET_PATH;
static int unix_until = -1; /* -1: every transfer */
static int curlu_from = -1; /* -1: no transfer */
static struct curl_blob cainfo;
static char **urls;
static int nurls;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
	(void)arg;
	if (print_body && !refuse_body)
		return fwrite(p, size, n, stdout);
	return refuse_body ? 0 : size * n;
}

static bool over_unix(int i)
{
	return unix_path && (unix_until < 0 || i < unix_until);
}

static void set_options(CURL *h, const char *url, char *errbuf, int i)
{
	curl_easy_setopt(h, CURLOPT_URL, url);
	if (over_unix(i))
		curl_easy_setopt(h, unix_option, unix_path);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (errbuf)
		curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	if (maxfilesize >= 0)
		curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE, maxfilesize);
	if (cainfo.data)
		curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &cainfo);
	if (strcmp(method, "POST") == 0)
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "x=1");
	else if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	else if (strcmp(method, "GET") != 0)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
}

static void report(int t, int i, int rc, long status, uint64_t us,
		   const char *errbuf)
{
	pthread_mutex_lock(&out_mu);
	printf("%d %d %d %ld %llu %s\n", t, i, rc, status,
	       (unsigned long long)us, errbuf && errbuf[0] ? errbuf : "-");
	fflush(stdout);
	pthread_mutex_unlock(&out_mu);
}

/* --info: what a program may read after transfer @i on @h. */
static void report_info(int i, CURL *h)
{
	long nconn = -9, port = -9, lport = -9, oserr = -9, cc = -9;
	long hdr = -9, req = -9, redirs = -9, ver = -9, ftime = -9;
	char *ip = NULL, *lip = NULL, *ct = NULL, *scheme = NULL;
	double total = -9;
	curl_off_t size = -9, clen = -9, total_t = -9, start_t = -9;

	curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &nconn);
	curl_easy_getinfo(h, CURLINFO_PRIMARY_IP, &ip);
	curl_easy_getinfo(h, CURLINFO_PRIMARY_PORT, &port);
	curl_easy_getinfo(h, CURLINFO_LOCAL_IP, &lip);
	curl_easy_getinfo(h, CURLINFO_LOCAL_PORT, &lport);
	curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &oserr);
	curl_easy_getinfo(h, CURLINFO_HTTP_CONNECTCODE, &cc);
	curl_easy_getinfo(h, CURLINFO_HEADER_SIZE, &hdr);
	curl_easy_getinfo(h, CURLINFO_REQUEST_SIZE, &req);
	curl_easy_getinfo(h, CURLINFO_REDIRECT_COUNT, &redirs);
	curl_easy_getinfo(h, CURLINFO_HTTP_VERSION, &ver);
	curl_easy_getinfo(h, CURLINFO_FILETIME, &ftime);
	curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
	curl_easy_getinfo(h, CURLINFO_SCHEME, &scheme);
	curl_easy_getinfo(h, CURLINFO_SIZE_DOWNLOAD_T, &size);
	curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &clen);
	curl_easy_getinfo(h, CURLINFO_TOTAL_TIME, &total);
	curl_easy_getinfo(h, CURLINFO_TOTAL_TIME_T, &total_t);
	curl_easy_getinfo(h, CURLINFO_STARTTRANSFER_TIME_T, &start_t);
	pthread_mutex_lock(&out_mu);
	printf("info %d nconn=%ld ip=%s port=%ld lip=%s lport=%ld errno=%ld "
	       "connectcode=%ld hdr=%ld req=%ld redirects=%ld version=%ld "
	       "filetime=%ld ctype=%s scheme=%s size=%lld "
	       "clen=%lld "
	       "start_us=%lld total_ms=%d total_t_ms=%d\n",
	       i, nconn, ip ? ip : "(null)", port, lip ? lip : "(null)", lport,
	       oserr, cc, hdr, req, redirs, ver, ftime, ct ? ct : "(null)",
	       scheme ? scheme : "(null)",
	       (long long)size, (long long)clen, (long long)start_t,
	       (int)(total * 1000), (int)(total_t / 1000));
	fflush(stdout);
	pthread_mutex_unlock(&out_mu);
}

static void *easy_thread(void *arg)
{
	int t = (int)(intptr_t)arg, i;
	char errbuf[CURL_ERROR_SIZE];
	CURL *tmpl = NULL, *h = NULL;
	CURL **held = hold ? calloc((size_t)requests, sizeof(*held)) : NULL;
	CURLU *cu = NULL;

	for (i = 0; i < requests; i++) {
		const char *url = urls[i % nurls];
		long status = 0;
		uint64_t t0;
		int rc;

		errbuf[0] = '\0';
		if (dup_mode) {
			if (!tmpl)
				tmpl = curl_easy_init();
			set_options(tmpl, url, use_errbuf ? errbuf : NULL, i);
			if (h)
				curl_easy_cleanup(h);
			h = curl_easy_duphandle(tmpl);
		} else if (!h || fresh) {
			if (h && !held)
				curl_easy_cleanup(h);
			h = curl_easy_init();
			if (held)
				held[i] = h;
			set_options(h, url, use_errbuf ? errbuf : NULL, i);
		} else if (reset_mode) {
			curl_easy_reset(h);
			set_options(h, url, use_errbuf ? errbuf : NULL, i);
		} else {
			curl_easy_setopt(h, CURLOPT_URL, url);
			if (unix_path && i == unix_until)
				curl_easy_setopt(h, unix_option, NULL);
		}
		if (curlu_from >= 0 && i >= curlu_from) {
			/* The URL is set; a CURLU given after it wins. */
			if (!cu)
				cu = curl_url();
			curl_url_set(cu, CURLUPART_URL, url, 0);
			curl_easy_setopt(h, CURLOPT_CURLU, cu);
		}
		t0 = now_us();
		rc = curl_easy_perform(h);
		t0 = now_us() - t0;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		report(t, i, rc, status, t0, use_errbuf ? errbuf : NULL);
		if (info)
			report_info(i, h);
	}
	if (held) {
		for (i = 0; i < requests; i++)
			if (held[i])
				curl_easy_cleanup(held[i]);
		free(held);
	} else if (h) {
		curl_easy_cleanup(h);
	}
	if (tmpl)
		curl_easy_cleanup(tmpl);
	if (cu)
		curl_url_cleanup(cu);
	return NULL;
}

struct slot {
	CURL *h;
	int i;
	uint64_t t0;
	char errbuf[CURL_ERROR_SIZE];
};

static void run_multi(void)
{
	struct slot *slots = calloc((size_t)requests, sizeof(*slots));
	CURLM *m = curl_multi_init();
	int next = 0, running = 0, done = 0;

	curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)parallel);
	while (done < requests) {
		CURLMsg *msg;
		int left;

		while (next < requests && next - done < parallel) {
			struct slot *s = &slots[next];

			s->i = next;
			s->h = curl_easy_init();
			set_options(s->h, urls[next % nurls],
				    use_errbuf ? s->errbuf : NULL, next);
			curl_easy_setopt(s->h, CURLOPT_PRIVATE, s);
			s->t0 = now_us();
			curl_multi_add_handle(m, s->h);
			next++;
		}
		curl_multi_perform(m, &running);
		while ((msg = curl_multi_info_read(m, &left))) {
			struct slot *s;
			long status = 0;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE,
					  (char **)&s);
			curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE,
					  &status);
			report(0, s->i, msg->data.result, status,
			       now_us() - s->t0, use_errbuf ? s->errbuf : NULL);
			curl_multi_remove_handle(m, s->h);
			curl_easy_cleanup(s->h);
			done++;
		}
		if (done < requests)
			curl_multi_poll(m, NULL, 0, 100, NULL);
	}
	curl_multi_cleanup(m);
	free(slots);
}

static atomic_int stress_stop;

/* Each churning thread sets options on its own handle: curl_easy_setopt
 * takes no lock of libcurl's (curl_easy_init does: libcurl's own global
 * spinlock, which a fork can leave held in the child whatever we do). */
static void *churn(void *arg)
{
	CURL *h = arg;

	while (!atomic_load(&stress_stop)) {
		curl_easy_setopt(h, CURLOPT_URL, urls[0]);
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PATCH");
	}
	return NULL;
}

static int fork_stress(int n)
{
	CURL *mine = curl_easy_init(), *theirs[2];
	pthread_t tid[2];
	int i, done = 0;

	for (i = 0; i < 2; i++) {
		theirs[i] = curl_easy_init();
		pthread_create(&tid[i], NULL, churn, theirs[i]);
	}
	for (i = 0; i < n; i++) {
		pid_t pid = fork();
		int st;

		if (pid == 0) {
			/* A child stuck on an inherited lock dies in 5 s
			 * and is not counted, instead of spinning on. */
			alarm(5);
			curl_easy_setopt(mine, CURLOPT_URL, urls[0]);
			_exit(0);
		}
		if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
		    WEXITSTATUS(st) == 0)
			done++;
		else
			break; /* one lost child is enough to know */
	}
	atomic_store(&stress_stop, 1);
	for (i = 0; i < 2; i++) {
		pthread_join(tid[i], NULL);
		curl_easy_cleanup(theirs[i]);
	}
	curl_easy_cleanup(mine);
	printf("forks %d\n", done);
	return 0;
}

/* Wait until @fd is readable (@in) or writable, 10 s at most. */
static int await_fd(curl_socket_t fd, bool in)
{
	struct pollfd p = {.fd = fd, .events = in ? POLLIN : POLLOUT};

	return poll(&p, 1, 10000) == 1 ? 0 : -1;
}

/*
 * connect-only mode: CURLOPT_CONNECT_ONLY, then --requests HTTP/1.1
 * requests on that connection with curl_easy_send, each answer read with
 * curl_easy_recv up to the end of its Content-Length body. Reported as
 * the easy mode's lines (thread 0).
 */
static void run_connect_only(void)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
	CURL *h = curl_easy_init();
	curl_socket_t fd = CURL_SOCKET_BAD;
	char buf[8192];
	int i, rc;

	curl_easy_setopt(h, CURLOPT_URL, urls[0]);
	curl_easy_setopt(h, CURLOPT_CONNECT_ONLY, 1L);
	rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_ACTIVESOCKET, &fd);
	for (i = 0; i < requests && rc == CURLE_OK; i++) {
		uint64_t t0 = now_us();
		size_t sent = 0, got = 0, n;
		long status = 0, clen = -1;
		char *end = NULL;

		while (rc == CURLE_OK && sent < sizeof(req) - 1) {
			rc = curl_easy_send(h, req + sent, sizeof(req) - 1 - sent,
					    &n);
			if (rc == CURLE_AGAIN && await_fd(fd, false) == 0)
				rc = CURLE_OK, n = 0;
			sent += rc == CURLE_OK ? n : 0;
		}
		while (rc == CURLE_OK &&
		       (!end || got < (size_t)(end - buf) + 4 + (size_t)clen)) {
			rc = curl_easy_recv(h, buf + got, sizeof(buf) - 1 - got,
					    &n);
			if (rc == CURLE_AGAIN && await_fd(fd, true) == 0) {
				rc = CURLE_OK;
				continue;
			}
			if (rc != CURLE_OK || n == 0)
				break;
			got += n;
			buf[got] = '\0';
			if (!end && (end = strstr(buf, "\r\n\r\n")) != NULL) {
				const char *cl = strstr(buf, "Content-Length:");

				clen = cl ? atol(cl + 15) : 0;
				status = atol(buf + 9);
			}
		}
		report(0, i, rc, status, now_us() - t0, NULL);
	}
	if (rc != CURLE_OK)
		report(0, i, rc, 0, 0, NULL);
	curl_easy_cleanup(h);
}

static int usage(void)
{
	fprintf(stderr, "usage: curl_client [--mode easy|multi|connect-only] "
			"[--threads N] "
			"[--requests N] [--parallel N] [--method M] "
			"[--insecure] [--errbuf] [--info] [--fresh [--hold]] "
			"[--dup] "
			"[--reset] "
			"[--timeout-ms N] [--maxfilesize N] "
			"[--cainfo-blob FILE] [--refuse-body] [--print-body] "
			"[--unix-socket PATH | --abstract-unix-socket NAME] "
			"[--unix-until K] [--curlu-from K] URL...\n");
	return 2;
}

int main(int argc, char **argv)
{
	pthread_t tid[64];
	int i, stress = 0;

	for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		const char *o = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(o, "--insecure") == 0)
			insecure = 1;
		else if (strcmp(o, "--errbuf") == 0)
			use_errbuf = 1;
		else if (strcmp(o, "--info") == 0)
			info = 1;
		else if (strcmp(o, "--fresh") == 0)
			fresh = 1;
		else if (strcmp(o, "--hold") == 0)
			hold = 1;
		else if (strcmp(o, "--dup") == 0)
			dup_mode = 1;
		else if (strcmp(o, "--reset") == 0)
			reset_mode = 1;
		else if (strcmp(o, "--refuse-body") == 0)
			refuse_body = 1;
		else if (strcmp(o, "--print-body") == 0)
			print_body = 1;
		else if (!v)
			return usage();
		else if (strcmp(o, "--mode") == 0)
			mode = v, i++;
		else if (strcmp(o, "--threads") == 0)
			threads = atoi(v), i++;
		else if (strcmp(o, "--requests") == 0)
			requests = atoi(v), i++;
		else if (strcmp(o, "--parallel") == 0)
			parallel = atoi(v), i++;
		else if (strcmp(o, "--method") == 0)
			method = v, i++;
		else if (strcmp(o, "--timeout-ms") == 0)
			timeout_ms = atol(v), i++;
		else if (strcmp(o, "--fork-stress") == 0)
			stress = atoi(v), i++;
		else if (strcmp(o, "--unix-socket") == 0) {
			unix_path = v;
			unix_option = CURLOPT_UNIX_SOCKET_PATH;
			i++;
		} else if (strcmp(o, "--abstract-unix-socket") == 0) {
			unix_path = v;
			unix_option = CURLOPT_ABSTRACT_UNIX_SOCKET;
			i++;
		} else if (strcmp(o, "--unix-until") == 0)
			unix_until = atoi(v), i++;
		else if (strcmp(o, "--maxfilesize") == 0)
			maxfilesize = (curl_off_t)atoll(v), i++;
		else if (strcmp(o, "--curlu-from") == 0)
			curlu_from = atoi(v), i++;
		else if (strcmp(o, "--cainfo-blob") == 0) {
			static char pem[65536];
			FILE *f = fopen(v, "r");
			size_t n = f ? fread(pem, 1, sizeof(pem), f) : 0;

			if (f)
				fclose(f);
			if (n == 0)
				return usage();
			cainfo.data = pem;
			cainfo.len = n;
			cainfo.flags = CURL_BLOB_COPY;
			i++;
		} else
			return usage();
	}
	if (i >= argc || threads < 1 || threads > 64 || requests < 1 ||
	    parallel < 1)
		return usage();
	urls = argv + i;
	nurls = argc - i;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (stress > 0)
		return fork_stress(stress);
	if (strcmp(mode, "multi") == 0) {
		run_multi();
	} else if (strcmp(mode, "connect-only") == 0) {
		run_connect_only();
	} else if (strcmp(mode, "easy") == 0) {
		for (i = 0; i < threads; i++)
			pthread_create(&tid[i], NULL, easy_thread,
				       (void *)(intptr_t)i);
		for (i = 0; i < threads; i++)
			pthread_join(tid[i], NULL);
	} else {
		return usage();
	}
	curl_global_cleanup();
	return 0;
}
