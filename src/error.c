/*
 * error.c - static descriptions of the result codes (error.h). A refusal is
 * not an error and has no entry here; see rx_reason_name in verdict.c.
 */
#include "resilix/error.h"

const char *rx_strerror(int code)
{
	switch (code) {
	case RX_OK:
		return "success";
	case RX_EINVAL:
		return "invalid argument or configuration value";
	case RX_ENOSPC:
		return "buffer or bounded table is full";
	case RX_ECORRUPT:
		return "serialised data is malformed or truncated";
	case RX_EVERSION:
		return "serialised data has an unsupported version";
	case RX_ENOMEM:
		return "out of memory";
	default:
		return "unknown error";
	}
}
