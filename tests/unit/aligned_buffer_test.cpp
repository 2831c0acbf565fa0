#include <galay/detail/buffers.hpp>
#include <galay/fs/aligned_buffer.hpp>
#include <gtest/gtest.h>

#include <cstdint>

using galay::fs::AlignedBuffer;

static_assert(galay::MutableBuffer<AlignedBuffer&>);
static_assert(galay::ConstBuffer<const AlignedBuffer&>);
static_assert(!galay::MutableBuffer<const AlignedBuffer&>);

TEST(AlignedBuffer, IsAlignedZeroedAndSized) {
    for (std::size_t align : {512u, 4096u, 65536u}) {
        AlignedBuffer b(1000, align);
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % align, 0u);
        EXPECT_EQ(b.size(), 1000u);
        EXPECT_EQ(b.alignment(), align);
        for (std::byte x : b)
            ASSERT_EQ(x, std::byte{0});
    }
}

TEST(AlignedBuffer, MoveHandsOverTheAllocation) {
    AlignedBuffer a(4096);
    a.span()[7] = std::byte{42};
    std::byte* p = a.data();
    AlignedBuffer b = std::move(a);
    EXPECT_EQ(b.data(), p);
    EXPECT_EQ(b.span()[7], std::byte{42});
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(a.data(), nullptr);
    AlignedBuffer c(512, 512);
    c = std::move(b);
    EXPECT_EQ(c.data(), p);
    EXPECT_EQ(c.alignment(), 4096u);
}

TEST(AlignedBuffer, EmptyAndBadAlignment) {
    AlignedBuffer e;
    EXPECT_TRUE(e.empty());
    EXPECT_EQ(e.span().size(), 0u);
    AlignedBuffer zero(0);
    EXPECT_EQ(zero.data(), nullptr);
    EXPECT_THROW(AlignedBuffer(10, 3), std::invalid_argument);
    EXPECT_THROW(AlignedBuffer(10, 0), std::invalid_argument);
}

TEST(AlignedBuffer, CharsViewsTheSameBytes) {
    AlignedBuffer b(16);
    b.chars()[0] = 'g';
    EXPECT_EQ(b.span()[0], std::byte{'g'});
}
