/*
 * curl_plugin.c - a plugin that uses libcurl, for the curl layer's test of
 * a libcurl that the program never linked: curl_dlopen loads this module
 * with dlopen(RTLD_LOCAL), which loads libcurl as the module's dependency,
 * outside the global scope where dlsym(RTLD_NEXT) looks (ADR-150).
 */
#include <curl/curl.h>
#include <string.h>

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

/* plugin_fetch - GET @url; returns the CURLcode, *status the HTTP status,
 * @errbuf (CURL_ERROR_SIZE bytes) libcurl's or resilix's message. */
int plugin_fetch(const char *url, long *status, char *errbuf);

int plugin_fetch(const char *url, long *status, char *errbuf)
{
	CURL *h = curl_easy_init();
	int rc;

	if (!h)
		return -1;
	errbuf[0] = '\0';
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
	rc = curl_easy_perform(h);
	*status = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	curl_easy_cleanup(h);
	return rc;
}
