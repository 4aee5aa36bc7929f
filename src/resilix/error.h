/*
 * resilix/error.h - result codes of the policy core.
 *
 * Modelled on curl's CURLcode and libuv's negative errnos: 0 is success,
 * failures are negative. A policy refusing a call is NOT an error; it is a
 * decision (see policy.h), the library doing its job.
 */
#ifndef RESILIX_ERROR_H
#define RESILIX_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* Result codes. 0 for success, negative for failure. */
enum rx_error {
	RX_OK = 0,
	RX_EINVAL = -1,   /* an argument or configuration value is invalid */
	RX_ENOSPC = -2,   /* a caller-provided buffer or a bounded table is full */
	RX_ECORRUPT = -3, /* serialised data is malformed or truncated */
	RX_EVERSION = -4, /* serialised data has a version we do not read */
	RX_ENOMEM = -5    /* start-up allocation failed */
};

/*
 * rx_strerror - a static English description of a result code.
 * @code: any int; unknown codes give "unknown error".
 * Returns a pointer to a string constant; never NULL.
 * Thread-safe, async-signal-safe, O(1), no allocation.
 */
const char *rx_strerror(int code);

#ifdef __cplusplus
}
#endif
#endif
