// detail::ByteWindow, the block behind io::BufReader and io::BufWriter: it starts small and
// grows up to its capacity (the limit), never past it, keeping the live bytes in order.
#include "galay/detail/byte_window.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

using galay::detail::ByteWindow;

namespace {

std::string fill(ByteWindow& w, std::size_t n, char c) {
    std::span<char> room = w.room();
    const std::size_t k = std::min(n, room.size());
    std::memset(room.data(), c, k);
    w.commit(k);
    return std::string(k, c);
}

} // namespace

TEST(ByteWindowTest, StartsUnallocatedThenSmall) {
    ByteWindow w(64 * 1024);
    EXPECT_EQ(w.allocated(), 0u);
    EXPECT_EQ(w.room().size(), ByteWindow::kInitial);
    EXPECT_EQ(w.allocated(), ByteWindow::kInitial);
    EXPECT_EQ(w.capacity(), 64u * 1024);
}

TEST(ByteWindowTest, ACapacityBelowTheInitialBlockIsTheBlock) {
    ByteWindow w(100);
    EXPECT_EQ(w.room().size(), 100u);
    fill(w, 100, 'a');
    EXPECT_TRUE(w.full());
    EXPECT_TRUE(w.room().empty());
    EXPECT_EQ(w.allocated(), 100u);
}

TEST(ByteWindowTest, LiveBytesGrowTheBlockUpToTheCapacityAndKeepTheirOrder) {
    const std::size_t cap = 5 * ByteWindow::kInitial; // not a power of two times the start
    ByteWindow w(cap);
    std::string expect;
    char c = 'a';
    while (!w.full()) {
        const std::size_t before = w.allocated();
        expect += fill(w, 1000, c);
        c = c == 'z' ? 'a' : static_cast<char>(c + 1);
        EXPECT_LE(w.allocated(), cap);
        EXPECT_GE(w.allocated(), before);
    }
    EXPECT_EQ(w.allocated(), cap);
    EXPECT_EQ(w.size(), cap);
    EXPECT_EQ(w.live(), expect);
    EXPECT_TRUE(w.room().empty()); // full: no room, no growth past the limit
}

TEST(ByteWindowTest, AReceiveThatTookAllItsRoomAsksForALargerBlock) {
    ByteWindow w(64 * 1024);
    fill(w, ByteWindow::kInitial, 'x'); // all the room the first block had
    w.consume(w.size());                // even consumed at once
    EXPECT_EQ(w.room().size(), 2 * ByteWindow::kInitial);
    // A partial fill does not.
    fill(w, 10, 'y');
    w.consume(10);
    EXPECT_EQ(w.room().size(), 2 * ByteWindow::kInitial);
}

TEST(ByteWindowTest, RoomForNGrowsWhenTheCapacityAllows) {
    ByteWindow w(16 * 1024);
    fill(w, 100, 'h');
    std::span<char> room = w.room(10'000);
    EXPECT_GE(room.size(), 10'000u);
    EXPECT_EQ(w.live(), std::string(100, 'h'));
    // More than the capacity leaves: all that is left, not more.
    EXPECT_EQ(w.room(100'000).size(), 16u * 1024 - 100);
}

TEST(ByteWindowTest, ConsumedPrefixIsReusedBeforeGrowing) {
    ByteWindow w(64 * 1024);
    fill(w, ByteWindow::kInitial - 100, 'p'); // most of the block
    w.consume(ByteWindow::kInitial - 200);    // 100 live bytes left, near the end
    std::span<char> room = w.room();
    EXPECT_EQ(w.allocated(), ByteWindow::kInitial); // moved to the front, not grown
    EXPECT_EQ(room.size(), ByteWindow::kInitial - 100);
    EXPECT_EQ(w.live(), std::string(100, 'p'));
}

TEST(ByteWindowTest, AppendLargerThanTheBlockGrowsWithinTheCapacity) {
    ByteWindow w(8 * 1024);
    const std::string a(1500, 'a'), b(3000, 'b'), c(4000, 'c');
    EXPECT_TRUE(w.append(a));
    EXPECT_TRUE(w.append(b));  // past the first block: grows
    EXPECT_FALSE(w.append(c)); // past the capacity: refused, nothing copied
    EXPECT_EQ(w.live(), a + b);
    EXPECT_LE(w.allocated(), 8u * 1024);
}

TEST(ByteWindowTest, AnEmptyWindowGivesItsBlockToTheNextWindowOfItsThread) {
    ByteWindow a(64 * 1024), b(64 * 1024);
    (void)fill(a, 100, 'a');
    a.give_back(); // not empty: keeps its block and bytes
    EXPECT_EQ(a.allocated(), ByteWindow::kInitial);
    EXPECT_EQ(a.live(), std::string(100, 'a'));
    const char* block = a.live().data();
    a.consume(100);
    a.give_back();
    EXPECT_EQ(a.allocated(), 0u);
    EXPECT_EQ(a.size(), 0u);
    // The next window to need a block takes the one given back last (in this core's cache).
    EXPECT_EQ(b.room().data(), block);
    EXPECT_EQ(b.allocated(), ByteWindow::kInitial);
    EXPECT_EQ(fill(b, 10, 'b'), std::string(10, 'b'));
    EXPECT_EQ(b.live(), std::string(10, 'b'));
    // And the window that gave its block away gets another when it needs one.
    EXPECT_EQ(fill(a, 5, 'c'), std::string(5, 'c'));
    EXPECT_NE(a.live().data(), block);
    EXPECT_EQ(a.live(), "ccccc");
}

TEST(ByteWindowTest, OnlyInitialBlocksAreGivenBackAndTheSpareStackIsBounded) {
    ByteWindow big(64 * 1024);
    (void)fill(big, ByteWindow::kInitial, 'x'); // fills the block: the next room() grows
    EXPECT_GT(big.room().size(), 0u);
    EXPECT_GT(big.allocated(), ByteWindow::kInitial);
    big.consume(big.size());
    big.give_back(); // a grown block stays with its window
    EXPECT_GT(big.allocated(), ByteWindow::kInitial);

    ByteWindow small(100); // below the initial size
    (void)fill(small, 1, 's');
    small.consume(1);
    small.give_back();
    EXPECT_EQ(small.allocated(), 100u);

    // Many windows giving back at once: the stack keeps a bounded number, and every window
    // still has a whole block of its own (given back or kept) and gets one again.
    std::vector<ByteWindow> many;
    for (int i = 0; i < 100; ++i)
        many.emplace_back(8 * 1024);
    for (ByteWindow& w : many)
        (void)fill(w, 1, 'm');
    std::size_t kept = 0;
    for (ByteWindow& w : many) {
        w.consume(1);
        w.give_back();
        kept += w.allocated() != 0 ? 1 : 0;
    }
    EXPECT_GT(kept, 0u);   // the stack was full for these
    EXPECT_LT(kept, 100u); // and took the others
    for (ByteWindow& w : many)
        EXPECT_EQ(fill(w, 7, 'n'), std::string(7, 'n'));
}
