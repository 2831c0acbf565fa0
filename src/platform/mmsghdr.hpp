// The message array of recvmmsg/sendmmsg: the system's mmsghdr on Linux and FreeBSD, and on
// macOS, which has neither the calls nor the type, one of the same shape, so that a UDP batch is
// the same array everywhere (driver/mmsg.hpp then moves it one recvmsg/sendmsg at a time).
#pragma once

#include <sys/socket.h>

namespace galay::platform {

#if defined(__APPLE__)
struct mmsghdr {
    msghdr msg_hdr;
    unsigned msg_len; ///< bytes moved for this message
};
#else
using ::mmsghdr;
#endif

} // namespace galay::platform
