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
 *     its effective value, and where the value came from ("default" or
 *     "environment"); with --verbose also the accepted values;
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

static void usage(FILE *f)
{
	fprintf(f,
		"usage: %s [--quiet] [--verbose]\n"
		"Validates the RESILIX_ variables of the environment as "
		"libresilix_preload.so\nwould, and prints the effective "
		"configuration. Exit 0 if valid, 1 if not.\n"
		"  --quiet    print only the findings, not the configuration\n"
		"  --verbose  also print the values each variable accepts\n",
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
		n = rx_config_var_count();
		for (i = 0; i < n; i++)
			if (strlen(rx_config_var_name(i)) > width)
				width = strlen(rx_config_var_name(i));
		printf("# resilix configuration: %s\n",
		       errors ? "NOT VALID - the shim would pass every call "
				"through unguarded"
			      : "valid");
		for (i = 0; i < n; i++) {
			const char *name = rx_config_var_name(i);
			const char *set = env_value(name);
			char value[512];

			/* With errors, the struct holds what parsed: show
			 * what the user wrote instead. */
			if (errors && set)
				rx_config_printable(value, sizeof(value), set);
			else if (!rx_config_value(&cfg, i, value,
						  sizeof(value)))
				rx_config_printable(value, sizeof(value),
						    set ? set : "(default)");
			else
				rx_config_printable(value, sizeof(value),
						    value);
			printf("%-*s %-24s %s", (int)width, name, value,
			       set ? "environment" : "default");
			if (verbose)
				printf("  [%s]", rx_config_var_accepted(i));
			printf("\n");
		}
	}
	return errors ? 1 : 0;
}
