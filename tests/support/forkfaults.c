/*
 * forkfaults.c - what one fork costs in page faults, for
 * tests/preload/fork_faults.sh (ADR-666).
 *
 * Usage: forkfaults N
 * Forks N children one after another, each of which _exits at once, and
 * prints the children's minor page faults per fork (RUSAGE_CHILDREN): the
 * pages a child touches between fork and exit, the atfork handlers'
 * included.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct rusage ru;
	long n = argc > 1 ? atol(argv[1]) : 0;

	if (n <= 0) {
		fprintf(stderr, "usage: forkfaults N\n");
		return 2;
	}
	for (long i = 0; i < n; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0)
			_exit(0);
		if (waitpid(pid, NULL, 0) != pid) {
			perror("waitpid");
			return 1;
		}
	}
	if (getrusage(RUSAGE_CHILDREN, &ru) != 0) {
		perror("getrusage");
		return 1;
	}
	printf("%ld\n", ru.ru_minflt / n);
	return 0;
}
