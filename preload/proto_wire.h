/*
 * preload/proto_wire.h - what the framed protocol modules (proto_pg.c,
 * proto_redis.c) answer, in one shape an adapter to the shim's protocol
 * interface can map.
 *
 * Each module is a pure, incremental parser over a small state that lives
 * in the fd's record: no clock, no I/O, no allocation, no dependency on
 * the shim. It is fed every byte the program writes (its "write"
 * function) and reads (its "read" function), in whatever chunks the
 * program uses - an iovec is fed one segment at a time - and returns how
 * many bytes it consumed and one event. A function that returns an event
 * other than RX_WIRE_MORE may have consumed fewer bytes than it was given:
 * the caller feeds the rest in another call. Every call with n > 0
 * consumes at least one byte, except after a terminal event (OTHER, TLS,
 * NO_CALL), which every later call repeats with 0 consumed. A call is
 * defined per module (ADR-401, ADR-404): one call per request batch, from
 * the request that opens it to the first byte of its answer.
 */
#ifndef RESILIX_PROTO_WIRE_H
#define RESILIX_PROTO_WIRE_H

/* Whether a connection's first written bytes are the module's protocol. */
enum rx_wire_claim {
	RX_WIRE_CLAIM_NO = 0, /* not this protocol */
	RX_WIRE_CLAIM_YES,    /* this protocol's opening bytes */
	RX_WIRE_CLAIM_MORE    /* every byte so far fits: ask again with more */
};

enum rx_wire_event {
	/* Every byte given was consumed; nothing to report. */
	RX_WIRE_MORE = 0,
	/* Written bytes: a call starts. Its request began in the bytes just
	 * consumed (the last consumed byte belongs to it). Reported only
	 * while no call is open: requests written before the open call's
	 * answer join its batch. */
	RX_WIRE_START,
	/* Read bytes: the open call is decided by its answer, whose first
	 * byte is among (usually the last of) the bytes just consumed; the
	 * verdict is in *verdict. The call is closed. */
	RX_WIRE_VERDICT,
	/* Terminal: the bytes are not this protocol after all (an unknown
	 * message type, an impossible length). The module stops; the open
	 * call, if any, is left to the caller's generic rule. */
	RX_WIRE_OTHER,
	/* Terminal: the server accepted encryption (PostgreSQL's SSLRequest
	 * or GSSENCRequest answered 'S' or 'G'); ciphertext follows. Not a
	 * verdict: the handshake and the start-up still have to answer. A
	 * layer that sees the plaintext starts over with a fresh state. */
	RX_WIRE_TLS,
	/* Terminal: the connection carries no call (PostgreSQL's
	 * CancelRequest: the server reads it and closes without a byte).
	 * Its close is not evidence about the server. */
	RX_WIRE_NO_CALL
};

#endif
