/*
 * preload/shim_config.h - the environment parser of the shim (config.c),
 * usable on its own.
 *
 * The shim reads its configuration once, from RESILIX_* variables. The
 * parser is kept apart from everything the running shim owns (locks, the fd
 * table, the log, the registry): it takes an environment array, fills a
 * struct and reports every finding through a callback. A small program
 * (`resilix-run --check`, a test) includes this header, links
 * preload/config.c with the core (libresilix) and validates an environment
 * exactly as the shim would, without preloading anything.
 *
 * Rules it implements (docs/design.md section 3, "Configuration"):
 *   - strict syntax: decimal digits only for integers, a plain decimal for
 *     rates, no sign, no spaces, no trailing junk, no NaN or infinities,
 *     nothing empty; ranges are checked, never clamped;
 *   - an invalid value is an error: the caller must not guard with a
 *     configuration the user did not ask for (the shim passes everything
 *     through);
 *   - a rate of exactly 1 is valid but disables its trip condition (a rate
 *     cannot be strictly above 1), which is reported as a notice;
 *   - an unknown RESILIX_* variable is reported as a warning, so a typo does
 *     not silently do nothing.
 * Numbers are parsed without the C library's locale-dependent functions:
 * a program that set LC_NUMERIC before the first call still reads "0.5".
 */
#ifndef RESILIX_PRELOAD_SHIM_CONFIG_H
#define RESILIX_PRELOAD_SHIM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resilix/guard.h"
#include "resilix/registry.h"
#include "resilix/retry.h"

#include "filter.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Log levels of RESILIX_LOG, in increasing verbosity. */
enum rx_log_level {
	RX_LOG_OFF = 0,
	RX_LOG_ERROR,
	RX_LOG_WARN, /* the default */
	RX_LOG_INFO,
	RX_LOG_DEBUG
};

/* How much a process's calls matter when a shared key is short of
 * capacity (RESILIX_CRITICALITY): the buckets of a partitioned limiter,
 * lower ones shed first; the core's enum rx_criticality_bucket, in the
 * same order (partition.h, ADR-487). */
enum rx_criticality {
	RX_CRITICALITY_CRITICAL = 0,
	RX_CRITICALITY_DEGRADED,
	RX_CRITICALITY_BEST_EFFORT,
	RX_CRITICALITY_BULK,
	RX_CRITICALITY_COUNT
};

/* rx_log_level_name - "off", "error", "warn", "info", "debug"; "unknown"
 * out of range. Thread-safe, O(1), never NULL. */
const char *rx_log_level_name(enum rx_log_level level);

/* RESILIX_CURL_KEY: how the curl layer keys a transfer (ADR-154). */
enum rx_curl_key {
	RX_CURL_KEY_HOST = 0, /* "host": host:port of the URL (default) */
	RX_CURL_KEY_ENDPOINT, /* "endpoint": METHOD host:port/path */
	RX_CURL_KEY_ORIGIN    /* "origin": scheme://host:port */
};

/* Everything the shim reads from the environment. */
struct rx_config {
	bool disable;		      /* RESILIX_DISABLE=1: pass through */
	enum rx_log_level log_level;  /* RESILIX_LOG, default RX_LOG_WARN */
	const char *log_file;	      /* RESILIX_LOG_FILE; NULL = stderr.
					 Points into the environment array
					 given to rx_config_parse. */
	struct rx_guard_config guard; /* breaker and limiter settings, core
					 defaults */
	uint64_t queue_timeout_ms;    /* RESILIX_QUEUE_TIMEOUT_MS: longest a
					 blocking caller waits for a limiter
					 slot; 0 = never wait (ADR-136) */
	struct rx_registry_config registry; /* key bounds, core defaults */
	struct rx_filter include; /* RESILIX_INCLUDE; none = every
				     destination (ADR-143) */
	struct rx_filter exclude; /* RESILIX_EXCLUDE; port 53 always */
	bool key_host;		  /* RESILIX_KEY=host (ADR-144) */
	uint64_t timeout_ms;	  /* RESILIX_TIMEOUT_MS; 0 = unset
				     (ADR-145) */
	const char *metrics_file;     /* RESILIX_METRICS_FILE; NULL = none.
					 Points into the environment array. */
	uint64_t metrics_interval_ms; /* RESILIX_METRICS_INTERVAL_MS,
					 default 5000 (ADR-160) */
	enum rx_curl_key curl_key;    /* RESILIX_CURL_KEY, default host */
	const char *state_file;	      /* RESILIX_STATE_FILE; NULL = none.
					 Points into the environment array
					 (ADR-170). */
	const char *shared;	      /* RESILIX_SHARED; NULL = none. A
					 name or an absolute path, pointing
					 into the environment (ADR-480). */
	enum rx_criticality criticality; /* RESILIX_CRITICALITY, default
					    critical (ADR-487) */
	const char *tenant;	      /* RESILIX_TENANT; NULL = the
					 program's name. Points into the
					 environment (ADR-488). */
	/* Retry (config_policy.c, ADR-463); the bulkhead, rate limiter and
	 * throttler are in @guard. */
	struct rx_retry_config retry; /* RESILIX_RETRY_ATTEMPTS (1 = off),
					 _BASE_MS, _MAX_MS */
	struct rx_retry_budget_config budget; /* RESILIX_RETRY_BUDGET */
	/* Hedging of libcurl GET and HEAD (curl_hedge.c, ADR-469). */
	bool hedge;		 /* RESILIX_HEDGE=1; false = off */
	uint64_t hedge_delay_ms; /* RESILIX_HEDGE_DELAY_MS; 0 = the key's
				    measured p95 of time to first byte */
};

/* What a diagnostic is. */
enum rx_config_diag {
	RX_CONFIG_ERROR = 1, /* invalid value: do not use this configuration */
	RX_CONFIG_WARNING,   /* unknown or unsupported variable: ignored */
	RX_CONFIG_NOTICE     /* valid, but likely not what was meant */
};

/*
 * A diagnostic callback. @name is the variable ("RESILIX_OPEN_MS", or
 * "RESILIX" for a finding about several variables together); @msg is one
 * line without a prefix or newline, e.g.
 *   RESILIX_OPEN_MS="abc" is not valid (accepted: integer milliseconds
 *   1..86400000)
 * Both are valid only during the call (they may live on the parser's
 * stack).
 */
typedef void (*rx_config_report_fn)(void *arg, enum rx_config_diag kind,
				    const char *name, const char *msg);

/*
 * rx_config_default - the configuration with no RESILIX_* variable set:
 * guarding on, log level warn to stderr, breaker, limiter and registry
 * defaults of the core (rx_guard_config_default,
 * rx_registry_config_default), a queue timeout of 1000 ms.
 * Thread-safe, O(1), no allocation.
 */
void rx_config_default(struct rx_config *cfg);

/*
 * rx_config_parse - fill @cfg from the RESILIX_* entries of @envp.
 * @cfg:    output; reset to rx_config_default first.
 * @envp:   a NULL-terminated "NAME=value" array (environ); NULL = empty.
 *          It must outlive @cfg (log_file points into it).
 * @report: called once per finding, in environment order and then for the
 *          checks that combine variables; NULL = silent.
 * When a variable appears twice, the first occurrence counts (as getenv).
 * Returns the number of errors: 0 means @cfg is usable; otherwise @cfg is
 * the defaults plus whatever parsed, and must not be used for guarding.
 * Reentrant and thread-safe (no global state), no allocation, no I/O;
 * formats messages with snprintf into a stack buffer. O(variables).
 */
int rx_config_parse(struct rx_config *cfg, char *const *envp,
		    rx_config_report_fn report, void *arg);

/*
 * Describing a configuration, for `resilix-run --check` (ADR-166): the
 * variables this version reads, in the parser's table order, with the
 * text an error message quotes for their accepted values.
 * rx_config_var_name / rx_config_var_accepted return NULL for @i at or
 * past rx_config_var_count(). Thread-safe, O(1).
 */
/*
 * rx_config_printable - copy the string @src into @dst (@size bytes, at
 * least 1; longer input is cut) with every control character shown as
 * '?': a value, pattern or name from the environment must stay one
 * printable line wherever it is shown. @dst may be @src. O(length).
 */
void rx_config_printable(char *dst, size_t size, const char *src);

size_t rx_config_var_count(void);
const char *rx_config_var_name(size_t i);
const char *rx_config_var_accepted(size_t i);

/*
 * rx_config_value - the effective value of variable @i in @cfg, as it
 * would be written in the environment ("5000", "0.5", "warn"), or a short
 * phrase for a value that is off ("unset (stderr)"). Returns false, with
 * @buf untouched, for a variable whose value has no text form here (the
 * caller shows what was set). Locale-free; thread-safe; O(1).
 */
bool rx_config_value(const struct rx_config *cfg, size_t i, char *buf,
		     size_t size);

#ifdef __cplusplus
}
#endif
#endif
