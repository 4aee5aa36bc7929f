/*
 * preload/config.c - parse the RESILIX_* environment (see shim_config.h).
 *
 * Design. One table lists every variable this version understands, with
 * its syntax, its accepted range in words (the text the error message
 * quotes) and the field it sets. The parser walks the environment array
 * once, in order: a RESILIX_* name found in the table (or in
 * config_policy.c's, for the bulkhead, rate limiter, throttler and
 * retry) is parsed and range-checked; one found in the list of names
 * the design reserves for later features is reported as not supported
 * yet; any other RESILIX_* name is reported as unknown. Checks that combine variables (min calls
 * against the window size) and the core's own rx_guard_config_check run
 * last, so a value is never accepted here that the core would refuse.
 *
 * Nothing here touches global state, the clock, the log or the heap: the
 * caller decides what a finding means (the shim prints one line and passes
 * everything through; a checker may print them all). Numbers are parsed by
 * hand instead of strtoull/strtod: both skip leading spaces and accept a
 * sign (strtoull("-1") wraps to 2^64-1), and strtod reads the decimal
 * separator of the current locale and accepts "nan", "inf" and hex floats.
 * The hand parser accepts exactly [0-9]+ for integers and
 * [0-9]+(.[0-9]+)? or .[0-9]+ for rates, and nothing else.
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "config_policy.h"
#include "resilix/error.h"
#include "shim_config.h"

/* The syntax of a variable's value. */
enum kind {
	K_UINT,	 /* decimal integer within [min, max] */
	K_RATE,	 /* decimal number within [0, 1] */
	K_FILTER, /* destination patterns (filter.h) */
	K_KEY,	  /* ip | host */
	K_LEVEL, /* off | error | warn | info | debug */
	K_BOOL,	 /* 0 | 1 */
	K_PATH,	 /* any non-empty string */
	K_LIMITER, /* vegas | gradient2 | aimd | off */
	K_CURL_KEY /* host | endpoint | origin (ADR-154) */
};

/* Which field a variable sets. */
enum field {
	F_SLOW_CALL_MS,
	F_SLOW_CALL_RATE,
	F_FAILURE_RATE,
	F_CONSECUTIVE_BACKSTOP,
	F_MIN_CALLS,
	F_WINDOW_CALLS,
	F_WINDOW_MAX_AGE_MS,
	F_OPEN_MS,
	F_HALF_OPEN_PROBES,
	F_MAX_KEYS,
	F_KEY_TTL_MS,
	F_LOG,
	F_LOG_FILE,
	F_DISABLE,
	F_INCLUDE,
	F_EXCLUDE,
	F_KEY,
	F_TIMEOUT_MS,
	F_METRICS_FILE,
	F_METRICS_INTERVAL_MS,
	F_LIMITER,
	F_LIMIT_MIN,
	F_LIMIT_MAX,
	F_LIMIT_INITIAL,
	F_QUEUE_TIMEOUT_MS,
	F_LIMIT_STALE_MS,
	F_CURL_KEY,
	F_STATE_FILE,
	F_SHARED,
	F_COUNT
};

struct var {
	const char *name;
	enum field field;
	enum kind kind;
	uint64_t min, max; /* K_UINT only */
	const char *accepted;
};

/*
 * Ranges follow the fields of struct rx_breaker_config and struct
 * rx_registry_config; docs/config.md gives each default its provenance.
 * The slow threshold tops out at one hour: past that a call is not slow,
 * it is a stream.
 */
static const struct var vars[] = {
    {"RESILIX_SLOW_CALL_MS", F_SLOW_CALL_MS, K_UINT, 1, 3600000,
     "integer milliseconds 1..3600000; unset = slow-call condition off"},
    {"RESILIX_SLOW_CALL_RATE", F_SLOW_CALL_RATE, K_RATE, 0, 0,
     "a decimal number 0..1"},
    {"RESILIX_FAILURE_RATE", F_FAILURE_RATE, K_RATE, 0, 0,
     "a decimal number 0..1"},
    {"RESILIX_CONSECUTIVE_BACKSTOP", F_CONSECUTIVE_BACKSTOP, K_UINT, 0, 100000,
     "integer 0..100000, 0 = off"},
    {"RESILIX_MIN_CALLS", F_MIN_CALLS, K_UINT, 1, 100000,
     "integer 1..100000; above RESILIX_WINDOW_CALLS counts as it"},
    {"RESILIX_WINDOW_CALLS", F_WINDOW_CALLS, K_UINT, 1, 100000,
     "integer 1..100000"},
    {"RESILIX_WINDOW_MAX_AGE_MS", F_WINDOW_MAX_AGE_MS, K_UINT, 0, 86400000,
     "integer milliseconds 0..86400000, 0 = no age bound"},
    {"RESILIX_OPEN_MS", F_OPEN_MS, K_UINT, 1, 86400000,
     "integer milliseconds 1..86400000"},
    {"RESILIX_HALF_OPEN_PROBES", F_HALF_OPEN_PROBES, K_UINT, 1, 1000,
     "integer 1..1000"},
    /* Tighter than the core's 1..1000000: every process that loads the
     * shim pays for all its slots at start (ADR-205). */
    {"RESILIX_MAX_KEYS", F_MAX_KEYS, K_UINT, 1, 65536, "integer 1..65536"},
    {"RESILIX_KEY_TTL_MS", F_KEY_TTL_MS, K_UINT, 0, 2592000000u,
     "integer milliseconds 0..2592000000, 0 = keys never expire"},
    {"RESILIX_LOG", F_LOG, K_LEVEL, 0, 0, "off, error, warn, info or debug"},
    {"RESILIX_LOG_FILE", F_LOG_FILE, K_PATH, 0, 0, "a file path"},
    {"RESILIX_DISABLE", F_DISABLE, K_BOOL, 0, 0, "0 or 1"},
    /* Which destinations, how keyed, how long a call may take
     * (ADR-143 to ADR-145). */
    {"RESILIX_INCLUDE", F_INCLUDE, K_FILTER, 0, 0,
     "comma-separated CIDR, ip:port, [ipv6]:port or *:port patterns"},
    {"RESILIX_EXCLUDE", F_EXCLUDE, K_FILTER, 0, 0,
     "comma-separated CIDR, ip:port, [ipv6]:port or *:port patterns"},
    {"RESILIX_KEY", F_KEY, K_KEY, 0, 0, "ip or host"},
    {"RESILIX_TIMEOUT_MS", F_TIMEOUT_MS, K_UINT, 1, 3600000,
     "integer milliseconds 1..3600000; unset = no deadline"},
    /* Telemetry (metrics.c; ADR-160, ADR-161). */
    {"RESILIX_METRICS_FILE", F_METRICS_FILE, K_PATH, 0, 0,
     "a file path ending in .prom; %p is replaced by the process id"},
    {"RESILIX_METRICS_INTERVAL_MS", F_METRICS_INTERVAL_MS, K_UINT, 0,
     86400000, "integer milliseconds 0..86400000, 0 = at every settlement"},
    /* The adaptive concurrency limiter (limiter.h ranges; ADR-137). */
    {"RESILIX_LIMITER", F_LIMITER, K_LIMITER, 0, 0,
     "vegas, gradient2, aimd or off"},
    {"RESILIX_LIMIT_MIN", F_LIMIT_MIN, K_UINT, 1, 1000000,
     "integer 1..1000000, at most RESILIX_LIMIT_MAX"},
    {"RESILIX_LIMIT_MAX", F_LIMIT_MAX, K_UINT, 1, 1000000,
     "integer 1..1000000, at least RESILIX_LIMIT_MIN"},
    {"RESILIX_LIMIT_INITIAL", F_LIMIT_INITIAL, K_UINT, 1, 1000000,
     "integer 1..1000000, within RESILIX_LIMIT_MIN..RESILIX_LIMIT_MAX"},
    {"RESILIX_QUEUE_TIMEOUT_MS", F_QUEUE_TIMEOUT_MS, K_UINT, 0, 3600000,
     "integer milliseconds 0..3600000, 0 = never wait"},
    {"RESILIX_LIMIT_STALE_MS", F_LIMIT_STALE_MS, K_UINT, 1, 86400000,
     "integer milliseconds 1..86400000"},
    /* The curl layer's keys (curl.c; ADR-154). */
    {"RESILIX_CURL_KEY", F_CURL_KEY, K_CURL_KEY, 0, 0,
     "host, endpoint or origin"},
    /* State across processes (state.c; ADR-170 to ADR-174). */
    {"RESILIX_STATE_FILE", F_STATE_FILE, K_PATH, 0, 0,
     "a file path (not a directory)"},
    {"RESILIX_SHARED", F_SHARED, K_PATH, 0, 0, /* shared.c, ADR-480 */
     "a name of 1..200 characters [A-Za-z0-9._-], not . or .. "
     "(/dev/shm/resilix-NAME), or an absolute path under 4000 bytes"},
};

#define NVARS (sizeof(vars) / sizeof(vars[0]))

/*
 * Names that belong to the build and test tooling (exported by `make
 * check` to every test program) and to resilix-run (RESILIX_SO), not to
 * the shim: silently ignored, so a test's stderr is not polluted by
 * warnings.
 */
static const char *const tooling[] = {
	"RESILIX_SO",
	"RESILIX_BUILDDIR",
	"RESILIX_SRCDIR",
	"RESILIX_SANITIZERS",
	"RESILIX_SANITIZE_RUNTIME",
};
/* clang-format on */

static const char *const level_names[] = {"off", "error", "warn", "info",
					  "debug"};

/* @a equals the lower-case @b, ignoring ASCII case: RESILIX_LOG=INFO is
 * info (ADR-206), not an invalid value that disables resilix. No locale:
 * this runs before the program's setlocale. */
static bool ascii_ieq(const char *a, const char *b)
{
	for (; *a && *b; a++, b++) {
		char c = (*a >= 'A' && *a <= 'Z') ? (char)(*a - 'A' + 'a') : *a;

		if (c != *b)
			return false;
	}
	return *a == *b;
}

/* RESILIX_SHARED: an absolute path, or a name of one file in /dev/shm. */
static bool shared_name_ok(const char *v)
{
	size_t n = strlen(v);

	return v[0] == '/' ? n < 4000
			   : n <= 200 && strcmp(v, ".") && strcmp(v, "..") &&
				 strspn(v, "abcdefghijklmnopqrstuvwxyz._-"
					   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") == n;
}

const char *rx_log_level_name(enum rx_log_level level)
{
	if ((unsigned)level >= sizeof(level_names) / sizeof(level_names[0]))
		return "unknown";
	return level_names[level];
}

void rx_config_default(struct rx_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->disable = false;
	cfg->log_level = RX_LOG_WARN;
	cfg->log_file = NULL;
	cfg->metrics_file = NULL;
	cfg->state_file = NULL;
	cfg->shared = NULL;
	cfg->metrics_interval_ms = 5000; /* ADR-160 */
	rx_guard_config_default(&cfg->guard);
	rx_registry_config_default(&cfg->registry);
	rx__pconfig_default(cfg);
	/* Ours (ADR-136): long enough to ride out a burst at a limit found
	 * by the limiter (tens of round trips of a typical HTTP upstream),
	 * short enough that a caller stuck behind a collapsed upstream hears
	 * about it in a second. */
	cfg->queue_timeout_ms = 1000;
}

/* Parse [0-9]+ into *out; false on anything else or overflow. */
static bool parse_uint(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (*s == '\0')
		return false;
	for (; *s; s++) {
		unsigned d;

		if (*s < '0' || *s > '9')
			return false;
		d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

/*
 * Parse a plain decimal within [0, 1] into *out, as an integer fraction
 * over a power of ten. Fraction digits past the 18th are checked for
 * syntax but not used: they cannot change the nearest double of any rate
 * a human types.
 */
static bool parse_rate(const char *s, double *out)
{
	uint64_t ipart = 0, frac = 0, scale = 1;
	bool digits = false, nonzero = false;

	for (; *s >= '0' && *s <= '9'; s++) {
		digits = true;
		if (ipart > 1)
			return false; /* already out of range; stop early */
		ipart = ipart * 10 + (uint64_t)(*s - '0');
	}
	if (*s == '.') {
		bool fdigits = false;

		for (s++; *s >= '0' && *s <= '9'; s++) {
			fdigits = true;
			nonzero |= *s != '0';
			/* Digits past the 18th cannot change a double. */
			if (scale < UINT64_C(1000000000000000000)) {
				frac = frac * 10 + (uint64_t)(*s - '0');
				scale *= 10;
			}
		}
		if (!fdigits)
			return false; /* "1." is a typo, not a number */
		digits = true;
	}
	if (!digits || *s != '\0')
		return false;
	if (ipart > 1 || (ipart == 1 && nonzero))
		return false;
	*out = (double)ipart + (double)frac / (double)scale;
	return true;
}

/* Copy a value for quoting: at most 64 bytes, control bytes and quotes
 * shown as '?', so a message is always one printable line. */
static void quote(char *dst, size_t size, const char *v)
{
	size_t i = 0;

	for (; *v && i + 4 < size && i < 64; v++) {
		unsigned char c = (unsigned char)*v;

		dst[i++] = (c < 0x20 || c == 0x7f || c == '"') ? '?' : (char)c;
	}
	if (*v && i + 4 <= size) {
		memcpy(dst + i, "...", 3);
		i += 3;
	}
	dst[i] = '\0';
}

void rx_config_printable(char *dst, size_t size, const char *src)
{
	size_t i;

	for (i = 0; src[i] && i + 1 < size; i++)
		dst[i] = ((unsigned char)src[i] < 0x20 || src[i] == 0x7f)
			     ? '?'
			     : src[i];
	dst[i] = '\0';
}

/*
 * Every finding goes out through here: a value, a pattern or a variable
 * name from the environment may hold control characters (a newline, a
 * terminal escape), and a finding must stay one printable line. They
 * become '?'.
 */
static void emit(rx_config_report_fn report, void *arg,
		 enum rx_config_diag kind, const char *name, const char *msg)
{
	char clean[512], cname[80];

	if (!report)
		return;
	rx_config_printable(clean, sizeof(clean), msg);
	rx_config_printable(cname, sizeof(cname), name);
	report(arg, kind, cname, clean);
}

static void report_twice(const char *name, rx_config_report_fn report,
			 void *arg);
static void report_empty(const char *name, rx_config_report_fn report,
			 void *arg);

static void report_bad(rx_config_report_fn report, void *arg,
		       const char *name, const char *accepted,
		       const char *value)
{
	char q[80], msg[320];

	if (!report)
		return;
	quote(q, sizeof(q), value);
	snprintf(msg, sizeof(msg), "%s=\"%s\" is not valid (accepted: %s)",
		 name, q, accepted);
	emit(report, arg, RX_CONFIG_ERROR, name, msg);
}

static void report_invalid(rx_config_report_fn report, void *arg,
			   const struct var *var, const char *value)
{
	report_bad(report, arg, var->name, var->accepted, value);
}

/* A variable of config_policy.c's table (ADR-463): the first occurrence
 * counts (@pseen), empty is unset (@pgiven stays false, ADR-596).
 * Returns the number of errors (0 or 1). */
static int parse_pvar(struct rx_config *cfg, bool *pseen, bool *pgiven,
		      size_t k, const char *value, rx_config_report_fn report,
		      void *arg)
{
	const struct rx__pvar *pv = rx__pvar(k);

	if (pseen[k]) {
		report_twice(pv->name, report, arg);
		return 0;
	}
	pseen[k] = true;
	if (value[0] == '\0') {
		report_empty(pv->name, report, arg);
		return 0;
	}
	pgiven[k] = true;
	if (rx__pvar_parse(cfg, k, value))
		return 0;
	report_bad(report, arg, pv->name, pv->accepted, value);
	return 1;
}

static void set_uint(struct rx_config *cfg, enum field f, uint64_t v)
{
	struct rx_breaker_config *b = &cfg->guard.breaker;

	switch (f) {
	case F_SLOW_CALL_MS:
		b->slow_call_ms = v;
		break;
	case F_CONSECUTIVE_BACKSTOP:
		b->consecutive_backstop = (uint32_t)v;
		break;
	case F_MIN_CALLS:
		b->min_calls = (uint32_t)v;
		break;
	case F_WINDOW_CALLS:
		b->window_calls = (uint32_t)v;
		break;
	case F_WINDOW_MAX_AGE_MS:
		b->window_max_age_ms = v;
		break;
	case F_OPEN_MS:
		b->open_ms = v;
		break;
	case F_HALF_OPEN_PROBES:
		b->half_open_probes = (uint32_t)v;
		break;
	case F_MAX_KEYS:
		cfg->registry.max_keys = (uint32_t)v;
		break;
	case F_KEY_TTL_MS:
		cfg->registry.key_ttl_ms = v;
		break;
	case F_METRICS_INTERVAL_MS:
		cfg->metrics_interval_ms = v;
		break;
	case F_LIMIT_MIN:
		cfg->guard.limiter.min_limit = (uint32_t)v;
		break;
	case F_LIMIT_MAX:
		cfg->guard.limiter.max_limit = (uint32_t)v;
		break;
	case F_LIMIT_INITIAL:
		cfg->guard.limiter.initial_limit = (uint32_t)v;
		break;
	case F_QUEUE_TIMEOUT_MS:
		cfg->queue_timeout_ms = v;
		break;
	case F_LIMIT_STALE_MS:
		cfg->guard.limiter.stale_ms = v;
		break;
	case F_TIMEOUT_MS:
		cfg->timeout_ms = v;
		/* A probe keeps its slot until its deadline (ADR-381). */
		cfg->guard.breaker.call_timeout_ms = v;
		break;
	default:
		break;
	}
}

/* Parse one known variable. Returns false (after reporting) when invalid. */
static bool parse_var(struct rx_config *cfg, const struct var *var,
		      const char *value, rx_config_report_fn report, void *arg)
{
	uint64_t u;
	double r;
	size_t i;

	switch (var->kind) {
	case K_UINT:
		if (!parse_uint(value, &u) || u < var->min || u > var->max)
			break;
		set_uint(cfg, var->field, u);
		return true;
	case K_RATE:
		if (!parse_rate(value, &r))
			break;
		if (var->field == F_FAILURE_RATE)
			cfg->guard.breaker.failure_rate = r;
		else
			cfg->guard.breaker.slow_call_rate = r;
		if (r == 1.0 && report) {
			char msg[320];

			/* Some users expect 1 to mean "trip at 100 %"; the
			 * condition is "strictly above", so say what 1
			 * really does (docs/design.md, Configuration). */
			snprintf(msg, sizeof(msg),
				 "%s=1 disables the %s condition (the breaker "
				 "trips when the rate is strictly above the "
				 "threshold, and a rate cannot exceed 1)",
				 var->name,
				 var->field == F_FAILURE_RATE
				     ? "failure-rate"
				     : "slow-call-rate");
			emit(report, arg, RX_CONFIG_NOTICE, var->name, msg);
		}
		return true;
	case K_LEVEL:
		for (i = 0; i < sizeof(level_names) / sizeof(level_names[0]);
		     i++) {
			if (ascii_ieq(value, level_names[i])) {
				cfg->log_level = (enum rx_log_level)i;
				return true;
			}
		}
		break;
	case K_BOOL:
		if (strcmp(value, "0") == 0 || strcmp(value, "1") == 0) {
			cfg->disable = value[0] == '1';
			return true;
		}
		break;
	case K_FILTER: {
		char why[160], q[80], msg[400];

		if (rx_filter_parse(var->field == F_INCLUDE ? &cfg->include
							    : &cfg->exclude,
				    value, why, sizeof(why)) == 0)
			return true;
		if (report) {
			quote(q, sizeof(q), value);
			snprintf(msg, sizeof(msg),
				 "%s=\"%s\" is not valid: %s (accepted: %s)",
				 var->name, q, why, var->accepted);
			emit(report, arg, RX_CONFIG_ERROR, var->name, msg);
		}
		return false;
	}
	case K_KEY:
		if (ascii_ieq(value, "ip") || ascii_ieq(value, "host")) {
			cfg->key_host = value[0] == 'h' || value[0] == 'H';
			return true;
		}
		break;
	case K_PATH:
		/* The metrics file is replaced at every write: a name that is
		 * not a metrics file's is a slip of the hand (ADR-215). */
		if (var->field == F_METRICS_FILE &&
		    (strlen(value) < 6 ||
		     strcmp(value + strlen(value) - 5, ".prom") != 0))
			break;
		if (value[0] != '\0' &&
		    (var->field != F_SHARED || shared_name_ok(value))) {
			if (var->field == F_METRICS_FILE)
				cfg->metrics_file = value;
			else if (var->field == F_STATE_FILE)
				cfg->state_file = value;
			else if (var->field == F_SHARED)
				cfg->shared = value;
			else
				cfg->log_file = value;
			return true;
		}
		break;
	case K_LIMITER: {
		static const char *const algorithms[] = {"vegas", "gradient2",
							 "aimd"};

		if (ascii_ieq(value, "off")) {
			cfg->guard.limiter_on = false;
			return true;
		}
		for (i = 0; i < sizeof(algorithms) / sizeof(algorithms[0]);
		     i++) {
			if (ascii_ieq(value, algorithms[i]) &&
			    rx_limiter_algorithm_parse(
				algorithms[i],
				&cfg->guard.limiter.algorithm) == RX_OK) {
				cfg->guard.limiter_on = true;
				return true;
			}
		}
		break;
	}
	case K_CURL_KEY: {
		static const char *const modes[] = {"host", "endpoint",
						    "origin"};

		for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
			if (ascii_ieq(value, modes[i])) {
				cfg->curl_key = (enum rx_curl_key)i;
				return true;
			}
		}
		break;
	}
	}
	report_invalid(report, arg, var, value);
	return false;
}

/* Does "NAME=value" start with exactly @name followed by '='? Returns
 * the value or NULL. @entry starts "RESILIX_" (ours), as every name of
 * the tables does: most names differ from it in the byte after, which is
 * compared first. A loop, not strlen and strncmp (ADR-552). */
static const char *match(const char *entry, const char *name)
{
	if (entry[8] != name[8])
		return NULL;
	while (*name != '\0' && *entry == *name) {
		entry++;
		name++;
	}
	return *name == '\0' && *entry == '=' ? entry + 1 : NULL;
}

/* Does @entry start with "RESILIX_"? */
static bool ours(const char *entry)
{
	const char *p = "RESILIX_";

	while (*p != '\0' && *entry == *p) {
		entry++;
		p++;
	}
	return *p == '\0';
}

static bool in_list(const char *entry, const char *const *list, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (match(entry, list[i]))
			return true;
	return false;
}

/* Report a RESILIX_* name that is not a variable of this version. */
static void report_stray(const char *entry, rx_config_report_fn report,
			 void *arg)
{
	char name[96], msg[320];
	size_t n = strcspn(entry, "=");

	if (!report)
		return;
	quote(name, sizeof(name), entry);
	if (n < strlen(name))
		name[n] = '\0';
	if (entry[n] != '=') /* only execve can make one: no value at all */
		snprintf(msg, sizeof(msg),
			 "%s is in the environment without '=' (no value); "
			 "ignored",
			 name);
	else
		snprintf(msg, sizeof(msg),
			 "%s is not a resilix variable; ignored (a typo?)",
			 name);
	emit(report, arg, RX_CONFIG_WARNING, name, msg);
}

/* @name appears more than once in the environment. */
static void report_twice(const char *name, rx_config_report_fn report,
			 void *arg)
{
	char msg[320];

	if (!report)
		return;
	snprintf(msg, sizeof(msg),
		 "%s appears more than once in the environment; the first "
		 "value counts (a shell, and so resilix-run, passes on the "
		 "last)",
		 name);
	emit(report, arg, RX_CONFIG_WARNING, name, msg);
}

/* @name is set to the empty string: treated as unset (ADR-340). */
static void report_empty(const char *name, rx_config_report_fn report,
			 void *arg)
{
	char msg[320];

	if (!report)
		return;
	snprintf(msg, sizeof(msg),
		 "%s is set but empty; treated as unset (its default applies)",
		 name);
	emit(report, arg, RX_CONFIG_NOTICE, name, msg);
}

/* Report a finding about several variables together. */
static void report_combined(rx_config_report_fn report, void *arg,
			    const char *msg)
{
	if (report)
		emit(report, arg, RX_CONFIG_ERROR, "RESILIX", msg);
}

/*
 * The limiter's bounds taken together (ADR-137), and whether it starts
 * with a learning period (ADR-210: not when the user set the initial
 * limit), and whether its maximum caps it then (ADR-625: when set). MIN
 * above MAX is an error naming both; so is an INITIAL the user set outside
 * [MIN, MAX]; the default initial limit (20) is clamped into the range
 * when only MIN or MAX was set, so RESILIX_LIMIT_MAX=8 alone means "at
 * most 8". Returns the number of errors.
 */
static int limiter_bounds(struct rx_config *cfg, const bool *given,
			  rx_config_report_fn report, void *arg)
{
	struct rx_limiter_config *l = &cfg->guard.limiter;
	char msg[320];

	if (l->min_limit > l->max_limit) {
		snprintf(msg, sizeof(msg),
			 "RESILIX_LIMIT_MIN=%u is above RESILIX_LIMIT_MAX=%u "
			 "(accepted: MIN <= MAX; defaults 4 and 1000)",
			 l->min_limit, l->max_limit);
		report_combined(report, arg, msg);
		return 1;
	}
	l->max_binds_learning = given[F_LIMIT_MAX];
	if (given[F_LIMIT_INITIAL]) {
		/* A limit the user chose is enforced from the first call:
		 * no learning period (ADR-210). */
		l->learn_first = false;
		if (l->initial_limit < l->min_limit ||
		    l->initial_limit > l->max_limit) {
			snprintf(msg, sizeof(msg),
				 "RESILIX_LIMIT_INITIAL=%u is outside "
				 "RESILIX_LIMIT_MIN..RESILIX_LIMIT_MAX = "
				 "%u..%u",
				 l->initial_limit, l->min_limit, l->max_limit);
			report_combined(report, arg, msg);
			return 1;
		}
		return 0;
	}
	if (l->initial_limit < l->min_limit)
		l->initial_limit = l->min_limit;
	if (l->initial_limit > l->max_limit)
		l->initial_limit = l->max_limit;
	return 0;
}

/*
 * Every key's window is reserved at start-up (ADR-205): RESILIX_MAX_KEYS x
 * RESILIX_WINDOW_CALLS slots of 16 bytes. Each is in range alone, but
 * together they can ask for more address space than a host will map,
 * and the shim would then turn itself off at start - after the checker
 * said the configuration was valid. The product is bounded here, in the
 * parser both share (ADR-166).
 */
#define WINDOW_SLOTS_MAX (UINT64_C(1) << 28) /* 4 GiB of slots */

static int registry_size(const struct rx_config *cfg,
			 rx_config_report_fn report, void *arg)
{
	uint64_t slots = (uint64_t)cfg->registry.max_keys *
			 cfg->guard.breaker.window_calls;
	char msg[320];

	if (slots <= WINDOW_SLOTS_MAX)
		return 0;
	snprintf(msg, sizeof(msg),
		 "RESILIX_MAX_KEYS=%u x RESILIX_WINDOW_CALLS=%u is %llu "
		 "window slots, more than resilix reserves (accepted: a "
		 "product of at most %llu; lower either)",
		 cfg->registry.max_keys, cfg->guard.breaker.window_calls,
		 (unsigned long long)slots,
		 (unsigned long long)WINDOW_SLOTS_MAX);
	report_combined(report, arg, msg);
	return 1;
}

int rx_config_parse(struct rx_config *cfg, char *const *envp,
		    rx_config_report_fn report, void *arg)
{
	/* seen: it appeared; given: with a value (empty is unset, ADR-596) */
	bool seen[F_COUNT] = {false}, given[F_COUNT] = {false};
	bool pseen[RX__PVAR_COUNT] = {false}, pgiven[RX__PVAR_COUNT] = {false};
	char pmsg[320];
	const char *why = NULL;
	int errors = 0;
	size_t i, k;

	rx_config_default(cfg);
	for (i = 0; envp && envp[i]; i++) {
		const char *entry = envp[i];
		const char *value = NULL;
		const struct var *var = NULL;

		/* No libc call: the first strncmp would cost a lazy
		 * binding (ADR-552). */
		if (!ours(entry))
			continue;
		for (k = 0; k < NVARS && !value; k++) {
			value = match(entry, vars[k].name);
			var = &vars[k];
		}
		if (!value) {
			for (k = 0; k < RX__PVAR_COUNT && !value; k++)
				value = match(entry, rx__pvar(k)->name);
			if (value) {
				errors += parse_pvar(cfg, pseen, pgiven, k - 1,
						     value, report, arg);
				continue;
			}
			if (!in_list(entry, tooling,
				     sizeof(tooling) / sizeof(tooling[0])))
				report_stray(entry, report, arg);
			continue;
		}
		if (seen[var->field]) {
			/* getenv semantics: the first one counts. Shells keep
			 * the last, so the two may disagree: say so. */
			report_twice(var->name, report, arg);
			continue;
		}
		seen[var->field] = true;
		if (value[0] == '\0') {
			/* An empty value is unset, said once: `ENV RESILIX_LOG=`
			 * in a Dockerfile, or `VAR= cmd`, means "nothing", and
			 * turning the whole shim off for it helps no one
			 * (ADR-340). */
			report_empty(var->name, report, arg);
			continue;
		}
		given[var->field] = true;
		if (!parse_var(cfg, var, value, report, arg))
			errors++;
	}
	if (errors)
		return errors;
	if (limiter_bounds(cfg, given, report, arg) != 0 ||
	    registry_size(cfg, report, arg) != 0)
		return 1;
	if (rx__pconfig_check(cfg, pgiven, pmsg, sizeof(pmsg)) != 0) {
		report_combined(report, arg, pmsg);
		return 1;
	}
	if (rx__pconfig_orphan(cfg, pgiven) && report)
		emit(report, arg, RX_CONFIG_NOTICE, "RESILIX",
		     rx__pconfig_orphan(cfg, pgiven));

	/* A min_calls above the window size is not an error: the breaker
	 * counts it as the window size (breaker.h), so asking for a 10-call
	 * window does not also require lowering the default of 20. */
	if (rx_guard_config_check(&cfg->guard, &why) != RX_OK) {
		if (report) {
			char msg[320];

			snprintf(msg, sizeof(msg),
				 "the configuration is not valid: %s",
				 why ? why : "(no reason given)");
			emit(report, arg, RX_CONFIG_ERROR, "RESILIX", msg);
		}
		return 1;
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * Describing a configuration (`resilix-run --check`, ADR-166).
 * ---------------------------------------------------------------------- */

size_t rx_config_var_count(void)
{
	return NVARS + RX__PVAR_COUNT;
}

const char *rx_config_var_name(size_t i)
{
	if (i >= NVARS)
		return rx__pvar(i - NVARS) ? rx__pvar(i - NVARS)->name : NULL;
	return vars[i].name;
}

const char *rx_config_var_accepted(size_t i)
{
	if (i >= NVARS)
		return rx__pvar(i - NVARS) ? rx__pvar(i - NVARS)->accepted
					   : NULL;
	return vars[i].accepted;
}

/* Format a rate with up to six decimals, locale-free, without trailing
 * zeros ("0.5", "1", "0.125"). */
static void format_rate(char *buf, size_t size, double r)
{
	rx__micro_text(buf, size, (uint64_t)(r * 1e6 + 0.5));
}

bool rx_config_value(const struct rx_config *cfg, size_t i, char *buf,
		     size_t size)
{
	const struct rx_breaker_config *b = &cfg->guard.breaker;
	const char *s = NULL;
	uint64_t u = 0;
	double r = 0;

	if (i >= NVARS)
		return rx__pvar_value(cfg, i - NVARS, buf, size);
	if (size == 0)
		return false;
	switch (vars[i].field) {
	case F_SLOW_CALL_MS:
		if (b->slow_call_ms == 0)
			s = "unset (slow-call condition off)";
		u = b->slow_call_ms;
		break;
	case F_SLOW_CALL_RATE:
		r = b->slow_call_rate;
		goto rate;
	case F_FAILURE_RATE:
		r = b->failure_rate;
		goto rate;
	case F_CONSECUTIVE_BACKSTOP:
		u = b->consecutive_backstop;
		break;
	case F_MIN_CALLS:
		u = b->min_calls;
		break;
	case F_WINDOW_CALLS:
		u = b->window_calls;
		break;
	case F_WINDOW_MAX_AGE_MS:
		u = b->window_max_age_ms;
		break;
	case F_OPEN_MS:
		u = b->open_ms;
		break;
	case F_HALF_OPEN_PROBES:
		u = b->half_open_probes;
		break;
	case F_MAX_KEYS:
		u = cfg->registry.max_keys;
		break;
	case F_KEY_TTL_MS:
		u = cfg->registry.key_ttl_ms;
		break;
	case F_LOG:
		s = rx_log_level_name(cfg->log_level);
		break;
	case F_LOG_FILE:
		s = cfg->log_file ? cfg->log_file : "unset (stderr)";
		break;
	case F_DISABLE:
		s = cfg->disable ? "1" : "0";
		break;
	case F_METRICS_FILE:
		s = cfg->metrics_file ? cfg->metrics_file
				      : "unset (no metrics file)";
		break;
	case F_METRICS_INTERVAL_MS:
		u = cfg->metrics_interval_ms;
		break;
	case F_STATE_FILE:
		s = cfg->state_file ? cfg->state_file
				    : "unset (no state across processes)";
		break;
	case F_SHARED:
		s = cfg->shared ? cfg->shared : "unset (each process on its own)";
		break;
	case F_INCLUDE:
		if (cfg->include.count > 0)
			return false; /* the caller shows the list as set */
		s = "unset (every destination)";
		break;
	case F_EXCLUDE:
		if (cfg->exclude.count > 0)
			return false;
		s = "unset (port 53 only)";
		break;
	case F_KEY:
		s = cfg->key_host ? "host" : "ip";
		break;
	case F_LIMITER:
		s = cfg->guard.limiter_on ? rx_limiter_algorithm_name(
						cfg->guard.limiter.algorithm)
					  : "off";
		break;
	case F_LIMIT_MIN:
		u = cfg->guard.limiter.min_limit;
		break;
	case F_LIMIT_MAX:
		u = cfg->guard.limiter.max_limit;
		break;
	case F_LIMIT_INITIAL:
		u = cfg->guard.limiter.initial_limit;
		break;
	case F_QUEUE_TIMEOUT_MS:
		u = cfg->queue_timeout_ms;
		break;
	case F_LIMIT_STALE_MS:
		u = cfg->guard.limiter.stale_ms;
		break;
	case F_CURL_KEY:
		s = cfg->curl_key == 1	 ? "endpoint"
		    : cfg->curl_key == 2 ? "origin"
					 : "host";
		break;
	case F_TIMEOUT_MS:
		if (cfg->timeout_ms == 0)
			s = "unset (no deadline)";
		u = cfg->timeout_ms;
		break;
	default:
		/* A variable this function does not know how to show: the
		 * caller falls back to the text that was set. */
		return false;
	}
	return rx__value_text(buf, size, s, u);
rate:
	format_rate(buf, size, r);
	return true;
}
