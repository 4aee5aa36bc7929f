/*
 * tests/support/pgquery.c - a minimal PostgreSQL protocol 3 client: one
 * kept-alive connection, N simple queries, each read to its ReadyForQuery.
 * For scripts/bench (instructions per query, with and without the shim):
 * no libpq, so the figure is the shim's and the kernel's, not a driver's.
 *
 * Usage: pgquery --port PORT [--queries N] [--user NAME] [--sql TEXT]
 * Trust authentication only (the temporary test cluster's). Prints the
 * number of queries answered; exit 1 on any error or ErrorResponse.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int fd = -1;
static unsigned char in[65536];
static size_t in_len, in_pos;

static int put_all(const void *p, size_t n)
{
	const char *b = p;

	while (n > 0) {
		ssize_t k = write(fd, b, n);

		if (k <= 0)
			return -1;
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

static int get_byte(unsigned char *c)
{
	if (in_pos == in_len) {
		ssize_t k = read(fd, in, sizeof(in));

		if (k <= 0)
			return -1;
		in_len = (size_t)k;
		in_pos = 0;
	}
	*c = in[in_pos++];
	return 0;
}

/* Read messages up to and including ReadyForQuery. 0, or -1 on an error
 * (an ErrorResponse, an authentication request other than Ok, EOF). */
static int until_ready(void)
{
	for (;;) {
		unsigned char t, b[4], c;
		uint32_t len, i, code = 0;
		int j;

		if (get_byte(&t) < 0)
			return -1;
		for (j = 0; j < 4; j++)
			if (get_byte(&b[j]) < 0)
				return -1;
		len = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
		      (uint32_t)b[2] << 8 | b[3];
		if (len < 4)
			return -1;
		for (i = 0; i < len - 4; i++) {
			if (get_byte(&c) < 0)
				return -1;
			if (i < 4)
				code = code << 8 | c;
		}
		if (t == 'E' || (t == 'R' && code != 0))
			return -1;
		if (t == 'Z')
			return 0;
	}
}

int main(int argc, char **argv)
{
	const char *user = "postgres", *sql = "SELECT 1";
	long queries = 1, i;
	int port = 0, a;
	struct sockaddr_in sa;
	unsigned char msg[512];
	size_t n = 8, sl;
	uint32_t len;

	for (a = 1; a + 1 < argc; a += 2) {
		if (strcmp(argv[a], "--port") == 0)
			port = atoi(argv[a + 1]);
		else if (strcmp(argv[a], "--queries") == 0)
			queries = atol(argv[a + 1]);
		else if (strcmp(argv[a], "--user") == 0)
			user = argv[a + 1];
		else if (strcmp(argv[a], "--sql") == 0)
			sql = argv[a + 1];
	}
	if (port <= 0 || strlen(user) > 100 || strlen(sql) > 400) {
		fprintf(stderr, "usage: pgquery --port PORT [--queries N]\n");
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		perror("pgquery: connect");
		return 1;
	}
	/* StartupMessage: length, 3.0, user, database, terminator. */
	memcpy(msg + 4, "\x00\x03\x00\x00", 4);
	n += (size_t)sprintf((char *)msg + n, "user") + 1;
	n += (size_t)sprintf((char *)msg + n, "%s", user) + 1;
	n += (size_t)sprintf((char *)msg + n, "database") + 1;
	n += (size_t)sprintf((char *)msg + n, "postgres") + 1;
	msg[n++] = 0;
	len = htonl((uint32_t)n);
	memcpy(msg, &len, 4);
	if (put_all(msg, n) < 0 || until_ready() < 0) {
		fprintf(stderr, "pgquery: start-up failed\n");
		return 1;
	}
	sl = strlen(sql) + 1;
	msg[0] = 'Q';
	len = htonl((uint32_t)(4 + sl));
	memcpy(msg + 1, &len, 4);
	memcpy(msg + 5, sql, sl);
	for (i = 0; i < queries; i++) {
		if (put_all(msg, 5 + sl) < 0 || until_ready() < 0) {
			fprintf(stderr, "pgquery: query %ld failed\n", i + 1);
			return 1;
		}
	}
	(void)put_all("X\x00\x00\x00\x04", 5);
	close(fd);
	printf("%ld\n", queries);
	return 0;
}
