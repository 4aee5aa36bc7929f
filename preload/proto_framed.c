/*
 * preload/proto_framed.c - the adapters that make the framed wire modules
 * (proto_pg.c, proto_redis.c) modules of the protocol interface (proto.h).
 *
 * Design. Both modules have one shape (proto_wire.h): a claim over the
 * first bytes written, a write function that reports where a call starts,
 * a read function that reports a verdict. So one adapter serves both,
 * through a small table of the module's functions; the table is static
 * and the calls are direct after inlining. The module's state lives in the
 * record's wide slot (ADR-408) with one byte of the adapter's own beside
 * it: the module stopped (its bytes were unseen or not its protocol).
 * Writes feed the client's side exactly, every byte; reads feed the
 * server's side only while a call waits, and a new call resynchronises
 * it at a message boundary (ADR-408). Decisions: ADR-400 to ADR-406 (the
 * modules), ADR-408 to ADR-411 (the adapters), ADR-676 (the keys a
 * cancel names).
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "fdtable.h"
#include "proto_framed.h"
#include "proto_pg.h"
#include "proto_redis.h"

/* The wide slot: the module's state, then the adapter's. */
struct framed {
	union {
		struct rx_pg pg;
		struct rx_redis redis;
	} m;
	uint8_t stopped; /* the module gave up: not framed any more */
};
_Static_assert(sizeof(struct framed) <= RX_PROTO_WIDE_BYTES,
	       "a framed module's state outgrew the wide slot");

/* A module, by its proto_wire.h functions. */
struct wire_ops {
	enum rx_wire_claim (*claim)(const uint8_t *buf, size_t n);
	size_t (*write)(void *s, const uint8_t *buf, size_t n,
			enum rx_wire_event *ev);
	size_t (*read)(void *s, const uint8_t *buf, size_t n,
		       enum rx_wire_event *ev, enum rx_verdict *v);
	void (*resync)(void *s);
};

static size_t pg_write(void *s, const uint8_t *b, size_t n,
		       enum rx_wire_event *ev)
{
	return rx__pg_write(s, b, n, ev);
}
static size_t pg_read(void *s, const uint8_t *b, size_t n,
		      enum rx_wire_event *ev, enum rx_verdict *v)
{
	return rx__pg_read(s, b, n, ev, v);
}
static void pg_resync(void *s)
{
	rx__pg_resync(s);
}
static size_t redis_write(void *s, const uint8_t *b, size_t n,
			  enum rx_wire_event *ev)
{
	return rx__redis_write(s, b, n, ev);
}
static size_t redis_read(void *s, const uint8_t *b, size_t n,
			 enum rx_wire_event *ev, enum rx_verdict *v)
{
	return rx__redis_read(s, b, n, ev, v);
}
static void redis_resync(void *s)
{
	rx__redis_resync(s);
}

static const struct wire_ops pg_ops = {rx__pg_claim, pg_write, pg_read,
				       pg_resync};
static const struct wire_ops redis_ops = {rx__redis_claim, redis_write,
					  redis_read, redis_resync};

static struct framed *slot(struct rx_proto_state *st)
{
	return rx__fd_proto_wide(st);
}

/* The first bytes written, gathered across the buffers up to what the
 * claims read (512 bytes: Redis's inline line). */
#define GATHER_MAX 512

static bool recognise(const struct wire_ops *ops, const struct iovec *iov,
		      int iovcnt)
{
	uint8_t buf[GATHER_MAX];
	size_t n = 0, take;
	int i;

	if (!iov || iovcnt <= 0)
		return false;
	if (iovcnt == 1 || iov[0].iov_len >= GATHER_MAX)
		return ops->claim(iov[0].iov_base, iov[0].iov_len) ==
		       RX_WIRE_CLAIM_YES;
	for (i = 0; i < iovcnt && n < GATHER_MAX; i++) {
		take = iov[i].iov_len < GATHER_MAX - n ? iov[i].iov_len
						       : GATHER_MAX - n;
		if (take)
			memcpy(buf + n, iov[i].iov_base, take);
		n += take;
	}
	return ops->claim(buf, n) == RX_WIRE_CLAIM_YES;
}

/*
 * Feed the first @n bytes of @iov to the module's write side of @s.
 * Returns the first terminal event, RX_WIRE_START when a call started
 * and @stop_at_start, else RX_WIRE_MORE.
 */
static enum rx_wire_event feed_writes(const struct wire_ops *ops, void *s,
				      const struct iovec *iov, int iovcnt,
				      size_t n, bool stop_at_start)
{
	enum rx_wire_event ev = RX_WIRE_MORE;
	int i;

	for (i = 0; i < iovcnt && n > 0; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t len = iov[i].iov_len < n ? iov[i].iov_len : n, k;

		n -= len;
		while (len > 0) {
			k = ops->write(s, p, len, &ev);
			p += k;
			len -= k;
			if (ev == RX_WIRE_START) {
				if (stop_at_start)
					return ev;
				continue;
			}
			if (ev != RX_WIRE_MORE)
				return ev; /* terminal */
			if (k == 0)
				break;
		}
	}
	return RX_WIRE_MORE;
}

static bool starts(const struct wire_ops *ops, struct rx_proto_state *st,
		   const struct iovec *iov, int iovcnt)
{
	struct framed copy;

	if (!iov || iovcnt <= 0)
		return false;
	memcpy(&copy, slot(st), sizeof(copy));
	if (copy.stopped)
		return false;
	return feed_writes(ops, &copy.m, iov, iovcnt, SIZE_MAX, true) ==
	       RX_WIRE_START;
}

static enum rx_proto_wrote wrote(const struct wire_ops *ops,
				 struct rx_proto_state *st,
				 const struct iovec *iov, int iovcnt, size_t n)
{
	struct framed *f = slot(st);
	enum rx_wire_event ev;

	if (f->stopped)
		return RX_PROTO_WROTE_UNFRAMED;
	if (!iov) {
		/* Bytes the module cannot frame: its framing is lost. */
		f->stopped = 1;
		return RX_PROTO_WROTE_UNFRAMED;
	}
	ev = feed_writes(ops, &f->m, iov, iovcnt, n, false);
	if (ev == RX_WIRE_NO_CALL)
		return RX_PROTO_WROTE_NO_CALL;
	if (ev != RX_WIRE_MORE) {
		f->stopped = 1;
		return RX_PROTO_WROTE_UNFRAMED;
	}
	return RX_PROTO_WROTE_OK;
}

static void reply(const struct wire_ops *ops, struct rx_proto_state *st,
		  const void *buf, size_t len, struct rx_proto_reply *out)
{
	struct framed *f = slot(st);
	enum rx_wire_event ev = RX_WIRE_MORE;
	enum rx_verdict v = RX_SUCCESS;

	out->kind = RX_PROTO_MORE;
	if (f->stopped) {
		out->kind = RX_PROTO_NOT_MINE;
		return;
	}
	(void)ops->read(&f->m, buf, len, &ev, &v);
	switch (ev) {
	case RX_WIRE_MORE:
		return;
	case RX_WIRE_VERDICT:
		out->kind = RX_PROTO_REPLY;
		out->verdict = v;
		out->began = true;
		return;
	case RX_WIRE_TLS:
		/* The server accepted encryption: its answer, a success; the
		 * plaintext that follows, if a layer sees it, is a new
		 * start-up (ADR-410). */
		memset(f, 0, sizeof(*f));
		out->kind = RX_PROTO_REPLY;
		out->verdict = RX_SUCCESS;
		out->began = true;
		return;
	default:
		f->stopped = 1;
		out->kind = RX_PROTO_NOT_MINE;
		return;
	}
}

/* ---- PostgreSQL --------------------------------------------------------- */

bool rx__pg_recognise(const struct iovec *iov, int iovcnt)
{
	return recognise(&pg_ops, iov, iovcnt);
}

uint64_t rx__pg_cancel_request(const struct iovec *iov, int iovcnt)
{
	const uint8_t *b;

	if (!iov || iovcnt < 1 || iov[0].iov_len < 16)
		return 0;
	b = iov[0].iov_base;
	if (b[0] || b[1] || b[2] || b[3] != 16 || b[4] != 0x04 ||
	    b[5] != 0xd2 || b[6] != 0x16 || b[7] != 0x2e)
		return 0; /* Int32 16, Int32 80877102 */
	return (uint64_t)b[8] << 56 | (uint64_t)b[9] << 48 |
	       (uint64_t)b[10] << 40 | (uint64_t)b[11] << 32 |
	       (uint64_t)b[12] << 24 | (uint64_t)b[13] << 16 |
	       (uint64_t)b[14] << 8 | b[15];
}

void rx__pg_open(struct rx_proto_state *st)
{
	memset(slot(st), 0, sizeof(struct framed));
}

bool rx__pg_starts(struct rx_proto_state *st, const struct iovec *iov,
		   int iovcnt)
{
	return starts(&pg_ops, st, iov, iovcnt);
}

enum rx_proto_wrote rx__pg_wrote(struct rx_proto_state *st,
				 const struct iovec *iov, int iovcnt, size_t n)
{
	return wrote(&pg_ops, st, iov, iovcnt, n);
}

void rx__pg_reply(struct rx_proto_state *st, const void *buf, size_t len,
		  struct rx_proto_reply *out)
{
	reply(&pg_ops, st, buf, len, out);
}

void rx__pg_next(struct rx_proto_state *st)
{
	pg_ops.resync(&slot(st)->m);
}

uint64_t rx__pg_cancels(struct rx_proto_state *st)
{
	const struct framed *f = slot(st);

	return f->stopped ? 0 : rx__pg_key(&f->m.pg);
}

uint64_t rx__pg_cancel_key(const struct rx_proto_state *st)
{
	const struct framed *f = rx__fd_proto_wide((struct rx_proto_state *)st);

	return !f->stopped && rx__pg_cancelled(&f->m.pg) ? rx__pg_key(&f->m.pg)
							 : 0;
}

/* ---- Redis -------------------------------------------------------------- */

bool rx__redis_recognise(const struct iovec *iov, int iovcnt)
{
	return recognise(&redis_ops, iov, iovcnt);
}

void rx__redis_open(struct rx_proto_state *st)
{
	memset(slot(st), 0, sizeof(struct framed));
}

bool rx__redis_starts(struct rx_proto_state *st, const struct iovec *iov,
		      int iovcnt)
{
	return starts(&redis_ops, st, iov, iovcnt);
}

enum rx_proto_wrote rx__redis_wrote(struct rx_proto_state *st,
				    const struct iovec *iov, int iovcnt,
				    size_t n)
{
	return wrote(&redis_ops, st, iov, iovcnt, n);
}

void rx__redis_reply(struct rx_proto_state *st, const void *buf, size_t len,
		     struct rx_proto_reply *out)
{
	reply(&redis_ops, st, buf, len, out);
}

void rx__redis_next(struct rx_proto_state *st)
{
	redis_ops.resync(&slot(st)->m);
}

bool rx__redis_untimed(const struct rx_proto_state *st)
{
	const struct framed *f = rx__fd_proto_wide((struct rx_proto_state *)st);

	return !f->stopped && rx__redis_blocking(&f->m.redis);
}
