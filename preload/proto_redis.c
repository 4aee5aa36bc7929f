/*
 * preload/proto_redis.c - RESP2 and RESP3, framed both ways, a byte at a
 * time, so a reply split over reads or a pipeline in one read are the
 * same to it.
 *
 * Design. One framer serves both directions: at a value's type byte it
 * knows the kind (a line, a length-prefixed bulk, an aggregate of N or
 * 2N values), reads the length line, and skips bulk payloads by their
 * length. Nesting needs no stack: a single count of the values still to
 * read in the current top-level value grows by N at each aggregate header
 * and shrinks by one at each value, so a push or an attribute of any
 * depth is skipped whole in 32 bytes of state. Only the few bytes a
 * verdict needs are looked at: an error's first word (or the phrase of
 * the maxclients refusal) and a push's kind, by a matcher that keeps one
 * bit per candidate word, so a word split over reads decides the same.
 * A call is one batch of commands, its first reply decides (ADR-404);
 * the error table is ADR-405, READONLY ADR-406. The Redis serialization
 * protocol specification is the reference for every type byte below.
 */
#include "proto_redis.h"

enum {
	ST_TYPE = 0, /* at a value's type byte (or an inline line's first) */
	ST_NUM,	     /* a length or count line: [-]digits */
	ST_NUM_LF,   /* its CR seen, the LF next */
	ST_LINE,     /* a line value, to its LF */
	ST_BULK,     /* a bulk payload and its CRLF: *n bytes left */
	ST_INLINE    /* client: an inline command line, to its LF */
};

/* Value kinds, by type byte. */
enum { K_BAD = 0, K_LINE, K_BULK, K_ARRAY, K_MAP, K_ATTR };

/* Per-direction flags. */
enum {
	FL_NEG = 1 << 0,	/* the number read is negative: a null */
	FL_DIGIT = 1 << 1,	/* a digit was read */
	FL_TOP = 1 << 2,	/* the current value is a top-level one */
	FL_PUSH_FIRST = 1 << 3, /* server: the next value is a push's kind */
	FL_CONTENT = 1 << 3,	/* client: the inline line is not blank */
	FL_KIND_SHIFT = 4	/* bits 4-6: the K_ kind of the header */
};

/* r->flags */
enum { F_CALL = 1 << 0 };

/* r->cmd: what the command that opened the call is (ADR-650), and what
 * the batch's later commands are (ADR-661). */
enum {
	CMD_NAME = 1 << 0,  /* its name is the next bulk (or inline word) */
	CMD_XREAD = 1 << 1, /* XREAD(GROUP): blocks when an argument is BLOCK */
	CMD_BLOCKING = 1 << 2, /* it blocks by design: its wait is no latency */
	CMD_LATER = 1 << 3,    /* the command read is not the call's first */
	CMD_BEHIND = 1 << 4, /* a later one blocks: it waits after the answer */
	CMD_REPLICA = 1 << 5 /* SYNC or PSYNC: a replication link (ADR-667) */
};

/* Matcher tables. */
enum { T_NONE = 0, T_ERRORS, T_PUSH, T_CMDS, T_BLOCK };

/* What a command name in T_CMDS says. */
enum { BLOCKS = 1, BLOCKS_WITH_ARG, REPLICATES };

struct word {
	const char *text;
	uint8_t len;
	uint8_t verdict;
};

#define WORD(s, v)                                                             \
	{                                                                      \
		s, (uint8_t)(sizeof(s) - 1), (uint8_t)(v)                      \
	}

/* Error words that are not ANSWERED (ADR-405, ADR-406); every other
 * word is. The maxclients refusal is ERR followed by this phrase. */
static const struct word error_words[] = {
    WORD("LOADING", RX_TRANSIENT),
    WORD("MASTERDOWN", RX_TRANSIENT),
    WORD("TRYAGAIN", RX_TRANSIENT),
    WORD("CLUSTERDOWN", RX_TRANSIENT),
    WORD("READONLY", RX_TRANSIENT),
    WORD("NOREPLICAS", RX_TRANSIENT),
    WORD("MISCONF", RX_TRANSIENT),
    WORD("BUSY", RX_OVERLOAD),
    WORD("OOM", RX_OVERLOAD),
    WORD("ERR max number of clients reached", RX_OVERLOAD),
};

/* Push kinds that answer a command: RESP3 sends the confirmations of
 * (un)subscribing as pushes. */
static const struct word push_words[] = {
    WORD("subscribe", RX_SUCCESS),    WORD("psubscribe", RX_SUCCESS),
    WORD("ssubscribe", RX_SUCCESS),   WORD("unsubscribe", RX_SUCCESS),
    WORD("punsubscribe", RX_SUCCESS), WORD("sunsubscribe", RX_SUCCESS),
};

/* Commands that block on purpose until data comes or their own timeout
 * runs out (the Redis command reference: "blocking" commands), upper
 * case; names are matched case-insensitively, as Redis reads them. XREAD
 * and XREADGROUP block only with a BLOCK argument. */
static const struct word blocking_words[] = {
    WORD("BLPOP", BLOCKS),	WORD("BRPOP", BLOCKS),
    WORD("BRPOPLPUSH", BLOCKS), WORD("BLMOVE", BLOCKS),
    WORD("BLMPOP", BLOCKS),	WORD("BZPOPMIN", BLOCKS),
    WORD("BZPOPMAX", BLOCKS),	WORD("BZMPOP", BLOCKS),
    WORD("WAIT", BLOCKS),	WORD("WAITAOF", BLOCKS),
    WORD("XREAD", BLOCKS_WITH_ARG), WORD("XREADGROUP", BLOCKS_WITH_ARG),
    /* Not blocking: the command that turns the connection into a
     * replication link, whose traffic is no call (ADR-667). */
    WORD("SYNC", REPLICATES),	WORD("PSYNC", REPLICATES),
};

static const struct word block_arg_words[] = {
    WORD("BLOCK", BLOCKS),
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
_Static_assert(COUNT(error_words) <= 32 && COUNT(push_words) <= 32 &&
		   COUNT(blocking_words) <= 32,
	       "one bit per candidate in rx_redis_match.alive");

void rx__redis_init(struct rx_redis *r)
{
	*r = (struct rx_redis){0};
}

void rx__redis_resync(struct rx_redis *r)
{
	r->s_pending = 0;
	r->s_n = 0;
	r->s_state = ST_TYPE;
	r->s_flags = 0;
	r->m = (struct rx_redis_match){0};
}

bool rx__redis_call_open(const struct rx_redis *r)
{
	return (r->flags & F_CALL) != 0;
}

bool rx__redis_blocking(const struct rx_redis *r)
{
	return (r->cmd & CMD_BLOCKING) != 0;
}

/* ---------------------------------------------------------------------
 * The word matcher
 * ------------------------------------------------------------------- */

static const struct word *table_words(uint8_t t, size_t *count)
{
	if (t == T_PUSH) {
		*count = COUNT(push_words);
		return push_words;
	}
	if (t == T_CMDS) {
		*count = COUNT(blocking_words);
		return blocking_words;
	}
	if (t == T_BLOCK) {
		*count = COUNT(block_arg_words);
		return block_arg_words;
	}
	*count = COUNT(error_words);
	return error_words;
}

static void match_arm(struct rx_redis_match *m, uint8_t table)
{
	size_t count;

	table_words(table, &count);
	m->table = table;
	m->alive = count == 32 ? 0xffffffffu : (1u << count) - 1;
	m->pos = 0;
	m->best = 0;
}

/*
 * One character @c of the text, or -1 for its end. A word completes when
 * every character matched and the next is a space, CR, LF or the end;
 * the last to complete is the longest. Returns true once no candidate is
 * alive: the match is decided (m->best).
 */
static bool match_step(struct rx_redis_match *m, int c)
{
	size_t count, i;
	const struct word *w = table_words(m->table, &count);
	uint32_t alive = 0;

	for (i = 0; i < count; i++) {
		if (!(m->alive & (1u << i)))
			continue;
		if (m->pos < w[i].len) {
			if (c >= 0 && (uint8_t)w[i].text[m->pos] == c)
				alive |= 1u << i;
		} else if (c < 0 || c == ' ' || c == '\r' || c == '\n') {
			m->best = (uint8_t)(i + 1);
		}
	}
	m->alive = alive;
	if (m->pos < 255)
		m->pos++;
	return alive == 0;
}

enum rx_verdict rx__redis_error_verdict(const char *text, size_t len)
{
	struct rx_redis_match m;
	size_t i;
	bool done = false;

	match_arm(&m, T_ERRORS);
	for (i = 0; i < len && !done; i++)
		done = match_step(&m, (uint8_t)text[i]);
	if (!done)
		match_step(&m, -1);
	return m.best ? (enum rx_verdict)error_words[m.best - 1].verdict
		      : RX_ANSWERED;
}

/* ---------------------------------------------------------------------
 * Recognising a connection
 * ------------------------------------------------------------------- */

static bool is_letter(uint8_t c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static bool is_name_char(uint8_t c)
{
	return is_letter(c) || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
	       c == '-';
}

#define INLINE_CLAIM_MAX 512

enum rx_wire_claim rx__redis_claim(const uint8_t *buf, size_t n)
{
	size_t m, i, lf;

	if (n == 0 || buf == NULL)
		return RX_WIRE_CLAIM_MORE;
	if (buf[0] == '*') {
		if (n == 1)
			return RX_WIRE_CLAIM_MORE;
		return buf[1] >= '1' && buf[1] <= '9' ? RX_WIRE_CLAIM_YES
						      : RX_WIRE_CLAIM_NO;
	}
	if (!is_letter(buf[0]))
		return RX_WIRE_CLAIM_NO;
	m = n < INLINE_CLAIM_MAX ? n : INLINE_CLAIM_MAX;
	for (i = 1; i < m && i < 33 && is_name_char(buf[i]); i++)
		;
	if (i == 33)
		return RX_WIRE_CLAIM_NO; /* no command name is that long */
	if (i < m && buf[i] != ' ' && buf[i] != '\r' && buf[i] != '\n')
		return RX_WIRE_CLAIM_NO;
	for (lf = 0; lf < m && buf[lf] != '\n'; lf++)
		;
	/* An HTTP request line names its version: never Redis's. */
	for (i = 0; i + 5 <= lf; i++)
		if (buf[i] == 'H' && buf[i + 1] == 'T' && buf[i + 2] == 'T' &&
		    buf[i + 3] == 'P' && buf[i + 4] == '/')
			return RX_WIRE_CLAIM_NO;
	if (lf < m)
		return RX_WIRE_CLAIM_YES;
	return n >= INLINE_CLAIM_MAX ? RX_WIRE_CLAIM_NO : RX_WIRE_CLAIM_MORE;
}

/* ---------------------------------------------------------------------
 * The framer, both directions
 * ------------------------------------------------------------------- */

static int type_kind(uint8_t c)
{
	switch (c) {
	case '+':
	case '-':
	case ':':
	case '_':
	case ',':
	case '#':
	case '(':
		return K_LINE;
	case '$':
	case '!':
	case '=':
		return K_BULK;
	case '*':
	case '~':
	case '>':
		return K_ARRAY;
	case '%':
		return K_MAP;
	case '|':
		return K_ATTR;
	default:
		return K_BAD; /* '?' streamed values, '.', ';', not RESP */
	}
}

static bool is_blank(uint8_t c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* The direction being fed: one framer, two sets of fields. */
struct side {
	uint32_t *pending, *num;
	uint8_t *state, *fl;
	bool server;
};

static size_t terminal(struct rx_redis *r, enum rx_wire_event e,
		       enum rx_wire_event *ev, size_t consumed)
{
	r->end = (uint8_t)e;
	r->flags &= (uint8_t)~F_CALL;
	*ev = e;
	return consumed;
}

/* The matcher decided (server side): does that give the verdict? */
static bool matched(struct rx_redis *r, enum rx_verdict *v)
{
	uint8_t table = r->m.table, best = r->m.best;

	r->m.table = T_NONE;
	if (table == T_ERRORS)
		*v = best ? (enum rx_verdict)error_words[best - 1].verdict
			  : RX_ANSWERED;
	else if (best)
		*v = RX_SUCCESS; /* a subscribe confirmation */
	else
		return false; /* a message, an invalidation: not an answer */
	r->flags &= (uint8_t)~F_CALL;
	return true;
}

/* A value ended: back to a type byte; the matcher, if still undecided,
 * sees the text's end. Returns true when that gives the verdict. */
static bool value_done(struct rx_redis *r, struct side *sd, enum rx_verdict *v)
{
	*sd->state = ST_TYPE;
	if (sd->server && r->m.table) {
		match_step(&r->m, -1);
		return matched(r, v);
	}
	return false;
}

static bool open_call(struct rx_redis *r)
{
	if (r->flags & F_CALL)
		return false;
	r->flags |= F_CALL;
	/* A new call: its command's name comes next. A call that opens while
	 * a blocking command written behind the last call's answer may still
	 * wait has its answer, in order, after that wait: it waits on
	 * purpose too (ADR-661). */
	r->cmd = (uint8_t)(CMD_NAME | (r->cmd & CMD_BEHIND ? CMD_BLOCKING : 0));
	return true;
}

/* ---------------------------------------------------------------------
 * The client's side: does the command that opened the call block on
 * purpose (ADR-650)?
 * ------------------------------------------------------------------- */

static int upper(uint8_t c)
{
	return c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c;
}

/* The word matched ended, or no candidate is left: what it says. */
static void cmd_matched(struct rx_redis *r)
{
	uint8_t table = r->cm.table, best = r->cm.best, kind = 0;

	r->cm.table = T_NONE;
	if (best)
		kind = table == T_CMDS ? blocking_words[best - 1].verdict
				       : BLOCKS;
	if (table == T_CMDS)
		r->cmd &= (uint8_t)~CMD_NAME;
	if (kind == BLOCKS)
		r->cmd = (uint8_t)((r->cmd & ~CMD_XREAD) |
				   (r->cmd & CMD_LATER ? CMD_BEHIND : CMD_BLOCKING));
	else if (kind == BLOCKS_WITH_ARG)
		r->cmd |= CMD_XREAD;
	else if (kind == REPLICATES)
		r->cmd |= CMD_REPLICA;
}

/* One character of the word matched, or -1 at its end. */
static void cmd_step(struct rx_redis *r, int c)
{
	if (match_step(&r->cm, c < 0 ? -1 : upper((uint8_t)c)))
		cmd_matched(r);
}

/* A value of a command begins (client): its name, or an argument of an
 * XREAD, is matched when it is a bulk string. */
static void cmd_value(struct rx_redis *r, bool top, int kind)
{
	if (top) {
		/* Another command: the call's first one decides whether the
		 * call blocks; a later one that blocks waits after the
		 * call's answer, for the call that opens next (ADR-661). An
		 * array that opens a call reads as a first one (open_call). */
		r->cmd = (uint8_t)((r->cmd & ~(CMD_NAME | CMD_XREAD)) |
				   (kind == K_ARRAY ? CMD_NAME | CMD_LATER : 0));
		r->cm.table = T_NONE;
		return;
	}
	if (!(r->cmd & (CMD_NAME | CMD_XREAD)))
		return;
	if (kind == K_BULK)
		match_arm(&r->cm, r->cmd & CMD_NAME ? T_CMDS : T_BLOCK);
	else
		r->cmd &= (uint8_t)~CMD_NAME; /* not a name: nothing to read */
}

/* An inline command line's first character @c: its first word is the
 * command's name, read whether it opens the call (true) or is a later
 * command of it (ADR-650, ADR-661). */
static bool inline_begins(struct rx_redis *r, int c)
{
	bool opened = open_call(r);

	if (!opened)
		r->cmd = (uint8_t)((r->cmd & ~(CMD_NAME | CMD_XREAD)) |
				   CMD_NAME | CMD_LATER);
	match_arm(&r->cm, T_CMDS);
	cmd_step(r, c);
	return opened;
}

/* A length or count line is complete. Returns an event (MORE, START for
 * a command's array header, OTHER for an impossible number) and may set
 * *decided with the verdict (an empty bulk error, a null). */
static enum rx_wire_event header_done(struct rx_redis *r, struct side *sd,
				      bool *decided, enum rx_verdict *v)
{
	int kind = (*sd->fl >> FL_KIND_SHIFT) & 7;
	bool top = (*sd->fl & FL_TOP) != 0, null = (*sd->fl & FL_NEG) != 0;
	uint64_t count = null ? 0 : *sd->num, add;

	if (kind == K_BULK) {
		if (null) {
			*decided = value_done(r, sd, v);
			return RX_WIRE_MORE;
		}
		if (count > UINT32_MAX - 2)
			return RX_WIRE_OTHER;
		*sd->num = (uint32_t)count + 2; /* the payload and its CRLF */
		*sd->state = ST_BULK;
		return RX_WIRE_MORE;
	}
	add = count * (kind == K_ARRAY ? 1 : 2);
	if (kind == K_ATTR && !top)
		add++; /* the value it decorates still takes the slot */
	if (add > UINT32_MAX - *sd->pending)
		return RX_WIRE_OTHER;
	*sd->pending += (uint32_t)add;
	*sd->state = ST_TYPE;
	if (add == 0)
		*sd->fl &= (uint8_t)~FL_PUSH_FIRST; /* an empty push */
	if (!sd->server && top && kind == K_ARRAY && count >= 1 && open_call(r))
		return RX_WIRE_START;
	return RX_WIRE_MORE;
}

/*
 * The framer. Returns the bytes consumed and sets *ev (and *v with
 * VERDICT). Side-specific work is at a top-level type byte (a reply is
 * judged, a command begins) and in a matched text (server).
 */
static size_t feed(struct rx_redis *r, bool server, const uint8_t *buf,
		   size_t n, enum rx_wire_event *ev, enum rx_verdict *v)
{
	struct side sd = {
	    server ? &r->s_pending : &r->c_pending,
	    server ? &r->s_n : &r->c_n,
	    server ? &r->s_state : &r->c_state,
	    server ? &r->s_flags : &r->c_flags,
	    server,
	};
	size_t i = 0, take;
	bool decided = false;

	*ev = RX_WIRE_MORE;
	if (r->end) {
		*ev = (enum rx_wire_event)r->end;
		return 0;
	}
	while (i < n) {
		uint8_t c = buf[i];
		bool top, first;
		int kind;

		switch (*sd.state) {
		case ST_TYPE:
			i++;
			top = *sd.pending == 0;
			first = (*sd.fl & FL_PUSH_FIRST) != 0;
			*sd.fl = 0;
			if (!top)
				(*sd.pending)--;
			if (!server && top && c != '*') {
				/* Redis reads any other first byte as an
				 * inline command line. */
				if (c == '\n')
					break; /* an empty line */
				*sd.state = ST_INLINE;
				if (is_blank(c))
					break;
				*sd.fl |= FL_CONTENT;
				if (inline_begins(r, c)) {
					*ev = RX_WIRE_START;
					return i;
				}
				break;
			}
			kind = type_kind(c);
			if (kind == K_BAD)
				return terminal(r, RX_WIRE_OTHER, ev, i);
			*sd.fl = (uint8_t)(kind << FL_KIND_SHIFT |
					   (top ? FL_TOP : 0));
			*sd.num = 0;
			*sd.state = kind == K_LINE ? ST_LINE : ST_NUM;
			if (!server) {
				cmd_value(r, top, kind);
				break;
			}
			if (top && (r->flags & F_CALL)) {
				if (c == '-' || c == '!') {
					match_arm(&r->m, T_ERRORS);
				} else if (c == '>') {
					*sd.fl |= FL_PUSH_FIRST;
				} else if (c != '|') {
					r->flags &= (uint8_t)~F_CALL;
					*v = RX_SUCCESS;
					*ev = RX_WIRE_VERDICT;
					return i;
				}
			} else if (first && (c == '$' || c == '+') &&
				   (r->flags & F_CALL)) {
				match_arm(&r->m, T_PUSH);
			}
			break;
		case ST_NUM:
			i++;
			if (c >= '0' && c <= '9') {
				if (*sd.num >
				    (UINT32_MAX - (uint32_t)(c - '0')) / 10)
					return terminal(r, RX_WIRE_OTHER, ev,
							i);
				*sd.num = *sd.num * 10 + (uint32_t)(c - '0');
				*sd.fl |= FL_DIGIT;
			} else if (c == '-' &&
				   !(*sd.fl & (FL_DIGIT | FL_NEG))) {
				*sd.fl |= FL_NEG;
			} else if (c == '\r' && (*sd.fl & FL_DIGIT)) {
				*sd.state = ST_NUM_LF;
			} else {
				return terminal(r, RX_WIRE_OTHER, ev, i);
			}
			break;
		case ST_NUM_LF: {
			enum rx_wire_event e;

			i++;
			if (c != '\n')
				return terminal(r, RX_WIRE_OTHER, ev, i);
			e = header_done(r, &sd, &decided, v);
			if (e == RX_WIRE_OTHER)
				return terminal(r, e, ev, i);
			if (e == RX_WIRE_START || decided) {
				*ev = decided ? RX_WIRE_VERDICT : e;
				return i;
			}
			break;
		}
		case ST_LINE:
			i++;
			if (server && r->m.table &&
			    match_step(&r->m, c == '\n' ? -1 : c) &&
			    matched(r, v))
				decided = true;
			if (c == '\n')
				*sd.state = ST_TYPE;
			if (decided) {
				*ev = RX_WIRE_VERDICT;
				return i;
			}
			break;
		case ST_BULK:
			if (!server && r->cm.table) {
				/* The name (or argument) being matched. */
				i++;
				(*sd.num)--;
				if (*sd.num >= 2)
					cmd_step(r, c);
				else if (*sd.num == 1)
					cmd_step(r, -1);
				if (r->cmd & CMD_REPLICA)
					return terminal(r, RX_WIRE_NO_CALL, ev,
							i);
				if (*sd.num == 0)
					*sd.state = ST_TYPE;
				break;
			}
			if (server && r->m.table) {
				/* Byte by byte while the matcher reads the
				 * payload (not its CRLF). */
				i++;
				(*sd.num)--;
				if (*sd.num >= 2)
					decided = match_step(&r->m, c) &&
						  matched(r, v);
				else if (*sd.num == 1)
					decided = match_step(&r->m, -1) &&
						  matched(r, v);
				if (*sd.num == 0)
					decided |= value_done(r, &sd, v);
				if (decided) {
					*ev = RX_WIRE_VERDICT;
					return i;
				}
				break;
			}
			take = n - i < *sd.num ? n - i : *sd.num;
			i += take;
			*sd.num -= (uint32_t)take;
			if (*sd.num == 0)
				*sd.state = ST_TYPE;
			break;
		case ST_INLINE:
			i++;
			if (r->cm.table == T_CMDS)
				cmd_step(r, c == '\n' || is_blank(c) ? -1 : c);
			if (r->cmd & CMD_REPLICA)
				return terminal(r, RX_WIRE_NO_CALL, ev, i);
			if (c == '\n') {
				*sd.state = ST_TYPE;
				*sd.fl = 0;
				break;
			}
			if (!(*sd.fl & FL_CONTENT) && !is_blank(c)) {
				*sd.fl |= FL_CONTENT;
				if (inline_begins(r, c)) {
					*ev = RX_WIRE_START;
					return i;
				}
			}
			break;
		default:
			return terminal(r, RX_WIRE_OTHER, ev, i);
		}
	}
	return i;
}

size_t rx__redis_write(struct rx_redis *r, const uint8_t *buf, size_t n,
		       enum rx_wire_event *ev)
{
	enum rx_verdict unused;

	return feed(r, false, buf, n, ev, &unused);
}

size_t rx__redis_read(struct rx_redis *r, const uint8_t *buf, size_t n,
		      enum rx_wire_event *ev, enum rx_verdict *verdict)
{
	return feed(r, true, buf, n, ev, verdict);
}
