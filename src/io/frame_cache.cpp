#include "galay/detail/cached_task.hpp"

#include <new>

namespace galay::detail {

void* FrameCache::allocate(std::size_t n) {
    const std::size_t need = sizeof(Header) + n;
    if (!in_use_) {
        if (block_ == nullptr || block_->capacity < need) {
            release();
            block_ = static_cast<Header*>(::operator new(need));
            block_->owner = this;
            block_->capacity = need;
        }
        in_use_ = true;
        return block_ + 1;
    }
    // Two slow paths of one object at once: rare, and correct with a heap frame.
    auto* h = static_cast<Header*>(::operator new(need));
    h->owner = nullptr;
    h->capacity = need;
    return h + 1;
}

void FrameCache::deallocate(void* p) noexcept {
    Header* h = static_cast<Header*>(p) - 1;
    if (h->owner != nullptr)
        h->owner->in_use_ = false;
    else
        ::operator delete(h);
}

void FrameCache::release() noexcept {
    // A block still lent out is freed by deallocate() once its frame ends: orphan it.
    if (block_ != nullptr) {
        if (in_use_)
            block_->owner = nullptr;
        else
            ::operator delete(block_);
    }
    block_ = nullptr;
    in_use_ = false;
}

} // namespace galay::detail
