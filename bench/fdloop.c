/*
 * fdloop.c - N one-byte write + read pairs through a pipe: the cost of
 * read/write on an fd the shim does not track (scripts/bench, section
 * "preload"). Usage: fdloop N. Built by scripts/bench itself.
 */
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000, i;
	int p[2];
	char c = 'x';

	if (pipe(p) != 0)
		return 1;
	for (i = 0; i < n; i++)
		if (write(p[1], &c, 1) != 1 || read(p[0], &c, 1) != 1)
			return 1;
	return 0;
}
