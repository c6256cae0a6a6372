// symlinks: makes symbolic links in its granted dir, /data, and moves
// them about. Its parameters pick the set:
//   {"links": "out"}    links that would lead out of /data, each a way
//                       around a check by the link's text: a ".." chain,
//                       an absolute target, ".." after a name, a link
//                       made through a link that points up, and links
//                       moved (renamed, hard-linked, their directory
//                       renamed) to where they would lead out;
//   {"links": "inside"} links that stay inside /data, ".." included, and
//                       a file written through one.
// It prints {"what it tried": "ok" or the error, ...} and exits 0: what
// was refused is for the host to say, and the test to check on disk.
// Built by build.sh with clang and wasi-libc.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int reported;

static void report(const char *what, int rc) {
	printf("%s\"%s\": \"%s\"", reported++ ? ", " : "{", what, rc == 0 ? "ok" : strerror(errno));
}

static void out(void) {
	report("symlink ../../etc x", symlink("../../etc", "/data/x"));
	report("symlink /etc abs", symlink("/etc", "/data/abs"));
	report("symlink sub/../../etc mid", symlink("sub/../../etc", "/data/mid"));
	report("mkdir sub", mkdir("/data/sub", 0755));
	// sub/top leads to /data itself: inside. Through it, y lands in /data,
	// where "../etc" leads out, though its text, sub/top/../etc, is
	// sub/etc.
	report("symlink .. sub/top", symlink("..", "/data/sub/top"));
	report("symlink ../etc sub/top/y", symlink("../etc", "/data/sub/top/y"));
	report("rename sub/top top2", rename("/data/sub/top", "/data/top2"));
	report("link sub/top top3", link("/data/sub/top", "/data/top3"));
	report("mkdir a", mkdir("/data/a", 0755));
	report("mkdir a/b", mkdir("/data/a/b", 0755));
	report("symlink ../../sub a/b/l", symlink("../../sub", "/data/a/b/l"));
	report("rename a/b c", rename("/data/a/b", "/data/c"));
}

static void inside(void) {
	report("mkdir sub", mkdir("/data/sub", 0755));
	report("mkdir a", mkdir("/data/a", 0755));
	report("mkdir a/b", mkdir("/data/a/b", 0755));
	report("symlink sub cur", symlink("sub", "/data/cur"));
	report("symlink ../sub a/sib", symlink("../sub", "/data/a/sib"));
	report("symlink ../../sub a/b/l", symlink("../../sub", "/data/a/b/l"));
	report("symlink later/file dangling", symlink("later/file", "/data/dangling"));
	report("rename a/b a/b2", rename("/data/a/b", "/data/a/b2"));
	report("link a/sib a/b2/sib", link("/data/a/sib", "/data/a/b2/sib"));
	int fd = open("/data/cur/f.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	report("write cur/f.txt", fd < 0 ? -1 : (int)write(fd, "through cur", 11) - 11);
	if (fd >= 0)
		close(fd);
}

int main(void) {
	char params[256] = {0};
	fread(params, 1, sizeof params - 1, stdin);
	if (strstr(params, "\"inside\""))
		inside();
	else if (strstr(params, "\"out\""))
		out();
	else {
		fprintf(stderr, "want {\"links\": \"out\"} or {\"links\": \"inside\"}\n");
		return 2;
	}
	printf("}\n");
	return 0;
}
