/*
 * errors.c: errors worded as the Go tools worded them: an *fs.PathError
 * ("open /data/x: No such file or directory"), with Go's wasip1 words for
 * each errno (syscall/tables_wasip1.go, Go 1.26), and the SDK's
 * rewording of the three that say little under WASI (sdk.explain).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "stock.h"

_Static_assert(EBADF == 8 && ENOENT == 44 && EPERM == 63 && EROFS == 69 && ENOTCAPABLE == 76,
               "wasi-libc's errno values are WASI's, which Go's wasip1 port uses");

/* errnos are Go's words for WASI's errno values, which are wasi-libc's. */
static const char *const errnos[] = {
	[1] = "Argument list too long", /* E2BIG */
	[2] = "Permission denied", /* EACCES */
	[3] = "Address already in use", /* EADDRINUSE */
	[4] = "Address not available", /* EADDRNOTAVAIL */
	[5] = "Address family not supported by protocol family", /* EAFNOSUPPORT */
	[6] = "Try again", /* EAGAIN */
	[7] = "Socket already connected", /* EALREADY */
	[8] = "Bad file number", /* EBADF */
	[9] = "Trying to read unreadable message", /* EBADMSG */
	[10] = "Device or resource busy", /* EBUSY */
	[11] = "Operation canceled.", /* ECANCELED */
	[12] = "No child processes", /* ECHILD */
	[13] = "Connection aborted", /* ECONNABORTED */
	[14] = "Connection refused", /* ECONNREFUSED */
	[15] = "Connection reset by peer", /* ECONNRESET */
	[16] = "Deadlock condition", /* EDEADLK */
	[17] = "Destination address required", /* EDESTADDRREQ */
	[18] = "Math arg out of domain of func", /* EDOM */
	[19] = "Quota exceeded", /* EDQUOT */
	[20] = "File exists", /* EEXIST */
	[21] = "Bad address", /* EFAULT */
	[22] = "File too large", /* EFBIG */
	[23] = "Host is unreachable", /* EHOSTUNREACH */
	[24] = "Identifier removed", /* EIDRM */
	[25] = "EILSEQ", /* EILSEQ */
	[26] = "Connection already in progress", /* EINPROGRESS */
	[27] = "Interrupted system call", /* EINTR */
	[28] = "Invalid argument", /* EINVAL */
	[29] = "I/O error", /* EIO */
	[30] = "Socket is already connected", /* EISCONN */
	[31] = "Is a directory", /* EISDIR */
	[32] = "Too many symbolic links", /* ELOOP */
	[33] = "Too many open files", /* EMFILE */
	[34] = "Too many links", /* EMLINK */
	[35] = "Message too long", /* EMSGSIZE */
	[36] = "Multihop attempted", /* EMULTIHOP */
	[37] = "File name too long", /* ENAMETOOLONG */
	[38] = "Network interface is not configured", /* ENETDOWN */
	[39] = "Network dropped connection on reset", /* ENETRESET */
	[40] = "Network is unreachable", /* ENETUNREACH */
	[41] = "File table overflow", /* ENFILE */
	[42] = "No buffer space available", /* ENOBUFS */
	[43] = "No such device", /* ENODEV */
	[44] = "No such file or directory", /* ENOENT */
	[45] = "Exec format error", /* ENOEXEC */
	[46] = "No record locks available", /* ENOLCK */
	[47] = "The link has been severed", /* ENOLINK */
	[48] = "Out of memory", /* ENOMEM */
	[49] = "No message of desired type", /* ENOMSG */
	[50] = "Protocol not available", /* ENOPROTOOPT */
	[51] = "No space left on device", /* ENOSPC */
	[52] = "Not implemented on wasip1", /* ENOSYS */
	[53] = "Socket is not connected", /* ENOTCONN */
	[54] = "Not a directory", /* ENOTDIR */
	[55] = "Directory not empty", /* ENOTEMPTY */
	[56] = "State not recoverable", /* ENOTRECOVERABLE */
	[57] = "Socket operation on non-socket", /* ENOTSOCK */
	[58] = "Not supported", /* ENOTSUP */
	[59] = "Not a typewriter", /* ENOTTY */
	[60] = "No such device or address", /* ENXIO */
	[61] = "Value too large for defined data type", /* EOVERFLOW */
	[62] = "Owner died", /* EOWNERDEAD */
	[63] = "Operation not permitted", /* EPERM */
	[64] = "Broken pipe", /* EPIPE */
	[65] = "Protocol error", /* EPROTO */
	[66] = "Unknown protocol", /* EPROTONOSUPPORT */
	[67] = "Protocol wrong type for socket", /* EPROTOTYPE */
	[68] = "Math result not representable", /* ERANGE */
	[69] = "Read-only file system", /* EROFS */
	[70] = "Illegal seek", /* ESPIPE */
	[71] = "No such process", /* ESRCH */
	[72] = "Stale file handle", /* ESTALE */
	[73] = "Connection timed out", /* ETIMEDOUT */
	[74] = "Text file busy", /* ETXTBSY */
	[75] = "Cross-device link", /* EXDEV */
	[76] = "Capabilities insufficient", /* ENOTCAPABLE */
	[77] = "file descriptor in bad state", /* EBADFD */
};

/* errno_text returns Go's words for err, as syscall.Errno.Error does. */
static const char *errno_text(int err, char *buf, size_t cap) {
	if (err >= 0 && (size_t)err < sizeof errnos / sizeof errnos[0] && errnos[err])
		return errnos[err];
	snprintf(buf, cap, "errno %d", err);
	return buf;
}

/* explained is how the SDK rewords errors whose WASI form says little:
 * under wasip1 a path under no preopened directory fails with EBADF,
 * one the host refused to follow out of its directory with EPERM, and a
 * write to a directory granted read-only with EROFS. */
static const char *explained(int err) {
	switch (err) {
	case EBADF: return "not under a directory this tool was granted";
	case EPERM: return "refused by the host: it leads out of the directory this tool was granted";
	case EROFS: return "this tool was granted that directory read-only";
	}
	return NULL;
}

int fail_path(const char *op, const struct str *path, int err) {
	char buf[32];
	const char *why = explained(err);
	fprintf(stderr, "%s ", op);
	fwrite(path->s, 1, path->n, stderr);
	fprintf(stderr, ": %s\n", why ? why : errno_text(err, buf, sizeof buf));
	return EXIT_FAILED;
}

int fail_msg(const char *msg) {
	fprintf(stderr, "%s\n", msg);
	return EXIT_FAILED;
}

int finish(int rc) {
	if (fflush(stdout) != 0 && rc == 0)
		rc = EXIT_FAILED;
	return rc;
}
