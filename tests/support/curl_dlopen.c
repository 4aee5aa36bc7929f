/*
 * curl_dlopen.c - load a libcurl plugin with dlopen(RTLD_LOCAL) and fetch
 * a URL N times through it, printing "<i> <curlcode> <status> <errbuf>"
 * per transfer. The program itself never links libcurl.
 *
 * Usage: curl_dlopen PLUGIN.so N URL [probe]
 *
 * With "probe", first calls curl_easy_init and curl_easy_getinfo as the
 * global scope finds them before any libcurl is loaded (a program probing
 * for an optional libcurl), printing "probe <init's result>".
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int (*fetch)(const char *, long *, char *);
	char errbuf[256];
	void *mod;
	int i, n;

	if (argc != 4 && argc != 5)
		return 2;
	if (argc == 5) {
		void *(*init)(void) = NULL;
		int (*getinfo)(void *, int, ...) = NULL;
		long code = -1;

		*(void **)&init = dlsym(RTLD_DEFAULT, "curl_easy_init");
		*(void **)&getinfo = dlsym(RTLD_DEFAULT, "curl_easy_getinfo");
		printf("probe %s\n", init && init() ? "handle" : "none");
		if (getinfo)
			(void)getinfo(NULL, 0x200002, &code);
		fflush(stdout);
	}
	mod = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!mod) {
		fprintf(stderr, "curl_dlopen: %s\n", dlerror());
		return 1;
	}
	*(void **)&fetch = dlsym(mod, "plugin_fetch");
	if (!fetch)
		return 1;
	n = atoi(argv[2]);
	for (i = 0; i < n; i++) {
		long status = 0;
		int rc = fetch(argv[3], &status, errbuf);

		printf("%d %d %ld %s\n", i, rc, status,
		       errbuf[0] ? errbuf : "-");
		fflush(stdout);
	}
	return 0;
}
