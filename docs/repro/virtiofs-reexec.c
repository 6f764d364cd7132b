/* Reproducer for docs/shares.md "TCG: code virtiofsd writes is not
 * re-translated". Build static, run as a guest binary
 * from the initramfs with a writable share holding a static binary `d`:
 *
 *   gcc -static -O2 -o reexec docs/repro/virtiofs-reexec.c
 *   mkdir -p bins && cp reexec bins/d
 *   harness run --kernel source:7.3 --topology nodes=1,cpus=1,mem=512M \
 *       --suite none --share $PWD/bins:/opt/bins:rw --guest-bin $PWD/reexec
 *
 * The harness boots TCG guests with shares with init_on_alloc=1, which
 * avoids it: add `--append init_on_alloc=0` to see "signal 11" (or 4)
 * from the second exec on (exit 1). */
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/wait.h>

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "child"))
		return 0;
	int bad = 0;
	for (int i = 0; i < 6; i++) {
		pid_t p = fork();
		if (p == 0) {
			int fd = open("/dev/null", O_WRONLY);
			dup2(fd, 1);
			execl("/opt/bins/d", "/opt/bins/d", "child", (char *)NULL);
			_exit(127);
		}
		int s;
		waitpid(p, &s, 0);
		printf("exec %d: %s %d\n", i, WIFSIGNALED(s) ? "signal" : "exit",
		       WIFSIGNALED(s) ? WTERMSIG(s) : WEXITSTATUS(s));
		bad |= WIFSIGNALED(s);
	}
	fflush(stdout);
	return bad;
}
