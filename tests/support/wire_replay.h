/*
 * wire_replay.h - replay a recorded conversation through a protocol
 * module (preload/proto_pg.c, preload/proto_redis.c) and write down what
 * it reported, one character per event, so a test compares strings.
 *
 * A conversation is a table of struct wire_chunk, in the order the bytes
 * crossed the wire ('c': written by the client, 's': written by the
 * server), as tests/support/wirecap.py --c-chunks prints it. Each chunk
 * is fed whole (step 0) or in pieces of `step` bytes, and every piece is
 * fed until consumed, as the shim's adapter would. Events:
 *   '>' START    s a o t w  VERDICT success/answered/overload/transient/
 *                           timeout
 *   '#' TLS      '?' OTHER  '0' NO_CALL   (terminal: the replay stops)
 * Every call's return is checked against the contract of proto_wire.h;
 * a breach is counted in wire_breaches and shown as '!'.
 */
#ifndef RESILIX_TEST_WIRE_REPLAY_H
#define RESILIX_TEST_WIRE_REPLAY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "proto_wire.h"
#include "resilix/verdict.h"

struct wire_chunk {
	char dir;
	const uint8_t *bytes;
	size_t len;
};

/* A module seen through one state buffer. */
struct wire_ops {
	void (*init)(void *state);
	size_t (*write)(void *state, const uint8_t *b, size_t n,
			enum rx_wire_event *ev);
	size_t (*read)(void *state, const uint8_t *b, size_t n,
		       enum rx_wire_event *ev, enum rx_verdict *v);
};

static unsigned wire_breaches;

static char wire_event_char(enum rx_wire_event e, enum rx_verdict v)
{
	static const char verdicts[] = "saotwr";

	switch (e) {
	case RX_WIRE_START:
		return '>';
	case RX_WIRE_VERDICT:
		return v < RX_VERDICT_COUNT ? verdicts[v] : '!';
	case RX_WIRE_TLS:
		return '#';
	case RX_WIRE_OTHER:
		return '?';
	case RX_WIRE_NO_CALL:
		return '0';
	default:
		return '!';
	}
}

/* Feed @n bytes of one direction; append events to @out (room for @room
 * more characters, NUL kept). Returns false after a terminal event. */
static bool wire_feed(const struct wire_ops *ops, void *st, char dir,
		      const uint8_t *b, size_t n, char *out, size_t *len,
		      size_t cap)
{
	while (n > 0) {
		enum rx_wire_event e = RX_WIRE_MORE;
		enum rx_verdict v = RX_VERDICT_COUNT;
		size_t k;
		char ch;

		k = dir == 'c' ? ops->write(st, b, n, &e)
			       : ops->read(st, b, n, &e, &v);
		if (k > n || (k == 0 && e <= RX_WIRE_VERDICT) ||
		    (e == RX_WIRE_MORE && k != n) ||
		    (dir == 'c' && e == RX_WIRE_VERDICT) ||
		    (dir == 's' && e == RX_WIRE_START)) {
			wire_breaches++;
			ch = '!';
		} else if (e == RX_WIRE_MORE) {
			ch = 0;
		} else {
			ch = wire_event_char(e, v);
		}
		if (ch && *len + 1 < cap) {
			out[(*len)++] = ch;
			out[*len] = 0;
		}
		if (e > RX_WIRE_VERDICT || ch == '!' || k > n)
			return false;
		b += k;
		n -= k;
	}
	return true;
}

/* Replay @conv with pieces of @step bytes (0: whole chunks) into @out. */
static void wire_replay(const struct wire_ops *ops, void *st,
			const struct wire_chunk *conv, size_t step, char *out,
			size_t cap)
{
	size_t len = 0, at, piece;
	const struct wire_chunk *c;

	out[0] = 0;
	ops->init(st);
	for (c = conv; c->bytes; c++)
		for (at = 0; at < c->len; at += piece) {
			piece = step == 0 || c->len - at < step ? c->len - at
								: step;
			if (!wire_feed(ops, st, c->dir, c->bytes + at, piece,
				       out, &len, cap))
				return;
		}
}

#endif
