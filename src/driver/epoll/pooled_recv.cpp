// recv_pooled on epoll (epoll_driver.hpp): a pool buffer is taken only for the system call, and
// ops that find the pool empty wait until one comes back.
#include "driver/common/faults.hpp"
#include "driver/epoll/epoll_driver.hpp"

namespace galay::detail {

void EpollDriver::give_back(std::uint16_t id) noexcept {
    if (faults::on()) [[unlikely]] {
        if (faults::hit(faults::Kind::starve_ring, OpCode::recv_pooled)) {
            withheld_.push_back(id); // back at the next poll
            return;
        }
    }
    pool_.put(id);
    give_back_wakes();
}

void EpollDriver::give_back_wakes() {
    // An op that finds no data gives its buffer straight back, so keep going while there
    // are buffers and starved ops.
    while (!starved_.empty() && !pool_.empty()) {
        IoOp* op = starved_.pop_front();
        op->pending = false;
        --waiting_;
        if (attempt(*op) || wait_ready(*op)) SchedulerAccess::complete(sched_, *op);
    }
}

void EpollDriver::release_withheld() {
    std::vector<std::uint16_t> ids;
    ids.swap(withheld_);
    for (std::uint16_t id : ids) {
        pool_.put(id);
        give_back_wakes();
    }
}

} // namespace galay::detail
