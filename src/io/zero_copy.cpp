// io::zero_copy_send_available: asks the current scheduler's driver.
#include "galay/io/zero_copy.hpp"

#include "driver/driver.hpp"
#include "runtime/scheduler_access.hpp"

namespace galay::io {

bool zero_copy_send_available() noexcept {
    Scheduler* s = Scheduler::current();
    return s != nullptr && galay::detail::SchedulerAccess::driver(*s).zero_copy_send();
}

} // namespace galay::io
