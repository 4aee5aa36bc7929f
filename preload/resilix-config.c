/*
 * preload/resilix-config.c - validate a resilix environment without
 * running anything, and print the effective configuration.
 *
 * `resilix-run --check` execs this program (ADR-166). It links the shim's
 * own parser (config.c, with filter.c and the core), so a value it accepts
 * is exactly a value the shim accepts: there is no second copy of the
 * rules to drift. It reads its own environment - the caller's RESILIX_
 * variables plus whatever resilix-run's options set - and prints
 *   - every finding of the parser, one line each, on stderr:
 *       resilix-config: error: RESILIX_OPEN_MS="abc" is not valid (...)
 *   - then, on stdout, one line per variable of this version: its name,
 *     its effective value, and where the value came from ("default",
 *     "default (empty)" for a variable set empty, which the shim reads as
 *     unset, "environment", or what a --source option says: resilix-run
 *     names the option of its own that set it, ADR-369), in columns as
 *     wide as the longest name and value; with --verbose also the
 *     accepted values;
 *   - warnings about files the shim would fail to open (a log or metrics
 *     file in a directory that does not exist or is not writable) or
 *     would refuse to replace (a metrics or state file whose name another
 *     file, a link, a FIFO or a device has: ownfile.h). The shim treats
 *     those as warnings too - it keeps guarding - so they do not make the
 *     configuration invalid.
 * Exit status: 0 when the configuration is valid (the shim would guard
 * with it), 1 when it is not (the shim would pass everything through),
 * 2 on a usage error.
 */
#include "config.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ownfile.h"
#include "shim_config.h"

extern char **environ;

static const char *prog = "resilix-config";

static void report(void *arg, enum rx_config_diag kind, const char *name,
		   const char *msg)
{
	const char *what = kind == RX_CONFIG_ERROR     ? "error"
			   : kind == RX_CONFIG_WARNING ? "warning"
						       : "notice";

	(void)arg;
	(void)name;
	fprintf(stderr, "%s: %s: %s\n", prog, what, msg);
}

/* The value of @name in the environment, or NULL (first one counts, as in
 * the parser). */
static const char *env_value(const char *name)
{
	size_t n = strlen(name);
	char **e;

	for (e = environ; e && *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

/* Warn when the directory of @path cannot take a new file. */
static int check_dir(const char *var, const char *path)
{
	char copy[4096], *dir;

	if (!path || strlen(path) >= sizeof(copy))
		return 0;
	snprintf(copy, sizeof(copy), "%s", path);
	dir = dirname(copy);
	if (access(dir, W_OK | X_OK) != 0) {
		fprintf(stderr,
			"%s: warning: %s=\"%s\": directory %s is not "
			"writable (%s); the shim would guard without it\n",
			prog, var, path, dir, strerror(errno));
		return 1;
	}
	return 0;
}

/* --source NAME=TEXT: where NAME's value came from, as the caller knows
 * it (resilix-run: "option --open-ms"). The last one for a name counts. */
#define MAX_SOURCES 128
static const char *sources[MAX_SOURCES];
static size_t nsources;

static const char *source_given(const char *name)
{
	size_t n = strlen(name), i;

	for (i = nsources; i-- > 0;)
		if (strncmp(sources[i], name, n) == 0 && sources[i][n] == '=')
			return sources[i] + n + 1;
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [--quiet] [--verbose] [--source NAME=TEXT]...\n"
		"Validates the RESILIX_ variables of the environment as "
		"libresilix_preload.so\nwould, and prints the effective "
		"configuration. Exit 0 if valid, 1 if not.\n"
		"  --quiet    print only the findings, not the configuration\n"
		"  --verbose  also print the values each variable accepts\n"
		"  --source NAME=TEXT  show TEXT as where NAME's value came "
		"from\n",
		prog);
}

/* Warn when the shim would leave @path alone rather than replace it
 * (ADR-215, ADR-201): the same test the shim makes. A metrics file name
 * with %p is checked as this process would expand it - not at all. */
static int check_own(const char *var, const char *path, const char *head,
		     size_t len, const char *what)
{
	static const struct rx_file_io io = {read, close};
	const char *why;
	char buf[128];

	if (!path || strstr(path, "%p"))
		return 0;
	why = rx_file_foreign(&io, path, head, len, what, buf, sizeof(buf));
	if (!why)
		return 0;
	fprintf(stderr,
		"%s: warning: %s=\"%s\" %s; the shim would leave it "
		"untouched and guard without it\n",
		prog, var, path, why);
	return 1;
}

int main(int argc, char **argv)
{
	struct rx_config cfg;
	bool quiet = false, verbose = false;
	size_t i, n, width = 0;
	int errors, a;

	for (a = 1; a < argc; a++) {
		if (strcmp(argv[a], "--quiet") == 0) {
			quiet = true;
		} else if (strcmp(argv[a], "--verbose") == 0) {
			verbose = true;
		} else if (strcmp(argv[a], "--source") == 0 && a + 1 < argc &&
			   strchr(argv[a + 1], '=') && nsources < MAX_SOURCES) {
			sources[nsources++] = argv[++a];
		} else if (strcmp(argv[a], "-h") == 0 ||
			   strcmp(argv[a], "--help") == 0) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "%s: unknown argument '%s'\n", prog,
				argv[a]);
			usage(stderr);
			return 2;
		}
	}

	errors = rx_config_parse(&cfg, environ, report, NULL);
	if (errors == 0) {
		check_dir("RESILIX_LOG_FILE", cfg.log_file);
		check_dir("RESILIX_METRICS_FILE", cfg.metrics_file);
		check_dir("RESILIX_STATE_FILE", cfg.state_file);
		check_own("RESILIX_METRICS_FILE", cfg.metrics_file,
			  "# HELP resilix_", 15, "resilix metrics file");
		check_own("RESILIX_STATE_FILE", cfg.state_file, "RXSN", 4,
			  "resilix state file");
	}

	if (!quiet) {
		static char values[256][512];
		size_t vwidth = 0;

		n = rx_config_var_count();
		if (n > 256)
			n = 256;
		for (i = 0; i < n; i++) {
			const char *name = rx_config_var_name(i);
			const char *set = env_value(name);
			char *value = values[i];

			if (strlen(name) > width)
				width = strlen(name);
			/* With errors, the struct holds what parsed: show
			 * what the user wrote instead. */
			if (errors && set)
				rx_config_printable(value, 512, set);
			else if (!rx_config_value(&cfg, i, value, 512))
				rx_config_printable(value, 512,
						    set ? set : "(default)");
			else
				rx_config_printable(value, 512, value);
			if (strlen(value) > vwidth)
				vwidth = strlen(value);
		}
		printf("# resilix configuration: %s\n",
		       errors ? "NOT VALID - the shim would pass every call "
				"through unguarded"
			      : "valid");
		for (i = 0; i < n; i++) {
			const char *name = rx_config_var_name(i);
			const char *set = env_value(name);
			const char *src = source_given(name);

			if (!src)
				src = !set	? "default"
				      : !set[0] ? "default (empty)"
						: "environment";
			printf("%-*s  %-*s  %s", (int)width, name, (int)vwidth,
			       values[i], src);
			if (verbose)
				printf("  [%s]", rx_config_var_accepted(i));
			printf("\n");
		}
	}
	return errors ? 1 : 0;
}
