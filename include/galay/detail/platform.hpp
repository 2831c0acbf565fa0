// Which system calls this build uses, decided per feature in this one place: Linux's own calls on
// Linux, and the POSIX forms macOS and FreeBSD also have elsewhere and in the POSIX profile
// (CMake's GALAY_POSIX_ONLY), which runs those forms on Linux so that the suite tests them.
#pragma once

#if defined(__linux__) && !(defined(GALAY_POSIX_ONLY) && GALAY_POSIX_ONLY)
#define GALAY_LINUX_CALLS 1 ///< Linux's own calls (eventfd, accept4, pidfd, splice ...) are used
#else
#define GALAY_LINUX_CALLS 0 ///< only the POSIX forms (the POSIX profile, macOS, FreeBSD)
#endif

// Each Linux call and what the POSIX form does instead.
/// eventfd for cross-thread wake-ups; otherwise a non-blocking pipe.
#define GALAY_HAVE_EVENTFD GALAY_LINUX_CALLS
/// accept4 and socket(2)'s SOCK_NONBLOCK | SOCK_CLOEXEC, pipe2; otherwise fcntl after the call.
#define GALAY_HAVE_ATOMIC_FD_FLAGS GALAY_LINUX_CALLS
/// pidfd_open and waitid(P_PIDFD); otherwise waitpid when SIGCHLD arrives.
#define GALAY_HAVE_PIDFD GALAY_LINUX_CALLS
/// splice(2) between a socket and a pipe; otherwise io::copy copies through user space.
#define GALAY_HAVE_SPLICE GALAY_LINUX_CALLS
/// Linux's sendfile(2) (file -> socket); otherwise read + send through a buffer.
#define GALAY_HAVE_LINUX_SENDFILE GALAY_LINUX_CALLS
/// recvmmsg/sendmmsg and UDP offload (GRO/GSO); otherwise one datagram per call.
#define GALAY_HAVE_MMSG GALAY_LINUX_CALLS
/// Linux's O_DIRECT, with its alignment found by statx/BLKSSZGET and libaio on epoll.
#define GALAY_HAVE_O_DIRECT GALAY_LINUX_CALLS
/// `direct` files (OpenOptions::direct, past the page cache): Linux's O_DIRECT, FreeBSD's
/// O_DIRECT, macOS's fcntl(F_NOCACHE) after the open; the POSIX profile on Linux refuses them
/// with errc::not_supported (it has no call of macOS's or FreeBSD's form to test them with).
#if GALAY_HAVE_O_DIRECT || defined(__APPLE__) || defined(__FreeBSD__)
#define GALAY_HAVE_DIRECT_IO 1
#else
#define GALAY_HAVE_DIRECT_IO 0
#endif
/// Linux-only socket features without a POSIX form: kTLS, MSG_ZEROCOPY, SO_PEERCRED and
/// SCM_CREDENTIALS, TCP_FASTOPEN ...; otherwise errc::not_supported.
#define GALAY_HAVE_LINUX_SOCKETS GALAY_LINUX_CALLS

// Features decided by the system alone (the POSIX profile keeps Linux's: they are not fallbacks).
/// Thread CPU affinity (Linux's cpu_set_t, FreeBSD's cpuset_t); macOS has none, and asking a
/// Runtime to pin its workers there fails with errc::not_supported.
#if defined(__linux__) || defined(__FreeBSD__)
#define GALAY_HAVE_CPU_AFFINITY 1
#else
#define GALAY_HAVE_CPU_AFFINITY 0
#endif
