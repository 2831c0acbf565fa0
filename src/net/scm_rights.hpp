// The walk over a received control buffer for SCM_RIGHTS descriptors, as a function of bytes only
// (fuzz/scm_rights_fuzz.cpp feeds it arbitrary ones): every read stays inside the buffer whatever
// lengths its headers claim, and it returns plain numbers, so the caller owns each descriptor
// exactly once.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace galay::detail {

/// Append to `out`, in order, the descriptors of every SOL_SOCKET/SCM_RIGHTS message in
/// `control` (a recvmsg control buffer: its first msg_controllen bytes). Other messages are
/// skipped. A header shorter than a header, or one that claims more bytes than the buffer has
/// left, ends the walk (the kernel writes neither; a partial descriptor is never read).
void scm_rights_fds(std::span<const std::byte> control, std::vector<int>& out);

} // namespace galay::detail
