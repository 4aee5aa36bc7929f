/*
 * proctitle.c - a program that reuses its environment block for its
 * process title, as nginx and postgres do, then forks a worker that makes
 * one call; for tests/preload/metrics_file_safety.sh: the shim must not
 * keep pointers into that block (RESILIX_METRICS_FILE with %p).
 *
 * Usage: proctitle PORT
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loopback.h"

extern char **environ;

int main(int argc, char **argv)
{
	static const char req[] =
	    "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
	char **copy, *start, *end, buf[256];
	int n = 0, i, fd, status;
	pid_t pid;

	if (argc != 2)
		return 2;
	while (environ[n])
		n++;
	if (n == 0)
		return 2;
	/* Move the environment elsewhere, then write over the old block. */
	copy = calloc((size_t)n + 1, sizeof(*copy));
	if (!copy)
		return 1;
	start = environ[0];
	end = environ[n - 1] + strlen(environ[n - 1]);
	for (i = 0; i < n; i++)
		copy[i] = strdup(environ[i]);
	memset(start, 'x', (size_t)(end - start));
	environ = copy;

	pid = fork();
	if (pid == 0) {
		fd = rx_dial(atoi(argv[1]));
		if (fd < 0 || write(fd, req, sizeof(req) - 1) < 0 ||
		    read(fd, buf, sizeof(buf)) <= 0)
			_exit(1);
		close(fd);
		exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return 1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
