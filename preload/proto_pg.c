/*
 * preload/proto_pg.c - PostgreSQL protocol 3, framed both ways, a byte at
 * a time, so a message split over reads or several messages in one read
 * are the same to it.
 *
 * Design. Two small framers share one 32-byte state: the client's
 * (start-up packets without a type byte, then type byte + int32 length
 * including itself + body) and the server's (the one-byte answer to an
 * SSLRequest or GSSENCRequest, then typed messages). Bodies are skipped
 * by their length, except the few bytes a decision needs: an
 * Authentication message's code, and an ErrorResponse's fields, scanned
 * until the C (SQLSTATE) field whatever their order. A call is one
 * request batch (ADR-401): it opens at a Query, a FunctionCall, the first
 * extended-query message after the last Sync, or a start-up packet, and
 * its first outcome message decides (ADR-402); the SQLSTATE table is
 * ADR-402 and ADR-403. Two keys are kept for the shim's cancel matching
 * (ADR-676), off the query's path: a BackendKeyData's, found by a cold
 * scan of the rest of the start-up's answering read, and a
 * CancelRequest's, read as the start-up packet's last 8 bytes. The
 * PostgreSQL manual's "Message Formats" is the reference for every type
 * byte below.
 */
#include "proto_pg.h"

/* Client states. */
enum {
	C_STARTUP = 0, /* reading a start-up packet's 8-byte header */
	C_STARTUP_BODY,
	C_TYPE,
	C_LEN,
	C_BODY
};

/* Server states. */
enum {
	S_TYPE = 0, /* at a message boundary (or the SSLRequest's answer) */
	S_LEN,
	S_BODY,	 /* skipping */
	S_AUTH,	 /* reading an Authentication message's int32 code */
	S_ERROR, /* scanning an ErrorResponse's fields for the SQLSTATE */
};

/* flags */
enum {
	F_CALL = 1 << 0,     /* a call is open */
	F_BATCH = 1 << 1,    /* an extended-query request before its Sync */
	F_READY = 1 << 2,    /* start-up done: the first ReadyForQuery */
	F_SSL_WAIT = 1 << 3, /* SSLRequest sent: the next server byte answers */
	F_GSS_WAIT = 1 << 4, /* GSSENCRequest sent, likewise */
	F_KEY = 1 << 5,	     /* key_pid and key_secret are known */
};

#define CODE_PROTO3 196608u /* 3 << 16: protocol 3.0 */
#define CODE_SSL 80877103u  /* 1234 << 16 | 5679 */
#define CODE_GSS 80877104u  /* 1234 << 16 | 5680 */
#define CODE_CANCEL 80877102u
#define STARTUP_MAX 10000u /* PostgreSQL's MAX_STARTUP_PACKET_LENGTH */
#define LEN_MAX 0x7fffffffu

void rx__pg_init(struct rx_pg *s)
{
	*s = (struct rx_pg){0};
}

void rx__pg_resync(struct rx_pg *s)
{
	s->s_state = S_TYPE;
	s->s_pos = 0;
	s->s_type = 0;
	s->s_left = 0;
	s->s_word = 0;
	s->e_field = 0;
	s->e_len = 0;
}

bool rx__pg_call_open(const struct rx_pg *s)
{
	return (s->flags & F_CALL) != 0;
}

/* ---------------------------------------------------------------------
 * Recognising a connection
 * ------------------------------------------------------------------- */

/* The fixed opening packets, as their first 8 bytes. */
static const uint8_t fixed_packets[3][8] = {
    {0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f},  /* SSLRequest */
    {0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x30},  /* GSSENCRequest */
    {0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e}, /* CancelRequest */
};

/* Do the @n (< 8 or 8) bytes at @b fit a StartupMessage header? */
static bool fits_startup(const uint8_t *b, size_t n)
{
	uint32_t len;

	if ((n > 0 && b[0] != 0) || (n > 1 && b[1] != 0))
		return false; /* lengths stop at 10000 */
	if (n > 3) {
		len = (uint32_t)b[2] << 8 | b[3];
		if (len < 9 || len > STARTUP_MAX)
			return false; /* at least the empty parameter list */
	}
	/* The version: major 3 in the high 16 bits, any minor. */
	return !((n > 4 && b[4] != 0) || (n > 5 && b[5] != 3));
}

enum rx_wire_claim rx__pg_claim(const uint8_t *buf, size_t n)
{
	size_t m = n < 8 ? n : 8, i, j;

	if (n == 0 || buf == NULL)
		return RX_WIRE_CLAIM_MORE;
	if (fits_startup(buf, m))
		return m == 8 ? RX_WIRE_CLAIM_YES : RX_WIRE_CLAIM_MORE;
	for (i = 0; i < 3; i++) {
		for (j = 0; j < m && buf[j] == fixed_packets[i][j]; j++)
			;
		if (j == m)
			return m == 8 ? RX_WIRE_CLAIM_YES : RX_WIRE_CLAIM_MORE;
	}
	return RX_WIRE_CLAIM_NO;
}

/* ---------------------------------------------------------------------
 * SQLSTATE -> verdict (ADR-402, ADR-403)
 * ------------------------------------------------------------------- */

static bool is_code(const char *c, const char *want)
{
	int i;

	for (i = 0; i < 5; i++)
		if (c[i] != want[i])
			return false;
	return true;
}

enum rx_verdict rx__pg_sqlstate_verdict(const char *c)
{
	int i;

	if (c == NULL)
		return RX_TRANSIENT;
	for (i = 0; i < 5; i++)
		if (!((c[i] >= '0' && c[i] <= '9') ||
		      (c[i] >= 'A' && c[i] <= 'Z')))
			return RX_TRANSIENT; /* not an SQLSTATE: a broken reply
					      */
	switch (c[0]) {
	case '0':
		if (c[1] == '8')
			return RX_TRANSIENT; /* connection exception */
		break;
	case '4':
		/* Contention - 40001, 40P01 - is answered: the database's
		 * concurrency control worked and the program retries (ADR-652). */
		if (is_code(c, "40003"))
			return RX_TRANSIENT; /* statement_completion_unknown */
		break;
	case '5':
		if (c[1] == '3')
			return RX_OVERLOAD; /* insufficient resources */
		if (c[1] == '8')
			return RX_TRANSIENT; /* system error */
		if (is_code(c, "57014"))
			return RX_TIMEOUT; /* query_canceled: statement_timeout
					    */
		if (is_code(c, "57000") || is_code(c, "57P01") ||
		    is_code(c, "57P02") || is_code(c, "57P03"))
			return RX_TRANSIENT; /* shutdown, starting up */
		break;
	case 'F':
		if (c[1] == '0')
			return RX_TRANSIENT; /* configuration file error */
		break;
	case 'X':
		if (c[1] == 'X')
			return RX_TRANSIENT; /* internal error */
		break;
	default:
		break;
	}
	return RX_ANSWERED;
}

/* ---------------------------------------------------------------------
 * Written bytes
 * ------------------------------------------------------------------- */

/* Frontend message types after start-up (the manual, "Message Formats"). */
static bool frontend_type(uint8_t t)
{
	switch (t) {
	case 'B':
	case 'C':
	case 'D':
	case 'E':
	case 'F':
	case 'H':
	case 'P':
	case 'Q':
	case 'S':
	case 'X':
	case 'c':
	case 'd':
	case 'f':
	case 'p':
		return true;
	default:
		return false;
	}
}

/* A message of type @t begins on the client side: does it open a call?
 * Updates the batch flag either way. */
static bool client_opens(struct rx_pg *s, uint8_t t)
{
	bool request = false;

	switch (t) {
	case 'Q':
	case 'F':
	case 'p':
		request = true;
		break;
	case 'P':
	case 'B':
	case 'D':
	case 'E':
	case 'C':
		request = !(s->flags & F_BATCH);
		s->flags |= F_BATCH;
		break;
	case 'S':
		/* A Sync ends the batch; alone, it is a request of its own:
		 * the server answers it with a ReadyForQuery. */
		request = !(s->flags & F_BATCH);
		s->flags &= (uint8_t)~F_BATCH;
		break;
	default:
		break; /* X, H, and COPY's d, c, f */
	}
	if (!request || (s->flags & F_CALL))
		return false;
	s->flags |= F_CALL;
	return true;
}

static size_t terminal(struct rx_pg *s, enum rx_wire_event e,
		       enum rx_wire_event *ev, size_t consumed)
{
	s->end = (uint8_t)e;
	s->flags &= (uint8_t)~F_CALL;
	*ev = e;
	return consumed;
}

/* The 8-byte start-up header is complete in c_left (length) and c_word
 * (code). Returns the event it causes. */
static enum rx_wire_event startup_packet(struct rx_pg *s)
{
	uint32_t len = s->c_left, code = s->c_word;
	bool opens = !(s->flags & F_CALL);

	if (len == 8 && (code == CODE_SSL || code == CODE_GSS)) {
		s->flags |= code == CODE_SSL ? F_SSL_WAIT : F_GSS_WAIT;
		s->c_state = C_STARTUP; /* after 'N', another packet */
		s->c_left = 0;
	} else if (len == 16 && code == CODE_CANCEL) {
		/* The key it names comes next (ADR-676): NO_CALL at its end,
		 * the header's bytes kept in C_STARTUP. */
		return RX_WIRE_MORE;
	} else if (len >= 9 && len <= STARTUP_MAX && (code >> 16) == 3) {
		s->c_left = len - 8;
		s->c_state = s->c_left ? C_STARTUP_BODY : C_TYPE;
	} else {
		return RX_WIRE_OTHER;
	}
	s->c_pos = 0;
	s->c_word = 0;
	if (!opens)
		return RX_WIRE_MORE;
	s->flags |= F_CALL;
	return RX_WIRE_START;
}

/* Byte @c of a CancelRequest's process ID and secret key (c_pos 8 to
 * 15). true at the last: the key is known. */
static __attribute__((noinline, cold)) bool cancel_key_byte(struct rx_pg *s,
							    uint8_t c)
{
	if (s->c_pos < 12)
		s->key_pid = s->key_pid << 8 | c;
	else
		s->key_secret = s->key_secret << 8 | c;
	if (++s->c_pos < 16)
		return false;
	s->flags |= F_KEY;
	return true;
}

size_t rx__pg_write(struct rx_pg *s, const uint8_t *buf, size_t n,
		    enum rx_wire_event *ev)
{
	size_t i = 0, take;
	enum rx_wire_event e;

	*ev = RX_WIRE_MORE;
	if (s->end) {
		*ev = (enum rx_wire_event)s->end;
		return 0;
	}
	while (i < n) {
		uint8_t c = buf[i];

		switch (s->c_state) {
		case C_STARTUP:
			i++;
			if (s->c_pos >= 8) { /* a CancelRequest's key */
				if (cancel_key_byte(s, c))
					return terminal(s, RX_WIRE_NO_CALL, ev,
							i);
				break;
			}
			if (s->c_pos < 4)
				s->c_left = s->c_left << 8 | c;
			else
				s->c_word = s->c_word << 8 | c;
			if (++s->c_pos < 8)
				break;
			e = startup_packet(s);
			if (e == RX_WIRE_START) {
				*ev = e;
				return i;
			}
			if (e != RX_WIRE_MORE)
				return terminal(s, e, ev, i);
			break;
		case C_STARTUP_BODY:
		case C_BODY:
			take = n - i < s->c_left ? n - i : s->c_left;
			i += take;
			s->c_left -= (uint32_t)take;
			if (s->c_left == 0)
				s->c_state = C_TYPE;
			break;
		case C_TYPE:
			i++;
			if (!frontend_type(c))
				return terminal(s, RX_WIRE_OTHER, ev, i);
			s->c_state = C_LEN;
			s->c_pos = 0;
			s->c_word = 0;
			if (client_opens(s, c)) {
				*ev = RX_WIRE_START;
				return i;
			}
			break;
		case C_LEN:
			i++;
			s->c_word = s->c_word << 8 | c;
			if (++s->c_pos < 4)
				break;
			if (s->c_word < 4 || s->c_word > LEN_MAX)
				return terminal(s, RX_WIRE_OTHER, ev, i);
			s->c_left = s->c_word - 4;
			s->c_state = s->c_left ? C_BODY : C_TYPE;
			break;
		default:
			return terminal(s, RX_WIRE_OTHER, ev, i);
		}
	}
	return i;
}

/* ---------------------------------------------------------------------
 * Read bytes
 * ------------------------------------------------------------------- */

/* Backend message types (the manual, "Message Formats"). */
static bool backend_type(uint8_t t)
{
	switch (t) {
	case '1':
	case '2':
	case '3':
	case 'A':
	case 'C':
	case 'D':
	case 'E':
	case 'G':
	case 'H':
	case 'I':
	case 'K':
	case 'N':
	case 'R':
	case 'S':
	case 'T':
	case 'V':
	case 'W':
	case 'Z':
	case 'c':
	case 'd':
	case 'n':
	case 's':
	case 't':
	case 'v':
		return true;
	default:
		return false;
	}
}

/* Is a message of type @t, starting while a call is open, its answer -
 * decided by the type alone? E and (during start-up) R need their bodies;
 * the rest either decide a success or are not answers. */
enum { NOT_ANSWER, ANSWER_OK, NEEDS_BODY };

static int answer_kind(const struct rx_pg *s, uint8_t t)
{
	switch (t) {
	case 'N': /* NoticeResponse: any time */
	case 'A': /* NotificationResponse: any time */
		return NOT_ANSWER;
	case 'T': /* RowDescription, before the first row is computed */
	case '1': /* ParseComplete */
	case '2': /* BindComplete */
	case '3': /* CloseComplete */
	case 't': /* ParameterDescription */
	case 'n': /* NoData */
		return NOT_ANSWER;
	case 'S': /* ParameterStatus: ends the start-up, a side note later */
		return (s->flags & F_READY) ? NOT_ANSWER : ANSWER_OK;
	case 'E':
	case 'R':
		return NEEDS_BODY;
	default:
		return ANSWER_OK;
	}
}

static void startup_rest(struct rx_pg *s, const uint8_t *b, size_t n);

/* The open call is decided by @v at @buf[@consumed - 1] (of @n bytes).
 * The start-up's answer - before the first ReadyForQuery - also has the
 * rest of its read scanned for the BackendKeyData (ADR-676). */
static size_t decide(struct rx_pg *s, enum rx_verdict v, enum rx_wire_event *ev,
		     enum rx_verdict *verdict, const uint8_t *buf,
		     size_t consumed, size_t n)
{
	s->flags &= (uint8_t)~F_CALL;
	*verdict = v;
	*ev = RX_WIRE_VERDICT;
	if (__builtin_expect(!(s->flags & F_READY), 0))
		startup_rest(s, buf + consumed, n - consumed);
	return consumed;
}

/* The message's body is done: back to a boundary. */
static void body_done(struct rx_pg *s)
{
	s->s_state = S_TYPE;
	s->s_pos = 0;
	s->s_word = 0;
}

/*
 * One byte @c of an ErrorResponse's fields (s_left already counts it).
 * Returns true once the verdict is known, in *@v, having moved the
 * framer past the fields: at the fifth SQLSTATE character; TRANSIENT
 * when the fields or the message end without a five-character C field
 * (a reply that does not follow the protocol).
 */
static bool error_step(struct rx_pg *s, uint8_t c, enum rx_verdict *v)
{
	bool done = false;

	*v = RX_TRANSIENT;
	if (s->e_field == 0) {
		if (c == 0)
			done = true; /* the end of the fields, and no C */
		else
			s->e_field = c;
	} else if (c == 0) {
		done = s->e_field == 'C'; /* a C field shorter than five */
		s->e_field = 0;
	} else if (s->e_field == 'C') {
		s->sqlstate[s->e_len++] = (char)c;
		if (s->e_len == 5) {
			*v = rx__pg_sqlstate_verdict(s->sqlstate);
			done = true;
		}
	}
	if (done || s->s_left == 0) {
		s->s_state = S_BODY;
		if (s->s_left == 0)
			body_done(s);
		return true;
	}
	return false;
}

size_t rx__pg_read(struct rx_pg *s, const uint8_t *buf, size_t n,
		   enum rx_wire_event *ev, enum rx_verdict *verdict)
{
	size_t i = 0, take;

	*ev = RX_WIRE_MORE;
	if (s->end) {
		*ev = (enum rx_wire_event)s->end;
		return 0;
	}
	while (i < n) {
		uint8_t c = buf[i];

		switch (s->s_state) {
		case S_TYPE:
			i++;
			if (s->flags & (F_SSL_WAIT | F_GSS_WAIT)) {
				bool ssl = (s->flags & F_SSL_WAIT) != 0;

				s->flags &=
				    (uint8_t) ~(F_SSL_WAIT | F_GSS_WAIT);
				if ((ssl && c == 'S') || (!ssl && c == 'G'))
					return terminal(s, RX_WIRE_TLS, ev, i);
				if (c == 'N')
					break; /* plaintext start-up follows */
				/* A server without TLS support may answer with
				 * an ErrorResponse: framed below. */
				if (c != 'E')
					return terminal(s, RX_WIRE_OTHER, ev,
							i);
			}
			if (!backend_type(c))
				return terminal(s, RX_WIRE_OTHER, ev, i);
			s->s_type = c;
			s->s_state = S_LEN;
			s->s_pos = 0;
			s->s_word = 0;
			if (c == 'Z')
				s->flags |= F_READY;
			if ((s->flags & F_CALL) &&
			    answer_kind(s, c) == ANSWER_OK)
				return decide(s, RX_SUCCESS, ev, verdict, buf,
					      i, n);
			break;
		case S_LEN:
			i++;
			s->s_word = s->s_word << 8 | c;
			if (++s->s_pos < 4)
				break;
			if (s->s_word < 4 || s->s_word > LEN_MAX)
				return terminal(s, RX_WIRE_OTHER, ev, i);
			s->s_left = s->s_word - 4;
			s->s_word = 0;
			s->s_pos = 0;
			s->s_state = S_BODY;
			if ((s->flags & F_CALL) && s->s_type == 'E') {
				s->s_state = S_ERROR;
				s->e_field = 0;
				s->e_len = 0;
			} else if ((s->flags & F_CALL) && s->s_type == 'R') {
				s->s_state = S_AUTH;
			}
			if (s->s_left == 0) {
				bool error = s->s_state == S_ERROR;

				body_done(s);
				if (error) /* no fields at all */
					return decide(s, RX_TRANSIENT, ev,
						      verdict, buf, i, n);
			}
			break;
		case S_BODY:
			take = n - i < s->s_left ? n - i : s->s_left;
			i += take;
			s->s_left -= (uint32_t)take;
			if (s->s_left == 0)
				body_done(s);
			break;
		case S_AUTH:
			i++;
			s->s_left--;
			s->s_word = s->s_word << 8 | c;
			if (++s->s_pos == 4) {
				s->s_state = S_BODY;
				/* AuthenticationOk (0) is not an answer: the
				 * start-up goes on and may still fail.
				 * Any other code asks the client for
				 * credentials: the server answered. */
				if (s->s_word != 0) {
					if (s->s_left == 0)
						body_done(s);
					return decide(s, RX_SUCCESS, ev,
						      verdict, buf, i, n);
				}
			}
			if (s->s_left == 0)
				body_done(s);
			break;
		case S_ERROR:
			i++;
			s->s_left--;
			if (error_step(s, c, verdict))
				return decide(s, *verdict, ev, verdict, buf, i,
					      n);
			break;
		default:
			return terminal(s, RX_WIRE_OTHER, ev, i);
		}
	}
	return i;
}

/* ---------------------------------------------------------------------
 * The keys a cancel names (ADR-676)
 * ------------------------------------------------------------------- */

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

/*
 * After the start-up's answer, the @n bytes of its read that follow the
 * deciding byte: the server sends AuthenticationOk, its ParameterStatus
 * messages, BackendKeyData and ReadyForQuery in one flush. Scanned here,
 * whole messages only, for the BackendKeyData (a 4-byte secret: protocol
 * 3.0) and the ReadyForQuery that ends the start-up. The framer's own
 * state is left as the answer left it: nothing is fed until the next call
 * resynchronises it (rx__pg_resync). Cold: once per connection.
 */
static __attribute__((noinline, cold)) void
startup_rest(struct rx_pg *s, const uint8_t *b, size_t n)
{
	size_t i = 0;
	uint32_t len;

	/* The rest of the deciding message. */
	if (s->s_state == S_LEN && s->s_pos == 0) {
		if (n < 4 || (len = be32(b)) < 4 || len > LEN_MAX)
			return;
		if (s->s_type == 'K' && len == 12 && n >= 12) {
			s->key_pid = be32(b + 4);
			s->key_secret = be32(b + 8);
			s->flags |= F_KEY;
		}
		i = len;
	} else if (s->s_state == S_BODY) {
		i = s->s_left;
	} else if (s->s_state != S_TYPE) {
		return; /* an ErrorResponse: a FATAL ends the connection */
	}
	while (i < n && n - i >= 5) {
		uint8_t t = b[i];

		len = be32(b + i + 1);
		if (len < 4 || len > LEN_MAX)
			return;
		if (t == 'Z') {
			s->flags |= F_READY;
			return;
		}
		if (t == 'K' && len == 12 && n - i >= 13) {
			s->key_pid = be32(b + i + 5);
			s->key_secret = be32(b + i + 9);
			s->flags |= F_KEY;
		}
		if (len > n - i - 1)
			return;
		i += 1 + (size_t)len;
	}
}

uint64_t rx__pg_key(const struct rx_pg *s)
{
	if (!(s->flags & F_KEY))
		return 0;
	return (uint64_t)s->key_pid << 32 | s->key_secret;
}

bool rx__pg_cancelled(const struct rx_pg *s)
{
	return s->e_len == 5 && is_code(s->sqlstate, "57014");
}
